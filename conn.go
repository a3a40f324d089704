package multirail

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	hs "github.com/multirail/multirail/internal/handshake"
	"github.com/multirail/multirail/internal/reasm"
	"github.com/multirail/multirail/internal/sender"
	"github.com/multirail/multirail/internal/wire"
	"github.com/multirail/multirail/sched"
)

// Errors returned by Conn methods.
var (
	// ErrClosed is returned by calls on a closed connection; it wraps
	// net.ErrClosed.
	ErrClosed = fmt.Errorf("multirail: connection closed: %w", net.ErrClosed)
	// ErrAllRailsDown means every rail of the connection broke.
	ErrAllRailsDown = errors.New("multirail: all rails are down")
	// ErrTooLarge means a message exceeds MaxMessageSize or the peer's
	// receive buffer.
	ErrTooLarge = errors.New("multirail: message too large")
	// ErrProtocol means the peer violated the protocol; the connection was
	// closed.
	ErrProtocol = errors.New("multirail: protocol violation by peer")
	// ErrAuth means one side does not know the other's token (Dial wraps
	// it in a RailError).
	ErrAuth = hs.ErrAuth
	// ErrVersion means the peer speaks another protocol version.
	ErrVersion = wire.ErrVersion
	// ErrUndelivered is wrapped by Close's error when eager messages whose
	// Send had returned nil were never acknowledged by the peer: the
	// error says how many were never written and how many were written
	// but not acknowledged (those may have arrived).
	ErrUndelivered = errors.New("multirail: eager messages not delivered")
)

// Message is a received message.
type Message struct {
	Tag  uint32
	Data []byte
}

// Conn is a multi-rail connection: messages sent on it are cut into
// segments spread over all rails and reassembled whole on the other side.
// All methods are safe for concurrent use.
type Conn struct {
	cfg     config
	log     *slog.Logger
	session [16]byte
	key     [32]byte // the session key: rails that rejoin prove they know it
	// plaintext: both sides chose frames in clear (Config.Plaintext);
	// otherwise every frame is sealed with its rail's keys.
	plaintext bool
	sid       uint64
	start     time.Time
	rails     []*rail
	peerMax   uint64     // the largest message the peer accepts
	peer      peerParams // what the peer announced; rejoins must match it
	hooks     connHooks
	// stageStats gives Stats.Stages: the telemetry of the loss-tolerant
	// stage connection running over the Conn (SetStageStats), a layer the
	// Conn does not know.
	stageStats atomic.Pointer[func() StageStats]

	// Lock order: a rail's rdMu, then that rail's wmu, then mu, then rmu
	// (nothing holding mu or rmu waits for a rail's locks; mu and rmu are
	// never held together today); offerMu comes after rdMu and before rmu
	// (the OnMessage handler runs holding a rail's rdMu and offerMu, and
	// takes none of the Conn's locks). errMu, the pokeMus, the arrMus and the
	// interfaces' nic.mu (shared by the process's connections) are taken last and nothing is locked while they are held. Holding a lock never waits on
	// a channel that a holder of the same lock must close.
	mu            sync.Mutex
	shutting      bool // shutdown has begun: no rail may be attached any more
	sch           sched.Scheduler
	states        []sched.RailState
	changed       chan struct{} // closed and replaced on every change senders may wait for
	enqueuing     chan struct{} // cap 1: held by the Send queueing a large message
	changeWaiters int           // goroutines waiting on changed
	nextID        uint64
	credit        sender.Credit // the peer's flow-control window: granted and used
	planning      bool          // large messages are planned (plan.go)
	shares        []int64       // the planner's scratch (plan.go)
	lanes         []sender.Lane // the planner's scratch (plan.go)
	plans         uint64        // messages planned
	lastPlan      *planRecord   // the last planned message acknowledged in full
	peerWindow    uint64
	sentMsgs      uint64
	ticks         uint64                 // dispatch timer ticks so far
	explainer     sched.Explainer        // c.sch, if it explains itself
	observer      sched.DeliveryObserver // c.sch, if it learns from deliveries
	explain       sched.Explanation      // reused by Stats
	recent        [RecentChoices]uint8   // ring of the last rail choices, indexed by picks % RecentChoices
	picks         uint64                 // rail choices made by the scheduler so far
	out           outage                 // no rail up: waiting for one (outage.go)
	recvMsgs      atomic.Uint64
	goingAway     atomic.Uint32 // GOAWAY code + 1 once Close started
	recvWants     atomic.Int32  // Recvs that may read the rail themselves
	recvGrace     atomic.Bool   // a Recv just left; the next one probably comes soon
	recvExits     atomic.Uint64 // Recvs that left; graceOver compares with exitsSeen
	exitsSeen     atomic.Uint64 // recvExits at graceOver's last look
	pokeMu        sync.Mutex
	pokeDone      <-chan struct{} // the context watchCtx keeps watching
	pokeStop      func() bool
	graceTimer    *time.Timer
	creditUnsent  atomic.Uint64 // credit returned by Recv, not yet announced promptly
	path          pathCounters  // Stats.Path

	rmu         sync.Mutex
	re          *reasm.Reassembler
	recvReady   chan struct{}      // closed and replaced when a message becomes ready
	recvWaiters int                // Recvs waiting on recvReady
	railFreed   uint64             // counts the reader goroutine leaving the rail to Recv
	peerGone    bool               // GOAWAY received
	handler     func(Message) bool // OnMessage's; nil: every message waits for Recv
	hasHandler  atomic.Bool        // handler != nil, read without rmu
	offerOK     bool               // messages go to handler (a Recv found none waiting)
	declined    Message            // the message handler declined, Recv's next
	hasDeclined bool

	offerMu sync.Mutex // held while messages are offered to handler, in order

	closeOnce    sync.Once
	shutDown     chan struct{} // closed when shutdown's work is done
	closed       chan struct{}
	shuttingDown atomic.Bool // set by the first shutdown, before anything else
	errMu        sync.Mutex
	err          error
	lost         error // eager messages left unacknowledged at shutdown (ErrUndelivered); guarded by errMu
	wg           sync.WaitGroup
}

