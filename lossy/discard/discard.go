package discard

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Defaults for the zero values of Config.
const (
	DefaultUp             = 0.2
	DefaultDown           = 0.02
	DefaultDelayThreshold = 0.75
	DefaultMax            = 0.6
	DefaultPending        = 64
	DefaultWindow         = 100
	DefaultMargin         = 0.5
	DefaultRise           = 0.5
	DefaultRamp           = 0.5
	DefaultCalmCap        = 2
	DefaultShare          = 0.2
	// MaxPending bounds Config.Pending.
	MaxPending = 1 << 16
)

// Recommended is the controller the project's tools use by default
// (multirail train, the C ABI, the PyTorch backend): the match rule
// (discard nothing while the link is within 1+Margin of its calm baseline,
// Max from twice it on; docs/discard.md), chosen over the patent's rule
// (BENCHMARKS.md, issues 15 and 28). Its Initial and History are the
// patent preset's, so that "rule=patent" on top of it gives that preset.
// The zero Config, by contrast, is the patent's rule as written.
var Recommended = Config{Rule: RuleMatch, Initial: 0.1, History: 4}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("discard: invalid config")

// Errors returned (and counted) for feedback that is not applied.
var (
	// ErrStale: the stage's feedback was applied, expired, or this kind of
	// feedback was already given for it.
	ErrStale = errors.New("discard: feedback for a stale stage")
	// ErrUnknown: no such stage was begun.
	ErrUnknown = errors.New("discard: feedback for an unknown stage")
	// ErrInvalid: a negative period or a quality that is not a finite
	// number.
	ErrInvalid = errors.New("discard: invalid feedback value")
)

// Config holds the controller's constants. The zero value of every field
// means its default; the defaults of Initial and QualityThreshold are 0.
type Config struct {
	// Initial is Rp, the rate set by the first stage's feedback (the
	// first stage itself is sent with rate 0). In [0, Max]; the default
	// is 0: discard nothing until the reception period grows.
	Initial float64
	// Up is the step up when the reception period grew. In (0, 1];
	// 0 means DefaultUp.
	Up float64
	// Down is the step down when the quality got worse. In (0, 1];
	// 0 means DefaultDown.
	Down float64
	// QualityThreshold is TH1, in the application's quality units: the
	// rate goes down when P[s-1] - P[s] > TH1 (quality: higher is
	// better). >= 0; the default is 0 (any drop in quality lowers R).
	QualityThreshold float64
	// DelayThreshold is TH2 as a fraction: the period "grew" when
	// L[s] > L[j] * (1 + TH2). > 0; 0 means DefaultDelayThreshold.
	DelayThreshold float64
	// Max is the largest rate. In (0, 1); 0 means DefaultMax.
	Max float64
	// History is K: 0 selects the basic rule (compare with the previous
	// stage only); K >= 2 compares with each of the last K stages. 1 is
	// refused (it would be the basic rule under another name).
	History int
	// RawPeriod compares reception periods as they are, as the patent's
	// text does. By default each period is divided by the packets
	// received first (time per packet), so that the controller's own
	// rate changes, which change how many packets a stage carries, do
	// not look like congestion.
	RawPeriod bool
	// Rule is the controller's rule: RulePatent ("" means it) is
	// JP7684261B2's (raise R by Up when the reception period grew, lower
	// it by Down when the quality fell); RuleMatch sets R from how many
	// times slower than its calm baseline the link is (Margin, Ramp,
	// Rise, Window, CalmCap; see docs/discard.md).
	Rule string
	// Window is RuleMatch's memory: the 25 % quantile of the smoothed
	// time per packet over the last Window stages is the calm baseline.
	// 2..65536; 0 means DefaultWindow.
	Window int
	// Margin is RuleMatch's dead band: while the smoothed time per
	// packet is at most 1+Margin times the baseline nothing is
	// discarded. [0, 10]; 0 means DefaultMargin (use a tiny value for
	// none). Initial, Up, Down, QualityThreshold, DelayThreshold and
	// History are the patent rule's; RuleMatch ignores them.
	Margin float64
	// Ramp is how far beyond the dead band RuleMatch's rate reaches Max:
	// R = Max x (g - (1+Margin)) / Ramp, clamped to [0, Max], with g the
	// smoothed time per packet over the baseline. (0, 100]; 0 means
	// DefaultRamp (Max from twice the baseline on).
	Ramp float64
	// Rise is the gain of RuleMatch's smoothed time per packet when a
	// stage is slower than it (a stage that is faster moves it by 0.25):
	// the rate rises within a stage or two of a storm's start and falls
	// over several after its end, so a short gap inside a storm does not
	// drop it. (0, 1]; 0 means DefaultRise.
	Rise float64
	// CalmCap bounds RuleMatch's baseline by CalmCap times the wire time
	// of a packet at the link's nominal capacity (SetWire), when that is
	// known: a load that lasts most of the window cannot become the
	// baseline if it leaves the link more than CalmCap times slower than
	// its wire. [1, 1000]; 0 means DefaultCalmCap.
	CalmCap float64
	// Share is the share of a link's cycle (the time from one stage's
	// start to the next's, SetCycle) from which RuleMatch counts the
	// link's slowdown in full: a stage that would take a smaller share
	// of the cycle, sent whole, has g's excess over 1 scaled by its
	// share over Share, since discarding can save at most that share of
	// the time (with compute between stages, a slow exchange that is a
	// small part of a step is not worth the accuracy it costs). Without
	// a cycle (SetCycle not called, or stages back to back) nothing is
	// scaled. (0, 1]; 0 means DefaultShare (use a tiny value for none).
	Share float64
	// Pending is how many stages may wait for their feedback at once;
	// when Begin would exceed it, the oldest waiting stage expires (it is
	// skipped, counted in Stats.Expired). In [1, MaxPending]; 0 means
	// DefaultPending.
	Pending int
}

