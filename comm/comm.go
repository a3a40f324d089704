package comm

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/lossy"
)

// AnySource and AnyTag match a message from any rank or with any tag.
const (
	AnySource = -1
	AnyTag    = -1
)

// MaxTag is the largest tag an application may use.
const MaxTag = 1<<31 - 1

// Sentinel errors of the communicator.
var (
	// ErrClosed is returned by calls on a communicator closed by this rank.
	ErrClosed = errors.New("comm: communicator closed")
	// ErrAborted is wrapped by the errors of calls after a rank called
	// Abort.
	ErrAborted = errors.New("comm: job aborted")
	// ErrMismatch is wrapped by the error of a collective that ranks called
	// with different arguments (count, root, operation, type, algorithm).
	ErrMismatch = errors.New("comm: collective arguments differ between ranks")
	// ErrTruncated is returned when a received message does not fit.
	ErrTruncated = errors.New("comm: message truncated")
	// ErrRank is wrapped by the error of a call naming a rank outside the
	// communicator.
	ErrRank = errors.New("comm: invalid rank")
	// ErrTag is wrapped by the error of a call with a tag outside 0..MaxTag.
	ErrTag = errors.New("comm: invalid tag")
	// ErrBootstrap is wrapped by every error of Init and Start before the
	// communicator is up (detection, rendezvous, connections).
	ErrBootstrap = errors.New("comm: bootstrap failed")
	// ErrConfig is wrapped by every configuration error, those of the
	// loss-tolerant allreduce (lossy.ErrConfig) included.
	ErrConfig = errors.New("comm: invalid config")
)

// lossyConfigError is an error of package lossy's configuration, seen
// through the communicator: it is both lossy.ErrConfig and ErrConfig.
type lossyConfigError struct{ err error }

func (e lossyConfigError) Error() string   { return e.err.Error() }
func (e lossyConfigError) Unwrap() []error { return []error{e.err, ErrConfig} }

// wrapLossy makes an error of package lossy's configuration one of the
// communicator's too (ErrConfig); other errors pass as they are.
func wrapLossy(err error) error {
	if errors.Is(err, lossy.ErrConfig) && !errors.Is(err, ErrConfig) {
		return lossyConfigError{err}
	}
	return err
}

// PeerError is the error of an operation that failed because of another
// rank: its connection ended, it reported a failure of a collective, or it
// aborted the job.
type PeerError struct {
	Rank int    // the rank (in the communicator of the call) at fault, -1 if unknown
	Op   string // the operation that failed on this rank ("recv", "allreduce", ...)
	Err  error  // the cause
}

