package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail/lab/labbench"
)

func TestLabCollPlanDefaults(t *testing.T) {
	f := &labBenchFlags{rates: "200mbit,100mbit,50mbit", sched: "all", systems: "all", hosts: 4, rounds: 1}
	set := func(string) bool { return false }
	noTorch := errors.New("gloo: no torch")
	glooChecks := 0
	withTorch := func() error { glooChecks++; return nil }
	without := func() error { glooChecks++; return noTorch }
	noBackend := func() error { return errors.New("torch-multirail: no multirail.torch") }
	p, err := f.collPlan(set, nil, without, noBackend)
	if err != nil {
		t.Fatal(err)
	}
	if p.Lab.Hosts != 4 || p.Lab.Prefix != labbench.CollPrefix || len(p.Lab.Rates) != 3 {
		t.Errorf("lab %+v", p.Lab)
	}
	if strings.Join(p.Tests, ",") != defaultCollTests || len(p.Sizes) != 5 || p.Sizes[0] != 8 || p.Sizes[4] != 4<<20 {
		t.Errorf("tests %v sizes %v", p.Tests, p.Sizes)
	}
	if got := strings.Join(p.Systems, ","); got != "openmpi-default,openmpi-weighted,iperf3-ring,multirail-qlearn" || len(p.Skipped) != 2 ||
		p.Skipped[0] != (labbench.Skip{System: "gloo", Reason: "gloo: no torch"}) ||
		p.Skipped[1] != (labbench.Skip{System: "torch-multirail", Reason: "torch-multirail: no multirail.torch"}) || glooChecks != 1 {
		t.Errorf("systems %s, skipped %v, gloo checked %d times", got, p.Skipped, glooChecks)
	}
	// With torch, all brings in gloo; with the backend, torch-multirail.
	p, err = f.collPlan(set, nil, withTorch, noBackend)
	if got := strings.Join(p.Systems, ","); err != nil || got != "openmpi-default,openmpi-weighted,iperf3-ring,gloo,multirail-qlearn" || len(p.Skipped) != 1 {
		t.Errorf("with torch: systems %s, skipped %v, %v", got, p.Skipped, err)
	}
	p, err = f.collPlan(set, nil, withTorch, withTorch)
	if got := strings.Join(p.Systems, ","); err != nil || got != "openmpi-default,openmpi-weighted,iperf3-ring,gloo,torch-multirail,multirail-qlearn" || len(p.Skipped) != 0 ||
		p.DDPBatch != labbench.DefaultDDPBatch || p.Runs() != 16 {
		t.Errorf("with the backend: systems %s, skipped %v, batch %d, %d runs, %v", got, p.Skipped, p.DDPBatch, p.Runs(), err)
	}
	// Without Open MPI the group is skipped (gloo too, which mpirun
	// starts), a named system is an error.
	glooChecks = 0
	p, err = f.collPlan(set, errors.New("no mpirun"), withTorch, noBackend)
	if err != nil || strings.Join(p.Systems, ",") != "iperf3-ring,multirail-qlearn" || len(p.Skipped) != 4 || glooChecks != 0 {
		t.Errorf("without Open MPI: %v, skipped %v, %v", p.Systems, p.Skipped, err)
	}
	named := func(n string) bool { return n == "systems" }
	f.systems = "openmpi-weighted"
	if _, err := f.collPlan(named, errors.New("no mpirun"), withTorch, noBackend); err == nil {
		t.Error("openmpi-weighted named without Open MPI: no error")
	}
	// Without iperf3 the group skips iperf3-ring; named, it is an error.
	f.systems = "all"
	f.iperf3 = func() error { return errors.New("no iperf3 on PATH") }
	p, err = f.collPlan(set, nil, without, noBackend)
	if err != nil || slices.Contains(p.Systems, labbench.IperfRing) || !slices.Contains(p.Skipped, labbench.Skip{System: labbench.IperfRing, Reason: "no iperf3 on PATH"}) {
		t.Errorf("without iperf3: %v, skipped %v, %v", p.Systems, p.Skipped, err)
	}
	f.systems = labbench.IperfRing
	if _, err := f.collPlan(named, nil, without, noBackend); err == nil || !strings.Contains(err.Error(), "no iperf3 on PATH") {
		t.Errorf("iperf3-ring named without iperf3: %v", err)
	}
	f.iperf3 = nil
	// --duration is iperf3-ring's length here, whole seconds.
	f.duration = 7 * time.Second
	withDur := func(n string) bool { return n == "systems" || n == "duration" }
	if p, err := f.collPlan(withDur, nil, without, noBackend); err != nil || p.RingDuration != 7*time.Second || p.Runs() != 1 {
		t.Errorf("--duration 7s: ring %v, %d runs, %v", p.RingDuration, p.Runs(), err)
	}
	f.duration = 1500 * time.Millisecond
	if _, err := f.collPlan(withDur, nil, without, noBackend); err == nil || !strings.Contains(err.Error(), "1.5s") {
		t.Errorf("--duration 1.5s: want an error naming it, got %v", err)
	}
	f.systems = "gloo"
	if _, err := f.collPlan(named, nil, without, noBackend); err == nil || !strings.Contains(err.Error(), "--systems asks for gloo, which cannot run here: gloo: no torch") {
		t.Errorf("gloo named without torch: %v", err)
	}
	if p, err := f.collPlan(named, nil, withTorch, noBackend); err != nil || strings.Join(p.Systems, ",") != "gloo" {
		t.Errorf("gloo named: %v, %v", p.Systems, err)
	}
}

