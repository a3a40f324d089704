package qlearn

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/multirail/multirail/sched"
)

// Registry names of the two presets.
const (
	// NamePatent is the preset that follows CN101833479A as reconstructed
	// in docs/scheduler.md.
	NamePatent = "qlearn-patent"
	// Name is the improved preset.
	Name = "qlearn"
)

// Preset selects the algorithm.
type Preset int

const (
	// Improved is the improved preset ("qlearn"): one value table per rail
	// learned from each segment's own queueing delay, decaying
	// epsilon-greedy exploration, and never waiting on a full queue while
	// another rail has room.
	Improved Preset = iota
	// Patent is the preset of CN101833479A ("qlearn-patent"): one Q table
	// per pair of rails, greedy on their sum, SARSA update with the reward
	// 1/(wait_time+1) - 4/k, waiting while the chosen queue is full.
	Patent
)

func (p Preset) String() string {
	switch p {
	case Improved:
		return Name
	case Patent:
		return NamePatent
	}
	return fmt.Sprintf("Preset(%d)", int(p))
}

// Config holds every constant of both presets. The zero value of a field
// means the preset's default (see Defaults); fields for which 0 is a
// meaningful value are pointers, nil meaning the default (set them with F).
// Ranges are checked when a scheduler is built; an out-of-range field gives
// an error naming the preset, the field, its value and the range.
type Config struct {
	// K is the number of states per rail (levels 0..K-1). Patent range
	// 8..32, which the patent preset enforces; the improved preset accepts
	// 2..64. Default 16.
	K int
	// Beta is the learning rate, in [0,1] (the patent's range). Default
	// 0.1 for both presets.
	Beta *float64
	// Gamma is the discount factor, in [0,1] (the patent's range). Default:
	// 0.8 (patent), 0 (improved: a segment's delay does not depend on later
	// decisions once it is queued; see docs/scheduler.md).
	Gamma *float64
	// QueueFactor multiplies queue_interval = ceil(queue_max/k) (the patent
	// also names the number of rails m as an input of that formula without
	// the formula surviving; this factor stands in for it). In (0, 64].
	// Default 1. Patent preset only.
	QueueFactor float64
	// Penalty is the numerator of the reward's constant term:
	// r = 1/(wait_time+1) - Penalty/k. The patent has 4. In [0, 64].
	// Patent preset only.
	Penalty *float64
	// RandomTies breaks ties between equally valued rails with the seeded
	// random source instead of taking the lowest index.
	RandomTies bool
	// Epsilon is the initial exploration probability of the improved
	// preset, in [0,1]. Default 0.02.
	Epsilon *float64
	// EpsilonMin is the floor the exploration probability decays to, in
	// [0, Epsilon]. It keeps the values of rarely used rails fresh when
	// load moves. Default 0.002.
	EpsilonMin *float64
	// EpsilonDecay is the number of decisions over which the exploration
	// probability halves: eps(t) = max(EpsilonMin, Epsilon*D/(D+t)). In
	// [1, 1e9]. Default 1000.
	EpsilonDecay float64
	// WaitFactor decides when the improved preset waits for a full rail
	// instead of using one with room: only when the full rail's expected
	// delay times WaitFactor is below that of every rail with room
	// (waiting blocks the sender, which delays the segments behind too).
	// 0 never waits while a rail has room. In [0, 1e6]. Default 2.
	WaitFactor *float64
	// OutlierFactor bounds what one delay sample teaches the improved
	// preset: a sample above OutlierFactor times the current value of its
	// entry counts as that much. A process descheduled for a few
	// milliseconds makes the one segment it was waiting for look hundreds
	// of times slower than its rail is; taken whole, that sample drove a
	// rail's value above a slower rail's for thousands of decisions
	// (exploration re-tries a rail rarely), while a rail that really slows
	// down still raises its value by a factor 1 + Beta x (OutlierFactor -
	// 1) per sample. In [1, 1e9]. Default 4.
	OutlierFactor float64
	// IdleProbe is, in seconds, how stale a rail's value must be before
	// the improved preset sends it a probe while the chosen rail's queue is
	// empty. Exploration (Epsilon) only happens while the chosen rail has
	// a queue: a segment that would leave an idle rail at once can only
	// arrive later elsewhere, and small messages sent alone (request and
	// response) would pay that in their tail latency. A rail not sampled
	// for IdleProbe seconds gets one segment instead, at most one per
	// IdleProbe, so that a rail that got faster is found even when the
	// traffic never queues. In [0, 1e6]; 0 never probes. Default 5.
	IdleProbe *float64
	// SmallProbe is IdleProbe for segments of at most SmallProbeBytes: a
	// small segment costs microseconds more on a slower rail, so it may
	// probe a rail whose value is this stale (seconds) while the chosen
	// rail's queue is empty. A probe's delay, when lower, replaces the
	// rail's stale value instead of moving it by Beta: a value learned while the
	// process started (the first messages of a connection wait for the
	// peer to get going, hundreds of microseconds) otherwise kept a fast
	// rail out of the small messages for good (4-host lab, 2 ranks,
	// 8-byte allreduce: 4 runs in 20 settled on the 50 Mbit/s rail, where
	// an exchange takes 43 us against 23). In [0, 1e6]; 0 never probes
	// sooner than IdleProbe. Default 0.02.
	SmallProbe *float64
	// AckRide is how much slower (by its value) a rail may look and still
	// get a small segment (at most SmallProbeBytes) because an
	// acknowledgement of the peer's frames is due on it
	// (sched.RailState.AckDue; improved preset). The segment then carries
	// that acknowledgement, and the kernel's TCP ACK of those frames, at
	// no cost, and the two peers of an exchange keep to one rail. Sent
	// elsewhere, each side's small messages went one way on a rail and
	// the other's came back on another, every data packet drew a TCP ACK
	// of its own (4-host lab, 2 ranks, 8-byte allreduce: 40 % more
	// packets, 21 us an exchange against 16 with AckRide 2; BENCHMARKS.md).
	// In [0, 1e6]; 0 sends small segments by their values alone.
	// Default 2.
	AckRide *float64
	// History is the capacity of each rail's record of queued decisions
	// (improved preset), rounded up to a power of two; twice as many
	// records of segments in flight are kept. It should be at least the
	// caller's queue depth; when more are outstanding, the oldest records
	// are dropped and those segments teach nothing. In [1, 65536].
	// Default 64.
	History int
}

