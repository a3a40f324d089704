package comm

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
)

// MeshTransport moves the stages of a transpose allreduce between one rank
// and each of the others. Calls for different peers may overlap (one
// goroutine sends while another receives); calls for one peer and one
// direction do not.
type MeshTransport interface {
	// Send sends part (of parts) of this rank's stage to rank to and says
	// which packets were discarded (nil: none). A Transpose call is one
	// stage of two parts per peer: the reduce-scatter contribution, then
	// the allgather result. A whole stage must arrive complete and is not
	// one the discard controller learns from.
	Send(ctx context.Context, to int, packets [][]byte, part, parts int, whole bool) (discarded []bool, err error)
	// Recv receives the next part of a stage from rank from.
	Recv(ctx context.Context, from int) (Received, error)
	// ReportQuality tells rank from the quality of the result its stage
	// helped compute (higher is better).
	ReportQuality(ctx context.Context, from int, stage uint64, q float64) error
}

// Transpose is one rank's side of a transpose (direct) loss-tolerant
// allreduce: each rank owns one chunk of the vector; every rank sends its
// values of each chunk straight to the chunk's owner (reduce-scatter),
// and every owner sends its result straight to every rank (allgather).
// A discarded packet removes exactly one rank's values of one packet,
// never a partial sum of several, and the receiver corrects for it
// without bias (see the package documentation and docs/discard.md).
type Transpose struct {
	rank, size int
	t          MeshTransport
	cfg        RingConfig

	n      int
	own    []float32   // this rank's chunk: the estimate of its sum
	out    []float32   // the result in sum space
	resid  [][]float32 // error feedback: per owner, what was discarded of its chunk
	sendPk [][]byte
	recvd  []stageOf // the stages the last Allreduce received
	whole  bool
	st     RingStats
}

// stageOf names a stage received from a rank.
type stageOf struct {
	from   int
	number uint64
}

// NewTranspose returns rank's side (0 <= rank < size) of a transpose
// allreduce over t. cfg is as for a Ring.
func NewTranspose(rank, size int, t MeshTransport, cfg RingConfig) (*Transpose, error) {
	if err := checkLossy(rank, size, t == nil, "MeshTransport", &cfg); err != nil {
		return nil, err
	}
	return &Transpose{rank: rank, size: size, t: t, cfg: cfg}, nil
}

// Stats returns the counters of the Allreduce calls so far.
func (r *Transpose) Stats() RingStats { return r.st }

// ReportQuality reports q, for the stages the last Allreduce received, to
// the ranks that sent them.
func (r *Transpose) ReportQuality(ctx context.Context, q float64) error {
	for _, s := range r.recvd {
		if err := r.t.ReportQuality(ctx, s.from, s.number, q); err != nil {
			return err
		}
	}
	return nil
}

// chunk returns the range of chunk c (owned by rank c).
func (r *Transpose) chunk(c int) (lo, hi int) { return c * r.n / r.size, (c + 1) * r.n / r.size }

// npk returns the number of packets of chunk c (at least one).
func (r *Transpose) npk(c int) int {
	lo, hi := r.chunk(c)
	return max(1, (hi-lo+r.cfg.PacketFloats-1)/r.cfg.PacketFloats)
}

// span returns the values of packet j of chunk c.
func (r *Transpose) span(c, j int) (lo, hi int) {
	clo, chi := r.chunk(c)
	lo = min(chi, clo+j*r.cfg.PacketFloats)
	return lo, min(chi, lo+r.cfg.PacketFloats)
}

// Allreduce replaces x, on every rank, with the reduction of all ranks' x.
// Every rank must call it with vectors of the same length.
func (r *Transpose) Allreduce(ctx context.Context, x []float32) error {
	r.st.Calls++
	r.whole = false
	return r.allreduce(ctx, x)
}

// AllreduceWhole is Allreduce with nothing discarded (for what must be
// exact, such as re-synchronising model replicas). It leaves
// ReportQuality to the last Allreduce.
func (r *Transpose) AllreduceWhole(ctx context.Context, x []float32) error {
	r.st.Calls++
	saved := r.recvd
	r.recvd, r.whole = nil, true
	err := r.allreduce(ctx, x)
	r.recvd, r.whole = saved, false
	return err
}

