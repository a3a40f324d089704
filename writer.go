// The writer of a rail: batches of queued segments and control frames in one writev.

package multirail

import (
	"errors"
	"net"
	"time"

	hs "github.com/multirail/multirail/internal/handshake"
	"github.com/multirail/multirail/internal/wire"
)

// The kernel holds about kernelAhead worth of a rail's rate unsent
// (TCP_NOTSENT_LOWAT), within [minNotSent, maxNotSent]; one writev takes
// half of that from the queue, or all of it on rails fast enough for a
// bound of fastNotSent or more (half took ~10 % off loopback goodput at
// 4-64 MiB, BENCHMARKS.md). Slow rails thus keep their backlog in the
// rail's own queue, where the scheduler sees it, while fast rails get
// large writes and few system calls. maxNotSent only binds rails of more
// than about 16 Gbit/s (loopback): 4 MiB there cost about 8 % of goodput
// at 64 MiB messages against 16 MiB (BENCHMARKS.md, issue 12).
const (
	kernelAhead = 2 * time.Millisecond
	minNotSent  = 128 << 10
	maxNotSent  = 16 << 20
	fastNotSent = 1 << 20 // rails of about 4 Gbit/s and more
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
	seal      *hs.Cipher      // seals what is written (nil: frames in clear)
	qw        *hs.QuickWriter // small writes (nil: the rail has no file descriptor)
	out       []byte          // a sealed write
	batch     []entry
	iov       net.Buffers
	wv        net.Buffers
	run       []byte // contiguous bytes of a write: control, headers, small payloads
	ctl       []byte
	body      []byte   // a SMALL frame's body, gathered to be sealed as one record
	ack       wire.Ack // the ACK to send with the batch, when acking
	fold      int      // the batch entry whose SMALL frame carries the ACK; -1: none (it goes in ctl)
	records   int      // records sealed into out (Stats.Path.Seals)
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
		if !r.life.up() {
			c.mu.Unlock()
			return 0, net.ErrClosed
		}
		now := c.now()
		maxBatch := max(r.notSent/2, c.cfg.FrameSize)
		if r.notSent >= fastNotSent {
			maxBatch = r.notSent
		}
		n = c.takeBatchLocked(r, now, maxBatch)
		if len(w.batch) > 0 {
			c.fillStates()
			for _, e := range w.batch {
				c.sch.Departed(now, r.idx, e.Size, now-e.Enq, c.states)
			}
			c.broadcast()
		}
		c.mu.Unlock()
	}
	w.ctl = w.ctl[:0]
	c.rmu.Lock()
	credit := c.re.Granted()
	c.rmu.Unlock()
	r.arrMu.Lock()
	got, arrived := r.received.Load(), r.arrived
	r.arrMu.Unlock()
	if got == 0 {
		arrived = 0 // a new connection (rejoin): nothing arrived on it yet
	}
	acking := false
	w.fold = -1
	if got != w.ackSent || credit != w.creditOut {
		acking = true
		w.ackSent, w.creditOut = got, credit
		w.ack = wire.Ack{Received: got, Credit: credit, Arrived: arrived}
		// The ACK rides the batch's first SMALL frame, if it has one
		// (docs/wire.md, "SMALL"); otherwise it is a frame of its own.
		for i, e := range w.batch {
			if e.Seg.small() {
				w.fold = i
				break
			}
		}
		if w.fold < 0 {
			w.ctl = wire.AppendAck(w.ctl, w.ack)
		}
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
	iov := w.iov[:0]
	if w.seal != nil {
		iov = append(iov, w.sealBatch())
	} else {
		iov = w.plainBatch(iov)
	}
	w.iov = iov
	// Count before writing: the peer may acknowledge the segments (and
	// Send return) before Write does, and Stats after Send must include
	// them. A failed write takes them back (they are requeued elsewhere).
	if n > 0 {
		r.bytesOut.Add(uint64(n))
		r.segsOut.Add(uint64(len(w.batch)))
	}
	err := w.write(r.c, iov)
	clear(w.iov)
	w.wrote = true
	if err != nil {
		if n > 0 {
			r.bytesOut.Add(-uint64(n))
			r.segsOut.Add(-uint64(len(w.batch)))
		}
		return 0, err
	}
	c.path.writes.Add(1)
	if acking && len(w.batch) == 0 {
		c.path.bareAcks.Add(1)
	}
	if w.seal != nil {
		c.path.seals.Add(uint64(w.records))
	}
	frames := len(w.batch)
	if len(w.ctl) > 0 {
		frames++
	}
	return frames, nil
}

// write writes iov to c: a small batch first through the quick writer
// (see hs.NewQuickWriter), whatever the socket did not take at once (or a
// large batch) through c.
func (w *wstate) write(c net.Conn, iov net.Buffers) error {
	total := 0
	for _, b := range iov {
		total += len(b)
	}
	if w.qw != nil && total <= hs.QuickMax {
		n, err := w.qw.Write(iov)
		if err != nil || n == total {
			return err
		}
		for n > 0 { // drop what was written
			k := min(n, len(iov[0]))
			if iov[0] = iov[0][k:]; len(iov[0]) == 0 {
				iov = iov[1:]
			}
			n -= k
		}
	}
	var err error
	if len(iov) == 1 {
		_, err = c.Write(iov[0])
	} else {
		w.wv = iov // WriteTo consumes w.wv (a field, so nothing escapes), not w.iov
		_, err = w.wv.WriteTo(c)
	}
	return err
}