func (e *PeerError) Error() string {
	if e.Rank < 0 {
		return fmt.Sprintf("comm: %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("comm: %s: rank %d: %v", e.Op, e.Rank, e.Err)
}

func (e *PeerError) Unwrap() error { return e.Err }

// Message is a received point-to-point message.
type Message struct {
	Source int    // the sender's rank in the communicator
	Tag    int    // the tag it was sent with
	Data   []byte // the payload; the caller owns it
}

// Status describes a message found by Probe, without receiving it.
type Status struct {
	Source, Tag, Len int
}

// Comm is one rank's view of a communicator: a group of ranks that send
// each other messages and run collectives. The world communicator comes
// from Init, Start or NewLocal; Split derives others that share its
// connections. All methods are safe for concurrent use, except that the
// ranks must call collectives on one communicator in the same order (and
// one at a time).
type Comm struct {
	w     *world
	id    uint64 // communicator context id, carried by every message
	ranks []int  // communicator rank -> world rank
	index []int  // world rank -> communicator rank, -1 if not a member
	rank  int
	cs    *ctxState

	collMu sync.Mutex             // one collective at a time
	seq    uint64                 // collective calls so far
	splits uint64                 // Split calls so far
	lossy  map[uint64]*lossyState // by stream (WithStream)
	cstats collStats

	closeOnce sync.Once
}

// Rank returns this process's rank in the communicator, 0..Size()-1.
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks in the communicator.
func (c *Comm) Size() int { return len(c.ranks) }

// LocalRank returns this process's index among the ranks of the world
// communicator on its host, as the launcher numbered them.
func (c *Comm) LocalRank() int { return c.w.localRank }

// LocalSize returns the number of ranks of the world communicator on this
// process's host.
func (c *Comm) LocalSize() int { return c.w.localSize }

// Launcher names what started the job ("multirail", "torchrun", "env",
// "ompi", "mpich", "slurm", "k8s", or "local" for NewLocal).
func (c *Comm) Launcher() string { return c.w.launcher }

// WorldRank returns the world rank of rank r of this communicator.
func (c *Comm) WorldRank(r int) int { return c.ranks[r] }

func (c *Comm) checkRank(r int, op string, any bool) error {
	if any && r == AnySource {
		return nil
	}
	if r < 0 || r >= len(c.ranks) {
		allowed := fmt.Sprintf("0..%d", len(c.ranks)-1)
		if any {
			allowed += " or AnySource (-1)"
		}
		return fmt.Errorf("%w: %s: rank %d; allowed: %s", ErrRank, op, r, allowed)
	}
	return nil
}

func checkTag(t int, op string, any bool) error {
	if any && t == AnyTag {
		return nil
	}
	if t < 0 || t > MaxTag {
		allowed := fmt.Sprintf("0..%d", MaxTag)
		if any {
			allowed += " or AnyTag (-1)"
		}
		return fmt.Errorf("%w: %s: tag %d; allowed: %s", ErrTag, op, t, allowed)
	}
	return nil
}

// Close releases the communicator. Closing the world communicator closes
// every connection (writing what is still queued first) and ends every
// communicator derived from it; closing a derived one only forgets it.
// Pending calls on it return ErrClosed.
func (c *Comm) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.w.mu.Lock()
		c.cs.failLocked(ErrClosed, true)
		if c.id != worldID {
			delete(c.w.ctxs, c.id)
		}
		c.w.mu.Unlock()
		if c.id == worldID {
			err = c.w.close()
		}
	})
	return err
}