func cfgErr(field string, v any, allowed string) error {
	return fmt.Errorf("%w: %s = %v out of range; allowed: %s", ErrConfig, field, v, allowed)
}

// Validate returns the config with defaults filled in, or an error naming
// the first field out of range.
func (c Config) Validate() (Config, error) {
	bad := func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) }
	if c.Max == 0 {
		c.Max = DefaultMax
	}
	if bad(c.Max) || c.Max <= 0 || c.Max >= 1 {
		return c, cfgErr("Max", c.Max, "(0, 1); 0 = default 0.6")
	}
	if bad(c.Initial) || c.Initial < 0 || c.Initial > c.Max {
		return c, cfgErr("Initial", c.Initial, fmt.Sprintf("[0, Max = %g]", c.Max))
	}
	if c.Up == 0 {
		c.Up = DefaultUp
	}
	if bad(c.Up) || c.Up <= 0 || c.Up > 1 {
		return c, cfgErr("Up", c.Up, "(0, 1]; 0 = default 0.2")
	}
	if c.Down == 0 {
		c.Down = DefaultDown
	}
	if bad(c.Down) || c.Down <= 0 || c.Down > 1 {
		return c, cfgErr("Down", c.Down, "(0, 1]; 0 = default 0.02")
	}
	if bad(c.QualityThreshold) || c.QualityThreshold < 0 {
		return c, cfgErr("QualityThreshold", c.QualityThreshold, ">= 0 (finite)")
	}
	if c.DelayThreshold == 0 {
		c.DelayThreshold = DefaultDelayThreshold
	}
	if bad(c.DelayThreshold) || c.DelayThreshold < 0 {
		return c, cfgErr("DelayThreshold", c.DelayThreshold, "> 0 (finite); 0 = default 0.75")
	}
	if c.History < 0 || c.History == 1 || c.History > 1024 {
		return c, cfgErr("History", c.History, "0 (basic rule) or 2..1024")
	}
	switch c.Rule {
	case "":
		c.Rule = RulePatent
	case RulePatent, RuleMatch:
	default:
		return c, fmt.Errorf("%w: Rule = %q; allowed %q or %q", ErrConfig, c.Rule, RulePatent, RuleMatch)
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Window < 2 || c.Window > 1<<16 {
		return c, cfgErr("Window", c.Window, "2..65536; 0 = default 100")
	}
	if c.Margin == 0 {
		c.Margin = DefaultMargin
	}
	if bad(c.Margin) || c.Margin < 0 || c.Margin > 10 {
		return c, cfgErr("Margin", c.Margin, "[0, 10]; 0 = default 0.5")
	}
	if c.Ramp == 0 {
		c.Ramp = DefaultRamp
	}
	if bad(c.Ramp) || c.Ramp <= 0 || c.Ramp > 100 {
		return c, cfgErr("Ramp", c.Ramp, "(0, 100]; 0 = default 0.5")
	}
	if c.Rise == 0 {
		c.Rise = DefaultRise
	}
	if bad(c.Rise) || c.Rise <= 0 || c.Rise > 1 {
		return c, cfgErr("Rise", c.Rise, "(0, 1]; 0 = default 0.5")
	}
	if c.CalmCap == 0 {
		c.CalmCap = DefaultCalmCap
	}
	if bad(c.CalmCap) || c.CalmCap < 1 || c.CalmCap > 1000 {
		return c, cfgErr("CalmCap", c.CalmCap, "[1, 1000]; 0 = default 2")
	}
	if c.Share == 0 {
		c.Share = DefaultShare
	}
	if bad(c.Share) || c.Share <= 0 || c.Share > 1 {
		return c, cfgErr("Share", c.Share, "(0, 1]; 0 = default 0.2")
	}
	if c.Pending == 0 {
		c.Pending = DefaultPending
	}
	if c.Pending < 1 || c.Pending > MaxPending {
		return c, cfgErr("Pending", c.Pending, fmt.Sprintf("1..%d; 0 = default %d", MaxPending, DefaultPending))
	}
	return c, nil
}

