package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/multirail/multirail/sched"
	"github.com/multirail/multirail/sim"
	"github.com/multirail/multirail/units"
	"github.com/spf13/cobra"
)

type simFlags struct {
	scenario, sched, seed, out string
	duration, dispatch         string
	schedOpt                   string
	json, quiet, list          bool
}

// simPlan is validated sim input.
type simPlan struct {
	sc     *sim.Scenario
	scheds []string
}

func newSim(g *globals) *cobra.Command {
	f := &simFlags{}
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Compare schedulers in the discrete-event simulator (virtual time)",
		Long: `sim runs the schedulers on a simulated scenario in virtual time: rails with
rates, delays, send queues and background load, and traffic (bulk, mixed,
request/response or a ring allreduce). The same scenario and seed always give
the same results.

--scenario is a built-in name (see --list) or a YAML or JSON file; see
sim/testdata/example.yaml for every field. --duration and --seed override the
scenario's; for finite traffic (allreduce, or a message count) --duration is a
limit. --out DIR writes PNG plots (per-rail share over time, completion-time
distribution) and results.json.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.list || f.scenario == "list" {
				return listScenarios(g.stdout)
			}
			p, err := f.plan(cmd)
			if err != nil {
				return err
			}
			return runSim(g, f, p)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.scenario, "scenario", "", "built-in scenario ("+strings.Join(sim.BuiltinNames(), ", ")+"), a scenario file, or list")
	fl.StringVar(&f.sched, "sched", "", "scheduler name, comma-separated names, or all (default: the scenario's, else all; "+strings.Join(sched.Names(), ", ")+")")
	fl.StringVar(&f.seed, "seed", "", "seed of the run (default: the scenario's)")
	fl.StringVar(&f.duration, "duration", "", "virtual duration, e.g. 2s (default: the scenario's)")
	fl.StringVar(&f.dispatch, "dispatch", "", "send-queue dispatch: 0 = continuous, or a timer interval 10ms..1s (default: the scenario's)")
	fl.StringVar(&f.schedOpt, "sched-opt", "", "constants of the learning schedulers as key=value,... (overrides the scenario's sched_options; see docs/scheduler.md)")
	fl.StringVar(&f.out, "out", "", "directory to write PNG plots and results.json to")
	fl.BoolVar(&f.json, "json", false, "print one JSON object on stdout")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress on stderr")
	fl.BoolVar(&f.list, "list", false, "list the built-in scenarios")
	return cmd
}

func listScenarios(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, n := range sim.BuiltinNames() {
		fmt.Fprintf(tw, "%s\t%s\n", n, sim.Describe(n))
	}
	return tw.Flush()
}

// loadScenario resolves --scenario: a built-in name, else a file.
func loadScenario(name string) (*sim.Scenario, error) {
	if name == "" {
		return nil, usagef("--scenario is required: a built-in (%s), a YAML or JSON file, or list", strings.Join(sim.BuiltinNames(), ", "))
	}
	if sc, err := sim.Builtin(name); err == nil {
		return sc, nil
	}
	sc, err := sim.LoadScenario(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, usagef("--scenario %q: no built-in scenario and no file of that name (built-ins: %s)", name, strings.Join(sim.BuiltinNames(), ", "))
	}
	if err != nil {
		if errors.Is(err, sim.ErrScenario) {
			return nil, usageError{err} // FILE:LINE: reason
		}
		return nil, usagef("--scenario %q: %v", name, err)
	}
	return sc, nil
}

func (f *simFlags) plan(cmd *cobra.Command) (simPlan, error) {
	var p simPlan
	sc, err := loadScenario(f.scenario)
	if err != nil {
		return p, err
	}
	if cmd.Flags().Changed("seed") {
		seed, err := strconv.ParseUint(strings.TrimSpace(f.seed), 0, 64)
		if err != nil {
			return p, usagef("--seed %q: want an integer in 0..%d", f.seed, uint64(1<<64-1))
		}
		sc.Seed = seed
	}
	if cmd.Flags().Changed("duration") {
		d, err := units.ParseDuration(f.duration)
		if err != nil || d <= 0 || d > sim.MaxDuration {
			return p, usagef("--duration %q: want a duration > 0 and <= %v, like 10s", f.duration, sim.MaxDuration)
		}
		sc.Duration = d
	}
	if cmd.Flags().Changed("dispatch") {
		d, err := units.ParseDuration(f.dispatch)
		if err != nil || (d != 0 && (d < sim.MinDispatchInterval || d > sim.MaxDispatchInterval)) {
			return p, usagef("--dispatch %q: allowed 0 (continuous) or %v..%v", f.dispatch, sim.MinDispatchInterval, sim.MaxDispatchInterval)
		}
		sc.DispatchInterval = d
	}
	switch s := strings.TrimSpace(f.sched); s {
	case "":
		p.scheds = sc.SchedulerNames()
	case "all":
		p.scheds = sched.Names()
	default:
		names := sched.Names()
		for _, n := range strings.Split(s, ",") {
			n = strings.TrimSpace(n)
			if !slices.Contains(names, n) {
				return p, usagef("--sched %q: unknown scheduler %q (allowed: %s, or all)", f.sched, n, strings.Join(names, ", "))
			}
			if slices.Contains(p.scheds, n) {
				return p, usagef("--sched %q: %q is listed twice", f.sched, n)
			}
			p.scheds = append(p.scheds, n)
		}
	}
	sc.Schedulers = p.scheds
	if f.schedOpt != "" {
		opts, err := parseSchedOpts(f.schedOpt, p.scheds, max(len(sc.Rails), 1))
		if err != nil {
			return p, err
		}
		if sc.SchedOptions == nil {
			sc.SchedOptions = map[string]string{}
		}
		maps.Copy(sc.SchedOptions, opts)
	}
	if err := sc.Validate(); err != nil {
		return p, usagef("scenario %s: %v", scenarioLabel(sc, f.scenario), err)
	}
	p.sc = sc
	return p, nil
}

func scenarioLabel(sc *sim.Scenario, flag string) string {
	if sc.Name != "" {
		return sc.Name
	}
	return flag
}

// simReport is sim's JSON output.
type simReport struct {
	Scenario string        `json:"scenario"`
	Seed     uint64        `json:"seed"`
	Results  []*sim.Result `json:"results"`
}

// runSim runs each scheduler on the scenario, in parallel up to the
// number of CPUs (each run is independent and deterministic).
func runSim(g *globals, f *simFlags, p simPlan) error {
	rep := simReport{Scenario: scenarioLabel(p.sc, f.scenario), Seed: p.sc.Seed, Results: make([]*sim.Result, len(p.scheds))}
	var mu sync.Mutex
	logf := func(format string, args ...any) {
		if f.quiet {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(g.stderr, format, args...)
	}
	logf("sim %s: %d scheduler(s), up to %v virtual\n", rep.Scenario, len(p.scheds), p.sc.Duration)
	errs := make([]error, len(p.scheds))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(p.scheds)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				rep.Results[i], errs[i] = simOne(p.sc, p.scheds[i], logf)
			}
		}()
	}
	for i := range p.scheds {
		work <- i
	}
	close(work)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if f.out != "" {
		if err := writeSimOut(f.out, rep); err != nil {
			return fmt.Errorf("--out %s: %w", f.out, err)
		}
		logf("sim %s: plots and results.json written to %s\n", rep.Scenario, f.out)
	}
	if f.json {
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printSimTable(g.stdout, rep)
	return nil
}

// simOne runs one scheduler, reporting progress about every 2 s of wall
// time on long runs.
func simOne(sc *sim.Scenario, name string, logf func(string, ...any)) (*sim.Result, error) {
	start := time.Now()
	s, err := sim.New(sc, name)
	if err != nil {
		return nil, fmt.Errorf("sim %s: %w", name, err)
	}
	last := start
	for s.Step(1 << 18) {
		if now := time.Now(); now.Sub(last) >= 2*time.Second {
			last = now
			logf("  %-14s virtual %v of at most %v, %d events\n", name, s.Now().Round(time.Millisecond), s.End(), s.Events())
		}
	}
	r := s.Result()
	wall := time.Since(start)
	logf("  %-14s done: %v virtual, %d events in %v (%.1fM events/s)\n", name,
		time.Duration(r.DurationS*1e9).Round(time.Microsecond), r.Events, wall.Round(time.Millisecond), float64(r.Events)/wall.Seconds()/1e6)
	return r, nil
}

func simDur(s float64) string {
	if s == 0 {
		return "-"
	}
	return time.Duration(s * 1e9).Round(time.Microsecond).String()
}

func printSimTable(w io.Writer, rep simReport) {
	fmt.Fprintf(w, "scenario %s (seed %d)\n", rep.Scenario, rep.Seed)
	if len(rep.Results) == 0 {
		return
	}
	var names []string
	for _, r := range rep.Results[0].Rails {
		names = append(names, r.Name)
	}
	unit := rep.Results[0].CompletionUnit
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "sched\tgoodput Mbit/s\tcapacity Mbit/s\tefficiency\tshare %% (%s)\tmean %s\tp99 %s\tcompleted\tevents\t\n",
		strings.Join(names, "/"), unit, unit)
	for _, r := range rep.Results {
		var shares []string
		for _, rr := range r.Rails {
			shares = append(shares, fmt.Sprintf("%.0f", 100*rr.Share))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f %%\t%s\t%s\t%s\t%d\t%d\t\n", r.Sched, mbit(r.GoodputBps), mbit(r.CapacityBps),
			100*r.Efficiency, strings.Join(shares, "/"), simDur(r.MeanCompletionS), simDur(r.P99CompletionS), r.Completed, r.Events)
	}
	tw.Flush()
}

// writeSimOut writes results.json and the plots to dir.
func writeSimOut(dir string, rep simReport) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	if err := plotSimShares(filepath.Join(dir, "share.png"), rep); err != nil {
		return err
	}
	return plotSimCDF(filepath.Join(dir, "completion_cdf.png"), rep)
}
