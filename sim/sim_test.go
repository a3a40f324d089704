package sim

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail/sched"
)

// baselines are the schedulers whose behaviour the tests pin down.
var baselines = []string{sched.NameRoundRobin, sched.NameShortestQueue, sched.NameWeighted}

func run(t *testing.T, sc *Scenario, name string) *Result {
	t.Helper()
	r, err := Run(sc, name)
	if err != nil {
		t.Fatalf("Run(%s): %v", name, err)
	}
	if r.ForcedPicks != 0 {
		t.Errorf("%s: %d forced picks", name, r.ForcedPicks)
	}
	return r
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol*math.Abs(want) }

// wireShare is the payload fraction of a full segment on the wire.
func wireShare(seg int) float64 { return float64(seg) / float64(seg+HeaderSize) }

func TestSingleRailSaturates(t *testing.T) {
	sc := &Scenario{
		Duration: 2 * time.Second,
		Rails:    []Rail{{Name: "only", RateBps: 100e6, Delay: time.Millisecond}},
		Traffic:  Traffic{Kind: KindBulk, Size: 1 << 20, Window: 4},
	}
	want := 100e6 * wireShare(DefaultSegmentSize)
	for _, name := range sched.Names() {
		r := run(t, sc, name)
		if !near(r.GoodputBps, want, 0.01) {
			t.Errorf("%s: goodput %.0f, want %.0f within 1%%", name, r.GoodputBps, want)
		}
		if !near(r.CapacityBps, 100e6, 1e-9) {
			t.Errorf("%s: capacity %.0f, want 100e6", name, r.CapacityBps)
		}
		// A window of 4 one-MiB messages: once going, a message waits
		// for three ahead of it, so it completes in about 4 MiB / rate.
		if wantC := 4.0 * (1 << 20) * 8 / want; !near(r.P50CompletionS, wantC, 0.01) {
			t.Errorf("%s: median completion %.4fs, want about %.4fs", name, r.P50CompletionS, wantC)
		}
	}
}

func TestShortestQueueSharesByRate(t *testing.T) {
	sc := &Scenario{
		Duration: 3 * time.Second,
		Rails: []Rail{
			{Name: "fast", RateBps: 100e6, Delay: time.Millisecond},
			{Name: "slow", RateBps: 50e6, Delay: time.Millisecond},
		},
		Traffic: Traffic{Kind: KindBulk, Size: 1 << 20, Window: 8},
	}
	r := run(t, sc, sched.NameShortestQueue)
	if !near(r.Rails[0].Share, 2.0/3, 0.02) || !near(r.Rails[1].Share, 1.0/3, 0.04) {
		t.Errorf("shares %.3f/%.3f, want 0.667/0.333", r.Rails[0].Share, r.Rails[1].Share)
	}
	if want := 150e6 * wireShare(DefaultSegmentSize); !near(r.GoodputBps, want, 0.02) {
		t.Errorf("goodput %.0f, want %.0f within 2%%", r.GoodputBps, want)
	}
	// Round-robin stripes equally and drags at the slow rail.
	rr := run(t, sc, sched.NameRoundRobin)
	if !near(rr.GoodputBps, 100e6*wireShare(DefaultSegmentSize), 0.03) {
		t.Errorf("roundrobin goodput %.0f, want about 2 x 50 Mbit/s", rr.GoodputBps)
	}
}

func TestDeterministic(t *testing.T) {
	sc, err := Builtin("many-rails")
	if err != nil {
		t.Fatal(err)
	}
	sc.Duration = 2 * time.Second
	for _, name := range sched.Names() {
		a, b := run(t, sc, name), run(t, sc, name)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two runs of the same scenario and seed differ:\n%+v\n%+v", name, a, b)
		}
	}
	// The seed matters: it draws the background-load bursts.
	sc2 := *sc
	sc2.Seed = 99
	a, b := run(t, sc, sched.NameShortestQueue), run(t, &sc2, sched.NameShortestQueue)
	if a.CapacityBps == b.CapacityBps {
		t.Errorf("seeds 0 and 99 gave the same capacity %.0f", a.CapacityBps)
	}
}

