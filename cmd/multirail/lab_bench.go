package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	_ "github.com/multirail/multirail" // registers the learning schedulers
	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/internal/bench"
	"github.com/multirail/multirail/lab"
	"github.com/multirail/multirail/lab/mpi"
	"github.com/multirail/multirail/sched"
	"github.com/spf13/cobra"
)

// Systems that lab bench compares, besides multirail-<sched>.
const (
	sysTCP        = "tcp-per-rail"
	sysMPTCP      = "mptcp"
	sysMPIDefault = "openmpi-default"
	sysMPIWeights = "openmpi-weighted"
	sysMultirail  = "multirail-"
)

const (
	labBucket       = 250 * time.Millisecond
	labMinDur       = 4 * time.Second
	labMaxDur       = 10 * time.Minute
	labMinSize      = 1 << 10
	labMaxSize      = 64 << 20
	labBenchPrefix  = "mrb"
	labStartMargin  = 2 * time.Second // agents start and dial before the epoch
	labPhaseSettle  = time.Second     // left out at the start of each phase
	labAgentRunCost = 3 * time.Second // estimated overhead of a run, for the estimate
	labMPIRunCost   = 5 * time.Second
)

type labBenchFlags struct {
	rates, sizes, systems, sched, prefix, cc, out string
	duration                                      time.Duration
	json, quiet                                   bool
}

// labSkip is a system that was not run, and why.
type labSkip struct {
	System string `json:"system"`
	Reason string `json:"reason"`
}

// labBenchPlan is validated lab bench input.
type labBenchPlan struct {
	rates    []float64
	sizes    []int
	systems  []string
	skipped  []labSkip
	duration time.Duration
	cfg      lab.Config
}

// labSystems expands --systems and --sched into the systems to run, in
// order. mpiErr says why Open MPI cannot run (nil if it can): systems
// that "all" brings in are then skipped, systems named explicitly are an
// error.
func labSystems(systemsFlag, schedFlag string, mpiErr error) ([]string, []labSkip, error) {
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
	multi := func() []string {
		var out []string
		for _, s := range scheds {
			out = append(out, sysMultirail+s)
		}
		return out
	}
	var (
		out      []string
		explicit = map[string]bool{}
	)
	for _, item := range strings.Split(systemsFlag, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "all":
			out = append(out, sysTCP, sysMPTCP, sysMPIDefault, sysMPIWeights)
			out = append(out, multi()...)
		case item == sysTCP || item == sysMPTCP:
			out = append(out, item)
		case item == "openmpi":
			out = append(out, sysMPIDefault, sysMPIWeights)
			explicit[sysMPIDefault], explicit[sysMPIWeights] = true, true
		case item == sysMPIDefault || item == sysMPIWeights:
			out = append(out, item)
			explicit[item] = true
		case item == "multirail":
			out = append(out, multi()...)
		case strings.HasPrefix(item, sysMultirail) && slices.Contains(sched.Names(), strings.TrimPrefix(item, sysMultirail)):
			out = append(out, item)
		default:
			return nil, nil, usagef("--systems %q: unknown system (allowed: all, %s, %s, openmpi, %s, %s, multirail, %s<sched> with sched one of %s)",
				item, sysTCP, sysMPTCP, sysMPIDefault, sysMPIWeights, sysMultirail, strings.Join(sched.Names(), ", "))
		}
	}
	var systems []string
	var skipped []labSkip
	for _, s := range out {
		if slices.Contains(systems, s) || slices.ContainsFunc(skipped, func(k labSkip) bool { return k.System == s }) {
			continue
		}
		if isMPI(s) && mpiErr != nil {
			if explicit[s] {
				return nil, nil, fmt.Errorf("--systems asks for %s, which cannot run here: %v", s, mpiErr)
			}
			skipped = append(skipped, labSkip{s, mpiErr.Error()})
			continue
		}
		systems = append(systems, s)
	}
	return systems, skipped, nil
}