// TestLabCollPlanTorch: the torch systems, plaintext variants and the
// DDP test in the collective bench's flags.
func TestLabCollPlanTorch(t *testing.T) {
	ok := func() error { return nil }
	noBackend := func() error { return errors.New("torch-multirail: no Python here imports multirail.torch") }
	for _, tc := range []struct {
		name     string
		f        labBenchFlags
		set      []string
		torchErr func() error
		// want: systems, tests, sizes (count), batch, runs; or err.
		systems, tests string
		sizes          int
		batch, runs    int
		err            string
	}{
		{name: "ddp on the torch group", f: labBenchFlags{systems: "torch", tests: "ddp", rounds: 3}, set: []string{"systems", "tests", "rounds"},
			systems: "gloo,torch-multirail,torch-multirail-plaintext", tests: "ddp", batch: 8, runs: 9},
		{name: "ddp with Go-native beside (not run)", f: labBenchFlags{systems: "gloo,torch-multirail,multirail-qlearn", tests: "ddp,allreduce", ddpBatch: 32},
			set: []string{"systems", "tests", "ddp-batch"}, systems: "gloo,torch-multirail,multirail-qlearn", tests: "ddp,allreduce", sizes: 5, batch: 32, runs: 5},
		{name: "plaintext pairs", f: labBenchFlags{systems: "torch-multirail-plaintext,multirail-qlearn-plaintext", tests: "allreduce", sizes: "4:64MiB"},
			set: []string{"systems", "tests", "sizes"}, systems: "torch-multirail-plaintext,multirail-qlearn-plaintext", tests: "allreduce", sizes: 25, batch: 8, runs: 2},
		{name: "ddp without torch systems", f: labBenchFlags{systems: "multirail-qlearn,openmpi", tests: "ddp"}, set: []string{"systems", "tests"},
			err: `--tests ddp runs on the torch systems only (gloo, torch-multirail, torch-multirail-plaintext); --systems "multirail-qlearn,openmpi" has none of them`},
		{name: "sizes with ddp alone", f: labBenchFlags{systems: "torch", tests: "ddp", sizes: "8"}, set: []string{"systems", "tests", "sizes"},
			err: "--sizes does not apply to --tests ddp"},
		{name: "batch out of range", f: labBenchFlags{systems: "torch", tests: "ddp", ddpBatch: 0}, set: []string{"systems", "tests", "ddp-batch"},
			err: "--ddp-batch 0 is out of range: allowed 1..4096"},
		{name: "batch without ddp", f: labBenchFlags{systems: "torch", tests: "allreduce", ddpBatch: 16}, set: []string{"systems", "tests", "ddp-batch"},
			err: "--ddp-batch applies to --tests ddp only"},
		{name: "torch-multirail named, no backend", f: labBenchFlags{systems: "gloo,torch-multirail", tests: "ddp"}, set: []string{"systems", "tests"}, torchErr: noBackend,
			err: "--systems asks for torch-multirail, which cannot run here: torch-multirail: no Python here imports multirail.torch"},
		{name: "torch group, no backend", f: labBenchFlags{systems: "torch", tests: "ddp"}, set: []string{"systems", "tests"}, torchErr: noBackend,
			systems: "gloo", tests: "ddp", batch: 8, runs: 1},
		{name: "unknown test", f: labBenchFlags{systems: "torch", tests: "ddp,resnet"}, set: []string{"systems", "tests"},
			err: `--tests "ddp,resnet": unknown test "resnet"; allowed: latency, bw, bibw, barrier, bcast, allreduce, allgather, reduce-scatter, alltoall, ddp`},
		{name: "plaintext of an unknown scheduler", f: labBenchFlags{systems: "multirail-fast-plaintext", tests: "allreduce"}, set: []string{"systems", "tests"},
			err: `--systems "multirail-fast-plaintext": unknown system`},
	} {
		f := tc.f
		f.rates, f.hosts, f.sched = "200mbit,100mbit,50mbit", 4, "qlearn"
		if f.rounds == 0 {
			f.rounds = 1
		}
		set := func(n string) bool { return slices.Contains(tc.set, n) }
		torchErr := tc.torchErr
		if torchErr == nil {
			torchErr = ok
		}
		p, err := f.collPlan(set, nil, ok, torchErr)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := strings.Join(p.Systems, ","); got != tc.systems || strings.Join(p.Tests, ",") != tc.tests || len(p.Sizes) != tc.sizes ||
			p.DDPBatch != tc.batch || p.Runs() != tc.runs {
			t.Errorf("%s: systems %s tests %v sizes %v batch %d runs %d", tc.name, got, p.Tests, p.Sizes, p.DDPBatch, p.Runs())
		}
	}
}

