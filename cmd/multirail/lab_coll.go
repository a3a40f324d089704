package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/multirail/multirail/lab"
	"github.com/multirail/multirail/lab/labbench"
	"github.com/multirail/multirail/units"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Defaults of the collective bench (lab bench --hosts N or --tests).
const (
	defaultCollTests = "allreduce,alltoall,bw"
	defaultCollSizes = "8,1KiB,64KiB,1MiB,4MiB"
	defaultCollSys   = labbench.GroupAll // of the collective systems, with --sched qlearn
)

// collMode reports whether lab bench runs the collective bench: more than
// two hosts, or --tests given.
func collMode(hosts int, testsSet bool) bool { return hosts > lab.MinHosts || testsSet }

// collPlan validates the flags of the collective bench. mpiErr says why
// Open MPI cannot run (nil if it can); glooErr, called only when gloo is
// among the systems, why gloo cannot; torchErr, called only when
// torch-multirail[-plaintext] is, why multirail.torch cannot.
func (f *labBenchFlags) collPlan(set func(string) bool, mpiErr error, glooErr, torchErr func() error) (labbench.CollPlan, error) {
	var p labbench.CollPlan
	rates, err := parseRates(f.rates)
	if err != nil {
		return p, err
	}
	if set("cc") {
		return p, usagef("--cc does not apply to the collective bench (--hosts > 2 or --tests): its runs are OSU-style iterations")
	}
	if set("duration") {
		// iperf3-ring's length: iperf3 sends for whole seconds.
		if f.duration < time.Second || f.duration > labbench.MaxDuration || f.duration%time.Second != 0 {
			return p, usagef("--duration %v: iperf3-ring's length in the collective bench; allowed whole seconds from 1s to %v", f.duration, labbench.MaxDuration)
		}
		p.RingDuration = f.duration
	}
	prefix := f.prefix
	if !set("prefix") {
		prefix = labbench.CollPrefix
	}
	p.Lab = lab.Config{Rates: rates, Hosts: f.hosts, Prefix: prefix}
	if p.Lab, err = p.Lab.Validate(); err != nil {
		return p, usageError{labFlagError(err)}
	}
	tests := f.tests
	if !set("tests") {
		tests = defaultCollTests
	}
	for _, t := range strings.Split(tests, ",") {
		t = strings.TrimSpace(t)
		if !slices.Contains(labbench.CollTests, t) {
			return p, usagef("--tests %q: unknown test %q; allowed: %s", tests, t, strings.Join(labbench.CollTests, ", "))
		}
		if !slices.Contains(p.Tests, t) {
			p.Tests = append(p.Tests, t)
		}
	}
	sizes := f.sizes
	if !set("sizes") {
		sizes = defaultCollSizes
	}
	onlyDDP := len(p.Tests) == 1 && p.Tests[0] == labbench.DDPTest
	if onlyDDP && set("sizes") {
		return p, usagef("--sizes does not apply to --tests ddp (its model is fixed: %s of gradients)", units.FormatSize(21028904))
	}
	if !onlyDDP {
		if p.Sizes, err = parseOSUSizes(sizes); err != nil {
			return p, err
		}
	}
	p.DDPBatch = labbench.DefaultDDPBatch
	if set("ddp-batch") {
		if f.ddpBatch < 1 || f.ddpBatch > labbench.MaxDDPBatch {
			return p, usagef("--ddp-batch %d is out of range: allowed 1..%d", f.ddpBatch, labbench.MaxDDPBatch)
		}
		if !slices.Contains(p.Tests, labbench.DDPTest) {
			return p, usagef("--ddp-batch applies to --tests ddp only")
		}
		p.DDPBatch = f.ddpBatch
	}
	p.TorchPython = f.torchPython
	if f.rounds < 1 || f.rounds > labbench.MaxRounds {
		return p, usagef("--rounds %d is out of range: allowed 1..%d", f.rounds, labbench.MaxRounds)
	}
	p.Rounds = f.rounds
	if f.iters < 0 || f.warmup < 0 {
		return p, usagef("--iters %d / --warmup %d: allowed >= 0 (0 = the defaults by size)", f.iters, f.warmup)
	}
	p.Iters, p.Warmup = f.iters, f.warmup
	systems := f.systems
	if !set("systems") {
		systems = defaultCollSys
	}
	scheds := f.sched
	if !set("sched") {
		scheds = "qlearn"
	}
	list, skipped, err := labSystems(systems, scheds, labbench.ExpandOptions{MPI: mpiErr, Coll: true, Gloo: glooErr, TorchMultirail: torchErr, Iperf3: f.iperf3})
	if err != nil {
		return p, err
	}
	for _, s := range list {
		if s == labbench.TCPPerRail || s == labbench.MPTCP {
			if set("systems") && !strings.Contains(systems, labbench.GroupAll) {
				return p, usagef("--systems: %s is not a collective system; allowed: iperf3-ring, openmpi, openmpi-default, openmpi-weighted, torch, gloo, torch-multirail, torch-multirail-plaintext, multirail, multirail-<sched>[-plaintext]", s)
			}
			continue
		}
		p.Systems = append(p.Systems, s)
	}
	p.Skipped = skipped
	if len(p.Systems) == 0 {
		return p, usagef("--systems %q: nothing left to run", systems)
	}
	if p.Runs() == 0 {
		return p, usagef("--tests ddp runs on the torch systems only (gloo, torch-multirail, torch-multirail-plaintext); --systems %q has none of them", systems)
	}
	return p, nil
}

