package sim

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/multirail/multirail/internal/wire"
	"github.com/multirail/multirail/sched"
)

// Defaults for the zero values of Scenario fields.
const (
	DefaultSegmentSize = 64 << 10 // as multirail.DefaultFrameSize: a simulated segment is a frame
	DefaultQueueDepth  = 16       // as multirail.DefaultQueueDepth
	DefaultEagerLimit  = 16 << 10 // as multirail.DefaultEagerLimit
	// DefaultCap is the virtual-time limit of a run of finite traffic
	// (allreduce, or a message count) whose Duration is 0.
	DefaultCap = time.Hour
	// MaxDuration bounds Scenario.Duration.
	MaxDuration = 24 * time.Hour
	// MaxRails bounds the rails of one sender (as multirail.MaxRails).
	MaxRails = 64
	// MaxRanks bounds Traffic.Ranks.
	MaxRanks = 1 << 16
	// MinDispatchInterval and MaxDispatchInterval bound a non-zero
	// Scenario.DispatchInterval (the patent's timer range, as the live
	// transport).
	MinDispatchInterval = 10 * time.Millisecond
	MaxDispatchInterval = time.Second
	// MinLoadTime bounds the period of onoff loads and the mean gap and
	// burst length of poisson loads from below: a transmission costs the
	// simulator work for every load change it spans.
	MinLoadTime = 100 * time.Microsecond
)

// HeaderSize is the number of bytes on the wire before each segment's
// payload (the live transport's DATA header). The live transport sends a
// message of at most wire.MaxSmallPayload bytes as one SMALL frame, whose
// header is 28 bytes shorter and may carry an ACK; the simulator charges
// every segment a DATA header.
const HeaderSize = wire.DataHeaderSize

// Traffic kinds.
const (
	KindBulk      = "bulk"
	KindMixed     = "mixed"
	KindReqResp   = "reqresp"
	KindAllreduce = "allreduce"
)

// Load kinds.
const (
	LoadStep    = "step"
	LoadOnOff   = "onoff"
	LoadPoisson = "poisson"
	LoadTrace   = "trace"
)

var (
	trafficKinds = []string{KindBulk, KindMixed, KindReqResp, KindAllreduce}
	loadKinds    = []string{LoadStep, LoadOnOff, LoadPoisson, LoadTrace}
)

// Scenario is one simulated setup: rails, their background load, traffic
// and the schedulers to compare. The zero value of most fields means the
// default; Validate says what is allowed.
type Scenario struct {
	// Name names the scenario in results.
	Name string
	// Duration is the virtual length of the run. For finite traffic
	// (allreduce, or Traffic.Count > 0) it is a limit, 0 meaning
	// DefaultCap; otherwise it is required.
	Duration time.Duration
	// Seed seeds all randomness: traffic, background-load bursts, the
	// per-rank variation of allreduce and the schedulers.
	Seed uint64
	// SegmentSize is the largest segment payload in bytes; 0 means 64 KiB.
	SegmentSize int
	// QueueDepth is each rail's send-queue capacity in segments; 0 means 16.
	QueueDepth int
	// EagerLimit is the largest message that bypasses the one-at-a-time
	// queueing of large messages (the live transport's eager sends); 0
	// means min(16 KiB, SegmentSize), negative turns eager sends off.
	EagerLimit int
	// PlanMin is the smallest large message the planner splits over the
	// rails when the scheduler leaves large messages to it (sched.Planning,
	// as the live transport's Config.PlanMin): 0 means 2 x SegmentSize,
	// negative turns planning off.
	PlanMin int
	// DispatchInterval, when > 0, drains the send queues only every
	// DispatchInterval (the patent's dispatch timer); 0 drains them
	// continuously like the live transport's writers.
	DispatchInterval time.Duration
	// KnownBandwidths gives the schedulers each rail's configured rate as
	// RailState.NominalBps. Otherwise NominalBps is 0 and only "weighted"
	// learns the rates (through sched.Config.Bandwidths).
	KnownBandwidths bool
	// SeriesBin is the width of the time bins of Result.Series; 0 chooses
	// one (Duration/100, or 1 ms for finite traffic), widened as needed to
	// keep at most MaxBins bins.
	SeriesBin time.Duration
	// Rails are the sender's rails (for allreduce, the template of every
	// rank's rails).
	Rails []Rail
	// Traffic is what is sent.
	Traffic Traffic
	// Schedulers are the registry names to run; nil means all.
	Schedulers []string
	// SchedOptions are per-scheduler constants ("sched_options" in a file),
	// by registry name, passed as sched.Config.Options: e.g.
	// {"qlearn": "k=16,beta=0.2"}. Schedulers not named get defaults.
	SchedOptions map[string]string
}