func TestStepLoadHalvesThroughput(t *testing.T) {
	sc := &Scenario{
		Duration:  2 * time.Second,
		SeriesBin: 100 * time.Millisecond,
		Rails: []Rail{{RateBps: 100e6, Delay: time.Millisecond,
			Load: []Load{{Kind: LoadStep, At: time.Second, Fraction: 0.5}}}},
		Traffic: Traffic{Kind: KindBulk, Size: 1 << 20},
	}
	for _, name := range baselines {
		r := run(t, sc, name)
		if r.Series.BinS != 0.1 || len(r.Series.Bytes[0]) != 20 {
			t.Fatalf("series: bin %v s, %d bins; want 0.1 s, 20", r.Series.BinS, len(r.Series.Bytes[0]))
		}
		var before, after int64
		for i, b := range r.Series.Bytes[0] {
			switch {
			case i >= 2 && i < 10:
				before += b
			case i >= 12:
				after += b
			}
		}
		if ratio := float64(after) / float64(before); !near(ratio, 0.5, 0.02) {
			t.Errorf("%s: throughput after the step / before = %.3f, want 0.5", name, ratio)
		}
		if !near(r.CapacityBps, 75e6, 1e-9) {
			t.Errorf("%s: capacity %.0f, want 75e6", name, r.CapacityBps)
		}
		var capBytes float64
		for i, c := range r.Series.CapacityBytes[0] {
			capBytes += c
			if want := map[bool]float64{true: 100e6, false: 50e6}[i < 10] / 8 * 0.1; !near(c, want, 1e-9) {
				t.Errorf("%s: capacity of bin %d = %v bytes, want %v", name, i, c, want)
			}
		}
		if !near(capBytes*8/2, r.CapacityBps, 1e-9) {
			t.Errorf("%s: capacity series adds up to %v bits/s, not %v", name, capBytes*8/2, r.CapacityBps)
		}
		if sh := r.Series.CapacityShares(); sh[0][5] != 1 {
			t.Errorf("%s: one rail's capacity share %v, want 1", name, sh[0][5])
		}
	}
}

func TestProfileFinishIntegratesLoad(t *testing.T) {
	ms := int64(time.Millisecond)
	// 8 Mbit/s = 1 byte per microsecond.
	p := newProfile(8e6, []Load{{Kind: LoadStep, At: time.Millisecond, Fraction: 0.5}}, 1, 0)
	// 2000 bytes from 0: 1000 in the first ms, 1000 at half rate in 2 ms.
	if got := p.finish(0, 2000*8); got != 3*ms {
		t.Errorf("finish across a step = %v, want 3ms", time.Duration(got))
	}
	// A rail fully taken from 1 ms to 2 ms pauses the transmission.
	p = newProfile(8e6, []Load{{Kind: LoadStep, At: time.Millisecond, Fraction: 1}, {Kind: LoadStep, At: 2 * time.Millisecond}}, 1, 0)
	if got := p.finish(0, 2000*8); got != 3*ms {
		t.Errorf("finish across a full outage = %v, want 3ms", time.Duration(got))
	}
	p = newProfile(8e6, []Load{{Kind: LoadStep, At: time.Millisecond, Fraction: 1}}, 1, 0)
	if got := p.finish(0, 2000*8); got != never {
		t.Errorf("finish on a rail gone for good = %v, want never", time.Duration(got))
	}
	// On/off: 50 % taken during the first half of every 2 ms.
	p = newProfile(8e6, []Load{{Kind: LoadOnOff, Period: 2 * time.Millisecond, Duty: 0.5, Fraction: 0.5}}, 1, 0)
	if got := p.capacityBits(4 * ms); got != 0.75*8e6*0.004 {
		t.Errorf("on/off capacity over 4 ms = %v bits, want %v", got, 0.75*8e6*0.004)
	}
}

func TestPoissonLoadMeanFraction(t *testing.T) {
	// Bursts of mean 100 ms every mean 300 ms gap, taking 80 %: on a
	// quarter of the time, so 20 % of the capacity goes on average.
	p := newProfile(1e9, []Load{{Kind: LoadPoisson, Gap: 300 * time.Millisecond, Length: 100 * time.Millisecond, Fraction: 0.8}}, 7, 3)
	const T = 1000 * time.Second
	if got := p.capacityBits(int64(T)) / T.Seconds(); !near(got, 0.8e9, 0.02) {
		t.Errorf("mean capacity %.3g bit/s, want 0.8e9 within 2%%", got)
	}
}

func TestTraceLoad(t *testing.T) {
	sc := &Scenario{
		Duration: time.Second,
		Rails: []Rail{{RateBps: 100e6, Load: []Load{{Kind: LoadTrace, Points: []TracePoint{
			{At: 0, Fraction: 0.2}, {At: 500 * time.Millisecond, Fraction: 0.6}}}}}},
		Traffic: Traffic{Kind: KindBulk},
	}
	r := run(t, sc, sched.NameShortestQueue)
	if !near(r.CapacityBps, 60e6, 1e-9) {
		t.Errorf("capacity %.0f, want 60e6", r.CapacityBps)
	}
	if !near(r.GoodputBps, 60e6*wireShare(DefaultSegmentSize), 0.01) {
		t.Errorf("goodput %.0f, want about 60e6", r.GoodputBps)
	}
}

