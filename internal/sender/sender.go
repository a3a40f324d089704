package sender

import (
	"cmp"
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
	// AckDelayGain is the weight of a new ACK-delay sample, and of a new
	// forward-delay sample.
	AckDelayGain = 0.125
)

// FwdWindow is how long the smallest one-way delay seen stays the base of
// the forward delay (ForwardDelay): between one and two FwdWindows. A
// window rather than the smallest ever, so that a drift between the two
// ends' clocks or a longer path does not leave the base behind.
const FwdWindow = 10 * time.Second

// ErrAckRange means an acknowledgement named more segments than are in
// flight, or fewer than were acknowledged before, or (AckArrived) an
// arrival time before the one of an earlier acknowledgement.
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
	queuing    bool  // the queue is not empty
	queueFrom  int64 // since when queuing has held (valid while queuing)
	progressAt int64 // last acknowledgement progress, or when the flight began
	ackDelay   float64

	delivered int64 // bytes acknowledged, in total
	lastAck   int64 // the last acknowledgement progress, or when the flight began
	acc       rateAcc
	rate      float64
	rateAt    int64   // when rate last took a sample
	sample    float64 // that sample (Sample)
	sampleB   int64   // and the bytes it was made of
	// The same estimate timed by the peer's arrival times (AckArrived).
	arrAcc  rateAcc
	arrRate float64

	// The current flight (see flightDone): when it began (a Take on a rail
	// with nothing in flight), the bytes taken in it, and whether every one
	// of them was queued before the previous one was taken.
	flightAt, flightBytes int64
	flightFed             bool

	lastArr  int64 // the peer's arrival time of the last acknowledgement (AckArrived)
	arrFresh bool  // no acknowledgement with an arrival time since the flight began
	fwdMin   winMin
	fwd      float64
	rttMin   winMin // the smallest time from Take to acknowledgement lately (FwdWindow)
	stamped  bool   // the acknowledgements carry arrival times (AckArrived)
}

// rateAcc accumulates drain intervals into samples of at least the rate
// window.
type rateAcc struct {
	bytes, time int64
}

// add counts bytes acknowledged over an interval of dt ns if the rail was
// draining all along, and when the intervals reach window moves the
// moving average *rate by their sample. It returns that sample, or 0 when
// it took none, and the bytes the sample was made of.
func (a *rateAcc) add(rate *float64, dt int64, bytes int, draining bool, window int64) (float64, int64) {
	if !draining || dt <= 0 {
		return 0, 0
	}
	a.bytes += int64(bytes)
	a.time += dt
	if a.time < window {
		return 0, 0
	}
	sample, n := float64(a.bytes)*8/(float64(a.time)/1e9), a.bytes
	a.bytes, a.time = 0, 0
	smooth(rate, sample)
	return sample, n
}

// smooth moves the moving average *rate by sample (weight RateGain); the
// first sample is the average.
func smooth(rate *float64, sample float64) {
	if *rate == 0 {
		*rate = sample
	} else {
		*rate += RateGain * (sample - *rate)
	}
}

// winMin is the smallest of the values seen in the current FwdWindow and
// the one before.
type winMin struct {
	cur, prev, epoch int64
	set              bool
}

// add takes value v at now and returns the minimum.
func (m *winMin) add(now, v int64) int64 {
	switch {
	case !m.set:
		m.cur, m.prev, m.epoch, m.set = v, v, now, true
	case now-m.epoch >= int64(FwdWindow):
		m.prev, m.cur, m.epoch = m.cur, v, now
	default:
		m.cur = min(m.cur, v)
	}
	return min(m.cur, m.prev)
}

// value is the minimum, and whether a value was added since the window
// was reset.
func (m *winMin) value() (int64, bool) { return min(m.cur, m.prev), m.set }

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

// Rate is the drain-rate estimate in bits/s, 0 before the first sample:
// bytes acknowledged over the intervals between the ACKs' arrivals here
// (see AckTo).
func (r *Rail[T]) Rate() float64 { return r.rate }

