package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/internal/bench"
	"github.com/multirail/multirail/internal/wire"
	"github.com/multirail/multirail/sched"
	"github.com/multirail/multirail/units"
	"github.com/spf13/cobra"
)

type benchFlags struct {
	rails, sched, size, load, baseline, segment string
	dispatch, schedOpt                          string
	duration                                    time.Duration
	queue, window                               int
	json, rtt, quiet                            bool
}

// benchPlan is validated bench input.
type benchPlan struct {
	specs    []emu.Spec
	scheds   []string
	size     int
	duration time.Duration
	loads    []emu.Load
	segment  int
	baseline bool
	// dispatch lists the dispatch intervals to run each scheduler with
	// (0: continuous).
	dispatch []time.Duration
	// schedOpts are --sched-opt per scheduler: given to the learning
	// schedulers only.
	schedOpts map[string]string
}

// parseDispatch checks one dispatch interval: 0 (continuous) or within
// multirail's timer range.
func parseDispatch(flag string, d time.Duration) error {
	if d != 0 && (d < multirail.MinDispatchInterval || d > multirail.MaxDispatchInterval) {
		return usagef("--%s %v is out of range: allowed 0 (continuous) or %v..%v", flag, d, multirail.MinDispatchInterval, multirail.MaxDispatchInterval)
	}
	return nil
}

