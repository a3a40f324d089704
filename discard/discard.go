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
	// MaxPending bounds Config.Pending.
	MaxPending = 1 << 16
)

// Recommended is the controller the project's tools use by default
// (multirail train, the C ABI, the PyTorch backend): the match rule (discard
// the share by which the link is slower than its recent baseline, with a
// dead band of Margin: in calm nothing is discarded; docs/discard.md),
// chosen over the patent's rule on seeds and scenarios not reported
// (BENCHMARKS.md, issue 15). Its Initial and History are the patent
// preset's, so that "rule=patent" on top of it gives that preset. The
// zero Config, by contrast, is the patent's rule as written.
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
	// it by Down when the quality fell); RuleMatch discards the share of
	// packets by which the link is slower than its recent best, so that a
	// stage takes about as long as in calm (see docs/discard.md).
	Rule string
	// Window is RuleMatch's memory: the 25 % quantile of the smoothed
	// time per packet over the last Window stages is the calm baseline.
	// 2..65536; 0 means DefaultWindow.
	Window int
	// Margin is RuleMatch's dead band: R = 1 - (1+Margin) x baseline /
	// time per packet, so a period up to 1+Margin times the baseline
	// discards nothing. [0, 10]; 0 means DefaultMargin (use a
	// tiny value for none). Initial, Up, Down, QualityThreshold,
	// DelayThreshold and History are the patent rule's; RuleMatch ignores
	// them.
	Margin float64
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

// matchGain is the weight of a new time-per-packet sample in RuleMatch's
// smoothed value; matchQuantile the quantile of the window's smoothed
// values that is its calm baseline.
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
}

type slot struct {
	hasL, hasP bool
	l          time.Duration
	p          float64
	received   int
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
	st     Stats
}

// New returns a controller whose first stage has rate 0.
func New(cfg Config) (*Controller, error) {
	c, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	ctl := &Controller{cfg: c, pending: make([]slot, c.Pending), hist: make([]time.Duration, max(1, c.History))}
	if c.Rule == RuleMatch {
		ctl.recent, ctl.sorted = make([]float64, c.Window), make([]float64, 0, c.Window)
	}
	return ctl, nil
}

// Config returns the controller's config with defaults filled in.
func (c *Controller) Config() Config { return c.cfg }

// Rate returns the rate the next stage will be sent with.
func (c *Controller) Rate() float64 { return c.rate }

// Begin starts the next stage: it returns the stage's number (0, 1, 2,
// ...) and the rate to send it with.
func (c *Controller) Begin() (stage uint64, rate float64) {
	if c.next-c.apply >= uint64(len(c.pending)) {
		c.expireOldest()
	}
	stage = c.next
	c.pending[stage%uint64(len(c.pending))] = slot{}
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

// match is RuleMatch: R = 1 - (1+Margin) b / min(s, l), clamped to
// [0, Max], with s the smoothed period l and b the matchQuantile quantile
// of s over the last Window stages.
// A link that now delivers packets g times slower than at its best sends
// a share of about 1/g of them, so a stage takes about as long as at its
// best; in calm (s near b) nothing is discarded. The rate rises with the
// smoothed period but falls with the newest: one fast stage is enough
// evidence that the congestion is over, and every stage discarded after
// it would cost accuracy for nothing.
func (c *Controller) match(l time.Duration) Decision {
	x := float64(l)
	if c.nrec == 0 {
		c.smooth = x
	} else {
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
	r := 0.0
	if s := min(c.smooth, x); s > 0 {
		r = min(c.cfg.Max, max(0, 1-(1+c.cfg.Margin)*b/s))
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