// Abort tells every rank of the job that this one gives up, with reason,
// and closes the world's connections: every pending and later call on any
// rank fails with an error wrapping ErrAborted that names this rank and the
// reason. The process should then exit with a non-zero status (a launcher
// such as multirail run or mpirun then ends the others).
func (c *Comm) Abort(reason string) {
	w := c.w
	h := header{kind: kindNotice, ctx: worldID, tag: int32(w.rank), root: -1, coll: noticeAbort}
	msg := appendHeader(nil, h)
	msg = append(msg, reason...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range w.peers {
		if p == nil {
			continue
		}
		wg.Go(func() { _ = p.conn.Send(ctx, connTagNotice, msg) })
	}
	wg.Wait()
	w.mu.Lock()
	w.abortLocked(fmt.Errorf("%w by rank %d (this rank): %s", ErrAborted, w.rank, reason))
	w.mu.Unlock()
	_ = w.close()
}

// worldID is the context id of the world communicator.
const worldID uint64 = 1

// noticeAbort in a notice's coll field marks an Abort (not a collective).
const noticeAbort uint8 = 0xff

// Multirail message tags, by kind of traffic. Messages with one tag arrive
// in send order; different tags may overtake each other, so a large
// message of one class does not hold up the others.
const (
	connTagP2P    uint32 = 0x10000 // + hash(context, tag) & 0xffff
	connTagColl   uint32 = 0x20000 // + (context + call) & 0xff
	connTagNotice uint32 = 0x30000
	connTagStage  uint32 = 0x40000 // + 2*(context & 0x7fff) + {0 packets, 1 feedback}
	connTagMask   uint32 = 0xffff0000
)

func p2pConnTag(ctx uint64, tag int32) uint32 {
	h := fnv.New32a()
	var b [12]byte
	for i := range 8 {
		b[i] = byte(ctx >> (8 * i))
	}
	for i := range 4 {
		b[8+i] = byte(uint32(tag) >> (8 * i))
	}
	_, _ = h.Write(b[:])
	return connTagP2P | h.Sum32()&0xffff
}

func collConnTag(ctx, seq uint64) uint32 { return connTagColl | uint32(ctx+seq)&0xff }

// world is the state shared by a world communicator and the communicators
// split from it: the connections to every other rank and the messages
// that arrived on them.
type world struct {
	rank, size           int
	localRank, localSize int
	launcher             string
	cfg                  config
	log                  *slog.Logger
	peers                []*peer // by world rank; nil for this rank
	closers              []io.Closer
	emuLinks             []*emu.Link // this rank's emulated rails (Config.Emu)

	host string // this rank's host name

	mu     sync.Mutex
	nextID uint64 // the next communicator id this rank may hand out (Split)
	// stageOwners is the communicator and stream of each stage key this
	// rank's loss-tolerant calls use.
	stageOwners map[uint32]stageOwner
	ctxs        map[uint64]*ctxState
	closed      bool
	abort       error // set by an Abort (here or elsewhere)

	stop chan struct{} // closed by close: demultiplexers stop
	wg   sync.WaitGroup
}

// peer is the connection to one other rank.
type peer struct {
	rank  int // world rank
	host  string
	conn  *multirail.Conn
	rails []RailInfo
	early []multirail.Message // received before the hello (accepting side)

	// Under world.mu:
	held   int64         // bytes of unmatched messages held from this peer
	room   chan struct{} // signalled when held shrinks
	err    error         // why the connection ended; nil while it runs
	done   chan struct{} // closed when the connection ended
	stages map[uint32]*lossy.StageConn
}

// RailInfo describes one rail of a peer connection.
type RailInfo struct {
	Name   string // as in multirail.RailStats
	Local  string // local address or interface, "" if the kernel chose
	Remote string // the address dialled or accepted from
}

func (w *world) ctxStateLocked(id uint64) *ctxState {
	cs := w.ctxs[id]
	if cs == nil {
		cs = newCtxState(w, id)
		w.ctxs[id] = cs
		if w.abort != nil {
			cs.failLocked(w.abort, true)
		}
	}
	return cs
}

// abortLocked fails everything pending and later, on every communicator.
func (w *world) abortLocked(err error) {
	if w.abort != nil {
		return
	}
	w.abort = err
	for _, cs := range w.ctxs {
		cs.failLocked(err, true)
	}
}

// close ends every connection and waits for the demultiplexers.
func (w *world) close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	close(w.stop)
	for _, cs := range w.ctxs {
		cs.failLocked(ErrClosed, true)
	}
	var stages []*lossy.StageConn
	for _, p := range w.peers {
		if p != nil {
			for _, s := range p.stages {
				stages = append(stages, s)
			}
		}
	}
	w.mu.Unlock()
	for _, s := range stages {
		_ = s.Close()
	}
	var wg sync.WaitGroup
	for _, p := range w.peers {
		if p != nil {
			wg.Go(func() { _ = p.conn.Close() })
		}
	}
	wg.Wait()
	w.wg.Wait()
	var err error
	for _, c := range w.closers {
		err = errors.Join(err, c.Close())
	}
	return err
}

// untilClose returns a context that ends when the world closes (or
// cancel is called).
func (w *world) untilClose() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-w.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// start runs a demultiplexer for every peer connection. Messages that
// can be handed on at once go to their taker straight from the rail that
// completed them (offer); the demultiplexer takes the rest.
func (w *world) start() {
	for _, p := range w.peers {
		if p != nil {
			p.conn.OnMessage(func(m multirail.Message) bool { return w.offer(p, m) })
			w.wg.Go(func() { w.demux(p) })
		}
	}
}

// offer hands message m from p to whoever waits for it, or to the
// unmatched queue, if that can be done without waiting: a point-to-point
// or collective message for which the unmatched queue has room. It runs on
// the goroutine that read m (multirail.Conn.OnMessage); everything else
// (notices, stage messages, a full queue, a malformed message) it
// declines, and demux takes it.
func (w *world) offer(p *peer, m multirail.Message) bool {
	if m.Tag&connTagMask == connTagStage {
		return false
	}
	h, payload, err := parseHeader(m.Data)
	if err != nil || (h.kind != kindP2P && h.kind != kindColl) {
		return false
	}
	n := int64(len(payload)) + msgOverhead
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || (p.held > 0 && p.held+n > w.cfg.MaxUnmatched) {
		return false
	}
	w.arriveLocked(p, h, payload, n)
	return true
}

