// The reader of a rail: frames decoded, messages reassembled, ACKs applied.

package multirail

import (
	"errors"
	"fmt"
	"os"
	"time"

	hs "github.com/multirail/multirail/internal/handshake"
	"github.com/multirail/multirail/internal/reasm"
	"github.com/multirail/multirail/internal/sender"
	"github.com/multirail/multirail/internal/wire"
)

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
	open      *hs.Cipher                              // opens what is read (nil: frames in clear)
	small     [wire.MaxControlBody + hs.Overhead]byte // a sealed header, fixed part or control body
	sealed    []byte                                  // a sealed payload record (at most hs.MaxRecord + hs.Overhead)
	hb        [wire.DataHeaderSize]byte
	body      [wire.MaxControlBody]byte
	scratch   []byte // a segment read while the same one arrives elsewhere (Hold)
	discard   []byte // duplicates are read through it (discardChunk bytes)
	lastDL    int64  // c.now() when the read deadline was last set; 0: never
	sinceDL   int    // bytes read since the read deadline was last set
	prompt    bool   // a frame the sender waits for is not acknowledged yet
	sinceAck  int    // bytes received since the last ACK was asked for
	completed bool
	done      bool // no more frames: GOAWAY read or the rail failed
}

// errRailDone says a rail delivers no more frames.
var errRailDone = errors.New("multirail: rail done")

// errPoked says a read at a frame boundary was interrupted on purpose
// (a Recv reading the rail itself had its context cancelled).
var errPoked = errors.New("multirail: read interrupted")

// unpoke reports whether a timeout on r came from poke or pokeData, and
// if so undoes it (restores the idle deadline); forRecv reports a poke
// (a Recv's context ended), not only pokeData.
func (c *Conn) unpoke(r *rail) (poked, forRecv bool) {
	r.pokeMu.Lock()
	defer r.pokeMu.Unlock()
	if !r.poked {
		return false, false
	}
	forRecv = r.pokedRecv
	r.poked, r.pokedRecv = false, false
	_ = r.c.SetReadDeadline(time.Now().Add(c.cfg.IdleTimeout))
	r.rs.lastDL, r.rs.sinceDL = c.now(), 0
	return true, forRecv
}