// Rules (Config.Rule).
const (
	RulePatent = "patent"
	RuleMatch  = "match"
)

// matchGain is the weight of a new time-per-packet sample that is below
// RuleMatch's smoothed value (Config.Rise is the weight of one above it);
// matchQuantile the quantile of the window's smoothed values that is its
// calm baseline.
const (
	matchGain     = 0.25
	matchQuantile = 0.25
)

// Decision is what the controller did with one stage's feedback.
type Decision int

// Decisions.
const (
	Kept    Decision = iota // R unchanged
	Lowered                 // quality got worse: R - Down
	Raised                  // reception period grew: R + Up
	Started                 // first stage with feedback: R = Initial
)

func (d Decision) String() string {
	switch d {
	case Kept:
		return "kept"
	case Lowered:
		return "lowered"
	case Raised:
		return "raised"
	case Started:
		return "started"
	}
	return fmt.Sprintf("Decision(%d)", int(d))
}

// Stats counts what the controller did.
type Stats struct {
	Rate     float64 // the current rate
	Stages   uint64  // stages begun
	Applied  uint64  // stages whose feedback set the rate
	Raised   uint64
	Lowered  uint64
	Kept     uint64
	Expired  uint64 // stages skipped because their feedback did not come in time
	Stale    uint64 // feedback ignored: stage already applied or expired, or a repeat
	Unknown  uint64 // feedback ignored: stage never begun
	Invalid  uint64 // feedback ignored: negative period or non-finite quality
	Last     Decision
	Period   time.Duration // reception period of the last applied stage
	Quality  float64       // quality of the last applied stage
	Received int           // packets received in the last applied stage
	// RuleMatch: the baseline time per packet of the last applied stage
	// (after the CalmCap bound) and the wire time SetWire gave.
	Baseline, Wire time.Duration
	// RuleMatch: the cycle SetCycle gave and the smoothed share of it a
	// whole stage takes (0 before the first stage with a cycle).
	Cycle time.Duration
	Share float64
}

type slot struct {
	hasL, hasP bool
	l          time.Duration
	p          float64
	received   int
	rate       float64 // the rate the stage was begun with
	cycle      float64 // SetCycle's value when it was begun (ns; 0 = unknown)
}

// Controller is the discard-rate controller of one sender-receiver pair.
type Controller struct {
	cfg     Config
	rate    float64
	next    uint64 // next stage Begin hands out
	apply   uint64 // oldest stage not yet applied or expired
	pending []slot // ring, indexed by stage % len
	started bool   // a stage has been applied
	prevP   float64
	hist    []time.Duration // ring of the last max(1, K) applied periods
	nhist   int             // valid entries in hist
	hpos    int             // where the next period goes
	// RuleMatch: the smoothed time per packet and the last Window of it.
	smooth float64
	recent []float64
	sorted []float64 // scratch
	nrec   int
	rpos   int
	wire   float64 // SetWire, in nanoseconds; 0 = unknown
	cycle  float64 // SetCycle, in nanoseconds; 0 = unknown
	share  float64 // smoothed share of a cycle a whole stage takes; -1 = none yet
	st     Stats
}

// New returns a controller whose first stage has rate 0.
func New(cfg Config) (*Controller, error) {
	c, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	ctl := &Controller{cfg: c, pending: make([]slot, c.Pending), hist: make([]time.Duration, max(1, c.History)), share: -1}
	if c.Rule == RuleMatch {
		ctl.recent, ctl.sorted = make([]float64, c.Window), make([]float64, 0, c.Window)
	}
	return ctl, nil
}

// Config returns the controller's config with defaults filled in.
func (c *Controller) Config() Config { return c.cfg }

// Rate returns the rate the next stage will be sent with.
func (c *Controller) Rate() float64 { return c.rate }

// SetWire tells RuleMatch the wire time of one packet at the link's
// nominal capacity (the packet's bytes over the sum of its rails' nominal
// rates); 0 or less means unknown. The baseline is then at most CalmCap
// times it. The patent rule ignores it.
func (c *Controller) SetWire(d time.Duration) {
	c.wire = max(0, float64(d))
	c.st.Wire = max(0, d)
}

