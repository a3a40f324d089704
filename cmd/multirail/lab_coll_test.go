package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail/lab/labbench"
)

func TestLabCollPlanDefaults(t *testing.T) {
	f := &labBenchFlags{rates: "200mbit,100mbit,50mbit", sched: "all", systems: "all", hosts: 4, rounds: 1}
	set := func(string) bool { return false }
	p, err := f.collPlan(set, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Lab.Hosts != 4 || p.Lab.Prefix != labbench.CollPrefix || len(p.Lab.Rates) != 3 {
		t.Errorf("lab %+v", p.Lab)
	}
	if strings.Join(p.Tests, ",") != defaultCollTests || len(p.Sizes) != 5 || p.Sizes[0] != 8 || p.Sizes[4] != 4<<20 {
		t.Errorf("tests %v sizes %v", p.Tests, p.Sizes)
	}
	if got := strings.Join(p.Systems, ","); got != "openmpi-default,openmpi-weighted,multirail-qlearn" {
		t.Errorf("systems %s", got)
	}
	// Without Open MPI the group is skipped, a named system is an error.
	p, err = f.collPlan(set, errors.New("no mpirun"))
	if err != nil || strings.Join(p.Systems, ",") != "multirail-qlearn" || len(p.Skipped) != 2 {
		t.Errorf("without Open MPI: %v, skipped %v, %v", p.Systems, p.Skipped, err)
	}
	f.systems = "openmpi-weighted"
	if _, err := f.collPlan(func(n string) bool { return n == "systems" }, errors.New("no mpirun")); err == nil {
		t.Error("openmpi-weighted named without Open MPI: no error")
	}
}

func TestPrintCollTable(t *testing.T) {
	rep := labbench.CollReport{Date: time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC), Hosts: 4, RatesBps: []float64{200e6, 100e6, 50e6},
		CeilingBps: 334.7e6, Systems: []string{"openmpi-default", "multirail-qlearn"}}
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
	var b strings.Builder
	printCollTable(&b, rep)
	out := b.String()
	for _, want := range []string{
		"4 hosts, rails 200mbit/100mbit/50mbit, per-host ceiling 334.7 Mbit/s",
		"4MiB  450000.0 us, 110.0 [100.0-120.0]  105000.0 us, 310.0 [300.0-320.0]",
		"multirail-qlearn at 4MiB: busbw 0.926 of the ceiling",
		"multirail-qlearn / openmpi-default at 8B: time 1.14x",
		"multirail-qlearn / openmpi-default at 4MiB: busbw 2.82x",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
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
