package sim_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/internal/bench"
	"github.com/multirail/multirail/sched"
	"github.com/multirail/multirail/sched/qlearn"
	"github.com/multirail/multirail/sim"
)

// TestCrossValidation runs one setup for every scheduler in the simulator
// and three times over emulated rails (real TCP through the in-process
// shaping proxy, as `multirail bench` does), and requires the goodputs to
// agree within 5 %. Rates are low so that the live half stays cheap under
// -race on a 2-core machine; the load step makes the dynamics count too.
func TestCrossValidation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs emulated rails for several seconds; skipped with -short")
	}
	const (
		rails    = "emu:40mbit,emu:20mbit,emu:10mbit"
		size     = 256 << 10
		duration = 3 * time.Second
		loadSpec = "0:0.5@1500ms"
	)
	specs, err := emu.ParseSpecs(rails)
	if err != nil {
		t.Fatal(err)
	}
	loads, err := emu.ParseLoads(loadSpec, len(specs))
	if err != nil {
		t.Fatal(err)
	}
	window := bench.AutoWindow(size)
	scenario := fmt.Sprintf(`
name: crossval
duration: %v
rails:
  - name: a
    rate: 40mbit
    load: [{kind: step, at: 1500ms, fraction: 0.5}]
  - {name: b, rate: 20mbit}
  - {name: c, rate: 10mbit}
traffic: {kind: bulk, size: %d, window: %d}
`, duration, size, window)
	sc, err := sim.ParseScenario("crossval.yaml", []byte(scenario))
	if err != nil {
		t.Fatal(err)
	}
	const liveRuns = 5
	for _, name := range sched.Names() {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // the rails are slow: CPU is not what limits them
			simRes, err := sim.Run(sc, name)
			if err != nil {
				t.Fatal(err)
			}
			// The live side is timing-dependent (a greedy scheduler such
			// as the patent preset keeps what it learned in its first
			// moments: its runs spread 51.7-58.2 Mbit/s, and a median of
			// three was 5.4 % off in one CI run): the median of liveRuns
			// runs is compared.
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(liveRuns)*30*time.Second)
			defer cancel()
			var lives []float64
			for range liveRuns {
				live, err := bench.Run(ctx, bench.Options{Rails: specs, Sched: name, Size: size,
					Duration: duration, Loads: loads, Window: window})
				if err != nil {
					t.Fatal(err)
				}
				lives = append(lives, live.GoodputBps)
			}
			slices.Sort(lives)
			live := lives[len(lives)/2]
			ratio := simRes.GoodputBps / live
			t.Logf("%s: simulated %.2f Mbit/s, emulated %.2f Mbit/s (median of %.2f Mbit/s; ratio %.3f)",
				name, simRes.GoodputBps/1e6, live/1e6, scaled(lives, 1e-6), ratio)
			if math.Abs(ratio-1) > 0.05 {
				t.Errorf("%s: simulator and emulated rails disagree by more than 5 %%: %.2f against %.2f Mbit/s (median of %d)",
					name, simRes.GoodputBps/1e6, live/1e6, liveRuns)
			}
		})
	}
}

// scaled returns xs multiplied by k, for logging.
func scaled(xs []float64, k float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * k
	}
	return out
}

// TestCrossValidationSteps checks the planner in the simulator against
// the live transport: one 1 MiB message at a time (a ring collective's
// steps, one after the other) over unequal rails of 40, 20 and 10 Mbit/s,
// the rates unknown to the sender. The simulator's step time must match
// the emulated rails' within 5 %, and both must be close to the rails'
// sum (a message that waited for its slowest rail's share would take
// about 1.7x as long).
func TestCrossValidationSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("runs emulated rails for several seconds; skipped with -short")
	}
	const (
		rails    = "emu:40mbit,emu:20mbit,emu:10mbit"
		size     = 1 << 20
		duration = 4 * time.Second
	)
	specs, err := emu.ParseSpecs(rails)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := sim.ParseScenario("steps.yaml", []byte(fmt.Sprintf(`
name: steps
duration: %v
rails:
  - {name: a, rate: 40mbit}
  - {name: b, rate: 20mbit}
  - {name: c, rate: 10mbit}
traffic: {kind: bulk, size: %d, window: 1}
`, duration, size)))
	if err != nil {
		t.Fatal(err)
	}
	simRes, err := sim.Run(sc, qlearn.Name)
	if err != nil {
		t.Fatal(err)
	}
	if simRes.Plans == 0 {
		t.Fatalf("the simulator planned no message: %+v", simRes)
	}
	// The median of five live runs: on a loaded CI machine under -race an
	// emulated run now and then reaches a third to a half of the others
	// (18.8 and 39.7 against 62-64 Mbit/s, once each in about thirty runs
	// here, not reproduced outside the test binary): one such run must not
	// decide the comparison, two in five still fail it.
	const liveSteps = 5
	ctx, cancel := context.WithTimeout(context.Background(), liveSteps*20*time.Second)
	defer cancel()
	var lives []float64
	for range liveSteps {
		live, err := bench.Run(ctx, bench.Options{Rails: specs, Sched: qlearn.Name, Size: size, Duration: duration, Window: 1})
		if err != nil {
			t.Fatal(err)
		}
		lives = append(lives, live.GoodputBps)
	}
	slices.Sort(lives)
	live := lives[len(lives)/2]
	// With one message at a time the goodput is the size over the mean
	// step time: their ratio is the inverse ratio of the step times.
	ratio := simRes.GoodputBps / live
	t.Logf("simulated %.2f Mbit/s (%d plans, %d segments moved), emulated %.2f Mbit/s (median of %.2f); ratio %.3f",
		simRes.GoodputBps/1e6, simRes.Plans, simRes.MovedSegments, live/1e6, scaled(lives, 1e-6), ratio)
	if math.Abs(ratio-1) > 0.05 {
		t.Errorf("simulator and emulated rails disagree by more than 5 %% on step times: %.2f against %.2f Mbit/s", simRes.GoodputBps/1e6, live/1e6)
	}
	for _, g := range []float64{simRes.GoodputBps, live} {
		if g < 0.85*70e6 {
			t.Errorf("one message at a time reached %.2f Mbit/s of the rails' 70: the shares do not end together", g/1e6)
		}
	}
}