// ArrivalRate is the drain-rate estimate timed by the peer's arrival
// times (AckArrived), in bits/s, 0 before the first sample (and always
// with AckTo). The ACKs' arrivals here wait behind whatever shares the way
// back (the peer's own data, in the same queues); the arrival times they
// carry do not. Nothing decides by it yet: Rate is what Fill and Lane
// report.
func (r *Rail[T]) ArrivalRate() float64 { return r.arrRate }

// ForwardDelay is the smoothed one-way delay of the acknowledged segments
// above the smallest seen lately (FwdWindow), in ns, 0 before the first
// sample: how long the rail's segments queue between Take and their
// arrival at the peer (in the sender's kernel, the qdiscs and the network)
// beyond the rail's base delay. The way back does not count: the delay is
// the peer's arrival time less the segment's Sent, the two clocks' offset
// cancelled by the minimum. With AckTo it is the round trip's instead.
func (r *Rail[T]) ForwardDelay() float64 { return r.fwd }

// Minima returns the rail's smallest one-way delay (the peer's arrival
// time less Sent, so the clocks' offset included) and its smallest time
// from Take to acknowledgement, both over the last one or two
// FwdWindows, and whether it has them from acknowledgements with arrival
// times (AckArrived).
func (r *Rail[T]) Minima() (fwd, rtt int64, ok bool) {
	f, ok1 := r.fwdMin.value()
	t, ok2 := r.rttMin.value()
	return f, t, ok1 && ok2 && r.stamped
}

// OffsetBound bounds the peer's clock less this side's from below, from
// the rail's Minima: its way there is at most half its smallest round
// trip when the two ways' base delays are equal, so fwd - rtt/2 is at
// most the offset, the closer the cleaner the rail's round trips (an
// acknowledgement that waited at the peer, as a lazy one does, lengthens
// them). Every rail of a connection joins the same two clocks: the
// highest bound over its rails is the offset (a rail that carries
// nothing both ways, whose round trips all waited, is timed by one that
// does). False without Minima.
func (r *Rail[T]) OffsetBound() (int64, bool) {
	fwd, rtt, ok := r.Minima()
	return fwd - rtt/2, ok
}

// Confirmed is when a segment taken at sent on a rail whose smallest
// one-way delay is fwd (Minima), acknowledged at now with the peer's
// arrival time arrived, would have been confirmed had the confirmation
// left the peer as it arrived and come back at the rail's base delay:
// arrived on this side's clock (arrived - off, off the highest OffsetBound) plus
// the base way back taken equal to the way there (fwd - off). It lies
// within [sent, now]. What it leaves out is the time the acknowledgement
// waited at the peer (a delayed or lazy one, or one riding the peer's
// next message) and behind the peer's own data on the way back: a
// scheduler learns the rail's way there, not the peer's turnaround
// (sched.DeliveryObserver).
func Confirmed(arrived, sent, now, fwd, off int64) int64 {
	return min(max(arrived-2*off+fwd, sent), now)
}

// AckDelay is the smoothed time from Take to acknowledgement in ns, 0
// before the first sample.
func (r *Rail[T]) AckDelay() float64 { return r.ackDelay }

// LastWait is how long the last segment taken had waited in the queue.
func (r *Rail[T]) LastWait() int64 { return r.lastWait }

// Sample is the drain-rate sample the rate took last, in bits/s, the bytes
// it was made of, and when (zeros before the first): what a Pool of the
// rail's interface takes (see Pool).
func (r *Rail[T]) Sample() (rate float64, bytes, at int64) { return r.sample, r.sampleB, r.rateAt }

// Delivered is the number of bytes acknowledged in total.
func (r *Rail[T]) Delivered() int64 { return r.delivered }

// SetPipe sets how many bytes in flight keep the rail busy by themselves.
func (r *Rail[T]) SetPipe(now, bytes int64) {
	r.pipe = max(bytes, 1)
	r.updateBacklog(now)
}