func (r *Transpose) allreduce(ctx context.Context, x []float32) error {
	if r.size == 1 {
		return nil
	}
	if r.n != len(x) || r.out == nil {
		r.n = len(x)
		r.out = make([]float32, r.n)
		r.resid = make([][]float32, r.size)
	}
	r.recvd = r.recvd[:0]
	N := r.size
	lo, hi := r.chunk(r.rank)
	r.own = append(r.own[:0], x[lo:hi]...)
	ef := r.cfg.ErrorFeedback && !r.whole
	// Reduce-scatter: x's chunk c goes to rank c; this rank's chunk
	// collects the others' values of it.
	err := r.exchange(ctx, 0, func(ctx context.Context, to int) error {
		return r.sendContribution(ctx, to, x, ef)
	}, func(from int, st Received) error {
		return r.addContribution(from, st, x, ef)
	})
	if err != nil {
		return err
	}
	// Allgather: this rank's chunk goes to every rank.
	copy(r.out[lo:hi], r.own)
	err = r.exchange(ctx, 1, func(ctx context.Context, to int) error {
		_, err := r.send(ctx, to, r.rank, r.own, lo, 1)
		return err
	}, func(from int, st Received) error {
		return r.takeResult(from, st, x)
	})
	if err != nil {
		return err
	}
	scale := float32(1)
	if r.cfg.Op == Mean {
		scale = 1 / float32(N)
	}
	for i, v := range r.out {
		x[i] = v * scale
	}
	return nil
}

