package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	_ "github.com/multirail/multirail" // registers the learning schedulers
	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/lab"
	"github.com/multirail/multirail/lab/labbench"
	"github.com/multirail/multirail/lab/mpi"
	"github.com/multirail/multirail/sched"
	"github.com/multirail/multirail/units"
	"github.com/spf13/cobra"
)

type labBenchFlags struct {
	rates, sizes, systems, sched, prefix, cc, out string
	competitor                                    string
	duration                                      time.Duration
	json, quiet                                   bool
	// The collective bench (--hosts > 2 or --tests).
	tests                        string
	hosts, rounds, iters, warmup int
	// The torch systems: the DDP test's batch per rank and the Python of
	// torch-multirail ("": found in the working directory).
	ddpBatch    int
	torchPython string
	// iperf3, when set, says why iperf3-ring cannot run (nil: it can);
	// the command sets lab.Iperf3Available.
	iperf3 func() error
}

// labSystems expands --systems and --sched into the systems to run, in
// order. o says why Open MPI and gloo cannot run (and whether this is the
// collective bench): systems that "all" brings in are then skipped,
// systems named explicitly are an error.
func labSystems(systemsFlag, schedFlag string, o labbench.ExpandOptions) ([]string, []labbench.Skip, error) {
	var scheds []string
	if schedFlag == "all" {
		scheds = sched.Names()
	} else {
		for _, n := range strings.Split(schedFlag, ",") {
			n = strings.TrimSpace(n)
			if !slices.Contains(sched.Names(), n) {
				return nil, nil, usagef("--sched %q: unknown scheduler (allowed: %s, or all)", n, strings.Join(sched.Names(), ", "))
			}
			scheds = append(scheds, n)
		}
	}
	o.Scheds = scheds
	systems, skipped, err := labbench.Expand(strings.Split(systemsFlag, ","), o)
	var unknown *labbench.UnknownSystemError
	var unavailable *labbench.UnavailableError
	switch {
	case errors.As(err, &unknown):
		return nil, nil, usagef("--systems %q: unknown system (allowed: %s)", unknown.Item, labbench.Allowed())
	case errors.As(err, &unavailable):
		return nil, nil, fmt.Errorf("--systems asks for %s, which cannot run here: %v", unavailable.System, unavailable.Err)
	case err != nil:
		return nil, nil, err
	}
	return systems, skipped, nil
}

// competitor checks --competitor ("" is the default: iperf3 when it is on
// PATH, else the Go stream) against iperfErr (lab.Iperf3Available's
// answer): an unknown value is a usage error, iperf3 asked for when it is
// missing an error.
func competitor(flag string, iperfErr error) (tool, note string, err error) {
	if flag != "" && !slices.Contains(lab.Tools(), flag) {
		return "", "", usagef("--competitor %q: unknown competitor (allowed: %s)", flag, strings.Join(lab.Tools(), ", "))
	}
	tool, note, err = lab.ChooseTool(flag, iperfErr)
	if err != nil {
		return "", "", fmt.Errorf("--competitor %s cannot run here: %v", flag, err)
	}
	return tool, note, nil
}

