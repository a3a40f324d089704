package lossy

import (
	"context"
	"fmt"
	"math"
)

// Fill selects how a Transpose estimates a peer's values from a part its
// sender thinned out at rate R (Config.Fill). Each is unbiased: with
// f the receiver's fill (its own values in the reduce-scatter, N times
// them in the allgather) and b a factor fixed before the draw, a packet
// counts b f when it is missing and b f + (v - b f)/(1 - R) when it
// arrived, whose expectation is v; its variance is (v - b f)² R/(1 - R).
// Nothing discarded (R = 0) counts what arrived as it is, and so does the
// reduce-scatter with ErrorFeedback (what was discarded comes later); the
// allgather, whose results are never deferred, uses the Fill either way.
type Fill int

const (
	// FillShrunk (the default) estimates, per peer link, phase and range
	// of packets, the b that minimises the variance, <v, f>/<f, f>, from
	// the packets that arrived in the earlier calls (see docs/discard.md):
	// near 1 where the ranks' values are alike, near 0 where they are
	// independent noise. It starts at 1.
	FillShrunk Fill = iota
	// FillOwn is b = 1: the receiver's own values are a control variate
	// (the behaviour before FillShrunk, bit for bit).
	FillOwn
	// FillNone is b = 0: plain inverse-probability weighting (a missing
	// packet counts nothing, one that arrived v/(1 - R)).
	FillNone
)

var fillNames = [...]string{FillShrunk: "shrunk", FillOwn: "own", FillNone: "none"}

func (f Fill) String() string {
	if f >= 0 && int(f) < len(fillNames) {
		return fillNames[f]
	}
	return fmt.Sprintf("Fill(%d)", int(f))
}

// The FillShrunk estimator's constants (docs/discard.md says how they
// were chosen):
const (
	// fillRangeFloats: a range of packets sharing one b holds at least
	// this many values (ceil(fillRangeFloats/PacketFloats) packets, the
	// last range of a chunk may be shorter): enough for a steady
	// estimate, few enough to follow b where it differs along the vector
	// (a model's layers).
	fillRangeFloats = 256
	// fillGain is the gain of the EWMAs of <v, f> and <f, f> over calls.
	// They are EWMAs of sums, not of each call's ratio, so a call weighs
	// as much as its values are large, as its share of the squared error
	// does.
	fillGain = 0.5
	// fillMin and fillMax clamp b. Below 0 pays only where the ranks'
	// values are opposed call after call and costs where the sign
	// changes; above 1 pays where the ranks' values differ in scale.
	fillMin, fillMax = 0, 2
)

// fillRange is the FillShrunk state of one range of packets of one peer
// link in one phase.
type fillRange struct {
	vf, ff float64 // EWMAs of sum(v f) and sum(f f) over the packets that arrived
	b      float32 // the factor the next call uses
}

// learn folds one call's sums over the packets that arrived into the
// EWMAs and sets the next call's b. A call where none arrived or the fill
// was zero (ff = 0) says nothing about b, and a non-finite sum (data
// holding Inf or NaN) would poison the state: both are skipped. A
// non-finite or zero-denominator ratio keeps the previous b.
func (e *fillRange) learn(vf, ff float64) {
	if ff == 0 || math.IsNaN(vf) || math.IsInf(vf, 0) || math.IsInf(ff, 0) || math.IsNaN(ff) {
		return
	}
	e.vf += fillGain * (vf - e.vf)
	e.ff += fillGain * (ff - e.ff)
	b := e.vf / e.ff
	if e.ff > 0 && !math.IsNaN(b) && !math.IsInf(b, 0) {
		e.b = float32(min(fillMax, max(fillMin, b)))
	}
}

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
	cfg        Config

	chunks             // the geometry of the current call (n: the vector's length)
	own    []float32   // this rank's chunk: the estimate of its sum
	out    []float32   // the result in sum space
	resid  [][]float32 // error feedback: per owner, what was discarded of its chunk
	sendPk [][]byte
	recvd  []stageOf // the stages the last Allreduce received
	whole  bool
	st     Stats
	// FillShrunk state, per peer rank (nil for this rank): of this rank's
	// chunk as the peer contributes it (con), and of the peer's chunk as
	// it sends the result (res); fillPk is the packets per range.
	con, res [][]fillRange
	fillPk   int
}

// stageOf names a stage received from a rank.
type stageOf struct {
	from   int
	number uint64
}

// NewTranspose returns rank's side (0 <= rank < size) of a transpose
// allreduce over t. cfg is as for a Ring.
func NewTranspose(rank, size int, t MeshTransport, cfg Config) (*Transpose, error) {
	if err := checkLossy(rank, size, t == nil, "MeshTransport", &cfg); err != nil {
		return nil, err
	}
	return &Transpose{rank: rank, size: size, t: t, cfg: cfg, fillPk: (fillRangeFloats + cfg.PacketFloats - 1) / cfg.PacketFloats}, nil
}