// TestLabBenchGlooIsColl: gloo, torch-multirail and the plaintext
// multirail systems run in the collective bench only; the two-host
// bench's all leaves them out without looking for torch.
func TestLabBenchGlooIsColl(t *testing.T) {
	f := &labBenchFlags{rates: "100mbit", sizes: "65536", systems: "gloo", sched: "all", prefix: "mrb", cc: "cubic", duration: 4 * time.Second}
	var ue usageError
	for _, sys := range []string{"gloo", "torch-multirail", "torch-multirail-plaintext", "multirail-qlearn-plaintext", "torch"} {
		f.systems = sys
		if _, err := f.plan(nil, nil); !errors.As(err, &ue) || !strings.Contains(err.Error(), "is a system of the collective bench only: run it with --hosts 3..8 or --tests") {
			t.Errorf("%s in the two-host bench: %v", sys, err)
		}
	}
	f.systems = "all"
	p, err := f.plan(nil, nil)
	if err != nil || slices.Contains(p.Systems, labbench.Gloo) || len(p.Skipped) != 0 {
		t.Errorf("all in the two-host bench: %v, skipped %v, %v", p.Systems, p.Skipped, err)
	}
}

func TestPrintCollTable(t *testing.T) {
	rep := labbench.CollReport{Date: time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC), Hosts: 4, RatesBps: []float64{200e6, 100e6, 50e6},
		CeilingBps: 334.7e6, Systems: []string{"openmpi-default", "gloo", "multirail-qlearn"}}
	add := func(sys string, round, size int, us, bus float64) {
		rep.Results = append(rep.Results, labbench.CollResult{System: sys, Test: "allreduce", Size: size, Round: round, AvgUs: us, BusBWBps: bus})
	}
	add("openmpi-default", 1, 8, 60, 1e6)
	add("openmpi-default", 1, 4<<20, 500000, 100e6)
	add("multirail-qlearn", 1, 8, 90, 0.7e6)
	add("multirail-qlearn", 1, 4<<20, 110000, 300e6)
	add("openmpi-default", 2, 8, 80, 1e6)
	add("openmpi-default", 2, 4<<20, 400000, 120e6)
	add("multirail-qlearn", 2, 8, 70, 0.7e6)
	add("multirail-qlearn", 2, 4<<20, 100000, 320e6)
	add("gloo", 1, 8, 700, 0.1e6)
	add("gloo", 1, 4<<20, 200000, 160e6)
	rep.Failed = []labbench.CollRunError{{System: "gloo", Test: "reduce-scatter", Round: 1, Err: "gloo_osu reduce-scatter: torch 1.13.1's gloo backend cannot run it"}}
	var b strings.Builder
	printCollTable(&b, rep)
	out := b.String()
	for _, want := range []string{
		"4 hosts, rails 200mbit/100mbit/50mbit, per-host ceiling 334.7 Mbit/s",
		"4MiB  450000.0 us, 110.0 [100.0-120.0]  200000.0 us, 160.0  105000.0 us, 310.0 [300.0-320.0]",
		"multirail-qlearn at 4MiB: busbw 0.926 of the ceiling",
		"multirail-qlearn / openmpi-default at 8B: time 1.14x",
		"multirail-qlearn / openmpi-default at 4MiB: busbw 2.82x",
		"  gloo at 4MiB: busbw 0.478 of the ceiling",
		"multirail-qlearn / gloo at 8B: time 0.11x",
		"multirail-qlearn / gloo at 4MiB: busbw 1.94x",
		"# FAILED gloo reduce-scatter round 1: gloo_osu reduce-scatter: torch 1.13.1's gloo backend cannot run it",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "gloo / ") || strings.Contains(out, "openmpi-default at 4MiB: busbw 0") {
		t.Errorf("baselines compared with each other or the ceiling:\n%s", out)
	}
	dir := t.TempDir()
	if err := writeCollOut(dir, rep); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"results.json", "table.txt", "allreduce-busbw.png", "allreduce-latency.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestPrintCollTableTorch: the DDP table (medians and ranges over the