func runLabColl(ctx context.Context, g *globals, f *labBenchFlags, p labbench.CollPlan) (err error) {
	ctx, stop := labSignals(ctx)
	defer stop()
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("lab bench: finding this program: %w", err)
	}
	outDir, undo, err := labOut(f.out, p.Skipped, g)
	if err != nil {
		return err
	}
	defer func() { undo(err) }()
	fmt.Fprintf(g.stderr, "multirail: lab bench: %d hosts, rails %s, tests %s, %d runs (%d systems x %d tests x %d rounds)\n",
		p.Lab.Hosts, ratesString(p.Lab.Rates), strings.Join(p.Tests, ","), p.Runs(), len(p.Systems), len(p.Tests), p.Rounds)
	o := labbench.CollOptions{Plan: p, Exe: exe, Logger: g.logger()}
	if g.verbose {
		o.Stderr = g.stderr
	}
	start := time.Now()
	rep, err := labbench.RunColl(ctx, o, labbench.CollHooks{
		RunStarts: func(n, total int, sys, test string, round int) {
			if !f.quiet {
				fmt.Fprintf(g.stderr, "multirail: lab bench: run %d/%d (%v): %s %s, round %d\n", n, total, time.Since(start).Round(time.Second), sys, test, round)
			}
		},
		RunFailed: func(sys, test string, round int, err error) {
			fmt.Fprintf(g.stderr, "multirail: lab bench: %s %s round %d failed: %v\n", sys, test, round, err)
		},
	})
	var failed *labbench.RunsError
	if err != nil && !errors.As(err, &failed) {
		return err
	}
	if outDir != "" {
		if err := writeCollOut(outDir, rep); err != nil {
			return err
		}
		fmt.Fprintf(g.stderr, "multirail: lab bench: results and plots written to %s\n", outDir)
	}
	if f.json {
		if err := writeJSON(g.stdout, rep); err != nil {
			return err
		}
	} else {
		printCollTable(g.stdout, rep)
	}
	if failed != nil {
		return failed
	}
	return nil
}

// collCell is the rounds of one system, test and size.
type collCell struct {
	avgUs, busbw []float64
	// cpu are the rounds' CPU s/GB where measured.
	cpu []float64
}

