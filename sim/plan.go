package sim

import "github.com/multirail/multirail/internal/sender"

// The planner, as the live transport runs it (multirail's plan.go): a
// large message split over a link's rails by sender.Split, queued planned
// segments moved by sender.Moves to a rail that runs dry.

// minShare is the live transport's planMinShare; planUnit its default
// segment size (multirail.DefaultSegmentSize: the unit of the shares),
// while the simulator's segments are the live transport's frames.
const (
	minShare = 4 << 10
	planUnit = 16 << 10
)

// unit is the planner's unit: planUnit, or the segment size if smaller.
func (s *Sim) unit() int64 { return min(planUnit, s.segSize) }

func (s *Sim) upRails(L *link) int {
	n := 0
	for i := range L.states {
		if L.states[i].Up {
			n++
		}
	}
	return n
}

// lanes is the planner's view of link L's rails, in s.laneBuf, rates
// resolved.
func (s *Sim) lanes(L *link) []sender.Lane { return sender.Resolve(s.rawLanes(L)) }

// rawLanes is lanes with the rails' own rates (0 where unknown).
func (s *Sim) rawLanes(L *link) []sender.Lane {
	s.laneBuf = s.laneBuf[:0]
	for i := range L.n {
		rl := &s.rails[L.rail0+i]
		s.laneBuf = append(s.laneBuf, rl.core.Lane(s.now, L.states[i].Up))
	}
	return s.laneBuf
}

// plansMsg reports whether link L plans a message of size bytes, as the live
// transport's plansLocked decides.
func (s *Sim) plansMsg(L *link, size int64) bool {
	return L.plans && size >= int64(s.sc.PlanMin) && s.upRails(L) > 1 && sender.Plannable(size, s.rawLanes(L))
}

// pumpPlanned queues large message mi, the head of lane ln, by plan: it
// plans the message on its first call, then queues each rail's share as
// the rail has room. It reports whether the message is fully queued (the
// lane moves on to its next message); otherwise the lane waits for a
// change.
func (s *Sim) pumpPlanned(L *link, ln *lane, mi int32) bool {
	m := &s.msgs[mi]
	n := int(L.n)
	if !ln.planned {
		ln.planned, m.planned = true, true
		s.shareBuf = sender.Split(m.size, s.unit(), s.lanes(L), minShare, s.shareBuf)
		ln.cur, ln.end = ln.cur[:0], ln.end[:0]
		var off int64
		partial := -1
		for i, sh := range s.shareBuf {
			ln.cur, ln.end = append(ln.cur, off), append(ln.end, off)
			if sh%s.unit() != 0 {
				partial = i
				continue
			}
			ln.end[i] += sh
			off = ln.end[i]
		}
		if partial >= 0 {
			ln.cur[partial], ln.end[partial] = off, m.size
		}
		s.plans++
	}
	for {
		progress, left := false, false
		for i := range n {
			for ln.cur[i] < ln.end[i] && L.states[i].Up && L.states[i].Queued < s.qcap {
				payload := min(s.segSize, ln.end[i]-ln.cur[i])
				s.enqueue(L, int32(i), mi, payload)
				ln.cur[i] += payload
				m.off += payload
				progress = true
			}
			left = left || ln.cur[i] < ln.end[i]
		}
		if !left {
			ln.planned = false
			ln.blocked = laneFree
			ln.head = -1
			if ln.pending.Len() > 0 {
				ln.head = ln.pending.Pop()
			}
			return true
		}
		if !progress {
			ln.blocked = laneAnyCh
			return false
		}
	}
}

// steal moves planned segments from the ends of link L's other rails'
// queues to rail rl (global index ri), whose queue is empty, while rl
// would finish them sooner.
func (s *Sim) steal(L *link, rl *rail, ri int32) {
	for rl.core.Len() < s.qcap {
		lanes := s.lanes(L)
		from, late := int32(-1), 0.0
		for i := range L.n {
			o := &s.rails[L.rail0+i]
			if i == rl.local || o.core.Len() == 0 || !L.states[i].Up {
				continue
			}
			if f := lanes[i].Finish(0); from < 0 || f > late {
				from, late = i, f
			}
		}
		if from < 0 {
			return
		}
		o := &s.rails[L.rail0+from]
		e := o.core.Back()
		if !s.msgs[s.segs[e.Seg].msg].planned || !sender.Moves(lanes[from], lanes[rl.local], int64(e.Size)) {
			return
		}
		e = o.core.PopBack(s.now)
		o.core.Fill(&L.states[from])
		rl.core.Requeue(s.now, e)
		rl.core.Fill(&L.states[rl.local])
		sg := &s.segs[e.Seg]
		sg.rail, sg.group = ri, rl.group
		s.moved++
	}
}