func isMPI(system string) bool { return system == sysMPIDefault || system == sysMPIWeights }

func (f *labBenchFlags) plan(mpiErr error) (labBenchPlan, error) {
	var p labBenchPlan
	var err error
	if p.rates, err = parseRates(f.rates); err != nil {
		return p, err
	}
	for _, s := range strings.Split(f.sizes, ",") {
		n, err := parseSize("sizes", strings.TrimSpace(s), labMinSize, labMaxSize)
		if err != nil {
			return p, err
		}
		if !slices.Contains(p.sizes, int(n)) {
			p.sizes = append(p.sizes, int(n))
		}
	}
	if f.duration < labMinDur || f.duration > labMaxDur {
		return p, usagef("--duration %v is out of range: allowed %v..%v", f.duration, labMinDur, labMaxDur)
	}
	if f.duration%labBucket != 0 {
		return p, usagef("--duration %v: allowed multiples of %v", f.duration, labBucket)
	}
	p.duration = f.duration
	p.cfg = lab.Config{Rates: p.rates, Prefix: f.prefix, CC: f.cc}
	if _, err := p.cfg.Normalized(); err != nil {
		return p, usageError{labFlagError(err)}
	}
	if p.systems, p.skipped, err = labSystems(f.systems, f.sched, mpiErr); err != nil {
		return p, err
	}
	if len(p.systems) == 0 {
		return p, usagef("--systems %q: nothing left to run", f.systems)
	}
	return p, nil
}

// estimate is about how long the bench runs.
func (p labBenchPlan) estimate() time.Duration {
	var d time.Duration
	for _, s := range p.systems {
		cost := labAgentRunCost
		if isMPI(s) {
			cost = labMPIRunCost
		}
		d += p.duration + cost
	}
	return d*time.Duration(len(p.sizes)) + 5*time.Second
}