// peerParams are what the peer announced in the handshake.
type peerParams struct {
	seg    int
	window uint64
	maxMsg uint64
}

// connHooks connect a Conn to the side that made it.
type connHooks struct {
	// redial opens and authenticates a new connection for rail idx of the
	// session (dialing side only; nil on the accepting side).
	redial func(ctx context.Context, idx int) (net.Conn, *hs.Keys, error)
	// onClose runs once when the connection shuts down.
	onClose func()
}

func newConn(cfg config, session [16]byte, key [32]byte, rails []railInit, peer peerParams, sch sched.Scheduler, hooks connHooks) (*Conn, error) {
	// Copies of a segment read while it arrives on another rail: one
	// frame's payload per rail, as many as can be read at once.
	copies := int64(len(rails)) * int64(wire.MaxPayload(peer.seg))
	re, err := reasm.New(reasm.Config{SegmentSize: peer.seg, MaxMessage: cfg.MaxMessageSize, Window: uint64(cfg.MaxReceiveBuffer),
		MaxCopies: copies, Alloc: allocRecv})
	if err != nil {
		return nil, err
	}
	c := &Conn{
		cfg:        cfg,
		session:    session,
		key:        key,
		plaintext:  len(rails) > 0 && rails[0].keys != nil && rails[0].keys.Plaintext,
		sid:        sessionID(session),
		start:      time.Now(),
		peerMax:    peer.maxMsg,
		peer:       peer,
		hooks:      hooks,
		sch:        sch,
		states:     make([]sched.RailState, len(rails)),
		changed:    make(chan struct{}),
		enqueuing:  make(chan struct{}, 1),
		nextID:     1,
		credit:     sender.NewCredit(peer.window),
		peerWindow: peer.window,
		re:         re,
		recvReady:  make(chan struct{}),
		closed:     make(chan struct{}),
		shutDown:   make(chan struct{}),
	}
	c.log = cfg.Logger.With("session", fmt.Sprintf("%x", session[:4]))
	c.graceTimer = time.AfterFunc(time.Hour, c.graceOver)
	c.graceTimer.Stop()
	for i, ri := range rails {
		r := &rail{idx: i, name: ri.name, nominal: ri.nominal, c: ri.c, nic: nicOf(ri.c), life: lifecycle{phase: phaseUp},
			br: hs.NewReader(ri.c, 64<<10), wake: make(chan struct{}, 1), goneAway: make(chan struct{}), readerDone: make(chan struct{}), bgResume: make(chan struct{}, 1), pollCh: make(chan int, 1)}
		r.setKeys(ri.keys)
		r.w.qw = hs.NewQuickWriter(ri.c)
		r.notSent = notSentFor(0, cfg.FrameSize)
		hs.Tune(ri.c, r.notSent)
		core, err := sender.New[*segment](sender.Config{QueueDepth: cfg.QueueDepth, SegmentSize: cfg.FrameSize,
			RateWindow: rateWindow, Pipe: int64(r.notSent), Dispatched: cfg.DispatchInterval > 0, Nominal: ri.nominal})
		if err != nil {
			return nil, err
		}
		r.core = core
		r.onAck = func(e entry) { c.acked(r, e) }
		r.ackLazy = cfg.BusyPoll > 0
		r.ackTimer = time.AfterFunc(time.Hour, r.ackDue)
		r.ackTimer.Stop()
		c.rails = append(c.rails, r)
	}
	if p, ok := sch.(sched.Planning); ok && p.Plans() && cfg.PlanMin >= 0 && len(c.rails) > 1 {
		c.planning = true
	}
	if ex, ok := sch.(sched.Explainer); ok {
		c.explainer = ex
	}
	if ob, ok := sch.(sched.DeliveryObserver); ok {
		c.observer = ob
	}
	c.pollJoin()
	for _, r := range c.rails {
		c.wg.Add(2)
		go c.writer(r, 0)
		go c.reader(r)
	}
	if len(c.rails) > 1 {
		c.wg.Add(1)
		go c.supervise()
	}
	if cfg.DispatchInterval > 0 {
		tick, stop := dispatchTicker(cfg.DispatchInterval)
		c.wg.Add(1)
		go c.dispatcher(tick, stop)
	}
	return c, nil
}

