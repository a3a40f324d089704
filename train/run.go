package train

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/comm"
	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/internal/topo"
	"github.com/multirail/multirail/lossy"
	"github.com/multirail/multirail/lossy/discard"
)

// Mode is how gradients are exchanged.
type Mode string

// Modes.
const (
	Reliable     Mode = "reliable"     // every packet arrives
	LossTolerant Mode = "losstolerant" // stages with a controlled discard rate
)

// Defaults for the zero values of Options.
const (
	DefaultWorkers   = 4
	DefaultSteps     = 500
	DefaultBatch     = 32
	DefaultLR        = 0.1
	DefaultTarget    = 0.9
	DefaultEvalEvery = 2
	DefaultSyncEvery = 50
	DefaultRails     = "emu:150mbit/1ms,emu:50mbit/1ms"
	// DefaultQualitySmoothing is the weight of the newest loss in the
	// smoothed training loss whose change is a stage's quality.
	DefaultQualitySmoothing = 0.1
)

// DefaultTargets are the accuracies whose first checkpoints Result.Targets
// reports when Options.Targets is nil.
var DefaultTargets = []float64{0.88, 0.9}

// MaxStepTime bounds Options.StepTime.
const MaxStepTime = 10 * time.Second

// DefaultDiscard is the losstolerant mode's controller when
// Options.Discard is zero: the match rule (discard the share by which the
// link is slower than its recent baseline; docs/discard.md), chosen over
// the patent's on seeds and scenarios not reported (BENCHMARKS.md, issue
// 15). Its Initial and History are PatentDiscard's, so that
// --discard-opt rule=patent gives the patent preset.
var DefaultDiscard = discard.Recommended

// PatentDiscard is the JP7684261B2 preset, the default before issue 15:
// the history variant over 4 stages, starting from a rate of 0.1, with
// the discard package's other defaults.
var PatentDiscard = discard.Config{Rule: discard.RulePatent, Initial: 0.1, History: 4}

// The in-process allreduces of Options.Allreduce.
const (
	AllreduceTranspose = "transpose"
	AllreduceRing      = "ring"
)

// ErrConfig is wrapped by every error about Options, Congestion or an
// MLPConfig.
var ErrConfig = errors.New("train: invalid config")

// Congestion is the background load on every emulated rail: busy periods
// that take a fraction of the rail (drawn uniformly from [Min, Max]) alternate
// with idle ones, each of exponentially distributed length. With Phases the
// congestion comes and goes: calm phases of Calm without load alternate
// with congested phases of Congested in which the busy and idle periods
// run (emu.Pattern "phases"). The zero value is the default congested
// scenario; Off disables it.
type Congestion struct {
	Off  bool
	Busy time.Duration // mean busy period; 0 = 400ms
	Idle time.Duration // mean idle period; 0 = 200ms
	Min  float64       // 0 = 0.5
	Max  float64       // 0 = 0.9
	// Phases alternates calm and congested phases, Calm and Congested
	// long (0 = 3s each); the schedule starts at a point of its cycle
	// drawn from Options.Seed.
	Phases          bool
	Calm, Congested time.Duration
}

// pattern returns c as an emu.Pattern (c validated); a phases schedule
// starts at a point of its cycle drawn from seed.
func (c Congestion) pattern(seed uint64) emu.Pattern {
	switch {
	case c.Off:
		return emu.Pattern{Kind: emu.PatternOff}
	case c.Phases:
		return emu.Pattern{Kind: emu.PatternPhases, Busy: c.Busy, Idle: c.Idle, Min: c.Min, Max: c.Max, Calm: c.Calm, Congested: c.Congested,
			Seed: seed, OffsetFromSeed: true}
	}
	return emu.Pattern{Kind: emu.PatternBursty, Busy: c.Busy, Idle: c.Idle, Min: c.Min, Max: c.Max}
}

// validate returns c with its defaults filled in, or an error naming the
// field, its value and what is allowed.
func (c Congestion) validate() (Congestion, error) {
	if c.Busy == 0 {
		c.Busy = 400 * time.Millisecond
	}
	if c.Idle == 0 {
		c.Idle = 200 * time.Millisecond
	}
	if c.Min == 0 {
		c.Min = 0.5
	}
	if c.Max == 0 {
		c.Max = 0.9
	}
	switch {
	case c.Busy < time.Millisecond || c.Busy > time.Minute:
		return c, fmt.Errorf("%w: Congestion.Busy = %v out of range; allowed 1ms..1m (0 = 400ms)", ErrConfig, c.Busy)
	case c.Idle < time.Millisecond || c.Idle > time.Minute:
		return c, fmt.Errorf("%w: Congestion.Idle = %v out of range; allowed 1ms..1m (0 = 200ms)", ErrConfig, c.Idle)
	case !(c.Min > 0 && c.Min < 1):
		return c, fmt.Errorf("%w: Congestion.Min = %v out of range; allowed (0, 1) (0 = 0.5)", ErrConfig, c.Min)
	case !(c.Max >= c.Min && c.Max < 1):
		return c, fmt.Errorf("%w: Congestion.Max = %v out of range; allowed [Min = %v, 1) (0 = 0.9)", ErrConfig, c.Max, c.Min)
	}
	if c.Phases {
		if c.Calm == 0 {
			c.Calm = emu.DefaultCalm
		}
		if c.Congested == 0 {
			c.Congested = emu.DefaultCongested
		}
		for _, d := range []struct {
			name string
			v    time.Duration
		}{{"Calm", c.Calm}, {"Congested", c.Congested}} {
			if d.v < time.Millisecond || d.v > time.Hour {
				return c, fmt.Errorf("%w: Congestion.%s = %v out of range; allowed 1ms..1h (0 = 3s)", ErrConfig, d.name, d.v)
			}
		}
	}
	return c, nil
}

