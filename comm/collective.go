package comm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/comm/internal/coll"
	"github.com/multirail/multirail/lossy"
)

// Number is the element type of the collectives. Other types (bool,
// float16, bfloat16) go through the Bytes functions with a DType.
type Number interface {
	~float32 | ~float64 | ~int32 | ~int64 | ~int8 | ~uint8
}

// Collective names a collective operation (for Config.Algorithms, Stats
// and errors).
type Collective = coll.Collective

// The collectives.
const (
	CollBarrier       = coll.CollBarrier
	CollBcast         = coll.CollBcast
	CollReduce        = coll.CollReduce
	CollAllreduce     = coll.CollAllreduce
	CollAllgather     = coll.CollAllgather
	CollReduceScatter = coll.CollReduceScatter
	CollAlltoall      = coll.CollAlltoall
	CollGather        = coll.CollGather
	CollScatter       = coll.CollScatter
	CollAlltoallv     = coll.CollAlltoallv
)

// Algo names a collective algorithm; AlgoAuto chooses by message size and
// number of ranks (docs/comm.md has the table and the measured
// thresholds).
type Algo = coll.Algo

// The algorithms. Algorithms(c) lists those a collective offers.
const (
	AlgoAuto              = coll.Auto
	AlgoRecursiveDoubling = coll.RecursiveDoubling
	AlgoRing              = coll.Ring
	AlgoBinomial          = coll.Binomial
	AlgoBruck             = coll.Bruck
	AlgoPairwise          = coll.Pairwise
	AlgoLinear            = coll.Linear
	AlgoRabenseifner      = coll.Rabenseifner
	AlgoScatterAllgather  = coll.ScatterAllgather
	AlgoDissemination     = coll.Dissemination
	AlgoRecursiveHalving  = coll.RecursiveHalving
)

// Thresholds are the sizes at which AlgoAuto switches algorithm.
type Thresholds = coll.Thresholds

// Algorithms returns the algorithms collective c offers.
func Algorithms(c Collective) []Algo { return coll.Algorithms(c) }