func sessionID(s [16]byte) uint64 {
	var v uint64
	for _, b := range s[:8] {
		v = v<<8 | uint64(b)
	}
	return v
}

func (c *Conn) now() int64 { return int64(time.Since(c.start)) }

// broadcast wakes everything waiting on c.changed. Caller holds c.mu.
func (c *Conn) broadcast() {
	if c.changeWaiters == 0 {
		return
	}
	close(c.changed)
	c.changed = make(chan struct{})
	c.changeWaiters = 0
}

// changedLocked returns the channel to wait on for the next change and
// counts the caller as waiting. Caller holds c.mu.
func (c *Conn) changedLocked() chan struct{} {
	c.changeWaiters++
	return c.changed
}

// ErrPeerClosed is returned by Send after the peer closed the connection
// (Recv returns io.EOF then); it wraps net.ErrClosed.
var ErrPeerClosed = fmt.Errorf("multirail: peer closed the connection: %w", net.ErrClosed)

// closeLinger bounds how long Close spends writing what is still queued.
const closeLinger = 2 * time.Second

// Close closes the connection. Messages already handed to the rails
// (including eager ones whose Send has returned) are written first, for at
// most two seconds; then the peer is told (GOAWAY), it acknowledges what
// it received, and every rail is closed. Sends and Recvs still waiting
// return ErrClosed.
//
// Close returns an error wrapping ErrUndelivered when eager messages
// whose Send had returned nil were not acknowledged by the end (never
// written, or written without an acknowledgement), also when the
// connection had failed before Close; otherwise nil. Eager messages are
// delivered at most once across a failure: such a message may be lost, or
// may have arrived with its acknowledgement lost. A larger message's Send
// itself reports whether the peer has all of it.
func (c *Conn) Close() error {
	c.shutdown(ErrClosed, true)
	c.wg.Wait()
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.lost
}

// SetStageStats makes Stats report f() as Stages: the telemetry of the
// loss-tolerant stage connection running over c (lossy.NewStageConn calls
// it; with several, the last one's). nil stops it.
func (c *Conn) SetStageStats(f func() StageStats) {
	if f == nil {
		c.stageStats.Store(nil)
		return
	}
	c.stageStats.Store(&f)
}

// NominalBps is the sum of the rails' nominal rates in bit/s
// (Rail.Bandwidth), 0 when none is known.
func (c *Conn) NominalBps() float64 {
	var bps float64
	for _, r := range c.rails {
		bps += r.nominal
	}
	return bps
}

// undelivered counts the eager messages left on the rails at shutdown.
type undelivered struct {
	unsent, unacked           int
	unsentBytes, unackedBytes int64
}