// Options configures Run. The zero value of every field means its default.
type Options struct {
	Workers int    // ranks, 2..16; 0 = 4
	Modes   []Mode // modes to run, in order; nil = reliable then losstolerant
	Steps   int    // SGD steps per mode, 1..100000; 0 = 500
	Batch   int    // samples per worker per step, 1..4096; 0 = 32
	LR      float64
	// Decay lowers the learning rate linearly to a tenth over the last
	// 40 % of the steps. Off (the default) it stays LR throughout, so that
	// no setting passes a target because the rate fell by step count.
	Decay bool
	// StepTime, when > 0, pads each worker's computation: after its
	// gradient a worker sleeps until StepTime after its step began, then
	// exchanges. It stands in for an accelerator's compute (a GPU step of
	// that length), against which the exchange is small in calm; this
	// machine's CPU computes the gradient within it. 0 = off; at most
	// MaxStepTime.
	StepTime time.Duration
	// Model is the network: ModelMLP ("mlp", the default) or ModelCNN
	// ("cnn").
	Model string
	MLP   MLPConfig
	CNN   CNNConfig
	// Rails are the emulated rails of every ring link (each link has its
	// own); only emu specs. nil = DefaultRails.
	Rails      []emu.Spec
	Congestion Congestion
	// Discard configures the losstolerant mode's controllers; the zero
	// value means DefaultDiscard.
	Discard discard.Config
	// DiscardRate, when > 0, pins the losstolerant mode's discard rate
	// (the controllers still run, for Stats): to compare the controller
	// with fixed rates. [0, 1); 0 = the controller's rate.
	DiscardRate float64
	// PhaseRates, when set, pins the losstolerant mode's discard rate by
	// phase of an emulated "phases" load (RunRank only: the
	// communicator's comm.Config.EmuLoad): an oracle that knows when the
	// congestion comes, to measure what a controller that may not discard
	// in calm phases could reach at best. Zero = off.
	PhaseRates PhaseRates
	// ErrorFeedback turns on error feedback in the losstolerant mode.
	ErrorFeedback bool
	// PacketFloats is the packet size in values; 0 = comm's default.
	PacketFloats int
	// SyncEvery re-synchronises the losstolerant mode's replicas every so
	// many steps and after the last: they average their parameters with
	// an allreduce that discards nothing (replicas drift apart where
	// gradient packets were missing). 0 = DefaultSyncEvery; -1 = never.
	SyncEvery int
	Target    float64 // test accuracy to reach (TimeToTarget), (0, 1); 0 = 0.9
	// Targets are the accuracies whose first checkpoints Result.Targets
	// reports, each in (0, 1); nil = DefaultTargets. Target is added when
	// missing.
	Targets []float64
	// EvalEvery is the steps between accuracy checkpoints; 0 = 2. A
	// checkpoint copies the parameters (of every replica in the
	// losstolerant mode, whose average is evaluated); they are evaluated
	// after the run, off the clock.
	EvalEvery int
	// QualitySmoothing is the weight of the newest minibatch loss in the
	// smoothed loss, (0, 1]; 0 = DefaultQualitySmoothing.
	QualitySmoothing float64
	Seed             uint64
	// Partition splits the training set across the workers; the zero
	// value is IID. The split is drawn from Seed.
	Partition Partition
	// Train and Test are the data; nil loads MNIST from MNISTDir.
	Train, Test *Dataset
	// Progress, if set, is called after every step of rank 0.
	Progress func(Progress)
	// Allreduce is how Run's in-process workers average gradients:
	// AllreduceTranspose (the default) runs every worker through a
	// communicator of its own (comm.NewLocal over o.Rails between every
	// pair of workers), exactly as RunRank does with one process per
	// worker: the reliable mode with the communicator's exact Allreduce,
	// the losstolerant one with its transpose allreduce, unbiased however
	// the data are split. AllreduceRing runs them in a ring of stage
	// connections instead (one link each way per worker), whose
	// loss-tolerant allreduce is biased where the workers' gradients
	// differ (docs/discard.md); kept for comparison. RunRank ignores it.
	Allreduce string
	// ObserveComm, if set, is handed rank 0's communicator of the
	// in-process transpose run when a mode starts; the returned func is
	// called when the mode ends. For metrics.
	ObserveComm func(c *comm.Comm) (done func())
	// Observe, if set, is handed every connection of the in-process ring
	// (rank i's to rank i+1, named "i") when a mode starts; the returned
	// func is called when the mode's ring closes. For metrics.
	Observe func(c *multirail.Conn, name string) (done func())
	Logger  *slog.Logger

	// memRate, when set, replaces the network by lossy.MemRing transports
	// discarding this fixed rate (tests).
	memRate *float64
}

// PhaseRates are the discard rates of Options.PhaseRates: Calm during the
// calm phases, Congested during the congested ones, each in (0, 1).
type PhaseRates struct {
	Calm      float64 `json:"calm"`
	Congested float64 `json:"congested"`
}