// F returns a pointer to x, for the pointer fields of Config.
func F(x float64) *float64 { return &x }

// ErrConfig is returned (wrapped) for an invalid Config. It is
// sched.ErrConfig, so callers of sched.New need only test for that.
var ErrConfig = sched.ErrConfig

// params is a Config with every default filled in.
type params struct {
	k                     int
	beta, gamma           float64
	queueFactor, penalty  float64
	randomTies            bool
	waitFactor            float64
	outlier               float64
	eps, epsMin, epsDecay float64
	idleProbe             int64 // ns
	smallProbe            int64 // ns
	ackRide               float64
	history               int
}

// Defaults returns the preset's defaults as a Config with every field set.
func Defaults(p Preset) Config {
	c := Config{K: 16, QueueFactor: 1, Penalty: F(4), Epsilon: F(0.02), EpsilonMin: F(0.002),
		EpsilonDecay: 1000, History: 64, WaitFactor: F(2), OutlierFactor: 4, IdleProbe: F(5), SmallProbe: F(0.02),
		AckRide: F(2)}
	if p == Patent {
		c.Beta, c.Gamma = F(0.1), F(0.8)
	} else {
		c.Beta, c.Gamma = F(0.1), F(0)
	}
	return c
}

func deref(p *float64, def *float64) float64 {
	if p != nil {
		return *p
	}
	return *def
}

