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
// where that delay is smallest; it waits for a full rail only when that
// is expected to be clearly faster than every rail with room (and returns
// -1 when no rail has room); it explores with a decaying probability. See
// docs/scheduler.md.
type improved struct {
	m, k int
	prm  params
	rnd  *rand.Rand

	// q holds Q_i[l] at i*(k+1)+l: the expected delay in ns of a segment
	// queued on rail i at level l, NaN while the entry has no sample. Level
	// k stands for "rail i is full": the segment must first wait for room.
	q []float64
	// n counts the samples behind each entry of q, up to outlierAfter:
	// an entry's first samples are taken whole, so that it reaches the
	// rail's delay fast; later ones are bounded by OutlierFactor.
	n     []uint8
	rails []railRec

	// recs holds, per rail, a record (decision time << 8 | level) for
	// each segment now in the rail's queue (queued FIFO, qcap entries from
	// i*(qcap+fcap)) and for each that departed and is not yet reported
	// delivered (flying FIFO, fcap entries after it), oldest first. Both
	// capacities are powers of two.
	recs       []uint64
	qcap, fcap int32
	// observed is set by the first Delivered: from then on the delay is
	// learned at delivery, not at departure.
	observed bool

	decisions, explorations uint64
}

// railRec is what the improved preset keeps per rail, in one place.
type railRec struct {
	perLvl float64 // learned delay per level step, for unseen entries
	has    bool    // whether perLvl has a sample
	level  int32   // level at the last decision
	// learned and probed are the times of the rail's last sample and of
	// the last probe sent to it while the chosen rail was idle (ns).
	learned, probed int64
	queued          fifo
	flying          fifo
}

// argmin finds the rail of least value, ties to the lowest index or, with
// RandomTies, to a uniformly chosen one.
type argmin struct {
	best, ties int
	v          float64
}

func (a *argmin) offer(i int, v float64, s *improved) {
	switch {
	case a.best < 0 || v < a.v:
		a.best, a.v, a.ties = i, v, 1
	case v == a.v && s.prm.randomTies:
		a.ties++
		if s.rnd.IntN(a.ties) == 0 {
			a.best = i
		}
	}
}

// fifo is the position of one bounded FIFO of levels. When it is full the
// oldest entry is forgotten, and the pop that would have returned it is
// skipped, so that later pops stay matched with their segments.
type fifo struct{ head, n, skip int32 }

// outlierAfter is the number of samples of an entry after which
// OutlierFactor bounds the next.
const outlierAfter = 8

// flyingFactor sizes the in-flight FIFOs relative to History: segments
// that left the queue but are not acknowledged yet (socket buffers, the
// network) can outnumber the queued ones.
const flyingFactor = 2

func pow2(n int) int32 {
	p := int32(1)
	for int(p) < n {
		p <<= 1
	}
	return p
}

func newImproved(base sched.Config, prm params) *improved {
	m, k := base.Rails, prm.k
	s := &improved{
		m: m, k: k, prm: prm, rnd: base.Rand,
		q: make([]float64, m*(k+1)), n: make([]uint8, m*(k+1)), rails: make([]railRec, m),
		qcap: pow2(prm.history), fcap: pow2(prm.history * flyingFactor),
	}
	for i := range s.q {
		s.q[i] = math.NaN()
	}
	s.recs = make([]uint64, m*int(s.qcap+s.fcap))
	return s
}

// record packs a decision's time and level.
func record(now int64, l int) uint64 { return uint64(max(now, 0))<<8 | uint64(l) }

// probeBit marks a record as a probe's (its level is at most 64, below
// the bit): its delay, when lower, replaces the rail's stale value (learn).
const probeBit = 0x80

// SmallProbeBytes is the largest segment that probes a rail after
// Config.SmallProbe rather than Config.IdleProbe: one packet, which a
// slower rail delays by microseconds.
const SmallProbeBytes = 1024

// push appends record x to FIFO f of capacity c stored at buf.
func push(f *fifo, buf []uint64, c int32, x uint64) {
	if f.n == c {
		f.head = (f.head + 1) & (c - 1)
		f.n--
		f.skip++
	}
	buf[(f.head+f.n)&(c-1)] = x
	f.n++
}