func (f *labBenchFlags) plan(mpiErr, iperfErr error) (labbench.Plan, error) {
	var p labbench.Plan
	var err error
	if p.Rates, err = parseRates(f.rates); err != nil {
		return p, err
	}
	for _, s := range strings.Split(f.sizes, ",") {
		n, err := parseSize("sizes", strings.TrimSpace(s), labbench.MinSize, labbench.MaxSize)
		if err != nil {
			return p, err
		}
		if !slices.Contains(p.Sizes, int(n)) {
			p.Sizes = append(p.Sizes, int(n))
		}
	}
	if f.duration < labbench.MinDuration || f.duration > labbench.MaxDuration {
		return p, usagef("--duration %v is out of range: allowed %v..%v", f.duration, labbench.MinDuration, labbench.MaxDuration)
	}
	if f.duration%labbench.Bucket != 0 {
		return p, usagef("--duration %v: allowed multiples of %v", f.duration, labbench.Bucket)
	}
	p.Duration = f.duration
	if p.Competitor, p.CompetitorNote, err = competitor(f.competitor, iperfErr); err != nil {
		return p, err
	}
	p.Lab = lab.Config{Rates: p.Rates, Prefix: f.prefix, CC: f.cc}
	if _, err := p.Lab.Normalized(); err != nil {
		return p, usageError{labFlagError(err)}
	}
	if p.Systems, p.Skipped, err = labSystems(f.systems, f.sched, labbench.ExpandOptions{MPI: mpiErr}); err != nil {
		return p, err
	}
	for _, s := range p.Systems {
		if labbench.IsCollOnly(s) {
			return p, usagef("--systems: %s is a system of the collective bench only: run it with --hosts %d..%d or --tests", s, lab.MinHosts+1, lab.MaxHosts)
		}
	}
	if len(p.Systems) == 0 {
		return p, usagef("--systems %q: nothing left to run", f.systems)
	}
	return p, nil
}

