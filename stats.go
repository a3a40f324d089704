// Telemetry: Conn.Stats.

package multirail

import (
	"sync/atomic"
	"time"

	"github.com/multirail/multirail/lossy/discard"
)

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
	// ArrivalRateBps is the same measured over the times the peer says
	// the bytes arrived (wire version 5), which the way back does not
	// distort (ACKs wait there behind the peer's own data), and counted
	// only while the bytes queued on the way out; 0 until measured.
	// Nothing decides by it yet.
	ArrivalRateBps float64
	// AckDelay is the smoothed time from a segment's write to the peer's
	// acknowledgement of it (which travels back on the same rail, behind
	// whatever the peer sends there); 0 until measured.
	AckDelay time.Duration
	// ForwardDelay is the smoothed one-way delay of the rail's segments
	// (from their write to their arrival at the peer, the way back not
	// included) above the smallest seen in the last 10-20 s: how long
	// they queue in this side's kernel, the qdiscs and the network beyond
	// the rail's base delay; 0 until measured.
	ForwardDelay time.Duration
	// Errors counts failures seen on the rail.
	Errors uint64
	// ErrorsByReason splits Errors by ErrorReasons, in that order.
	ErrorsByReason [NumErrorReasons]uint64
	// Rejoins counts the times a new TCP connection replaced the rail's
	// failed one (see Config.RailTimeout).
	Rejoins uint64
	// Resent counts the segments queued on this rail again because the
	// rail that first carried them failed before they were acknowledged.
	Resent uint64
	// Moved counts the segments of planned messages this rail took from
	// the end of another rail's queue because it would finish them sooner
	// (see Config.PlanMin).
	Moved uint64
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
	// Plans counts the messages the planner split over the rails
	// (Config.PlanMin; RailStats.Moved counts the frames moved at their
	// tails). LastPlan describes the last planned message acknowledged in
	// full; nil before one.
	Plans    uint64
	LastPlan *PlanStats
	// DispatchTicks counts the dispatch timer's ticks so far; 0 when
	// Config.DispatchInterval is 0 (continuous dispatch).
	DispatchTicks uint64
	// Stages is the telemetry of the StageConn running over this
	// connection, nil if there is none.
	Stages *StageStats
	// Path counts the steps the connection's messages took (system calls,
	// seals, goroutine hand-offs, polling): divided by the messages, what
	// a small message costs.
	Path PathStats
}

// PathStats counts the steps of a connection's messages, over all its
// rails, since it was made. The counts are what a small message costs
// besides its bytes: divide them by MessagesSent + MessagesReceived.
type PathStats struct {
	// Writes counts the writes of frames (one writev each, whatever the
	// number of frames); BareAcks counts the writes that carried an ACK
	// and no DATA frame (an ACK that found no data to ride on).
	Writes, BareAcks uint64
	// Seals counts the records sealed (0 in plaintext): each is one AEAD
	// operation and Overhead bytes on the wire.
	Seals uint64
	// FramesRead counts the frames read; DirectReads counts those a Recv
	// read itself (single rail) rather than the rail's reader goroutine.
	FramesRead, DirectReads uint64
	// RecvWaits counts the Recvs that waited to be handed a message by
	// another goroutine (a rail's reader, or another Recv): one goroutine
	// hand-off each.
	RecvWaits uint64
	// Handed counts the messages the OnMessage handler took, on the
	// goroutine that read them, and Declined those it left to Recv.
	Handed, Declined uint64
	// PollParks counts the times a reader parked at the process's poller
	// (Config.BusyPoll) and PollWakes the times the poller woke it
	// because its socket had something (one hand-off each).
	PollParks, PollWakes uint64
	// PollLapses counts the times a reader stopped polling because no
	// polling connection of the process had been active for BusyPoll,
	// and waited in the kernel; KernelWakes counts the reads waiting in
	// the kernel that the poller cut short because their socket had
	// something. Many lapses per message mean that the exchanges are
	// slower than BusyPoll, and every message pays a wake-up from the
	// kernel.
	PollLapses, KernelWakes uint64
}