// ParseAlgo parses an algorithm name ("ring", "recursive-doubling", ...).
// The error wraps ErrConfig.
func ParseAlgo(name string) (Algo, error) {
	a, err := coll.ParseAlgo(name)
	if err != nil {
		return a, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return a, nil
}

// ParseCollective parses a collective name ("allreduce", "reduce-scatter",
// ...). The error wraps ErrConfig.
func ParseCollective(name string) (Collective, error) {
	c, err := coll.ParseCollective(name)
	if err != nil {
		return c, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return c, nil
}

// ChooseAlgo returns the algorithm AlgoAuto picks for collective c among
// size ranks with the given message size in bytes (what Thresholds
// measures for c); zero fields of th mean MeasuredThresholds'.
func ChooseAlgo(c Collective, size, bytes int, th Thresholds) Algo {
	return coll.Choose(c, size, bytes, withMeasured(th))
}

// CollOption modifies one collective call.
type CollOption func(*collOpts)

type collOpts struct {
	algo   Algo
	lossy  *lossy.Config
	stream uint64
	dtype  uint8 // the element type the header names, when not the buffer's (DType)
}

// WithAlgo forces algorithm a for this call (every rank must force the
// same one). It overrides Config.Algorithms.
func WithAlgo(a Algo) CollOption { return func(o *collOpts) { o.algo = a } }

// LossTolerant makes a float32 Allreduce loss-tolerant: the transpose
// allreduce described in the package documentation (or the ring, with
// cfg.Ring), over the same connections as everything else (reserved tags),
// with packets discarded at a rate steered by the receivers' feedback
// (Config.Stage) and the gaps filled without bias. cfg.Op must be Sum or Mean. Report the quality of
// each result with Comm.ReportQuality.
func LossTolerant(cfg lossy.Config) CollOption {
	return func(o *collOpts) { c := cfg; o.lossy = &c }
}

// Element type codes carried in collective headers.
const (
	dtFloat32 uint8 = 1 + iota
	dtFloat64
	dtInt32
	dtInt64
	dtUint8
	dtInt8
	dtBool
	dtFloat16
	dtBFloat16
)

func dtypeOf[T Number]() (code uint8, size int, name string) {
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Float32:
		return dtFloat32, 4, "float32"
	case reflect.Float64:
		return dtFloat64, 8, "float64"
	case reflect.Int32:
		return dtInt32, 4, "int32"
	case reflect.Uint8:
		return dtUint8, 1, "uint8"
	case reflect.Int8:
		return dtInt8, 1, "int8"
	default:
		return dtInt64, 8, "int64"
	}
}

var dtypeNames = [...]string{dtFloat32: "float32", dtFloat64: "float64", dtInt32: "int32", dtInt64: "int64",
	dtUint8: "uint8", dtInt8: "int8", dtBool: "bool", dtFloat16: "float16", dtBFloat16: "bfloat16"}

func dtypeName(d uint8) string {
	if int(d) < len(dtypeNames) && dtypeNames[d] != "" {
		return dtypeNames[d]
	}
	return fmt.Sprintf("type %d", d)
}

// Notice reasons, in a notice's dtype field.
const (
	reasonOther uint8 = iota
	reasonMismatch
)

// collCall is one collective call in progress: the coll.Transport the
// algorithms run over.
type collCall struct {
	c *Comm
	h header
}

func (x *collCall) Rank() int { return x.c.rank }
func (x *collCall) Size() int { return len(x.c.ranks) }

func (x *collCall) Send(ctx context.Context, dst, step int, b []byte) error {
	h := x.h
	h.tag = int32(step)
	// A collective's sends return once queued: the call ends when its own
	// receives do, not when the peers' acknowledgements of its last sends
	// come back (Close and later calls report a send that failed).
	_, err := x.c.sendVia(ctx, x.c.ranks[dst], collConnTag(x.c.id, h.seq), h, b, x.name(), sendHanded)
	return err
}

// TrySend makes collCall a coll.TrySender: an eager message that the
// peer's credit covers goes out from the caller's goroutine.
func (x *collCall) TrySend(ctx context.Context, dst, step int, b []byte) (bool, error) {
	h := x.h
	h.tag = int32(step)
	return x.c.sendVia(ctx, x.c.ranks[dst], collConnTag(x.c.id, h.seq), h, b, x.name(), sendTry)
}

func (x *collCall) Recv(ctx context.Context, src, step int) ([]byte, error) {
	return x.c.cs.collRecv(ctx, x, x.c.ranks[src], int32(step))
}

// Framing makes collCall a coll.Framer: the transport's frames (what its
// scheduler places on a rail and its planner's shares are made of whole
// segments of), and the communicator's header in front of every step's
// payload, so that the collectives cut pieces whose header and payload
// fill whole frames.
func (x *collCall) Framing() coll.Framing {
	return coll.Framing{Segment: frameSize(x.c.w.cfg.Transport), Overhead: headerSize}
}

// frameSize is the frame size of connections made with cfg: FrameSize,
// else the default frame with the default segment, else SegmentSize (as
// multirail.Config documents).
func frameSize(cfg multirail.Config) int {
	switch {
	case cfg.FrameSize != 0:
		return cfg.FrameSize
	case cfg.SegmentSize == 0:
		return multirail.DefaultFrameSize
	}
	return cfg.SegmentSize
}

func (x *collCall) name() string { return Collective(x.h.coll).String() }

// check compares what rank src called with what this rank called.
func (x *collCall) check(src int, h header) error {
	var what string
	switch {
	case h.coll != x.h.coll:
		what = fmt.Sprintf("rank %d called %s, rank %d (this rank) %s", src, Collective(h.coll), x.c.rank, x.name())
	case h.count != x.h.count:
		what = fmt.Sprintf("rank %d passed count %d, rank %d (this rank) %d", src, h.count, x.c.rank, x.h.count)
	case h.root != x.h.root:
		what = fmt.Sprintf("rank %d passed root %d, rank %d (this rank) %d", src, h.root, x.c.rank, x.h.root)
	case h.dtype != x.h.dtype:
		what = fmt.Sprintf("rank %d passed %s, rank %d (this rank) %s", src, dtypeName(h.dtype), x.c.rank, dtypeName(x.h.dtype))
	case h.op != x.h.op:
		what = fmt.Sprintf("rank %d passed op %s, rank %d (this rank) %s", src, Op(h.op), x.c.rank, Op(x.h.op))
	case h.algo != x.h.algo:
		what = fmt.Sprintf("rank %d runs algorithm %s, rank %d (this rank) %s (force the same algorithm on every rank)", src, Algo(h.algo), x.c.rank, Algo(x.h.algo))
	default:
		return nil
	}
	return &PeerError{Rank: src, Op: x.name(), Err: fmt.Errorf("%w in call %d: %s", ErrMismatch, x.h.seq, what)}
}

// collective runs one collective call: numbering, algorithm choice, the
// algorithm itself, and on failure the notice that makes every other rank
// fail too.
func (c *Comm) collective(ctx context.Context, cl Collective, dtype uint8, elem int, op Op, root int, count int, o collOpts, fn func(t coll.Transport, a Algo) error) error {
	c.collMu.Lock()
	defer c.collMu.Unlock()
	c.seq++
	if o.dtype != 0 {
		dtype = o.dtype
	}
	h := header{kind: kindColl, coll: uint8(cl), dtype: dtype, op: uint8(op), ctx: c.id, seq: c.seq, root: int32(root), count: uint64(count)}
	call := &collCall{c: c, h: h}
	w := c.w
	w.mu.Lock()
	poisoned := c.cs.collErr
	w.mu.Unlock()
	if poisoned != nil {
		return c.collErr(call, poisoned)
	}
	algo := o.algo
	if algo == AlgoAuto {
		algo = w.cfg.Algorithms[cl]
	}
	if algo == AlgoAuto {
		algo = coll.Choose(cl, len(c.ranks), chooseBytes(cl, count, elem, len(c.ranks)), w.cfg.Thresholds)
	}
	call.h.algo = uint8(algo)
	w.mu.Lock()
	c.cs.startLocked(call)
	w.mu.Unlock()
	start := time.Now()
	err := fn(call, algo)
	w.mu.Lock()
	c.cs.cur = nil
	w.mu.Unlock()
	c.recordColl(cl, algo, count*elem, time.Since(start), err)
	if err == nil {
		return nil
	}
	return c.failColl(call, err)
}

// chooseBytes is the message size Thresholds measure for collective cl
// (see coll.Choose): the count in the header times the element size, but
// for Alltoall the block sent to each rank.
func chooseBytes(cl Collective, count, elem, size int) int {
	if cl == CollAlltoall && size > 0 {
		return count / size * elem
	}
	return count * elem
}

// failColl poisons the communicator's collectives after call failed with
// err here, tells the other ranks (unless err came from one of them), and
// returns the error for the caller.
func (c *Comm) failColl(call *collCall, err error) error {
	w := c.w
	var ne *noticeError
	if errors.As(err, &ne) {
		c.relayNotice(call, ne)
		return c.collErr(call, err)
	}
	c.awaitPeerEnd(err)
	w.mu.Lock()
	already := c.cs.collErr
	if already == nil {
		c.cs.failCollLocked(err, true)
	}
	w.mu.Unlock()
	if already != nil && !errors.Is(err, already) {
		var ne2 *noticeError
		if errors.As(already, &ne2) {
			// Another rank's failure ended this call: report that.
			return c.collErr(call, already)
		}
	}
	culprit := -1
	reason := reasonOther
	var pe *PeerError
	if errors.As(err, &pe) && pe.Rank >= 0 {
		culprit = c.ranks[pe.Rank]
	}
	if errors.Is(err, ErrMismatch) {
		reason = reasonMismatch
	}
	msg := fmt.Sprintf("%s (call %d) failed on rank %d: %v", call.name(), call.h.seq, c.rank, err)
	if already == nil && !errors.Is(err, ErrClosed) {
		h := call.h
		w.sendNoticeReason(c.ranks, c.id, h.seq, culprit, h.coll, reason, msg)
	}
	return err
}

// relayNotice passes another rank's failure report on to the members
// other than its sender and culprit, before this rank returns the error
// (and perhaps closes): a rank whose call then fails because this one
// closed its connection finds the report ahead of the close on that
// connection (see awaitPeerEnd) and names the rank at fault, not this one.
func (c *Comm) relayNotice(call *collCall, ne *noticeError) {
	w := c.w
	w.mu.Lock()
	relay := !c.cs.relayed && !w.closed
	c.cs.relayed = true
	w.mu.Unlock()
	if !relay {
		return
	}
	members := make([]int, 0, len(c.ranks))
	for _, r := range c.ranks {
		if r != ne.from && r != ne.culprit {
			members = append(members, r)
		}
	}
	w.sendNoticeReason(members, c.id, ne.seq, ne.culprit, call.h.coll, ne.reason, ne.msg)
}

// peerEndWait bounds how long a failed collective waits for the
// connection of the rank it failed on to deliver what it sent before it
// ended.
const peerEndWait = 2 * time.Second

// awaitPeerEnd: when err says that a rank's connection ended, wait (at
// most peerEndWait) until this rank has read everything that connection
// delivered: a failure report sent ahead of the close then poisons the
// communicator first, and the call reports the rank named in it.
func (c *Comm) awaitPeerEnd(err error) {
	var pe *PeerError
	if !errors.As(err, &pe) || pe.Rank < 0 || pe.Rank >= len(c.ranks) {
		return
	}
	if !errors.Is(err, net.ErrClosed) && !errors.Is(err, multirail.ErrAllRailsDown) && !errors.Is(err, io.EOF) && !errors.Is(err, errPeerGone) {
		return
	}
	p := c.w.peers[c.ranks[pe.Rank]]
	if p == nil {
		return
	}
	t := time.NewTimer(peerEndWait)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
	}
}