// IsZero reports whether r is off.
func (r PhaseRates) IsZero() bool { return r == PhaseRates{} }

// PhaseDiscard is the share of the packets discarded during the calm and
// during the congested phases of a phases load, each step counted in the
// phase in which its exchange began (by the clock of rank 0's worker,
// which starts with the load's schedule).
type PhaseDiscard struct {
	Calm           float64 `json:"calm"`
	Congested      float64 `json:"congested"`
	CalmSteps      int     `json:"calm_steps"`
	CongestedSteps int     `json:"congested_steps"`
	// CalmStep and CongestedStep are the mean times of rank 0's steps in
	// each phase, seconds (0 where none; when they were not timed).
	CalmStep      float64 `json:"calm_step_s"`
	CongestedStep float64 `json:"congested_step_s"`
}

// phaseDiscard sums count(s) = (dropped, sent) of every step s by calm[s],
// and averages durs[s] (the steps' times, seconds; nil: not timed).
func phaseDiscard(calm []bool, durs []float64, count func(s int) (float64, float64)) *PhaseDiscard {
	var pd PhaseDiscard
	var d, t, dur [2]float64
	for s, c := range calm {
		i := 1
		if c {
			i = 0
			pd.CalmSteps++
		} else {
			pd.CongestedSteps++
		}
		sd, st := count(s)
		d[i], t[i] = d[i]+sd, t[i]+st
		if durs != nil {
			dur[i] += durs[s]
		}
	}
	if pd.CalmSteps > 0 {
		pd.CalmStep = dur[0] / float64(pd.CalmSteps)
	}
	if pd.CongestedSteps > 0 {
		pd.CongestedStep = dur[1] / float64(pd.CongestedSteps)
	}
	if t[0] > 0 {
		pd.Calm = d[0] / t[0]
	}
	if t[1] > 0 {
		pd.Congested = d[1] / t[1]
	}
	return &pd
}

// Progress reports one step.
type Progress struct {
	Mode        Mode
	Step, Steps int
	Loss        float64
	DiscardRate float64 // fraction of this step's packets discarded, all ranks
	Elapsed     time.Duration
}

