package multirail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	hs "github.com/multirail/multirail/internal/handshake"
	"github.com/multirail/multirail/internal/reasm"
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
)

// Message is a received message.
type Message struct {
	Tag  uint32
	Data []byte
}

// outMsg is one message being sent.
type outMsg struct {
	remaining int // segments not yet acknowledged (guarded by Conn.mu)
	done      chan struct{}
}

// segment is one DATA frame queued or in flight on a rail.
type segment struct {
	hdr     [wire.DataHeaderSize]byte
	payload []byte
	msg     *outMsg
	enq     int64   // ns since the connection started, when it entered the queue
	sent    int64   // ns since the connection started, when it was written
	owned   *[]byte // the eager copy of the payload, returned to eagerPool on ACK
}

// eagerPool holds copies of eager messages until they are acknowledged.
var eagerPool = sync.Pool{New: func() any { b := make([]byte, 0, DefaultEagerLimit); return &b }}

var segPool = sync.Pool{New: func() any { return new(segment) }}

// fifo is a queue of segments.
type fifo struct {
	s    []*segment
	head int
}

func (f *fifo) len() int { return len(f.s) - f.head }
func (f *fifo) push(s *segment) {
	if f.head > 0 && len(f.s) == cap(f.s) {
		n := copy(f.s, f.s[f.head:])
		clear(f.s[n:])
		f.s = f.s[:n]
		f.head = 0
	}
	f.s = append(f.s, s)
}
func (f *fifo) pop() *segment {
	s := f.s[f.head]
	f.s[f.head] = nil
	f.head++
	if f.head == len(f.s) {
		f.s, f.head = f.s[:0], 0
	}
	return s
}
func (f *fifo) drain() []*segment {
	out := append([]*segment(nil), f.s[f.head:]...)
	clear(f.s)
	f.s, f.head = f.s[:0], 0
	return out
}

// rail is one path of a Conn: its TCP connection and that connection's
// two goroutines. After a failure the dialing side reconnects it (attach);
// each connection is one generation (gen) of the rail.
type rail struct {
	idx     int
	name    string
	nominal float64
	// gen, c, br, readerDone and goneAway change only in attach, which
	// holds rdMu, wmu and Conn.mu; holding any of them is enough to read.
	gen  uint64
	c    net.Conn
	br   *hs.Reader
	wake chan struct{} // cap 1: work for the writer
	wmu  sync.Mutex    // held by whoever writes on c
	w    wstate        // guarded by wmu
	// ackTimer sends a delayed ACK (eager data, returned credit) unless a
	// frame of ours carries it first.
	ackTimer  *time.Timer
	ackArmed  atomic.Bool
	ackedOut  atomic.Uint64 // the Received count of the last ACK written
	creditDue atomic.Bool   // returned credit waits for an ACK

	readerDone chan struct{} // closed when the reader goroutine exits
	midFrame   atomic.Bool   // the reader has read part of a frame and waits for the rest
	quietReads uint64        // br.Reads() at the supervisor's last look (supervisor only)
	quietSince int64         // c.now() since when br.Reads() has not changed (supervisor only)
	rdMu       sync.Mutex    // held by whoever reads c
	rs         rstate        // guarded by rdMu
	bgResume   chan struct{} // cap 1: the reader goroutine may read again
	pokeMu     sync.Mutex
	poked      bool // a read deadline was set to interrupt a Recv (guarded by pokeMu)

	// guarded by Conn.mu
	up          bool
	peerDone    bool // the peer sent GOAWAY on this rail
	queue       fifo
	queuedBytes int64
	release     int // queued segments the dispatch timer let go, not yet taken (DispatchInterval > 0)
	unacked     fifo
	acked       uint64 // DATA frames the peer acknowledged on this rail
	lastWait    int64
	rate        float64 // drain-rate estimate, bits/s
	notSent     int     // the socket's TCP_NOTSENT_LOWAT
	ackedBytes  int64   // bytes the peer acknowledged on this rail
	rateT0      int64   // start of the current rate sample (c.now())
	rateB0      int64   // ackedBytes at rateT0
	busySince   int64   // c.now() since when the queue has been non-empty, 0 if empty
	progressAt  int64   // c.now() of the last ACK progress, or when unacked became non-empty
	ackDelay    float64 // smoothed time from writing a segment to its ACK, ns
	attaching   bool    // attach is replacing the connection
	rejoining   bool    // a rejoin attempt is running (dialing side)
	noRejoin    bool    // the peer refused a rejoin: the session is gone there
	nextTry     int64   // c.now() from which the next rejoin attempt may start
	backoff     time.Duration
	rejoins     uint64 // connections that replaced a failed one
	lastErr     error  // why the rail last failed

	// receive side and counters
	received atomic.Uint64 // DATA frames received on this rail
	bytesOut atomic.Uint64
	segsOut  atomic.Uint64
	bytesIn  atomic.Uint64
	segsIn   atomic.Uint64
	errs     atomic.Uint64
	down     atomic.Bool   // mirrors !up for lock-free readers
	goneAway chan struct{} // closed when the writer has sent GOAWAY and exited
}

func (r *rail) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Conn is a multi-rail connection: messages sent on it are cut into
// segments spread over all rails and reassembled whole on the other side.
// All methods are safe for concurrent use.
type Conn struct {
	cfg     config
	log     *slog.Logger
	session [16]byte
	sid     uint64
	start   time.Time
	rails   []*rail
	peerMax uint64     // the largest message the peer accepts
	peer    peerParams // what the peer announced; rejoins must match it
	hooks   connHooks
	stages  atomic.Pointer[StageConn] // set by NewStageConn

	mu            sync.Mutex
	shutting      bool // shutdown has begun: no rail may be attached any more
	sch           sched.Scheduler
	states        []sched.RailState
	changed       chan struct{} // closed and replaced on every change senders may wait for
	enqueuing     chan struct{} // cap 1: held by the Send queueing a large message
	changeWaiters int           // goroutines waiting on changed
	nextID        uint64
	peerCredit    uint64 // cumulative credit granted by the peer
	usedCredit    uint64
	peerWindow    uint64
	sentMsgs      uint64
	ticks         uint64                 // dispatch timer ticks so far
	explainer     sched.Explainer        // c.sch, if it explains itself
	observer      sched.DeliveryObserver // c.sch, if it learns from deliveries
	explain       sched.Explanation      // reused by Stats
	recent        [RecentChoices]uint8   // ring of the last rail choices, indexed by picks % RecentChoices
	picks         uint64                 // rail choices made by the scheduler so far
	recvMsgs      atomic.Uint64
	goingAway     atomic.Uint32 // GOAWAY code + 1 once Close started
	recvWants     atomic.Int32  // Recvs that may read the rail themselves
	recvGrace     atomic.Bool   // a Recv just left; the next one probably comes soon
	lastRecvExit  atomic.Int64  // c.now() when the last Recv left
	pokeMu        sync.Mutex
	pokeDone      <-chan struct{} // the context watchCtx keeps watching
	pokeStop      func() bool
	graceTimer    *time.Timer
	creditUnsent  atomic.Uint64 // credit returned by Recv, not yet announced promptly

	rmu         sync.Mutex
	re          *reasm.Reassembler
	recvReady   chan struct{} // closed and replaced when a message becomes ready
	recvWaiters int           // Recvs waiting on recvReady
	railFreed   uint64        // counts the reader goroutine leaving the rail to Recv
	peerGone    bool          // GOAWAY received

	closeOnce    sync.Once
	closed       chan struct{}
	shuttingDown atomic.Bool // set first thing by shutdown
	errMu        sync.Mutex
	err          error
	wg           sync.WaitGroup
}