// collErr turns a stored failure into the error of call.
func (c *Comm) collErr(call *collCall, err error) error {
	var ne *noticeError
	if errors.As(err, &ne) {
		r := -1
		if ne.culprit >= 0 {
			r = c.index[ne.culprit]
		} else if ne.from >= 0 {
			r = c.index[ne.from]
		}
		var cause error = errors.New(ne.msg)
		if ne.reason == reasonMismatch {
			cause = fmt.Errorf("%w: %s", ErrMismatch, ne.msg)
		}
		return &PeerError{Rank: r, Op: call.name(), Err: cause}
	}
	var pe *PeerError
	if errors.As(err, &pe) && pe.Op != call.name() {
		return &PeerError{Rank: pe.Rank, Op: call.name(), Err: fmt.Errorf("an earlier collective failed: %w", err)}
	}
	return err
}

// Barrier returns once every rank of the communicator has called it.
func (c *Comm) Barrier(ctx context.Context, opts ...CollOption) error {
	o := applyOpts(opts)
	return c.collective(ctx, CollBarrier, 0, 0, Sum, -1, 0, o, func(t coll.Transport, a Algo) error {
		return coll.Barrier(ctx, t, a)
	})
}

func applyOpts(opts []CollOption) collOpts {
	var o collOpts
	for _, f := range opts {
		f(&o)
	}
	return o
}