// updateBacklog records whether the rail has a backlog from now on.
func (r *Rail[T]) updateBacklog(now int64) {
	q := r.queue.Len() > 0
	if q && !r.queuing {
		r.queueFrom = now
	}
	r.queuing = q
	b := q || r.flying >= r.pipe
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
		r.arrFresh = true
		r.flightAt, r.flightBytes, r.flightFed = now, 0, true
	} else if e.Enq > r.inflight.Back().Sent {
		r.flightFed = false // queued after the rail had handed over all it had
	}
	r.flightBytes += int64(e.Size)
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
// the bytes they carried, over the interval since the previous
// acknowledgement here (see observe; AckArrived times it by the peer's
// arrival times instead). It returns those bytes, or ErrAckRange (and
// changes nothing) when received is below Acked or beyond what is in
// flight. Use AckTo or AckArrived on a connection, not both (Restart
// starts a new one).
func (r *Rail[T]) AckTo(now int64, received uint64, each func(Entry[T])) (int, error) {
	return r.ack(now, received, 0, false, each)
}

// AckArrived is AckTo for an acknowledgement that says when the last of
// the received segments arrived at the peer: arrived, in ns on the peer's
// clock (any origin, fixed for the connection). The drain rate is then
// timed by the arrival times, which the way back does not disturb (an
// acknowledgement that waits behind the peer's own data still carries the
// time its segments arrived), and the one-way delay arrived - Sent feeds
// ForwardDelay. Arrival times must not go back: ErrAckRange otherwise. An
// acknowledgement of nothing new is not checked (its time is the one
// before, or 0 before the first segment).
func (r *Rail[T]) AckArrived(now int64, received uint64, arrived int64, each func(Entry[T])) (int, error) {
	return r.ack(now, received, arrived, true, each)
}