// railInit is what the handshake hands to newConn for one rail.
type railInit struct {
	c       net.Conn
	name    string
	nominal float64
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
	redial func(ctx context.Context, idx int) (net.Conn, error)
	// onClose runs once when the connection shuts down.
	onClose func()
}

func newConn(cfg config, session [16]byte, rails []railInit, peer peerParams, sch sched.Scheduler, hooks connHooks) (*Conn, error) {
	re, err := reasm.New(reasm.Config{SegmentSize: peer.seg, MaxMessage: cfg.MaxMessageSize, Window: uint64(cfg.MaxReceiveBuffer), Alloc: allocRecv})
	if err != nil {
		return nil, err
	}
	c := &Conn{
		cfg:        cfg,
		session:    session,
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
		peerCredit: peer.window,
		peerWindow: peer.window,
		re:         re,
		recvReady:  make(chan struct{}),
		closed:     make(chan struct{}),
	}
	c.log = cfg.Logger.With("session", fmt.Sprintf("%x", session[:4]))
	c.graceTimer = time.AfterFunc(time.Hour, c.graceOver)
	c.graceTimer.Stop()
	for i, ri := range rails {
		r := &rail{idx: i, name: ri.name, nominal: ri.nominal, c: ri.c, up: true,
			br: hs.NewReader(ri.c, 64<<10), wake: make(chan struct{}, 1), goneAway: make(chan struct{}), readerDone: make(chan struct{}), bgResume: make(chan struct{}, 1)}
		r.notSent = notSentFor(0, cfg.SegmentSize)
		hs.Tune(ri.c, r.notSent)
		r.ackTimer = time.AfterFunc(time.Hour, r.ackDue)
		r.ackTimer.Stop()
		c.rails = append(c.rails, r)
	}
	if ex, ok := sch.(sched.Explainer); ok {
		c.explainer = ex
	}
	if ob, ok := sch.(sched.DeliveryObserver); ok {
		c.observer = ob
	}
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

// dispatchTicker starts the dispatch timer and returns its channel and a
// function that stops it. Tests replace it to tick by hand.
var dispatchTicker = func(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// dispatcher is the dispatch timer of Config.DispatchInterval: at every
// tick it releases everything queued on each rail to the rail's writer,
// which takes nothing else from its queue (see writeBatch). Segments queued
// after the tick wait for the next one.
func (c *Conn) dispatcher(tick <-chan time.Time, stop func()) {
	defer c.wg.Done()
	defer stop()
	for {
		select {
		case <-tick:
		case <-c.closed:
			return
		}
		var due uint64 // rails with something released; MaxRails <= 64
		c.mu.Lock()
		c.ticks++
		for i, r := range c.rails {
			r.release = r.queue.len()
			if r.release > 0 {
				due |= 1 << i
			}
		}
		c.mu.Unlock()
		for i, r := range c.rails {
			if due&(1<<i) != 0 {
				r.signal()
			}
		}
	}
}

// dispatched reports whether segments leave the queues on the dispatch
// timer rather than continuously.
func (c *Conn) dispatched() bool { return c.cfg.DispatchInterval > 0 }

// sendableLocked is how many of r's queued segments its writer may take
// now: all of them, or on the dispatch timer those released at the last
// tick. Caller holds c.mu.
func (c *Conn) sendableLocked(r *rail) int {
	if c.dispatched() {
		return min(r.release, r.queue.len())
	}
	return r.queue.len()
}

// pickLocked asks the scheduler for a rail for a segment of size bytes and
// records the choice in c.recent. It returns -1 when the scheduler
// declined or returned a rail that cannot be used. Caller holds c.mu.
func (c *Conn) pickLocked(size int) int {
	c.fillStates()
	i := c.sch.Pick(c.now(), size, c.states)
	if i < 0 || i >= len(c.rails) || !c.rails[i].up {
		return -1 // a scheduler bug must not wedge the connection
	}
	c.recent[c.picks%RecentChoices] = uint8(i)
	c.picks++
	return i
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

// fillStates refreshes c.states. Caller holds c.mu.
func (c *Conn) fillStates() {
	seg := float64(c.cfg.SegmentSize) * 8
	for i, r := range c.rails {
		st := &c.states[i]
		st.Up = r.up
		st.Queued = r.queue.len()
		st.QueuedBytes = r.queuedBytes
		st.QueueCap = c.cfg.QueueDepth
		st.LastWait = r.lastWait
		st.RateBps = r.rate
		st.NominalBps = r.nominal
		st.SegmentTime = 0
		if rate := r.rate; rate > 0 {
			st.SegmentTime = int64(seg / rate * 1e9)
		} else if r.nominal > 0 {
			st.SegmentTime = int64(seg / r.nominal * 1e9)
		}
	}
}

// Send sends msg with tag. Messages with the same tag are received in the
// order their Sends started; concurrent Sends pipeline.
//
// A message of at most Config.EagerLimit bytes is copied and Send returns
// once it is handed to a rail (MPI's eager protocol). A larger message is
// written from msg without copying, and Send returns once the peer holds
// all of it; msg must not be modified before then.
//
// ctx bounds the wait for the peer's flow-control credit. Once a large
// message has been handed to the rails, cancelling ctx makes Send return
// ctx's error, but the message stays in flight and will be delivered unless
// the connection fails; msg must then not be modified before Close.
func (c *Conn) Send(ctx context.Context, tag uint32, msg []byte) (err error) {
	released := false
	if int64(len(msg)) > c.cfg.MaxMessageSize {
		return fmt.Errorf("%w: %d bytes, MaxMessageSize is %d", ErrTooLarge, len(msg), c.cfg.MaxMessageSize)
	}
	cost := reasm.Cost(uint64(len(msg)))
	if uint64(len(msg)) > c.peerMax || cost > c.peerWindow {
		return fmt.Errorf("%w: %d bytes, the peer accepts at most %d", ErrTooLarge, len(msg), min(c.peerMax, c.peerWindow-reasm.Overhead))
	}
	eager := len(msg) <= c.cfg.EagerLimit
	if !eager {
		// Large messages are queued one after the other, so that they
		// complete one after the other and the rails never idle while all
		// of them wait for their last segments. Eager messages slip in
		// between.
		select {
		case c.enqueuing <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.closed:
			return c.closedErr()
		}
		defer func() {
			if !released {
				<-c.enqueuing
			}
		}()
	}
	c.mu.Lock()
	for c.usedCredit+cost > c.peerCredit {
		ch := c.changedLocked()
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.closed:
			return c.closedErr()
		}
		c.mu.Lock()
	}
	if err := c.closedErrNonBlocking(); err != nil {
		c.mu.Unlock()
		return err
	}
	c.usedCredit += cost
	id := c.nextID
	c.nextID++
	seg := c.cfg.SegmentSize
	n := 1
	if len(msg) > 0 {
		n = (len(msg) + seg - 1) / seg
	}
	var om *outMsg // nil for eager messages: nobody waits for them
	if !eager {
		om = &outMsg{remaining: n, done: make(chan struct{})}
	}
	var last *rail
	flags := uint8(0)
	if c.cfg.Checksum {
		flags = wire.FlagCRC
	}
	if eager {
		flags |= wire.FlagEager
	}
	for off := 0; off < len(msg) || off == 0; off += seg {
		end := min(off+seg, len(msg))
		s := segPool.Get().(*segment)
		s.payload = msg[off:end]
		if eager {
			var b *[]byte
			if len(msg) <= DefaultEagerLimit {
				b = eagerPool.Get().(*[]byte)
			} else {
				nb := make([]byte, 0, len(msg))
				b = &nb
			}
			*b = append((*b)[:0], msg...)
			s.owned, s.payload = b, *b
		}
		s.msg = om
		d := wire.Data{Flags: flags, Session: c.sid, Message: id, Tag: tag, Total: uint64(len(msg)), Offset: uint64(off), Len: uint32(end - off)}
		if c.cfg.Checksum {
			d.CRC = wire.Checksum(s.payload)
		}
		wire.PutData(s.hdr[:], d)
		r, err := c.enqueueLocked(s, n == 1) // a single segment is flushed below
		if err != nil {
			c.mu.Unlock()
			return err
		}
		last = r
		if end == len(msg) {
			break
		}
	}
	c.sentMsgs++
	// On the dispatch timer the segments wait for the next tick.
	continuous := !c.dispatched()
	idle := continuous && n == 1 && last.queue.len() == 1
	c.mu.Unlock()
	if !eager {
		<-c.enqueuing
		released = true
	}
	if idle {
		// A one-segment message on an idle rail goes out from here,
		// without a goroutine hop.
		c.tryFlush(last, false)
	} else if continuous && n == 1 {
		last.signal()
	}
	if eager {
		return nil
	}
	select {
	case <-om.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closed:
		select {
		case <-om.done:
			return nil
		default:
		}
		return c.closedErr()
	}
}

// enqueueLocked asks the scheduler for a rail and queues s on it. When the
// chosen rail is full it waits (with c.mu released) for room on that rail,
// as the scheduler decided; when no rail is acceptable it waits for any
// change and asks again.
//
// It returns the rail used. Unless inline, the rail's writer is signalled
// (on the dispatch timer it is not: the next tick does it); inline callers
// write the segment themselves (tryFlush).
func (c *Conn) enqueueLocked(s *segment, inline bool) (*rail, error) {
	size := len(s.payload) + wire.DataHeaderSize
	chosen := -1
	for {
		if err := c.closedErrNonBlocking(); err != nil {
			return nil, err
		}
		if c.goingAway.Load() != 0 {
			return nil, c.closedErr()
		}
		if chosen < 0 || !c.rails[chosen].up {
			chosen = c.pickLocked(size)
		}
		if chosen >= 0 && c.rails[chosen].queue.len() < c.cfg.QueueDepth {
			r := c.rails[chosen]
			c.push(r, s)
			if !inline && !c.dispatched() {
				r.signal()
			}
			return r, nil
		}
		if !c.anyUp() {
			return nil, ErrAllRailsDown
		}
		ch := c.changedLocked()
		c.mu.Unlock()
		select {
		case <-ch:
		case <-c.closed:
		}
		c.mu.Lock()
	}
}

// push queues s on r. Caller holds c.mu.
func (c *Conn) push(r *rail, s *segment) {
	s.enq = c.now()
	if r.queue.len() == 0 && r.busySince == 0 {
		r.busySince = s.enq
	}
	r.queue.push(s)
	r.queuedBytes += int64(len(s.payload) + wire.DataHeaderSize)
}

func (c *Conn) anyUp() bool {
	for _, r := range c.rails {
		if r.up {
			return true
		}
	}
	return false
}

// Recv returns the next message. Messages of one tag come in the order they
// were sent; messages of different tags may overtake each other. After the
// peer closed the connection, Recv returns the messages already received and
// then io.EOF.
func (c *Conn) Recv(ctx context.Context) (Message, error) {
	// With one rail, Recv reads the rail itself instead of waiting to be
	// handed each message by the rail's reader goroutine: that saves a
	// goroutine wake-up per message. Cancelling ctx interrupts the read at
	// the next frame boundary.
	direct := len(c.rails) == 1
	if direct {
		c.recvWants.Add(1)
		defer c.recvExit()
		if ctx.Done() != nil {
			if stop := c.watchCtx(ctx); stop != nil {
				defer stop()
			}
		}
	}
	for {
		c.rmu.Lock()
		m, ok := c.re.Next()
		ch := c.recvReady
		gone := c.peerGone
		free := c.railFreed
		c.rmu.Unlock()
		if ok {
			c.recvMsgs.Add(1)
			c.creditChanged(reasm.Cost(uint64(len(m.Data))))
			return Message{Tag: m.Tag, Data: m.Data}, nil
		}
		if gone {
			return Message{}, io.EOF
		}
		if direct && c.goingAway.Load() == 0 {
			if err := ctx.Err(); err != nil {
				return Message{}, err
			}
			if r := c.rails[0]; r.rdMu.TryLock() {
				err := c.readFrame(r)
				r.rdMu.Unlock()
				if err == errPoked {
					if ctx.Err() != nil {
						return Message{}, ctx.Err()
					}
					continue
				}
				if err != nil {
					direct = false // the rail is finished; wait below
				}
				continue
			}
		}
		c.rmu.Lock()
		if c.re.Ready() || c.peerGone || ch != c.recvReady || (direct && free != c.railFreed) {
			c.rmu.Unlock()
			continue // something happened meanwhile
		}
		c.recvWaiters++
		c.rmu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return Message{}, ctx.Err()
		case <-c.closed:
			c.rmu.Lock()
			ready := c.re.Ready()
			c.rmu.Unlock()
			if !ready {
				if err := c.closedErr(); errors.Is(err, ErrPeerClosed) {
					return Message{}, io.EOF
				}
				return Message{}, c.closedErr()
			}
		}
	}
}

// watchCtx makes cancelling ctx interrupt a Recv reading the rail itself.
// A lone Recv keeps the registration for the next call with the same
// context (a long-lived context then costs nothing per message); with
// concurrent Recvs each registers its own and gets a stop function.
func (c *Conn) watchCtx(ctx context.Context) (stop func() bool) {
	r := c.rails[0]
	if c.recvWants.Load() > 1 {
		return context.AfterFunc(ctx, r.poke)
	}
	c.pokeMu.Lock()
	defer c.pokeMu.Unlock()
	if c.pokeDone != ctx.Done() {
		if c.pokeStop != nil {
			c.pokeStop()
		}
		c.pokeStop = context.AfterFunc(ctx, r.poke)
		c.pokeDone = ctx.Done()
	}
	return nil
}

// recvMayRead reports whether a Recv reads the rail itself (or did so a
// moment ago and probably will again), so the reader goroutine stays away.
func (c *Conn) recvMayRead() bool {
	return len(c.rails) == 1 && (c.recvWants.Load() > 0 || c.recvGrace.Load())
}

// recvExit ends a Recv that could read the rail itself: the reader
// goroutine takes over if no Recv comes back within AckDelay.
func (c *Conn) recvExit() {
	if c.recvWants.Add(-1) == 0 {
		c.lastRecvExit.Store(c.now())
		if !c.recvGrace.Swap(true) {
			c.graceTimer.Reset(AckDelay)
		}
	}
}

// graceOver hands the rail back to its reader goroutine once no Recv has
// been in for AckDelay.
func (c *Conn) graceOver() {
	if c.recvWants.Load() != 0 || c.now()-c.lastRecvExit.Load() < int64(AckDelay) {
		c.graceTimer.Reset(AckDelay) // still busy: look again later
		return
	}
	c.recvGrace.Store(false)
	for _, r := range c.rails {
		select {
		case r.bgResume <- struct{}{}:
		default:
		}
	}
}

// wakeRecv wakes every waiting Recv, so that one of them takes over
// reading the rail.
func (c *Conn) wakeRecv() {
	c.rmu.Lock()
	c.railFreed++ // a Recv that has not started waiting yet sees this
	if c.recvWaiters > 0 {
		close(c.recvReady)
		c.recvReady = make(chan struct{})
		c.recvWaiters = 0
	}
	c.rmu.Unlock()
}

// creditChanged returns cost bytes of credit to the peer: at once when
// much has accumulated (the peer may be waiting), otherwise within
// AckDelay or piggybacked on the next frame.
func (c *Conn) creditChanged(cost uint64) {
	r := c.rails[0]
	for _, x := range c.rails {
		if x.isUp() {
			r = x
			break
		}
	}
	if c.creditUnsent.Add(cost) >= c.cfg.creditBatch() {
		c.creditUnsent.Store(0)
		r.signal()
		return
	}
	r.creditDue.Store(true)
	r.delayAck()
}

func (r *rail) isUp() bool { return !r.down.Load() }

// ErrPeerClosed is returned by Send after the peer closed the connection
// (Recv returns io.EOF then); it wraps net.ErrClosed.
var ErrPeerClosed = fmt.Errorf("multirail: peer closed the connection: %w", net.ErrClosed)

// closeLinger bounds how long Close spends writing what is still queued.
const closeLinger = 2 * time.Second

// Close closes the connection. Messages already handed to the rails
// (including eager ones whose Send has returned) are written first, for at
// most two seconds; then the peer is told (GOAWAY) and every rail is
// closed. Sends and Recvs still waiting return ErrClosed.
func (c *Conn) Close() error {
	c.shutdown(ErrClosed, true)
	c.wg.Wait()
	return nil
}

// shutdown closes the connection once with err. goAway makes every
// writer send GOAWAY first (bounded wait).
func (c *Conn) shutdown(err error, goAway bool) {
	c.closeOnce.Do(func() {
		c.shuttingDown.Store(true)
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
		for _, r := range c.rails {
			// Segments are left to the garbage collector, not the pool: a
			// writer may still hold them.
			r.up = false
			r.down.Store(true)
			r.ackTimer.Stop()
			r.queue.drain()
			r.unacked.drain()
			r.queuedBytes = 0
			r.release = 0
		}
		c.broadcast()
		c.mu.Unlock()
	})
}

func putSeg(s *segment) {
	if s.owned != nil && cap(*s.owned) == DefaultEagerLimit {
		eagerPool.Put(s.owned)
	}
	s.payload, s.msg, s.owned = nil, nil, nil
	segPool.Put(s)
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

// railDown takes r out of service after err on its connection of
// generation gen (nothing happens if that connection was replaced since):
// its queued and unacknowledged segments go to the other rails. With no
// rail left the connection fails.
func (c *Conn) railDown(r *rail, gen uint64, err error) {
	c.mu.Lock()
	if !r.up || r.gen != gen {
		c.mu.Unlock()
		return
	}
	select {
	case <-c.closed:
		c.mu.Unlock()
		return
	default:
	}
	if c.goingAway.Load() != 0 {
		// Closing: the peer may close its ends before we close ours.
		c.mu.Unlock()
		return
	}
	segs := r.takeDownLocked(err)
	r.busySince = 0
	r.nextTry = c.now() // a reset connection may come back at once
	if c.peerGoneLocked() && c.anyPeerDone() {
		c.mu.Unlock()
		c.peerClosed() // the other rails had said goodbye already
		return
	}
	if !c.anyUp() {
		c.mu.Unlock()
		c.log.Warn("rail down; no rail left", "rail", r.name, "err", err)
		c.shutdown(fmt.Errorf("%w (last: %s: %v)", ErrAllRailsDown, r.name, err), false)
		return
	}
	c.log.Warn("rail down; resending its segments on the others", "rail", r.name, "err", err, "segments", len(segs))
	c.resendLocked(segs)
	c.broadcast()
	c.mu.Unlock()
}

// resendLocked queues segments taken off a failed rail on the rails that
// are up, as the scheduler chooses. Caller holds c.mu; at least one rail is
// up.
func (c *Conn) resendLocked(segs []*segment) {
	for _, s := range segs {
		i := c.pickLocked(len(s.payload) + wire.DataHeaderSize)
		if i < 0 {
			i = c.firstUp()
		}
		c.push(c.rails[i], s) // may exceed QueueDepth: resends are not held back
		if !c.dispatched() {
			c.rails[i].signal() // on the dispatch timer the next tick does it
		}
	}
}

// takeDownLocked takes r's connection out of service after err: it is
// reset and closed, its writer told to exit, and its unacknowledged and
// queued segments (in that order) returned. Caller holds c.mu.
func (r *rail) takeDownLocked(err error) []*segment {
	r.up = false
	r.down.Store(true)
	r.errs.Add(1)
	r.lastErr = err
	if tc, ok := r.c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // reset: what the kernel still holds is sent again
	}
	_ = r.c.Close()
	r.signal() // the writer sees the rail down and exits
	segs := append(r.unacked.drain(), r.queue.drain()...)
	r.queuedBytes, r.release = 0, 0
	return segs
}

// peerGoneLocked reports whether every rail is down or was closed by the
// peer's GOAWAY. Caller holds c.mu.
func (c *Conn) peerGoneLocked() bool {
	for _, r := range c.rails {
		if r.up && !r.peerDone {
			return false
		}
	}
	return true
}

func (c *Conn) anyPeerDone() bool {
	for _, r := range c.rails {
		if r.peerDone {
			return true
		}
	}
	return false
}

// peerClosed ends the connection after the peer's orderly close: Recv
// returns what arrived, then io.EOF.
func (c *Conn) peerClosed() {
	c.rmu.Lock()
	c.peerGone = true
	c.notifyRecvLocked()
	c.rmu.Unlock()
	if c.shuttingDown.Load() {
		// This side is closing too and waits for this reader: shutting
		// down again would wait for the first shutdown, which waits for
		// us (until closeLinger), when both sides close at once.
		return
	}
	c.shutdown(ErrPeerClosed, false)
}

func (c *Conn) firstUp() int {
	for i, r := range c.rails {
		if r.up {
			return i
		}
	}
	return -1
}

// protocolError closes the whole connection: the peer is broken or hostile.
func (c *Conn) protocolError(r *rail, err error) {
	r.errs.Add(1)
	c.log.Warn("peer violated the protocol; closing the connection", "rail", r.name, "err", err)
	c.shutdown(fmt.Errorf("%w: %v", ErrProtocol, err), true)
}

// isProtocol tells decoding errors from network errors.
func isProtocol(err error) bool {
	return errors.Is(err, wire.ErrMalformed) || errors.Is(err, reasm.ErrCredit) || errors.Is(err, reasm.ErrInconsistent) || errors.Is(err, ErrProtocol)
}

// The kernel holds about kernelAhead worth of a rail's rate unsent
// (TCP_NOTSENT_LOWAT), within [minNotSent, maxNotSent]; one writev takes
// half of that from the queue. Slow rails thus keep their backlog in the
// rail's own queue, where the scheduler sees it, while fast rails get
// large writes and few system calls.
const (
	kernelAhead = 2 * time.Millisecond
	minNotSent  = 128 << 10
	maxNotSent  = 4 << 20
)

// smallPayload is the largest payload copied into a write's contiguous
// run instead of getting an iovec of its own.
const smallPayload = 2 << 10

// notSentFor is the unsent-bytes bound for a rail of rate bits/s.
func notSentFor(rate float64, seg int) int {
	return min(maxNotSent, max(minNotSent, 2*seg, int(rate/8*kernelAhead.Seconds())))
}

// wstate is a rail's write-side state, owned by whoever holds rail.wmu:
// the rail's writer goroutine, or a Send or reader taking a fast path.
type wstate struct {
	batch     []*segment
	iov       net.Buffers
	wv        net.Buffers
	run       []byte // contiguous bytes of a write: control, headers, small payloads
	ctl       []byte
	ackSent   uint64
	creditOut uint64
	pingDue   bool
	wrote     bool
	draining  bool // closing: write what is queued, then GOAWAY
}

// writeBatch writes pending control frames (ACK with credit, PING) and,
// unless ctlOnly, up to maxBatch bytes of r's queue, in one writev. On the
// dispatch timer it takes only segments released by a tick (all of them
// once Close is draining). It returns the number of frames written (0:
// nothing was pending). The caller holds r.wmu.
func (c *Conn) writeBatch(r *rail, ctlOnly bool) (int, error) {
	w := &r.w
	if code := c.goingAway.Load(); code != 0 && !w.draining {
		return 0, errGoingAway
	}
	w.batch = w.batch[:0]
	n := 0
	if !ctlOnly {
		c.mu.Lock()
		if !r.up {
			c.mu.Unlock()
			return 0, net.ErrClosed
		}
		now := c.now()
		maxBatch := max(r.notSent/2, c.cfg.SegmentSize)
		limit := r.queue.len()
		if c.dispatched() && !w.draining {
			limit = r.release
		}
		if r.unacked.len() == 0 {
			r.progressAt = now // the rail's ACK clock starts with this batch
		}
		for len(w.batch) < limit && r.queue.len() > 0 && (n == 0 || n+len(r.queue.s[r.queue.head].payload) <= maxBatch) {
			s := r.queue.pop()
			sz := len(s.payload) + wire.DataHeaderSize
			r.queuedBytes -= int64(sz)
			n += sz
			r.lastWait = now - s.enq
			s.sent = now
			r.unacked.push(s)
			w.batch = append(w.batch, s)
		}
		if len(w.batch) > 0 {
			c.fillStates()
			for _, s := range w.batch {
				c.sch.Departed(now, r.idx, len(s.payload)+wire.DataHeaderSize, now-s.enq, c.states)
			}
			c.broadcast()
		}
		r.release -= min(r.release, len(w.batch))
		if r.queue.len() == 0 {
			r.busySince = 0
		}
		c.mu.Unlock()
	}
	w.ctl = w.ctl[:0]
	c.rmu.Lock()
	credit := c.re.Granted()
	c.rmu.Unlock()
	if got := r.received.Load(); got != w.ackSent || credit != w.creditOut {
		w.ackSent, w.creditOut = got, credit
		w.ctl = wire.AppendAck(w.ctl, wire.Ack{Received: got, Credit: credit})
		r.ackedOut.Store(got)
		r.creditDue.Store(false)
	}
	if w.pingDue && len(w.ctl) == 0 && len(w.batch) == 0 {
		w.ctl = wire.AppendPing(w.ctl)
	}
	w.pingDue = false
	if len(w.batch) == 0 && len(w.ctl) == 0 {
		return 0, nil
	}
	// Control frames, headers and small payloads are copied into one
	// contiguous run (a copy of a few bytes is cheaper than an iovec);
	// large payloads are written from the caller's memory.
	iov := w.iov[:0]
	size := len(w.ctl)
	for _, s := range w.batch {
		size += len(s.hdr)
		if len(s.payload) <= smallPayload {
			size += len(s.payload)
		}
	}
	if cap(w.run) < size {
		w.run = make([]byte, 0, size) // appends below then never move it
	}
	run := append(w.run[:0], w.ctl...) // control frames first
	for _, s := range w.batch {
		run = append(run, s.hdr[:]...)
		if len(s.payload) <= smallPayload {
			run = append(run, s.payload...)
			continue
		}
		iov = append(iov, run, s.payload)
		run = run[len(run):] // the next run continues in the same buffer
	}
	if len(run) > 0 {
		iov = append(iov, run)
	}
	w.iov = iov
	var err error
	if len(iov) == 1 {
		_, err = r.c.Write(iov[0])
	} else {
		w.wv = iov // WriteTo consumes w.wv (a field, so nothing escapes), not w.iov
		_, err = w.wv.WriteTo(r.c)
	}
	clear(w.iov)
	w.wrote = true
	if err != nil {
		return 0, err
	}
	if n > 0 {
		r.bytesOut.Add(uint64(n))
		r.segsOut.Add(uint64(len(w.batch)))
	}
	frames := len(w.batch)
	if len(w.ctl) > 0 {
		frames++
	}
	return frames, nil
}

var errGoingAway = errors.New("multirail: closing")

// flush writes until nothing is pending. ctlOnly limits it to control
// frames. The caller holds r.wmu.
func (c *Conn) flush(r *rail, ctlOnly bool) error {
	for {
		n, err := c.writeBatch(r, ctlOnly)
		if err != nil || n == 0 {
			return err
		}
	}
}

// tryFlush writes r's pending frames from the calling goroutine if no one
// else is writing on r, and otherwise leaves them to whoever is (the
// writer goroutine is signalled, so nothing waits for a wake-up that never
// comes).
func (c *Conn) tryFlush(r *rail, ctlOnly bool) {
	if !r.wmu.TryLock() {
		r.signal()
		return
	}
	gen := r.gen
	_, err := c.writeBatch(r, ctlOnly)
	pending := r.received.Load() != r.w.ackSent
	c.mu.Lock()
	pending = pending || c.sendableLocked(r) > 0
	c.mu.Unlock()
	r.wmu.Unlock()
	if err != nil && !errors.Is(err, errGoingAway) {
		c.railDown(r, gen, err)
		return
	}
	if pending {
		r.signal() // what is left goes to the writer goroutine
	}
}

// writer is the rail's writer goroutine: it drains the send queue with
// scatter-gather writes and sends ACKs, credit and pings. Fast paths may
// write in its place while holding r.wmu.
func (c *Conn) writer(r *rail, gen uint64) {
	defer c.wg.Done()
	defer close(r.goneAway)
	ping := time.NewTicker(c.cfg.IdleTimeout / 3)
	defer ping.Stop()
	for {
		pinging := false
		select {
		case <-r.wake:
		case <-ping.C:
			pinging = true
		case <-c.closed:
			return
		}
		r.wmu.Lock()
		if pinging {
			r.w.pingDue = !r.w.wrote
			r.w.wrote = false
		}
		err := c.flush(r, false)
		if errors.Is(err, errGoingAway) {
			code := uint16(c.goingAway.Load() - 1)
			_ = r.c.SetWriteDeadline(time.Now().Add(closeLinger))
			if code == wire.GoAwayClose {
				r.w.draining = true
				err = c.flush(r, false)
			}
			if err == nil || errors.Is(err, errGoingAway) {
				_, _ = r.c.Write(wire.AppendGoAway(nil, code))
				if cw, ok := r.c.(interface{ CloseWrite() error }); ok {
					_ = cw.CloseWrite() // the peer reads to here, then closes
				}
			}
			r.wmu.Unlock()
			return
		}
		r.wmu.Unlock()
		if err != nil {
			c.railDown(r, gen, err)
			return
		}
	}
}

// rateWindow is the shortest interval a delivery-rate sample spans.
const rateWindow = 20 * time.Millisecond

// observeDelivery updates r's rate estimate from acknowledged bytes: the
// rate at which the peer received data on r over the last rateWindow or
// more, counted only while r had a backlog (otherwise the sample measures
// the offered load, not the rail). It also adapts the socket's unsent
// bound to the rate. Caller holds c.mu.
func (c *Conn) observeDelivery(r *rail, bytes int) {
	now := c.now()
	r.ackedBytes += int64(bytes)
	if r.rateT0 == 0 {
		r.rateT0, r.rateB0 = now, r.ackedBytes
		return
	}
	if now-r.rateT0 < int64(rateWindow) {
		return
	}
	sample := float64(r.ackedBytes-r.rateB0) * 8 / (float64(now-r.rateT0) / 1e9)
	// Busy: a backlog waited in the queue all along, or the pipe holds at
	// least what the kernel may keep unsent.
	busy := (r.queue.len() > 0 && r.busySince != 0 && r.busySince <= r.rateT0) ||
		r.unacked.len()*c.cfg.SegmentSize >= r.notSent
	r.rateT0, r.rateB0 = now, r.ackedBytes
	if !busy {
		return
	}
	if r.rate == 0 {
		r.rate = sample
	} else {
		r.rate += 0.25 * (sample - r.rate)
	}
	if want := notSentFor(r.rate, c.cfg.SegmentSize); want >= 2*r.notSent || 2*want <= r.notSent {
		r.notSent = want
		hs.SetNotSent(r.c, want)
	}
}

// reader is the rail's reader goroutine: it decodes frames, reassembles
// messages and processes ACKs. On a single-rail connection a Recv may read
// in its place (whoever reads holds r.rdMu).
func (c *Conn) reader(r *rail) {
	defer c.wg.Done()
	defer close(r.readerDone)
	for {
		if c.goingAway.Load() == 0 && c.recvMayRead() {
			// A Recv reads this rail itself (see Recv); make sure one is
			// awake to do so, and wait until they leave the rail to us.
			c.wakeRecv()
			select {
			case <-r.bgResume:
			case <-c.closed:
				return
			}
			continue
		}
		r.rdMu.Lock()
		err := c.readFrame(r)
		r.rdMu.Unlock()
		if err != nil && err != errPoked { // a poke meant for a Recv
			return
		}
	}
}

// rstate is a rail's read-side state, owned by whoever holds rail.rdMu:
// the rail's reader goroutine, or a Recv reading the rail itself.
type rstate struct {
	hb        [wire.DataHeaderSize]byte
	body      [wire.MaxControlBody]byte
	scratch   []byte
	lastDL    time.Time
	prompt    bool // a frame the sender waits for is not acknowledged yet
	sinceAck  int  // bytes received since the last ACK was asked for
	completed bool
	done      bool // no more frames: GOAWAY read or the rail failed
}

// errRailDone says a rail delivers no more frames.
var errRailDone = errors.New("multirail: rail done")

// errPoked says a read at a frame boundary was interrupted on purpose
// (a Recv reading the rail itself had its context cancelled).
var errPoked = errors.New("multirail: read interrupted")

// poke interrupts a Recv blocked reading r; see read.
func (r *rail) poke() {
	r.pokeMu.Lock()
	r.poked = true
	_ = r.c.SetReadDeadline(time.Unix(1, 0))
	r.pokeMu.Unlock()
}

// unpoke reports whether a timeout on r came from poke, and if so undoes
// it (restores the idle deadline).
func (c *Conn) unpoke(r *rail) bool {
	r.pokeMu.Lock()
	defer r.pokeMu.Unlock()
	if !r.poked {
		return false
	}
	r.poked = false
	now := time.Now()
	_ = r.c.SetReadDeadline(now.Add(c.cfg.IdleTimeout))
	r.rs.lastDL = now
	return true
}

// read fills p from r. An interruption by poke is undone; it is reported
// as errPoked only at a frame boundary (boundary and nothing read yet),
// otherwise the read resumes so that no frame is ever cut (the caller
// checks its context before the next frame). The caller holds r.rdMu.
func (c *Conn) read(r *rail, p []byte, boundary bool) error {
	n := 0
	for {
		k, err := r.br.ReadFullN(p[n:])
		n += k
		if err == nil {
			return nil
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) || !c.unpoke(r) {
			return err
		}
		if boundary && n == 0 && r.br.Buffered() == 0 {
			return errPoked
		}
	}
}

// readFail handles a read error on r: a protocol violation closes the
// connection, anything else takes the rail down.
func (c *Conn) readFail(r *rail, err error) error {
	r.rs.done = true
	if isProtocol(err) {
		c.protocolError(r, err)
	} else {
		c.railDown(r, r.gen, err)
	}
	return errRailDone
}

// readFrame reads one frame from r and processes it: reassembly, ACKs,
// GOAWAY. It blocks until a frame arrives. The caller holds r.rdMu. After
// an error (always errRailDone) the rail delivers nothing more; the failure
// has been dealt with.
func (c *Conn) readFrame(r *rail) error {
	rs := &r.rs
	if rs.done {
		return errRailDone
	}
	lim := c.re.Limits()
	if now := time.Now(); now.Sub(rs.lastDL) > c.cfg.IdleTimeout/4 {
		_ = r.c.SetReadDeadline(now.Add(c.cfg.IdleTimeout))
		rs.lastDL = now
	}
	if err := c.read(r, rs.hb[:wire.HeaderSize], true); err != nil {
		if err == errPoked {
			return err
		}
		return c.readFail(r, err)
	}
	r.midFrame.Store(true) // the rest of the frame must follow
	defer r.midFrame.Store(false)
	h, err := wire.ParseHeader(rs.hb[:wire.HeaderSize], lim)
	if err != nil {
		return c.readFail(r, err)
	}
	switch h.Type {
	case wire.TypeData:
		return c.readData(r, h, lim)
	case wire.TypeAck:
		if err := c.read(r, rs.body[:h.Len], false); err != nil {
			return c.readFail(r, err)
		}
		a, err := wire.ParseAck(rs.body[:h.Len])
		if err == nil {
			err = c.ack(r, a)
		}
		if err != nil {
			return c.readFail(r, err)
		}
	case wire.TypePing:
	case wire.TypeGoAway:
		if err := c.read(r, rs.body[:h.Len], false); err != nil {
			return c.readFail(r, err)
		}
		code, _ := wire.ParseGoAway(rs.body[:h.Len])
		if code == wire.GoAwayProtocol {
			c.log.Warn("peer closed the connection: it saw a protocol violation", "rail", r.name)
		}
		// The peer writes GOAWAY last on every rail: this rail is done.
		// The peer is gone once every rail is done or down.
		rs.done = true
		c.mu.Lock()
		r.peerDone = true
		gone := c.peerGoneLocked()
		c.mu.Unlock()
		if gone {
			c.peerClosed()
		}
		return errRailDone
	default:
		return c.readFail(r, fmt.Errorf("%w: frame type %#x after the handshake", wire.ErrMalformed, h.Type))
	}
	return nil
}

// readData reads the rest of a DATA frame into its message and decides
// when to acknowledge.
func (c *Conn) readData(r *rail, h wire.Header, lim wire.Limits) error {
	rs := &r.rs
	if err := c.read(r, rs.hb[wire.HeaderSize:], false); err != nil {
		return c.readFail(r, err)
	}
	d, err := wire.ParseData(h, rs.hb[wire.HeaderSize:], lim)
	if err == nil && d.Session != c.sid {
		err = fmt.Errorf("%w: segment for session %x on session %x", wire.ErrMalformed, d.Session, c.sid)
	}
	if err != nil {
		return c.readFail(r, err)
	}
	c.rmu.Lock()
	dst, verdict, err := c.re.Begin(d)
	c.rmu.Unlock()
	if err != nil {
		return c.readFail(r, err)
	}
	switch verdict {
	case reasm.Write:
		err = c.read(r, dst, false)
		if err == nil && d.Flags&wire.FlagCRC != 0 && wire.Checksum(dst) != d.CRC {
			err = fmt.Errorf("%w: checksum mismatch in message %d at %d", wire.ErrMalformed, d.Message, d.Offset)
		}
		c.rmu.Lock()
		if err != nil {
			c.re.Abort(d)
		} else {
			rs.completed = c.re.Commit(d)
		}
		c.notifyRecvLocked()
		c.rmu.Unlock()
		if err != nil {
			return c.readFail(r, err)
		}
		r.bytesIn.Add(uint64(d.Len))
	case reasm.Discard, reasm.Hold:
		if cap(rs.scratch) < int(d.Len) {
			rs.scratch = make([]byte, d.Len)
		}
		p := rs.scratch[:d.Len]
		if err := c.read(r, p, false); err != nil {
			return c.readFail(r, err)
		}
		if verdict == reasm.Hold {
			c.rmu.Lock()
			c.re.Offer(d, p)
			c.notifyRecvLocked()
			c.rmu.Unlock()
		}
	}
	r.br.LookAhead(int(d.Len))
	r.segsIn.Add(1)
	r.received.Add(1)
	eager := d.Flags&wire.FlagEager != 0
	rs.prompt = rs.prompt || !eager
	rs.sinceAck += int(d.Len) + wire.DataHeaderSize
	switch {
	case rs.completed && !eager:
		// The sender waits for every segment of this message, whichever
		// rail carried it.
		for _, x := range c.rails {
			x.signal()
		}
		rs.prompt, rs.sinceAck = false, 0
	case r.br.Buffered() == 0 || rs.sinceAck >= ackEvery:
		if rs.prompt || rs.sinceAck >= ackEvery {
			r.signal()
		} else {
			r.delayAck()
		}
		rs.prompt, rs.sinceAck = false, 0
	}
	rs.completed = false
	return nil
}

// ackEvery is how many received bytes make a rail acknowledge even while
// more data is arriving back to back.
const ackEvery = 256 << 10

// ackDue runs when a delayed ACK's time is up: the writer sends it unless
// a frame of ours carried it already (then it finds nothing to do). The
// timer is not stopped when an ACK is piggybacked: one spare wake-up per
// AckDelay is cheaper than resetting a timer per message.
func (r *rail) ackDue() {
	r.ackArmed.Store(false)
	if r.received.Load() != r.ackedOut.Load() || r.creditDue.Load() {
		r.signal()
	}
}

// delayAck makes sure an ACK goes out within AckDelay unless a frame of
// ours carries one first.
func (r *rail) delayAck() {
	if r.ackArmed.CompareAndSwap(false, true) {
		r.ackTimer.Reset(AckDelay)
	}
}

// notifyRecvLocked wakes Recv when a message is ready. Caller holds c.rmu.
func (c *Conn) notifyRecvLocked() {
	if c.recvWaiters > 0 && (c.re.Ready() || c.peerGone) {
		c.recvWaiters = 0
		close(c.recvReady)
		c.recvReady = make(chan struct{})
	}
}

// ack applies an ACK received on r.
func (c *Conn) ack(r *rail, a wire.Ack) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !r.up {
		return nil // its segments were handed to other rails already
	}
	if a.Received < r.acked || a.Received-r.acked > uint64(r.unacked.len()) {
		return fmt.Errorf("%w: ack of %d frames on rail %s, %d sent", ErrProtocol, a.Received, r.name, r.acked+uint64(r.unacked.len()))
	}
	if r.acked == a.Received {
		if a.Credit > c.peerCredit {
			c.peerCredit = a.Credit
			c.broadcast()
		}
		return nil
	}
	bytes := 0
	now := c.now()
	if c.observer != nil {
		c.fillStates()
	}
	r.progressAt = now
	for r.acked < a.Received {
		s := r.unacked.pop()
		r.acked++
		size := len(s.payload) + wire.DataHeaderSize
		bytes += size
		if r.acked == a.Received {
			d := float64(now - s.sent)
			if r.ackDelay == 0 {
				r.ackDelay = d
			} else {
				r.ackDelay += 0.125 * (d - r.ackDelay)
			}
		}
		if c.observer != nil {
			c.observer.Delivered(now, r.idx, size, now-s.enq, c.states)
		}
		if m := s.msg; m != nil {
			m.remaining--
			if m.remaining == 0 {
				close(m.done)
			}
		}
		putSeg(s)
	}
	if bytes > 0 {
		c.observeDelivery(r, bytes)
	}
	if a.Credit > c.peerCredit {
		c.peerCredit = a.Credit
		c.broadcast()
	}
	return nil
}