// validate returns o with its defaults filled in, or an error naming the
// first bad field, its value and what is allowed.
func (o Options) validate() (Options, error) {
	if o.Workers == 0 {
		o.Workers = DefaultWorkers
	}
	if o.Workers < 2 || o.Workers > 16 {
		return o, fmt.Errorf("%w: Workers = %d out of range; allowed 2..16", ErrConfig, o.Workers)
	}
	if o.Modes == nil {
		o.Modes = []Mode{Reliable, LossTolerant}
	}
	for _, m := range o.Modes {
		if m != Reliable && m != LossTolerant {
			return o, fmt.Errorf("%w: mode %q; allowed %q or %q", ErrConfig, m, Reliable, LossTolerant)
		}
	}
	if o.Steps == 0 {
		o.Steps = DefaultSteps
	}
	if o.Steps < 1 || o.Steps > 100000 {
		return o, fmt.Errorf("%w: Steps = %d out of range; allowed 1..100000", ErrConfig, o.Steps)
	}
	if o.Batch == 0 {
		o.Batch = DefaultBatch
	}
	if o.Batch < 1 || o.Batch > 4096 {
		return o, fmt.Errorf("%w: Batch = %d out of range; allowed 1..4096", ErrConfig, o.Batch)
	}
	if o.LR == 0 {
		o.LR = DefaultLR
	}
	if !(o.LR > 0 && o.LR <= 10) {
		return o, fmt.Errorf("%w: LR = %v out of range; allowed (0, 10]", ErrConfig, o.LR)
	}
	if o.Allreduce == "" {
		o.Allreduce = AllreduceTranspose
	}
	if o.Allreduce != AllreduceTranspose && o.Allreduce != AllreduceRing {
		return o, fmt.Errorf("%w: Allreduce = %q; allowed %q or %q", ErrConfig, o.Allreduce, AllreduceTranspose, AllreduceRing)
	}
	if o.Model == "" {
		o.Model = ModelMLP
	}
	if o.Model != ModelMLP && o.Model != ModelCNN {
		return o, fmt.Errorf("%w: Model = %q; allowed %q or %q", ErrConfig, o.Model, ModelMLP, ModelCNN)
	}
	if err := o.MLP.validate(); err != nil {
		return o, err
	}
	if err := o.CNN.validate(); err != nil {
		return o, err
	}
	if o.Rails == nil {
		specs, err := emu.ParseSpecs(DefaultRails)
		if err != nil {
			return o, err
		}
		o.Rails = specs
	}
	if len(o.Rails) == 0 || len(o.Rails) > 8 {
		return o, fmt.Errorf("%w: %d rails per link; allowed 1..8", ErrConfig, len(o.Rails))
	}
	for i, s := range o.Rails {
		if s.Kind != emu.KindEmu {
			return o, fmt.Errorf("%w: rail %d is %q; allowed: emu:RATE[/DELAY] rails only", ErrConfig, i, s)
		}
	}
	var err error
	if o.Congestion, err = o.Congestion.validate(); err != nil {
		return o, err
	}
	if o.Discard == (discard.Config{}) {
		o.Discard = DefaultDiscard
	}
	if o.Discard, err = o.Discard.Validate(); err != nil {
		return o, fmt.Errorf("%w: Discard: %w", ErrConfig, err)
	}
	if pr := o.PhaseRates; !pr.IsZero() && !(pr.Calm > 0 && pr.Calm < 1 && pr.Congested > 0 && pr.Congested < 1) {
		return o, fmt.Errorf("%w: PhaseRates = %v/%v out of range; allowed (0, 1) each", ErrConfig, pr.Calm, pr.Congested)
	}
	if !o.PhaseRates.IsZero() && o.DiscardRate > 0 {
		return o, fmt.Errorf("%w: PhaseRates with DiscardRate = %v; allowed one of them", ErrConfig, o.DiscardRate)
	}
	if !(o.DiscardRate >= 0 && o.DiscardRate < 1) {
		return o, fmt.Errorf("%w: DiscardRate = %v out of range; allowed [0, 1) (0 = the controller's)", ErrConfig, o.DiscardRate)
	}
	if o.PacketFloats < 0 || o.PacketFloats > 1<<20 {
		return o, fmt.Errorf("%w: PacketFloats = %d out of range; allowed 1..1048576 (0 = %d)", ErrConfig, o.PacketFloats, lossy.DefaultPacketFloats)
	}
	if o.Target == 0 {
		o.Target = DefaultTarget
	}
	if !(o.Target > 0 && o.Target < 1) {
		return o, fmt.Errorf("%w: Target = %v out of range; allowed (0, 1)", ErrConfig, o.Target)
	}
	if o.Targets == nil {
		o.Targets = DefaultTargets
	}
	o.Targets = append(slices.Clone(o.Targets), o.Target)
	slices.Sort(o.Targets)
	o.Targets = slices.Compact(o.Targets)
	for _, t := range o.Targets {
		if !(t > 0 && t < 1) {
			return o, fmt.Errorf("%w: Targets has %v; allowed (0, 1) each", ErrConfig, t)
		}
	}
	if o.StepTime < 0 || o.StepTime > MaxStepTime {
		return o, fmt.Errorf("%w: StepTime = %v out of range; allowed 0 (off)..%v", ErrConfig, o.StepTime, MaxStepTime)
	}
	if o.EvalEvery == 0 {
		o.EvalEvery = DefaultEvalEvery
	}
	if o.EvalEvery < 1 {
		return o, fmt.Errorf("%w: EvalEvery = %d out of range; allowed >= 1", ErrConfig, o.EvalEvery)
	}
	if o.SyncEvery == 0 {
		o.SyncEvery = DefaultSyncEvery
	}
	if o.SyncEvery < -1 || o.SyncEvery > 100000 {
		return o, fmt.Errorf("%w: SyncEvery = %d out of range; allowed -1 (never), 1..100000 (0 = %d)", ErrConfig, o.SyncEvery, DefaultSyncEvery)
	}
	if o.QualitySmoothing == 0 {
		o.QualitySmoothing = DefaultQualitySmoothing
	}
	if !(o.QualitySmoothing > 0 && o.QualitySmoothing <= 1) {
		return o, fmt.Errorf("%w: QualitySmoothing = %v out of range; allowed (0, 1]", ErrConfig, o.QualitySmoothing)
	}
	if err := o.Partition.validate(); err != nil {
		return o, err
	}
	if o.Partition.Kind == "" {
		o.Partition.Kind = PartitionIID
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// parts returns each worker's training samples (indices into o.Train)
// under o.Partition.
func (o Options) parts() ([][]int, error) {
	return o.Partition.Split(o.Train.Y, o.Workers, rand.New(rand.NewPCG(o.Seed, 0x70617274)))
}

// Point is one accuracy checkpoint: of the replicas' average in the
// losstolerant mode (they differ where packets were missing), of rank 0's
// model in the reliable one (they are identical).
type Point struct {
	Step     int     `json:"step"`
	Time     float64 `json:"time_s"`
	Accuracy float64 `json:"accuracy"`
}

// Result is one mode's run. TimeToTarget is nil when the target accuracy
// was not reached.
type Result struct {
	Mode           Mode     `json:"mode"`
	FinalAccuracy  float64  `json:"final_accuracy"`
	TimeToTarget   *float64 `json:"time_to_target_s"`
	StepsToTarget  *int     `json:"steps_to_target"`
	TargetAccuracy float64  `json:"target_accuracy"`
	// Targets is the first checkpoint at or above each of Options.Targets,
	// in ascending order of accuracy.
	Targets         []Reached `json:"targets"`
	Steps           int       `json:"steps"`
	MeanDiscardRate float64   `json:"mean_discard_rate"`
	Wall            float64   `json:"wall_s"` // training time, checkpoints excluded
	// MeanStep is the mean time of one step, seconds.
	MeanStep float64 `json:"mean_step_s"`
	// ReplicaSpread is the largest difference of a parameter between rank
	// 0 and any other rank at the end (replicas drift apart where packets
	// were missing; 0 in the reliable mode).
	ReplicaSpread float64   `json:"replica_spread"`
	Curve         []Point   `json:"curve"`
	DiscardRates  []float64 `json:"discard_rates"` // per step
	// PhaseDiscard splits the discarded share by phase of a phases load
	// (nil under any other load).
	PhaseDiscard *PhaseDiscard `json:"phase_discard,omitempty"`
	Losses       []float64     `json:"losses"` // rank 0's minibatch loss per step
	// Controller sums the decisions of the losstolerant mode's
	// controllers over all links.
	Controller *discard.Stats `json:"controller,omitempty"`
}

// Reached is when a run first reached an accuracy: nil times when it did
// not.
type Reached struct {
	Accuracy float64  `json:"accuracy"`
	Time     *float64 `json:"time_s"`
	Steps    *int     `json:"steps"`
}

// prepare validates o and loads MNIST unless o brings its data.
func (o Options) prepare() (Options, error) {
	o, err := o.validate()
	if err != nil {
		return o, err
	}
	if o.Train == nil || o.Test == nil {
		dir, err := MNISTDir()
		if err != nil {
			return o, err
		}
		tr, te, err := LoadMNIST(dir)
		if err != nil {
			return o, err
		}
		o.Train, o.Test = &tr, &te
	}
	return o, nil
}

// Run trains one model per mode, each from the same initial weights on the
// same data order and the same background-load schedule, and returns one
// Result per mode.
func Run(ctx context.Context, o Options) ([]Result, error) {
	o, err := o.prepare()
	if err != nil {
		return nil, err
	}
	if o.Allreduce == AllreduceTranspose && o.memRate == nil {
		return runLocal(ctx, o)
	}
	if !o.PhaseRates.IsZero() {
		return nil, fmt.Errorf("%w: PhaseRates needs the transpose allreduce (Allreduce %q) or one process per worker (RunRank)", ErrConfig, AllreduceTranspose)
	}
	var out []Result
	for _, m := range o.Modes {
		r, err := runMode(ctx, o, m)
		if err != nil {
			return out, fmt.Errorf("train: mode %s: %w", m, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// runLocal runs o's workers in this process, each with a communicator
// of its own over emulated rails (comm.NewLocal), through RunRank: the
// same training as one process per worker. It returns rank 0's results.
func runLocal(ctx context.Context, o Options) ([]Result, error) {
	load := o.Congestion.pattern(o.Seed)
	// Once training is over the communicators close one after the
	// other, and each would warn that its peers' connections ended.
	var closing atomic.Bool
	cfg := comm.Config{Emu: emu.FormatSpecs(o.Rails), Logger: slog.New(untilClosing{o.Logger.Handler(), &closing})}
	if load.Kind != emu.PatternOff {
		cfg.EmuLoad = load.String()
	}
	cfg.Transport.RailTimeout = railTimeout
	cfg.Stage.Discard, cfg.Stage.FixedRate, cfg.Stage.Seed = o.Discard, o.DiscardRate, o.Seed
	cfg.Stage.Logger = o.Logger
	comms, err := comm.NewLocal(ctx, o.Workers, cfg)
	if err != nil {
		return nil, fmt.Errorf("train: joining %d workers: %w", o.Workers, err)
	}
	defer func() {
		closing.Store(true)
		for _, c := range comms {
			_ = c.Close()
		}
	}()
	if o.ObserveComm != nil {
		defer o.ObserveComm(comms[0])()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([][]Result, o.Workers)
	errs := make([]error, o.Workers)
	var wg sync.WaitGroup
	for r := range o.Workers {
		wg.Go(func() {
			or := o
			if r != 0 {
				or.Progress = nil
			}
			results[r], errs[r] = RunRank(ctx, comms[r], or)
			if errs[r] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	// The first failure, not the cancellations it caused.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return results[0], err
		}
	}
	if err := errors.Join(errs...); err != nil {
		return results[0], err
	}
	return results[0], nil
}

// untilClosing passes records on until closing is set: what the
// communicators say as Run closes them is about their closing.
type untilClosing struct {
	slog.Handler
	closing *atomic.Bool
}

func (h untilClosing) Enabled(ctx context.Context, l slog.Level) bool {
	return !h.closing.Load() && h.Handler.Enabled(ctx, l)
}

func (h untilClosing) WithAttrs(a []slog.Attr) slog.Handler {
	return untilClosing{h.Handler.WithAttrs(a), h.closing}
}

func (h untilClosing) WithGroup(name string) slog.Handler {
	return untilClosing{h.Handler.WithGroup(name), h.closing}
}

// railTimeout is the RailTimeout of the training ring's connections.
const railTimeout = 5 * time.Second

// ring is the topology of one run: rank i's connection to rank i+1 (out)
// and from rank i-1 (in), over emulated rails.
type ring struct {
	out, in []*multirail.Conn
	links   []*emu.Link
	stages  []*lossy.StageConn
	top     *topo.Ring
}

func (r *ring) close() {
	for _, s := range r.stages {
		s.Close()
	}
	if r.top != nil {
		r.top.Close()
	}
}

// connect builds the ring: per link, the rails of o.Rails with their own
// background-load schedules, seeded by (Seed, link, rail).
func connect(ctx context.Context, o Options) (*ring, error) {
	horizon := 30 * time.Minute
	top, err := topo.NewRing(ctx, o.Workers, func(i int) topo.PairConfig {
		return topo.PairConfig{
			Rails: o.Rails,
			// A busy period may slow a rail to a tenth of its rate for
			// a second or more: that rail is congested, not failed, so
			// it gets a longer RailTimeout than the default 500 ms.
			Config: multirail.Config{Logger: o.Logger, RailTimeout: railTimeout},
			Loads: func(j int) []emu.Load {
				if o.Congestion.Off {
					return nil
				}
				rng := rand.New(rand.NewPCG(o.Seed^0x6c6f6164, uint64(i*64+j)))
				return o.Congestion.pattern(o.Seed).Loads(rng, j, horizon)
			},
			Name:          func(j int) string { return fmt.Sprintf("link%d-%s", i, o.Rails[j]) },
			Nominal:       true,
			CloseListener: true,
			Timeout:       time.Minute,
		}
	})
	if err != nil {
		return nil, err
	}
	r := &ring{out: top.Out, in: top.In, top: top}
	for _, p := range top.Pairs {
		for _, l := range p.Links {
			if l != nil {
				r.links = append(r.links, l)
			}
		}
	}
	return r, nil
}

// snapshot is one worker's parameters at a checkpoint, and the time
// since the start (rank 0's).
type snapshot struct {
	step   int
	t      time.Duration
	params []float32
}

// average returns the snapshots of rank 0 (all[0]) with every
// parameter replaced by its mean over the workers' snapshots of the same
// checkpoint. It reuses all[0]'s buffers.
func average(all [][]snapshot) []snapshot {
	out := all[0]
	for k := range out {
		for i := range out[k].params {
			sum := 0.0
			for _, w := range all {
				sum += float64(w[k].params[i])
			}
			out[k].params[i] = float32(sum / float64(len(all)))
		}
	}
	return out
}

func runMode(ctx context.Context, o Options, mode Mode) (Result, error) {
	N := o.Workers
	var err error
	top := &ring{}
	if o.memRate == nil {
		if top, err = connect(ctx, o); err != nil {
			return Result{}, err
		}
		if o.Observe != nil {
			for i, c := range top.out {
				defer o.Observe(c, strconv.Itoa(i))()
			}
		}
	}
	defer top.close()
	ts := make([]lossy.RingTransport, N)
	var outStages []*lossy.StageConn
	switch {
	case o.memRate != nil:
		rate := *o.memRate
		if mode == Reliable {
			rate = 0
		}
		ts = lossy.MemRing(N, rate, o.Seed)
	default:
		// Both modes run over StageConns, packet by packet; the reliable
		// one never discards.
		ins := make([]*lossy.StageConn, N)
		outStages = make([]*lossy.StageConn, N)
		for i := range N {
			scfg := lossy.StageConfig{Discard: o.Discard, Seed: o.Seed + uint64(i), Reliable: mode == Reliable, Logger: o.Logger}
			if mode == LossTolerant {
				scfg.FixedRate = o.DiscardRate
			}
			so, err := lossy.NewStageConn(top.out[i], scfg)
			if err != nil {
				return Result{}, err
			}
			scfg.Seed = 0
			si, err := lossy.NewStageConn(top.in[i], scfg)
			if err != nil {
				so.Close()
				return Result{}, err
			}
			outStages[i], ins[i] = so, si
			top.stages = append(top.stages, so, si)
		}
		for i := range N {
			ts[i] = lossy.StageLink{Next: outStages[i], Prev: ins[i]}
		}
	}
	models := make([]Model, N)
	for i := range N {
		if models[i], err = o.newModel(rand.New(rand.NewPCG(o.Seed, 0x6d6c70))); err != nil {
			return Result{}, err
		}
	}
	parts, err := o.parts()
	if err != nil {
		return Result{}, err
	}
	rings := make([]*lossy.Ring, N)
	for i := range N {
		if rings[i], err = lossy.NewRing(i, N, ts[i], lossy.Config{PacketFloats: o.PacketFloats, Mean: true, ErrorFeedback: o.ErrorFeedback}); err != nil {
			return Result{}, err
		}
	}
	// Per step and rank: packets discarded and packets of the stages sent.
	dropped := make([][]uint64, o.Steps)
	total := make([][]uint64, o.Steps)
	for s := range o.Steps {
		dropped[s], total[s] = make([]uint64, N), make([]uint64, N)
	}
	losses := make([]float64, o.Steps)
	snaps := make([][]snapshot, N)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The background load's schedule starts with the first step.
	start := time.Now()
	for _, l := range top.links {
		l.SetEpoch(start)
	}
	var calm []bool
	if o.Congestion.Phases && !o.Congestion.Off {
		calm = make([]bool, o.Steps)
	}
	var wg sync.WaitGroup
	errs := make([]error, N)
	for i := range N {
		wg.Go(func() {
			ex := ringExchanger{r: rings[i]}
			if outStages != nil {
				ex.out = outStages[i]
			}
			w := worker{o: o, mode: mode, rank: i, m: models[i], ex: ex, part: parts[i],
				losses: losses, dropped: dropped, total: total, start: start,
				record: i == 0 || mode == LossTolerant}
			if i == 0 {
				w.calm, w.load = calm, o.Congestion.pattern(o.Seed)
			}
			errs[i] = w.run(runCtx)
			snaps[i] = w.snaps
			if errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	for i, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return Result{}, fmt.Errorf("rank %d: %w", i, err)
		}
	}
	res := Result{Mode: mode, TargetAccuracy: o.Target, Steps: o.Steps, Wall: elapsed.Seconds(),
		MeanStep: elapsed.Seconds() / float64(o.Steps), Losses: losses, DiscardRates: make([]float64, o.Steps)}
	var d, t uint64
	for s := range o.Steps {
		var sd, st uint64
		for i := range N {
			sd += dropped[s][i]
			st += total[s][i]
		}
		if st > 0 {
			res.DiscardRates[s] = float64(sd) / float64(st)
		}
		d, t = d+sd, t+st
	}
	if t > 0 {
		res.MeanDiscardRate = float64(d) / float64(t)
	}
	if calm != nil {
		res.PhaseDiscard = phaseDiscard(calm, nil, func(s int) (float64, float64) {
			var sd, st uint64
			for i := range N {
				sd, st = sd+dropped[s][i], st+total[s][i]
			}
			return float64(sd), float64(st)
		})
	}
	if mode == LossTolerant {
		var cs discard.Stats
		for _, so := range outStages {
			c := so.Stats().Controller
			cs.Stages += c.Stages
			cs.Applied += c.Applied
			cs.Raised += c.Raised
			cs.Lowered += c.Lowered
			cs.Kept += c.Kept
			cs.Expired += c.Expired
			cs.Stale += c.Stale
			cs.Unknown += c.Unknown
			cs.Invalid += c.Invalid
			cs.Rate += c.Rate / float64(N)
		}
		res.Controller = &cs
	}
	p0 := models[0].Params()
	for _, m := range models[1:] {
		for k, v := range m.Params() {
			res.ReplicaSpread = math.Max(res.ReplicaSpread, math.Abs(v-p0[k]))
		}
	}
	avg := snaps[0]
	if mode == LossTolerant {
		avg = average(snaps)
	}
	if err := res.evaluate(models[0], avg, *o.Test, o.Targets, o.EvalEvery); err != nil {
		return res, err
	}
	return res, nil
}

// evaluate fills the accuracy curve, the times and steps to the targets
// and the final accuracy in from the checkpoints snaps, set one after
// the other into clones of m, on up to GOMAXPROCS goroutines. Every
// checkpoint is evaluated until the last target is reached, then one per
// 10 steps (evalEvery apart) and the last.
func (res *Result) evaluate(m Model, snaps []snapshot, test Dataset, targets []float64, evalEvery int) error {
	thin := max(1, 10/evalEvery)
	acc := make([]float64, len(snaps))
	done := make([]bool, len(snaps))
	res.Targets = make([]Reached, len(targets))
	for i, t := range targets {
		res.Targets[i].Accuracy = t
	}
	reachedAll := func() bool {
		return !slices.ContainsFunc(res.Targets, func(r Reached) bool { return r.Time == nil })
	}
	workers := max(1, runtime.GOMAXPROCS(0))
	evals := make([]Model, workers)
	for i := range evals {
		evals[i] = m.CloneModel()
	}
	var firstErr error
	for k := 0; k < len(snaps); {
		// The next batch: consecutive checkpoints while a target is
		// missing, thinned once all are reached.
		var batch []int
		for ; k < len(snaps) && len(batch) < workers; k++ {
			if reachedAll() && k%thin != 0 && k != len(snaps)-1 {
				continue
			}
			batch = append(batch, k)
		}
		errs := make([]error, len(batch))
		var wg sync.WaitGroup
		for bi, sk := range batch {
			wg.Go(func() {
				p := make([]float64, len(snaps[sk].params))
				for i, v := range snaps[sk].params {
					p[i] = float64(v)
				}
				if errs[bi] = evals[bi].SetParams(p); errs[bi] == nil {
					acc[sk] = evals[bi].Accuracy(test)
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil && firstErr == nil {
			firstErr = err
		}
		for _, sk := range batch {
			done[sk] = true
			sn := snaps[sk]
			for i := range res.Targets {
				if r := &res.Targets[i]; r.Time == nil && acc[sk] >= r.Accuracy {
					tt, st := sn.t.Seconds(), sn.step
					r.Time, r.Steps = &tt, &st
				}
			}
		}
	}
	if firstErr != nil {
		return firstErr
	}
	for k, sn := range snaps {
		if done[k] {
			res.Curve = append(res.Curve, Point{Step: sn.step, Time: sn.t.Seconds(), Accuracy: acc[k]})
		}
	}
	for _, r := range res.Targets {
		if r.Accuracy == res.TargetAccuracy {
			res.TimeToTarget, res.StepsToTarget = r.Time, r.Steps
		}
	}
	if len(res.Curve) > 0 {
		res.FinalAccuracy = res.Curve[len(res.Curve)-1].Accuracy
	}
	return nil
}

// exchanger is how a worker averages gradients with the others: over an
// in-process lossy.Ring (Run) or a communicator (RunRank).
type exchanger interface {
	// Allreduce averages grad over the workers in the mode's way.
	Allreduce(ctx context.Context, grad []float32) error
	// ReportQuality reports the quality of the last Allreduce's result.
	ReportQuality(ctx context.Context, q float64) error
	// Sync averages buf over the workers exactly (nothing discarded).
	Sync(ctx context.Context, buf []float32) error
	// Counts returns the packets this worker discarded and sent plus
	// discarded so far, when it knows them.
	Counts() (dropped, total uint64, ok bool)
}

// ringExchanger is Run's exchanger: a Ring over StageLinks (or MemRing),
// out the worker's outgoing StageConn (nil over MemRing).
type ringExchanger struct {
	r   *lossy.Ring
	out *lossy.StageConn
}

func (x ringExchanger) Allreduce(ctx context.Context, g []float32) error {
	return x.r.Allreduce(ctx, g)
}
func (x ringExchanger) ReportQuality(ctx context.Context, q float64) error {
	return x.r.ReportQuality(ctx, q)
}
func (x ringExchanger) Sync(ctx context.Context, buf []float32) error {
	return x.r.AllreduceWhole(ctx, buf)
}
func (x ringExchanger) Counts() (uint64, uint64, bool) {
	if x.out == nil {
		return 0, 0, false
	}
	st := x.out.Stats()
	return st.PacketsDropped, st.PacketsDropped + st.PacketsSent, true
}

// worker is one rank's training loop.
type worker struct {
	o       Options
	mode    Mode
	rank    int
	part    []int // the samples of o.Train this worker draws from
	m       Model
	ex      exchanger
	losses  []float64
	dropped [][]uint64
	total   [][]uint64
	start   time.Time
	// record keeps the parameters every EvalEvery steps in snaps (rank
	// 0's with their times).
	record bool
	snaps  []snapshot
	// calm, when set, gets whether each step's exchange began in a calm
	// phase of load (a phases load whose schedule starts at start), and
	// durs (when set) each step's time, seconds.
	calm []bool
	durs []float64
	load emu.Pattern
}

func (w *worker) run(ctx context.Context) error {
	o, m, r := w.o, w.m, w.ex
	rng := rand.New(rand.NewPCG(o.Seed, uint64(w.rank)+1))
	idx := make([]int, o.Batch)
	grad := make([]float32, m.NumParams())
	var ema float64
	var lastDropped, lastTotal uint64
	params := make([]float32, m.NumParams())
	w.checkpoint(0)
	var pad *time.Timer
	if o.StepTime > 0 {
		pad = time.NewTimer(time.Hour)
		defer pad.Stop()
	}
	for step := range o.Steps {
		began := time.Now()
		for j := range idx {
			idx[j] = w.part[rng.IntN(len(w.part))]
		}
		loss := m.Gradient(*o.Train, idx, grad)
		if pad != nil {
			// The emulated accelerator's compute: the step's
			// computation takes StepTime in all.
			if d := o.StepTime - time.Since(began); d > 0 {
				pad.Reset(d)
				select {
				case <-pad.C:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		if step == 0 {
			ema = loss
		} else {
			prev := ema
			ema += o.QualitySmoothing * (loss - ema)
			// The quality of the last exchange: the relative decrease of
			// the smoothed training loss since.
			if err := r.ReportQuality(ctx, (prev-ema)/math.Max(prev, 1e-9)); err != nil {
				return err
			}
		}
		if w.calm != nil {
			w.calm[step] = w.load.InCalm(time.Since(w.start))
		}
		if err := r.Allreduce(ctx, grad); err != nil {
			return err
		}
		lr := o.LR
		if o.Decay {
			lr = lrAt(o.LR, step, o.Steps)
		}
		m.Step(grad, lr)
		if w.mode == LossTolerant && o.SyncEvery > 0 && ((step+1)%o.SyncEvery == 0 || step+1 == o.Steps) {
			if err := w.sync(ctx, params); err != nil {
				return err
			}
		}
		rate := 0.0
		if d, t, ok := r.Counts(); ok {
			w.dropped[step][w.rank] = d - lastDropped
			w.total[step][w.rank] = t - lastTotal
			lastDropped, lastTotal = d, t
			if w.total[step][w.rank] > 0 {
				rate = float64(w.dropped[step][w.rank]) / float64(w.total[step][w.rank])
			}
		}
		if w.durs != nil {
			w.durs[step] = time.Since(began).Seconds()
		}
		if (step+1)%o.EvalEvery == 0 || step+1 == o.Steps {
			w.checkpoint(step + 1)
		}
		if w.rank == 0 {
			w.losses[step] = loss
			if o.Progress != nil {
				o.Progress(Progress{Mode: w.mode, Step: step + 1, Steps: o.Steps, Loss: loss, DiscardRate: rate, Elapsed: time.Since(w.start)})
			}
		}
	}
	return nil
}

// checkpoint keeps the model's parameters after step steps, when the
// worker records them.
func (w *worker) checkpoint(step int) {
	if !w.record {
		return
	}
	p := w.m.Params()
	sn := snapshot{step: step, t: time.Since(w.start), params: make([]float32, len(p))}
	for i, v := range p {
		sn.params[i] = float32(v)
	}
	w.snaps = append(w.snaps, sn)
}

// sync replaces the model's parameters by the mean over the ranks, sent
// whole (rounded to float32 like the gradients).
func (w *worker) sync(ctx context.Context, buf []float32) error {
	p := w.m.Params()
	for i, v := range p {
		buf[i] = float32(v)
	}
	if err := w.ex.Sync(ctx, buf); err != nil {
		return err
	}
	for i, v := range buf {
		p[i] = float64(v)
	}
	return w.m.SetParams(p)
}

// lrAt is the learning rate of step: lr for the first 60 % of the steps,
// then falling linearly to lr/10 at the last step, so that the final model
// does not depend on the noise of the last few minibatches.
func lrAt(lr float64, step, steps int) float64 {
	from := steps * 6 / 10
	if step < from || steps-1 <= from {
		return lr
	}
	f := float64(step-from) / float64(steps-1-from)
	return lr * (1 - 0.9*f)
}