// Stats returns the counters of the Allreduce calls so far.
func (r *Transpose) Stats() Stats { return r.st }

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
		r.chunks = chunks{n: len(x), size: r.size, pf: r.cfg.PacketFloats}
		r.out = make([]float32, r.n)
		r.resid = make([][]float32, r.size)
		r.con, r.res = nil, nil
		if r.cfg.Fill == FillShrunk {
			r.con, r.res = make([][]fillRange, r.size), make([][]fillRange, r.size)
			for p := range r.size {
				if p != r.rank {
					r.con[p] = r.newFill(r.rank)
					r.res[p] = r.newFill(p)
				}
			}
		}
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
	if r.cfg.Mean {
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
		pk[j] = appendPacket(pk[j][:0], uint32(phi-plo), vals[plo-lo:phi-lo])
	}
	disc, err := r.t.Send(ctx, to, pk, part, 2, r.whole)
	r.st.PacketsSent += uint64(np)
	if disc != nil && len(disc) != np {
		return nil, fmt.Errorf("lossy: transport reported %d discard marks for %d packets", len(disc), np)
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
		if len(p) != packetSize(hi-lo) || packetHead(p) != uint32(hi-lo) {
			return 0, fmt.Errorf("%w: rank %d: packet %d of %d bytes, want %d", ErrPeer, from, j, len(p), packetSize(hi-lo))
		}
	}
	if missing == np {
		return 0, fmt.Errorf("%w: rank %d sent none of %d packets (a stage keeps at least one)", ErrPeer, from, np)
	}
	r.st.PacketsMissing += uint64(missing)
	r.st.PacketsReceived += uint64(np - missing)
	return float32(missing) / float32(np), nil
}

// newFill returns the FillShrunk state of chunk c's packet ranges, every
// b at 1 (FillOwn's) until a range has data.
func (r *Transpose) newFill(c int) []fillRange {
	f := make([]fillRange, (r.npk(c)+r.fillPk-1)/r.fillPk)
	for i := range f {
		f[i].b = 1
	}
	return f
}

// fillFactor returns b for range g of est under the configured Fill.
func (r *Transpose) fillFactor(est []fillRange, g int) float32 {
	switch r.cfg.Fill {
	case FillOwn:
		return 1
	case FillNone:
		return 0
	}
	return est[g].b
}

// addContribution adds rank from's values v of this rank's chunk to the
// estimate of its sum. Each packet was discarded with probability R (its
// share of the part: every packet is equally likely to go, see
// discard.Select). With f this rank's own values v_o and b the packet's
// range's factor (Fill), a missing packet counts b f and one that arrived
// (v - R b f)/(1 - R) = b f + (v - b f)/(1 - R): either way the expected
// contribution is v, whatever the values, for any b fixed before the draw
// (FillShrunk's comes from the earlier calls only; this call's packets
// update it after it was used). With error feedback a discarded
// contribution arrives with a later call instead, so what arrived counts
// as it is, what did not counts nothing now, and b is neither used nor
// learnt.
func (r *Transpose) addContribution(from int, st Received, x []float32, ef bool) error {
	R, err := r.check(from, r.rank, st)
	if err != nil {
		return err
	}
	lo, _ := r.chunk(r.rank)
	k := 1 / (1 - R)
	var est []fillRange // FillShrunk's state, else nil
	if r.con != nil {
		est = r.con[from]
	}
	// An AllreduceWhole call is not learnt from: it carries what must be
	// exact, such as the model's parameters, whose ranks agree far more
	// than the lossy calls' gradients do; its b would not fit them.
	learn := est != nil && !ef && !r.whole
	for g0 := 0; g0 < len(st.Packets); g0 += r.fillPk {
		g := g0 / r.fillPk
		b := r.fillFactor(est, g)
		var vf, ff float64
		for j := g0; j < min(len(st.Packets), g0+r.fillPk); j++ {
			p := st.Packets[j]
			plo, phi := r.span(r.rank, j)
			own := x[plo:phi]
			acc := r.own[plo-lo : phi-lo]
			switch {
			case p == nil && (ef || b == 0):
			case p == nil:
				for i, v := range own {
					acc[i] += b * v
				}
			case ef || R == 0:
				for i := range acc {
					acc[i] += packetValue(p, i)
				}
			default:
				for i, v := range own {
					acc[i] += (packetValue(p, i) - R*b*v) * k
				}
			}
			if p != nil && learn {
				for i, v := range own {
					f := float64(v)
					vf += float64(packetValue(p, i)) * f
					ff += f * f
				}
			}
		}
		if learn {
			est[g].learn(vf, ff)
		}
	}
	return nil
}

// takeResult writes rank from's result S for its chunk into the result.
// The fill is this rank's own estimate of the sum, f = N v_r (its own
// values times N, sum space), times the packet's range's factor b (Fill,
// learnt as in addContribution on this link's results): a missing packet
// counts b f and one that arrived (S - R b f)/(1 - R), so that each
// rank's result is unbiased too. Error feedback changes nothing here: a
// result is never deferred.
func (r *Transpose) takeResult(from int, st Received, x []float32) error {
	R, err := r.check(from, from, st)
	if err != nil {
		return err
	}
	N := float32(r.size)
	k := 1 / (1 - R)
	var est []fillRange
	if r.res != nil {
		est = r.res[from]
	}
	learn := est != nil && !r.whole // as in addContribution
	for g0 := 0; g0 < len(st.Packets); g0 += r.fillPk {
		g := g0 / r.fillPk
		// c = b N: for FillOwn exactly N, so that R*c*v is the
		// R*N*v of before, to the bit.
		c := r.fillFactor(est, g) * N
		var vf, ff float64
		for j := g0; j < min(len(st.Packets), g0+r.fillPk); j++ {
			p := st.Packets[j]
			plo, phi := r.span(from, j)
			own, out := x[plo:phi], r.out[plo:phi]
			switch {
			case p == nil && c == 0:
				clear(out)
			case p == nil:
				for i, v := range own {
					out[i] = c * v
				}
			case R == 0:
				for i := range out {
					out[i] = packetValue(p, i)
				}
			default:
				for i, v := range own {
					out[i] = (packetValue(p, i) - R*c*v) * k
				}
			}
			if p != nil && learn {
				for i, v := range own {
					f := float64(N * v)
					vf += float64(packetValue(p, i)) * f
					ff += f * f
				}
			}
		}
		if learn {
			est[g].learn(vf, ff)
		}
	}
	return nil
}