// parseDispatchList parses --dispatch: comma-separated intervals, each 0
// or 10ms..1s.
func parseDispatchList(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		d, err := units.ParseDuration(f)
		if err != nil {
			return nil, usagef("--dispatch %q: %w; the interval must be 0 (continuous) or %v..%v", f, err, multirail.MinDispatchInterval, multirail.MaxDispatchInterval)
		}
		if err := parseDispatch("dispatch", d); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func (f *benchFlags) plan() (benchPlan, error) {
	var p benchPlan
	specs, err := emu.ParseSpecs(f.rails)
	if err != nil {
		return p, usageError{fmt.Errorf("--rails: %w", err)}
	}
	for _, s := range specs {
		if s.Kind == "tcp" {
			return p, usagef("--rails %q: bench runs emu: and loop rails in one process; use `multirail send` for tcp: rails", s.String())
		}
	}
	p.specs = specs
	if f.sched == "all" {
		p.scheds = sched.Names()
	} else {
		for _, n := range strings.Split(f.sched, ",") {
			if _, err := sched.New(n, sched.Config{Rails: 1, Bandwidths: []float64{1}}); err != nil {
				return p, usagef("--sched %q: unknown scheduler (allowed: %s, or all)", n, strings.Join(sched.Names(), ", "))
			}
			p.scheds = append(p.scheds, n)
		}
	}
	if slicesContains(p.scheds, "weighted") {
		for _, s := range specs {
			if s.Kind != "emu" {
				if f.sched == "all" {
					p.scheds = slicesDelete(p.scheds, "weighted")
					break
				}
				return p, usagef("--sched weighted needs a rate on every rail; %q has none (use emu:RATE rails)", s.String())
			}
		}
	}
	size, err := parseSize("size", f.size, 1, maxMessage)
	if err != nil {
		return p, err
	}
	p.size = int(size)
	if f.duration < 100*time.Millisecond || f.duration > 24*time.Hour {
		return p, usagef("--duration %v is out of range: allowed 100ms..24h", f.duration)
	}
	p.duration = f.duration
	if p.loads, err = emu.ParseLoads(f.load, len(specs)); err != nil {
		return p, usageError{fmt.Errorf("--load: %w", err)}
	}
	for _, l := range p.loads {
		if specs[l.Rail].Kind != "emu" {
			return p, usagef("--load %s: rail %d is %q; background load needs an emu: rail", l.String(), l.Rail, specs[l.Rail].String())
		}
	}
	if f.segment != "" {
		seg, err := units.ParseSize(f.segment)
		huge := errors.Is(err, units.ErrRange)
		if err != nil && !huge {
			return p, usagef("--segment %q: %w", f.segment, err)
		}
		if huge {
			seg = 1 << 40 // the library names its limit
		}
		if err := (multirail.Config{SegmentSize: int(seg), Insecure: true}).Validate(); err != nil || seg == 0 { // Insecure: only the segment size is checked here
			why := ""
			if huge {
				why = " (too large)"
			}
			return p, usagef("--segment %q is out of range%s: %v", f.segment, why, cmp.Or(err, fmt.Errorf("0 bytes, allowed %d..%d bytes", wire.MinSegmentSize, wire.MaxSegmentSize)))
		}
		p.segment = int(seg)
	}
	// The library's own limits (checked once, there).
	if err := (multirail.Config{QueueDepth: f.queue, Insecure: true}).Validate(); err != nil { // Insecure: only the queue depth is checked here
		return p, usagef("--queue %d: %v", f.queue, err)
	}
	if f.window < 0 || f.window > 1024 {
		return p, usagef("--window %d is out of range: allowed 1..1024 concurrent sends (0 = auto)", f.window)
	}
	if p.dispatch, err = parseDispatchList(f.dispatch); err != nil {
		return p, err
	}
	if p.schedOpts, err = parseSchedOpts(f.schedOpt, p.scheds, len(specs)); err != nil {
		return p, err
	}
	switch f.baseline {
	case "":
	case "tcp", "tls":
		p.baseline = true
	default:
		return p, usagef("--baseline %q: allowed tcp or tls (or leave it out)", f.baseline)
	}
	return p, nil
}

// parseSchedOpts checks --sched-opt against every learning scheduler in
// scheds (those that take options) and returns the options per scheduler.
func parseSchedOpts(opts string, scheds []string, rails int) (map[string]string, error) {
	if opts == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, name := range scheds {
		if !takesOptions(name) {
			continue
		}
		if _, err := sched.New(name, sched.Config{Rails: rails, Options: opts}); err != nil {
			return nil, usagef("--sched-opt %q: %v", opts, err)
		}
		out[name] = opts
	}
	if len(out) == 0 {
		return nil, usagef("--sched-opt %q: none of the schedulers (%s) takes options; allowed with qlearn, qlearn-patent", opts, strings.Join(scheds, ","))
	}
	return out, nil
}

// takesOptions reports whether a scheduler has constants to set.
func takesOptions(name string) bool { return strings.HasPrefix(name, "qlearn") }

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func slicesDelete(s []string, v string) []string {
	var out []string
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

func newBench(g *globals) *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure schedulers over emulated or loopback rails, in one process",
		Long: `bench runs both ends of a multirail connection in this process over the given
rails and sends messages of --size bytes back to back for --duration.

Rails: emu:RATE[/DELAY] is an emulated rail (loopback TCP shaped in user space,
e.g. emu:200mbit/2ms); loop is an unshaped loopback TCP rail.
--load RAIL:FRACTION@T takes FRACTION of rail RAIL's capacity away from T on
(emulated background load), e.g. 0:0.5@4s.
--dispatch D drains the rails' send queues on a timer every D (10ms..1s, the
patent's timer dispatch) instead of continuously (0); a comma-separated list
runs every scheduler once per interval, e.g. --dispatch 0,10ms,100ms.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := f.plan()
			if err != nil {
				return err
			}
			return runBench(cmd.Context(), g, f, p)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.rails, "rails", "emu:200mbit,emu:100mbit,emu:50mbit", "comma-separated rail specs (emu:RATE[/DELAY], loop)")
	fl.StringVar(&f.sched, "sched", "all", "scheduler name, comma-separated names, or all ("+strings.Join(sched.Names(), ", ")+")")
	fl.StringVar(&f.size, "size", "4MiB", "message size ("+sizeForm+")")
	fl.DurationVar(&f.duration, "duration", 10*time.Second, "how long each scheduler sends")
	fl.StringVar(&f.load, "load", "", "background load steps RAIL:FRACTION@T, comma-separated")
	fl.StringVar(&f.baseline, "baseline", "", "also measure one stream over the same kind of path, in slices taken in turns with each run: plain TCP (tcp) or TLS 1.3 over TCP (tls, crypto/tls)")
	fl.StringVar(&f.segment, "segment", "", "segment size (default 16KiB with frames of 64KiB; a size given is also the frame size)")
	fl.IntVar(&f.queue, "queue", 0, "per-rail send-queue depth in segments (default 16)")
	fl.IntVar(&f.window, "window", 0, "concurrent sends in flight (0 = auto: 8 MiB worth, 4..256)")
	fl.StringVar(&f.schedOpt, "sched-opt", "", "constants of the learning schedulers as key=value,... (e.g. k=16,beta=0.2,epsilon=0.05; see docs/scheduler.md)")
	fl.StringVar(&f.dispatch, "dispatch", "0", "send-queue dispatch: 0 = continuous, or a timer interval 10ms..1s; comma-separated to compare several")
	fl.BoolVar(&f.json, "json", false, "print one JSON object on stdout")
	fl.BoolVar(&f.rtt, "rtt", false, "also measure the 1-byte round trip (implied by --baseline)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress on stderr")
	return cmd
}

// benchReport is bench's JSON output with --sched all (or several names).
type benchReport struct {
	Results  []bench.Result  `json:"results"`
	Baseline *bench.Baseline `json:"baseline,omitempty"`
}

// warmup is how long bench's unreported warm-up run lasts.
const warmup = 500 * time.Millisecond

func runBench(ctx context.Context, g *globals, f *benchFlags, p benchPlan) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	var rep benchReport
	// An unreported warm-up run first: the process's first transfer is
	// measurably slower (fresh heap and page faults; on loopback 15-30 %),
	// which would bias whichever scheduler runs first, and multirail
	// against the baseline, which runs last.
	if _, err := bench.Run(ctx, bench.Options{
		Rails: p.specs, Sched: p.scheds[0], Size: p.size, Duration: min(p.duration, warmup),
		SegmentSize: p.segment, QueueDepth: f.queue, Window: f.window,
		SchedOptions: p.schedOpts[p.scheds[0]], Logger: g.logger(),
	}); err != nil {
		return fmt.Errorf("bench warm-up: %w", err)
	}
	// The baseline takes turns with every run (see bench.Options.Baseline)
	// unless loads are timed on the wall clock: then it runs last, alone.
	var tcp *bench.TCPPath
	if p.baseline && len(p.loads) == 0 {
		var err error
		if tcp, err = bench.NewTCPPath(ctx, p.specs[0], p.size, f.baseline == "tls"); err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		defer tcp.Close()
		if err := tcp.Warmup(ctx, min(p.duration, warmup)); err != nil {
			return fmt.Errorf("baseline warm-up: %w", err)
		}
	}
	for _, name := range p.scheds {
		for _, d := range p.dispatch {
			label := runLabel(name, d.Seconds())
			prog := newProgress(g.stderr, f.quiet, label, p.specs, p.duration)
			r, err := bench.Run(ctx, bench.Options{
				Rails: p.specs, Sched: name, Size: p.size, Duration: p.duration, Loads: p.loads,
				SegmentSize: p.segment, QueueDepth: f.queue, Window: f.window, DispatchInterval: d,
				SchedOptions: p.schedOpts[name],
				RTT:          f.rtt || p.baseline, Progress: prog.update, Logger: g.logger(),
				Baseline: tcp,
			})
			prog.done()
			if err != nil {
				return fmt.Errorf("bench %s: %w", label, err)
			}
			rep.Results = append(rep.Results, r)
		}
	}
	if tcp != nil {
		b := tcp.Result()
		rep.Baseline = &b
	} else if p.baseline {
		b, err := bench.TCPBaseline(ctx, p.specs[0], p.size, p.duration, f.baseline == "tls")
		if err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		rep.Baseline = &b
	}
	if f.json {
		return writeBenchJSON(g.stdout, f.sched, rep)
	}
	printBenchTable(g.stdout, rep)
	return nil
}

// writeBenchJSON prints one object: the result itself for a single
// scheduler, {"results":[...]} for several.
func writeBenchJSON(w io.Writer, schedFlag string, rep benchReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if len(rep.Results) == 1 && schedFlag != "all" && !strings.Contains(schedFlag, ",") {
		type single struct {
			bench.Result
			Baseline *bench.Baseline `json:"baseline,omitempty"`
		}
		return enc.Encode(single{rep.Results[0], rep.Baseline})
	}
	return enc.Encode(rep)
}

func printBenchTable(w io.Writer, rep benchReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "sched\tgoodput Mbit/s\tcapacity Mbit/s\tefficiency\tper rail Mbit/s\tp50 latency\tp99 latency\t1-byte RTT\t")
	for _, r := range rep.Results {
		var per []string
		for _, rr := range r.Rails {
			per = append(per, mbit(rr.GoodputBps))
		}
		eff := "-"
		if r.CapacityBps > 0 {
			eff = fmt.Sprintf("%.1f %%", 100*r.Efficiency)
		}
		capa := "-"
		if r.CapacityBps > 0 {
			capa = mbit(r.CapacityBps)
		}
		rtt := "-"
		if r.RTTP50 > 0 {
			rtt = dur(r.RTTP50)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", runLabel(r.Sched, r.DispatchS), mbit(r.GoodputBps), capa, eff,
			strings.Join(per, "/"), dur(r.LatencyP50), dur(r.LatencyP99), rtt)
	}
	if b := rep.Baseline; b != nil {
		fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t%s\t\n", baselineName(b), mbit(b.GoodputBps), dur(b.LatencyP50))
	}
	tw.Flush()
	if b := rep.Baseline; b != nil && b.GoodputBps > 0 {
		for _, r := range rep.Results {
			fmt.Fprintf(w, "%s vs %s: goodput %.2fx", runLabel(r.Sched, r.DispatchS), baselineName(b), r.GoodputBps/b.GoodputBps)
			if r.RTTP50 > 0 && b.LatencyP50 > 0 {
				fmt.Fprintf(w, ", 1-byte round trip %.2fx", r.RTTP50/b.LatencyP50)
			}
			fmt.Fprintln(w)
		}
	}
}

// runLabel names a run: the scheduler, and the dispatch interval when the
// queues were drained on a timer.
func runLabel(sched string, dispatchS float64) string {
	if dispatchS == 0 {
		return sched
	}
	return fmt.Sprintf("%s@%v", sched, time.Duration(dispatchS*1e9).Round(time.Millisecond))
}

func dur(s float64) string { return time.Duration(s * 1e9).Round(time.Microsecond / 10).String() }

// baselineName is how tables name a baseline.
func baselineName(b *bench.Baseline) string {
	if b.Kind == "tls" {
		return "TLS 1.3"
	}
	return "plain TCP"
}
