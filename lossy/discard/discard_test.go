package discard

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

const ms = time.Millisecond

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		field string // "" = valid
	}{
		{"zero is default", Config{}, ""},
		{"history 2", Config{History: 2}, ""},
		{"initial 0..max", Config{Initial: 0.5, Max: 0.5}, ""},
		{"negative initial", Config{Initial: -0.1}, "Initial"},
		{"initial above max", Config{Initial: 0.6, Max: 0.5}, "Initial"},
		{"max 1", Config{Max: 1}, "Max"},
		{"negative max", Config{Max: -0.2}, "Max"},
		{"NaN max", Config{Max: math.NaN()}, "Max"},
		{"negative up", Config{Up: -0.1}, "Up"},
		{"up above 1", Config{Up: 1.5}, "Up"},
		{"negative down", Config{Down: -0.1}, "Down"},
		{"negative TH1", Config{QualityThreshold: -1}, "QualityThreshold"},
		{"infinite TH1", Config{QualityThreshold: math.Inf(1)}, "QualityThreshold"},
		{"negative TH2", Config{DelayThreshold: -0.5}, "DelayThreshold"},
		{"K = 1", Config{History: 1}, "History"},
		{"negative K", Config{History: -3}, "History"},
		{"negative pending", Config{Pending: -1}, "Pending"},
		{"share above 1", Config{Share: 1.5}, "Share"},
		{"NaN share", Config{Share: math.NaN()}, "Share"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("New(%+v) = %v, want ok", tc.cfg, err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.field+" = ") || !strings.Contains(err.Error(), "allowed") {
				t.Fatalf("New(%+v) = %v, want an ErrConfig naming %s and what is allowed", tc.cfg, err, tc.field)
			}
		})
	}
}

// run feeds (L, P) pairs stage by stage, in order, and returns the rate
// after each stage and the decisions.
func run(t *testing.T, c *Controller, fb [][2]float64) ([]float64, []Decision) {
	t.Helper()
	var rates []float64
	var ds []Decision
	for _, f := range fb {
		s, _ := c.Begin()
		if err := c.Period(s, time.Duration(f[0]*float64(ms)), 1); err != nil {
			t.Fatal(err)
		}
		if err := c.Quality(s, f[1]); err != nil {
			t.Fatal(err)
		}
		rates = append(rates, c.Rate())
		ds = append(ds, c.Stats().Last)
	}
	return rates, ds
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestRuleBranches walks every branch of the claims: stage 0 then Rp,
// lower on a quality drop (claim 2), raise on a delay increase against the
// previous stage (claim 3), keep otherwise (claim 5), the clamps at 0 and
// Max, and the thresholds' strictness.
func TestRuleBranches(t *testing.T) {
	cfg := Config{Initial: 0.1, Up: 0.2, Down: 0.15, QualityThreshold: 0.5, DelayThreshold: 0.2, Max: 0.45}
	for _, tc := range []struct {
		name  string
		fb    [][2]float64 // (L ms, P)
		rates []float64
		last  Decision
	}{
		{"stage 0 sends all, then Rp", [][2]float64{{10, 0}}, []float64{0.1}, Started},
		{"keep: nothing changed", [][2]float64{{10, 0}, {10, 0}}, []float64{0.1, 0.1}, Kept},
		{"raise: L grew by more than TH2", [][2]float64{{10, 0}, {12.5, 0}}, []float64{0.1, 0.3}, Raised},
		{"keep: L grew by exactly TH2", [][2]float64{{10, 0}, {12, 0}}, []float64{0.1, 0.1}, Kept},
		{"keep: L shrank", [][2]float64{{10, 0}, {5, 0}}, []float64{0.1, 0.1}, Kept},
		{"lower: P worse by more than TH1", [][2]float64{{10, 1}, {10, 0.4}}, []float64{0.1, 0}, Lowered},
		{"keep: P worse by exactly TH1", [][2]float64{{10, 1}, {10, 0.5}}, []float64{0.1, 0.1}, Kept},
		{"keep: P better", [][2]float64{{10, 0}, {10, 3}}, []float64{0.1, 0.1}, Kept},
		{"quality wins over delay", [][2]float64{{10, 1}, {20, 0}}, []float64{0.1, 0}, Lowered},
		{"clamp at 0", [][2]float64{{10, 3}, {10, 2}, {10, 1}}, []float64{0.1, 0, 0}, Lowered},
		{"clamp at Max", [][2]float64{{10, 0}, {20, 0}, {40, 0}, {80, 0}}, []float64{0.1, 0.3, 0.45, 0.45}, Raised},
		{"compares with the previous stage only", [][2]float64{{10, 0}, {5, 0}, {5.5, 0}}, []float64{0.1, 0.1, 0.1}, Kept},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if c.Rate() != 0 {
				t.Fatalf("rate before any feedback = %v, want 0", c.Rate())
			}
			rates, ds := run(t, c, tc.fb)
			for i := range rates {
				if !near(rates[i], tc.rates[i]) {
					t.Fatalf("rates = %v, want %v", rates, tc.rates)
				}
			}
			if ds[len(ds)-1] != tc.last {
				t.Fatalf("last decision %v, want %v", ds[len(ds)-1], tc.last)
			}
		})
	}
}