// add counts e if it is an eager message's segment (a large message's
// Send reports the failure itself); written says it was written.
func (u *undelivered) add(e entry, written bool) {
	switch {
	case e.Seg.msg != nil:
	case written:
		u.unacked++
		u.unackedBytes += int64(len(e.Seg.payload))
	default:
		u.unsent++
		u.unsentBytes += int64(len(e.Seg.payload))
	}
}

func (u *undelivered) err() error {
	if u.unsent+u.unacked == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d eager messages (%d bytes) whose Send returned nil: %d never written, %d (%d bytes) written but not acknowledged (those may have arrived)",
		ErrUndelivered, u.unsent+u.unacked, u.unsentBytes+u.unackedBytes, u.unsent, u.unacked, u.unackedBytes)
}

// shutdown closes the connection once with err. goAway makes every
// writer send GOAWAY first (bounded wait).
func (c *Conn) shutdown(err error, goAway bool) { c.shutdownOnce(err, goAway, true) }

// shutdownOnce is shutdown; the first caller (the one that sets
// shuttingDown) does the work, and a later one waits for it to end if
// wait, else returns at once. A rail's reader passes wait false: the first
// shutdown may be waiting for that very reader to end (both ends closing
// at once: the reader sees the peer's GOAWAY while Close waits for it).
func (c *Conn) shutdownOnce(err error, goAway, wait bool) {
	if !c.shuttingDown.CompareAndSwap(false, true) {
		if wait {
			<-c.shutDown
		}
		return
	}
	c.closeOnce.Do(func() {
		defer close(c.shutDown)
		c.errMu.Lock()
		c.err = err
		c.errMu.Unlock()
		c.mu.Lock()
		c.shutting = true // from now on no attach swaps a rail's connection
		goneAway := make([]chan struct{}, len(c.rails))
		readerDone := make([]chan struct{}, len(c.rails))
		for i, r := range c.rails {
			goneAway[i], readerDone[i] = r.goneAway, r.readerDone
		}
		c.mu.Unlock()
		if c.hooks.onClose != nil {
			c.hooks.onClose()
		}
		if goAway {
			code := wire.GoAwayClose
			if errors.Is(err, ErrProtocol) {
				code = wire.GoAwayProtocol
			}
			c.goingAway.Store(uint32(code) + 1)
			c.graceTimer.Stop()
			for _, r := range c.rails {
				select {
				case r.bgResume <- struct{}{}: // readers read to the end while we close
				default:
				}
			}
			expired := make(chan struct{})
			deadline := time.AfterFunc(closeLinger+200*time.Millisecond, func() { close(expired) })
			for _, r := range c.rails {
				r.signal()
			}
			for _, ch := range goneAway {
				select {
				case <-ch:
				case <-expired:
				}
			}
			if code == wire.GoAwayClose {
				// Read until the peer closes its ends, so that closing ours
				// does not reset what the peer still has to read.
				for _, ch := range readerDone {
					select {
					case <-ch:
					case <-expired:
					}
				}
			}
			deadline.Stop()
		}
		close(c.closed)
		c.graceTimer.Stop()
		c.pokeMu.Lock()
		if c.pokeStop != nil {
			c.pokeStop()
		}
		c.pokeMu.Unlock()
		c.mu.Lock()
		for _, r := range c.rails {
			_ = r.c.Close()
		}
		c.pollLeave() // after the close: a reader woken from its parking sees it
		var lost undelivered
		for _, e := range c.out.held {
			lost.add(e, e.Sent != 0)
		}
		c.out.held = nil
		var left []entry
		for _, r := range c.rails {
			// Segments are left to the garbage collector, not the pool: a
			// writer may still hold them.
			r.life.close()
			r.down.Store(true)
			r.ackTimer.Stop()
			flying := r.core.InFlight()
			left = r.core.Drain(left[:0])
			for i, e := range left {
				lost.add(e, i < flying)
			}
		}
		c.broadcast()
		c.mu.Unlock()
		if err := lost.err(); err != nil {
			c.errMu.Lock()
			c.lost = err
			c.errMu.Unlock()
			c.log.Warn("closed with eager messages unacknowledged", "err", err)
		}
	})
}

func (c *Conn) closedErr() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	if c.err == nil {
		return ErrClosed
	}
	return c.err
}

func (c *Conn) closedErrNonBlocking() error {
	select {
	case <-c.closed:
		return c.closedErr()
	default:
		return nil
	}
}
