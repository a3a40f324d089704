package sender

import (
	"errors"
	"fmt"
	"time"

	"github.com/multirail/multirail/internal/fifo"
	"github.com/multirail/multirail/sched"
)

// Defaults of Config.
const (
	DefaultQueueDepth  = 16
	DefaultSegmentSize = 64 << 10
	DefaultRateWindow  = 20 * time.Millisecond
)

// Gains of the moving averages.
const (
	// RateGain is the weight of a new drain-rate sample.
	RateGain = 0.25
	// AckDelayGain is the weight of a new ACK-delay sample.
	AckDelayGain = 0.125
)

// ErrAckRange means an acknowledgement named more segments than are in
// flight, or fewer than were acknowledged before.
var ErrAckRange = errors.New("sender: acknowledgement out of range")

// Config configures a Rail. The zero value of every field means its
// default.
type Config struct {
	// QueueDepth is the queue capacity reported to the scheduler
	// (RailState.QueueCap); default DefaultQueueDepth.
	QueueDepth int
	// SegmentSize is the payload of a full segment in bytes, for
	// RailState.SegmentTime; default DefaultSegmentSize.
	SegmentSize int
	// RateWindow is the shortest interval a drain-rate sample spans;
	// default DefaultRateWindow.
	RateWindow time.Duration
	// Pipe is how many bytes in flight keep the rail busy by themselves
	// (the live transport: the socket's unsent bound; the simulator: one
	// byte, a segment in transmission); default 1. SetPipe changes it.
	Pipe int64
	// Dispatched makes segments leave the queue only when released by a
	// Tick (the dispatch timer) rather than continuously.
	Dispatched bool
	// Nominal is the rail's configured rate in bits/s, 0 if unknown
	// (RailState.NominalBps).
	Nominal float64
}

func (c *Config) validate() error {
	switch {
	case c.QueueDepth < 0:
		return fmt.Errorf("sender: QueueDepth %d: want >= 0 (0 = %d)", c.QueueDepth, DefaultQueueDepth)
	case c.SegmentSize < 0:
		return fmt.Errorf("sender: SegmentSize %d: want >= 0 (0 = %d)", c.SegmentSize, DefaultSegmentSize)
	case c.RateWindow < 0:
		return fmt.Errorf("sender: RateWindow %v: want >= 0 (0 = %v)", c.RateWindow, DefaultRateWindow)
	case c.Pipe < 0:
		return fmt.Errorf("sender: Pipe %d: want >= 0 (0 = 1)", c.Pipe)
	case c.Nominal < 0 || c.Nominal != c.Nominal:
		return fmt.Errorf("sender: Nominal %v: want a rate >= 0 in bits/s", c.Nominal)
	}
	if c.QueueDepth == 0 {
		c.QueueDepth = DefaultQueueDepth
	}
	if c.SegmentSize == 0 {
		c.SegmentSize = DefaultSegmentSize
	}
	if c.RateWindow == 0 {
		c.RateWindow = DefaultRateWindow
	}
	if c.Pipe == 0 {
		c.Pipe = 1
	}
	return nil
}

// Entry is one segment in a Rail's queue or in flight.
type Entry[T any] struct {
	// Seg is the caller's handle of the segment.
	Seg T
	// Size is its size on the wire in bytes (header included).
	Size int
	// Enq is when it entered the queue, Sent when it left it (Take).
	Enq, Sent int64
}

// Rail is the sender's state of one rail. Build it with New; it is not
// safe for concurrent use.
type Rail[T any] struct {
	cfg      Config
	pipe     int64
	queue    fifo.Queue[Entry[T]]
	inflight fifo.Queue[Entry[T]]
	queued   int64 // bytes in queue
	flying   int64 // bytes in flight
	release  int   // queued segments released by the last Tick, not yet taken

	acked      uint64 // segments acknowledged since the last Restart
	lastWait   int64
	backlog    bool  // the queue is not empty or the pipe is full
	busySince  int64 // since when backlog has held (valid while backlog)
	progressAt int64 // last acknowledgement progress, or when the flight began
	ackDelay   float64

	delivered int64 // bytes acknowledged, in total
	lastAck   int64 // the last acknowledgement progress, or when the flight began
	accBytes  int64 // bytes acknowledged over drain intervals, not yet sampled
	accTime   int64 // the length of those intervals
	rate      float64
	rateAt    int64 // when rate last took a sample
}

// New returns an empty Rail, or an error naming the Config field that is
// out of range.
func New[T any](cfg Config) (*Rail[T], error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Rail[T]{cfg: cfg, pipe: cfg.Pipe}, nil
}

// Len is the number of queued segments; QueuedBytes their size.
func (r *Rail[T]) Len() int { return r.queue.Len() }

// QueuedBytes is the size of the queued segments in bytes.
func (r *Rail[T]) QueuedBytes() int64 { return r.queued }

// Full reports whether the queue holds QueueDepth segments or more.
func (r *Rail[T]) Full() bool { return r.queue.Len() >= r.cfg.QueueDepth }