// rounds, against gloo), torch-multirail against gloo and against
// Go-native multirail of the same framing at 8 B and 4 MiB besides the
// smallest and largest sizes, and the busy share of each run.
func TestPrintCollTableTorch(t *testing.T) {
	zero := 0.0
	rep := labbench.CollReport{Date: time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC), Hosts: 4, RatesBps: []float64{200e6, 100e6, 50e6},
		CeilingBps: 334.7e6, Systems: []string{"gloo", "torch-multirail", "torch-multirail-plaintext", "multirail-qlearn", "multirail-qlearn-plaintext"}}
	ddp := func(sys string, round int, stepMs, computeMs, busy float64) {
		rep.Results = append(rep.Results, labbench.CollResult{System: sys, Test: labbench.DDPTest, Round: round, Ranks: 4, Size: 21028904, Iters: 30, Warmup: 5,
			StepMs: stepMs, SamplesPerS: 4 * 8 / (stepMs / 1e3), ComputeMs: computeMs, Busy: busy, RanksBusy: busy / 2, Params: 5257226, Batch: 8,
			Buckets: []int{4239400, 16789504}, MaxParamDiff: &zero})
		rep.Runs = append(rep.Runs, labbench.CollRun{System: sys, Test: labbench.DDPTest, Round: round, Seconds: 100, Busy: busy, CPUs: 2, OK: true})
	}
	ddp("gloo", 1, 2800, 190, 0.5)
	ddp("torch-multirail", 1, 1000, 200, 0.9)
	ddp("gloo", 2, 3200, 195, 0.6)
	ddp("torch-multirail", 2, 1100, 210, 0.95)
	ddp("gloo", 3, 3000, 185, 0.55)
	ddp("torch-multirail", 3, 1200, 205, 0.92)
	ar := func(sys string, size int, us, bus float64) {
		rep.Results = append(rep.Results, labbench.CollResult{System: sys, Test: "allreduce", Round: 1, Size: size, AvgUs: us, BusBWBps: bus})
	}
	for _, sys := range rep.Systems {
		f := map[string]float64{"gloo": 1, "torch-multirail": 0.5, "torch-multirail-plaintext": 0.45, "multirail-qlearn": 0.4, "multirail-qlearn-plaintext": 0.36}[sys]
		ar(sys, 4, 500*f, 1e4/f)
		ar(sys, 8, 500*f, 2e4/f)
		ar(sys, 4<<20, 600000*f, 80e6/f)
		ar(sys, 64<<20, 9600000*f, 80e6/f)
	}
	var b strings.Builder
	printCollTable(&b, rep)
	out := b.String()
	for _, want := range []string{
		"ddp: DistributedDataParallel, an MLP of 5257226 float32 parameters (21.0 MB of gradients; buckets 4.2/16.8 MB), 4 ranks, batch 8 per rank, 30 timed steps after 5",
		"gloo             3000.0 [2800.0-3200.0]  10.67 [10.00-11.43]  190.0 [185.0-195.0]  0.55 [0.50-0.60]  0.28 [0.25-0.30]  3",
		"torch-multirail  1100.0 [1000.0-1200.0]  29.09 [26.67-32.00]  205.0 [200.0-210.0]  0.92 [0.90-0.95]  0.46 [0.45-0.47]  3",
		"  torch-multirail / gloo: samples/s 2.73x (over the rounds 2.33x-3.20x)",
		"  torch-multirail / gloo at 4B: time 0.50x",
		"  torch-multirail / gloo at 8B: time 0.50x",
		"  torch-multirail / gloo at 64MiB: busbw 2.00x",
		"  torch-multirail / gloo at 4MiB: busbw 2.00x",
		"  torch-multirail / multirail-qlearn at 4MiB: busbw 0.80x",
		"  torch-multirail / multirail-qlearn at 8B: time 1.25x",
		"  torch-multirail-plaintext / multirail-qlearn-plaintext at 4MiB: busbw 0.80x",
		"  multirail-qlearn-plaintext / gloo at 4MiB: busbw 2.78x",
		"# busy CPU share of the machine (2 CPUs) over each run, start-up included, rounds in order:",
		"#   gloo ddp: 0.50 (100.0 s), 0.60 (100.0 s), 0.55 (100.0 s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"torch-multirail / multirail-qlearn-plaintext", "torch-multirail-plaintext / multirail-qlearn at", "ddp (avg us", "multirail-qlearn / torch"} {
		if strings.Contains(out, bad) {
			t.Errorf("table has %q:\n%s", bad, out)
		}
	}
	dir := t.TempDir()
	if err := writeCollOut(dir, rep); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ddp-busbw.png")); err == nil {
		t.Error("a bus bandwidth plot of ddp")
	}
}