func newLabBench(g *globals) *cobra.Command {
	f := &labBenchFlags{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Compare multirail with TCP per rail, MPTCP and Open MPI on a lab of its own",
		Long: `bench builds a lab of its own (prefix mrb, so that it never touches one that
"lab up" built), and in one run on that topology measures for every --sizes:

  tcp-per-rail      one TCP stream per rail at once: the ceiling check
  mptcp             one Linux MPTCP connection (one subflow per rail)
  openmpi-default   Open MPI ob1 + TCP BTL over every rail, default weights
  openmpi-weighted  the same with btl_tcp_bandwidth_railN set to the rates
  multirail-<sched> a multirail connection with that scheduler (weighted
                    is given the true rail rates; the others nothing)

Each run lasts --duration; a competing TCP stream starts on rail0 (the
fastest rail) at half time. Goodput is measured at the receiver in 250 ms
buckets: "static" is the mean over [1s, T/2), "dynamic" over [T/2+1s, T).
--out DIR writes results.json (with the time series) and one PNG per size.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mpiErr := mpi.Available()
			p, err := f.plan(mpiErr)
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
	fl.DurationVar(&f.duration, "duration", 20*time.Second, "length of each run (4s..10m, a multiple of 250ms)")
	fl.StringVar(&f.systems, "systems", "all", "systems to run, comma-separated: all, tcp-per-rail, mptcp, openmpi, openmpi-default, openmpi-weighted, multirail, multirail-<sched>")
	fl.StringVar(&f.sched, "sched", "all", "schedulers for the multirail systems: all or comma-separated ("+strings.Join(sched.Names(), ", ")+")")
	fl.StringVar(&f.prefix, "prefix", labBenchPrefix, "namespace prefix of the bench's own lab")
	fl.StringVar(&f.cc, "cc", lab.DefaultCC, "TCP congestion control in both namespaces")
	fl.StringVar(&f.out, "out", "", "write results.json and PNG plots into this new or empty folder")
	fl.BoolVar(&f.json, "json", false, "print one JSON object on stdout")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress on stderr")
	return cmd
}

// labResult is one (system, size, phase) of the report.
type labResult struct {
	System     string  `json:"system"`
	Phase      string  `json:"phase"`
	Size       int     `json:"size"`
	GoodputBps float64 `json:"goodput_bps"`
	// CeilingFraction is GoodputBps / ceiling_bps.
	CeilingFraction float64 `json:"ceiling_fraction"`
	// RailsBps is the goodput per rail; RailsSource says where it was
	// measured: "receiver" (per connection, subflow or multirail rail at
	// the receiver) or "tbf" (sender's tbf byte counters x 1448/1514,
	// less the competing stream on rail0).
	RailsBps    []float64 `json:"rails_bps,omitempty"`
	RailsSource string    `json:"rails_source,omitempty"`
	// CompetingBps is the competing stream's goodput (dynamic phase).
	CompetingBps *float64 `json:"competing_bps,omitempty"`
	// Window is the messages in flight (multirail, Open MPI).
	Window   int    `json:"window,omitempty"`
	MPTCP    *bool  `json:"mptcp,omitempty"`
	Subflows int    `json:"subflows,omitempty"`
	Note     string `json:"note,omitempty"`
	Error    string `json:"error,omitempty"`
}

// labSeries is one run's goodput over time, for results.json and plots.
type labSeries struct {
	System  string      `json:"system"`
	Size    int         `json:"size"`
	BucketS float64     `json:"bucket_s"`
	Total   []float64   `json:"total_bps"`
	Rails   [][]float64 `json:"rails_bps"`
	// Competing is the competing stream's goodput from T/2 on.
	Competing []float64 `json:"competing_bps"`
}

// labReport is lab bench's JSON output.
type labReport struct {
	CeilingBps float64   `json:"ceiling_bps"`
	RatesBps   []float64 `json:"rates_bps"`
	// DynamicFairBps is the goodput left for the system once the
	// competing stream has its fair half of rail0.
	DynamicFairBps float64     `json:"dynamic_fair_bps"`
	DurationS      float64     `json:"duration_s"`
	BucketS        float64     `json:"bucket_s"`
	CC             string      `json:"cc"`
	Sizes          []int       `json:"sizes"`
	Systems        []string    `json:"systems"`
	Skipped        []labSkip   `json:"skipped"`
	Results        []labResult `json:"results"`
	Series         []labSeries `json:"series,omitempty"`
}

// labRun is what one (system, size) run measured.
type labRun struct {
	system string
	size   int
	window int
	// rails[rail][bucket] and total[bucket]: payload bytes since the
	// epoch, bucketed by labBucket.
	rails       [][]int64
	total       []int64
	railsSource string
	mptcp       *bool
	subflows    int
	note        string
	load        lab.LoadResult
	loadErr     error
}

// labBencher runs the systems on one lab.
type labBencher struct {
	g    *globals
	f    *labBenchFlags
	p    labBenchPlan
	lab  *lab.Lab
	exe  string
	mrbw string
}

func runLabBench(ctx context.Context, g *globals, f *labBenchFlags, p labBenchPlan) (err error) {
	ctx, stop := labSignals(ctx)
	defer stop()
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("lab bench: finding this program: %w", err)
	}
	if strings.ContainsAny(exe, " \t\n'\"") {
		return fmt.Errorf("lab bench: this program's path %q has spaces or quotes; Open MPI's rsh agent cannot carry it", exe)
	}
	var outDir string
	if f.out != "" {
		var created bool
		if outDir, created, err = prepareOut(f.out, time.Now()); err != nil {
			return err
		}
		defer func() {
			if err != nil && created {
				os.RemoveAll(outDir)
			}
		}()
	}
	for _, s := range p.skipped {
		fmt.Fprintf(g.stderr, "multirail: lab bench: skipping %s: %s\n", s.System, s.Reason)
	}
	b := &labBencher{g: g, f: f, p: p, exe: exe}
	if slices.ContainsFunc(p.systems, isMPI) {
		dir, err := mpi.CacheDir()
		if err == nil {
			b.mrbw, err = mpi.Build(ctx, dir)
		}
		if err != nil {
			return fmt.Errorf("lab bench: building the MPI program: %w", err)
		}
	}
	runs := len(p.systems) * len(p.sizes)
	fmt.Fprintf(g.stderr, "multirail: lab bench: %d runs (%d systems x %d sizes) of %v on %d rails (%s), about %v in all\n",
		runs, len(p.systems), len(p.sizes), p.duration, len(p.rates), ratesString(p.rates), p.estimate().Round(time.Second))
	cfg := p.cfg
	cfg.Logger = g.logger()
	l, err := lab.Up(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if derr := l.Down(); derr != nil && err == nil {
			err = derr
		}
	}()
	b.lab = l
	rep := newLabReport(p, l.Config().CC)
	var failed []string
	n := 0
	for _, size := range p.sizes {
		for _, sys := range p.systems {
			n++
			if !f.quiet {
				fmt.Fprintf(g.stderr, "multirail: lab bench: run %d/%d: %s, %s messages\n", n, runs, sys, sizeString(size))
			}
			run, rerr := b.run(ctx, sys, size)
			_ = l.KillProcesses()
			if ctx.Err() != nil {
				return fmt.Errorf("lab bench: interrupted: %w", ctx.Err())
			}
			if rerr != nil {
				fmt.Fprintf(g.stderr, "multirail: lab bench: %s, %s: %v\n", sys, sizeString(size), rerr)
				failed = append(failed, fmt.Sprintf("%s/%s", sys, sizeString(size)))
			}
			rep.add(run, rerr, p)
			time.Sleep(500 * time.Millisecond) // let the queues drain
		}
	}
	if outDir != "" {
		if err := writeLabOut(outDir, rep, p); err != nil {
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
	if len(failed) > 0 {
		return fmt.Errorf("lab bench: %d of %d runs failed: %s", len(failed), runs, strings.Join(failed, ", "))
	}
	return nil
}

func ratesString(rates []float64) string {
	var s []string
	for _, r := range rates {
		s = append(s, formatRate(r))
	}
	return strings.Join(s, ",")
}

func sumRates(rates []float64) float64 {
	var s float64
	for _, r := range rates {
		s += r
	}
	return s
}

func newLabReport(p labBenchPlan, cc string) labReport {
	sum := sumRates(p.rates)
	return labReport{
		CeilingBps: lab.GoodputCeiling(sum), RatesBps: p.rates,
		DynamicFairBps: lab.GoodputCeiling(sum - p.rates[0]/2),
		DurationS:      p.duration.Seconds(), BucketS: labBucket.Seconds(), CC: cc,
		Sizes: p.sizes, Systems: p.systems, Skipped: append([]labSkip{}, p.skipped...),
	}
}

// phases returns the static and dynamic windows of a run of d.
func phases(d time.Duration) (static, dynamic [2]time.Duration) {
	return [2]time.Duration{labPhaseSettle, d / 2}, [2]time.Duration{d/2 + labPhaseSettle, d}
}

// add appends a run's two results (static, dynamic) and its series.
func (rep *labReport) add(run labRun, rerr error, p labBenchPlan) {
	st, dy := phases(p.duration)
	note := run.note
	switch {
	case run.system == sysMultirail+"weighted":
		note = join(note, "given the true rail rates")
	case run.system == sysMPIWeights:
		note = join(note, "btl_tcp_bandwidth_railN = rates")
	}
	if run.mptcp != nil {
		if *run.mptcp {
			note = join(note, fmt.Sprintf("MPTCP, %d subflows", run.subflows))
		} else {
			note = join(note, "fell back to TCP")
		}
	}
	for _, ph := range []struct {
		name string
		win  [2]time.Duration
	}{{"static", st}, {"dynamic", dy}} {
		r := labResult{System: run.system, Phase: ph.name, Size: run.size, Window: run.window, MPTCP: run.mptcp, Subflows: run.subflows, Note: note}
		if rerr != nil {
			r.Error = rerr.Error()
		}
		r.GoodputBps = lab.MeanBps(run.total, labBucket, ph.win[0], ph.win[1])
		if rep.CeilingBps > 0 {
			r.CeilingFraction = r.GoodputBps / rep.CeilingBps
		}
		if run.rails != nil {
			r.RailsSource = run.railsSource
			for _, s := range run.rails {
				r.RailsBps = append(r.RailsBps, lab.MeanBps(s, labBucket, ph.win[0], ph.win[1]))
			}
		}
		if ph.name == "dynamic" && run.loadErr == nil && run.load.Series != nil {
			c := lab.MeanBps(run.load.Series, run.load.Bucket, ph.win[0]-p.duration/2, ph.win[1]-p.duration/2)
			r.CompetingBps = &c
		}
		rep.Results = append(rep.Results, r)
	}
	s := labSeries{System: run.system, Size: run.size, BucketS: labBucket.Seconds()}
	bps := func(b []int64) []float64 {
		out := make([]float64, len(b))
		for i, v := range b {
			out[i] = float64(v) * 8 / labBucket.Seconds()
		}
		return out
	}
	s.Total = bps(run.total)
	for _, r := range run.rails {
		s.Rails = append(s.Rails, bps(r))
	}
	s.Competing = bps(run.load.Series)
	rep.Series = append(rep.Series, s)
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// run measures one system at one size.
func (b *labBencher) run(ctx context.Context, sys string, size int) (labRun, error) {
	run := labRun{system: sys, size: size}
	ctx, cancel := context.WithTimeout(ctx, b.p.duration+labStartMargin+90*time.Second)
	defer cancel()
	label := fmt.Sprintf("%s %s", sys, strings.ReplaceAll(sizeString(size), " ", ""))
	var specs []emu.Spec
	for i := range b.p.rates {
		specs = append(specs, emu.Spec{Kind: emu.KindTCP, Local: b.lab.RailIP(0, i), Remote: b.lab.RailIP(1, i)})
	}
	prog := newProgress(b.g.stderr, b.f.quiet, label, specs, b.p.duration)
	defer prog.done()
	var err error
	if isMPI(sys) {
		err = b.runMPI(ctx, &run, prog)
	} else {
		err = b.runAgents(ctx, &run, prog)
	}
	return run, err
}

// startLoad starts the competing stream on rail0 for the second half of
// the run that starts at epoch.
func (b *labBencher) startLoad(ctx context.Context, epoch time.Time) (*lab.LoadStream, error) {
	half := b.p.duration / 2
	return b.lab.Load(ctx, 0, max(time.Until(epoch.Add(half)), 0), b.p.duration-half)
}

// tail keeps the last bytes written to it (a process's stderr).
type tail struct {
	mu  sync.Mutex
	buf []byte
	w   io.Writer // also copy here, when set (-v)
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 8<<10 {
		t.buf = t.buf[len(t.buf)-8<<10:]
	}
	if t.w != nil {
		_, _ = t.w.Write(p)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// lastLines returns the last n lines of s, joined with " | ".
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

func (b *labBencher) command(ctx context.Context, side int, name string, args ...string) (*exec.Cmd, *tail) {
	cmd := b.lab.Command(ctx, side, name, args...)
	t := &tail{}
	if b.g.verbose {
		t.w = b.g.stderr
	}
	cmd.Stderr = t
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 3 * time.Second
	return cmd, t
}

// runAgents runs tcp-per-rail, mptcp or multirail-<sched>: a receiving
// agent in B, then a sending agent in A.
func (b *labBencher) runAgents(ctx context.Context, run *labRun, prog *progress) error {
	m := len(b.p.rates)
	epoch := time.Now().Add(labStartMargin)
	spec := agentSpec{Role: "recv", NRails: m, EpochNs: epoch.UnixNano(), Duration: b.p.duration, Bucket: labBucket, Size: run.size}
	switch {
	case run.system == sysTCP:
		spec.Kind = kindTCP
		for i := 0; i < m; i++ {
			spec.Listen = append(spec.Listen, net.JoinHostPort(b.lab.RailIP(1, i), "0"))
		}
	case run.system == sysMPTCP:
		spec.Kind = kindMPTCP
		// Every address: the subflows that join over rails 1.. arrive at
		// the addresses B announced, on the same port.
		spec.Listen = []string{"0.0.0.0:0"}
	default:
		spec.Kind = kindMultirail
		spec.Sched = strings.TrimPrefix(run.system, sysMultirail)
		spec.Listen = []string{":0"}
		spec.Window = bench.AutoWindow(run.size)
		run.window = spec.Window
	}
	run.railsSource = "receiver"
	// On every return: stop what still runs (cancel), then reap it.
	var reap []func()
	defer func() {
		for i := len(reap) - 1; i >= 0; i-- {
			reap[i]()
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	js, _ := json.Marshal(spec)
	recv, rerr := b.command(ctx, 1, b.exe, "lab", "agent", "--spec", string(js))
	stdout, err := recv.StdoutPipe()
	if err != nil {
		cancel()
		return err
	}
	if err := recv.Start(); err != nil {
		cancel()
		return fmt.Errorf("starting the receiver: %w", err)
	}
	waitRecv := sync.OnceValue(recv.Wait)
	reap = append(reap, func() { waitRecv() }, cancel)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var addrs []string
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == agentReady {
			addrs = strings.Split(f[1], ",")
			break
		}
	}
	if addrs == nil {
		return fmt.Errorf("the receiver did not start: %v: %s", waitRecv(), lastLines(rerr.String(), 3))
	}
	spec.Role = "send"
	for i := 0; i < m; i++ {
		// The receiver listens once per rail (tcp) or once for all.
		_, port, _ := net.SplitHostPort(addrs[min(i, len(addrs)-1)])
		r := agentRail{Name: lab.RailDev(i), Local: b.lab.RailIP(0, i), Remote: net.JoinHostPort(b.lab.RailIP(1, i), port)}
		if spec.Sched == "weighted" {
			r.Bandwidth = b.p.rates[i]
		}
		spec.Rails = append(spec.Rails, r)
	}
	js, _ = json.Marshal(spec)
	send, serr := b.command(ctx, 0, b.exe, "lab", "agent", "--spec", string(js))
	send.Stdout = serr
	if err := send.Start(); err != nil {
		return fmt.Errorf("starting the sender: %w", err)
	}
	waitSend := sync.OnceValue(send.Wait)
	reap = append(reap, func() { waitSend() }, cancel)
	load, lerr := b.startLoad(ctx, epoch)
	if lerr != nil {
		run.loadErr = lerr
	}
	var res *agentResult
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		switch {
		case len(f) > 2 && f[0] == agentProgress:
			k, _ := strconv.Atoi(f[1])
			per := make([]uint64, 0, len(f)-2)
			for _, v := range f[2:] {
				n, _ := strconv.ParseUint(v, 10, 64)
				per = append(per, n)
			}
			prog.update(time.Duration(k)*labBucket, per)
		case len(f) > 1 && f[0] == agentResultLn:
			res = &agentResult{}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, agentResultLn+" ")), res); err != nil {
				return fmt.Errorf("receiver result: %w", err)
			}
		}
	}
	if load != nil {
		run.load, run.loadErr = load.Wait()
	}
	werr := waitRecv()
	sendErr := waitSend()
	switch {
	case sendErr != nil && ctx.Err() == nil:
		return fmt.Errorf("sender: %v: %s", sendErr, lastLines(serr.String(), 3))
	case res == nil:
		return fmt.Errorf("receiver: %v: %s", werr, lastLines(rerr.String(), 3))
	}
	run.total, run.rails, run.note = res.Total, res.Rails, res.Note
	if spec.Kind == kindMPTCP {
		mp := res.MPTCP
		run.mptcp, run.subflows = &mp, res.Subflows
	}
	if run.loadErr != nil {
		run.note = join(run.note, "competing stream: "+run.loadErr.Error())
	}
	return nil
}

// runMPI runs openmpi-default or openmpi-weighted: mpirun in A, rank 0
// there and rank 1 in B (through lab rsh).
func (b *labBencher) runMPI(ctx context.Context, run *labRun, prog *progress) error {
	m := len(b.p.rates)
	run.window = bench.AutoWindow(run.size)
	job := mpi.Job{
		Hosts: [2]string{b.lab.NS(0), b.lab.NS(1)}, RshAgent: b.exe + " lab rsh", OOBNet: lab.CtlNet(),
		Program: b.mrbw, Size: run.size, Seconds: b.p.duration.Seconds(), Window: run.window,
	}
	for i := 0; i < m; i++ {
		job.RailNets = append(job.RailNets, lab.RailNet(i))
		job.RailDevs = append(job.RailDevs, lab.RailDev(i))
		if run.system == sysMPIWeights {
			job.BandwidthMbps = append(job.BandwidthMbps, max(1, int(math.Round(b.p.rates[i]/1e6))))
		}
	}
	args := append([]string{"--uts", "sh", "-c", `hostname "$0" && exec "$@"`, b.lab.NS(0)}, mpi.Args(job)...)
	cmd, errTail := b.command(ctx, 0, "unshare", args...)
	cmd.Env = append(append(os.Environ(), mpi.Env()...), "SHELL=/bin/sh")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	qr, err := b.lab.Qdiscs(0)
	if err != nil {
		return err
	}
	defer qr.Close()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting mpirun: %w", err)
	}
	var (
		epoch    time.Time
		wins     []mpi.Event
		done     bool
		load     *lab.LoadStream
		wire     [][]uint64 // wire[k][rail]: tbf bytes sent at epoch + k buckets
		wg       sync.WaitGroup
		stopSamp = make(chan struct{})
	)
	n := int(b.p.duration / labBucket)
	sample := func() {
		defer wg.Done()
		for k := 0; k <= n; k++ {
			select {
			case <-time.After(time.Until(epoch.Add(time.Duration(k) * labBucket))):
			case <-stopSamp:
				return
			}
			qs, err := qr.Read()
			if err != nil {
				return
			}
			row := make([]uint64, m)
			cum := make([]uint64, m)
			for i := range row {
				row[i] = qs[lab.RailDev(i)].Bytes
			}
			wire = append(wire, row)
			for i := range row {
				cum[i] = (row[i] - wire[0][i]) * 1448 / 1514
			}
			if k > 0 {
				prog.update(time.Duration(k)*labBucket, cum)
			}
		}
	}
	var other []string
	scanErr := mpi.Scan(stdout, func(ev mpi.Event) {
		switch ev.Kind {
		case "start":
			epoch = ev.Time
			var lerr error
			if load, lerr = b.startLoad(ctx, epoch); lerr != nil {
				run.loadErr = lerr
			}
			wg.Add(1)
			go sample()
		case "win":
			wins = append(wins, ev)
		case "done":
			done = true
		}
	}, func(line string) { other = append(other, line) })
	werr := cmd.Wait()
	close(stopSamp)
	wg.Wait()
	if load != nil {
		run.load, run.loadErr = load.Wait()
	}
	if epoch.IsZero() || !done || werr != nil {
		msg := errTail.String()
		if len(other) > 0 {
			msg = strings.Join(other, "\n") + "\n" + msg
		}
		return fmt.Errorf("mpirun: exit %v, scan %v, started %v, finished %v: %s", werr, scanErr, !epoch.IsZero(), done, lastLines(msg, 4))
	}
	run.total = mpi.Spread(epoch, wins, labBucket, n)
	if len(wire) == n+1 {
		run.rails = wireRails(wire, run.load)
		run.railsSource = "tbf"
	}
	if run.loadErr != nil {
		run.note = join(run.note, "competing stream: "+run.loadErr.Error())
	}
	return nil
}

// wireRails turns cumulative tbf byte counters (n+1 samples, one per
// bucket boundary) into payload bytes per rail and bucket: wire bytes x
// 1448/1514, less the competing stream's payload on rail0 (its series
// starts at half time).
func wireRails(wire [][]uint64, load lab.LoadResult) [][]int64 {
	n, m := len(wire)-1, len(wire[0])
	out := make([][]int64, m)
	for i := range out {
		out[i] = make([]int64, n)
		for k := 0; k < n; k++ {
			out[i][k] = int64(wire[k+1][i]-wire[k][i]) * 1448 / 1514
		}
	}
	off := n - len(load.Series) // the load starts at half time
	for k, v := range load.Series {
		if j := off + k; j >= 0 && j < n {
			out[0][j] = max(out[0][j]-v, 0)
		}
	}
	return out
}

// printLabTable prints the report as a table with a short summary.
func printLabTable(w io.Writer, rep labReport) {
	fmt.Fprintf(w, "rails %s, %s, %gs per run; ceiling %s Mbit/s (sum of rates x 1448/1514); fair share once the competing stream has half of rail0: %s Mbit/s\n",
		ratesString(rep.RatesBps), rep.CC, rep.DurationS, mbit(rep.CeilingBps), mbit(rep.DynamicFairBps))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "system\tsize\tstatic Mbit/s\t% ceiling\tper rail\tdynamic Mbit/s\t% fair\tper rail\tcompeting Mbit/s\tnote")
	byKey := map[string]labResult{}
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\n", s.System, strings.ReplaceAll(sizeString(s.Size), " ", ""),
			mbit(s.GoodputBps), 100*s.CeilingFraction, perRail(s.RailsBps), mbit(d.GoodputBps), fair, perRail(d.RailsBps), comp, note)
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
func labSummary(rep labReport) []string {
	var out []string
	for _, size := range rep.Sizes {
		var best, bestDyn, mp *labResult
		for i := range rep.Results {
			r := &rep.Results[i]
			if r.Size != size || r.Error != "" {
				continue
			}
			switch {
			case r.System == sysMPTCP && r.Phase == "dynamic":
				mp = r
			case strings.HasPrefix(r.System, sysMultirail) && r.Phase == "static":
				if best == nil || r.GoodputBps > best.GoodputBps {
					best = r
				}
			case strings.HasPrefix(r.System, sysMultirail) && r.Phase == "dynamic":
				if bestDyn == nil || r.GoodputBps > bestDyn.GoodputBps {
					bestDyn = r
				}
			}
		}
		if best == nil {
			continue
		}
		line := fmt.Sprintf("%s: best multirail static %s %s Mbit/s = %.1f %% of the ceiling", strings.ReplaceAll(sizeString(size), " ", ""),
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
func writeLabOut(dir string, rep labReport, p labBenchPlan) error {
	var buf bytes.Buffer
	if err := writeJSON(&buf, rep); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), buf.Bytes(), 0o644); err != nil {
		return err
	}
	buf.Reset()
	printLabTable(&buf, rep)
	if err := os.WriteFile(filepath.Join(dir, "table.txt"), buf.Bytes(), 0o644); err != nil {
		return err
	}
	var names []string
	for i := range p.rates {
		names = append(names, formatRate(p.rates[i])) // the legend says "rail i <name>"
	}
	for _, size := range p.sizes {
		var panels []goodputPanel
		for _, s := range rep.Series {
			if s.Size != size || len(s.Total) == 0 {
				continue
			}
			pan := goodputPanel{Title: s.System, End: p.duration.Seconds(), Marker: p.duration.Seconds() / 2, MarkerLabel: "competing TCP on rail0"}
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
		path := filepath.Join(dir, fmt.Sprintf("goodput-%s.png", strings.ReplaceAll(sizeString(size), " ", "")))
		if err := plotGoodput(path, panels); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}
