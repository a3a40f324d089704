package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/multirail/multirail/comm"
	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/lossy/discard"
	"github.com/multirail/multirail/train"
	"github.com/multirail/multirail/units"
	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

type trainFlags struct {
	workers, steps, batch, evalEvery, packetFloats, syncEvery int
	mode, rails, congestion, load, hidden, partition, model   string
	allreduce                                                 string
	busy, idle, calm, congested                               time.Duration
	lr, target, discardRate                                   float64
	discardOpt, out, seed, phaseRates, metrics                string
	stepTime, targets                                         string
	errorFeedback, json, quiet, perProcess, workersSet, decay bool
}

func newTrain(g *globals) *cobra.Command {
	f := &trainFlags{}
	cmd := &cobra.Command{
		Use:   "train",
		Short: "Data-parallel MNIST training over emulated rails, reliable and loss-tolerant",
		Long: `train runs N workers in this process, each with a shard of MNIST and a copy of
a small MLP, each with a communicator of its own, joined by multirail
connections over emulated rails (every pair of workers has its own rails,
--rails). Every step each worker computes the gradient of its minibatch and an
allreduce averages the gradients: the communicator's, as with --per-process
(exact in reliable mode, the unbiased transpose allreduce in losstolerant
mode); --allreduce ring joins the workers in a ring of stage connections
instead, whose loss-tolerant allreduce is biased where the workers'
gradients differ (kept for comparison).

--mode reliable sends every packet; --mode losstolerant sends each allreduce
as a stage whose discard rate a controller sets from the receiver's feedback:
by default the match rule (discard the share by which the link is slower than
its recent baseline), with --discard-opt rule=patent the JP7684261B2 rule
(reception period and quality, the change of the smoothed training loss);
--discard-rate pins it. Both runs start from the same weights, data order and
background-load schedule. --per-process runs one worker per process under a
launcher instead (see README). By default the rails are congested by bursty background load
(--congestion bursty: busy periods of mean --busy taking a fraction in --load
of each rail, idle periods of mean --idle); --congestion off removes it.

Progress goes to stderr; a table (or --json) to stdout; --out DIR writes
accuracy.png (test accuracy against training time, per mode), discard.png
(discard rate per step) and results.json.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.workersSet = cmd.Flags().Changed("workers")
			o, err := f.options()
			if err != nil {
				return err
			}
			return runTrain(cmd.Context(), g, f, o)
		},
	}
	cmd.AddCommand(newTrainSuite(g))
	fl := cmd.Flags()
	fl.IntVar(&f.workers, "workers", train.DefaultWorkers, "number of workers (ranks), 2..16")
	fl.StringVar(&f.mode, "mode", "both", "reliable, losstolerant or both")
	fl.IntVar(&f.steps, "steps", train.DefaultSteps, "SGD steps per mode")
	fl.IntVar(&f.batch, "batch", train.DefaultBatch, "samples per worker per step")
	fl.Float64Var(&f.lr, "lr", train.DefaultLR, "learning rate, constant unless --lr-decay")
	fl.BoolVar(&f.decay, "lr-decay", false, "lower the learning rate linearly to a tenth over the last 40 % of the steps (off: constant, so that no setting passes a target because the rate fell by step count)")
	fl.StringVar(&f.stepTime, "step-time", "0", "emulated accelerator step: each worker sleeps after computing its gradient until this long after its step began, then exchanges (a duration, e.g. 60ms; a number is seconds); 0 = off")
	fl.StringVar(&f.model, "model", "mlp", "the network: mlp (784-hidden-10, --hidden) or cnn (two 3x3 convolutions of 8 and 16 channels, each with 2x2 max pooling, then a dense layer)")
	fl.StringVar(&f.hidden, "hidden", "128", "hidden layer widths of the mlp, comma-separated")
	fl.StringVar(&f.partition, "partition", "iid", "how the training set is split across the workers: iid, shards:K (sorted by label, K shards each) or dirichlet:ALPHA (each class split in Dirichlet(ALPHA) proportions)")
	fl.StringVar(&f.rails, "rails", train.DefaultRails, "emulated rails between every pair of workers (of every ring link with --allreduce ring) (emu:RATE[/DELAY],...)")
	fl.StringVar(&f.allreduce, "allreduce", train.AllreduceTranspose, "in process: transpose (every worker a communicator of its own, as --per-process; unbiased) or ring (a ring of stage connections; biased on non-IID data, for comparison)")
	fl.StringVar(&f.congestion, "congestion", "bursty", "background load: bursty, phases (calm phases of --calm without load alternate with bursty phases of --congested: congestion that comes and goes) or off")
	fl.DurationVar(&f.calm, "calm", 3*time.Second, "length of a calm phase of --congestion phases")
	fl.DurationVar(&f.congested, "congested", 3*time.Second, "length of a congested phase of --congestion phases")
	fl.DurationVar(&f.busy, "busy", 400*time.Millisecond, "mean busy period of the bursty load")
	fl.DurationVar(&f.idle, "idle", 200*time.Millisecond, "mean idle period of the bursty load")
	fl.StringVar(&f.load, "load", "0.5:0.9", "range of the fraction of a rail a busy period takes, MIN:MAX")
	fl.StringVar(&f.discardOpt, "discard-opt", "", "discard controller constants as key=value,... ("+strings.Join(discard.OptionKeys, ", ")+"; see docs/discard.md)")
	fl.Float64Var(&f.discardRate, "discard-rate", 0, "losstolerant: pin the discard rate to R in (0, 1) instead of the controller's (to compare with fixed rates); 0 = the controller")
	fl.BoolVar(&f.errorFeedback, "error-feedback", false, "keep discarded gradient packets and send them with the next step")
	fl.IntVar(&f.packetFloats, "packet-floats", 0, "gradient values per packet (default 1024)")
	fl.IntVar(&f.syncEvery, "sync-every", train.DefaultSyncEvery, "losstolerant: average the replicas' parameters (nothing discarded) every N steps and after the last; -1 = never")
	fl.Float64Var(&f.target, "target", train.DefaultTarget, "test accuracy whose time to reach is the headline (also added to --targets)")
	fl.StringVar(&f.targets, "targets", "0.88,0.9", "test accuracies whose first checkpoints are reported, comma-separated, each in (0, 1)")
	fl.IntVar(&f.evalEvery, "eval-every", train.DefaultEvalEvery, "steps between accuracy checkpoints (of the replicas' average, evaluated after the run, off the clock)")
	fl.StringVar(&f.seed, "seed", "1", "seed of weights, data order, discard choices and load schedule")
	fl.StringVar(&f.out, "out", "", "directory to write PNG plots and results.json to")
	fl.BoolVar(&f.json, "json", false, "print one JSON object on stdout")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress on stderr")
	fl.StringVar(&f.phaseRates, "phase-rates", "", "experiment, with --congestion phases (or --per-process under multirail run --emu-load phases:...): pin the discard rate to CALM during calm phases and CONGESTED during congested ones (CALM:CONGESTED, each in (0, 1)), an oracle that knows the schedule")
	fl.StringVar(&f.metrics, "metrics", "", "serve Prometheus metrics of the training connections at http://ADDR/metrics (with --per-process every rank serves its own, the port offset by its local rank; "+MetricsAddrEnv+" does the same without the flag)")
	fl.BoolVar(&f.perProcess, "per-process", false, "run this process as one worker of a job started by a launcher (multirail run, mpirun, srun, torchrun; see comm.Init): the job's ranks are the workers, its rails the network (--rails and the congestion flags do not apply: use the launcher's, e.g. multirail run --emu); rank 0 prints the results")
	return cmd
}

func (f *trainFlags) options() (train.Options, error) {
	o := train.Options{Workers: f.workers, Steps: f.steps, Batch: f.batch, LR: f.lr, Decay: f.decay, Target: f.target,
		EvalEvery: f.evalEvery, PacketFloats: f.packetFloats, ErrorFeedback: f.errorFeedback, SyncEvery: f.syncEvery}
	st, err := units.ParseDuration(f.stepTime)
	if err != nil || st < 0 || st > train.MaxStepTime {
		return o, usagef("--step-time %q: want a duration 0..%v (e.g. 60ms; a number is seconds), 0 = off", f.stepTime, train.MaxStepTime)
	}
	o.StepTime = st
	for _, t := range strings.Split(f.targets, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
		if err != nil || !(v > 0 && v < 1) {
			return o, usagef("--targets %q: want comma-separated accuracies, each in (0, 1)", f.targets)
		}
		o.Targets = append(o.Targets, v)
	}
	switch f.mode {
	case "both":
		o.Modes = []train.Mode{train.Reliable, train.LossTolerant}
	case string(train.Reliable), string(train.LossTolerant):
		o.Modes = []train.Mode{train.Mode(f.mode)}
	default:
		return o, usagef("--mode %q: allowed reliable, losstolerant or both", f.mode)
	}
	if f.workers < 2 || f.workers > 16 {
		return o, usagef("--workers %d: allowed 2..16", f.workers)
	}
	if f.steps < 1 || f.steps > 100000 {
		return o, usagef("--steps %d: allowed 1..100000", f.steps)
	}
	if f.batch < 1 || f.batch > 4096 {
		return o, usagef("--batch %d: allowed 1..4096", f.batch)
	}
	if !(f.lr > 0 && f.lr <= 10) {
		return o, usagef("--lr %v: allowed (0, 10]", f.lr)
	}
	if !(f.target > 0 && f.target < 1) {
		return o, usagef("--target %v: allowed (0, 1)", f.target)
	}
	if f.syncEvery == 0 || f.syncEvery < -1 || f.syncEvery > 100000 {
		return o, usagef("--sync-every %d: allowed 1..100000, or -1 for never", f.syncEvery)
	}
	if f.evalEvery < 1 {
		return o, usagef("--eval-every %d: allowed >= 1", f.evalEvery)
	}
	if f.packetFloats < 0 || f.packetFloats > 4000 {
		return o, usagef("--packet-floats %d: allowed 1..4000 (a packet must fit an eager message of 16 KiB), 0 = default 1024", f.packetFloats)
	}
	if !(f.discardRate >= 0 && f.discardRate < 1) {
		return o, usagef("--discard-rate %v: allowed [0, 1), 0 = the controller's rate", f.discardRate)
	}
	o.DiscardRate = f.discardRate
	if f.phaseRates != "" {
		a, b, ok := strings.Cut(f.phaseRates, ":")
		calm, err1 := strconv.ParseFloat(a, 64)
		cong, err2 := strconv.ParseFloat(b, 64)
		if !ok || err1 != nil || err2 != nil || !(calm > 0 && calm < 1 && cong > 0 && cong < 1) {
			return o, usagef("--phase-rates %q: want CALM:CONGESTED, each in (0, 1)", f.phaseRates)
		}
		if !f.perProcess && (f.allreduce == train.AllreduceRing || f.congestion != "phases") {
			return o, usagef("--phase-rates %q: needs --congestion phases in process (not with --allreduce ring), or --per-process under a launcher's --emu-load phases:...", f.phaseRates)
		}
		if f.discardRate > 0 {
			return o, usagef("--phase-rates %q with --discard-rate %v: allowed one of them", f.phaseRates, f.discardRate)
		}
		o.PhaseRates = train.PhaseRates{Calm: calm, Congested: cong}
	}
	if f.model != train.ModelMLP && f.model != train.ModelCNN {
		return o, usagef("--model %q: allowed mlp or cnn", f.model)
	}
	o.Model = f.model
	if f.allreduce != train.AllreduceTranspose && f.allreduce != train.AllreduceRing {
		return o, usagef("--allreduce %q: allowed transpose or ring", f.allreduce)
	}
	o.Allreduce = f.allreduce
	p, err := train.ParsePartition(f.partition)
	if err != nil {
		return o, usagef("--partition %q: allowed iid, shards:K (K 1..100) or dirichlet:ALPHA (0.001..1000)", f.partition)
	}
	o.Partition = p
	for _, h := range strings.Split(f.hidden, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(h))
		if err != nil || n < 1 || n > 4096 {
			return o, usagef("--hidden %q: want comma-separated widths 1..4096", f.hidden)
		}
		o.MLP.Hidden = append(o.MLP.Hidden, n)
	}
	if len(o.MLP.Hidden) > 4 {
		return o, usagef("--hidden %q: at most 4 layers", f.hidden)
	}
	specs, err := emu.ParseSpecs(f.rails)
	if err != nil {
		return o, usagef("--rails %q: %v", f.rails, err)
	}
	for _, s := range specs {
		if s.Kind != emu.KindEmu {
			return o, usagef("--rails %q: %q is not an emulated rail; train runs on emu:RATE[/DELAY] rails only", f.rails, s)
		}
	}
	if len(specs) > 8 {
		return o, usagef("--rails %q: %d rails; allowed 1..8", f.rails, len(specs))
	}
	o.Rails = specs
	switch f.congestion {
	case "off":
		o.Congestion.Off = true
	case "bursty", "phases":
		if f.busy < time.Millisecond || f.busy > time.Minute {
			return o, usagef("--busy %v: allowed 1ms..1m", f.busy)
		}
		if f.idle < time.Millisecond || f.idle > time.Minute {
			return o, usagef("--idle %v: allowed 1ms..1m", f.idle)
		}
		lo, hi, ok := strings.Cut(f.load, ":")
		a, err1 := strconv.ParseFloat(lo, 64)
		b, err2 := strconv.ParseFloat(hi, 64)
		if !ok || err1 != nil || err2 != nil || !(a > 0 && a <= b && b < 1) {
			return o, usagef("--load %q: want MIN:MAX with 0 < MIN <= MAX < 1", f.load)
		}
		o.Congestion = train.Congestion{Busy: f.busy, Idle: f.idle, Min: a, Max: b}
		if f.congestion == "phases" {
			for _, d := range []struct {
				flag string
				v    time.Duration
			}{{"--calm", f.calm}, {"--congested", f.congested}} {
				if d.v < time.Millisecond || d.v > time.Hour {
					return o, usagef("%s %v: allowed 1ms..1h", d.flag, d.v)
				}
			}
			o.Congestion.Phases, o.Congestion.Calm, o.Congestion.Congested = true, f.calm, f.congested
		}
	default:
		return o, usagef("--congestion %q: allowed bursty, phases or off", f.congestion)
	}
	if o.Discard, err = discard.ParseOptions(f.discardOpt, train.DefaultDiscard); err != nil {
		return o, usagef("--discard-opt %q: %v", f.discardOpt, err)
	}
	if o.Seed, err = strconv.ParseUint(f.seed, 10, 64); err != nil {
		return o, usagef("--seed %q: want an unsigned integer", f.seed)
	}
	return o, nil
}

// trainReport is the JSON output: the contract's fields per result, and
// the run's settings.
type trainReport struct {
	Workers    int            `json:"workers"`
	Model      string         `json:"model"`
	Partition  string         `json:"partition"`
	Rails      string         `json:"rails"`
	Congestion string         `json:"congestion"`
	Discard    discard.Config `json:"discard"`
	// Allreduce is the loss-tolerant allreduce: transpose (the
	// communicator's; always with --per-process) or ring.
	Allreduce string `json:"allreduce"`
	// DiscardRate is the pinned rate of --discard-rate, absent when the
	// controller set it.
	DiscardRate float64 `json:"discard_rate,omitempty"`
	// StepTime is --step-time (a duration), absent when off.
	StepTime string `json:"step_time,omitempty"`
	// PhaseRates is --phase-rates, absent when not given.
	PhaseRates *train.PhaseRates `json:"phase_rates,omitempty"`
	Results    []train.Result    `json:"results"`
}

func runTrain(ctx context.Context, g *globals, f *trainFlags, o train.Options) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := parseMetricsAddr(f.metrics); err != nil {
		return err
	}
	if f.out != "" {
		if err := os.MkdirAll(f.out, 0o755); err != nil {
			return err
		}
	}
	o.Logger = g.logger()
	cong := "off"
	if !o.Congestion.Off {
		cong = fmt.Sprintf("bursty busy=%v idle=%v load=%s", o.Congestion.Busy, o.Congestion.Idle, f.load)
		if o.Congestion.Phases {
			cong = fmt.Sprintf("phases calm=%v congested=%v, then %s", o.Congestion.Calm, o.Congestion.Congested, cong)
		}
	}
	// o.Discard came validated, defaults filled, from discard.ParseOptions.
	rep := trainReport{Workers: o.Workers, Model: o.Model, Partition: o.Partition.String(), Rails: emu.FormatSpecs(o.Rails), Congestion: cong, Discard: o.Discard, DiscardRate: o.DiscardRate, Allreduce: o.Allreduce}
	if !o.PhaseRates.IsZero() {
		rep.PhaseRates = &o.PhaseRates
	}
	if o.StepTime > 0 {
		rep.StepTime = units.FormatDuration(o.StepTime)
	}
	var res []train.Result
	var err error
	if f.perProcess {
		var root bool
		res, root, err = trainPerProcess(ctx, g, f, o, &rep)
		if err != nil || !root {
			return err
		}
	} else {
		var conns metricsConns
		stopMetrics, err := startMetricsFlag(g, f.metrics, &conns)
		if err != nil {
			return err
		}
		defer stopMetrics()
		if f.metrics != "" {
			o.Observe = conns.add
			o.ObserveComm = conns.addComm
		}
		pr := newTrainProgress(g.stderr, f.quiet, o)
		o.Progress = pr.update
		res, err = train.Run(ctx, o)
		pr.done()
		if err != nil {
			return err
		}
	}
	rep.Results = res
	if f.out != "" {
		if err := writeTrainOutputs(f.out, rep); err != nil {
			return err
		}
	}
	if f.json {
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printTrainTable(g.stdout, rep)
	if f.out != "" {
		fmt.Fprintf(g.stdout, "\nplots and results.json in %s\n", f.out)
	}
	return nil
}

func printTrainTable(w io.Writer, rep trainReport) {
	fmt.Fprintf(w, "%d workers, model %s, partition %s, rails %s per link, congestion %s, %s allreduce\n", rep.Workers, rep.Model, rep.Partition, rep.Rails, rep.Congestion, rep.Allreduce)
	if rep.StepTime != "" {
		fmt.Fprintf(w, "emulated accelerator step %s: each worker's computation is padded by sleeping to that length\n", rep.StepTime)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "mode\tsteps\tfinal acc\t"
	if len(rep.Results) > 0 {
		for _, t := range rep.Results[0].Targets {
			head += fmt.Sprintf("to %s %%\t", strconv.FormatFloat(100*t.Accuracy, 'f', -1, 64))
		}
	}
	fmt.Fprintln(tw, head+"mean discard\tstep\twall\t")
	for _, r := range rep.Results {
		line := fmt.Sprintf("%s\t%d\t%.2f %%\t", r.Mode, r.Steps, 100*r.FinalAccuracy)
		for _, t := range r.Targets {
			if t.Time == nil {
				line += "not reached\t"
				continue
			}
			line += fmt.Sprintf("%.1f s (%d steps)\t", *t.Time, *t.Steps)
		}
		fmt.Fprintf(tw, "%s%.1f %%\t%.1f ms\t%.1f s\t\n", line, 100*r.MeanDiscardRate, 1000*r.MeanStep, r.Wall)
	}
	tw.Flush()
	var rel, lt *train.Result
	for i := range rep.Results {
		switch rep.Results[i].Mode {
		case train.Reliable:
			rel = &rep.Results[i]
		case train.LossTolerant:
			lt = &rep.Results[i]
		}
	}
	if rel != nil && lt != nil {
		fmt.Fprintf(w, "\nlosstolerant vs reliable: final accuracy %+.2f points", 100*(lt.FinalAccuracy-rel.FinalAccuracy))
		if rel.TimeToTarget != nil && lt.TimeToTarget != nil {
			fmt.Fprintf(w, ", target %.0f %% reached %.2fx sooner", 100*rel.TargetAccuracy, *rel.TimeToTarget / *lt.TimeToTarget)
		}
		fmt.Fprintf(w, ", %.2fx the time per step\n", lt.MeanStep/rel.MeanStep)
	}
}

func writeTrainOutputs(dir string, rep trainReport) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := plotTrainAccuracy(filepath.Join(dir, "accuracy.png"), rep.Results); err != nil {
		return err
	}
	return plotTrainDiscard(filepath.Join(dir, "discard.png"), rep.Results)
}

// trainProgress shows one bar per mode on a terminal, a line every 50
// steps otherwise.
type trainProgress struct {
	mu    sync.Mutex
	w     io.Writer
	quiet bool
	p     *mpb.Progress
	bars  map[train.Mode]*mpb.Bar
	last  train.Progress
}

func newTrainProgress(w io.Writer, quiet bool, o train.Options) *trainProgress {
	pr := &trainProgress{w: w, quiet: quiet, bars: map[train.Mode]*mpb.Bar{}}
	if quiet {
		return pr
	}
	if isTerminal(w) {
		pr.p = mpb.New(mpb.WithOutput(w), mpb.WithWidth(40), mpb.WithRefreshRate(150*time.Millisecond))
		for _, m := range o.Modes {
			m := m
			pr.bars[m] = pr.p.AddBar(int64(o.Steps),
				mpb.PrependDecorators(decor.Name(fmt.Sprintf("%-13s", m)), decor.CountersNoUnit(" %d/%d steps")),
				mpb.AppendDecorators(decor.Any(func(decor.Statistics) string {
					pr.mu.Lock()
					defer pr.mu.Unlock()
					if pr.last.Mode != m {
						return ""
					}
					return fmt.Sprintf("loss %.3f  discard %4.1f %%  %5.1f s", pr.last.Loss, 100*pr.last.DiscardRate, pr.last.Elapsed.Seconds())
				})))
		}
	} else {
		fmt.Fprintf(w, "train: %d workers, %d steps per mode, modes %v\n", o.Workers, o.Steps, o.Modes)
	}
	return pr
}

func (pr *trainProgress) update(p train.Progress) {
	if pr.quiet {
		return
	}
	pr.mu.Lock()
	pr.last = p
	pr.mu.Unlock()
	if bar := pr.bars[p.Mode]; bar != nil {
		bar.SetCurrent(int64(p.Step))
		return
	}
	if p.Step%50 == 0 || p.Step == p.Steps {
		fmt.Fprintf(pr.w, "  %s step %d/%d loss %.3f discard %.1f %% t=%.1fs\n", p.Mode, p.Step, p.Steps, p.Loss, 100*p.DiscardRate, p.Elapsed.Seconds())
	}
}

func (pr *trainProgress) done() {
	if pr.p == nil {
		return
	}
	for _, b := range pr.bars {
		if !b.Completed() {
			b.Abort(false)
		}
	}
	pr.p.Wait()
}

// trainPerProcess runs this process as one worker of a launched job
// (train.RunRank). It reports whether this is rank 0, the one that prints.
func trainPerProcess(ctx context.Context, g *globals, f *trainFlags, o train.Options, rep *trainReport) ([]train.Result, bool, error) {
	var finished atomic.Bool
	logger := slog.New(quietEndHandler{g.logger().Handler(), &finished})
	cfg := comm.Config{Logger: logger}
	cfg.Stage.Discard, cfg.Stage.FixedRate = o.Discard, o.DiscardRate
	cfg.Stage.Seed = o.Seed
	c, err := comm.Init(ctx, cfg)
	if err != nil {
		return nil, false, err
	}
	defer c.Close()
	stopMetrics, err := serveCommMetrics(g, c, f.metrics)
	if err != nil {
		return nil, false, err
	}
	defer stopMetrics()
	if f.workersSet && f.workers != c.Size() {
		return nil, false, usagef("--workers %d: the job has %d ranks (with --per-process every rank is a worker; leave --workers out)", f.workers, c.Size())
	}
	root := c.Rank() == 0
	o.Workers = c.Size()
	o.Logger = logger
	pr := newTrainProgress(g.stderr, f.quiet || !root, o)
	o.Progress = pr.update
	res, err := train.RunRank(ctx, c, o)
	pr.done()
	if err == nil {
		// Rank 0 evaluates its checkpoints last: the others wait for it
		// rather than leave it talking to closed connections. From here
		// the ranks close in any order (a failed barrier is still an
		// error; only the closing peers' warnings are dropped).
		finished.Store(true)
		err = c.Barrier(ctx)
	}
	rep.Workers = c.Size()
	rep.Allreduce = train.AllreduceTranspose
	rep.Rails, rep.Congestion = "the job's NICs", "off"
	if e := os.Getenv(comm.EnvEmu); e != "" {
		rep.Rails = e
	}
	if p, err := emu.ParsePattern(os.Getenv(comm.EnvEmuLoad)); err == nil && p.Kind != emu.PatternOff {
		rep.Congestion = p.String()
	}
	return res, root, err
}