func checkOp[T Number](op Op, name string) (coll.Op, error) {
	switch op {
	case Sum, Mean:
		return coll.Sum, nil
	case Prod:
		return coll.Prod, nil
	case Min:
		return coll.Min, nil
	case Max:
		return coll.Max, nil
	case Band, Bor, Bxor:
		if code, _, _ := dtypeOf[T](); code == dtFloat32 || code == dtFloat64 {
			return 0, fmt.Errorf("%w: %s: op %s needs integer or bool elements", ErrConfig, name, op)
		}
		return coll.Band + coll.Op(op-Band), nil
	}
	return 0, fmt.Errorf("%w: %s: op %d; allowed: Sum, Mean, Prod, Min, Max, Band, Bor, Bxor (integers)", ErrConfig, name, int(op))
}

func mean[T Number](op Op, buf []T, n int) {
	if op != Mean {
		return
	}
	for i := range buf {
		buf[i] /= T(n)
	}
}

func (c *Comm) checkRoot(root int, name string) error {
	if root < 0 || root >= len(c.ranks) {
		return fmt.Errorf("%w: %s: root %d; allowed: 0..%d", ErrRank, name, root, len(c.ranks)-1)
	}
	return nil
}

// Bcast copies root's buf into buf on every rank. Every rank passes a
// buffer of the same length.
func Bcast[T Number](ctx context.Context, c *Comm, buf []T, root int, opts ...CollOption) error {
	code, size, _ := dtypeOf[T]()
	return c.collective(ctx, CollBcast, code, size, Sum, root, len(buf), applyOpts(opts), func(t coll.Transport, a Algo) error {
		if err := c.checkRoot(root, "bcast"); err != nil {
			return err
		}
		return coll.Bcast(ctx, t, buf, root, a)
	})
}