// RecentChoices is how many of the scheduler's latest rail choices
// Stats reports (SchedulerStats.Recent).
const RecentChoices = 64

// RailStats is one rail's telemetry.
type RailStats struct {
	Name string
	Up   bool
	// BytesSent and SegmentsSent count DATA frames written (headers
	// included in bytes); BytesReceived counts payload bytes received.
	BytesSent, SegmentsSent         uint64
	BytesReceived, SegmentsReceived uint64
	// Queued and QueuedBytes are the rail's send-queue length now.
	Queued      int
	QueuedBytes int64
	// InFlight is the number of segments written on the rail and not yet
	// acknowledged by the peer.
	InFlight int
	// LastWait is the queueing delay of the last segment that left the
	// queue; LastWaitSegments is the same in units of one segment's
	// transmission time (wait_time), 0 while the rate is unknown.
	LastWait         time.Duration
	LastWaitSegments float64
	// RateBps is the rail's delivery rate, bits/s, measured from
	// acknowledged bytes while the rail had a backlog; 0 until measured.
	RateBps float64
	// Errors counts failures seen on the rail.
	Errors uint64
	// Rejoins counts the times a new TCP connection replaced the rail's
	// failed one (see Config.RailTimeout).
	Rejoins uint64
	// LastError says why the rail last failed; empty if it never did.
	LastError string
	// Level is the scheduler's current state level for the rail (k_i in
	// 0..k-1 for the Q-learning schedulers) and Value the scheduler's value
	// of sending the next segment there (higher is preferred; the unit
	// depends on the scheduler), both from sched.Explainer. A scheduler
	// that does not implement sched.Explainer has no such state: Level is
	// then -1 and Value 0 (see SchedulerStats.Explains).
	Level int
	Value float64
	// RecentShare is the rail's share, 0..1, of the rail choices in
	// SchedulerStats.Recent; 0 before the first choice.
	RecentShare float64
}