func newLabBench(g *globals) *cobra.Command {
	f := &labBenchFlags{iperf3: lab.Iperf3Available}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Compare multirail with TCP per rail, MPTCP, Open MPI and Gloo on a lab of its own",
		Long: `bench builds a lab of its own (prefix mrb, so that it never touches one that
"lab up" built), and in one run on that topology measures for every --sizes:

  tcp-per-rail      one TCP stream per rail at once: the ceiling check
  mptcp             one Linux MPTCP connection (one subflow per rail)
  openmpi-default   Open MPI ob1 + TCP BTL over every rail, default weights
  openmpi-weighted  the same with btl_tcp_bandwidth_railN set to the rates
  multirail-<sched> a multirail connection with that scheduler (weighted
                    is given the true rail rates; the others nothing)

Each run lasts --duration; a competing TCP stream starts on rail0 (the
fastest rail) at half time: iperf3 (--competitor iperf3, the default when
iperf3 is on PATH) or a Go stream (--competitor go, the fallback). Goodput is measured at the receiver in 250 ms
buckets: "static" is the mean over [1s, T/2), "dynamic" over [T/2+1s, T).
--out DIR writes results.json (with the time series) and one PNG per size.

With --hosts N (3..8) or --tests, bench builds a cluster instead (prefix mrc:
N hosts, a switch per rail, see lab up --hosts) and runs OSU-style tests of
` + "`multirail osu`" + ` (latency, bw, bibw, barrier, bcast, allreduce, allgather,
reduce-scatter, alltoall; point-to-point tests between hosts 0 and 1), one
rank per host, all started by Open MPI's mpirun from host 0 with lab rsh
(but iperf3-ring):

  iperf3-ring       the ceiling in the same run: every host sends to the next
                    on every rail at once (kernel TCP, one iperf3 per rail)
                    for --duration (default 10s, whole seconds), once per
                    round; its busbw is the mean per-host goodput
  openmpi-default   mrosu (an MPI program written from the OSU method, the
                    same iterations and formulas as multirail osu), ob1 +
                    TCP BTL on the rails, mpi_yield_when_idle 1
  openmpi-weighted  the same with btl_tcp_bandwidth_railN = the rates
  gloo              torch.distributed with the gloo backend (Debian's
                    python3-torch; sh scripts/lab-deps.sh --torch):
                    gloo_osu.py (the same method again) under one torchrun
                    per host, c10d rendezvous on host 0, GLOO_SOCKET_IFNAME
                    = every rail (one Gloo device per rail, one rail per
                    call); reduce-scatter fails where torch's gloo has none
                    (torch 1.13); skipped when torch is missing, unless named
  torch-multirail   the same programs with torch.distributed's backend
                    multirail (python/multirail: .venv/bin/python of the
                    checkout the bench runs in, sh scripts/build-python.sh;
                    or --torch-python), MULTIRAIL_IFNAME=rail, sealed
                    frames; skipped when multirail.torch does not import,
                    unless named
  torch-multirail-plaintext  the same with MULTIRAIL_PLAINTEXT=1
  multirail-<sched> multirail osu, rails found from the hosts' NICs
                    (MULTIRAIL_IFNAME=rail), MULTIRAIL_SCHED=<sched> (weighted
                    also gets the true rates, MULTIRAIL_RAIL_RATES);
                    multirail-<sched>-plaintext with MULTIRAIL_PLAINTEXT=1

The group torch is gloo, torch-multirail and torch-multirail-plaintext;
all is iperf3-ring, the Open MPI systems, gloo, torch-multirail and
multirail-<sched>. Every collective that moves data gets the whole
machine's CPU seconds per GB of bus bytes moved (docs/lab.md).

--tests ddp trains an MLP of 5.26 M float32 parameters (21 MB of gradients)
with DistributedDataParallel (default buckets) on the torch systems only:
one fixed batch of --ddp-batch samples per rank, --warmup (default 5) and
--iters (default 30) steps; it reports step_ms and samples_per_s.

--rounds R repeats every run R times, systems interleaved; the table shows
medians with the range of the bus bandwidth. --json prints {"hosts",
"rates_bps", "ceiling_bps", "results": [{"system", "test", "size", "round",
"ranks", "avg_us", "min_us", "max_us", "busbw_bps", "mb_s", "iterations"}],
"failed": [{"system", "test", "round", "error"}], ...};
--out DIR also writes <test>-busbw.png and <test>-latency.png.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mpiErr := mpi.Available()
			glooErr := func() error {
				_, err := labbench.GlooAvailable(cmd.Context())
				return err
			}
			if f.hosts < lab.MinHosts || f.hosts > lab.MaxHosts {
				return usagef("--hosts = %d is out of range: allowed %d..%d", f.hosts, lab.MinHosts, lab.MaxHosts)
			}
			torchErr := func() error {
				_, err := labbench.FindTorchMultirail(cmd.Context(), f.torchPython, "")
				return err
			}
			if collMode(f.hosts, cmd.Flags().Changed("tests")) {
				p, err := f.collPlan(cmd.Flags().Changed, mpiErr, glooErr, torchErr)
				if err != nil {
					return err
				}
				if err := needRoot("bench"); err != nil {
					return err
				}
				return runLabColl(cmd.Context(), g, f, p)
			}
			if cmd.Flags().Changed("rounds") || cmd.Flags().Changed("iters") || cmd.Flags().Changed("warmup") ||
				cmd.Flags().Changed("ddp-batch") || cmd.Flags().Changed("torch-python") {
				return usagef("--rounds, --iters, --warmup, --ddp-batch and --torch-python apply to the collective bench only (--hosts > 2 or --tests)")
			}
			p, err := f.plan(mpiErr, lab.Iperf3Available())
			if err != nil {
				return err
			}
			if err := needRoot("bench"); err != nil {
				return err
			}
			return runLabBench(cmd.Context(), g, f, p)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.rates, "rates", "200mbit,100mbit,50mbit", "rail rates, comma-separated, fastest first (the competing stream runs on rail0)")
	fl.StringVar(&f.sizes, "sizes", "65536,1048576,4194304", "message sizes ("+sizeForm+"), comma-separated, 1KiB..64MiB")
	fl.DurationVar(&f.duration, "duration", 20*time.Second, "length of each run (4s..10m, a multiple of 250ms); collective bench: iperf3-ring's (whole seconds, default 10s)")
	fl.StringVar(&f.systems, "systems", "all", "systems to run, comma-separated: all, tcp-per-rail, mptcp, openmpi, openmpi-default, openmpi-weighted, multirail, multirail-<sched>; collective bench: iperf3-ring, torch, gloo, torch-multirail, torch-multirail-plaintext, multirail-<sched>-plaintext")
	fl.StringVar(&f.sched, "sched", "all", "schedulers for the multirail systems: all or comma-separated ("+strings.Join(sched.Names(), ", ")+")")
	fl.StringVar(&f.prefix, "prefix", labbench.DefaultPrefix, "namespace prefix of the bench's own lab")
	fl.StringVar(&f.cc, "cc", lab.DefaultCC, "TCP congestion control in both namespaces")
	fl.StringVar(&f.out, "out", "", "write results.json and PNG plots into this new or empty folder")
	fl.StringVar(&f.competitor, "competitor", "", "what makes the competing stream on rail0: iperf3 or go (default: iperf3 when it is on PATH, else go)")
	fl.BoolVar(&f.json, "json", false, "print one JSON object on stdout")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress on stderr")
	fl.IntVar(&f.hosts, "hosts", lab.MinHosts, fmt.Sprintf("hosts of the lab, %d..%d; more than 2 runs the collective bench", lab.MinHosts, lab.MaxHosts))
	fl.StringVar(&f.tests, "tests", defaultCollTests, "collective bench: tests of multirail osu and ddp (torch systems), comma-separated ("+strings.Join(labbench.CollTests, ", ")+")")
	fl.IntVar(&f.rounds, "rounds", 1, fmt.Sprintf("collective bench: runs of every system and test, interleaved (1..%d)", labbench.MaxRounds))
	fl.IntVar(&f.iters, "iters", 0, fmt.Sprintf("collective bench: timed iterations per size (0 = by size, as multirail osu); ddp: timed steps (0 = %d)", labbench.DefaultDDPSteps))
	fl.IntVar(&f.warmup, "warmup", 0, fmt.Sprintf("collective bench: warm-up iterations per size (0 = by size); ddp: warm-up steps (0 = %d)", labbench.DefaultDDPWarmup))
	fl.IntVar(&f.ddpBatch, "ddp-batch", labbench.DefaultDDPBatch, fmt.Sprintf("collective bench, ddp: samples per rank and step (1..%d)", labbench.MaxDDPBatch))
	fl.StringVar(&f.torchPython, "torch-python", "", "collective bench: the Python of torch-multirail, one that imports multirail.torch (default: .venv/bin/python in the working directory, else /usr/bin/python3 with PYTHONPATH=python and MULTIRAIL_LIB=build/libmultirail.so)")
	return cmd
}

func runLabBench(ctx context.Context, g *globals, f *labBenchFlags, p labbench.Plan) (err error) {
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
	if p.CompetitorNote != "" {
		fmt.Fprintf(g.stderr, "multirail: lab bench: %s\n", p.CompetitorNote)
	}
	o := labbench.Options{Plan: p, Exe: exe, Logger: g.logger()}
	if g.verbose {
		o.AgentStderr = g.stderr
	}
	b, err := labbench.New(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(g.stderr, "multirail: lab bench: %d runs (%d systems x %d sizes) of %v on %d rails (%s), about %v in all\n",
		p.Runs(), len(p.Systems), len(p.Sizes), p.Duration, len(p.Rates), ratesString(p.Rates), p.Estimate().Round(time.Second))
	if err := b.Up(ctx); err != nil {
		return err
	}
	defer func() {
		if derr := b.Down(); derr != nil && err == nil {
			err = derr
		}
	}()
	rep, err := b.RunAll(ctx, labbench.Hooks{
		RunStarts: func(n, total int, sys string, size int) (func(time.Duration, []uint64), func()) {
			if !f.quiet {
				fmt.Fprintf(g.stderr, "multirail: lab bench: run %d/%d: %s, %s messages\n", n, total, sys, units.FormatSizeWords(int64(size)))
			}
			l := b.Lab()
			var specs []emu.Spec
			for i := range p.Rates {
				specs = append(specs, emu.Spec{Kind: emu.KindTCP, Local: l.RailIP(0, i), Remote: l.RailIP(1, i)})
			}
			label := fmt.Sprintf("%s %s", sys, strings.ReplaceAll(units.FormatSizeWords(int64(size)), " ", ""))
			prog := newProgress(g.stderr, f.quiet, label, specs, p.Duration)
			return prog.update, prog.done
		},
		RunFailed: func(sys string, size int, err error) {
			fmt.Fprintf(g.stderr, "multirail: lab bench: %s, %s: %v\n", sys, units.FormatSizeWords(int64(size)), err)
		},
	})
	var failed *labbench.RunsError
	if err != nil && !errors.As(err, &failed) {
		return err
	}
	if outDir != "" {
		if err := writeLabOut(outDir, rep); err != nil {
			return err
		}
	}
	if f.json {
		rep2 := rep
		rep2.Series = nil
		if err := writeJSON(g.stdout, rep2); err != nil {
			return err
		}
	} else {
		printLabTable(g.stdout, rep)
	}
	if outDir != "" {
		fmt.Fprintf(g.stderr, "multirail: lab bench: results and plots written to %s\n", outDir)
	}
	if failed != nil {
		return failed
	}
	return nil
}

// competitorName names the competing stream for the table and plots.
func competitorName(tool string) string {
	switch tool {
	case lab.ToolIperf3:
		return "TCP (iperf3)"
	case lab.ToolGo:
		return "TCP (Go stream)"
	}
	return "TCP"
}

func ratesString(rates []float64) string {
	var s []string
	for _, r := range rates {
		s = append(s, formatRate(r))
	}
	return strings.Join(s, ",")
}

// join joins two notes with "; ".
func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// printLabTable prints the report as a table with a short summary.
func printLabTable(w io.Writer, rep labbench.Report) {
	fmt.Fprintf(w, "rails %s, %s, %gs per run; ceiling %s Mbit/s (sum of rates x 1448/1514); fair share once the competing stream has half of rail0: %s Mbit/s\n",
		ratesString(rep.RatesBps), rep.CC, rep.DurationS, mbit(rep.CeilingBps), mbit(rep.DynamicFairBps))
	if rep.Competitor != "" {
		fmt.Fprintf(w, "competing stream: %s on rail0 from half time on\n", competitorName(rep.Competitor))
	}
	if rep.CompetitorNote != "" {
		fmt.Fprintf(w, "note: %s\n", rep.CompetitorNote)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "system\tsize\tstatic Mbit/s\t% ceiling\tper rail\tCPU s/GB\tdynamic Mbit/s\t% fair\tper rail\tcompeting Mbit/s\tnote")
	byKey := map[string]labbench.Result{}
	var keys []string
	for _, r := range rep.Results {
		k := r.System + "\x00" + strconv.Itoa(r.Size)
		if _, ok := byKey[k+"static"]; !ok && r.Phase == "static" {
			keys = append(keys, k)
		}
		byKey[k+r.Phase] = r
	}
	for _, k := range keys {
		s, d := byKey[k+"static"], byKey[k+"dynamic"]
		comp := "-"
		if d.CompetingBps != nil {
			comp = mbit(*d.CompetingBps)
		}
		note := s.Note
		if s.Error != "" {
			note = join(note, "FAILED: "+s.Error)
		}
		fair := "-"
		if rep.DynamicFairBps > 0 {
			fair = fmt.Sprintf("%.1f", 100*d.GoodputBps/rep.DynamicFairBps)
		}
		cpu := "-"
		if s.CPUsPerGB != nil {
			cpu = fmt.Sprintf("%.2f", *s.CPUsPerGB)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.System, strings.ReplaceAll(units.FormatSizeWords(int64(s.Size)), " ", ""),
			mbit(s.GoodputBps), 100*s.CeilingFraction, perRail(s.RailsBps), cpu, mbit(d.GoodputBps), fair, perRail(d.RailsBps), comp, note)
	}
	tw.Flush()
	for _, line := range labSummary(rep) {
		fmt.Fprintln(w, line)
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(w, "not run: %s (%s)\n", s.System, s.Reason)
	}
}

func perRail(bps []float64) string {
	if len(bps) == 0 {
		return "-"
	}
	var s []string
	for _, v := range bps {
		s = append(s, fmt.Sprintf("%.0f", v/1e6))
	}
	return strings.Join(s, "/")
}

// labSummary compares, per size, the best multirail system with the
// ceiling (static) and with MPTCP (dynamic).
func labSummary(rep labbench.Report) []string {
	var out []string
	for _, size := range rep.Sizes {
		var best, bestDyn, mp *labbench.Result
		for i := range rep.Results {
			r := &rep.Results[i]
			if r.Size != size || r.Error != "" {
				continue
			}
			switch {
			case r.System == labbench.MPTCP && r.Phase == "dynamic":
				mp = r
			case strings.HasPrefix(r.System, labbench.MultirailPrefix) && r.Phase == "static":
				if best == nil || r.GoodputBps > best.GoodputBps {
					best = r
				}
			case strings.HasPrefix(r.System, labbench.MultirailPrefix) && r.Phase == "dynamic":
				if bestDyn == nil || r.GoodputBps > bestDyn.GoodputBps {
					bestDyn = r
				}
			}
		}
		if best == nil {
			continue
		}
		line := fmt.Sprintf("%s: best multirail static %s %s Mbit/s = %.1f %% of the ceiling", strings.ReplaceAll(units.FormatSizeWords(int64(size)), " ", ""),
			best.System, mbit(best.GoodputBps), 100*best.CeilingFraction)
		if bestDyn != nil {
			line += fmt.Sprintf("; best dynamic %s %s Mbit/s", bestDyn.System, mbit(bestDyn.GoodputBps))
			if mp != nil && mp.GoodputBps > 0 {
				line += fmt.Sprintf(" vs mptcp %s Mbit/s (%.2fx)", mbit(mp.GoodputBps), bestDyn.GoodputBps/mp.GoodputBps)
			}
		}
		out = append(out, line)
	}
	return out
}

// writeLabOut writes results.json (with the series), table.txt (the
// table lab bench prints without --json) and one PNG per size into dir.
func writeLabOut(dir string, rep labbench.Report) error {
	if err := writeResults(dir, rep, func(w io.Writer) { printLabTable(w, rep) }); err != nil {
		return err
	}
	var names []string
	for _, r := range rep.RatesBps {
		names = append(names, formatRate(r)) // the legend says "rail i <name>"
	}
	end := rep.DurationS
	for _, size := range rep.Sizes {
		var panels []goodputPanel
		for _, s := range rep.Series {
			if s.Size != size || len(s.Total) == 0 {
				continue
			}
			pan := goodputPanel{Title: s.System, End: end, Marker: end / 2, MarkerLabel: "competing " + competitorName(rep.Competitor) + " on rail0"}
			for i := range s.Total {
				pan.T = append(pan.T, (float64(i)+0.5)*s.BucketS)
			}
			if len(s.Rails) == len(names) {
				pan.Rails, pan.Bps = names, s.Rails
			} else {
				pan.Rails, pan.Bps = []string{"all rails"}, [][]float64{s.Total}
			}
			panels = append(panels, pan)
		}
		if len(panels) == 0 {
			continue
		}
		path := filepath.Join(dir, fmt.Sprintf("goodput-%s.png", strings.ReplaceAll(units.FormatSizeWords(int64(size)), " ", "")))
		if err := plotGoodput(path, panels); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

// labOut starts a lab bench: it says on stderr which systems are skipped,
// and makes the --out folder (out, when not empty). undo, called with the
// command's error, removes a folder it made when the command failed.
func labOut(out string, skipped []labbench.Skip, g *globals) (dir string, undo func(error), err error) {
	undo = func(error) {}
	for _, s := range skipped {
		fmt.Fprintf(g.stderr, "multirail: lab bench: skipping %s: %s\n", s.System, s.Reason)
	}
	if out == "" {
		return "", undo, nil
	}
	dir, created, err := prepareOut(out, time.Now())
	if err != nil {
		return "", undo, err
	}
	return dir, func(err error) {
		if err != nil && created {
			os.RemoveAll(dir)
		}
	}, nil
}

// writeResults writes rep as results.json and the table that table prints
// as table.txt into dir.
func writeResults(dir string, rep any, table func(io.Writer)) error {
	var buf bytes.Buffer
	if err := writeJSON(&buf, rep); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), buf.Bytes(), 0o644); err != nil {
		return err
	}
	buf.Reset()
	table(&buf)
	return os.WriteFile(filepath.Join(dir, "table.txt"), buf.Bytes(), 0o644)
}