// Reduce combines every rank's send with op into recv at root (recv is
// ignored elsewhere and may be nil there; at root it has len(send)).
func Reduce[T Number](ctx context.Context, c *Comm, send, recv []T, op Op, root int, opts ...CollOption) error {
	code, size, _ := dtypeOf[T]()
	return c.collective(ctx, CollReduce, code, size, op, root, len(send), applyOpts(opts), func(t coll.Transport, a Algo) error {
		cop, err := checkOp[T](op, "reduce")
		if err != nil {
			return err
		}
		if err := c.checkRoot(root, "reduce"); err != nil {
			return err
		}
		if c.rank == root && len(recv) != len(send) {
			return fmt.Errorf("%w: reduce: recv has %d elements at the root; want len(send) = %d", ErrConfig, len(recv), len(send))
		}
		if err := coll.Reduce(ctx, t, send, recv, cop, root, a); err != nil {
			return err
		}
		if c.rank == root {
			mean(op, recv, len(c.ranks))
		}
		return nil
	})
}

// Allreduce replaces buf, on every rank, with the element-wise reduction
// over all ranks' buf. Every rank passes a buffer of the same length.
// With the LossTolerant option (float32 only) packets may be discarded on
// the way, as the package documentation describes.
func Allreduce[T Number](ctx context.Context, c *Comm, buf []T, op Op, opts ...CollOption) error {
	o := applyOpts(opts)
	code, size, _ := dtypeOf[T]()
	if o.lossy != nil {
		return c.lossyAllreduce(ctx, any(buf), code, op, o)
	}
	return c.collective(ctx, CollAllreduce, code, size, op, -1, len(buf), o, func(t coll.Transport, a Algo) error {
		cop, err := checkOp[T](op, "allreduce")
		if err != nil {
			return err
		}
		if err := coll.Allreduce(ctx, t, buf, cop, a); err != nil {
			return err
		}
		mean(op, buf, len(c.ranks))
		return nil
	})
}

// Allgather gathers every rank's send into recv on every rank: rank r's
// block at recv[r*len(send):]. len(recv) = Size()*len(send).
func Allgather[T Number](ctx context.Context, c *Comm, send, recv []T, opts ...CollOption) error {
	code, size, _ := dtypeOf[T]()
	return c.collective(ctx, CollAllgather, code, size, Sum, -1, len(send), applyOpts(opts), func(t coll.Transport, a Algo) error {
		if len(recv) != len(send)*len(c.ranks) {
			return fmt.Errorf("%w: allgather: recv has %d elements; want Size()*len(send) = %d", ErrConfig, len(recv), len(send)*len(c.ranks))
		}
		return coll.Allgather(ctx, t, send, recv, a)
	})
}