// InFlight is the number of segments taken and not yet acknowledged.
func (r *Rail[T]) InFlight() int { return r.inflight.Len() }

// InFlightBytes is their size in bytes.
func (r *Rail[T]) InFlightBytes() int64 { return r.flying }

// Acked is the number of segments acknowledged since the last Restart.
func (r *Rail[T]) Acked() uint64 { return r.acked }

// Rate is the drain-rate estimate in bits/s, 0 before the first sample.
func (r *Rail[T]) Rate() float64 { return r.rate }

// AckDelay is the smoothed time from Take to acknowledgement in ns, 0
// before the first sample.
func (r *Rail[T]) AckDelay() float64 { return r.ackDelay }

// LastWait is how long the last segment taken had waited in the queue.
func (r *Rail[T]) LastWait() int64 { return r.lastWait }

// Delivered is the number of bytes acknowledged in total.
func (r *Rail[T]) Delivered() int64 { return r.delivered }

// SetPipe sets how many bytes in flight keep the rail busy by themselves.
func (r *Rail[T]) SetPipe(now, bytes int64) {
	r.pipe = max(bytes, 1)
	r.updateBacklog(now)
}

// updateBacklog records whether the rail has a backlog from now on.
func (r *Rail[T]) updateBacklog(now int64) {
	b := r.queue.Len() > 0 || r.flying >= r.pipe
	if b && !r.backlog {
		r.busySince = now
	}
	r.backlog = b
}

// Push queues segment seg of size bytes at time now.
func (r *Rail[T]) Push(now int64, seg T, size int) {
	r.queue.Push(Entry[T]{Seg: seg, Size: size, Enq: now})
	r.queued += int64(size)
	r.updateBacklog(now)
}

// Requeue puts back a segment taken off this rail (its Enq is kept), at
// the end of the queue.
func (r *Rail[T]) Requeue(now int64, e Entry[T]) {
	r.queue.Push(e)
	r.queued += int64(e.Size)
	r.updateBacklog(now)
}

// Back returns the newest queued segment; the queue must not be empty.
func (r *Rail[T]) Back() Entry[T] { return r.queue.Back() }

// PopBack removes the newest queued segment at time now and returns it
// (its Enq kept), for another rail to take (Moves). The queue must not be
// empty.
func (r *Rail[T]) PopBack(now int64) Entry[T] {
	e := r.queue.PopBack()
	r.queued -= int64(e.Size)
	r.release = min(r.release, r.queue.Len())
	r.updateBacklog(now)
	return e
}

// Tick is the dispatch timer: everything queued now is released. It
// returns the number released.
func (r *Rail[T]) Tick() int {
	r.release = r.queue.Len()
	return r.release
}

// Sendable is how many queued segments may be taken now: all of them, or
// with Config.Dispatched those released by the last Tick.
func (r *Rail[T]) Sendable() int {
	if r.cfg.Dispatched {
		return min(r.release, r.queue.Len())
	}
	return r.queue.Len()
}

// Front returns the oldest queued segment; the queue must not be empty.
func (r *Rail[T]) Front() Entry[T] { return r.queue.Front() }

// Take moves the oldest queued segment in flight at time now and returns
// it (its Sent set). The queue must not be empty. Taking beyond Sendable
// is allowed (a closing connection drains everything).
func (r *Rail[T]) Take(now int64) Entry[T] {
	e := r.queue.Pop()
	r.queued -= int64(e.Size)
	if r.release > 0 {
		r.release--
	}
	if r.inflight.Len() == 0 {
		r.progressAt, r.lastAck = now, now // the rail's ACK clock starts with this segment
	}
	e.Sent = now
	r.lastWait = now - e.Enq
	r.inflight.Push(e)
	r.flying += int64(e.Size)
	r.updateBacklog(now)
	return e
}

// AckTo applies a cumulative acknowledgement at time now: received is the
// number of segments the peer has received since the last Restart. Each
// newly acknowledged segment is passed to each (if not nil), oldest first.
// The ACK delay is sampled from the last of them and the drain rate from
// the bytes they carried. It returns those bytes, or ErrAckRange (and
// changes nothing) when received is below Acked or beyond what is in
// flight.
func (r *Rail[T]) AckTo(now int64, received uint64, each func(Entry[T])) (int, error) {
	if received < r.acked || received-r.acked > uint64(r.inflight.Len()) {
		return 0, fmt.Errorf("%w: %d segments acknowledged, %d sent", ErrAckRange, received, r.acked+uint64(r.inflight.Len()))
	}
	if received == r.acked {
		return 0, nil
	}
	prev := r.lastAck
	wasBusy := r.backlog && r.busySince <= prev
	r.progressAt, r.lastAck = now, now
	bytes := 0
	var sent int64 // when the newest segment acknowledged was taken
	for r.acked < received {
		e := r.inflight.Pop()
		sent = e.Sent
		r.acked++
		r.flying -= int64(e.Size)
		bytes += e.Size
		if r.acked == received {
			d := float64(now - e.Sent)
			if r.ackDelay == 0 {
				r.ackDelay = d
			} else {
				r.ackDelay += AckDelayGain * (d - r.ackDelay)
			}
		}
		if each != nil {
			each(e)
		}
	}
	r.observe(now, prev, bytes, wasBusy || sent < prev)
	r.updateBacklog(now)
	return bytes, nil
}

