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
	p, err := f.collPlan(set, nil, without)
	if err != nil {
		t.Fatal(err)
	}
	if p.Lab.Hosts != 4 || p.Lab.Prefix != labbench.CollPrefix || len(p.Lab.Rates) != 3 {
		t.Errorf("lab %+v", p.Lab)
	}
	if strings.Join(p.Tests, ",") != defaultCollTests || len(p.Sizes) != 5 || p.Sizes[0] != 8 || p.Sizes[4] != 4<<20 {
		t.Errorf("tests %v sizes %v", p.Tests, p.Sizes)
	}
	if got := strings.Join(p.Systems, ","); got != "openmpi-default,openmpi-weighted,multirail-qlearn" || len(p.Skipped) != 1 ||
		p.Skipped[0] != (labbench.Skip{System: "gloo", Reason: "gloo: no torch"}) || glooChecks != 1 {
		t.Errorf("systems %s, skipped %v, gloo checked %d times", got, p.Skipped, glooChecks)
	}
	// With torch, all brings in gloo.
	p, err = f.collPlan(set, nil, withTorch)
	if got := strings.Join(p.Systems, ","); err != nil || got != "openmpi-default,openmpi-weighted,gloo,multirail-qlearn" || len(p.Skipped) != 0 {
		t.Errorf("with torch: systems %s, skipped %v, %v", got, p.Skipped, err)
	}
	// Without Open MPI the group is skipped (gloo too, which mpirun
	// starts), a named system is an error.
	glooChecks = 0
	p, err = f.collPlan(set, errors.New("no mpirun"), withTorch)
	if err != nil || strings.Join(p.Systems, ",") != "multirail-qlearn" || len(p.Skipped) != 3 || glooChecks != 0 {
		t.Errorf("without Open MPI: %v, skipped %v, %v", p.Systems, p.Skipped, err)
	}
	named := func(n string) bool { return n == "systems" }
	f.systems = "openmpi-weighted"
	if _, err := f.collPlan(named, errors.New("no mpirun"), withTorch); err == nil {
		t.Error("openmpi-weighted named without Open MPI: no error")
	}
	f.systems = "gloo"
	if _, err := f.collPlan(named, nil, without); err == nil || !strings.Contains(err.Error(), "--systems asks for gloo, which cannot run here: gloo: no torch") {
		t.Errorf("gloo named without torch: %v", err)
	}
	if p, err := f.collPlan(named, nil, withTorch); err != nil || strings.Join(p.Systems, ",") != "gloo" {
		t.Errorf("gloo named: %v, %v", p.Systems, err)
	}
}

// TestLabBenchGlooIsColl: gloo runs in the collective bench only; the
// two-host bench's all leaves it out without looking for torch.
func TestLabBenchGlooIsColl(t *testing.T) {
	f := &labBenchFlags{rates: "100mbit", sizes: "65536", systems: "gloo", sched: "all", prefix: "mrb", cc: "cubic", duration: 4 * time.Second}
	var ue usageError
	if _, err := f.plan(nil, nil); !errors.As(err, &ue) || !strings.Contains(err.Error(), "gloo is a system of the collective bench only: run it with --hosts 3..8 or --tests") {
		t.Errorf("gloo in the two-host bench: %v", err)
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