// demux reads every message of p's connection and hands it to whoever
// waits for it: a posted receive, a collective, a stage connection, or the
// unmatched queue (bounded: when MaxUnmatched bytes from p are held, it
// stops reading, and the transport's flow control holds p back).
func (w *world) demux(p *peer) {
	ctx, cancel := w.untilClose()
	defer cancel()
	var err error
	early := p.early
	p.early = nil
	for {
		var m multirail.Message
		if len(early) > 0 {
			m, early = early[0], early[1:]
		} else if m, err = p.conn.Recv(ctx); err != nil {
			break
		}
		if m.Tag&connTagMask == connTagStage {
			if err = w.deliverStage(ctx, p, m); err != nil {
				break
			}
			continue
		}
		var h header
		var payload []byte
		h, payload, err = parseHeader(m.Data)
		if err != nil {
			break
		}
		if err = w.deliver(ctx, p, h, payload); err != nil {
			break
		}
	}
	p.conn.OnMessage(nil) // what arrives after this goes nowhere
	w.peerDone(p, err)
}

// deliver routes one decoded message from p.
func (w *world) deliver(ctx context.Context, p *peer, h header, payload []byte) error {
	switch h.kind {
	case kindNotice:
		w.notice(p, h, payload)
		return nil
	case kindHello:
		return fmt.Errorf("comm: rank %d sent a second hello", p.rank)
	}
	n := int64(len(payload)) + msgOverhead
	w.mu.Lock()
	for p.held > 0 && p.held+n > w.cfg.MaxUnmatched && !w.closed {
		room := p.room
		w.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		}
		w.mu.Lock()
	}
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.arriveLocked(p, h, payload, n)
	w.mu.Unlock()
	return nil
}

// arriveLocked hands a point-to-point or collective message from p, which
// costs n of p's unmatched budget, to its communicator. Caller holds w.mu.
func (w *world) arriveLocked(p *peer, h header, payload []byte, n int64) {
	cs := w.ctxStateLocked(h.ctx)
	p.held += n
	in := newInMsg()
	*in = inMsg{src: p.rank, h: h, data: payload, cost: n, from: p}
	if h.kind == kindP2P {
		cs.arriveP2PLocked(in)
	} else {
		cs.arriveCollLocked(in)
	}
}

// msgOverhead is what one held message costs besides its payload.
const msgOverhead = 256

// release returns what a held message cost to its peer's budget.
func (w *world) releaseLocked(in *inMsg) {
	if in.from == nil || in.cost == 0 {
		return
	}
	in.from.held -= in.cost
	in.cost = 0
	select {
	case in.from.room <- struct{}{}:
	default:
	}
}

// notice handles a peer's report that a collective failed or that it
// aborted the job.
func (w *world) notice(p *peer, h header, payload []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.coll == noticeAbort {
		w.abortLocked(fmt.Errorf("%w by rank %d: %s", ErrAborted, h.tag, payload))
		return
	}
	cs := w.ctxStateLocked(h.ctx)
	culprit := -1
	if h.tag >= 0 && int(h.tag) < w.size {
		culprit = int(h.tag)
	}
	cs.failCollLocked(&noticeError{from: p.rank, culprit: culprit, seq: h.seq, reason: h.dtype, msg: string(payload)}, false)
}

// errPeerGone is why a connection ended that the peer closed.
var errPeerGone = errors.New("connection closed by the peer")

// noticeError is a collective failure reported by another rank.
type noticeError struct {
	from, culprit int // world ranks
	seq           uint64
	reason        uint8
	msg           string
}

func (e *noticeError) Error() string { return e.msg }