// pathCounters are a connection's PathStats, counted as they happen.
type pathCounters struct {
	writes, bareAcks, seals            atomic.Uint64
	framesRead, directReads, recvWaits atomic.Uint64
	handed, declined                   atomic.Uint64
	pollParks, pollWakes               atomic.Uint64
	pollLapses, kernelWakes            atomic.Uint64
}

func (p *pathCounters) snapshot() PathStats {
	return PathStats{
		Writes: p.writes.Load(), BareAcks: p.bareAcks.Load(), Seals: p.seals.Load(),
		FramesRead: p.framesRead.Load(), DirectReads: p.directReads.Load(), RecvWaits: p.recvWaits.Load(),
		Handed: p.handed.Load(), Declined: p.declined.Load(),
		PollParks: p.pollParks.Load(), PollWakes: p.pollWakes.Load(),
		PollLapses: p.pollLapses.Load(), KernelWakes: p.kernelWakes.Load(),
	}
}

// Stats returns a snapshot of the connection's telemetry. With a scheduler
// that implements sched.Explainer it calls Explain, under the lock that
// serialises the scheduler's calls.
func (c *Conn) Stats() Stats {
	var st Stats
	if f := c.stageStats.Load(); f != nil {
		ss := (*f)()
		st.Stages = &ss
	}
	c.mu.Lock()
	st.Scheduler.Name = c.sch.Name()
	st.MessagesSent = c.sentMsgs
	st.MessagesReceived = c.recvMsgs.Load()
	st.CreditAvailable = c.credit.Available()
	st.DispatchTicks = c.ticks
	st.Plans = c.plans
	if p := c.lastPlan; p != nil {
		lp := &PlanStats{Bytes: append([]int64(nil), p.bytes...), End: make([]time.Duration, len(p.end))}
		for i, e := range p.end {
			if p.bytes[i] > 0 {
				lp.End[i] = time.Duration(e - p.start)
			}
		}
		st.LastPlan = lp
	}
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
			Name: r.name, Up: r.life.up(),
			BytesSent: r.bytesOut.Load(), SegmentsSent: r.segsOut.Load(),
			BytesReceived: r.bytesIn.Load(), SegmentsReceived: r.segsIn.Load(),
			Queued: r.core.Len(), QueuedBytes: r.core.QueuedBytes(), InFlight: r.core.InFlight(),
			LastWait: time.Duration(r.core.LastWait()), RateBps: r.core.Rate(), ArrivalRateBps: r.core.ArrivalRate(),
			AckDelay: time.Duration(r.core.AckDelay()), ForwardDelay: time.Duration(r.core.ForwardDelay()), Errors: r.errs.Load(), ErrorsByReason: r.errReasons(), Rejoins: r.rejoins, Resent: r.resent, Moved: r.stolen,
			Level: -1,
		}
		if r.lastErr != nil {
			rs.LastError = r.lastErr.Error()
		}
		if rate := r.core.Rate(); rate > 0 {
			segTime := float64(c.cfg.FrameSize) * 8 / rate * 1e9
			rs.LastWaitSegments = float64(r.core.LastWait()) / segTime
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
	st.Path = c.path.snapshot()
	return st
}

// StageStats is the telemetry of a loss-tolerant stage connection
// (lossy.StageConn) running over a Conn: both directions, the sender's
// controller and the feedback it got.
type StageStats struct {
	// Rate is the discard rate the next stage will be sent with.
	Rate float64
	// StagesSent, PacketsSent and PacketsDropped count what Send did.
	StagesSent     uint64
	PacketsSent    uint64
	PacketsDropped uint64
	// Controller is the discard controller's state: decisions, the last
	// applied feedback (Period, Quality, Received) and the feedback it
	// ignored (Stale, Unknown, Invalid) or never got (Expired).
	Controller discard.Stats
	// FeedbackIgnored counts feedback for stages this side never sent,
	// sent whole (SendPartWhole) or sent too long ago to remember.
	FeedbackIgnored uint64
	// StagesReceived, PacketsReceived and LastPeriod describe the stages
	// received; QualitiesReported counts ReportQuality calls.
	StagesReceived    uint64
	PacketsReceived   uint64
	LastPeriod        time.Duration
	QualitiesReported uint64
	// RecentRates holds the rates of the last (up to) RecentChoices stages
	// sent, oldest first.
	RecentRates []float64
}