// exchange runs one phase: send(ctx, to) for every other rank in one
// goroutine while this one receives part part from every other rank and
// hands it to recv. The peers are taken in rank order starting after this
// rank, so that the ranks do not all send to the same one first.
func (r *Transpose) exchange(ctx context.Context, part int, send func(context.Context, int) error, recv func(int, Received) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sent := make(chan error, 1)
	go func() {
		for k := 1; k < r.size; k++ {
			if err := send(ctx, (r.rank+k)%r.size); err != nil {
				cancel()
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	var rerr error
	for k := 1; k < r.size && rerr == nil; k++ {
		from := (r.rank - k + r.size) % r.size
		st, err := r.t.Recv(ctx, from)
		if err == nil {
			if part == 0 {
				r.noteStage(from, st.Number)
			}
			err = recv(from, st)
		}
		if err != nil {
			rerr = err
			cancel()
		}
	}
	serr := <-sent
	if rerr != nil {
		return rerr
	}
	return serr
}

func (r *Transpose) noteStage(from int, number uint64) {
	if r.whole {
		return
	}
	r.recvd = append(r.recvd, stageOf{from: from, number: number})
}

// sendContribution sends this rank's values of chunk to (plus what error
// feedback kept of them) to rank to.
func (r *Transpose) sendContribution(ctx context.Context, to int, x []float32, ef bool) error {
	lo, hi := r.chunk(to)
	vals := x[lo:hi]
	if ef {
		if len(r.resid[to]) != hi-lo {
			r.resid[to] = make([]float32, hi-lo)
		}
		res := r.resid[to]
		for i, v := range vals {
			res[i] += v
		}
		vals = res
	}
	disc, err := r.send(ctx, to, to, vals, lo, 0)
	if err != nil || !ef {
		return err
	}
	// What was sent is gone; what was discarded waits for the next call.
	for j := range r.npk(to) {
		if disc != nil && disc[j] {
			r.st.Deferred++
			continue
		}
		plo, phi := r.span(to, j)
		clear(vals[plo-lo : phi-lo])
	}
	return nil
}

// send sends vals (chunk c of the vector, starting at index lo) to rank
// to as part part of this call's stage: per packet, its number of values
// then the values.
func (r *Transpose) send(ctx context.Context, to, c int, vals []float32, lo, part int) ([]bool, error) {
	np := r.npk(c)
	if cap(r.sendPk) < np {
		r.sendPk = make([][]byte, np)
	}
	pk := r.sendPk[:np]
	for j := range np {
		plo, phi := r.span(c, j)
		b := pk[j][:0]
		b = binary.LittleEndian.AppendUint32(b, uint32(phi-plo))
		for _, v := range vals[plo-lo : phi-lo] {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		pk[j] = b
	}
	disc, err := r.t.Send(ctx, to, pk, part, 2, r.whole)
	r.st.PacketsSent += uint64(np)
	if disc != nil && len(disc) != np {
		return nil, fmt.Errorf("comm: transport reported %d discard marks for %d packets", len(disc), np)
	}
	for _, d := range disc {
		if d {
			r.st.PacketsDropped++
		}
	}
	return disc, err
}

// check validates a received part for chunk c and returns the fraction
// of its packets the sender discarded.
func (r *Transpose) check(from, c int, st Received) (float32, error) {
	np := r.npk(c)
	if len(st.Packets) != np {
		return 0, fmt.Errorf("%w: rank %d sent a part of %d packets for a chunk of %d", ErrPeer, from, len(st.Packets), np)
	}
	missing := 0
	for j, p := range st.Packets {
		if p == nil {
			missing++
			continue
		}
		lo, hi := r.span(c, j)
		if len(p) != 4+4*(hi-lo) || binary.LittleEndian.Uint32(p) != uint32(hi-lo) {
			return 0, fmt.Errorf("%w: rank %d: packet %d of %d bytes, want %d", ErrPeer, from, j, len(p), 4+4*(hi-lo))
		}
	}
	if missing == np {
		return 0, fmt.Errorf("%w: rank %d sent none of %d packets (a stage keeps at least one)", ErrPeer, from, np)
	}
	r.st.PacketsMissing += uint64(missing)
	r.st.PacketsReceived += uint64(np - missing)
	return float32(missing) / float32(np), nil
}

// addContribution adds rank from's values of this rank's chunk to the
// estimate of its sum. A packet the sender discarded with probability R
// (its share of the part: every packet is equally likely to go, see
// discard.Select) is filled with this rank's own values v_o, and one
// that arrived counts (v - R v_o) / (1 - R): either way the expected
// contribution is v, whatever the values. With error feedback a
// discarded contribution arrives with a later call instead, so what
// arrived counts as it is and what did not counts nothing now.
func (r *Transpose) addContribution(from int, st Received, x []float32, ef bool) error {
	R, err := r.check(from, r.rank, st)
	if err != nil {
		return err
	}
	lo, _ := r.chunk(r.rank)
	for j, p := range st.Packets {
		plo, phi := r.span(r.rank, j)
		own := x[plo:phi]
		acc := r.own[plo-lo : phi-lo]
		switch {
		case p == nil && ef:
		case p == nil:
			for i, v := range own {
				acc[i] += v
			}
		case ef || R == 0:
			for i := range acc {
				acc[i] += math.Float32frombits(binary.LittleEndian.Uint32(p[4+4*i:]))
			}
		default:
			k := 1 / (1 - R)
			for i, v := range own {
				acc[i] += (math.Float32frombits(binary.LittleEndian.Uint32(p[4+4*i:])) - R*v) * k
			}
		}
	}
	return nil
}

// takeResult writes rank from's result for its chunk into the result. A
// discarded packet is filled with this rank's own estimate, N times its
// own values (sum space), and one that arrived is corrected as in
// addContribution, so that each rank's result is unbiased too.
func (r *Transpose) takeResult(from int, st Received, x []float32) error {
	R, err := r.check(from, from, st)
	if err != nil {
		return err
	}
	N := float32(r.size)
	for j, p := range st.Packets {
		plo, phi := r.span(from, j)
		own, out := x[plo:phi], r.out[plo:phi]
		switch {
		case p == nil:
			for i, v := range own {
				out[i] = N * v
			}
		case R == 0:
			for i := range out {
				out[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4+4*i:]))
			}
		default:
			k := 1 / (1 - R)
			for i, v := range own {
				out[i] = (math.Float32frombits(binary.LittleEndian.Uint32(p[4+4*i:])) - R*N*v) * k
			}
		}
	}
	return nil
}