// peerDone records that p's connection ended with err and fails what
// waits for p.
func (w *world) peerDone(p *peer, err error) {
	w.mu.Lock()
	closing := w.closed
	if p.err == nil {
		switch {
		case err == nil, errors.Is(err, io.EOF):
			err = errPeerGone
		case errors.Is(err, context.Canceled) && closing:
			err = ErrClosed
		}
		p.err = err
		close(p.done)
		for _, cs := range w.ctxs {
			cs.peerDoneLocked(p)
		}
	}
	stages := make([]*lossy.StageConn, 0, len(p.stages))
	for _, s := range p.stages {
		stages = append(stages, s)
	}
	w.mu.Unlock()
	for _, s := range stages {
		s.Fail(p.err)
	}
	if !closing {
		level := slog.LevelWarn
		if errors.Is(err, io.EOF) || errors.Is(err, multirail.ErrPeerClosed) || err == nil {
			level = slog.LevelDebug // the peer closed its end: the normal end of a job
		}
		w.log.Log(context.Background(), level, "comm: connection to a peer ended", "peer", p.rank, "host", p.host, "err", p.err)
		go func() { _ = p.conn.Close() }()
	}
}

// sendNoticeReason tells every other member (world ranks) of communicator
// id that its collective call seq failed here because of culprit (a world
// rank, -1 if none).
func (w *world) sendNoticeReason(members []int, id, seq uint64, culprit int, op, reason uint8, msg string) {
	h := header{kind: kindNotice, ctx: id, seq: seq, tag: int32(culprit), root: -1, coll: op, dtype: reason}
	b := append(appendHeader(nil, h), msg...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, r := range members {
		if r == w.rank || w.peers[r] == nil {
			continue
		}
		p := w.peers[r]
		wg.Go(func() { _ = p.conn.Send(ctx, connTagNotice, b) })
	}
	wg.Wait()
}

// newComm returns a communicator of the given world ranks (this rank
// among them) with context id.
func (w *world) newComm(id uint64, ranks []int) *Comm {
	c := &Comm{w: w, id: id, ranks: ranks, index: make([]int, w.size)}
	for i := range c.index {
		c.index[i] = -1
	}
	for i, r := range ranks {
		c.index[r] = i
		if r == w.rank {
			c.rank = i
		}
	}
	w.mu.Lock()
	c.cs = w.ctxStateLocked(id)
	c.cs.comm = c
	w.mu.Unlock()
	return c
}

// EmuLoad returns the background-load pattern of this rank's emulated
// rails (Config.EmuLoad; off when none), whose schedule restarts with
// RestartEmuLoad.
func (c *Comm) EmuLoad() emu.Pattern { return c.w.cfg.emuLoad }

// SetFixedRate pins the discard rate of this rank's loss-tolerant sends
// (every stage connection of the world, and those opened later) to r in
// [0, 1) from the next stage on; 0 hands it back to the controller. Like
// Config.Stage.FixedRate, but changeable while the job runs: for
// experiments that know more than the controller, such as the schedule
// of an emulated load.
func (c *Comm) SetFixedRate(r float64) error {
	w := c.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cfg.Stage.Reliable && r > 0 {
		return fmt.Errorf("%w: SetFixedRate(%v) with Config.Stage.Reliable; allowed 0", ErrConfig, r)
	}
	if !(r >= 0 && r < 1) {
		return fmt.Errorf("%w: SetFixedRate(%v); allowed [0, 1), 0 = the controller's rate", ErrConfig, r)
	}
	w.cfg.Stage.FixedRate = r
	for _, p := range w.peers {
		if p == nil {
			continue
		}
		for _, s := range p.stages {
			if err := s.SetFixedRate(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// RestartEmuLoad restarts, now, the background-load schedule of this
// rank's emulated rails (Config.EmuLoad): call it on every rank right
// after a barrier so that runs compared with each other see the same
// schedule from their start. Without emulated rails it does nothing.
func (c *Comm) RestartEmuLoad() {
	now := time.Now()
	for _, l := range c.w.emuLinks {
		l.SetEpoch(now)
	}
}
