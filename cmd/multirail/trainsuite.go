package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/train"
	"github.com/multirail/multirail/units"
)

// suiteScenario is one network of the training suite: the emulated
// rails' background load (a pattern of emu.ParsePattern without its
// seed, which each run's seed sets) and how much faster than --rails
// its rails are (Scale; 0 means as given).
type suiteScenario struct {
	Name, Load, About string
	Scale             float64 `json:",omitempty"`
}

// rails is the emulated rail list of the scenario: rails (valid specs,
// checked by the plan) with every emulated rate times Scale.
func (s suiteScenario) rails(rails string) string {
	if s.Scale == 0 || s.Scale == 1 {
		return rails
	}
	specs, err := emu.ParseSpecs(rails)
	if err != nil {
		return rails
	}
	for i := range specs {
		if specs[i].Kind == emu.KindEmu {
			specs[i].RateBps *= s.Scale
		}
	}
	return emu.FormatSpecs(specs)
}

// suiteScenarios are the suite's networks, in the order they run.
var suiteScenarios = []suiteScenario{
	{"calm", "off", "no load", 0},
	// fast is where discarding does not pay: the exchange is a small part
	// of a step (as on the machines JP7684261B2 is for, where compute
	// dominates a calm step), so every discarded packet costs steps and
	// saves almost no time.
	{"fast", "off", "no load, rails 4x as fast", 4},
	{"mild", "bursty:busy=400ms,idle=200ms,load=0.5:0.9", "bursts taking 50-90 % of a rail", 0},
	{"severe", "bursty:busy=400ms,idle=200ms,load=0.9:0.98", "bursts taking 90-98 % of a rail", 0},
	{"heavy", "bursty:busy=2s,idle=200ms,load=0.8:0.95", "sustained load of 80-95 % with short gaps", 0},
	{"long-phases", "phases:calm=10s,congested=10s,busy=400ms,idle=200ms,load=0.9:0.98,offset=seed", "10 s calm, 10 s of severe bursts", 0},
	{"short-phases", "phases:calm=2s,congested=2s,busy=400ms,idle=200ms,load=0.9:0.98,offset=seed", "2 s calm, 2 s of severe bursts", 0},
}

// Non-fixed settings of the suite.
const (
	settingDefault = "default" // the default controller
	settingPatent  = "patent"  // the JP7684261B2 preset
	settingOracle  = "oracle"  // phases only: rates pinned by phase
	// settingReliable is the reliable mode: the communicator's exact
	// allreduce, not the loss-tolerant one. It is what a user runs
	// without loss tolerance, but a different algorithm: it is reported,
	// not counted among the fixed rates.
	settingReliable = "reliable"
)

// noDiscard is the rate fixed:0 pins: the loss-tolerant (transpose)
// allreduce with nothing discarded, as near as the rate's stochastic
// rounding allows (discard.Select drops a packet of a part of n with
// probability n times the rate: below 1e-6 here). The train command's
// --discard-rate 0 means the controller's rate.
const noDiscard = "1e-9"

type suiteFlags struct {
	scenarios, seeds, rates, settings, oracle, targets string
	rails, partition, model, stepTime, out             string
	workers, steps, boot                               int
	json, calibrate, quiet                             bool
}

