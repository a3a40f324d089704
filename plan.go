// The planner's shell: a large message split over the rails by
// internal/sender.Split, its tail moved to rails that run dry.

package multirail

import (
	"context"
	"log/slog"
	"time"

	"github.com/multirail/multirail/internal/sender"
)

// planMinShare is the smallest share the planner gives a rail: less is
// not worth a frame of its own (a rail that slow, or that busy, is left
// out of the message).
const planMinShare = 4 << 10

// planRecord is what became of a planned message, per rail: the bytes of
// its share (after tail moves) and when the peer acknowledged the last of
// them.
type planRecord struct {
	start int64
	bytes []int64
	end   []int64
	plan  []int64   // the shares as planned, before tail moves
	rates []float64 // the lanes' rates the plan used, Mbit/s (for the debug log)
	back  []int64   // the lanes' backlogs the plan used
}

// PlanStats describes the last planned message whose every frame was
// acknowledged (see Config.PlanMin).
type PlanStats struct {
	// Bytes is each rail's share of the message in payload bytes, in
	// Config.Rails order, after the tail moves.
	Bytes []int64
	// End is, per rail, when the peer's acknowledgement of the last frame
	// of that rail's share arrived, from when the message was planned; 0
	// for a rail without a share.
	End []time.Duration
}

// upRails counts the rails that are up. Caller holds c.mu.
func (c *Conn) upRails() int {
	n := 0
	for _, r := range c.rails {
		if r.life.up() {
			n++
		}
	}
	return n
}

// lanesLocked refreshes c.lanes: the planner's view of every rail, rates
// resolved (sender.Resolve). Caller holds c.mu.
func (c *Conn) lanesLocked() []sender.Lane {
	return sender.Resolve(c.rawLanesLocked())
}

// rawLanesLocked refreshes c.lanes with the rails' rates (0 where
// unknown; see laneLocked). Caller holds c.mu.
func (c *Conn) rawLanesLocked() []sender.Lane {
	c.lanes = c.lanes[:0]
	now, pnow := c.now(), pollNow()
	for _, r := range c.rails {
		c.lanes = append(c.lanes, c.laneLocked(r, now, pnow))
	}
	return c.lanes
}

// laneLocked is the planner's view of rail r at now (c.now()) and pnow
// (pollNow()): its own, except that a rail whose own newest rate sample
// is older than poolAfter takes its interface's pooled rate while that
// one is fresh (nic.go). Caller holds c.mu.
func (c *Conn) laneLocked(r *rail, now, pnow int64) sender.Lane {
	l := r.core.Lane(now, r.life.up())
	if _, _, at := r.core.Sample(); r.nic != nil && now-at > int64(poolAfter) {
		if rate := r.nic.rate(pnow); rate > 0 {
			l.Rate, l.Stale = rate, false
		}
	}
	return l
}

// plansLocked reports whether a message of n bytes (not eager) is
// planned: the scheduler leaves large messages to the planner, n is at
// least PlanMin, two rails or more are up, every one of them has a rate
// and the message is long enough (sender.Plannable). Caller holds c.mu.
func (c *Conn) plansLocked(n int) bool {
	return c.planning && n >= c.cfg.PlanMin && c.upRails() > 1 && sender.Plannable(int64(n), c.rawLanesLocked())
}