// ReduceScatterCounts returns the block of a vector of n elements that
// ReduceScatter leaves on rank r of size ranks: [lo, hi).
func ReduceScatterCounts(n, size, r int) (lo, hi int) { return r * n / size, (r + 1) * n / size }

// ReduceScatter reduces every rank's send (n elements, the same n on every
// rank) with op and leaves block r of the result on rank r in recv, where
// block r is elements ReduceScatterCounts(n, Size(), r).
func ReduceScatter[T Number](ctx context.Context, c *Comm, send, recv []T, op Op, opts ...CollOption) error {
	code, size, _ := dtypeOf[T]()
	return c.collective(ctx, CollReduceScatter, code, size, op, -1, len(send), applyOpts(opts), func(t coll.Transport, a Algo) error {
		cop, err := checkOp[T](op, "reduce-scatter")
		if err != nil {
			return err
		}
		lo, hi := ReduceScatterCounts(len(send), len(c.ranks), c.rank)
		if len(recv) != hi-lo {
			return fmt.Errorf("%w: reduce-scatter: recv has %d elements; want %d (block %d of %d elements over %d ranks)", ErrConfig, len(recv), hi-lo, c.rank, len(send), len(c.ranks))
		}
		if err := coll.ReduceScatter(ctx, t, send, recv, cop, a); err != nil {
			return err
		}
		mean(op, recv, len(c.ranks))
		return nil
	})
}

// Alltoall sends block j of send to rank j, where it lands as block r of
// recv (r this rank). len(send) = len(recv) = Size()*k for a block size k.
func Alltoall[T Number](ctx context.Context, c *Comm, send, recv []T, opts ...CollOption) error {
	code, size, _ := dtypeOf[T]()
	return c.collective(ctx, CollAlltoall, code, size, Sum, -1, len(send), applyOpts(opts), func(t coll.Transport, a Algo) error {
		n := len(c.ranks)
		if len(send)%n != 0 || len(recv) != len(send) {
			return fmt.Errorf("%w: alltoall: send has %d and recv %d elements; want equal lengths, a multiple of Size() = %d", ErrConfig, len(send), len(recv), n)
		}
		return coll.Alltoall(ctx, t, send, recv, a)
	})
}

// Gather collects every rank's send at root: rank r's block at
// recv[r*len(send):]; len(recv) = Size()*len(send) at root, ignored
// elsewhere.
func Gather[T Number](ctx context.Context, c *Comm, send, recv []T, root int, opts ...CollOption) error {
	code, size, _ := dtypeOf[T]()
	return c.collective(ctx, CollGather, code, size, Sum, root, len(send), applyOpts(opts), func(t coll.Transport, a Algo) error {
		if err := c.checkRoot(root, "gather"); err != nil {
			return err
		}
		if c.rank == root && len(recv) != len(send)*len(c.ranks) {
			return fmt.Errorf("%w: gather: recv has %d elements at the root; want Size()*len(send) = %d", ErrConfig, len(recv), len(send)*len(c.ranks))
		}
		return coll.Gather(ctx, t, send, recv, root, a)
	})
}

// Scatter sends block r of root's send to rank r's recv; len(send) =
// Size()*len(recv) at root, ignored elsewhere.
func Scatter[T Number](ctx context.Context, c *Comm, send, recv []T, root int, opts ...CollOption) error {
	code, size, _ := dtypeOf[T]()
	return c.collective(ctx, CollScatter, code, size, Sum, root, len(recv), applyOpts(opts), func(t coll.Transport, a Algo) error {
		if err := c.checkRoot(root, "scatter"); err != nil {
			return err
		}
		if c.rank == root && len(send) != len(recv)*len(c.ranks) {
			return fmt.Errorf("%w: scatter: send has %d elements at the root; want Size()*len(recv) = %d", ErrConfig, len(send), len(recv)*len(c.ranks))
		}
		return coll.Scatter(ctx, t, send, recv, root, a)
	})
}