// Rail is one simulated network path: a server of RateBps bits/s minus
// background load, a send queue in front of it and Delay of propagation
// after it.
type Rail struct {
	Name    string
	RateBps float64
	Delay   time.Duration
	// Load is the background load: the fractions of all entries in force
	// at a time add up (clamped to [0,1]); the step entries of a rail
	// together form one step function (a later step replaces an earlier).
	Load []Load
}

// Load is one background-load profile of a rail: a fraction of the rail's
// capacity taken away over time.
type Load struct {
	// Kind is LoadStep, LoadOnOff, LoadPoisson or LoadTrace.
	Kind string
	// Fraction is the capacity taken away (step: from At on; onoff and
	// poisson: while on), in [0,1].
	Fraction float64
	// At is the time of a step.
	At time.Duration
	// Period, Duty and Start shape onoff: on for Duty*Period at the start
	// of every Period, counting from Start (off before Start).
	Period time.Duration
	Duty   float64
	Start  time.Duration
	// Gap and Length shape poisson: bursts of exponentially distributed
	// length (mean Length) separated by exponentially distributed gaps
	// (mean Gap), drawn from the scenario's seed; none before Start.
	Gap, Length time.Duration
	// File is a trace file (lines "time_s fraction"), read by LoadScenario
	// relative to the scenario file; Points are its parsed contents (the
	// fraction of a point holds until the next point).
	File   string
	Points []TracePoint
}

// TracePoint is one line of a load trace: from At on, Fraction is taken.
type TracePoint struct {
	At       time.Duration
	Fraction float64
}

// SizeWeight is one message size of mixed traffic with its relative
// frequency.
type SizeWeight struct {
	Size   int64
	Weight float64
}

// Traffic describes the messages of a scenario. Which fields apply depends
// on Kind; the others must be zero.
type Traffic struct {
	// Kind is KindBulk, KindMixed, KindReqResp or KindAllreduce.
	Kind string
	// Size is the message size of bulk (0: 1 MiB) and the vector size per
	// rank of allreduce (0: Ranks*SegmentSize, so that each chunk is one
	// segment); each allreduce chunk is Size/Ranks bytes.
	Size int64
	// Window is the number of messages (bulk, back-to-back mixed) or
	// requests (reqresp) outstanding; 0 means max(4, min(256, 8MiB/size))
	// for bulk and mixed (as the live benchmark), 1 for reqresp.
	Window int
	// Count, when > 0, ends the traffic after Count messages (bulk,
	// mixed) or requests (reqresp); the run then ends when all completed.
	Count int64
	// Sizes are the message sizes of mixed traffic.
	Sizes []SizeWeight
	// RateBps is mixed traffic's offered load in payload bits/s: Poisson
	// arrivals. Load is the same as a fraction of the sum of the rails'
	// rates. With both 0 mixed traffic is back-to-back under Window.
	RateBps float64
	Load    float64
	// Request and Response are the sizes of reqresp's messages (0: 4 KiB
	// and 1 MiB). ReverseRails carry the responses, scheduled by the
	// responder's own scheduler; nil means the Rails without their load.
	Request, Response int64
	ReverseRails      []Rail
	// Ranks (>= 2) and Iterations (0: 1) of allreduce. Each rank sends to
	// its successor over its own rails: RailsMin..RailsMax (0: all) of the
	// template Rails, drawn per rank, each rate scaled by a factor drawn
	// from [1-RateJitter, 1+RateJitter].
	Ranks              int
	Iterations         int
	RailsMin, RailsMax int
	RateJitter         float64
}

// Error is an invalid field of a Scenario. Field is its path, like
// "rails[1].delay" or "traffic.kind".
type Error struct {
	Field string
	Msg   string
}

func (e *Error) Error() string { return ErrScenario.Error() + ": " + e.reason() }

// reason is the error without the package's prefix, as parse errors
// ("FILE:LINE: reason") show it.
func (e *Error) reason() string { return e.Field + ": " + e.Msg }