// validate fills the defaults of preset p in and checks the result; the
// error names the preset, the field, its value and the range.
func (c Config) validate(p Preset) (params, error) {
	d := Defaults(p)
	out := params{
		k: c.K, beta: deref(c.Beta, d.Beta), queueFactor: c.QueueFactor,
		gamma: deref(c.Gamma, d.Gamma), penalty: deref(c.Penalty, d.Penalty),
		randomTies: c.RandomTies, waitFactor: deref(c.WaitFactor, d.WaitFactor),
		eps: deref(c.Epsilon, d.Epsilon), epsMin: deref(c.EpsilonMin, d.EpsilonMin),
		epsDecay: c.EpsilonDecay, history: c.History, outlier: c.OutlierFactor,
	}
	probe := deref(c.IdleProbe, d.IdleProbe)
	if !in(probe, 0, 1e6) {
		return out, fmt.Errorf("%w: %s: IdleProbe = %v, need 0..1e6 seconds", ErrConfig, p, probe)
	}
	out.idleProbe = int64(probe * 1e9)
	small := deref(c.SmallProbe, d.SmallProbe)
	if !in(small, 0, 1e6) {
		return out, fmt.Errorf("%w: %s: SmallProbe = %v, need 0..1e6 seconds", ErrConfig, p, small)
	}
	out.smallProbe = int64(small * 1e9)
	out.ackRide = deref(c.AckRide, d.AckRide)
	if !in(out.ackRide, 0, 1e6) {
		return out, fmt.Errorf("%w: %s: AckRide = %v, need 0..1e6", ErrConfig, p, out.ackRide)
	}
	if out.outlier == 0 {
		out.outlier = d.OutlierFactor
	}
	if out.k == 0 {
		out.k = d.K
	}
	if out.queueFactor == 0 {
		out.queueFactor = d.QueueFactor
	}
	if out.epsDecay == 0 {
		out.epsDecay = d.EpsilonDecay
	}
	if out.history == 0 {
		out.history = d.History
	}
	kmin, kmax := 2, 64
	if p == Patent {
		kmin, kmax = 8, 32
	}
	switch {
	case out.k < kmin || out.k > kmax:
		return out, fmt.Errorf("%w: %s: K = %d, need %d..%d", ErrConfig, p, out.k, kmin, kmax)
	case !in(out.beta, 0, 1):
		return out, fmt.Errorf("%w: %s: Beta = %v, need 0..1", ErrConfig, p, out.beta)
	case !in(out.gamma, 0, 1):
		return out, fmt.Errorf("%w: %s: Gamma = %v, need 0..1", ErrConfig, p, out.gamma)
	case !in(out.queueFactor, 0, 64) || out.queueFactor == 0:
		return out, fmt.Errorf("%w: %s: QueueFactor = %v, need > 0 and <= 64", ErrConfig, p, out.queueFactor)
	case !in(out.penalty, 0, 64):
		return out, fmt.Errorf("%w: %s: Penalty = %v, need 0..64", ErrConfig, p, out.penalty)
	case !in(out.eps, 0, 1):
		return out, fmt.Errorf("%w: %s: Epsilon = %v, need 0..1", ErrConfig, p, out.eps)
	case !in(out.epsMin, 0, out.eps):
		return out, fmt.Errorf("%w: %s: EpsilonMin = %v, need 0..Epsilon (%v)", ErrConfig, p, out.epsMin, out.eps)
	case !in(out.epsDecay, 1, 1e9):
		return out, fmt.Errorf("%w: %s: EpsilonDecay = %v, need 1..1e9 decisions", ErrConfig, p, out.epsDecay)
	case !in(out.waitFactor, 0, 1e6):
		return out, fmt.Errorf("%w: %s: WaitFactor = %v, need 0..1e6", ErrConfig, p, out.waitFactor)
	case !in(out.outlier, 1, 1e9):
		return out, fmt.Errorf("%w: %s: OutlierFactor = %v, need 1..1e9", ErrConfig, p, out.outlier)
	case out.history < 1 || out.history > 65536:
		return out, fmt.Errorf("%w: %s: History = %d, need 1..65536", ErrConfig, p, out.history)
	}
	return out, nil
}

func in(x, lo, hi float64) bool { return x >= lo && x <= hi } // false for NaN