// pop removes and returns the oldest record of FIFO f; ok is false when
// there is none or this pop is one to skip.
func pop(f *fifo, buf []uint64, c int32) (x uint64, ok bool) {
	if f.skip > 0 {
		f.skip--
		return 0, false
	}
	if f.n == 0 {
		return 0, false
	}
	x = buf[f.head]
	f.head = (f.head + 1) & (c - 1)
	f.n--
	return x, true
}

func (s *improved) qbuf(i int) []uint64 {
	o := i * int(s.qcap+s.fcap)
	return s.recs[o : o+int(s.qcap)]
}

func (s *improved) fbuf(i int) []uint64 {
	o := i*int(s.qcap+s.fcap) + int(s.qcap)
	return s.recs[o : o+int(s.fcap)]
}

func (s *improved) Name() string { return Name }

// Plans is true: the transport plans large messages (sched.Planning); the
// Q-table places small ones.
func (s *improved) Plans() bool { return true }

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
	if v := s.q[i*(s.k+1)+l]; v == v { // not NaN: seen
		return v
	}
	if r := &s.rails[i]; r.has {
		return r.perLvl * float64(l+1)
	}
	return 0
}

func (s *improved) Pick(now int64, size int, rails []sched.RailState) int {
	m := min(len(rails), s.m)
	usable := 0
	room, full, idle := argmin{best: -1}, argmin{best: -1}, argmin{best: -1}
	for i := 0; i < m; i++ {
		r := &rails[i]
		// Forget decisions whose segments left the queue unreported (a
		// rail that went down, a caller that drained a queue).
		rec := &s.rails[i]
		if !r.Up {
			rec.queued, rec.flying = fifo{}, fifo{}
		} else if d := rec.queued.n - int32(max(min(r.Queued, int(s.qcap)), 0)); d > 0 {
			rec.queued.head = (rec.queued.head + d) & (s.qcap - 1)
			rec.queued.n -= d
		}
		l := s.level(r)
		rec.level = int32(l)
		switch {
		case !r.Up:
		case r.Full():
			full.offer(i, s.value(i, s.k), s) // wait for room, then join the tail
		default:
			usable++
			v := s.value(i, l)
			room.offer(i, v, s)
			if r.Queued == 0 {
				idle.offer(i, v, s)
			}
		}
	}
	best := room.best
	switch {
	case best < 0:
		// No rail has room: wait for the next departure and decide then,
		// when it is known which rail got room first.
		return -1
	case full.best >= 0 && s.prm.waitFactor > 0 && full.v*s.prm.waitFactor < room.v:
		// Waiting blocks the sender, so a full rail must be clearly
		// faster than every rail with room to be waited for.
		best = full.best
	}
	if idle.best >= 0 && rails[best].Full() {
		// The sender would wait for room on a full rail while another rail
		// sits idle: under sustained load a rail whose queue runs empty
		// loses its capacity for good, so it gets the segment. It thus
		// holds about one segment in its queue, and its delay stays
		// bounded. (Bursts that fit in the queues never get here, so
		// latency-bound traffic keeps to the fastest rails.)
		best = idle.best
	}
	if size <= SmallProbeBytes && s.prm.ackRide > 0 && !rails[best].AckDue {
		// A small segment goes where an acknowledgement of the peer's
		// frames is due, to carry it (and the kernel's TCP ACK), unless
		// that rail looks more than AckRide times slower.
		due := argmin{best: -1}
		for i := 0; i < m; i++ {
			if rails[i].AckDue && rails[i].Usable() {
				due.offer(i, s.value(i, int(s.rails[i].level)), s)
			}
		}
		if due.best >= 0 && due.v <= s.prm.ackRide*s.value(best, int(s.rails[best].level)) {
			best = due.best
		}
	}
	s.decisions++
	probe := false
	eps := s.prm.eps * s.prm.epsDecay / (s.prm.epsDecay + float64(s.decisions))
	eps = max(eps, s.prm.epsMin)
	if rails[best].Queued == 0 && !rails[best].Full() {
		// The segment leaves the chosen rail at once: no exploration (it
		// could only arrive later elsewhere), only a probe of a rail whose
		// value has not been refreshed for IdleProbe.
		eps = 0
		p := s.prm.idleProbe
		if q := s.prm.smallProbe; size <= SmallProbeBytes && q > 0 && (p == 0 || q < p) {
			p = q
		}
		if p > 0 && usable > 1 {
			for i := 0; i < m; i++ {
				rec := &s.rails[i]
				if i != best && rails[i].Usable() && now-rec.learned >= p && now-rec.probed >= p {
					rec.probed = now
					best = i
					probe = true
					s.explorations++
					break
				}
			}
		}
	}
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
	l := int(s.rails[best].level)
	if rails[best].Full() {
		l = s.k
	}
	x := record(now, l)
	if probe {
		x |= probeBit
	}
	push(&s.rails[best].queued, s.qbuf(best), s.qcap, x)
	return best
}

