package lossy

import (
	"context"
	"errors"
	"fmt"
)

// DefaultPacketFloats is the default number of values per packet (4 KiB).
const DefaultPacketFloats = 1024

// estFlag marks, in a packet's count, an allgather fill: a partial sum to
// divide by its count rather than a chunk owner's result.
const estFlag = 1 << 31

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("lossy: invalid config")

// ErrPeer is wrapped by errors about what a neighbour sent.
var ErrPeer = errors.New("lossy: bad stage from a peer")

// Received is one part of a stage as a RingTransport delivers it.
type Received struct {
	// Number identifies the stage for ReportQuality.
	Number uint64
	// Packets has one entry per packet of the stage; nil where the sender
	// discarded it.
	Packets [][]byte
}

// RingTransport moves stages between neighbouring ranks of a ring.
type RingTransport interface {
	// Send sends part (of parts) of a stage to the next rank and says
	// which packets were discarded (nil: none). An Allreduce is one stage
	// of 2(N-1) parts, one per hop. A whole stage must arrive complete and
	// is not one the discard controller learns from.
	Send(ctx context.Context, packets [][]byte, part, parts int, whole bool) (discarded []bool, err error)
	// Recv receives the next part of a stage from the previous rank.
	Recv(ctx context.Context) (Received, error)
	// ReportQuality tells the previous rank the quality of the result its
	// stage helped compute (higher is better).
	ReportQuality(ctx context.Context, stage uint64, q float64) error
}

// Config configures a Ring or a Transpose. The zero value of every field
// means its default.
type Config struct {
	// PacketFloats is the number of values per packet, 1..1<<20; 0 means
	// DefaultPacketFloats.
	PacketFloats int
	// Mean divides the sum by the number of ranks (a mean, not a sum).
	Mean bool
	// ErrorFeedback keeps discarded reduce-scatter packets and adds them
	// to the next Allreduce (see the package documentation).
	ErrorFeedback bool
	// Ring makes comm's LossTolerant run a Ring instead of a Transpose: one
	// neighbour each way instead of every peer at once, but a packet its
	// reduce-scatter discards holds the partial sum of several ranks, so
	// its results are biased wherever the ranks' inputs differ (on
	// non-IID data; TestRingBiasedOnNonIID). Kept for comparison.
	// NewRing and NewTranspose ignore it.
	Ring bool
	// Fill is how a Transpose estimates a discarded packet's values:
	// FillShrunk (the default) shrinks the receiver's own values by a
	// factor learnt per peer and range from the earlier calls, FillOwn
	// uses them as they are, FillNone not at all (plain inverse-
	// probability weighting); all are unbiased (see Fill). A Ring
	// ignores it.
	Fill Fill
}

// validate fills the defaults of c in and checks it; the error names the
// field, its value and what is allowed.
func (c *Config) validate() error {
	if c.PacketFloats == 0 {
		c.PacketFloats = DefaultPacketFloats
	}
	if c.PacketFloats < 1 || c.PacketFloats > 1<<20 {
		return fmt.Errorf("%w: PacketFloats = %d out of range; allowed: 1..1048576 (0 = default %d)", ErrConfig, c.PacketFloats, DefaultPacketFloats)
	}
	if c.Fill < FillShrunk || c.Fill > FillNone {
		return fmt.Errorf("%w: Fill = %d out of range; allowed: FillShrunk (0), FillOwn (1) or FillNone (2)", ErrConfig, int(c.Fill))
	}
	return nil
}

// Stats counts what the Allreduce calls of a Ring or a Transpose did.
type Stats struct {
	Calls           uint64
	PacketsSent     uint64 // packets handed to the transport
	PacketsDropped  uint64 // of those, discarded by the transport
	PacketsReceived uint64
	PacketsMissing  uint64 // packets of received stages that were discarded upstream
	Deferred        uint64 // discarded packets kept for error feedback
}

// Ring is one rank's side of a ring allreduce.
type Ring struct {
	rank, size int
	t          RingTransport
	cfg        Config

	chunks           // the geometry of the current buffers (n: the vector's length)
	acc    []float32 // partial sums (reduce-scatter) then results
	cnt    []uint32  // contributions per packet, indexed by global packet
	est    []bool    // the packet holds an allgather fill, not the owner's result
	first  []int     // first global packet of each chunk
	resid  [][]float32
	rcnt   [][]uint32
	pkts   [][]byte
	stages []uint64
	whole  bool // the call in progress must arrive whole
	st     Stats
}

// NewRing returns rank's side (0 <= rank < size) of a ring over t.
func NewRing(rank, size int, t RingTransport, cfg Config) (*Ring, error) {
	if err := checkLossy(rank, size, t == nil, "RingTransport", &cfg); err != nil {
		return nil, err
	}
	return &Ring{rank: rank, size: size, t: t, cfg: cfg}, nil
}