func newTrainSuite(g *globals) *cobra.Command {
	f := &suiteFlags{}
	names := make([]string, len(suiteScenarios))
	var about strings.Builder
	for i, s := range suiteScenarios {
		names[i] = s.Name
		fmt.Fprintf(&about, "  %-13s %s (%s)\n", s.Name, s.About, s.Load)
	}
	cmd := &cobra.Command{
		Use:   "suite",
		Short: "Every discard setting on every scenario and seed: is the controller close to the best fixed rate everywhere?",
		Long: `train suite runs, one after the other, every setting on every scenario and
seed, each a job of --workers processes under multirail run --emu (the
training of train --per-process, losstolerant mode, or reliable for rate 0):

settings: each fixed rate of --rates (fixed:R, the loss-tolerant
allreduce at rate R; fixed:0 discards nothing), the default controller
(default), the JP7684261B2 preset (patent), on phased scenarios an oracle
that pins --oracle CALM:CONGESTED by phase, and the reliable mode
(reliable: the communicator's exact allreduce, another algorithm, shown
beside the others). Scenarios (background load on every emulated rail, its schedule
drawn from the seed):
` + about.String() + `
Per scenario and target it reports each setting's time to the target,
steps, discard in calm and congested phases and final accuracy, and its
ratio to the best fixed rate chosen by cross-fitting (for each seed, the
fixed rate of least mean time over the other seeds; never the minimum of
the same noisy means). The summary is each setting's worst ratio over the
scenarios, with a bootstrap interval over the seeds, and the default
controller's worst case against the best single fixed rate's. The
validity check says whether every fixed rate is at least 1.10x the best
somewhere; if not the suite is too easy to tell settings apart.

--calibrate runs the fixed rates on calm only and fits how the steps to
each target grow with the rate (steps0 (1 + k R/(1-R))).

With --out DIR every run's result is kept in DIR/runs (a run already there
is not run again, so an interrupted suite resumes), the report in
DIR/suite.json and the times to target in DIR/suite.png. Progress goes to
stderr, one line per run; a table (or --json) to stdout.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTrainSuite(cmd.Context(), g, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.scenarios, "scenarios", strings.Join(names, ","), "scenarios to run, comma-separated")
	fl.StringVar(&f.seeds, "seeds", "1-5", "seeds, A-B or comma-separated (keep tuning seeds apart from the ones you report)")
	fl.StringVar(&f.rates, "rates", "0,0.2,0.4,0.6", "fixed discard rates of the loss-tolerant allreduce, comma-separated, each in [0, 1)")
	fl.StringVar(&f.settings, "settings", "default,patent,oracle,reliable", "other settings, comma-separated: default, patent, oracle (phased scenarios only), reliable (the exact allreduce); empty for fixed rates only")
	fl.StringVar(&f.oracle, "oracle", "0.05:0.6", "the oracle's rates in calm and congested phases, CALM:CONGESTED, each in (0, 1)")
	fl.StringVar(&f.targets, "targets", "0.88,0.9", "test accuracies to time, comma-separated, each in (0, 1); the last is the one the summary leads with")
	fl.IntVar(&f.workers, "workers", 4, "processes (workers) per run, 2..16")
	fl.IntVar(&f.steps, "steps", train.DefaultSteps, "SGD steps per run")
	fl.StringVar(&f.rails, "rails", train.DefaultRails, "emulated rails between every pair of workers (emu:RATE[/DELAY],...)")
	fl.StringVar(&f.partition, "partition", "shards:2", "how the training set is split across the workers (as for train)")
	fl.StringVar(&f.model, "model", "mlp", "mlp or cnn")
	fl.StringVar(&f.stepTime, "step-time", "60ms", "emulated accelerator step (as for train; 0 = off)")
	fl.IntVar(&f.boot, "boot", 2000, "bootstrap resamples of the seeds for the intervals, 100..100000")
	fl.BoolVar(&f.calibrate, "calibrate", false, "run the fixed rates on calm only and fit steps to target against the rate")
	fl.StringVar(&f.out, "out", "", "directory for runs/, suite.json and suite.png (resumes the runs already there)")
	fl.BoolVar(&f.json, "json", false, "print the report as one JSON object on stdout")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress on stderr")
	return cmd
}

// suitePlan is a validated suite.
type suitePlan struct {
	scenarios []suiteScenario
	seeds     []uint64
	settings  []string
	targets   []float64
	oracle    string
	stepTime  time.Duration
}

// runs lists the (scenario, setting, seed) triples in the order they run:
// by seed, then scenario, then setting, so that a suite cut short has
// whole seeds.
func (p suitePlan) runs() []train.SuiteRun {
	var out []train.SuiteRun
	for _, seed := range p.seeds {
		for _, sc := range p.scenarios {
			for _, st := range p.settings {
				if st == settingOracle && !strings.HasPrefix(sc.Load, "phases") {
					continue
				}
				out = append(out, train.SuiteRun{Scenario: sc.Name, Setting: st, Seed: seed})
			}
		}
	}
	return out
}

func (f *suiteFlags) plan() (suitePlan, error) {
	var p suitePlan
	for _, name := range strings.Split(f.scenarios, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(suiteScenarios, func(s suiteScenario) bool { return s.Name == name })
		if i < 0 {
			names := make([]string, len(suiteScenarios))
			for k, s := range suiteScenarios {
				names[k] = s.Name
			}
			return p, usagef("--scenarios %q: unknown %q; allowed %s", f.scenarios, name, strings.Join(names, ", "))
		}
		if !slices.ContainsFunc(p.scenarios, func(s suiteScenario) bool { return s.Name == name }) {
			p.scenarios = append(p.scenarios, suiteScenarios[i])
		}
	}
	if f.calibrate {
		p.scenarios = []suiteScenario{suiteScenarios[0]}
	}
	seeds, err := parseSeeds(f.seeds)
	if err != nil {
		return p, usagef("--seeds %q: %v", f.seeds, err)
	}
	p.seeds = seeds
	for _, r := range strings.Split(f.rates, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
		if err != nil || !(v >= 0 && v < 1) {
			return p, usagef("--rates %q: want comma-separated rates, each in [0, 1)", f.rates)
		}
		if s := train.FixedSetting(v); !slices.Contains(p.settings, s) {
			p.settings = append(p.settings, s)
		}
	}
	if !f.calibrate && strings.TrimSpace(f.settings) != "" {
		for _, s := range strings.Split(f.settings, ",") {
			s = strings.TrimSpace(s)
			if s != settingDefault && s != settingPatent && s != settingOracle && s != settingReliable {
				return p, usagef("--settings %q: unknown %q; allowed default, patent, oracle, reliable", f.settings, s)
			}
			if !slices.Contains(p.settings, s) {
				p.settings = append(p.settings, s)
			}
		}
	}
	a, b, ok := strings.Cut(f.oracle, ":")
	calm, err1 := strconv.ParseFloat(a, 64)
	cong, err2 := strconv.ParseFloat(b, 64)
	if !ok || err1 != nil || err2 != nil || !(calm > 0 && calm < 1 && cong > 0 && cong < 1) {
		return p, usagef("--oracle %q: want CALM:CONGESTED, each in (0, 1)", f.oracle)
	}
	p.oracle = f.oracle
	for _, t := range strings.Split(f.targets, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
		if err != nil || !(v > 0 && v < 1) {
			return p, usagef("--targets %q: want comma-separated accuracies, each in (0, 1)", f.targets)
		}
		p.targets = append(p.targets, v)
	}
	if f.workers < 2 || f.workers > 16 {
		return p, usagef("--workers %d: allowed 2..16", f.workers)
	}
	if f.steps < 1 || f.steps > 100000 {
		return p, usagef("--steps %d: allowed 1..100000", f.steps)
	}
	if f.boot < 100 || f.boot > 100000 {
		return p, usagef("--boot %d: allowed 100..100000", f.boot)
	}
	if p.stepTime, err = units.ParseDuration(f.stepTime); err != nil || p.stepTime > train.MaxStepTime {
		return p, usagef("--step-time %q: want a duration 0..%v (e.g. 60ms; a number is seconds), 0 = off", f.stepTime, train.MaxStepTime)
	}
	if _, err := emu.ParseSpecs(f.rails); err != nil {
		return p, usagef("--rails %q: %v", f.rails, err)
	}
	if _, err := train.ParsePartition(f.partition); err != nil {
		return p, usagef("--partition %q: allowed iid, shards:K (K 1..100) or dirichlet:ALPHA (0.001..1000)", f.partition)
	}
	if f.model != train.ModelMLP && f.model != train.ModelCNN {
		return p, usagef("--model %q: allowed mlp or cnn", f.model)
	}
	return p, nil
}

// parseSeeds reads "A-B" or "A,B,...".
func parseSeeds(s string) ([]uint64, error) {
	if a, b, ok := strings.Cut(s, "-"); ok {
		lo, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 64)
		hi, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 64)
		if err1 != nil || err2 != nil || lo > hi || hi-lo >= 1000 {
			return nil, errors.New("want A-B with A <= B, at most 1000 seeds, or A,B,...")
		}
		var out []uint64
		for v := lo; v <= hi; v++ {
			out = append(out, v)
		}
		return out, nil
	}
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, errors.New("want A-B or comma-separated unsigned integers")
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
}

// suiteReport is the JSON of a suite: its settings, the runs and the
// analysis (or the calibration).
type suiteReport struct {
	Workers      int                 `json:"workers"`
	Steps        int                 `json:"steps"`
	Rails        string              `json:"rails"`
	Partition    string              `json:"partition"`
	Model        string              `json:"model"`
	StepTime     string              `json:"step_time"`
	Plaintext    bool                `json:"plaintext"`
	Oracle       string              `json:"oracle"`
	Scenarios    []suiteScenario     `json:"scenario_loads"`
	Analysis     *train.SuiteReport  `json:"analysis,omitempty"`
	Calibrations []train.Calibration `json:"calibrations,omitempty"`
	Runs         []train.SuiteRun    `json:"runs"`
}

func runTrainSuite(ctx context.Context, g *globals, f *suiteFlags) error {
	p, err := f.plan()
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("train suite: finding this program: %w", err)
	}
	var runsDir string
	if f.out != "" {
		runsDir = filepath.Join(f.out, "runs")
		if err := os.MkdirAll(runsDir, 0o755); err != nil {
			return err
		}
	}
	todo := p.runs()
	started := time.Now()
	for i := range todo {
		r := &todo[i]
		file := ""
		if runsDir != "" {
			file = filepath.Join(runsDir, fmt.Sprintf("%s_%s_%d.json", r.Scenario, strings.ReplaceAll(r.Setting, ":", "-"), r.Seed))
			if b, err := os.ReadFile(file); err == nil {
				var kept train.SuiteRun
				if err := json.Unmarshal(b, &kept); err == nil && kept.Scenario == r.Scenario && kept.Setting == r.Setting && kept.Seed == r.Seed {
					*r = kept
					if !f.quiet {
						fmt.Fprintf(g.stderr, "train suite: run %d/%d: %s %s seed %d: kept from %s\n", i+1, len(todo), r.Scenario, r.Setting, r.Seed, file)
					}
					continue
				}
			}
		}
		res, err := suiteRunOne(ctx, exe, f, p, *r)
		if err != nil {
			return fmt.Errorf("train suite: %s %s seed %d: %w", r.Scenario, r.Setting, r.Seed, err)
		}
		r.Result = res
		if file != "" {
			b, _ := json.Marshal(r)
			if err := os.WriteFile(file, append(b, '\n'), 0o644); err != nil {
				return err
			}
		}
		if !f.quiet {
			last := res.Targets[len(res.Targets)-1]
			tt := "not reached"
			if last.Time != nil {
				tt = fmt.Sprintf("%.1f s", *last.Time)
			}
			fmt.Fprintf(g.stderr, "train suite: run %d/%d: %s %s seed %d: %.0f %% in %s, final %.2f %%, discard %.1f %% (%v elapsed)\n",
				i+1, len(todo), r.Scenario, r.Setting, r.Seed, 100*last.Accuracy, tt, 100*res.FinalAccuracy, 100*res.MeanDiscardRate,
				time.Since(started).Round(time.Second))
		}
	}
	rep := suiteReport{Workers: f.workers, Steps: f.steps, Rails: f.rails, Partition: f.partition, Model: f.model,
		StepTime: units.FormatDuration(p.stepTime), Plaintext: os.Getenv("MULTIRAIL_PLAINTEXT") == "1", Oracle: p.oracle, Scenarios: p.scenarios, Runs: todo}
	if f.calibrate {
		for _, t := range p.targets {
			c, err := train.Calibrate(todo, t)
			if err != nil {
				return err
			}
			rep.Calibrations = append(rep.Calibrations, c)
		}
	} else {
		lead := settingDefault
		if !slices.Contains(p.settings, lead) {
			lead = p.settings[len(p.settings)-1]
		}
		// The oracle runs on phased scenarios only: analyse the settings
		// every scenario has.
		var common []train.SuiteRun
		for _, r := range todo {
			if r.Setting != settingOracle && r.Setting != settingReliable {
				common = append(common, r)
			}
		}
		an, err := train.Analyze(common, p.targets, lead, f.boot, rand.New(rand.NewPCG(1, 0x737569)))
		if err != nil {
			return err
		}
		// The oracle's and the reliable mode's cells, against the same
		// cross-fitted bests.
		for _, st := range []string{settingOracle, settingReliable} {
			if slices.Contains(p.settings, st) {
				an.ScoreAside(todo, st)
			}
		}
		rep.Analysis = &an
	}
	if f.out != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(filepath.Join(f.out, "suite.json"), append(b, '\n'), 0o644); err != nil {
			return err
		}
		if rep.Analysis != nil {
			if err := plotSuite(filepath.Join(f.out, "suite.png"), *rep.Analysis, p.targets[len(p.targets)-1]); err != nil {
				return err
			}
		}
	}
	if f.json {
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printSuite(g.stdout, rep)
	if f.out != "" {
		fmt.Fprintf(g.stdout, "\nruns in %s, report in %s, plot in %s\n", runsDir, filepath.Join(f.out, "suite.json"), filepath.Join(f.out, "suite.png"))
	}
	return nil
}

// suiteRunOne runs one setting on one scenario and seed: a job of
// f.workers processes under multirail run --emu, rank 0's JSON read from
// its stdout.
func suiteRunOne(ctx context.Context, exe string, f *suiteFlags, p suitePlan, r train.SuiteRun) (train.Result, error) {
	sc := suiteScenarios[slices.IndexFunc(suiteScenarios, func(s suiteScenario) bool { return s.Name == r.Scenario })]
	args := []string{"run", "-n", strconv.Itoa(f.workers), "--emu", sc.rails(f.rails)}
	if sc.Load != "off" {
		args = append(args, "--emu-load", sc.Load+",seed="+strconv.FormatUint(r.Seed, 10))
	}
	args = append(args, "--", exe, "train", "--per-process", "--json", "-q",
		"--steps", strconv.Itoa(f.steps), "--partition", f.partition, "--model", f.model,
		"--step-time", units.FormatDuration(p.stepTime), "--seed", strconv.FormatUint(r.Seed, 10),
		"--targets", joinFloats(p.targets), "--target", strconv.FormatFloat(p.targets[len(p.targets)-1], 'f', -1, 64))
	mode := string(train.LossTolerant)
	switch {
	case r.Setting == settingDefault:
	case r.Setting == settingPatent:
		args = append(args, "--discard-opt", "rule=patent")
	case r.Setting == settingOracle:
		args = append(args, "--phase-rates", p.oracle)
	case r.Setting == settingReliable:
		mode = string(train.Reliable)
	default:
		rate, _ := train.ParseFixedSetting(r.Setting)
		v := strconv.FormatFloat(rate, 'f', -1, 64)
		if rate == 0 {
			v = noDiscard
		}
		args = append(args, "--discard-rate", v)
	}
	args = append(args, "--mode", mode)
	cmd := exec.CommandContext(ctx, exe, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return train.Result{}, ctx.Err()
		}
		return train.Result{}, fmt.Errorf("%v: %s", err, lastLine(stderr.String()))
	}
	var out trainReport
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || len(out.Results) != 1 {
		return train.Result{}, fmt.Errorf("reading the job's JSON (%d bytes): %v", stdout.Len(), err)
	}
	res := out.Results[0]
	// The suite keeps what it scores; the per-step series are in the
	// runs' own output when wanted.
	res.Losses, res.DiscardRates = nil, nil
	return res, nil
}

func joinFloats(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', -1, 64)
	}
	return strings.Join(s, ",")
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func printSuite(w io.Writer, rep suiteReport) {
	fmt.Fprintf(w, "%d workers, model %s, partition %s, rails %s, %d steps, step time %s, plaintext %v\n",
		rep.Workers, rep.Model, rep.Partition, rep.Rails, rep.Steps, rep.StepTime, rep.Plaintext)
	if len(rep.Calibrations) > 0 {
		for _, c := range rep.Calibrations {
			fmt.Fprintf(w, "\ncalibration, target %.0f %%: steps(R) = %.0f (1 + %.3f R/(1-R))\n", 100*c.Target, c.Steps0, c.K)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "rate\truns reached\tmean steps\tfit\t")
			for _, p := range c.Points {
				fmt.Fprintf(tw, "%.2f\t%d\t%.0f\t%.0f\t\n", p.Rate, p.Runs, p.Steps, c.Predict(p.Rate))
			}
			tw.Flush()
		}
		return
	}
	an := rep.Analysis
	fmt.Fprintf(w, "seeds %v\n", an.Seeds)
	for _, tg := range an.Targets {
		fmt.Fprintf(w, "\ntime to %.0f %%: mean s (ratio to the cross-fitted best fixed rate; * = runs that missed it)\n", 100*tg)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "scenario\t"+strings.Join(an.Settings, "\t")+"\t")
		for _, sc := range an.Scenarios {
			line := sc + "\t"
			for _, st := range an.Settings {
				c, ok := an.Cell(sc, st, tg)
				if !ok {
					line += "-\t"
					continue
				}
				cens := ""
				if c.Censored > 0 {
					cens = strings.Repeat("*", c.Censored)
				}
				line += fmt.Sprintf("%.1f (%.2fx)%s\t", c.MeanTime, c.Ratio, cens)
			}
			fmt.Fprintln(tw, line)
		}
		tw.Flush()
	}
	fmt.Fprintln(w, "\ndiscard and mean step, calm / congested phases (phased scenarios), else mean; final accuracy")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\t"+strings.Join(an.Settings, "\t")+"\t")
	tg := an.Targets[len(an.Targets)-1]
	for _, sc := range an.Scenarios {
		line := sc + "\t"
		for _, st := range an.Settings {
			c, ok := an.Cell(sc, st, tg)
			switch {
			case !ok:
				line += "-\t"
			case c.CalmDiscard >= 0:
				line += fmt.Sprintf("%.1f/%.1f %%, %.0f/%.0f ms, %.2f %%\t", 100*c.CalmDiscard, 100*c.CongestedDiscard, 1000*c.CalmStep, 1000*c.CongestedStep, 100*c.FinalAccuracy)
			default:
				line += fmt.Sprintf("%.1f %%, %.0f ms, %.2f %%\t", 100*c.MeanDiscard, 1000*c.MeanStep, 100*c.FinalAccuracy)
			}
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	for _, tg := range an.Targets {
		fmt.Fprintf(w, "\nworst ratio over the scenarios, target %.0f %% (95 %% bootstrap interval over seeds)\n", 100*tg)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "setting\tworst\twhere\tinterval\t")
		for _, s := range an.Summary {
			if s.Target == tg {
				fmt.Fprintf(tw, "%s\t%.3f\t%s\t%.3f-%.3f\t\n", s.Setting, s.Worst, s.Where, s.Interval[0], s.Interval[1])
			}
		}
		tw.Flush()
		for _, v := range an.Verdicts {
			if v.Target != tg {
				continue
			}
			fmt.Fprintf(w, "%s against the best single fixed rate (%s): worst case %+.3f (interval %+.3f to %+.3f)\n",
				v.Setting, v.BestFixed, v.Difference, v.Interval[0], v.Interval[1])
			if v.Valid {
				fmt.Fprintf(w, "validity: every fixed rate is >= %.2fx the best somewhere\n", train.ValidityRatio)
			} else {
				fmt.Fprintf(w, "validity: FAILED: %s never >= %.2fx the best: the suite cannot tell them apart\n", strings.Join(v.Easy, ", "), train.ValidityRatio)
			}
		}
	}
}