// sealBatch seals the pending control frames and the batch's segments
// (see internal/handshake's record layout: a DATA frame's header, fixed
// part and payload records; a SMALL frame's header and body, the ACK it
// carries included) into one buffer: sealing copies every payload anyway.
func (w *wstate) sealBatch() []byte {
	size := len(w.ctl) + 2*hs.Overhead + wire.AckSize
	for _, e := range w.batch {
		size += int(e.Seg.hlen) + len(e.Seg.payload) + (2+hs.PayloadRecords(len(e.Seg.payload)))*hs.Overhead
	}
	if cap(w.out) < size {
		w.out = make([]byte, 0, size)
	}
	out := hs.SealFrames(w.seal, w.out[:0], w.ctl)
	plain := len(w.ctl)
	for i, e := range w.batch {
		s := e.Seg
		if s.small() {
			b := w.gatherSmall(s, i == w.fold)
			out = w.seal.Seal(out, b[:wire.HeaderSize])
			out = w.seal.Seal(out, b[wire.HeaderSize:])
			plain += len(b)
			continue
		}
		out = w.seal.Seal(out, s.hdr[:wire.HeaderSize])
		out = w.seal.Seal(out, s.hdr[wire.HeaderSize:])
		out = hs.SealPayload(w.seal, out, s.payload)
		plain += wire.DataHeaderSize + len(s.payload)
	}
	w.out = out
	w.records = (len(out) - plain) / hs.Overhead
	return out
}

// gatherSmall gathers s's whole SMALL frame (header, the batch's ACK when
// withAck, message id and tag, payload) into w.body and returns it.
func (w *wstate) gatherSmall(s *segment, withAck bool) []byte {
	b := w.body[:0]
	if withAck {
		b = wire.AppendSmallAck(b, s.hdr[:], w.ack)
		b = append(b, s.hdr[wire.HeaderSize:wire.SmallHeaderSize]...)
	} else {
		b = append(b, s.head()...)
	}
	b = append(b, s.payload...)
	w.body = b
	return b
}

// plainBatch appends to iov the pending control frames and the batch's
// segments in clear: control frames, headers and small payloads are
// copied into one contiguous run (a copy of a few bytes is cheaper than
// an iovec); large payloads are written from the caller's memory.
func (w *wstate) plainBatch(iov net.Buffers) net.Buffers {
	size := len(w.ctl) + wire.AckSize
	for _, e := range w.batch {
		s := e.Seg
		size += int(s.hlen)
		if len(s.payload) <= smallPayload || s.small() {
			size += len(s.payload)
		}
	}
	if cap(w.run) < size {
		w.run = make([]byte, 0, size) // appends below then never move it
	}
	run := append(w.run[:0], w.ctl...) // control frames first
	for i, e := range w.batch {
		s := e.Seg
		if s.small() { // at most a few KiB: copied whole, with the ACK if it rides here
			run = append(run, w.gatherSmall(s, i == w.fold)...)
			continue
		}
		run = append(run, s.head()...)
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
	return iov
}

var errGoingAway = errors.New("multirail: closing")

// takeBatchLocked takes up to maxBatch bytes of r's queue (at least one
// segment if any may be taken) into r.w.batch and returns their bytes. A
// rail whose queue is empty first takes the tail of a planned message
// from a rail that fell behind (stealLocked), so that a writer woken with
// nothing of its own leaves with a batch: flush ends at the first empty
// batch, and frames stolen then would wait for the rail's next wake-up
// (its ping tick, IdleTimeout/3: seen in the lab as alltoall steps of
// 8-10 s). A queue emptied by this batch steals again for the next one.
// Caller holds c.mu and r.wmu.
func (c *Conn) takeBatchLocked(r *rail, now int64, maxBatch int) int {
	w := &r.w
	if c.planning && r.core.Len() == 0 {
		c.stealLocked(r, now)
	}
	limit := r.core.Sendable()
	if w.draining {
		limit = r.core.Len()
	}
	n := 0
	for len(w.batch) < limit && (n == 0 || n+r.core.Front().Size <= maxBatch) {
		e := r.core.Take(now)
		n += e.Size
		w.batch = append(w.batch, e)
	}
	if n > 0 && c.planning && r.core.Len() == 0 {
		c.stealLocked(r, now) // taken by the next batch
	}
	return n
}

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
	pending = pending || r.core.Sendable() > 0
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
				goAway := wire.AppendGoAway(nil, code)
				if r.w.seal != nil {
					goAway = hs.SealFrames(r.w.seal, nil, goAway)
				}
				_, _ = r.c.Write(goAway)
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

// adaptNotSent adapts the socket's unsent bound to r's drain-rate
// estimate, in steps of at least a factor of two. Caller holds c.mu.
func (c *Conn) adaptNotSent(r *rail, now int64) {
	if want := notSentFor(r.core.Rate(), c.cfg.FrameSize); want >= 2*r.notSent || 2*want <= r.notSent {
		r.notSent = want
		hs.SetNotSent(r.c, want)
		r.core.SetPipe(now, int64(want))
	}
}