// SetCycle tells RuleMatch how long ago the previous stage began when
// the next one does (the link's cycle: a step of the application when it
// computes between stages); 0 or less means unknown. A stage that takes
// less than Share of its cycle counts its slowdown in part (Config.Share).
// The patent rule ignores it.
func (c *Controller) SetCycle(d time.Duration) {
	c.cycle = max(0, float64(d))
	c.st.Cycle = max(0, d)
}

// Begin starts the next stage: it returns the stage's number (0, 1, 2,
// ...) and the rate to send it with.
func (c *Controller) Begin() (stage uint64, rate float64) {
	if c.next-c.apply >= uint64(len(c.pending)) {
		c.expireOldest()
	}
	stage = c.next
	c.pending[stage%uint64(len(c.pending))] = slot{rate: c.rate, cycle: c.cycle}
	c.next++
	c.st.Stages++
	return stage, c.rate
}

func (c *Controller) expireOldest() {
	c.st.Expired++
	c.apply++
	c.drain()
}

func (c *Controller) lookup(stage uint64) (*slot, error) {
	switch {
	case stage >= c.next:
		c.st.Unknown++
		return nil, ErrUnknown
	case stage < c.apply:
		c.st.Stale++
		return nil, ErrStale
	}
	return &c.pending[stage%uint64(len(c.pending))], nil
}

// Period records stage's reception period and the number of packets the
// receiver got. It returns ErrStale, ErrUnknown or ErrInvalid (and counts
// them) for feedback it ignores.
func (c *Controller) Period(stage uint64, period time.Duration, received int) error {
	if period < 0 || received < 0 {
		c.st.Invalid++
		return ErrInvalid
	}
	s, err := c.lookup(stage)
	if err != nil {
		return err
	}
	if s.hasL {
		c.st.Stale++
		return ErrStale
	}
	s.hasL, s.l, s.received = true, period, received
	c.drain()
	return nil
}

// Quality records the receiving application's quality value for stage
// (higher is better). Errors as for Period.
func (c *Controller) Quality(stage uint64, p float64) error {
	if math.IsNaN(p) || math.IsInf(p, 0) {
		c.st.Invalid++
		return ErrInvalid
	}
	s, err := c.lookup(stage)
	if err != nil {
		return err
	}
	if s.hasP {
		c.st.Stale++
		return ErrStale
	}
	s.hasP, s.p = true, p
	c.drain()
	return nil
}

// drain applies, in stage order, every stage that has both values.
func (c *Controller) drain() {
	for c.apply < c.next {
		s := &c.pending[c.apply%uint64(len(c.pending))]
		if !s.hasL || !s.hasP {
			return
		}
		l := s.l
		if !c.cfg.RawPeriod {
			l /= time.Duration(max(1, s.received))
		}
		if c.cfg.Rule == RuleMatch {
			c.observeShare(s)
		}
		c.step(l, s.p)
		c.st.Period, c.st.Quality, c.st.Received = s.l, s.p, s.received
		*s = slot{}
		c.apply++
		c.st.Applied++
	}
}

// step applies the configured rule to one stage's period l and quality p.
func (c *Controller) step(l time.Duration, p float64) {
	d := Kept
	switch {
	case c.cfg.Rule == RuleMatch:
		d = c.match(l)
	case !c.started:
		c.started = true
		c.rate = c.cfg.Initial
		d = Started
	case c.prevP-p > c.cfg.QualityThreshold:
		c.rate = max(0, c.rate-c.cfg.Down)
		d = Lowered
	case c.grew(l):
		c.rate = min(c.cfg.Max, c.rate+c.cfg.Up)
		d = Raised
	}
	switch d {
	case Raised:
		c.st.Raised++
	case Lowered:
		c.st.Lowered++
	case Kept:
		c.st.Kept++
	}
	c.st.Last = d
	c.prevP = p
	c.hist[c.hpos] = l
	c.hpos = (c.hpos + 1) % len(c.hist)
	c.nhist = min(c.nhist+1, len(c.hist))
}

// observeShare updates the smoothed share of its cycle a whole stage
// takes: the stage's period over 1 minus the rate it was sent with (the
// time it would have taken whole), over the cycle it began in; the same
// gains as the time per packet (Rise up, matchGain down). Stages without
// a cycle leave it alone.
func (c *Controller) observeShare(s *slot) {
	if s.cycle <= 0 {
		return
	}
	x := float64(s.l) / max(1-s.rate, 1e-3) / s.cycle
	switch {
	case c.share < 0:
		c.share = x
	case x > c.share:
		c.share += c.cfg.Rise * (x - c.share)
	default:
		c.share += matchGain * (x - c.share)
	}
	c.st.Share = c.share
}