// observe updates the drain-rate estimate after bytes were acknowledged
// at now, the previous acknowledgement having come at prev. The interval
// counts when the rail was draining all along: it had a backlog since
// before prev, or the newest segment acknowledged was taken before prev
// (it waited behind the segments acknowledged then: a planned share
// handed over at once drains so, without the rail ever holding a
// backlog). Otherwise the interval measured the offered load, not the
// rail. Intervals accumulate into a sample of at least RateWindow.
func (r *Rail[T]) observe(now, prev int64, bytes int, draining bool) {
	r.delivered += int64(bytes)
	if !draining || now <= prev {
		return
	}
	r.accBytes += int64(bytes)
	r.accTime += now - prev
	if r.accTime < int64(r.cfg.RateWindow) {
		return
	}
	sample := float64(r.accBytes) * 8 / (float64(r.accTime) / 1e9)
	r.accBytes, r.accTime = 0, 0
	r.rateAt = now
	if r.rate == 0 {
		r.rate = sample
	} else {
		r.rate += RateGain * (sample - r.rate)
	}
}

// StallLimit is how long the rail may go without acknowledgement progress
// while segments are in flight, given the configured rail timeout: the
// timeout plus four smoothed ACK delays, or four timeouts before the
// first sample.
func (r *Rail[T]) StallLimit(timeout time.Duration) int64 {
	if r.ackDelay == 0 {
		return 4 * int64(timeout)
	}
	return int64(timeout) + int64(4*r.ackDelay)
}

// Stalled reports, at time now, whether segments are in flight and have
// gone without acknowledgement progress for longer than StallLimit, and
// for how long.
func (r *Rail[T]) Stalled(now int64, timeout time.Duration) (bool, time.Duration) {
	quiet := now - r.progressAt
	return r.inflight.Len() > 0 && quiet > r.StallLimit(timeout), time.Duration(quiet)
}

// Alive records at time now that the rail's connection showed progress
// below the protocol (its TCP acknowledged more of our bytes): a slow
// rail, not a dead one. The stall test then counts from now.
func (r *Rail[T]) Alive(now int64) {
	if r.inflight.Len() > 0 {
		r.progressAt = now
	}
}

// Drain empties the rail: it appends the segments in flight, then the
// queued ones, to dst (oldest first in each) and returns it. The
// estimators are kept.
func (r *Rail[T]) Drain(dst []Entry[T]) []Entry[T] {
	dst = r.inflight.Drain(dst)
	dst = r.queue.Drain(dst)
	r.queued, r.flying, r.release = 0, 0, 0
	r.backlog = false
	return dst
}

// Restart starts a new connection of the rail at time now: what was
// measured of the old one (acknowledged count, rate, ACK delay, last wait)
// is forgotten and the pipe set to pipe bytes. The queue is kept.
func (r *Rail[T]) Restart(now, pipe int64) {
	r.acked = 0
	r.rate, r.accBytes, r.accTime = 0, 0, 0
	r.lastWait, r.ackDelay, r.progressAt = 0, 0, now
	r.pipe = max(pipe, 1)
	r.backlog = false
	r.updateBacklog(now)
}

// Fill writes what the scheduler sees of the rail into st (all but Up).
func (r *Rail[T]) Fill(st *sched.RailState) {
	st.Queued = r.queue.Len()
	st.QueuedBytes = r.queued
	st.QueueCap = r.cfg.QueueDepth
	st.LastWait = r.lastWait
	st.RateBps = r.rate
	st.NominalBps = r.cfg.Nominal
	st.SegmentTime = 0
	seg := float64(r.cfg.SegmentSize) * 8
	if r.rate > 0 {
		st.SegmentTime = int64(seg / r.rate * 1e9)
	} else if r.cfg.Nominal > 0 {
		st.SegmentTime = int64(seg / r.cfg.Nominal * 1e9)
	}
}

// Credit is the peer's flow-control window as the sender tracks it: the
// cumulative credit the peer granted and the cumulative cost used. The
// zero value has no credit.
type Credit struct {
	granted, used uint64
}

// NewCredit returns a Credit with window bytes granted.
func NewCredit(window uint64) Credit { return Credit{granted: window} }

// Fits reports whether cost more bytes fit in the window.
func (c *Credit) Fits(cost uint64) bool { return c.used+cost <= c.granted }

// Available is the credit left: granted less used.
func (c *Credit) Available() uint64 { return c.granted - c.used }

// Use charges cost bytes; the caller checked Fits.
func (c *Credit) Use(cost uint64) { c.used += cost }

// Grant raises the cumulative credit to granted and reports whether it
// grew (credit never shrinks: an older ACK is ignored).
func (c *Credit) Grant(granted uint64) bool {
	if granted <= c.granted {
		return false
	}
	c.granted = granted
	return true
}