// SchedulerStats describes the scheduler of this side's sends and what it
// decided lately.
type SchedulerStats struct {
	// Name is the scheduler's registry name (Config.Scheduler).
	Name string
	// Explains reports whether the scheduler implements sched.Explainer,
	// that is whether RailStats.Level and Value are meaningful.
	Explains bool
	// Decisions counts the scheduler's decisions: its own count when it
	// implements sched.Explainer, otherwise the rail choices the
	// transport recorded (one per segment queued, plus one per segment
	// moved off a failed rail). Explorations counts the decisions that
	// deliberately did not take the best-valued rail; it is 0 for
	// schedulers that do not implement sched.Explainer.
	Decisions, Explorations uint64
	// Recent is the last RecentChoices (64) rails chosen by the
	// scheduler, oldest first (fewer before that many choices were made).
	// The transport records them itself, so they are there for every
	// scheduler.
	Recent []int
}

// Stats is a snapshot of a connection's telemetry.
type Stats struct {
	// Scheduler is the scheduler of this side's sends.
	Scheduler SchedulerStats
	// Rails has one entry per rail, in Config.Rails order.
	Rails []RailStats
	// MessagesSent and MessagesReceived count whole messages.
	MessagesSent     uint64
	MessagesReceived uint64
	// ReassemblyBytes is the message bytes held for the application now.
	ReassemblyBytes int64
	// CreditAvailable is how many bytes of message cost the peer currently
	// lets this side start.
	CreditAvailable uint64
	// DispatchTicks counts the dispatch timer's ticks so far; 0 when
	// Config.DispatchInterval is 0 (continuous dispatch).
	DispatchTicks uint64
	// Stages is the telemetry of the StageConn running over this
	// connection, nil if there is none.
	Stages *StageStats
}