// read fills p from r. An interruption by poke is undone; it is reported
// as errPoked only at a frame boundary (boundary and nothing read yet),
// otherwise the read resumes so that no frame is ever cut (the caller
// checks its context before the next frame). An interruption by pokeData
// (the poller saw data for a read waiting in the kernel) is undone and
// the read resumes. The caller holds r.rdMu.
//
// A long frame on a slow rail may take longer than IdleTimeout to arrive:
// while at least minProgress bytes arrived since the deadline was last set
// (in this read or the frame's earlier ones: a sealed frame is read record
// by record), the deadline moves on (a peer trickling a few bytes is
// still cut off).
func (c *Conn) read(r *rail, p []byte, boundary bool) error {
	if boundary && c.cfg.BusyPoll > 0 {
		c.busyPoll(r)
		defer c.pollDone(r)
	}
	n := 0
	for {
		k, err := r.br.ReadFullN(p[n:])
		n += k
		r.rs.sinceDL += k
		if err == nil {
			return nil
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		poked, forRecv := c.unpoke(r)
		if !poked {
			if r.rs.sinceDL < minProgress {
				return err
			}
			r.pokeMu.Lock() // a poke from now on wins: its deadline stays
			if !r.poked {
				_ = r.c.SetReadDeadline(time.Now().Add(c.cfg.IdleTimeout))
			}
			r.pokeMu.Unlock()
			r.rs.lastDL, r.rs.sinceDL = c.now(), 0
			continue
		}
		if !forRecv {
			c.path.kernelWakes.Add(1)
			continue
		}
		if boundary && n == 0 && r.br.Buffered() == 0 {
			return errPoked
		}
	}
}

// readRecord fills dst with the next len(dst) bytes of the frame being
// read: in clear, straight from the socket; sealed, by reading the record
// (len(dst) + hs.Overhead bytes) and opening it into dst. A record that
// does not open is an error wrapping hs.ErrAuth: the rail goes down,
// nothing of it is used. The caller holds r.rdMu.
func (c *Conn) readRecord(r *rail, dst []byte, boundary bool) error {
	rs := &r.rs
	if rs.open == nil {
		return c.read(r, dst, boundary)
	}
	buf := rs.sealedBuf(len(dst) + hs.Overhead)
	if err := c.read(r, buf, boundary); err != nil {
		return err
	}
	_, err := rs.open.Open(dst[:0], buf)
	return err
}

// readPayload fills dst with a DATA frame's payload: in clear, straight
// from the socket; sealed, record by record (hs.MaxRecord bytes each),
// each opened into its place in dst.
func (c *Conn) readPayload(r *rail, dst []byte) error {
	if r.rs.open == nil {
		return c.read(r, dst, false)
	}
	for {
		n := min(len(dst), hs.MaxRecord)
		if err := c.readRecord(r, dst[:n], false); err != nil {
			return err
		}
		if dst = dst[n:]; len(dst) == 0 {
			return nil
		}
	}
}

// sealedBuf returns a buffer for a sealed record of n bytes.
func (rs *rstate) sealedBuf(n int) []byte {
	if n <= len(rs.small) {
		return rs.small[:n]
	}
	if cap(rs.sealed) < n {
		rs.sealed = make([]byte, n)
	}
	return rs.sealed[:n]
}

// skipPayload reads and drops a DATA payload of n bytes (a duplicate
// segment's). In clear it is read through a small buffer, so that a peer
// resending large segments makes the receiver allocate nothing; sealed,
// each record is opened in place all the same (through a buffer of one
// record), so that the nonces follow and nothing unauthenticated goes
// unseen.
func (c *Conn) skipPayload(r *rail, n int) error {
	rs := &r.rs
	if rs.open != nil {
		for {
			k := min(n, hs.MaxRecord)
			// Opened in place: the record's buffer is its own destination.
			if err := c.readRecord(r, rs.sealedBuf(k + hs.Overhead)[:k], false); err != nil {
				return err
			}
			if n -= k; n == 0 {
				return nil
			}
		}
	}
	if rs.discard == nil {
		rs.discard = make([]byte, discardChunk)
	}
	for left := n; left > 0; {
		k := min(left, len(rs.discard))
		if err := c.read(r, rs.discard[:k], false); err != nil {
			return err
		}
		left -= k
	}
	return nil
}

// minProgress is how many bytes of a frame must arrive within an
// IdleTimeout for its read deadline to be extended.
const minProgress = 64 << 10

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
	if rs.lastDL == 0 {
		c.moveDeadline(r, c.now())
	}
	if err := c.readRecord(r, rs.hb[:wire.HeaderSize], true); err != nil {
		if err == errPoked {
			return err
		}
		return c.readFail(r, err)
	}
	c.path.framesRead.Add(1)
	// One clock reading per frame, after its header arrived: it moves the
	// read deadline when due (the rail is not idle) and times the frame's
	// ACK. Each move leaves at least 3/4 IdleTimeout for the next header.
	now := c.now()
	c.pollActive()
	if now-rs.lastDL > int64(c.cfg.IdleTimeout/4) {
		c.moveDeadline(r, now)
	}
	r.midFrame.Store(true) // the rest of the frame must follow
	defer r.midFrame.Store(false)
	h, err := wire.ParseHeader(rs.hb[:wire.HeaderSize], lim)
	if err != nil {
		return c.readFail(r, err)
	}
	switch h.Type {
	case wire.TypeData:
		return c.readData(r, h, lim, now)
	case wire.TypeSmall:
		return c.readSmall(r, h, lim, now)
	case wire.TypeAck:
		if err := c.readRecord(r, rs.body[:h.Len], false); err != nil {
			return c.readFail(r, err)
		}
		a, err := wire.ParseAck(rs.body[:h.Len])
		if err == nil {
			err = c.ack(r, a, now)
		}
		if err != nil {
			return c.readFail(r, err)
		}
		c.ackAfterControl(r)
	case wire.TypePing:
		c.ackAfterControl(r)
	case wire.TypeGoAway:
		if err := c.readRecord(r, rs.body[:h.Len], false); err != nil {
			return c.readFail(r, err)
		}
		code, _ := wire.ParseGoAway(rs.body[:h.Len])
		if code == wire.GoAwayProtocol {
			c.log.Warn("peer closed the connection: it saw a protocol violation", "rail", r.name)
		}
		// The peer writes GOAWAY last on every rail: this rail is done.
		// The peer is gone once every rail is done or down. It reads on
		// until we close: acknowledge what arrived, so that its Close
		// knows its eager messages were delivered (unless we are closing
		// too: then our GOAWAY went out and this side writes no more).
		if code == wire.GoAwayClose && c.goingAway.Load() == 0 {
			r.wmu.Lock() // rdMu -> wmu: the lock order allows it
			_, _ = c.writeBatch(r, true)
			r.wmu.Unlock()
		}
		rs.done = true
		c.mu.Lock()
		r.life.goAway()
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

// readData reads the rest of a DATA frame, whose header arrived at now,
// into its message and decides when to acknowledge.
func (c *Conn) readData(r *rail, h wire.Header, lim wire.Limits, now int64) error {
	rs := &r.rs
	if err := c.readRecord(r, rs.hb[wire.HeaderSize:], false); err != nil {
		return c.readFail(r, err)
	}
	d, err := wire.ParseData(h, rs.hb[wire.HeaderSize:], lim)
	if err == nil && d.Session != c.sid {
		err = fmt.Errorf("%w: segment for session %x on session %x", wire.ErrMalformed, d.Session, c.sid)
	}
	if err != nil {
		return c.readFail(r, err)
	}
	return c.segment(r, d, nil, lim, now)
}

// readSmall reads the rest of a SMALL frame, whose header arrived at now:
// the ACK it may carry, then its message, whole, as readData would.
func (c *Conn) readSmall(r *rail, h wire.Header, lim wire.Limits, now int64) error {
	rs := &r.rs
	// One record, opened in place (it is at most a few KiB).
	body := rs.sealedBuf(int(h.Len) + hs.Overhead)[:h.Len]
	if err := c.readRecord(r, body, false); err != nil {
		return c.readFail(r, err)
	}
	a, hasAck, d, payload, err := wire.ParseSmall(h, body, lim)
	if err == nil && hasAck {
		err = c.ack(r, a, now)
	}
	if err != nil {
		return c.readFail(r, err)
	}
	d.Session = c.sid
	return c.segment(r, d, payload, lim, now)
}

// segment takes the payload of segment d, whose header arrived at now,
// into its message and decides when to acknowledge. The payload is read
// from r, or is payload when that is not nil (a SMALL frame's, read
// already).
func (c *Conn) segment(r *rail, d wire.Data, payload []byte, lim wire.Limits, now int64) error {
	rs := &r.rs
	c.rmu.Lock()
	dst, verdict, err := c.re.Begin(d)
	c.rmu.Unlock()
	if err != nil {
		return c.readFail(r, err)
	}
	switch verdict {
	case reasm.Write:
		if payload != nil {
			copy(dst, payload)
		} else {
			err = c.readPayload(r, dst)
		}
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
	case reasm.Discard:
		// A duplicate (a resend of what arrived already).
		if payload == nil {
			if err := c.skipPayload(r, int(d.Len)); err != nil {
				return c.readFail(r, err)
			}
		}
	case reasm.Hold:
		// The same segment is being read on another rail right now (a
		// resend racing the original): keep a copy in case that read fails.
		if cap(rs.scratch) < int(d.Len) {
			rs.scratch = make([]byte, d.Len)
		}
		p := rs.scratch[:d.Len]
		if payload != nil {
			copy(p, payload)
		} else if err := c.readPayload(r, p); err != nil {
			return c.readFail(r, err)
		}
		c.rmu.Lock()
		c.re.Offer(d, p)
		c.notifyRecvLocked()
		c.rmu.Unlock()
	}
	r.br.LookAhead(int(d.Len))
	r.segsIn.Add(1)
	// The frame's arrival time for the ACK (docs/wire.md, "ACK"): now, once
	// the whole frame is read. A short payload arrives with its header (a
	// clock reading saved per small frame); a long one is timed again.
	if d.Len >= arrivalReread {
		now = c.now()
	}
	r.arrMu.Lock()
	r.arrived = now
	r.received.Add(1)
	r.arrMu.Unlock()
	eager := d.Flags&wire.FlagEager != 0
	// A frame of several frames' worth (more than DefaultFrameSize and
	// more than a segment) comes from a fast rail (the sender spans only
	// there, see Conn.spanFor): the sender needs its ACK for
	// the rate estimate, not to go on, so ACKs follow every spanAcks
	// frames (or the message's end, or AckDelay after the data pauses)
	// instead of every frame. Single segments are acknowledged as before.
	every := ackEvery
	if span := int(d.Len) > max(lim.SegmentSize, DefaultFrameSize); span {
		every = max(ackEvery, spanAcks*int(d.Len))
	} else {
		rs.prompt = rs.prompt || !eager
	}
	rs.sinceAck += int(d.Len) + wire.DataHeaderSize
	switch {
	case rs.completed && !eager:
		// The sender waits for every segment of this message, whichever
		// rail carried it.
		for _, x := range c.rails {
			x.signal()
		}
		rs.prompt, rs.sinceAck = false, 0
	case r.br.Buffered() == 0 || rs.sinceAck >= every:
		if rs.prompt || rs.sinceAck >= every {
			r.signal()
		} else {
			r.delayAck()
		}
		rs.prompt, rs.sinceAck = false, 0
	}
	rs.completed = false
	// A message this frame completed goes to the OnMessage handler now,
	// with its ACK counted as due (a reply it prompts carries the ACK).
	c.offer()
	return nil
}

// ackAfterControl acknowledges DATA read before the control frame just
// read (an ACK or PING of the peer's). readData leaves the ACK of a frame
// followed by buffered bytes to the next frame's readData; when that next
// frame is a control frame and the last buffered, no readData follows, and
// without this the ACK waited for the rail's next DATA frame: a rail that
// then fell quiet was taken down as stalled (Config.RailTimeout) with
// segments that had arrived. The ACK is delayed (AckDelay, or a frame of
// ours carries it first) rather than written at once: signalling the
// writer here, which in an exchange can write a bare ACK per ACK of the
// peer's, had the lab's 1 MiB alltoall at 13-86 Mbit/s in four runs
// against 78-107 without it (machine loaded; not conclusive, not kept).
// Caller holds r.rdMu.
func (c *Conn) ackAfterControl(r *rail) {
	rs := &r.rs
	if rs.sinceAck == 0 || r.br.Buffered() != 0 {
		return
	}
	r.delayAck()
	rs.prompt, rs.sinceAck = false, 0
}

// arrivalReread is the payload size from which a DATA frame's arrival is
// timed after its payload rather than at its header.
const arrivalReread = 4 << 10

// discardChunk is the size of the buffer duplicates are read through.
const discardChunk = 16 << 10

// ackEvery is how many received bytes make a rail acknowledge even while
// more data is arriving back to back.
const ackEvery = 256 << 10

// spanAcks is how many multi-segment frames (spans, each about
// spanTime of the rail's drain) make a rail acknowledge.
const spanAcks = 4

// moveDeadline sets r's read deadline IdleTimeout from now (c.now()). The
// monotonic clock tells when the deadline is due to move; the wall clock
// (two clock readings in a VM) only sets it.
func (c *Conn) moveDeadline(r *rail, now int64) {
	_ = r.c.SetReadDeadline(time.Now().Add(c.cfg.IdleTimeout))
	r.rs.lastDL, r.rs.sinceDL = max(now, 1), 0
}

// ack applies an ACK received on r at now.
func (c *Conn) ack(r *rail, a wire.Ack, now int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !r.life.up() {
		return nil // its segments were handed to other rails already
	}
	if a.Received != r.core.Acked() {
		if c.observer != nil {
			c.fillStates()
		}
		r.ackNow, r.ackArr = now, a.Arrived
		if c.observer != nil {
			c.ackTimingLocked(r)
		}
		_, _, at := r.core.Sample()
		bytes, err := r.core.AckArrived(now, a.Received, a.Arrived, r.onAck)
		if err != nil {
			return fmt.Errorf("%w: rail %s: %v", ErrProtocol, r.name, err)
		}
		if s, n, t := r.core.Sample(); t != at && r.nic != nil && n >= poolMinBytes {
			r.nic.add(pollNow(), s)
		}
		if bytes > 0 {
			c.adaptNotSent(r, now)
		}
		if c.planning && r.core.Len() == 0 && c.stealLocked(r, now) {
			r.signal()
		}
	}
	if c.credit.Grant(a.Credit) {
		c.broadcast()
	}
	return nil
}

// ackTimingLocked records, for the ACK of r being applied, r's smallest
// one-way delay and the clocks' offset (the highest OffsetBound of the
// connection's rails), by which acked times the deliveries it reports.
// Caller holds c.mu.
func (c *Conn) ackTimingLocked(r *rail) {
	fwd, _, ok := r.core.Minima()
	r.ackOK = ok
	if !ok {
		return
	}
	off, _ := r.core.OffsetBound()
	for _, x := range c.rails {
		if b, ok := x.core.OffsetBound(); ok {
			off = max(off, b)
		}
	}
	r.ackFwd, r.ackOff = fwd, off
}

// acked completes segment e of rail r, which the peer acknowledged at
// r.ackNow. Caller holds c.mu.
func (c *Conn) acked(r *rail, e entry) {
	s := e.Seg
	if c.observer != nil {
		// When the peer would have confirmed it at once (Confirmed): a
		// lazy ACK rides the peer's next message, whose time is the
		// peer's, not the rail's. Learning from the ACK's own time, an
		// 8-byte exchange between two hosts settled on the 50 Mbit/s rail
		// in some runs (43 us an exchange there against 23 on the others:
		// the rail's bandwidth binds at that message rate), since every
		// rail's delay then read as the peer's turnaround (issue 27).
		at := r.ackNow
		if r.ackOK {
			at = sender.Confirmed(r.ackArr, e.Sent, r.ackNow, r.ackFwd, r.ackOff)
		}
		c.observer.Delivered(at, r.idx, e.Size, at-e.Enq, c.states)
	}
	if m := s.msg; m != nil {
		m.remaining--
		if m.plan != nil {
			c.planAcked(r.idx, s, r.ackNow)
		}
		if m.remaining == 0 {
			m.complete()
		}
	}
	putSeg(s)
}