func (r *Rail[T]) ack(now int64, received uint64, arrived int64, stamped bool, each func(Entry[T])) (int, error) {
	if received < r.acked || received-r.acked > uint64(r.inflight.Len()) {
		return 0, fmt.Errorf("%w: %d segments acknowledged, %d sent", ErrAckRange, received, r.acked+uint64(r.inflight.Len()))
	}
	if received == r.acked {
		return 0, nil
	}
	if stamped && r.fwdMin.set && arrived < r.lastArr {
		return 0, fmt.Errorf("%w: arrival time %d before the last one, %d", ErrAckRange, arrived, r.lastArr)
	}
	prev := r.lastAck
	wasBusy := r.backlog && r.busySince <= prev
	r.progressAt, r.lastAck = now, now
	bytes := 0
	var sent int64 // when the newest segment acknowledged was taken
	size := 0      // and its size
	for r.acked < received {
		e := r.inflight.Pop()
		sent, size = e.Sent, e.Size
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
	r.delivered += int64(bytes)
	win := int64(r.cfg.RateWindow)
	// The interval since the previous acknowledgement (prev) counts when
	// the rail was draining all along: it had a backlog since before
	// prev, or the newest segment acknowledged was taken before prev (it
	// waited behind the segments acknowledged then: a planned share
	// handed over at once drains so, without the rail ever holding a
	// backlog). Otherwise the interval measured the offered load, not the
	// rail. Intervals accumulate into a sample of at least RateWindow.
	if s, n := r.acc.add(&r.rate, now-prev, bytes, wasBusy || sent < prev, win); s > 0 {
		r.rateAt, r.sample, r.sampleB = now, s, n
	}
	r.rttMin.add(now, now-sent)
	if !stamped {
		r.forward(now, now-sent)
	} else {
		r.stamped = true
		base := r.forward(now, arrived-sent)
		if !r.arrFresh {
			// The interval since the previous arrival counts if the rail
			// was draining all along. The tests above are no good once
			// the ACKs take long to come back (a long way back, or one
			// behind the peer's own data): bytes in flight then include
			// those that arrived long ago, and everything sent before a
			// late ACK looks queued. So: the queue was never empty since
			// the previous ACK; or the newest segment was handed over no
			// later than the previous one arrived, less the base one-way
			// delay, give or take its own transmission time at the
			// arrival-timed rate or the nominal one (it waited behind
			// that one, and so did those before it; not at Rate, which
			// such late ACKs may have lowered: a lower rate would let
			// idle gaps pass). The first acknowledgement of a flight only
			// starts the intervals.
			tol := int64(0)
			if rate := cmp.Or(r.arrRate, r.cfg.Nominal); rate > 0 {
				tol = int64(float64(size) * 8 / rate * 1e9)
			}
			draining := r.queueSince(prev) || sent+base <= r.lastArr+tol
			r.arrAcc.add(&r.arrRate, arrived-r.lastArr, bytes, draining, win)
		}
		r.lastArr, r.arrFresh = arrived, false
	}
	if r.inflight.Len() == 0 && r.queue.Len() == 0 {
		r.flightDone(now)
	}
	r.updateBacklog(now)
	return bytes, nil
}

// FlightMin is the smallest flight that samples the drain rate (see
// flightDone).
const FlightMin = 32 << 10

// flightDone ends the flight at now, the rail's queue and flight both
// empty: the rail took the flight's bytes from its first Take and had them
// acknowledged by now. When every segment was queued before the one ahead
// of it was taken (the rail never waited for data), bytes over that time is
// the rate at which such a burst crosses the rail, its delays included
// (the first segment's trip, the acknowledgement's way back, a token
// bucket that lets a burst through after idle). It moves the rate like a
// drain sample. The interval samples (rateAcc) need a rail that drains for
// RateWindow; a rail given short planned shares (a collective's pieces:
// a few hundred KiB split over the rails, each a few ms) rarely does, and
// the few intervals it gets start on an idle rail and read low: the
// planner then gives it less, and it never recovers (4-host lab, ring
// allreduce of 1 MiB at 200/100/50: the 200 Mbit/s rail read 22-54 for the
// whole run in half of the runs). The burst's own time, delays included,
// is what the planner predicts for the next share of that size
// (Finish), and a share sized by it converges: a rail's share shrinks only
// while the burst takes longer than the others'. A flight long enough to
// take an interval sample of its own does not sample again: its drain
// rate is known without the delays.
func (r *Rail[T]) flightDone(now int64) {
	if !r.flightFed || r.flightBytes < FlightMin || now <= r.flightAt || !(r.rate > 0) || r.rateAt >= r.flightAt {
		return
	}
	sample := float64(r.flightBytes) * 8 / (float64(now-r.flightAt) / 1e9)
	smooth(&r.rate, sample)
	r.rateAt, r.sample, r.sampleB = now, sample, r.flightBytes
}

// queueSince reports whether the queue has not been empty since t or
// earlier.
func (r *Rail[T]) queueSince(t int64) bool { return r.queuing && r.queueFrom <= t }

// forward takes a one-way delay sample d (the peer's arrival time less
// Sent, the clocks' offset included) at now and returns the base: the
// smallest of the last one or two FwdWindows, this sample included.
func (r *Rail[T]) forward(now, d int64) int64 {
	base := r.fwdMin.add(now, d)
	// The first sample is the base itself (0), so the average may start
	// from 0.
	r.fwd += AckDelayGain * (float64(d-base) - r.fwd)
	return base
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
	r.backlog, r.queuing = false, false
	return dst
}

// Restart starts a new connection of the rail at time now: what was
// measured of the old one (acknowledged count, rates, ACK delay, forward
// delay, last wait) is forgotten and the pipe set to pipe bytes. The queue is kept.
func (r *Rail[T]) Restart(now, pipe int64) {
	r.acked = 0
	r.rate, r.sample, r.sampleB, r.acc, r.arrRate, r.arrAcc = 0, 0, 0, rateAcc{}, 0, rateAcc{}
	r.lastArr, r.fwdMin, r.fwd, r.rttMin, r.stamped = 0, winMin{}, 0, winMin{}, false
	r.lastWait, r.ackDelay, r.progressAt = 0, 0, now
	r.pipe = max(pipe, 1)
	r.backlog, r.queuing = false, false
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