// optionNames lists the keys ParseOptions accepts.
const optionNames = "k, beta, gamma, queue-factor, penalty, random-ties, epsilon, epsilon-min, epsilon-decay, wait-factor, outlier-factor, idle-probe, small-probe, ack-ride, history"

// ParseOptions parses "key=value,key=value" (keys: k, beta, gamma,
// queue-factor, penalty, random-ties, epsilon, epsilon-min, epsilon-decay,
// wait-factor, outlier-factor, idle-probe, small-probe, ack-ride, history) into a Config. It checks syntax only; ranges are checked when a
// scheduler is built (New).
func ParseOptions(s string) (Config, error) {
	c, err := parseOptions(s)
	if err != nil {
		return c, fmt.Errorf("qlearn: %w", err)
	}
	return c, nil
}

// parseOptions is ParseOptions with errors that do not name the package
// (fromOptions names the preset instead).
func parseOptions(s string) (Config, error) {
	var c Config
	s = strings.TrimSpace(s)
	if s == "" {
		return c, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return c, fmt.Errorf("scheduler option %q: want key=value (keys: %s)", kv, optionNames)
		}
		k = strings.ToLower(strings.TrimSpace(k))
		v = strings.TrimSpace(v)
		if k == "k" || k == "history" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return c, fmt.Errorf("scheduler option %s=%q: want an integer", k, v)
			}
			if k == "k" {
				c.K = n
			} else {
				c.History = n
			}
			continue
		}
		if k == "random-ties" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return c, fmt.Errorf("scheduler option %s=%q: want true or false", k, v)
			}
			c.RandomTies = b
			continue
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) {
			return c, fmt.Errorf("scheduler option %s=%q: want a number", k, v)
		}
		switch k {
		case "beta":
			c.Beta = F(x)
		case "gamma":
			c.Gamma = F(x)
		case "queue-factor":
			c.QueueFactor = x
		case "penalty":
			c.Penalty = F(x)
		case "epsilon":
			c.Epsilon = F(x)
		case "epsilon-min":
			c.EpsilonMin = F(x)
		case "epsilon-decay":
			c.EpsilonDecay = x
		case "wait-factor":
			c.WaitFactor = F(x)
		case "outlier-factor":
			c.OutlierFactor = x
		case "idle-probe":
			c.IdleProbe = F(x)
		case "small-probe":
			c.SmallProbe = F(x)
		case "ack-ride":
			c.AckRide = F(x)
		default:
			return c, fmt.Errorf("scheduler option %q: unknown key (keys: %s)", k, optionNames)
		}
	}
	return c, nil
}

// New builds a scheduler of preset p with the constants in qc. base carries
// the number of rails, the segment size and the random source, as for
// sched.New.
func New(p Preset, base sched.Config, qc Config) (sched.Scheduler, error) {
	if err := base.Validate(); err != nil {
		return nil, err
	}
	prm, err := qc.validate(p)
	if err != nil {
		return nil, err
	}
	switch p {
	case Patent:
		return newPatent(base, prm), nil
	case Improved:
		return newImproved(base, prm), nil
	}
	return nil, fmt.Errorf("%w: unknown preset %d", ErrConfig, int(p))
}

// fromOptions builds preset p with the constants in base.Options.
func fromOptions(p Preset, base sched.Config) (sched.Scheduler, error) {
	qc, err := parseOptions(base.Options)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrConfig, p, err)
	}
	return New(p, base, qc)
}

// Factory returns a sched.Factory building preset p with the constants in
// qc, for callers that configure the transport with custom constants.
func Factory(p Preset, qc Config) sched.Factory {
	return func(base sched.Config) (sched.Scheduler, error) { return New(p, base, qc) }
}

func init() {
	sched.Register(NamePatent, func(cfg sched.Config) (sched.Scheduler, error) {
		return fromOptions(Patent, cfg)
	})
	sched.Register(Name, func(cfg sched.Config) (sched.Scheduler, error) {
		return fromOptions(Improved, cfg)
	})
}