// checkLossy validates the arguments of NewRing and NewTranspose and fills
// cfg's defaults in; noTransport says the transport (named kind) is nil.
func checkLossy(rank, size int, noTransport bool, kind string, cfg *Config) error {
	if size < 1 || size > 1<<16 {
		return fmt.Errorf("%w: size = %d out of range; allowed: 1..65536", ErrConfig, size)
	}
	if rank < 0 || rank >= size {
		return fmt.Errorf("%w: rank = %d out of range; allowed: 0..%d", ErrConfig, rank, size-1)
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	if size > 1 && noTransport {
		return fmt.Errorf("%w: nil %s for %d ranks", ErrConfig, kind, size)
	}
	return nil
}

// Stats returns the ring's counters.
func (r *Ring) Stats() Stats { return r.st }

// Stages returns the numbers of the stages received by the last Allreduce
// (one, unless the transport numbers parts separately).
func (r *Ring) Stages() []uint64 { return r.stages }

// ReportQuality reports q for the stages the last Allreduce received.
func (r *Ring) ReportQuality(ctx context.Context, q float64) error {
	for _, s := range r.stages {
		if err := r.t.ReportQuality(ctx, s, q); err != nil {
			return err
		}
	}
	return nil
}

func mod(a, n int) int { return ((a % n) + n) % n }

func (r *Ring) resize(n int) {
	if r.n == n && r.acc != nil {
		return
	}
	r.chunks = chunks{n: n, size: r.size, pf: r.cfg.PacketFloats}
	r.acc = make([]float32, n)
	r.first = make([]int, r.size+1)
	for c := range r.size {
		r.first[c+1] = r.first[c] + r.npk(c)
	}
	r.cnt = make([]uint32, r.first[r.size])
	r.est = make([]bool, r.first[r.size])
	r.resid = make([][]float32, r.size-1)
	r.rcnt = make([][]uint32, r.size-1)
}

// Allreduce replaces x, on every rank, with the reduction of all ranks' x.
// Every rank must call it with vectors of the same length.
func (r *Ring) Allreduce(ctx context.Context, x []float32) error {
	r.st.Calls++
	r.stages = r.stages[:0]
	r.whole = false
	return r.allreduce(ctx, x)
}

// AllreduceWhole is Allreduce with nothing discarded, whatever the
// transport's rate (for what must be exact, such as re-synchronising
// model replicas). It leaves Stages, and so ReportQuality, to the last
// Allreduce.
func (r *Ring) AllreduceWhole(ctx context.Context, x []float32) error {
	r.st.Calls++
	saved := r.stages
	r.stages, r.whole = nil, true
	err := r.allreduce(ctx, x)
	r.stages, r.whole = saved, false
	return err
}

func (r *Ring) allreduce(ctx context.Context, x []float32) error {
	if r.size == 1 {
		return nil
	}
	r.resize(len(x))
	copy(r.acc, x)
	for i := range r.cnt {
		r.cnt[i] = 1
	}
	clear(r.est)
	N := r.size
	// Reduce-scatter: after hop k, this rank holds the partial sum of
	// chunk (rank-k-1) over k+2 ranks.
	for k := 0; k < N-1; k++ {
		sc, rc := mod(r.rank-k, N), mod(r.rank-k-1, N)
		// Error feedback belongs to the lossy calls: a whole call
		// neither takes in what they kept nor discards anything.
		ef := r.cfg.ErrorFeedback && !r.whole
		if ef {
			r.addResidual(k, sc)
		}
		disc, err := r.send(ctx, sc, k)
		if err != nil {
			return err
		}
		if ef {
			r.keepResidual(k, sc, disc)
		}
		if err := r.recv(ctx, rc, x, true); err != nil {
			return err
		}
	}
	// Allgather: pass the finished chunks around.
	for k := 0; k < N-1; k++ {
		sc, rc := mod(r.rank+1-k, N), mod(r.rank-k, N)
		if _, err := r.send(ctx, sc, N-1+k); err != nil {
			return err
		}
		if err := r.recv(ctx, rc, x, false); err != nil {
			return err
		}
	}
	r.finish(x)
	return nil
}

// addResidual adds what hop k discarded last time to chunk c.
func (r *Ring) addResidual(k, c int) {
	if r.resid[k] == nil {
		return
	}
	lo, hi := r.chunk(c)
	if len(r.resid[k]) != hi-lo {
		r.resid[k], r.rcnt[k] = nil, nil
		return
	}
	for i, v := range r.resid[k] {
		r.acc[lo+i] += v
	}
	for j, n := range r.rcnt[k] {
		r.cnt[r.first[c]+j] += n
	}
	r.resid[k], r.rcnt[k] = nil, nil
}

// keepResidual keeps the packets of chunk c that hop k discarded.
func (r *Ring) keepResidual(k, c int, disc []bool) {
	if disc == nil {
		return
	}
	lo, hi := r.chunk(c)
	r.resid[k] = make([]float32, hi-lo)
	r.rcnt[k] = make([]uint32, r.npk(c))
	for j, d := range disc {
		if !d {
			continue
		}
		plo, phi := r.span(c, j)
		copy(r.resid[k][plo-lo:phi-lo], r.acc[plo:phi])
		r.rcnt[k][j] = r.cnt[r.first[c]+j]
		r.st.Deferred++
	}
}

// send sends chunk c as part hop of the call's stage: per packet, its
// count then its values.
func (r *Ring) send(ctx context.Context, c, hop int) ([]bool, error) {
	np := r.npk(c)
	r.pkts = r.pkts[:0]
	for j := range np {
		lo, hi := r.span(c, j)
		n := r.cnt[r.first[c]+j]
		if r.est[r.first[c]+j] {
			n |= estFlag
		}
		r.pkts = append(r.pkts, appendPacket(make([]byte, 0, packetSize(hi-lo)), n, r.acc[lo:hi]))
	}
	disc, err := r.t.Send(ctx, r.pkts, hop, 2*(r.size-1), r.whole)
	r.st.PacketsSent += uint64(np)
	for _, d := range disc {
		if d {
			r.st.PacketsDropped++
		}
	}
	if disc != nil && len(disc) != np {
		return nil, fmt.Errorf("lossy: transport reported %d discard marks for %d packets", len(disc), np)
	}
	return disc, err
}

// recv receives chunk c. In the reduce-scatter (reduce) a packet's values
// are added to this rank's own x, in the allgather they replace the
// partial sums.
func (r *Ring) recv(ctx context.Context, c int, x []float32, reduce bool) error {
	st, err := r.t.Recv(ctx)
	if err != nil {
		return err
	}
	if len(r.stages) == 0 || r.stages[len(r.stages)-1] != st.Number {
		r.stages = append(r.stages, st.Number)
	}
	np := r.npk(c)
	if len(st.Packets) != np {
		return fmt.Errorf("%w: stage of %d packets for a chunk of %d", ErrPeer, len(st.Packets), np)
	}
	for j, p := range st.Packets {
		lo, hi := r.span(c, j)
		g := r.first[c] + j
		if p == nil {
			// Reduce-scatter: only this rank's own contribution is
			// left. Allgather: keep the partial sum this rank made of
			// the chunk in the reduce-scatter (its own contribution and
			// those that reached it), the best estimate it has.
			r.st.PacketsMissing++
			if reduce {
				copy(r.acc[lo:hi], x[lo:hi])
				r.cnt[g] = 1
			} else {
				r.est[g] = true
			}
			continue
		}
		r.st.PacketsReceived++
		if len(p) != packetSize(hi-lo) {
			return fmt.Errorf("%w: packet %d of %d bytes, want %d", ErrPeer, j, len(p), packetSize(hi-lo))
		}
		n := packetHead(p)
		est := n&estFlag != 0
		n &^= estFlag
		if n == 0 || n > 1<<30 || (est && reduce) {
			return fmt.Errorf("%w: packet %d counts %d contributions", ErrPeer, j, n)
		}
		if reduce {
			for i := lo; i < hi; i++ {
				r.acc[i] = packetValue(p, i-lo) + x[i]
			}
			r.cnt[g] = n + 1
		} else {
			for i := lo; i < hi; i++ {
				r.acc[i] = packetValue(p, i-lo)
			}
			r.cnt[g] = n
			r.est[g] = est
		}
	}
	return nil
}

// finish writes the results into x, scaled by the contributions that
// arrived.
func (r *Ring) finish(x []float32) {
	N := uint32(r.size)
	for c := range r.size {
		for j := range r.npk(c) {
			lo, hi := r.span(c, j)
			g := r.first[c] + j
			n := r.cnt[g]
			if r.cfg.ErrorFeedback && !r.whole && !r.est[g] {
				// What was discarded comes with a later call: divide by
				// N, not by what arrived, so nothing is counted twice.
				n = N
			}
			switch {
			case r.cfg.Mean:
				d := float32(n)
				for i := lo; i < hi; i++ {
					x[i] = r.acc[i] / d
				}
			case n == N:
				copy(x[lo:hi], r.acc[lo:hi])
			default:
				s := float32(N) / float32(n)
				for i := lo; i < hi; i++ {
					x[i] = r.acc[i] * s
				}
			}
		}
	}
}

// Allreducer is a Ring or a Transpose: one rank's side of a loss-tolerant
// allreduce.
type Allreducer interface {
	// Allreduce replaces x, on every rank, with the reduction of all
	// ranks' x; every rank calls it with vectors of the same length.
	Allreduce(ctx context.Context, x []float32) error
	// AllreduceWhole is Allreduce with nothing discarded.
	AllreduceWhole(ctx context.Context, x []float32) error
	// ReportQuality reports the quality of the last Allreduce's result
	// (higher is better) to the ranks whose discard controllers made it.
	ReportQuality(ctx context.Context, q float64) error
	// Stats returns the counters of the calls so far.
	Stats() Stats
}

var (
	_ Allreducer = (*Ring)(nil)
	_ Allreducer = (*Transpose)(nil)
)