// collCells groups rep's results by test, size and system.
func collCells(rep labbench.CollReport) map[string]map[int]map[string]*collCell {
	cells := map[string]map[int]map[string]*collCell{}
	for _, r := range rep.Results {
		if cells[r.Test] == nil {
			cells[r.Test] = map[int]map[string]*collCell{}
		}
		if cells[r.Test][r.Size] == nil {
			cells[r.Test][r.Size] = map[string]*collCell{}
		}
		c := cells[r.Test][r.Size][r.System]
		if c == nil {
			c = &collCell{}
			cells[r.Test][r.Size][r.System] = c
		}
		c.avgUs = append(c.avgUs, r.AvgUs)
		c.busbw = append(c.busbw, r.BusBWBps)
		if r.CPUSPerGB > 0 {
			c.cpu = append(c.cpu, r.CPUSPerGB)
		}
	}
	return cells
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// testsOf are the OSU tests of rep (not DDPTest) in the order they ran.
func testsOf(rep labbench.CollReport) []string {
	var tests []string
	for _, r := range rep.Results {
		if r.Test != labbench.DDPTest && r.Test != labbench.RingTest && !slices.Contains(tests, r.Test) {
			tests = append(tests, r.Test)
		}
	}
	return tests
}

// ddpCell is the rounds of one system in the DDP test.
type ddpCell struct {
	stepMs, samples, computeMs, busy, ranksBusy []float64
	last                                        labbench.CollResult
}

// ddpCells groups rep's DDP results by system, in rep.Systems' order.
func ddpCells(rep labbench.CollReport) ([]string, map[string]*ddpCell) {
	cells := map[string]*ddpCell{}
	for _, r := range rep.Results {
		if r.Test != labbench.DDPTest {
			continue
		}
		c := cells[r.System]
		if c == nil {
			c = &ddpCell{}
			cells[r.System] = c
		}
		c.stepMs = append(c.stepMs, r.StepMs)
		c.samples = append(c.samples, r.SamplesPerS)
		c.computeMs = append(c.computeMs, r.ComputeMs)
		if r.Busy > 0 {
			c.busy = append(c.busy, r.Busy)
		}
		if r.RanksBusy > 0 {
			c.ranksBusy = append(c.ranksBusy, r.RanksBusy)
		}
		c.last = r
	}
	var systems []string
	for _, s := range rep.Systems {
		if cells[s] != nil {
			systems = append(systems, s)
		}
	}
	return systems, cells
}

// withRange is the median of v and, for several values, their range.
func withRange(v []float64, format string) string {
	if len(v) == 0 {
		return "-"
	}
	out := fmt.Sprintf(format, median(v))
	if len(v) > 1 {
		out += fmt.Sprintf(" ["+format+"-"+format+"]", slices.Min(v), slices.Max(v))
	}
	return out
}

// printDDPTable prints the DDP test: per system the medians over the
// rounds of the step time, samples per second, the step without the
// allreduce and the machine's busy CPU share, with ranges; then every
// multirail system's samples per second against every baseline's.
func printDDPTable(w io.Writer, rep labbench.CollReport) {
	systems, cells := ddpCells(rep)
	if len(systems) == 0 {
		return
	}
	r := cells[systems[0]].last
	var buckets []string
	for _, b := range r.Buckets {
		buckets = append(buckets, fmt.Sprintf("%.1f", float64(b)/1e6))
	}
	fmt.Fprintf(w, "\nddp: DistributedDataParallel, an MLP of %d float32 parameters (%.1f MB of gradients; buckets %s MB), %d ranks, batch %d per rank, %d timed steps after %d "+
		"(medians of rounds [lowest-highest]; compute: the same step without the allreduce; busy: the machine's busy CPU share over the timed steps; ranks: the ranks' own processes' share)\n",
		r.Params, float64(r.Size)/1e6, strings.Join(buckets, "/"), r.Ranks, r.Batch, r.Iters, r.Warmup)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "system\tstep ms\tsamples/s\tcompute ms\tbusy\tranks\trounds")
	for _, s := range systems {
		c := cells[s]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", s, withRange(c.stepMs, "%.1f"), withRange(c.samples, "%.2f"),
			withRange(c.computeMs, "%.1f"), withRange(c.busy, "%.2f"), withRange(c.ranksBusy, "%.2f"), len(c.stepMs))
	}
	tw.Flush()
	for _, m := range systems {
		if labbench.IsBaseline(m) {
			continue
		}
		for _, o := range systems {
			if !labbench.IsBaseline(o) {
				continue
			}
			a, b := cells[m].samples, cells[o].samples
			fmt.Fprintf(w, "  %s / %s: samples/s %.2fx (over the rounds %.2fx-%.2fx)\n", m, o,
				median(a)/median(b), slices.Min(a)/slices.Max(b), slices.Max(a)/slices.Min(b))
		}
	}
}

