package qlearn

import (
	"math"
	"math/rand/v2"

	"github.com/multirail/multirail/sched"
)

// improved is the "qlearn" preset. It learns, for every rail i and level
// l (how full the rail's queue is), the expected delay Q_i[l] of a
// segment queued on rail i at level l: its own measured queueing delay plus
// its transmission time at the rail's measured rate. It sends each segment
// where that delay is smallest among the rails with room, explores with a
// decaying probability, and learns from each segment when it departs, with
// the level the segment was queued at (no stale reward). See
// docs/scheduler.md.
type improved struct {
	m, k int
	prm  params
	rnd  *rand.Rand

	q      []float64 // Q_i[l] at i*k+l: expected delay in ns
	seen   []bool    // whether Q_i[l] has a sample
	perLvl []float64 // per rail: learned delay per level step, for unseen cells
	has    []bool    // whether perLvl[i] has a sample
	levels []int     // level of every rail at the last decision

	// pending[i] is a ring of the levels at which the segments now queued
	// on rail i were queued, oldest first.
	pending    []int16
	head, size []int

	decisions, explorations uint64
}

func newImproved(base sched.Config, prm params) *improved {
	m, k := base.Rails, prm.k
	return &improved{
		m: m, k: k, prm: prm, rnd: base.Rand,
		q: make([]float64, m*k), seen: make([]bool, m*k),
		perLvl: make([]float64, m), has: make([]bool, m), levels: make([]int, m),
		pending: make([]int16, m*prm.history), head: make([]int, m), size: make([]int, m),
	}
}

func (s *improved) Name() string { return Name }

// level maps a rail's queue occupancy to 0..k-1.
func (s *improved) level(r *sched.RailState) int {
	var l int
	if r.QueueCap > 0 {
		l = r.Queued * s.k / r.QueueCap
	} else {
		l = r.Queued
	}
	return max(0, min(s.k-1, l))
}

// value is the expected delay (ns) of queueing on rail i at level l. A
// level never seen on a rail that has samples is extrapolated from the
// rail's delay per level; a rail with no sample at all is worth 0, so it
// is tried (optimism in the face of uncertainty).
func (s *improved) value(i, l int) float64 {
	if c := i*s.k + l; s.seen[c] {
		return s.q[c]
	}
	if s.has[i] {
		return s.perLvl[i] * float64(l+1)
	}
	return 0
}

func (s *improved) Pick(now int64, size int, rails []sched.RailState) int {
	m := min(len(rails), s.m)
	best, ties, usable := -1, 0, 0
	var bestV float64
	for i := 0; i < m; i++ {
		r := &rails[i]
		// Forget decisions whose segments left the queue unreported (a
		// rail that went down, a caller that drained a queue).
		if !r.Up {
			s.size[i] = 0
		} else if n := max(r.Queued, 0); s.size[i] > n {
			drop := s.size[i] - n
			s.head[i] = (s.head[i] + drop) % s.prm.history
			s.size[i] = n
		}
		l := s.level(r)
		s.levels[i] = l
		if !r.Usable() {
			continue
		}
		usable++
		v := s.value(i, l)
		switch {
		case best < 0 || v < bestV:
			best, bestV, ties = i, v, 1
		case v == bestV && s.prm.randomTies:
			ties++
			if s.rnd.IntN(ties) == 0 {
				best = i
			}
		}
	}
	if best < 0 {
		return -1 // no rail with room: wait for a departure
	}
	s.decisions++
	eps := s.prm.eps * s.prm.epsDecay / (s.prm.epsDecay + float64(s.decisions))
	eps = max(eps, s.prm.epsMin)
	if usable > 1 && eps > 0 && s.rnd.Float64() < eps {
		n := s.rnd.IntN(usable)
		for i := 0; i < m; i++ {
			if rails[i].Usable() {
				if n == 0 {
					if i != best {
						s.explorations++
					}
					best = i
					break
				}
				n--
			}
		}
	}
	s.push(best, s.levels[best])
	return best
}

func (s *improved) push(i, l int) {
	h := s.prm.history
	if s.size[i] == h { // more queued than History: forget the oldest
		s.head[i] = (s.head[i] + 1) % h
		s.size[i]--
	}
	s.pending[i*h+(s.head[i]+s.size[i])%h] = int16(l)
	s.size[i]++
}

// Departed learns from the departing segment: its delay is the time it
// waited in the queue plus its transmission time at the rail's measured
// rate (when known), and it updates the value of the level the segment
// was queued at.
func (s *improved) Departed(now int64, rail int, size int, waited int64, rails []sched.RailState) {
	if rail < 0 || rail >= s.m || s.size[rail] == 0 {
		return
	}
	h := s.prm.history
	l := int(s.pending[rail*h+s.head[rail]])
	s.head[rail] = (s.head[rail] + 1) % h
	s.size[rail]--

	cost := float64(max(waited, 0))
	if rail < len(rails) {
		if rate := rails[rail].RateBps; rate > 0 && !math.IsInf(rate, 0) {
			cost += float64(size) * 8e9 / rate
		}
	}
	target := cost
	if g := s.prm.gamma; g > 0 {
		// Q-learning target: plus the discounted best value from the
		// state the rails are in now.
		bestNext := math.Inf(1)
		for i := 0; i < min(len(rails), s.m); i++ {
			if rails[i].Usable() {
				bestNext = min(bestNext, s.value(i, s.level(&rails[i])))
			}
		}
		if !math.IsInf(bestNext, 1) {
			target += g * bestNext
		}
	}
	beta := s.prm.beta
	c := rail*s.k + l
	if s.seen[c] {
		s.q[c] += beta * (target - s.q[c])
	} else {
		s.q[c], s.seen[c] = target, true
	}
	per := target / float64(l+1)
	if s.has[rail] {
		s.perLvl[rail] += beta * (per - s.perLvl[rail])
	} else {
		s.perLvl[rail], s.has[rail] = per, true
	}
}

// Explain reports each rail's level at the last decision and minus the
// expected delay of a segment sent there, in seconds (so higher is better).
func (s *improved) Explain(x *sched.Explanation) {
	x.Levels = append(x.Levels[:0], s.levels...)
	x.Values = x.Values[:0]
	for i, l := range s.levels {
		x.Values = append(x.Values, -s.value(i, l)/1e9)
	}
	x.Decisions, x.Explorations = s.decisions, s.explorations
}
