package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/internal/bench"
	"github.com/multirail/multirail/sched"
	"github.com/multirail/multirail/units"
	"github.com/spf13/cobra"
)

// The demo's fixed setup: three emulated rails of different speed, 1 MiB
// messages, and half of the fastest rail taken away at the midpoint.
const (
	demoRails       = "emu:200mbit,emu:100mbit,emu:50mbit"
	demoSize        = 1 << 20
	demoLoadRail    = 0
	demoLoadFrac    = 0.5
	demoBaselineDur = 3 * time.Second
	demoBin         = 500 * time.Millisecond
	demoMinDur      = time.Second
	demoMaxDur      = 10 * time.Minute
)

type demoFlags struct {
	duration    time.Duration
	out         string
	json, quiet bool
}

// demoSetup records what the demo ran, for results.json and summary.md.
type demoSetup struct {
	Rails             []string `json:"rails"`
	Size              int      `json:"size"`
	DurationS         float64  `json:"duration_s"`
	Load              string   `json:"load"`
	BaselineRail      string   `json:"baseline_rail"`
	BaselineDurationS float64  `json:"baseline_duration_s"`
}

// timeline is one scheduler's per-rail goodput over the run, in bins.
type timeline struct {
	Sched string  `json:"sched"`
	BinS  float64 `json:"bin_s"`
	// T is the middle of each bin, seconds since the start of the run.
	T []float64 `json:"t_s"`
	// RailsBps[rail][bin] is the goodput of a rail in a bin, bits per second.
	RailsBps [][]float64 `json:"rails_bps"`
}

// demoReport is results.json and the --json output.
type demoReport struct {
	Out       string         `json:"out"`
	Setup     demoSetup      `json:"setup"`
	Results   []bench.Result `json:"results"`
	Baseline  bench.Baseline `json:"baseline"`
	Timelines []timeline     `json:"timelines"`
}