// Departed moves the segment's record from the queue to the in-flight
// FIFO. Until the caller has reported a delivery it also learns from the
// segment now, its delay being the time since the decision plus its
// transmission time at the rail's measured rate (when known).
func (s *improved) Departed(now int64, rail int, size int, waited int64, rails []sched.RailState) {
	if rail < 0 || rail >= s.m {
		return
	}
	rec := &s.rails[rail]
	x, ok := pop(&rec.queued, s.qbuf(rail), s.qcap)
	if !ok {
		return
	}
	push(&rec.flying, s.fbuf(rail), s.fcap, x)
	if s.observed {
		return
	}
	var tx float64
	if rail < len(rails) {
		if rate := rails[rail].RateBps; rate > 0 && !math.IsInf(rate, 0) {
			tx = float64(size) * 8e9 / rate
		}
	}
	s.learn(rail, x, now, tx, rails)
}

// Delivered learns from the segment's own delay, from the decision to the
// peer's confirmation (the caller's delay, which starts when the segment
// was queued, is not used: a segment may have waited for room first).
func (s *improved) Delivered(now int64, rail int, size int, delay int64, rails []sched.RailState) {
	if rail < 0 || rail >= s.m {
		return
	}
	if !s.observed {
		// Delays are measured to the peer's confirmation from now on:
		// longer than the departure delays learned so far, and taken
		// whole until each entry has its own samples again.
		s.observed = true
		clear(s.n)
	}
	if x, ok := pop(&s.rails[rail].flying, s.fbuf(rail), s.fcap); ok {
		s.learn(rail, x, now, 0, rails)
	}
}

// learn updates Q_rail[l] for the decision recorded in x towards its
// measured delay, now minus the decision time plus extra (plus, with
// gamma > 0, the discounted best value of the state the rails are in now).
func (s *improved) learn(rail int, x uint64, now int64, extra float64, rails []sched.RailState) {
	l, probe := int(x&(probeBit-1)), x&probeBit != 0
	s.rails[rail].learned = now
	target := float64(max(now-int64(x>>8), 0)) + extra
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
	c := rail*(s.k+1) + l
	switch q := s.q[c]; {
	case q != q: // the entry's first sample
		s.q[c] = target
	case probe:
		// A probe of a stale rail: a lower delay replaces the value
		// (learned long ago, maybe while the process started), a higher
		// one leaves it (host noise as likely as the rail: one sample
		// taken whole would decide the next SmallProbe).
		s.q[c] = min(q, target)
	default:
		if s.n[c] >= outlierAfter {
			target = min(target, s.prm.outlier*q) // host noise, not the rail (OutlierFactor)
		}
		s.q[c] = q + beta*(target-q)
	}
	s.n[c] = min(s.n[c]+1, outlierAfter)
	per := target / float64(l+1)
	if r := &s.rails[rail]; r.has {
		r.perLvl += beta * (per - r.perLvl)
	} else {
		r.perLvl, r.has = per, true
	}
}

// Explain reports each rail's level at the last decision and minus the
// expected delay of a segment sent there, in seconds (so higher is better).
func (s *improved) Explain(x *sched.Explanation) {
	x.Levels, x.Values = x.Levels[:0], x.Values[:0]
	for i := range s.rails {
		l := int(s.rails[i].level)
		x.Levels = append(x.Levels, l)
		x.Values = append(x.Values, -s.value(i, l)/1e9)
	}
	x.Decisions, x.Explorations = s.decisions, s.explorations
}