// ErrScenario is wrapped by every error of ParseScenario, LoadScenario and
// Validate about the scenario's contents.
var ErrScenario = errors.New("sim: invalid scenario")

func (e *Error) Unwrap() error { return ErrScenario }

func fieldErr(field, format string, args ...any) error {
	return &Error{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// finite reports whether the traffic ends by itself.
func (sc *Scenario) finite() bool {
	return sc.Traffic.Kind == KindAllreduce || sc.Traffic.Count > 0
}

// Validate checks the scenario and returns an *Error naming the first bad
// field, its value and what is allowed.
func (sc *Scenario) Validate() error {
	if sc.Duration < 0 || sc.Duration > MaxDuration {
		return fieldErr("duration", "%v is out of range; allowed 0..%v", sc.Duration, MaxDuration)
	}
	if sc.SegmentSize != 0 && (sc.SegmentSize < wire.MinSegmentSize || sc.SegmentSize > wire.MaxSegmentSize) {
		return fieldErr("segment_size", "%d is out of range; allowed %d..%d bytes", sc.SegmentSize, wire.MinSegmentSize, wire.MaxSegmentSize)
	}
	if sc.QueueDepth < 0 || sc.QueueDepth > 65536 {
		return fieldErr("queue_depth", "%d is out of range; allowed 1..65536 segments", sc.QueueDepth)
	}
	seg := cmpOr(sc.SegmentSize, DefaultSegmentSize)
	if sc.EagerLimit > seg {
		return fieldErr("eager_limit", "%d is larger than the segment size %d; allowed <= segment_size (negative turns eager sends off)", sc.EagerLimit, seg)
	}
	if d := sc.DispatchInterval; d != 0 && (d < MinDispatchInterval || d > MaxDispatchInterval) {
		return fieldErr("dispatch_interval", "%v is out of range; allowed 0 (continuous) or %v..%v", d, MinDispatchInterval, MaxDispatchInterval)
	}
	if sc.SeriesBin < 0 || (sc.SeriesBin > 0 && sc.SeriesBin < time.Microsecond) {
		return fieldErr("series_bin", "%v is out of range; allowed 0 (automatic) or >= 1us", sc.SeriesBin)
	}
	if err := validateRails("rails", sc.Rails); err != nil {
		return err
	}
	names := sched.Names()
	for i, n := range sc.Schedulers {
		if !slices.Contains(names, n) {
			return fieldErr(fmt.Sprintf("schedulers[%d]", i), "unknown scheduler %q; allowed: %s", n, strings.Join(names, ", "))
		}
		if slices.Contains(sc.Schedulers[:i], n) {
			return fieldErr(fmt.Sprintf("schedulers[%d]", i), "%q is listed twice", n)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(sc.SchedOptions)) {
		path := "sched_options." + n
		if !slices.Contains(names, n) {
			return fieldErr(path, "unknown scheduler %q; allowed: %s", n, strings.Join(names, ", "))
		}
		m := max(len(sc.Rails), 1)
		ones := make([]float64, m)
		for i := range ones {
			ones[i] = 1
		}
		if _, err := sched.New(n, sched.Config{Rails: m, Bandwidths: ones, Options: sc.SchedOptions[n]}); err != nil {
			return fieldErr(path, "%q: %v", sc.SchedOptions[n], err)
		}
	}
	if err := sc.validateTraffic(); err != nil {
		return err
	}
	if sc.Duration == 0 && !sc.finite() {
		return fieldErr("duration", "missing; required unless the traffic is finite (allreduce, or count > 0)")
	}
	return nil
}

func validateRails(path string, rails []Rail) error {
	if len(rails) == 0 {
		return fieldErr(path, "no rails; need 1..%d", MaxRails)
	}
	if len(rails) > MaxRails {
		return fieldErr(path, "%d rails; allowed 1..%d", len(rails), MaxRails)
	}
	for i, r := range rails {
		p := fmt.Sprintf("%s[%d]", path, i)
		if !(r.RateBps > 0) || r.RateBps > MaxRateBps {
			return fieldErr(p+".rate", "%v bits/s is out of range; allowed > 0 and <= 100gbit", r.RateBps)
		}
		if r.Delay < 0 || r.Delay > 10*time.Second {
			return fieldErr(p+".delay", "%v is out of range; allowed 0..10s", r.Delay)
		}
		for j, o := range rails[:i] {
			if r.Name != "" && r.Name == o.Name {
				return fieldErr(p+".name", "%q is also the name of %s[%d]; names must differ", r.Name, path, j)
			}
		}
		for j, l := range r.Load {
			if err := l.validate(fmt.Sprintf("%s.load[%d]", p, j)); err != nil {
				return err
			}
		}
	}
	return nil
}

func validFraction(f float64) bool { return f >= 0 && f <= 1 }

func (l *Load) validate(p string) error {
	if !slices.Contains(loadKinds, l.Kind) {
		return fieldErr(p+".kind", "unknown load kind %q; allowed: %s", l.Kind, strings.Join(loadKinds, ", "))
	}
	if !validFraction(l.Fraction) {
		return fieldErr(p+".fraction", "%v is out of range; allowed %s", l.Fraction, formFraction)
	}
	zero := func(name string, isZero bool) error {
		if !isZero {
			return fieldErr(p+"."+name, "does not apply to a load of kind %s", l.Kind)
		}
		return nil
	}
	var errs []error
	switch l.Kind {
	case LoadStep:
		if l.At < 0 {
			return fieldErr(p+".at", "%v is negative; allowed >= 0", l.At)
		}
		errs = append(errs, zero("period", l.Period == 0), zero("duty", l.Duty == 0), zero("start", l.Start == 0),
			zero("gap", l.Gap == 0), zero("length", l.Length == 0), zero("file", l.File == "" && l.Points == nil))
	case LoadOnOff:
		if l.Period < MinLoadTime {
			return fieldErr(p+".period", "%v; allowed >= %v", l.Period, MinLoadTime)
		}
		if !validFraction(l.Duty) {
			return fieldErr(p+".duty", "%v is out of range; allowed %s", l.Duty, formFraction)
		}
		if l.Start < 0 {
			return fieldErr(p+".start", "%v is negative; allowed >= 0", l.Start)
		}
		errs = append(errs, zero("at", l.At == 0), zero("gap", l.Gap == 0), zero("length", l.Length == 0), zero("file", l.File == "" && l.Points == nil))
	case LoadPoisson:
		if l.Gap < MinLoadTime {
			return fieldErr(p+".gap", "%v; allowed >= %v (the mean time between bursts)", l.Gap, MinLoadTime)
		}
		if l.Length < MinLoadTime {
			return fieldErr(p+".length", "%v; allowed >= %v (the mean length of a burst)", l.Length, MinLoadTime)
		}
		if l.Start < 0 {
			return fieldErr(p+".start", "%v is negative; allowed >= 0", l.Start)
		}
		errs = append(errs, zero("at", l.At == 0), zero("period", l.Period == 0), zero("duty", l.Duty == 0), zero("file", l.File == "" && l.Points == nil))
	case LoadTrace:
		if l.File == "" && len(l.Points) == 0 {
			return fieldErr(p+".file", "missing; a trace load needs a file (lines \"time_s fraction\")")
		}
		if l.File != "" && l.Points == nil {
			return fieldErr(p+".file", "%q was not read (use LoadScenario, or fill Points)", l.File)
		}
		for k, pt := range l.Points {
			if pt.At < 0 || !validFraction(pt.Fraction) || (k > 0 && pt.At < l.Points[k-1].At) {
				return fieldErr(p+".file", "point %d (%v, %v): need time >= 0, non-decreasing, and fraction in [0,1]", k, pt.At, pt.Fraction)
			}
		}
		errs = append(errs, zero("at", l.At == 0), zero("period", l.Period == 0), zero("duty", l.Duty == 0), zero("start", l.Start == 0),
			zero("gap", l.Gap == 0), zero("length", l.Length == 0), zero("fraction", l.Fraction == 0))
	}
	return firstErr(errs)
}

func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func (sc *Scenario) validateTraffic() error {
	t := &sc.Traffic
	if t.Kind == "" {
		return fieldErr("traffic.kind", "missing; allowed: %s", strings.Join(trafficKinds, ", "))
	}
	if !slices.Contains(trafficKinds, t.Kind) {
		return fieldErr("traffic.kind", "unknown traffic kind %q; allowed: %s", t.Kind, strings.Join(trafficKinds, ", "))
	}
	// Fields that apply to each kind.
	applies := map[string][]string{
		KindBulk:      {"size", "window", "count"},
		KindMixed:     {"sizes", "window", "count", "rate", "load"},
		KindReqResp:   {"request", "response", "window", "count", "reverse_rails"},
		KindAllreduce: {"size", "ranks", "iterations", "rails_min", "rails_max", "rate_jitter"},
	}[t.Kind]
	set := map[string]bool{
		"size": t.Size != 0, "window": t.Window != 0, "count": t.Count != 0, "sizes": t.Sizes != nil,
		"rate": t.RateBps != 0, "load": t.Load != 0, "request": t.Request != 0, "response": t.Response != 0,
		"reverse_rails": t.ReverseRails != nil, "ranks": t.Ranks != 0, "iterations": t.Iterations != 0,
		"rails_min": t.RailsMin != 0, "rails_max": t.RailsMax != 0, "rate_jitter": t.RateJitter != 0,
	}
	for _, f := range []string{"size", "window", "count", "sizes", "rate", "load", "request", "response", "reverse_rails", "ranks", "iterations", "rails_min", "rails_max", "rate_jitter"} {
		if set[f] && !slices.Contains(applies, f) {
			return fieldErr("traffic."+f, "does not apply to traffic of kind %s (its fields: kind, %s)", t.Kind, strings.Join(applies, ", "))
		}
	}
	if t.Size < 0 {
		return fieldErr("traffic.size", "%d is negative", t.Size)
	}
	if t.Window < 0 || t.Window > 1<<20 {
		return fieldErr("traffic.window", "%d is out of range; allowed 0 (automatic) or 1..%d", t.Window, 1<<20)
	}
	if t.Count < 0 {
		return fieldErr("traffic.count", "%d is negative; allowed 0 (unlimited) or more", t.Count)
	}
	const maxMsg = 1 << 40
	switch t.Kind {
	case KindBulk:
		if t.Size > maxMsg {
			return fieldErr("traffic.size", "%d is out of range; allowed 1..%d bytes", t.Size, int64(maxMsg))
		}
	case KindMixed:
		if len(t.Sizes) == 0 {
			return fieldErr("traffic.sizes", "missing; mixed traffic needs at least one {size, weight}")
		}
		for i, sw := range t.Sizes {
			if sw.Size < 1 || sw.Size > maxMsg {
				return fieldErr(fmt.Sprintf("traffic.sizes[%d].size", i), "%d is out of range; allowed 1..%d bytes", sw.Size, int64(maxMsg))
			}
			if !(sw.Weight > 0) || math.IsInf(sw.Weight, 0) {
				return fieldErr(fmt.Sprintf("traffic.sizes[%d].weight", i), "%v; allowed a finite number > 0", sw.Weight)
			}
		}
		if t.RateBps < 0 || t.RateBps > 1e13 || math.IsNaN(t.RateBps) {
			return fieldErr("traffic.rate", "%v is out of range; allowed 0 (back-to-back) or a rate > 0", t.RateBps)
		}
		if !(t.Load >= 0 && t.Load <= 10) {
			return fieldErr("traffic.load", "%v is out of range; allowed 0 (back-to-back) or a multiple of the rails' total rate in (0,10]", t.Load)
		}
		if t.RateBps > 0 && t.Load > 0 {
			return fieldErr("traffic.load", "both rate and load are given; give one")
		}
		if t.Window != 0 && (t.RateBps > 0 || t.Load > 0) {
			return fieldErr("traffic.window", "applies only to back-to-back mixed traffic (no rate or load)")
		}
	case KindReqResp:
		if t.Request < 0 || t.Request > maxMsg {
			return fieldErr("traffic.request", "%d is out of range; allowed 1..%d bytes", t.Request, int64(maxMsg))
		}
		if t.Response < 0 || t.Response > maxMsg {
			return fieldErr("traffic.response", "%d is out of range; allowed 1..%d bytes", t.Response, int64(maxMsg))
		}
		if t.ReverseRails != nil {
			if err := validateRails("traffic.reverse_rails", t.ReverseRails); err != nil {
				return err
			}
		}
	case KindAllreduce:
		if t.Ranks < 2 || t.Ranks > MaxRanks {
			return fieldErr("traffic.ranks", "%d is out of range; allowed 2..%d", t.Ranks, MaxRanks)
		}
		if t.Size != 0 && (t.Size < int64(t.Ranks) || t.Size > maxMsg) {
			return fieldErr("traffic.size", "%d is out of range; allowed ranks (%d)..%d bytes", t.Size, t.Ranks, int64(maxMsg))
		}
		if t.Iterations < 0 || t.Iterations > 1<<20 {
			return fieldErr("traffic.iterations", "%d is out of range; allowed 0 (one) or 1..%d", t.Iterations, 1<<20)
		}
		n := len(sc.Rails)
		lo, hi := cmpOr(t.RailsMin, n), cmpOr(t.RailsMax, n)
		if t.RailsMin < 0 || t.RailsMin > n {
			return fieldErr("traffic.rails_min", "%d is out of range; allowed 1..%d (the template rails)", t.RailsMin, n)
		}
		if t.RailsMax < 0 || t.RailsMax > n || hi < lo {
			return fieldErr("traffic.rails_max", "%d is out of range; allowed rails_min (%d)..%d (the template rails)", t.RailsMax, lo, n)
		}
		if !(t.RateJitter >= 0 && t.RateJitter < 1) {
			return fieldErr("traffic.rate_jitter", "%v is out of range; allowed [0,1)", t.RateJitter)
		}
	}
	return nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// resolved returns a copy of sc with every default filled in. sc must be
// valid.
func (sc *Scenario) resolved() Scenario {
	r := *sc
	r.SegmentSize = cmpOr(r.SegmentSize, DefaultSegmentSize)
	r.QueueDepth = cmpOr(r.QueueDepth, DefaultQueueDepth)
	if r.EagerLimit == 0 {
		r.EagerLimit = min(DefaultEagerLimit, r.SegmentSize)
	}
	if r.PlanMin == 0 {
		r.PlanMin = 2 * r.SegmentSize
	}
	if r.Duration == 0 {
		r.Duration = DefaultCap
	}
	r.Rails = slices.Clone(r.Rails)
	for i := range r.Rails {
		if r.Rails[i].Name == "" {
			r.Rails[i].Name = "r" + strconv.Itoa(i)
		}
	}
	t := &r.Traffic
	switch t.Kind {
	case KindBulk:
		t.Size = cmpOr(t.Size, 1<<20)
		t.Window = cmpOr(t.Window, autoWindow(t.Size))
	case KindMixed:
		if t.Window == 0 {
			var mean float64
			var w float64
			for _, s := range t.Sizes {
				mean += float64(s.Size) * s.Weight
				w += s.Weight
			}
			t.Window = autoWindow(int64(mean / w))
		}
	case KindReqResp:
		t.Request = cmpOr(t.Request, 4<<10)
		t.Response = cmpOr(t.Response, 1<<20)
		t.Window = cmpOr(t.Window, 1)
		if t.ReverseRails == nil {
			t.ReverseRails = slices.Clone(r.Rails)
			for i := range t.ReverseRails {
				t.ReverseRails[i].Load = nil
			}
		} else {
			t.ReverseRails = slices.Clone(t.ReverseRails)
		}
		for i := range t.ReverseRails {
			if t.ReverseRails[i].Name == "" {
				t.ReverseRails[i].Name = "r" + strconv.Itoa(i)
			}
			t.ReverseRails[i].Name += ".rev"
		}
	case KindAllreduce:
		t.Size = cmpOr(t.Size, int64(t.Ranks)*int64(r.SegmentSize))
		t.Iterations = cmpOr(t.Iterations, 1)
		t.RailsMin = cmpOr(t.RailsMin, len(r.Rails))
		t.RailsMax = cmpOr(t.RailsMax, len(r.Rails))
	}
	if r.Schedulers == nil {
		r.Schedulers = sched.Names()
	}
	return r
}

// autoWindow is the live benchmark's default number of messages in
// flight: max(4, min(256, 8 MiB/size)).
func autoWindow(size int64) int { return int(max(4, min(256, (8<<20)/max(size, 1)))) }

// SchedulerNames returns the schedulers the scenario runs: Schedulers, or
// every registered scheduler when it is nil.
func (sc *Scenario) SchedulerNames() []string {
	if sc.Schedulers == nil {
		return sched.Names()
	}
	return slices.Clone(sc.Schedulers)
}