// TestHistoryVariant: with K, from the K-th stage on, L is compared with
// each of the last K periods (claims 4 and 6); before that, as the basic
// rule.
func TestHistoryVariant(t *testing.T) {
	cfg := Config{Initial: 0.1, Up: 0.1, Down: 0.1, DelayThreshold: 0.2, Max: 0.9, History: 3}
	for _, tc := range []struct {
		name  string
		fb    [][2]float64
		rates []float64
	}{
		// 10, 5, 5.5: with 2 periods known, only the previous one counts.
		{"basic before K stages", [][2]float64{{10, 0}, {5, 0}, {5.5, 0}}, []float64{0.1, 0.1, 0.1}},
		// 5, 5.5, 6, 6.5: each step grows by under 20 %, but 6.5 > 5*1.2
		// (three back) -> raise, where the basic rule keeps.
		{"raise against one of the last K", [][2]float64{{5, 0}, {5.5, 0}, {6, 0}, {6.5, 0}}, []float64{0.1, 0.1, 0.1, 0.2}},
		// 5, 5.5, 6, 6, 6.5: 5 is four back, out of the window -> keep.
		{"only the last K count", [][2]float64{{5, 0}, {5.5, 0}, {6, 0}, {6, 0}, {6.5, 0}}, []float64{0.1, 0.1, 0.1, 0.1, 0.1}},
		// growth against all of them: raise.
		{"raise against all", [][2]float64{{5, 0}, {5, 0}, {5, 0}, {9, 0}}, []float64{0.1, 0.1, 0.1, 0.2}},
		{"keep when not grown against any", [][2]float64{{5, 0}, {5, 0}, {5, 0}, {6, 0}}, []float64{0.1, 0.1, 0.1, 0.1}},
		{"quality still wins", [][2]float64{{5, 0}, {5.5, 0}, {6, 0}, {6.5, -1}}, []float64{0.1, 0.1, 0.1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			rates, _ := run(t, c, tc.fb)
			for i := range rates {
				if !near(rates[i], tc.rates[i]) {
					t.Fatalf("rates = %v, want %v", rates, tc.rates)
				}
			}
		})
	}
}