func TestRateEstimate(t *testing.T) {
	sc := &Scenario{
		Duration: time.Second,
		Rails: []Rail{
			{RateBps: 200e6, Delay: time.Millisecond},
			{RateBps: 50e6, Delay: time.Millisecond},
		},
		Traffic: Traffic{Kind: KindBulk, Window: 16},
	}
	s, err := New(sc, sched.NameRoundRobin) // round-robin keeps both rails backlogged
	if err != nil {
		t.Fatal(err)
	}
	s.Run()
	for i, want := range []float64{200e6, 50e6} {
		st := s.links[0].states[i]
		if !near(st.RateBps, want, 0.01) {
			t.Errorf("rail %d: RateBps %.0f, want %.0f", i, st.RateBps, want)
		}
		if wantT := float64(DefaultSegmentSize) * 8 / st.RateBps * 1e9; !near(float64(st.SegmentTime), wantT, 1e-6) {
			t.Errorf("rail %d: SegmentTime %d, want %.0f", i, st.SegmentTime, wantT)
		}
		if st.NominalBps != 0 {
			t.Errorf("rail %d: NominalBps %v without known_bandwidths", i, st.NominalBps)
		}
	}
}

func TestAllreduceCompletes(t *testing.T) {
	for _, n := range []int{8, 64} {
		sc := &Scenario{
			Seed: 3,
			Rails: []Rail{
				{Name: "x", RateBps: 1e9, Delay: 10 * time.Microsecond},
				{Name: "y", RateBps: 400e6, Delay: 20 * time.Microsecond,
					Load: []Load{{Kind: LoadPoisson, Gap: 5 * time.Millisecond, Length: time.Millisecond, Fraction: 0.7}}},
			},
			SegmentSize: 4 << 10,
			Traffic:     Traffic{Kind: KindAllreduce, Ranks: n, Size: int64(n) * 6 << 10, Iterations: 2, RailsMin: 1, RateJitter: 0.3},
		}
		for _, name := range sched.Names() {
			s, err := New(sc, name)
			if err != nil {
				t.Fatal(err)
			}
			r := s.Run()
			total := int64(2 * (n - 1) * 2)
			for i, rk := range s.ranks {
				if rk.step != total || rk.sent != total || rk.recv != total || rk.iters != 2 {
					t.Fatalf("n=%d %s: rank %d ended at %+v, want %d steps sent and received, 2 iterations", n, name, i, rk, total)
				}
			}
			if r.Completed != 2 || len(r.Completions) != 2 || r.CompletionUnit != "allreduce" {
				t.Errorf("n=%d %s: %d completions (%s), want 2 allreduces", n, name, r.Completed, r.CompletionUnit)
			}
			chunk := int64(6 << 10)
			if want := int64(n) * total * chunk; r.DeliveredBytes != want || r.OfferedBytes != want {
				t.Errorf("n=%d %s: delivered %d of %d bytes, want %d", n, name, r.DeliveredBytes, r.OfferedBytes, want)
			}
			if r.SegmentsSent != r.SegmentsDelivered || r.SegmentsSent != uint64(n)*uint64(total)*2 {
				t.Errorf("n=%d %s: segments sent %d, delivered %d", n, name, r.SegmentsSent, r.SegmentsDelivered)
			}
			if math.Abs(r.DurationS-(r.Completions[0]+r.Completions[1])) > 1e-9 {
				t.Errorf("n=%d %s: duration %v is not the sum of the iterations %v", n, name, r.DurationS, r.Completions)
			}
			if s.bugs != 0 {
				t.Errorf("n=%d %s: %d over-deliveries", n, name, s.bugs)
			}
		}
	}
}

func TestReqResp(t *testing.T) {
	sc := &Scenario{
		Rails: []Rail{{RateBps: 100e6, Delay: time.Millisecond}, {RateBps: 50e6, Delay: 2 * time.Millisecond}},
		Traffic: Traffic{Kind: KindReqResp, Request: 1000, Response: 100 << 10, Window: 2, Count: 50,
			ReverseRails: []Rail{{Name: "back", RateBps: 20e6, Delay: 5 * time.Millisecond}}},
	}
	for _, name := range baselines {
		r := run(t, sc, name)
		if r.Completed != 50 || r.CompletionUnit != "request" || len(r.Rails) != 3 || r.Rails[2].Name != "back.rev" {
			t.Fatalf("%s: completed %d %s, rails %+v", name, r.Completed, r.CompletionUnit, r.Rails)
		}
		// The response over the 20 Mbit/s reverse rail bounds a round trip.
		if min := float64(100<<10) * 8 / 20e6; r.Completions[0] < min {
			t.Errorf("%s: fastest request %.4fs, below the response's %.4fs on the reverse rail", name, r.Completions[0], min)
		}
	}
}

