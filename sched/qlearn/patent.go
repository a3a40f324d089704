package qlearn

import (
	"math"
	"math/rand/v2"

	"github.com/multirail/multirail/sched"
)

// patent is the preset of CN101833479A as reconstructed in
// docs/scheduler.md. Comments name the patent's steps.
type patent struct {
	m, k    int
	prm     params
	rnd     *rand.Rand
	segBits float64 // seg_max in bits, for time_interval

	qInterval float64 // queue_interval = ceil(queue_max/k) * QueueFactor, per call

	// tables holds the C(m,2) pair tables Q_ij[k_i][k_j][a] back to back;
	// pi[p], pj[p] are the rails of table p.
	tables []float64
	pi, pj []int

	waitTime []float64 // wait_time[i], in units of time_interval
	cur      []int     // s_current: k_i of every rail
	prev     []int     // s_prev
	totals   []float64 // Q_total(s_current, a) of the last decision

	started bool
	aPrev   int
	r       float64 // reward of a_prev (step 9)

	decisions, explorations uint64
}

func newPatent(base sched.Config, prm params) *patent {
	m, k := base.Rails, prm.k
	s := &patent{
		m: m, k: k, prm: prm, rnd: base.Rand, segBits: float64(base.SegmentSize) * 8,
		waitTime: make([]float64, m), cur: make([]int, m), prev: make([]int, m),
		totals: make([]float64, m),
	}
	for i := 0; i < m; i++ {
		for j := i + 1; j < m; j++ {
			s.pi = append(s.pi, i)
			s.pj = append(s.pj, j)
		}
	}
	// Step 1.8: every Q value starts at 0 (the patent's initial value was
	// lost with its formula images; 0 is our reconstruction).
	s.tables = make([]float64, len(s.pi)*k*k*m)
	return s
}

func (s *patent) Name() string { return NamePatent }

// index returns the position of Q_p[ki][kj][a] in s.tables.
func (s *patent) index(p, ki, kj, a int) int {
	return ((p*s.k+ki)*s.k+kj)*s.m + a
}

func (s *patent) Pick(now int64, size int, rails []sched.RailState) int {
	m := min(len(rails), s.m)
	up := 0
	for i := 0; i < m; i++ {
		if rails[i].Up {
			up++
		}
	}
	if up == 0 {
		return -1
	}
	s.decisions++
	if !s.started {
		// Step 5: s_current = (0,...,0) and a random rail (among those up;
		// the patent knows no broken rails).
		s.started = true
		for i := range s.cur {
			s.cur[i] = 0
		}
		n := s.rnd.IntN(up)
		a := 0
		for i := 0; i < m; i++ {
			if rails[i].Up {
				if n == 0 {
					a = i
					break
				}
				n--
			}
		}
		s.explorations++
		s.finish(a)
		return a
	}
	// Step 2.1 (reconstruction): queue_interval = ceil(queue_max/k) times
	// the factor that stands in for the patent's unknown use of m.
	qmax := rails[0].QueueCap
	for i := 1; i < m; i++ {
		qmax = max(qmax, rails[i].QueueCap)
	}
	s.qInterval = math.Ceil(float64(max(qmax, 1))/float64(s.k)) * s.prm.queueFactor
	// Step 6.2 (reconstruction): k_i = min(k-1, floor((counter[i] +
	// wait_time[i]) / (2 queue_interval))).
	for i := 0; i < m; i++ {
		x := (float64(rails[i].Queued) + s.waitTime[i]) / (2 * s.qInterval)
		ki := s.k - 1
		if x < float64(ki) {
			ki = int(x)
		}
		s.cur[i] = ki
	}
	// Step 6.3: a_current = argmax_a sum_{i<j} Q_ij[k_i][k_j][a], over the
	// rails that are up.
	for a := range s.totals {
		s.totals[a] = 0
	}
	for p := range s.pi {
		base := s.index(p, s.cur[s.pi[p]], s.cur[s.pj[p]], 0)
		row := s.tables[base : base+s.m]
		for a := 0; a < m; a++ {
			s.totals[a] += row[a]
		}
	}
	a := argmax(s.totals[:m], rails, s.prm.randomTies, s.rnd)
	// Step 7: for every pair table,
	// Q(s_prev,a_prev) = (1-beta) Q(s_prev,a_prev) + beta (r + gamma Q(s_cur,a_cur)).
	beta, gamma := s.prm.beta, s.prm.gamma
	for p := range s.pi {
		ip, jp := s.pi[p], s.pj[p]
		old := s.index(p, s.prev[ip], s.prev[jp], s.aPrev)
		nxt := s.index(p, s.cur[ip], s.cur[jp], a)
		s.tables[old] = (1-beta)*s.tables[old] + beta*(s.r+gamma*s.tables[nxt])
	}
	s.finish(a)
	return a
}

// finish does steps 9 and 10 for action a: the reward, computed now from
// the rail's last measured wait (the stale reward design.md notes), and
// s_prev = s_current, a_prev = a_current. Step 8 (queueing on a, waiting
// while it is full) is the caller's.
func (s *patent) finish(a int) {
	s.r = 1/(s.waitTime[a]+1) - s.prm.penalty/float64(s.k)
	copy(s.prev, s.cur)
	s.aPrev = a
}

// Departed is step 11.3: wait_time[i] = (now - enter_time[j]) /
// time_interval, with time_interval = seg_max / bandwidth (reconstruction).
// The bandwidth is the rail's configured NominalBps when there is one (the
// patent's theoretical bandwidth), else the measured RateBps; while neither
// is known the wait is taken as 0.
func (s *patent) Departed(now int64, rail int, size int, waited int64, rails []sched.RailState) {
	if rail < 0 || rail >= s.m || rail >= len(rails) {
		return
	}
	bw := rails[rail].NominalBps
	if !(bw > 0) || math.IsInf(bw, 0) {
		bw = rails[rail].RateBps
	}
	if !(bw > 0) || math.IsInf(bw, 0) || waited < 0 {
		s.waitTime[rail] = 0
		return
	}
	interval := s.segBits / bw * 1e9 // ns
	s.waitTime[rail] = float64(waited) / interval
}

// Explain reports s_current and Q_total(s_current, a) of the last decision.
func (s *patent) Explain(x *sched.Explanation) {
	x.Levels = append(x.Levels[:0], s.cur...)
	x.Values = append(x.Values[:0], s.totals...)
	x.Decisions, x.Explorations = s.decisions, s.explorations
}

// argmax returns the up rail with the largest v, ties going to the lowest
// index or, with random, to a uniformly chosen one among the tied.
func argmax(v []float64, rails []sched.RailState, random bool, rnd *rand.Rand) int {
	best, ties := -1, 0
	for i := range v {
		if !rails[i].Up {
			continue
		}
		switch {
		case best < 0 || v[i] > v[best]:
			best, ties = i, 1
		case v[i] == v[best] && random:
			ties++
			if rnd.IntN(ties) == 0 {
				best = i
			}
		}
	}
	return best
}
