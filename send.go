// Sending: Send cuts messages into segments, the scheduler picks a rail for each, and the dispatch timer releases queues.

package multirail

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/multirail/multirail/internal/reasm"
	"github.com/multirail/multirail/internal/sender"
	"github.com/multirail/multirail/internal/wire"
)

// outMsg is one message being sent.
type outMsg struct {
	remaining int // segments not yet acknowledged (guarded by Conn.mu)
	done      chan struct{}
	plan      *planRecord // what the planner did with it; nil if it was not planned
	onDone    func()      // SendOwned's callback, run once the peer holds all of it
}

// complete ends m: every frame was acknowledged. Caller holds c.mu.
func (m *outMsg) complete() {
	close(m.done)
	if m.onDone != nil {
		m.onDone()
	}
}

// segment is one DATA or SMALL frame queued or in flight on a rail.
type segment struct {
	// hdr holds the frame's header: a DATA header (wire.PutData), or for
	// a small message a SMALL header (wire.PutSmall) in its first hlen
	// bytes.
	hdr     [wire.DataHeaderSize]byte
	hlen    uint8
	payload []byte
	msg     *outMsg
	owned   *[]byte // the eager copy of the payload, returned to eagerPool on ACK
}

// wireSize is the segment's size on the wire.
func (s *segment) wireSize() int { return len(s.payload) + int(s.hlen) }

// head is the header the segment's frame starts with.
func (s *segment) head() []byte { return s.hdr[:s.hlen] }

// small reports whether the segment travels as a SMALL frame.
func (s *segment) small() bool { return s.hlen == wire.SmallHeaderSize }

// smallFrame reports whether a message of n bytes travels whole in one
// SMALL frame: it fits (wire.MaxSmallPayload, and our segment size, by
// which the peer checks it) and it needs no checksum (SMALL has none).
func (c *Conn) smallFrame(n int) bool {
	return n <= wire.MaxSmallPayload && n <= c.cfg.SegmentSize && !c.cfg.Checksum
}

// headerFor is the header size of m's frames.
func (c *Conn) headerFor(m *msgFrames) int {
	if c.smallFrame(len(m.msg)) {
		return wire.SmallHeaderSize
	}
	return wire.DataHeaderSize
}

// entry is a segment in a rail's sender core, with when it was queued and
// written (ns since the connection started).
type entry = sender.Entry[*segment]

// inlineFlight is the most a rail may have in flight for an eager message
// to be written from Send itself.
const inlineFlight = 64 << 10

// eagerPool holds copies of eager messages until they are acknowledged.
var eagerPool = sync.Pool{New: func() any { b := make([]byte, 0, DefaultEagerLimit); return &b }}