func TestMixedPoissonOfferedLoad(t *testing.T) {
	sc := &Scenario{
		Duration: 5 * time.Second,
		Rails:    []Rail{{RateBps: 100e6}, {RateBps: 100e6}},
		Traffic:  Traffic{Kind: KindMixed, Load: 0.4, Sizes: []SizeWeight{{Size: 4 << 10, Weight: 3}, {Size: 256 << 10, Weight: 1}}},
	}
	r := run(t, sc, sched.NameShortestQueue)
	if !near(r.GoodputBps, 80e6, 0.1) {
		t.Errorf("goodput %.0f at 40 %% of 200 Mbit/s offered, want about 80e6", r.GoodputBps)
	}
	if r.Completed < 600 || r.P99CompletionS <= r.P50CompletionS {
		t.Errorf("completed %d, p50 %v, p99 %v", r.Completed, r.P50CompletionS, r.P99CompletionS)
	}
}

func TestDispatchTimer(t *testing.T) {
	sc := &Scenario{
		DispatchInterval: 10 * time.Millisecond,
		Rails:            []Rail{{RateBps: 100e6, Delay: time.Millisecond}, {RateBps: 50e6, Delay: time.Millisecond}},
		Traffic:          Traffic{Kind: KindBulk, Size: 256 << 10, Count: 40},
	}
	for _, name := range sched.Names() {
		s, err := New(sc, name)
		if err != nil {
			t.Fatal(err)
		}
		r := s.Run()
		if r.Completed != 40 || r.SegmentsDelivered != r.SegmentsSent {
			t.Errorf("%s: completed %d of 40", name, r.Completed)
		}
		// Every departure happens on a tick, so every wait ends on one.
		for i, st := range s.links[0].states {
			if st.Queued != 0 {
				t.Errorf("%s: rail %d ends with %d queued", name, i, st.Queued)
			}
		}
	}
}

func TestKnownBandwidths(t *testing.T) {
	sc := &Scenario{
		Duration:        100 * time.Millisecond,
		KnownBandwidths: true,
		Rails:           []Rail{{RateBps: 100e6}, {RateBps: 25e6}},
		Traffic:         Traffic{Kind: KindBulk},
	}
	s, err := New(sc, sched.NameShortestQueue)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{100e6, 25e6} {
		if st := s.links[0].states[i]; st.NominalBps != want || st.SegmentTime != int64(float64(DefaultSegmentSize)*8/want*1e9) {
			t.Errorf("rail %d: NominalBps %v SegmentTime %v", i, st.NominalBps, st.SegmentTime)
		}
	}
}

func TestBuiltinsRun(t *testing.T) {
	for _, name := range BuiltinNames() {
		sc, err := Builtin(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if Describe(name) == "" || BuiltinSource(name) == "" {
			t.Errorf("%s: no description", name)
		}
		if sc.Traffic.Kind == KindAllreduce {
			sc.Traffic.Ranks = 16
			sc.Traffic.Size = 16 << 16
		} else {
			sc.Duration = 500 * time.Millisecond
		}
		for _, s := range baselines {
			r := run(t, sc, s)
			if r.GoodputBps <= 0 || r.Efficiency <= 0 || r.Efficiency > 1 {
				t.Errorf("%s/%s: goodput %v efficiency %v", name, s, r.GoodputBps, r.Efficiency)
			}
		}
	}
	if _, err := Builtin("nope"); err == nil {
		t.Error("Builtin(nope) succeeded")
	}
}

func TestSteadyStateAllocatesNothing(t *testing.T) {
	sc, err := Builtin("many-rails")
	if err != nil {
		t.Fatal(err)
	}
	sc.Duration = time.Hour
	for _, name := range baselines {
		s, err := New(sc, name)
		if err != nil {
			t.Fatal(err)
		}
		s.Step(50000) // warm up: pools and slices at their working size
		if allocs := testing.AllocsPerRun(20, func() { s.Step(5000) }); allocs > 1 {
			t.Errorf("%s: %.1f allocations per 5000 events", name, allocs)
		}
	}
}

func TestSchedulersListed(t *testing.T) {
	sc := &Scenario{Duration: time.Second, Rails: []Rail{{RateBps: 1e6}}, Traffic: Traffic{Kind: KindBulk}}
	if got := sc.SchedulerNames(); !slices.Equal(got, sched.Names()) {
		t.Errorf("default schedulers %v, want all %v", got, sched.Names())
	}
	sc.Schedulers = []string{"nope"}
	if err := sc.Validate(); err == nil {
		t.Error("unknown scheduler accepted")
	} else if !errors.Is(err, ErrScenario) || !strings.HasPrefix(err.Error(), "sim: invalid scenario: schedulers[0]: ") {
		t.Errorf("Validate: %v, want sim: invalid scenario: schedulers[0]: ...", err)
	}
	if _, err := Builtin("nope"); !errors.Is(err, ErrScenario) || !strings.HasPrefix(err.Error(), "sim: ") {
		t.Errorf("Builtin(nope): %v", err)
	}
}