// printRunsBusy prints the machine's busy CPU share over each run (from
// start to end, start-up included), by system and test, rounds in order.
func printRunsBusy(w io.Writer, rep labbench.CollReport) {
	if len(rep.Runs) == 0 {
		return
	}
	type key struct{ sys, test string }
	var keys []key
	runs := map[key][]string{}
	for _, r := range rep.Runs {
		k := key{r.System, r.Test}
		if runs[k] == nil {
			keys = append(keys, k)
		}
		b := "?"
		if r.Busy >= 0 {
			b = fmt.Sprintf("%.2f", r.Busy)
		}
		runs[k] = append(runs[k], fmt.Sprintf("%s (%.1f s)", b, r.Seconds))
	}
	fmt.Fprintf(w, "# busy CPU share of the machine (%d CPUs) over each run, start-up included, rounds in order:\n", rep.Runs[0].CPUs)
	for _, k := range keys {
		fmt.Fprintf(w, "#   %s %s: %s\n", k.sys, k.test, strings.Join(runs[k], ", "))
	}
}

// printCollTable prints one table per test: per size and system the
// median over the rounds of the average time and of the bus bandwidth
// (with its range when there are several rounds), then the ratios the
// issue's figures are stated in.
func printCollTable(w io.Writer, rep labbench.CollReport) {
	var rates []string
	for _, r := range rep.RatesBps {
		rates = append(rates, units.FormatRate(r))
	}
	fmt.Fprintf(w, "# lab bench %s: %d hosts, rails %s, per-host ceiling %s Mbit/s (one direction, sum of rates x 1448/1514)\n",
		rep.Date.Format("2006-01-02 15:04 UTC"), rep.Hosts, strings.Join(rates, "/"), mbit(rep.CeilingBps))
	cells := collCells(rep)
	ring := cells[labbench.RingTest][0][labbench.IperfRing]
	if ring != nil {
		fmt.Fprintf(w, "# %s (every host sends to the next on every rail at once, kernel TCP, in the same run): %s Mbit/s per host = %.3f of the ceiling; "+
			"CPU %s s/GB (medians of rounds [lowest-highest])\n",
			labbench.IperfRing, withRange(mbits(ring.busbw), "%.1f"), median(ring.busbw)/rep.CeilingBps, withRange(ring.cpu, "%.2f"))
	}
	var systems []string // the columns: iperf3-ring has its line above
	for _, s := range rep.Systems {
		if s != labbench.IperfRing {
			systems = append(systems, s)
		}
	}
	for _, test := range testsOf(rep) {
		fmt.Fprintf(w, "\n%s (avg us, bus bandwidth Mbit/s; median of rounds [lowest-highest busbw])\n", test)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprint(tw, "size")
		for _, s := range systems {
			fmt.Fprintf(tw, "\t%s", s)
		}
		fmt.Fprintln(tw)
		var sizes []int
		for s := range cells[test] {
			sizes = append(sizes, s)
		}
		sort.Ints(sizes)
		for _, size := range sizes {
			fmt.Fprint(tw, units.FormatSize(int64(size)))
			for _, s := range systems {
				c := cells[test][size][s]
				if c == nil {
					fmt.Fprint(tw, "\t-")
					continue
				}
				cell := fmt.Sprintf("%.1f us", median(c.avgUs))
				if b := median(c.busbw); b > 0 {
					cell += fmt.Sprintf(", %s", mbit(b))
					if len(c.busbw) > 1 {
						cell += fmt.Sprintf(" [%s-%s]", mbit(slices.Min(c.busbw)), mbit(slices.Max(c.busbw)))
					}
				}
				fmt.Fprintf(tw, "\t%s", cell)
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
		printCPUTable(w, systems, cells[test], sizes)
		for _, line := range collRatios(rep, cells, test, sizes) {
			fmt.Fprintln(w, line)
		}
	}
	printDDPTable(w, rep)
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "# "+n)
	}
	printRunsBusy(w, rep)
	for _, f := range rep.Failed {
		fmt.Fprintf(w, "# FAILED %s %s round %d: %s\n", f.System, f.Test, f.Round, f.Err)
	}
}

