package sim

import (
	"flag"
	"testing"

	"github.com/multirail/multirail/sched"
	"github.com/multirail/multirail/sched/qlearn"
)

// claimsSeed runs TestClaims on another seed than the built-in scenarios'
// own (0), to see whether the claims hold on draws they were not measured
// on: go test -run TestClaims -v ./sim -args -claims.seed=1
var claimsSeed = flag.Int64("claims.seed", -1, "seed for TestClaims (-1: the scenarios' own)")

// A claim says that qlearn beats a baseline on a built-in scenario by a
// given margin. The bounds are the figures measured when the claims were
// written down (issue 12, seed 0), rounded against qlearn: a change that
// loses the margin fails here.
type claim struct {
	scenario string
	why      string
	check    func(t *testing.T, r map[string]*Result)
}

// claims are the simulator's claims for qlearn (BENCHMARKS.md, "Simulator:
// every scheduler on every built-in scenario"). Measured at seed 0:
// many-rails 99.8 % and 80.7 %; allreduce-64 0.28x; recovery 0.77x;
// step-shift 0.76x. On held-out seeds 1, 2, 3 (-claims.seed): many-rails
// 99.8 % and 79.3-80.4 %, allreduce-64 0.29x-0.35x and step-shift 0.76x
// (its load and traffic draw nothing from the seed) hold; recovery does
// not: 0.88x, 0.90x, 1.21x.
//
// Issue 27 changed the shared drain-rate estimator (samples from the
// intervals in which a rail drains, not only while it holds a backlog),
// which made the baseline shortestqueue faster (seed 0: allreduce-64
// 502.6 -> 286.8 ms, recovery 20.9 -> 16.2 ms), and added the planner
// for qlearn's large messages (recovery 15.7 -> 13.0 ms; allreduce-64's
// messages are below sender.MinPlanTime: 139.9 ms either way). The ratios
// are now, seed 0: allreduce-64 0.49x, recovery 0.80x, step-shift 0.76x,
// many-rails 99.5 % and 79.6 %; held-out seeds 1, 2, 3: allreduce-64
// 0.52x, 0.58x, 0.60x, recovery 0.78x, 0.88x, 1.23x. The recovery bound
// moved from 0.8 to 0.85 with them (the baseline's gain, not a loss of
// qlearn's).
//
// Issue 27 again: a short flight (a rail's queue and flight run empty,
// every frame queued before the one ahead was taken) now samples the drain
// rate too, so shortestqueue learns rates in allreduce-64, whose rails
// never drain for a whole rate window: 286.8 -> 263.7 ms at seed 0, qlearn
// unchanged at 139.9 ms. The ratio is 0.530x at seed 0 and 0.554x, 0.629x,
// 0.645x on seeds 1, 2, 3; the bound moved from 0.5 to 0.55 (the
// baseline's gain again), and holds at seed 0 only.
var claims = []claim{
	{
		scenario: "many-rails",
		why: "eight rails of 25..400 Mbit/s: qlearn waits for a fast rail when that is " +
			"clearly faster; shortestqueue fills the slow rails' queues and each message " +
			"waits for its last segment on a slow rail",
		check: func(t *testing.T, r map[string]*Result) {
			atLeast(t, "qlearn's efficiency", r[qlearn.Name].Efficiency, 0.99)
			atMost(t, "shortestqueue's efficiency", r[sched.NameShortestQueue].Efficiency, 0.85)
		},
	},
	{
		scenario: "allreduce-64",
		why: "no rail stays busy for a whole rate window, so shortestqueue has only " +
			"its short flights' rates and places by queued bytes over them; qlearn " +
			"learns the split from delivery delays",
		check: func(t *testing.T, r map[string]*Result) {
			ratioAtMost(t, r, sched.NameShortestQueue, 0.55)
		},
	},
	{
		// recovery measures latency under light load: mean completion
		// time of mostly small messages while the fast rail is 95 %
		// taken for 3 s and then given back. shortestqueue is the
		// baseline that matters: it is the only one within 5x of qlearn
		// (weighted and roundrobin keep sending to the loaded rail); it
		// learns rates only from backlogged rails and so keeps avoiding
		// the recovered one, while qlearn learns from delivery delays.
		scenario: "recovery",
		why:      "mean completion time against shortestqueue's, light load, the fast rail given back at 3 s",
		check: func(t *testing.T, r map[string]*Result) {
			ratioAtMost(t, r, sched.NameShortestQueue, 0.85)
		},
	},
	{
		scenario: "step-shift",
		why: "background load moves between rails at 4 s and 8 s: weighted keeps the " +
			"configured shares, qlearn follows the load",
		check: func(t *testing.T, r map[string]*Result) {
			ratioAtMost(t, r, sched.NameWeighted, 0.8)
		},
	},
}

func atLeast(t *testing.T, what string, got, floor float64) {
	t.Helper()
	if got < floor {
		t.Errorf("%s %.4f, claimed >= %.4f", what, got, floor)
	}
}

func atMost(t *testing.T, what string, got, ceiling float64) {
	t.Helper()
	if got > ceiling {
		t.Errorf("%s %.4f, claimed <= %.4f", what, got, ceiling)
	}
}

// ratioAtMost checks qlearn's mean completion time against at most
// ceiling x the baseline's.
func ratioAtMost(t *testing.T, r map[string]*Result, baseline string, ceiling float64) {
	t.Helper()
	q, b := r[qlearn.Name].MeanCompletionS, r[baseline].MeanCompletionS
	t.Logf("qlearn / %s mean completion time = %.4f", baseline, q/b)
	atMost(t, "qlearn's mean completion time / "+baseline+"'s", q/b, ceiling)
}

// TestClaims runs each claim's scenario, at its own duration, for every
// scheduler (the others are logged for comparison) and checks the claim.
func TestClaims(t *testing.T) {
	for _, c := range claims {
		t.Run(c.scenario, func(t *testing.T) {
			t.Parallel()
			sc, err := Builtin(c.scenario)
			if err != nil {
				t.Fatal(err)
			}
			if *claimsSeed >= 0 {
				sc.Seed = uint64(*claimsSeed)
			}
			res := map[string]*Result{}
			for _, name := range sched.Names() {
				r := run(t, sc, name)
				res[name] = r
				t.Logf("seed %d %-14s efficiency %6.2f %%, mean completion %8.2f ms, p99 %8.2f ms",
					sc.Seed, name, 100*r.Efficiency, 1e3*r.MeanCompletionS, 1e3*r.P99CompletionS)
			}
			c.check(t, res)
			if t.Failed() {
				t.Logf("claim: %s", c.why)
			}
		})
	}
}