func newDemo(g *globals) *cobra.Command {
	f := &demoFlags{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Compare every scheduler on emulated rails and write a report",
		Long: `demo needs no arguments, no root and no network. It runs every scheduler in
turn over three emulated rails (` + demoRails + `) with 1 MiB messages;
at the midpoint of each run half of rail 0's capacity is taken away
(emulated background load). A plain TCP stream over one emu:200mbit rail is
measured for comparison. With the default --duration the whole demo takes
about a minute.

The report goes to a new folder (--out): results.json, goodput.png (per-rail
goodput over time, one panel per scheduler), summary.png (efficiency per
scheduler) and summary.md.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			return runDemo(cmd.Context(), g, f)
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&f.duration, "duration", 8*time.Second, "how long each scheduler sends ("+demoMinDur.String()+".."+demoMaxDur.String()+")")
	fl.StringVar(&f.out, "out", "", "report folder, created if missing; must be empty (default ./multirail-demo-YYYYMMDD-HHMMSS)")
	fl.BoolVar(&f.json, "json", false, "print one JSON object on stdout (the same as results.json)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress on stderr")
	return cmd
}

func (f *demoFlags) validate() error {
	if f.duration < demoMinDur || f.duration > demoMaxDur {
		return usagef("--duration %v is out of range: allowed %v..%v", f.duration, demoMinDur, demoMaxDur)
	}
	return nil
}

// prepareOut creates the report folder. An explicit --out may exist if it
// is an empty folder; the default name gets a -2, -3, ... suffix when taken.
// created tells whether the folder is new (and may be removed on failure).
func prepareOut(out string, now time.Time) (dir string, created bool, err error) {
	if out == "" {
		base := "multirail-demo-" + now.Format("20060102-150405")
		for i := 1; i <= 100; i++ {
			dir = base
			if i > 1 {
				dir = fmt.Sprintf("%s-%d", base, i)
			}
			if err = os.Mkdir(dir, 0o755); err == nil {
				return dir, true, nil
			}
			if !errors.Is(err, fs.ErrExist) {
				return "", false, fmt.Errorf("report folder: %w", err)
			}
		}
		return "", false, fmt.Errorf("report folder: %s and 99 numbered variants exist already", base)
	}
	st, err := os.Stat(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(out, 0o755); err != nil {
			return "", false, fmt.Errorf("--out %q: %w", out, err)
		}
		return out, true, nil
	case err != nil:
		return "", false, fmt.Errorf("--out %q: %w", out, err)
	case !st.IsDir():
		return "", false, usagef("--out %q exists and is not a folder: allowed a new or empty folder", out)
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		return "", false, fmt.Errorf("--out %q: %w", out, err)
	}
	if len(ents) > 0 {
		return "", false, usagef("--out %q is not empty (%d entries): allowed a new or empty folder", out, len(ents))
	}
	return out, false, nil
}

func runDemo(ctx context.Context, g *globals, f *demoFlags) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	specs, err := emu.ParseSpecs(demoRails)
	if err != nil {
		return err
	}
	load := emu.Load{Rail: demoLoadRail, Fraction: demoLoadFrac, At: f.duration / 2}
	baseDur := min(demoBaselineDur, f.duration)
	dir, created, err := prepareOut(f.out, time.Now())
	if err != nil {
		return err
	}
	fail := func(err error) error {
		if created {
			_ = os.Remove(dir) // only if still empty
		}
		return err
	}
	rep := demoReport{Out: dir, Setup: demoSetup{
		Size: demoSize, DurationS: f.duration.Seconds(), Load: load.String(),
		BaselineRail: specs[0].String(), BaselineDurationS: baseDur.Seconds(),
	}}
	for _, s := range specs {
		rep.Setup.Rails = append(rep.Setup.Rails, s.String())
	}
	names := sched.Names()
	if !f.quiet {
		fmt.Fprintf(g.stderr, "multirail demo: %d schedulers x %v on %s, %s messages, load %s; plain TCP %v; report to %s\n",
			len(names), f.duration, demoRails, units.FormatSizeWords(int64(demoSize)), load.String(), baseDur, dir)
	}
	for _, name := range names {
		prog := newProgress(g.stderr, f.quiet, name, specs, f.duration)
		var smp bench.Sampler
		r, err := bench.Run(ctx, bench.Options{
			Rails: specs, Sched: name, Size: demoSize, Duration: f.duration, Loads: []emu.Load{load},
			RTT: true, Logger: g.logger(),
			Progress: func(el time.Duration, perRail []uint64) {
				smp.Add(el, perRail)
				prog.update(el, perRail)
			},
		})
		prog.done()
		if err != nil {
			return fail(fmt.Errorf("demo %s: %w", name, err))
		}
		rep.Results = append(rep.Results, r)
		mid, bps := smp.Bin(demoBin)
		rep.Timelines = append(rep.Timelines, timeline{Sched: name, BinS: demoBin.Seconds(), T: mid, RailsBps: bps})
	}
	if !f.quiet {
		fmt.Fprintf(g.stderr, "plain TCP: running for %v on %s\n", baseDur, specs[0].String())
	}
	rep.Baseline, err = bench.TCPBaseline(ctx, specs[0], demoSize, baseDur, false)
	if err != nil {
		return fail(fmt.Errorf("demo baseline: %w", err))
	}
	if err := writeDemoReport(dir, rep, load); err != nil {
		return err
	}
	if f.json {
		return writeJSON(g.stdout, rep)
	}
	printBenchTable(g.stdout, benchReport{Results: rep.Results, Baseline: &rep.Baseline})
	fmt.Fprintf(g.stdout, "report written to %s\n", dir)
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeDemoReport writes results.json, goodput.png, summary.png and
// summary.md into dir.
func writeDemoReport(dir string, rep demoReport, load emu.Load) error {
	jf, err := os.Create(filepath.Join(dir, "results.json"))
	if err != nil {
		return err
	}
	err = writeJSON(jf, rep)
	if cerr := jf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("results.json: %w", err)
	}

	panels := make([]goodputPanel, len(rep.Timelines))
	for i, tl := range rep.Timelines {
		r := rep.Results[i]
		panels[i] = goodputPanel{
			Title:       fmt.Sprintf("%s: %s Mbit/s, efficiency %.0f %%", tl.Sched, mbit(r.GoodputBps), 100*r.Efficiency),
			Rails:       rep.Setup.Rails,
			T:           tl.T,
			Bps:         tl.RailsBps,
			End:         r.DurationS,
			Marker:      load.At.Seconds(),
			MarkerLabel: fmt.Sprintf("rail %d load %.0f %%", load.Rail, 100*load.Fraction),
		}
	}
	if err := plotGoodput(filepath.Join(dir, "goodput.png"), panels); err != nil {
		return fmt.Errorf("goodput.png: %w", err)
	}
	var names []string
	var eff []float64
	for _, r := range rep.Results {
		names = append(names, r.Sched)
		eff = append(eff, r.Efficiency)
	}
	if err := plotEfficiency(filepath.Join(dir, "summary.png"), names, eff); err != nil {
		return fmt.Errorf("summary.png: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.md"), []byte(summaryMarkdown(rep, load)), 0o644); err != nil {
		return fmt.Errorf("summary.md: %w", err)
	}
	return nil
}

func summaryMarkdown(rep demoReport, load emu.Load) string {
	var b strings.Builder
	s := rep.Setup
	var names []string
	for _, r := range rep.Results {
		names = append(names, r.Sched)
	}
	fmt.Fprintf(&b, "# multirail demo\n\n")
	fmt.Fprintf(&b, "Every scheduler (%s) sends %s messages (4 in flight) for %gs over %d emulated rails, %s.\n",
		strings.Join(names, ", "), units.FormatSizeWords(int64(s.Size)), s.DurationS, len(s.Rails), strings.Join(s.Rails, ", "))
	fmt.Fprintf(&b, "At t=%v, %.0f %% of rail %d's (%s) capacity is taken away by emulated background load (`--load %s`).\n",
		load.At, 100*load.Fraction, load.Rail, s.Rails[load.Rail], s.Load)
	fmt.Fprintf(&b, "Capacity is what the rails offered during the run, time-averaged, after the load; efficiency = goodput / capacity.\n\n")
	fmt.Fprintf(&b, "| scheduler | goodput Mbit/s | capacity Mbit/s | efficiency | per-rail Mbit/s (%s) | p50 latency | p99 latency | 1-byte RTT |\n",
		strings.Join(s.Rails, " / "))
	fmt.Fprintf(&b, "|---|--:|--:|--:|--:|--:|--:|--:|\n")
	best := -1
	for i, r := range rep.Results {
		if best < 0 || r.Efficiency > rep.Results[best].Efficiency {
			best = i
		}
		var per []string
		for _, rr := range r.Rails {
			per = append(per, mbit(rr.GoodputBps))
		}
		rtt := "-"
		if r.RTTP50 > 0 {
			rtt = shortDur(r.RTTP50)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.1f %% | %s | %s | %s | %s |\n", r.Sched, mbit(r.GoodputBps), mbit(r.CapacityBps),
			100*r.Efficiency, strings.Join(per, " / "), shortDur(r.LatencyP50), shortDur(r.LatencyP99), rtt)
	}
	fmt.Fprintf(&b, "\nPlain TCP, one stream over one %s rail for %gs: %s Mbit/s, 1-byte round trip %s.\n",
		s.BaselineRail, s.BaselineDurationS, mbit(rep.Baseline.GoodputBps), shortDur(rep.Baseline.LatencyP50))
	if best >= 0 {
		r := rep.Results[best]
		fmt.Fprintf(&b, "\nHighest efficiency: **%s** (%.1f %%, %s Mbit/s", r.Sched, 100*r.Efficiency, mbit(r.GoodputBps))
		if rep.Baseline.GoodputBps > 0 {
			fmt.Fprintf(&b, ", %.2fx plain TCP", r.GoodputBps/rep.Baseline.GoodputBps)
		}
		fmt.Fprintf(&b, ").\n")
	}
	fmt.Fprintf(&b, "\n## Plots\n\n")
	fmt.Fprintf(&b, "- [goodput.png](goodput.png): per-rail and total goodput over time (%gs bins), one panel per scheduler; the dashed line marks the load change.\n", demoBin.Seconds())
	fmt.Fprintf(&b, "- [summary.png](summary.png): efficiency per scheduler.\n\n")
	fmt.Fprintf(&b, "![goodput over time](goodput.png)\n\n![efficiency per scheduler](summary.png)\n\n")
	fmt.Fprintf(&b, "All numbers are also in [results.json](results.json). Reproduce one row with\n`multirail bench --rails %s --sched NAME --size %d --duration %gs --load %s`.\n",
		strings.Join(s.Rails, ","), s.Size, s.DurationS, s.Load)
	return b.String()
}

// shortDur formats seconds with about four significant digits.
func shortDur(s float64) string {
	d := time.Duration(s * 1e9)
	for _, u := range []time.Duration{time.Second, time.Millisecond, time.Microsecond} {
		if d >= u {
			return d.Round(u / 10).String()
		}
	}
	return d.String()
}