// match is RuleMatch: with s the smoothed time per packet (gain Rise
// when l is above it, matchGain when below), b the matchQuantile quantile
// of s over the last Window stages, bounded by CalmCap times the wire
// time when SetWire gave one, and g = s/b (its excess over 1 scaled by
// share/Share while a whole stage takes a smaller share than Share of its
// cycle; observeShare):
//
//	R = Max x (g - (1+Margin)) / Ramp, clamped to [0, Max].
//
// In calm (g near 1) nothing is discarded; from (1+Margin+Ramp) times
// the baseline on, Max is. The rate follows the smoothed time, not the
// newest stage: under storms whose calm gaps last a stage or two a single
// fast stage is no sign that the storm is over (falling on it dropped the
// rate in every gap; docs/discard.md).
func (c *Controller) match(l time.Duration) Decision {
	x := float64(l)
	switch {
	case c.nrec == 0:
		c.smooth = x
	case x > c.smooth:
		c.smooth += c.cfg.Rise * (x - c.smooth)
	default:
		c.smooth += matchGain * (x - c.smooth)
	}
	c.recent[c.rpos] = c.smooth
	c.rpos = (c.rpos + 1) % len(c.recent)
	c.nrec = min(c.nrec+1, len(c.recent))
	// The baseline is a low quantile of the window rather than its
	// minimum: one lucky stage (every process on a core at once) would
	// make every ordinary calm stage look congested.
	c.sorted = append(c.sorted[:0], c.recent[:c.nrec]...)
	slices.Sort(c.sorted)
	b := c.sorted[int(matchQuantile*float64(c.nrec-1))]
	if c.wire > 0 {
		b = min(b, c.cfg.CalmCap*c.wire)
	}
	c.st.Baseline = time.Duration(b)
	r := 0.0
	if b > 0 {
		g := c.smooth / b
		if c.share >= 0 && c.share < c.cfg.Share {
			g = 1 + (g-1)*c.share/c.cfg.Share
		}
		r = min(c.cfg.Max, max(0, c.cfg.Max*(g-(1+c.cfg.Margin))/c.cfg.Ramp))
	} else if c.smooth > 0 {
		r = c.cfg.Max
	}
	old := c.rate
	c.rate = r
	c.started = true
	switch {
	case r > old:
		return Raised
	case r < old:
		return Lowered
	}
	return Kept
}

// grew reports whether l grew by more than the threshold against the
// previous period or, with History K once K periods are known, against
// at least one of the last K.
func (c *Controller) grew(l time.Duration) bool {
	k := 1
	if c.cfg.History >= 2 && c.nhist >= c.cfg.History {
		k = c.cfg.History
	}
	f := 1 + c.cfg.DelayThreshold
	for j := 1; j <= k; j++ {
		prev := c.hist[(c.hpos-j+len(c.hist))%len(c.hist)]
		if float64(l) > float64(prev)*f {
			return true
		}
	}
	return false
}

// Stats returns the controller's counters.
func (c *Controller) Stats() Stats {
	st := c.st
	st.Rate = c.rate
	return st
}

// Select marks which of n packets to drop at rate r: it sets drop[i] for
// the dropped ones (clearing the others in drop[:n]) and returns how many.
// The count d is floor(r*n + u) with u uniform in [0,1), so it is r*n on
// average even for small stages, but at most n-1: a stage always sends at
// least one packet. The dropped packets are spread over the stage: the
// stage, taken as a circle starting at a uniformly random packet, is cut
// into d equal strata and one packet is drawn in each. The random start
// makes every packet equally likely to go: given d, each is dropped with
// probability exactly d/n, whatever its position, so a receiver that
// scales each packet that arrived by n/(n-d) (n and n-d are what it sees)
// estimates the stage's sum without bias (docs/discard.md). The same rng
// state gives the same choice. drop must have room for n entries. It
// allocates nothing.
func Select(rng *rand.Rand, n int, r float64, drop []bool) int {
	clear(drop[:n])
	if n <= 1 || !(r > 0) {
		return 0
	}
	d := min(int(math.Floor(min(r, 1)*float64(n)+rng.Float64())), n-1)
	if d == 0 {
		return 0
	}
	start := rng.IntN(n)
	for j := range d {
		lo, hi := j*n/d, (j+1)*n/d
		drop[(start+lo+rng.IntN(hi-lo))%n] = true
	}
	return d
}