// TestCollRatiosSmallOnly: with small sizes only, times are compared and
// no bus bandwidth (latency, not bandwidth, at 8 B).
func TestCollRatiosSmallOnly(t *testing.T) {
	rep := labbench.CollReport{Hosts: 4, CeilingBps: 334.7e6, Systems: []string{"gloo", "torch-multirail"}}
	for _, s := range []int{4, 8} {
		rep.Results = append(rep.Results,
			labbench.CollResult{System: "gloo", Test: "allreduce", Round: 1, Size: s, AvgUs: 1600, BusBWBps: 1e4},
			labbench.CollResult{System: "torch-multirail", Test: "allreduce", Round: 1, Size: s, AvgUs: 500, BusBWBps: 3e4})
	}
	var b strings.Builder
	printCollTable(&b, rep)
	out := b.String()
	if !strings.Contains(out, "torch-multirail / gloo at 4B: time 0.31x") || !strings.Contains(out, "torch-multirail / gloo at 8B: time 0.31x") ||
		strings.Contains(out, "busbw 3.00x") || strings.Contains(out, "of the ceiling") {
		t.Errorf("small sizes:\n%s", out)
	}
}

// TestPrintCollTableRing: iperf3-ring's line above the tables (not a
// column), the CPU s/GB table from 64 KiB on, and every system against
// the ring at the largest size.
func TestPrintCollTableRing(t *testing.T) {
	rep := labbench.CollReport{Date: time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC), Hosts: 4, RatesBps: []float64{200e6, 100e6, 50e6},
		CeilingBps: 334.7e6, Systems: []string{labbench.IperfRing, "openmpi-default", "multirail-qlearn"}}
	add := func(sys, test string, round, size int, us, bus, cpu float64) {
		rep.Results = append(rep.Results, labbench.CollResult{System: sys, Test: test, Size: size, Round: round, AvgUs: us, BusBWBps: bus, CPUSPerGB: cpu})
	}
	add(labbench.IperfRing, labbench.RingTest, 1, 0, 10e6, 290e6, 9)
	add(labbench.IperfRing, labbench.RingTest, 2, 0, 10e6, 310e6, 11)
	add("openmpi-default", "allreduce", 1, 8, 60, 1e6, 500)
	add("openmpi-default", "allreduce", 1, 4<<20, 500000, 100e6, 40)
	add("multirail-qlearn", "allreduce", 1, 8, 90, 0.7e6, 800)
	add("multirail-qlearn", "allreduce", 1, 4<<20, 110000, 300e6, 15)
	var b strings.Builder
	printCollTable(&b, rep)
	out := b.String()
	for _, want := range []string{
		"# iperf3-ring (every host sends to the next on every rail at once, kernel TCP, in the same run): 300.0 [290.0-310.0] Mbit/s per host = 0.896 of the ceiling; CPU 10.00 [9.00-11.00] s/GB",
		"size  openmpi-default",
		"  4MiB  40.00            15.00",
		"openmpi-default at 4MiB: busbw 0.333 of iperf3-ring's, CPU s/GB 4.00x iperf3-ring's",
		"multirail-qlearn at 4MiB: busbw 1.000 of iperf3-ring's, CPU s/GB 1.50x iperf3-ring's",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "  8B  500") || strings.Contains(out, "size  iperf3-ring") || strings.Contains(out, "\nring ") {
		t.Errorf("a CPU figure below 64 KiB, or the ring as a column or a test:\n%s", out)
	}
}