var segPool = sync.Pool{New: func() any { return new(segment) }}

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
			if r.core.Tick() > 0 {
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

// pickLocked asks the scheduler for a rail for a segment of size bytes and
// records the choice in c.recent. It returns -1 when the scheduler
// declined or returned a rail that cannot be used. Caller holds c.mu.
func (c *Conn) pickLocked(now int64, size int) int {
	c.fillStates()
	i := c.sch.Pick(now, size, c.states)
	if i < 0 || i >= len(c.rails) || !c.rails[i].life.up() {
		return -1 // a scheduler bug must not wedge the connection
	}
	c.recent[c.picks%RecentChoices] = uint8(i)
	c.picks++
	return i
}

// fillStates refreshes c.states. Caller holds c.mu.
func (c *Conn) fillStates() {
	for i, r := range c.rails {
		st := &c.states[i]
		st.Up = r.life.up()
		r.core.Fill(st)
		st.AckDue = r.received.Load() != r.ackedOut.Load()
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
func (c *Conn) Send(ctx context.Context, tag uint32, msg []byte) error {
	_, err := c.send(ctx, tag, msg, false, nil, false)
	return err
}

// SendOwned sends msg with tag as Send does, but hands msg over: the
// caller must not touch it again until done (if not nil) has run, which
// happens once the peer holds all of it (from a goroutine of the
// connection, with its locks held: done must be quick and must not call
// the Conn); done never runs if the connection fails first. SendOwned
// returns once every frame is queued, like an eager send, without waiting
// for the peer's acknowledgement: a caller that copied its data anyway
// (a collective's pieces) does not wait the way back. Errors after it
// returned show on later calls; Close reports what was never delivered
// (ErrUndelivered). ctx bounds the wait for credit and queue room.
func (c *Conn) SendOwned(ctx context.Context, tag uint32, msg []byte, done func()) error {
	_, err := c.send(ctx, tag, msg, false, done, true)
	return err
}

// TrySend sends msg with tag as Send does if that needs no wait for the
// peer: msg is eager (at most Config.EagerLimit bytes) and the peer's
// flow-control credit covers it now. Otherwise it sends nothing and
// returns false, nil; errors are Send's. It lets a caller that must also
// receive (an exchange between two ranks) send from its own goroutine
// without risking that both ends wait for credit that only their pending
// receives would return.
func (c *Conn) TrySend(tag uint32, msg []byte) (bool, error) {
	if len(msg) > c.cfg.EagerLimit {
		return false, nil
	}
	return c.send(context.Background(), tag, msg, true, nil, false)
}

// send is Send; with try it gives up (false, nil) instead of waiting for
// credit, and is only called for eager messages; with owned it is
// SendOwned (done its callback).
func (c *Conn) send(ctx context.Context, tag uint32, msg []byte, try bool, done func(), owned bool) (sent bool, err error) {
	released := false
	if int64(len(msg)) > c.cfg.MaxMessageSize {
		return false, fmt.Errorf("%w: %d bytes, MaxMessageSize is %d", ErrTooLarge, len(msg), c.cfg.MaxMessageSize)
	}
	cost := reasm.Cost(uint64(len(msg)))
	if uint64(len(msg)) > c.peerMax || cost > c.peerWindow {
		return false, fmt.Errorf("%w: %d bytes, the peer accepts at most %d", ErrTooLarge, len(msg), min(c.peerMax, reasm.Largest(c.peerWindow)))
	}
	c.pollActive() // the answer may come soon: poll for it
	eager := len(msg) <= c.cfg.EagerLimit
	if !eager {
		// Large messages are queued one after the other, so that they
		// complete one after the other and the rails never idle while all
		// of them wait for their last segments. Eager messages slip in
		// between.
		select {
		case c.enqueuing <- struct{}{}:
		case <-ctx.Done():
			return false, ctx.Err()
		case <-c.closed:
			return false, c.closedErr()
		}
		defer func() {
			if !released {
				<-c.enqueuing
			}
		}()
	}
	c.mu.Lock()
	for !c.credit.Fits(cost) {
		if try {
			c.mu.Unlock()
			return false, nil
		}
		ch := c.changedLocked()
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false, ctx.Err()
		case <-c.closed:
			return false, c.closedErr()
		}
		c.mu.Lock()
	}
	if err := c.closedErrNonBlocking(); err != nil {
		c.mu.Unlock()
		return false, err
	}
	c.credit.Use(cost)
	id := c.nextID
	c.nextID++
	single := len(msg) <= c.cfg.FrameSize // one frame whatever the rail
	continuous := !c.dispatched()
	var om *outMsg // nil for eager messages: nobody waits for them
	if !eager {
		// One count per frame, plus one that this Send holds until every
		// frame is queued: the message cannot complete before that.
		om = &outMsg{remaining: 1, done: make(chan struct{}), onDone: done}
	}
	flags := uint8(0)
	if c.cfg.Checksum {
		flags = wire.FlagCRC
	}
	if eager {
		flags |= wire.FlagEager
	}
	m := msgFrames{om: om, id: id, tag: tag, flags: flags, msg: msg, eager: eager}
	var last *rail
	if !eager && c.plansLocked(len(msg)) {
		last, err = c.queuePlannedLocked(&m)
	} else {
		last, err = c.queueRangeLocked(&m, 0, len(msg))
	}
	if err != nil {
		c.mu.Unlock()
		return false, err
	}
	if om != nil {
		om.remaining-- // every frame is queued
		if om.remaining == 0 {
			om.complete() // acknowledged while this Send waited for room
		}
	}
	c.sentMsgs++
	// On the dispatch timer the segments wait for the next tick. An eager
	// message goes out inline only while the rail has little in flight:
	// the write could block on a full socket buffer otherwise, and a
	// caller sending eager messages one after the other would then wait
	// for each write, its rail's queue would never grow, and the
	// scheduler would never see a reason to use another rail.
	idle := last != nil && continuous && single && last.core.Len() == 1 &&
		(!eager || last.core.InFlightBytes() < inlineFlight)
	c.mu.Unlock()
	if !eager {
		<-c.enqueuing
		released = true
	}
	if idle {
		// A one-segment message on an idle rail goes out from here,
		// without a goroutine hop.
		c.tryFlush(last, false)
	} else if last != nil && continuous && single {
		last.signal()
	}
	if eager {
		if done != nil {
			done() // the eager copy is what travels
		}
		return true, nil
	}
	if owned {
		return true, nil
	}
	select {
	case <-om.done:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	case <-c.closed:
		select {
		case <-om.done:
			return true, nil
		default:
		}
		return false, c.closedErr()
	}
}

// msgFrames is a message being cut into frames.
type msgFrames struct {
	om    *outMsg // nil for an eager message
	id    uint64
	tag   uint32
	flags uint8
	msg   []byte
	eager bool
}

// frame returns the segment that carries msg[off:end].
func (c *Conn) frame(m *msgFrames, off, end int) *segment {
	s := segPool.Get().(*segment)
	s.payload = m.msg[off:end]
	if m.eager {
		var b *[]byte
		if len(m.msg) <= DefaultEagerLimit {
			b = eagerPool.Get().(*[]byte)
		} else {
			nb := make([]byte, 0, len(m.msg))
			b = &nb
		}
		*b = append((*b)[:0], m.msg...)
		s.owned, s.payload = b, *b
	}
	s.msg = m.om
	if c.smallFrame(len(m.msg)) {
		wire.PutSmall(s.hdr[:], m.flags&wire.FlagEager, m.id, m.tag, len(m.msg))
		s.hlen = wire.SmallHeaderSize
	} else {
		d := wire.Data{Flags: m.flags, Session: c.sid, Message: m.id, Tag: m.tag, Total: uint64(len(m.msg)), Offset: uint64(off), Len: uint32(end - off)}
		if c.cfg.Checksum {
			d.CRC = wire.Checksum(s.payload)
		}
		wire.PutData(s.hdr[:], d)
		s.hlen = wire.DataHeaderSize
	}
	if m.om != nil {
		m.om.remaining++
	}
	return s
}

// queueRangeLocked queues the frames of m.msg[off:end] on the rails the
// scheduler picks, segment by segment, waiting for room where it must,
// and returns the rail of the last one (nil if it was held for an
// outage). Caller holds c.mu; it is released while waiting.
func (c *Conn) queueRangeLocked(m *msgFrames, off, end int) (*rail, error) {
	seg := c.cfg.FrameSize
	single := len(m.msg) <= seg
	continuous := !c.dispatched()
	var last *rail
	hl := c.headerFor(m)
	for off < end || off == 0 {
		r, now, err := c.railLocked(min(seg, end-off) + hl)
		if err != nil {
			return nil, err
		}
		fe := min(off+seg, end)
		if !m.eager && r != nil {
			fe = min(off+c.spanFor(r), end)
		}
		s := c.frame(m, off, fe)
		if r == nil {
			c.holdSegLocked(now, s)
		} else {
			c.push(now, r, s)
		}
		if r != nil && continuous && !single {
			r.signal() // a single frame is flushed by Send
		}
		last = r
		off = fe
		if off == end {
			break
		}
	}
	return last, nil
}

// railLocked asks the scheduler for a rail for a frame of size bytes and
// returns it once it has room, or nil during an outage (the frame is held
// until a rail comes back). When the chosen rail is full it waits
// (with c.mu released) for room on that rail, as the scheduler decided;
// when no rail is acceptable it waits for any change and asks again.
func (c *Conn) railLocked(size int) (*rail, int64, error) {
	chosen := -1
	for {
		now := c.now()
		if err := c.closedErrNonBlocking(); err != nil {
			return nil, 0, err
		}
		if c.goingAway.Load() != 0 {
			return nil, 0, c.closedErr()
		}
		if chosen < 0 || !c.rails[chosen].life.up() {
			chosen = c.pickLocked(now, size)
		}
		if chosen >= 0 && !c.rails[chosen].core.Full() {
			return c.rails[chosen], now, nil
		}
		if !c.anyUp() {
			if c.inOutage() {
				return nil, now, nil // held until a rail comes back
			}
			return nil, 0, ErrAllRailsDown
		}
		c.waitChangeLocked()
	}
}

// spanTime is about how long a frame of a large message takes on its rail:
// on fast rails a frame spans several segments (up to wire.MaxPayload),
// so that the bytes take fewer frames, writes and reads.
var spanTime = 500 * time.Microsecond // a variable for tests, like spanMinRate

// spanMinRate is the measured drain rate (bits/s) below which a rail gets
// frames of FrameSize whatever its rate: spans are for fast rails, and
// slower ones keep the scheduling granularity the frame size gives. A
// variable so that tests can exercise spans on emulated rails.
var spanMinRate = 1e9

// spanFor is the payload of a large message's next frame on r: the frames
// r drains in about spanTime by its measured rate, at least one (a
// multiple of the segment size: FrameSize is one).
// Caller holds c.mu.
func (c *Conn) spanFor(r *rail) int {
	frame := c.cfg.FrameSize
	rate := r.core.Rate()
	if rate < spanMinRate {
		return frame
	}
	k := int(rate/8*spanTime.Seconds()) / frame
	return frame * min(max(k, 1), wire.MaxPayload(c.cfg.SegmentSize)/frame)
}

// push queues s on r at now. Caller holds c.mu.
func (c *Conn) push(now int64, r *rail, s *segment) {
	r.core.Push(now, s, s.wireSize())
}

func putSeg(s *segment) {
	if s.owned != nil && cap(*s.owned) == DefaultEagerLimit {
		eagerPool.Put(s.owned)
	}
	s.payload, s.msg, s.owned = nil, nil, nil
	segPool.Put(s)
}

// waitChangeLocked waits, with c.mu released, for any change senders may
// wait for, or for the connection to close. Caller holds c.mu.
func (c *Conn) waitChangeLocked() {
	ch := c.changedLocked()
	c.mu.Unlock()
	select {
	case <-ch:
	case <-c.closed:
	}
	c.mu.Lock()
}