// queuePlannedLocked queues a large message by plan: each rail that is up
// gets a contiguous share (sender.Split) and its frames are queued as its
// queue has room; a rail that runs dry takes frames from the ends of the
// others' queues (stealLocked), and a rail that goes down hands the rest
// of its share to the scheduler. It returns the rail of the last frame.
// Caller holds c.mu; it is released while waiting for room.
func (c *Conn) queuePlannedLocked(m *msgFrames) (*rail, error) {
	n := len(c.rails)
	now := c.now()
	seg := int64(c.cfg.SegmentSize)
	lanes := c.lanesLocked()
	c.shares = sender.Split(int64(len(m.msg)), seg, lanes, planMinShare, c.shares)
	cur := make([]int, 2*n)
	end := cur[n:]
	cur = cur[:n]
	// Contiguous ranges in rail order, the one with the message's last,
	// partial segment last: frames start at multiples of the segment size.
	off, partial := 0, -1
	for i, sh := range c.shares {
		if sh%seg != 0 {
			partial = i
			continue
		}
		cur[i], end[i] = off, off+int(sh)
		off = end[i]
	}
	if partial >= 0 {
		cur[partial], end[partial] = off, len(m.msg)
	}
	rec := &planRecord{start: now, bytes: make([]int64, n), end: make([]int64, n), plan: append([]int64(nil), c.shares...)}
	for _, l := range lanes {
		rec.rates = append(rec.rates, l.Rate/1e6)
		rec.back = append(rec.back, l.Backlog)
	}
	m.om.plan = rec
	c.plans++
	continuous := !c.dispatched()
	var last *rail
	for {
		if err := c.closedErrNonBlocking(); err != nil {
			return nil, err
		}
		if c.goingAway.Load() != 0 {
			return nil, c.closedErr()
		}
		now = c.now()
		progress, left := false, false
		for i, r := range c.rails {
			if cur[i] == end[i] {
				continue
			}
			if !r.life.up() {
				// The scheduler places the rest of a rail that went down.
				l, err := c.queueRangeLocked(m, cur[i], end[i])
				if err != nil {
					return nil, err
				}
				last, cur[i], progress = l, end[i], true
				continue
			}
			pushed := false
			for cur[i] < end[i] && !r.core.Full() {
				fe := min(cur[i]+c.spanFor(r), end[i])
				c.push(now, r, c.frame(m, cur[i], fe))
				rec.bytes[i] += int64(fe - cur[i])
				cur[i], last, pushed = fe, r, true
			}
			if pushed {
				progress = true
				if continuous {
					r.signal()
				}
			}
			left = left || cur[i] < end[i]
		}
		if !left {
			return last, nil
		}
		if progress {
			continue
		}
		c.waitChangeLocked()
	}
}

// stealLocked moves queued segments from the ends of other rails' queues
// to r while r would finish them sooner (sender.Moves): the tail of a
// planned message does not wait on a rail that fell behind while r runs
// dry. It reports whether anything moved. Caller holds c.mu.
func (c *Conn) stealLocked(r *rail, now int64) bool {
	if !c.planning || !r.life.up() {
		return false
	}
	moved := false
	for r.core.Len() < c.cfg.QueueDepth {
		lanes := c.lanesLocked()
		from, late := -1, 0.0
		for i, o := range c.rails {
			if o == r || o.core.Len() == 0 || !o.life.up() {
				continue
			}
			if f := lanes[i].Finish(0); from < 0 || f > late {
				from, late = i, f
			}
		}
		if from < 0 {
			break
		}
		o := c.rails[from]
		e := o.core.Back()
		if e.Seg.msg == nil || e.Seg.msg.plan == nil || !sender.Moves(lanes[from], lanes[r.idx], int64(e.Size)) {
			break // only planned messages' frames move: eager ones are the scheduler's
		}
		e = o.core.PopBack(now)
		r.core.Requeue(now, e)
		if p := e.Seg.msg.plan; p != nil {
			p.bytes[from] -= int64(len(e.Seg.payload))
			p.bytes[r.idx] += int64(len(e.Seg.payload))
		}
		r.stolen++
		moved = true
	}
	return moved
}

// planAcked records that segment s, planned, was acknowledged on rail i
// at now; the message's record becomes the last plan once complete.
// Caller holds c.mu.
func (c *Conn) planAcked(i int, s *segment, now int64) {
	p := s.msg.plan
	p.end[i] = max(p.end[i], now)
	if s.msg.remaining == 0 {
		c.lastPlan = p
		if !c.log.Enabled(context.Background(), slog.LevelDebug) {
			return
		}
		ends := make([]float64, len(p.end))
		for k, e := range p.end {
			if e > 0 {
				ends[k] = float64(e-p.start) / 1e6
			}
		}
		c.log.Debug("planned message acknowledged", "plan", p.plan, "bytes", p.bytes, "rates_mbit", p.rates, "backlog", p.back, "ends_ms", ends)
	}
}
