package qlearn

import (
	"math"
	"math/rand/v2"

	"github.com/multirail/multirail/sched"
)

// improved is the "qlearn" preset. It learns, for every rail i and level
// l (how full the rail's queue is), the expected delay Q_i[l] of a
// segment queued on rail i at level l, from each segment's own measured
// delay: from queueing to the peer's confirmation when the caller reports
// deliveries (sched.DeliveryObserver), else its queueing delay plus its
// transmission time at the rail's measured rate. It sends each segment
// where that delay is smallest; it waits for a full rail only when even
// that is expected to be faster than every rail with room; it explores
// with a decaying probability. See docs/scheduler.md.
type improved struct {
	m, k int
	prm  params
	rnd  *rand.Rand

	q      []float64 // Q_i[l] at i*k+l: expected delay in ns
	seen   []bool    // whether Q_i[l] has a sample
	perLvl []float64 // per rail: learned delay per level step, for unseen cells
	has    []bool    // whether perLvl[i] has a sample
	levels []int     // level of every rail at the last decision

	// queued[i] holds the levels at which the segments now in rail i's
	// queue were queued, oldest first; flying[i] those of segments that
	// departed and are not yet reported delivered.
	queued, flying fifos
	// observed is set by the first Delivered: from then on the delay is
	// learned at delivery, not at departure.
	observed bool

	decisions, explorations uint64
}

// fifos is one bounded FIFO of levels per rail, in one backing array.
type fifos struct {
	buf              []int16
	cap              int
	head, size, skip []int
}

func newFifos(m, capacity int) fifos {
	return fifos{buf: make([]int16, m*capacity), cap: capacity,
		head: make([]int, m), size: make([]int, m), skip: make([]int, m)}
}

// push appends l to rail i's FIFO. When it is full the oldest entry is
// forgotten, and the pop that would have returned it is skipped, so that
// later pops stay matched with their segments.
func (f *fifos) push(i, l int) {
	if f.size[i] == f.cap {
		f.head[i] = (f.head[i] + 1) % f.cap
		f.size[i]--
		f.skip[i]++
	}
	f.buf[i*f.cap+(f.head[i]+f.size[i])%f.cap] = int16(l)
	f.size[i]++
}

// pop removes and returns the oldest level of rail i; ok is false when
// there is none or this pop is one to skip.
func (f *fifos) pop(i int) (l int, ok bool) {
	if f.skip[i] > 0 {
		f.skip[i]--
		return 0, false
	}
	if f.size[i] == 0 {
		return 0, false
	}
	l = int(f.buf[i*f.cap+f.head[i]])
	f.head[i] = (f.head[i] + 1) % f.cap
	f.size[i]--
	return l, true
}

// trim keeps the newest n entries of rail i.
func (f *fifos) trim(i, n int) {
	if d := f.size[i] - n; d > 0 {
		f.head[i] = (f.head[i] + d) % f.cap
		f.size[i] = n
	}
}

func (f *fifos) clear(i int) { f.size[i], f.skip[i] = 0, 0 }

// flyingFactor sizes the in-flight FIFOs relative to History: segments
// that left the queue but are not acknowledged yet (socket buffers, the
// network) can outnumber the queued ones.
const flyingFactor = 16

func newImproved(base sched.Config, prm params) *improved {
	m, k := base.Rails, prm.k
	return &improved{
		m: m, k: k, prm: prm, rnd: base.Rand,
		q: make([]float64, m*k), seen: make([]bool, m*k),
		perLvl: make([]float64, m), has: make([]bool, m), levels: make([]int, m),
		queued: newFifos(m, prm.history), flying: newFifos(m, prm.history*flyingFactor),
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
	bestUsable := -1
	var bestV, bestUsableV float64
	for i := 0; i < m; i++ {
		r := &rails[i]
		// Forget decisions whose segments left the queue unreported (a
		// rail that went down, a caller that drained a queue).
		if !r.Up {
			s.queued.clear(i)
			s.flying.clear(i)
		} else {
			s.queued.trim(i, max(r.Queued, 0))
		}
		l := s.level(r)
		s.levels[i] = l
		if !r.Up {
			continue
		}
		v := s.value(i, l)
		if r.Full() {
			// Waiting for room and then joining at the tail costs about
			// one level more than the top level.
			v += s.step(i)
		} else {
			usable++
			if bestUsable < 0 || v < bestUsableV {
				bestUsable, bestUsableV = i, v
			}
		}
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
		return -1 // no rail up
	}
	if rails[best].Full() && bestUsable >= 0 && bestUsableV <= bestV {
		best = bestUsable // equal value: take the rail with room
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
	s.queued.push(best, s.levels[best])
	return best
}

// step is the learned delay that one more level adds on rail i.
func (s *improved) step(i int) float64 {
	if s.has[i] {
		return s.perLvl[i]
	}
	return 0
}

// Departed moves the segment's record from the queue to the in-flight
// FIFO. Until the caller has reported a delivery it also learns from the
// segment now: its delay is taken as the time it waited in the queue plus
// its transmission time at the rail's measured rate (when known).
func (s *improved) Departed(now int64, rail int, size int, waited int64, rails []sched.RailState) {
	if rail < 0 || rail >= s.m {
		return
	}
	l, ok := s.queued.pop(rail)
	if !ok {
		return
	}
	s.flying.push(rail, l)
	if s.observed {
		return
	}
	cost := float64(max(waited, 0))
	if rail < len(rails) {
		if rate := rails[rail].RateBps; rate > 0 && !math.IsInf(rate, 0) {
			cost += float64(size) * 8e9 / rate
		}
	}
	s.learn(rail, l, cost, rails)
}

// Delivered learns from the segment's own delay, from queueing to the
// peer's confirmation.
func (s *improved) Delivered(now int64, rail int, size int, delay int64, rails []sched.RailState) {
	if rail < 0 || rail >= s.m {
		return
	}
	s.observed = true
	if l, ok := s.flying.pop(rail); ok {
		s.learn(rail, l, float64(max(delay, 0)), rails)
	}
}

// learn updates Q_rail[l] towards the measured delay cost (plus, with
// gamma > 0, the discounted best value of the state the rails are in now).
func (s *improved) learn(rail, l int, cost float64, rails []sched.RailState) {
	target := cost
	if g := s.prm.gamma; g > 0 {
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