func TestFeedbackErrors(t *testing.T) {
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Period(0, ms, 1); !errors.Is(err, ErrUnknown) {
		t.Fatalf("period for a stage never begun: %v, want ErrUnknown", err)
	}
	s, _ := c.Begin()
	if err := c.Quality(s, math.NaN()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("NaN quality: %v", err)
	}
	if err := c.Period(s, -ms, 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative period: %v", err)
	}
	if err := c.Period(s, ms, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Period(s, ms, 1); !errors.Is(err, ErrStale) {
		t.Fatalf("second period for a stage: %v, want ErrStale", err)
	}
	if err := c.Quality(s, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Quality(s, 0); !errors.Is(err, ErrStale) {
		t.Fatalf("quality for an applied stage: %v, want ErrStale", err)
	}
	if err := c.Quality(s+1, 0); !errors.Is(err, ErrUnknown) {
		t.Fatalf("quality for a future stage: %v, want ErrUnknown", err)
	}
	st := c.Stats()
	if st.Unknown != 2 || st.Stale != 2 || st.Invalid != 2 || st.Applied != 1 || st.Rate != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestExpiry: a stage whose feedback never comes expires when Pending
// newer stages were begun; the rule then goes on from the last applied
// stage, and late feedback for the expired stage is stale.
func TestExpiry(t *testing.T) {
	c, err := New(Config{Pending: 2, Initial: 0.1, Up: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	s0, _ := c.Begin()
	must(t, c.Period(s0, 10*ms, 1))
	must(t, c.Quality(s0, 0))
	s1, _ := c.Begin() // never answered
	s2, _ := c.Begin()
	must(t, c.Period(s2, 20*ms, 1))
	must(t, c.Quality(s2, 0))
	if c.Stats().Applied != 1 {
		t.Fatal("stage 2 applied while stage 1 still waits")
	}
	s3, _ := c.Begin() // expires s1, which lets s2 apply
	st := c.Stats()
	if st.Expired != 1 || st.Applied != 2 || !near(c.Rate(), 0.2) {
		t.Fatalf("after expiry: %+v rate %v", st, c.Rate())
	}
	if err := c.Period(s1, ms, 1); !errors.Is(err, ErrStale) {
		t.Fatalf("late feedback for an expired stage: %v", err)
	}
	_ = s3
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// reference is the rule written as plainly as possible, over feedback
// given in stage order.
func reference(cfg Config, ls []time.Duration, ps []float64) []float64 {
	var out []float64
	r := 0.0
	for s := range ls {
		switch {
		case s == 0:
			r = cfg.Initial
		case ps[s-1]-ps[s] > cfg.QualityThreshold:
			r = math.Max(0, r-cfg.Down)
		default:
			grew := false
			k := 1
			if cfg.History >= 2 && s >= cfg.History {
				k = cfg.History
			}
			for j := 1; j <= k; j++ {
				if float64(ls[s]) > float64(ls[s-j])*(1+cfg.DelayThreshold) {
					grew = true
				}
			}
			if grew {
				r = math.Min(cfg.Max, r+cfg.Up)
			}
		}
		out = append(out, r)
	}
	return out
}

// TestPropertyOutOfOrder: feedback arriving in any order (periods and
// qualities separately, within the pending window) yields the same rates
// as the reference applied in order, and rates stay in [0, Max].
func TestPropertyOutOfOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := Config{
			Initial:          rapid.Float64Range(0, 0.3).Draw(t, "initial"),
			Up:               rapid.Float64Range(0.01, 0.5).Draw(t, "up"),
			Down:             rapid.Float64Range(0.01, 0.5).Draw(t, "down"),
			QualityThreshold: rapid.Float64Range(0, 1).Draw(t, "th1"),
			DelayThreshold:   rapid.Float64Range(0.01, 1).Draw(t, "th2"),
			Max:              rapid.Float64Range(0.3, 0.95).Draw(t, "max"),
			History:          rapid.SampledFrom([]int{0, 2, 3, 8}).Draw(t, "k"),
		}
		n := rapid.IntRange(1, 60).Draw(t, "stages")
		ls := make([]time.Duration, n)
		ps := make([]float64, n)
		for i := range n {
			ls[i] = time.Duration(rapid.IntRange(1, 100).Draw(t, "l")) * ms
			ps[i] = float64(rapid.IntRange(-5, 5).Draw(t, "p")) / 4
		}
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg = c.Config()
		want := reference(cfg, ls, ps)
		for range n {
			c.Begin()
		}
		type ev struct {
			stage   int
			quality bool
		}
		var evs []ev
		for s := range n {
			evs = append(evs, ev{s, false}, ev{s, true})
		}
		perm := rapid.Permutation(evs).Draw(t, "order")
		for _, e := range perm {
			if e.quality {
				must2(t, c.Quality(uint64(e.stage), ps[e.stage]))
			} else {
				must2(t, c.Period(uint64(e.stage), ls[e.stage], 1))
			}
			if r := c.Rate(); r < 0 || r > cfg.Max {
				t.Fatalf("rate %v outside [0, %v]", r, cfg.Max)
			}
		}
		if !near(c.Rate(), want[n-1]) || c.Stats().Applied != uint64(n) {
			t.Fatalf("rate %v after all feedback, reference %v (applied %d of %d)", c.Rate(), want[n-1], c.Stats().Applied, n)
		}
	})
}

func must2(t *rapid.T, err error) {
	if err != nil {
		t.Fatal(err)
	}
}

func TestSelect(t *testing.T) {
	drop := make([]bool, 1000)
	for _, tc := range []struct {
		n    int
		rate float64
	}{{100, 0}, {100, 0.1}, {100, 0.5}, {7, 0.3}, {1, 0.9}, {1000, 0.37}, {2, 0.99}} {
		rng := rand.New(rand.NewPCG(1, 2))
		total := 0
		const trials = 400
		for range trials {
			d := Select(rng, tc.n, tc.rate, drop)
			cnt := 0
			for _, x := range drop[:tc.n] {
				if x {
					cnt++
				}
			}
			if cnt != d {
				t.Fatalf("n=%d rate=%v: returned %d, marked %d", tc.n, tc.rate, d, cnt)
			}
			if d > max(0, tc.n-1) {
				t.Fatalf("n=%d rate=%v: dropped %d, must keep at least one", tc.n, tc.rate, d)
			}
			// Spread: the d drops sit in d equal strata of the circle
			// of packets, so no cyclic gap between two drops is
			// longer than two strata.
			if d > 0 {
				if g, lim := maxGap(drop[:tc.n]), 2*((tc.n+d-1)/d); g > lim {
					t.Fatalf("n=%d rate=%v: drops %s, a gap of %d (want <= %d)", tc.n, tc.rate, fmtBits(drop[:tc.n]), g, lim)
				}
			}
			total += d
		}
		want := math.Min(tc.rate*float64(tc.n), float64(max(0, tc.n-1)))
		if got := float64(total) / trials; math.Abs(got-want) > 0.1*want+0.2 {
			t.Fatalf("n=%d rate=%v: mean dropped %.2f, want about %.2f", tc.n, tc.rate, got, want)
		}
	}
}

// maxGap returns the longest cyclic run of kept packets between drops.
func maxGap(drop []bool) int {
	n, best, run := len(drop), 0, 0
	for i := range 2 * n {
		if drop[i%n] {
			run = 0
			continue
		}
		run++
		best = max(best, min(run, n))
	}
	return best
}

// TestSelectUniform checks that every position is dropped with the same
// probability d/n for a given count d, which the unbiased loss-tolerant
// allreduce relies on; without the random start, at rates above one half
// some packets would go every time (strata of one packet).
func TestSelectUniform(t *testing.T) {
	drop := make([]bool, 64)
	for _, tc := range []struct {
		n    int
		rate float64
	}{{10, 0.3}, {7, 0.6}, {3, 0.55}, {64, 0.7}, {5, 0.2}} {
		rng := rand.New(rand.NewPCG(3, uint64(tc.n)))
		const trials = 40000
		hits := make(map[int][]int) // d -> per-position drop counts
		seen := make(map[int]int)
		for range trials {
			d := Select(rng, tc.n, tc.rate, drop)
			if hits[d] == nil {
				hits[d] = make([]int, tc.n)
			}
			seen[d]++
			for i, x := range drop[:tc.n] {
				if x {
					hits[d][i]++
				}
			}
		}
		for d, h := range hits {
			if seen[d] < 2000 {
				continue
			}
			p := float64(d) / float64(tc.n)
			sd := math.Sqrt(p * (1 - p) / float64(seen[d]))
			for i, c := range h {
				if got := float64(c) / float64(seen[d]); math.Abs(got-p) > 5*sd+1e-9 {
					t.Fatalf("n=%d rate=%v d=%d: position %d dropped %.4f of the time, want %.4f (+-%.4f)", tc.n, tc.rate, d, i, got, p, 5*sd)
				}
			}
		}
	}
}

func TestSelectDeterministicAndSpread(t *testing.T) {
	a, b := make([]bool, 64), make([]bool, 64)
	Select(rand.New(rand.NewPCG(7, 9)), 64, 0.25, a)
	Select(rand.New(rand.NewPCG(7, 9)), 64, 0.25, b)
	if string(fmtBits(a)) != string(fmtBits(b)) {
		t.Fatal("same seed, different selection")
	}
	// Not a contiguous tail: the first and the last quarter both lose packets.
	first, last := 0, 0
	for i := range 16 {
		if a[i] {
			first++
		}
		if a[48+i] {
			last++
		}
	}
	if first == 0 || last == 0 {
		t.Fatalf("drops not spread: %s", fmtBits(a))
	}
}

func fmtBits(b []bool) []byte {
	s := make([]byte, len(b))
	for i, x := range b {
		s[i] = '.'
		if x {
			s[i] = 'x'
		}
	}
	return s
}

func TestNoAllocs(t *testing.T) {
	c, _ := New(Config{History: 4})
	rng := rand.New(rand.NewPCG(1, 1))
	drop := make([]bool, 256)
	n := testing.AllocsPerRun(1000, func() {
		s, r := c.Begin()
		Select(rng, 256, r+0.2, drop)
		_ = c.Period(s, 3*ms, 200)
		_ = c.Quality(s, 1)
	})
	if n != 0 {
		t.Fatalf("%v allocations per stage, want 0", n)
	}
}

// matchFeeder returns a function that feeds c n stages of perPacket time
// per packet (100 packets a stage) and returns the rate after them.
func matchFeeder(t *testing.T, c *Controller) func(perPacket time.Duration, n int) float64 {
	return func(perPacket time.Duration, n int) float64 {
		t.Helper()
		for range n {
			s, _ := c.Begin()
			if err := c.Period(s, perPacket*100, 100); err != nil {
				t.Fatal(err)
			}
			if err := c.Quality(s, 0); err != nil {
				t.Fatal(err)
			}
			if r := c.Rate(); r < 0 || r > c.Config().Max {
				t.Fatalf("rate %v outside [0, Max %v]", r, c.Config().Max)
			}
		}
		return c.Rate()
	}
}

// TestMatchRule: RuleMatch discards nothing while the smoothed time per
// packet stays within 1+Margin of its baseline, Max x (g - 1 - Margin) /
// Ramp when it is g times the baseline, at most Max; a long congestion
// becomes the baseline unless the wire time bounds it.
func TestMatchRule(t *testing.T) {
	c, err := New(Config{Rule: RuleMatch, Max: 0.8, Margin: 0.2, Window: 100}) // Margin 0.2, not the default
	if err != nil {
		t.Fatal(err)
	}
	feed := matchFeeder(t, c)
	if r := feed(ms, 30); r != 0 {
		t.Fatalf("calm: rate %v, want 0", r)
	}
	if r := feed(1450*time.Microsecond, 30); math.Abs(r-0.8*(1.45-1.2)/DefaultRamp) > 0.01 {
		t.Fatalf("1.45x slower: rate %v, want %v", r, 0.8*(1.45-1.2)/DefaultRamp)
	}
	if r := feed(4*ms, 30); r != 0.8 {
		t.Fatalf("4x slower: rate %v, want Max 0.8", r)
	}
	st := c.Stats()
	if st.Raised == 0 || st.Applied != 90 || st.Baseline != ms || st.Wire != 0 {
		t.Fatalf("stats %+v", st)
	}
	// Beyond Window, a long congestion becomes the new baseline: the rate
	// falls back (the link is what it is)...
	if r := feed(4*ms, 200); r != 0 {
		t.Fatalf("after 200 slow stages: rate %v, want 0", r)
	}
	// ...unless it leaves the link more than CalmCap times slower than its
	// wire: calm at 1.2 wire times, a load ten times slower than calm.
	for _, wire := range []bool{false, true} {
		c, _ := New(Config{Rule: RuleMatch})
		if wire {
			c.SetWire(ms * 10 / 12)
		}
		feed := matchFeeder(t, c)
		feed(ms, 50)
		r := feed(10*ms, 300)
		if want := map[bool]float64{false: 0, true: DefaultMax}[wire]; r != want {
			t.Errorf("wire known %v: after 300 stages of load rate %v, want %v (baseline %v)", wire, r, want, c.Stats().Baseline)
		}
	}
}

// TestMatchReaction: the default RuleMatch's reaction time to a step
// change in the link's time per packet. A storm that makes the link g
// times slower (g from 2.5 to 20) reaches Max within two stages of
// feedback, and the first within one when g >= 4; a single calm stage
// inside a storm does not drop the rate; after the storm the rate is back
// to 0 as soon as the smoothed time is within the dead band (3 stages for
// g = 2.5, 13 for g = 20); a single slow stage of up to 1.5x in calm
// discards nothing.
func TestMatchReaction(t *testing.T) {
	for _, g := range []float64{2.5, 4, 10, 20} {
		c, err := New(Recommended)
		if err != nil {
			t.Fatal(err)
		}
		feed := matchFeeder(t, c)
		if r := feed(ms, 40); r != 0 {
			t.Fatalf("calm: rate %v", r)
		}
		slow := time.Duration(g * float64(ms))
		n := 0
		for c.Rate() < DefaultMax {
			if n++; n > 10 {
				t.Fatalf("g %v: rate %v after 10 storm stages, want Max", g, c.Rate())
			}
			feed(slow, 1)
		}
		if limit := map[bool]int{true: 1, false: 2}[g >= 4]; n > limit {
			t.Errorf("g %v: Max after %d stages, want at most %d", g, n, limit)
		}
		feed(slow, 5)
		if r := feed(ms, 1); g >= 4 && r != DefaultMax || r == 0 {
			t.Errorf("g %v: one calm stage inside the storm drops the rate to %v", g, r)
		}
		feed(slow, 5)
		n = 0
		for c.Rate() > 0 {
			if n++; n > 30 {
				t.Fatalf("g %v: rate %v 30 stages after the storm", g, c.Rate())
			}
			feed(ms, 1)
		}
		// The smoothed time falls as 1 + (g-1) 0.75^n: it is within the
		// dead band after ln(Margin/(g-1)) / ln(0.75) stages (3 for
		// g = 2.5, 11 for 10, 13 for 20).
		if limit := int(math.Ceil(math.Log(DefaultMargin/(g-1)) / math.Log(1-matchGain))); n > limit {
			t.Errorf("g %v: rate back to 0 after %d calm stages, want at most %d", g, n, limit)
		}
		feed(ms, 20)
		if r := feed(1500*time.Microsecond, 1); r != 0 {
			t.Errorf("one stage 1.5x slower in calm: rate %v, want 0", r)
		}
	}
}

// TestMatchShare: RuleMatch weighs a link's slowdown by the share of its
// cycle a whole stage takes. A link 4x slower than its baseline gets Max
// when its stages are back to back (no cycle) or a fifth of a 2 s cycle;
// with a 10 s cycle (a whole stage takes 4 % of it) the excess counts a
// fifth: g = 1 + 3 x 0.04/0.2 = 1.6, R = 0.6 x 0.1/0.5 = 0.12. The share
// is of the stage sent whole: the feedback's period is divided by 1 - R,
// so discarding does not shrink it.
func TestMatchShare(t *testing.T) {
	for _, tc := range []struct {
		cycle time.Duration
		want  float64
	}{{0, DefaultMax}, {2 * time.Second, DefaultMax}, {10 * time.Second, 0.12}} {
		c, err := New(Recommended)
		if err != nil {
			t.Fatal(err)
		}
		// Like matchFeeder, but the receiver gets the packets not
		// discarded, each taking perPacket.
		feed := func(perPacket time.Duration, n int) float64 {
			for range n {
				c.SetCycle(tc.cycle)
				s, r := c.Begin()
				got := int(math.Round(100 * (1 - r)))
				if err := c.Period(s, perPacket*time.Duration(got), got); err != nil {
					t.Fatal(err)
				}
				if err := c.Quality(s, 0); err != nil {
					t.Fatal(err)
				}
			}
			return c.Rate()
		}
		if r := feed(ms, 40); r != 0 {
			t.Fatalf("cycle %v: calm rate %v", tc.cycle, r)
		}
		if r := feed(4*ms, 40); math.Abs(r-tc.want) > 0.005 {
			t.Errorf("cycle %v: 4x slower: rate %v, want %v (share %v)", tc.cycle, r, tc.want, c.Stats().Share)
		}
		if st := c.Stats(); st.Cycle != tc.cycle || (tc.cycle > 0) != (st.Share > 0) {
			t.Errorf("cycle %v: stats cycle %v share %v", tc.cycle, st.Cycle, st.Share)
		}
	}
}