// Stats returns a snapshot of the connection's telemetry. With a scheduler
// that implements sched.Explainer it calls Explain, under the lock that
// serialises the scheduler's calls.
func (c *Conn) Stats() Stats {
	var st Stats
	if s := c.stages.Load(); s != nil {
		ss := s.Stats()
		st.Stages = &ss
	}
	c.mu.Lock()
	st.Scheduler.Name = c.sch.Name()
	st.MessagesSent = c.sentMsgs
	st.MessagesReceived = c.recvMsgs.Load()
	st.CreditAvailable = c.peerCredit - c.usedCredit
	st.DispatchTicks = c.ticks
	x := &c.explain
	if c.explainer != nil {
		c.explainer.Explain(x)
		st.Scheduler.Explains = true
		st.Scheduler.Decisions, st.Scheduler.Explorations = x.Decisions, x.Explorations
	} else {
		st.Scheduler.Decisions = c.picks
	}
	n := min(c.picks, RecentChoices)
	st.Scheduler.Recent = make([]int, 0, n)
	counts := make([]int, len(c.rails))
	for p := c.picks - n; p < c.picks; p++ {
		i := int(c.recent[p%RecentChoices])
		st.Scheduler.Recent = append(st.Scheduler.Recent, i)
		counts[i]++
	}
	for i, r := range c.rails {
		rs := RailStats{
			Name: r.name, Up: r.up,
			BytesSent: r.bytesOut.Load(), SegmentsSent: r.segsOut.Load(),
			BytesReceived: r.bytesIn.Load(), SegmentsReceived: r.segsIn.Load(),
			Queued: r.queue.len(), QueuedBytes: r.queuedBytes, InFlight: r.unacked.len(),
			LastWait: time.Duration(r.lastWait), RateBps: r.rate, Errors: r.errs.Load(), Rejoins: r.rejoins,
			Level: -1,
		}
		if r.lastErr != nil {
			rs.LastError = r.lastErr.Error()
		}
		if r.rate > 0 {
			segTime := float64(c.cfg.SegmentSize) * 8 / r.rate * 1e9
			rs.LastWaitSegments = float64(r.lastWait) / segTime
		}
		if c.explainer != nil {
			if i < len(x.Levels) {
				rs.Level = x.Levels[i]
			}
			if i < len(x.Values) {
				rs.Value = x.Values[i]
			}
		}
		if n > 0 {
			rs.RecentShare = float64(counts[i]) / float64(n)
		}
		st.Rails = append(st.Rails, rs)
	}
	c.mu.Unlock()
	c.rmu.Lock()
	st.ReassemblyBytes = c.re.Held()
	c.rmu.Unlock()
	return st
}