// printCPUTable prints, for the sizes whose bus bandwidth counts (from
// minBusBWSize on) and that have a figure, each system's whole-machine
// CPU seconds per GB moved: median of rounds [lowest-highest].
func printCPUTable(w io.Writer, systems []string, cells map[int]map[string]*collCell, sizes []int) {
	var rows []int
	for _, size := range sizes {
		if size < minBusBWSize {
			continue
		}
		for _, s := range systems {
			if c := cells[size][s]; c != nil && len(c.cpu) > 0 {
				rows = append(rows, size)
				break
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "  CPU s/GB (the whole machine's busy CPU seconds per GB of bus bytes moved, every rank's; median of rounds [lowest-highest])")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "  size")
	for _, s := range systems {
		fmt.Fprintf(tw, "\t%s", s)
	}
	fmt.Fprintln(tw)
	for _, size := range rows {
		fmt.Fprint(tw, "  "+units.FormatSize(int64(size)))
		for _, s := range systems {
			v := "-"
			if c := cells[size][s]; c != nil && len(c.cpu) > 0 {
				v = withRange(c.cpu, "%.2f")
			}
			fmt.Fprintf(tw, "\t%s", v)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// mbits is v in Mbit/s.
func mbits(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x / 1e6
	}
	return out
}

// The sizes the issues state their figures at, compared besides the
// smallest (time) and the largest (bus bandwidth).
const (
	figureSmall = 8
	figureLarge = 4 << 20
	// minBusBWSize is the smallest size whose bus bandwidth is compared
	// (with baselines or the ceiling): below it the time is latency.
	minBusBWSize = 64 << 10
)

// collRatios compares every multirail system (Go-native and torch) with
// every baseline (Open MPI's and gloo), and every torch-multirail system
// with every Go-native multirail system of the same framing (the price of
// the Python path), at the smallest size and 8 B (time) and the largest
// and 4 MiB (bus bandwidth), medians of rounds; and every system but Open
// MPI's with the ceiling at the largest size.
func collRatios(rep labbench.CollReport, cells map[string]map[int]map[string]*collCell, test string, sizes []int) []string {
	if len(sizes) == 0 {
		return nil
	}
	smalls := []int{sizes[0]}
	if sizes[0] != figureSmall && slices.Contains(sizes, figureSmall) {
		smalls = append(smalls, figureSmall)
	}
	large := sizes[len(sizes)-1]
	larges := []int{large}
	if large != figureLarge && slices.Contains(sizes, figureLarge) {
		larges = append(larges, figureLarge)
	}
	var out []string
	compare := func(m, o string) {
		for _, small := range smalls {
			if a, b := cells[test][small][m], cells[test][small][o]; a != nil && b != nil {
				out = append(out, fmt.Sprintf("  %s / %s at %s: time %.2fx", m, o, units.FormatSize(int64(small)), median(a.avgUs)/median(b.avgUs)))
			}
		}
		for _, size := range larges {
			if a, b := cells[test][size][m], cells[test][size][o]; a != nil && b != nil && median(b.busbw) > 0 && test != "latency" && size >= minBusBWSize {
				out = append(out, fmt.Sprintf("  %s / %s at %s: busbw %.2fx", m, o, units.FormatSize(int64(size)), median(a.busbw)/median(b.busbw)))
			}
		}
	}
	if ring := cells[labbench.RingTest][0][labbench.IperfRing]; ring != nil && test != "latency" {
		// Every system against the ceiling measured in the same run.
		for _, m := range rep.Systems {
			for _, size := range larges {
				mc := cells[test][size][m]
				if mc == nil || size < minBusBWSize || median(mc.busbw) <= 0 {
					continue
				}
				line := fmt.Sprintf("  %s at %s: busbw %.3f of %s's", m, units.FormatSize(int64(size)), median(mc.busbw)/median(ring.busbw), labbench.IperfRing)
				if len(mc.cpu) > 0 && len(ring.cpu) > 0 {
					line += fmt.Sprintf(", CPU s/GB %.2fx %s's", median(mc.cpu)/median(ring.cpu), labbench.IperfRing)
				}
				out = append(out, line)
			}
		}
	}
	for _, m := range rep.Systems {
		if labbench.IsMPI(m) || m == labbench.IperfRing {
			continue
		}
		mc := cells[test][large][m]
		if mc != nil && median(mc.busbw) > 0 && test != "latency" && large >= minBusBWSize {
			out = append(out, fmt.Sprintf("  %s at %s: busbw %.3f of the ceiling", m, units.FormatSize(int64(large)), median(mc.busbw)/rep.CeilingBps))
		}
		if labbench.IsBaseline(m) {
			continue
		}
		for _, o := range rep.Systems {
			if labbench.IsBaseline(o) {
				compare(m, o)
			}
		}
		if labbench.IsTorch(m) {
			for _, o := range rep.Systems {
				if labbench.IsMultirail(o) && labbench.IsPlaintext(o) == labbench.IsPlaintext(m) {
					compare(m, o)
				}
			}
		}
	}
	return out
}

// writeCollOut writes results.json, table.txt and per test a PNG of bus
// bandwidth against size and one of time against size.
func writeCollOut(dir string, rep labbench.CollReport) error {
	if err := writeResults(dir, rep, func(w io.Writer) { printCollTable(w, rep) }); err != nil {
		return err
	}
	cells := collCells(rep)
	for _, test := range testsOf(rep) {
		for _, what := range []string{"busbw", "latency"} {
			if what == "busbw" && test == "latency" {
				continue
			}
			path := filepath.Join(dir, fmt.Sprintf("%s-%s.png", test, what))
			if err := plotColl(path, rep, cells[test], test, what); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
	}
	return nil
}

// plotColl draws one line per system: the median bus bandwidth (Mbit/s,
// with the ceiling as a dashed line) or time (us, log scale) against the
// size (log scale).
func plotColl(path string, rep labbench.CollReport, cells map[int]map[string]*collCell, test, what string) error {
	pl := plot.New()
	pl.X.Label.Text = "size (bytes)"
	pl.X.Scale = plot.LogScale{}
	pl.X.Tick.Marker = plot.LogTicks{Prec: -1}
	if what == "busbw" {
		pl.Title.Text = fmt.Sprintf("%s: bus bandwidth, %d hosts", test, rep.Hosts)
		pl.Y.Label.Text = "bus bandwidth (Mbit/s)"
		pl.Y.Min = 0
		pl.Y.Tick.Marker = plainTicks{}
	} else {
		pl.Title.Text = fmt.Sprintf("%s: time per call, %d hosts", test, rep.Hosts)
		pl.Y.Label.Text = "avg time (us)"
		pl.Y.Scale = plot.LogScale{}
		pl.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	pl.Add(plotter.NewGrid())
	pl.Legend.Top, pl.Legend.Left = true, true
	var sizes []int
	for s := range cells {
		sizes = append(sizes, s)
	}
	sort.Ints(sizes)
	for i, sys := range rep.Systems {
		var pts plotter.XYs
		for _, size := range sizes {
			c := cells[size][sys]
			if c == nil || size <= 0 {
				continue
			}
			y := median(c.avgUs)
			if what == "busbw" {
				y = median(c.busbw) / 1e6
			}
			if what != "busbw" && y <= 0 {
				continue
			}
			pts = append(pts, plotter.XY{X: float64(size), Y: y})
		}
		if len(pts) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		line.Color = railColors[i%len(railColors)]
		points.Color = line.Color
		pl.Add(line, points)
		pl.Legend.Add(sys, line)
	}
	if what == "busbw" && len(sizes) > 0 && sizes[0] > 0 {
		ceil := plotter.XYs{{X: float64(sizes[0]), Y: rep.CeilingBps / 1e6}, {X: float64(sizes[len(sizes)-1]), Y: rep.CeilingBps / 1e6}}
		l, err := plotter.NewLine(ceil)
		if err != nil {
			return err
		}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		pl.Add(l)
		pl.Legend.Add("per-host ceiling", l)
		pl.Y.Max = max(pl.Y.Max, 1.4*rep.CeilingBps/1e6) // room for the legend above the ceiling
	}
	return pl.Save(7*vg.Inch, 4*vg.Inch, path)
}
