package emu

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/multirail/multirail/units"
)

// Pattern kinds.
const (
	PatternOff    = "off"
	PatternBursty = "bursty"
	PatternPhases = "phases"
)

// Pattern is a background-load pattern for emulated rails, in a form that
// fits a flag or an environment variable (ParsePattern, String):
//
//   - off: no load;
//   - bursty: busy periods (mean Busy, exponential) taking a fraction of
//     the rail drawn uniformly from [Min, Max] alternate with idle ones
//     (mean Idle), as Bursty;
//   - phases: congestion that comes and goes: calm phases of Calm with no
//     load alternate with congested phases of Congested in which the
//     bursty load runs; the first phase is calm.
//
// The zero value is off.
type Pattern struct {
	Kind            string
	Busy, Idle      time.Duration // bursty periods (bursty, phases)
	Min, Max        float64       // fraction of the rail a busy period takes
	Calm, Congested time.Duration // phase lengths (phases)
	Seed            uint64        // seed of the schedule (with the rail and whatever the user mixes in)
	// Offset (phases) is how far into its calm-congested cycle the
	// schedule starts: 0 starts with a whole calm phase, Calm with a
	// congested one. Values of a cycle or more wrap around.
	Offset time.Duration
	// OffsetFromSeed (phases) draws Offset uniformly from the cycle by
	// Seed instead, so that runs of different seeds meet the congestion
	// at different points of their work (ParsePattern: offset=seed).
	OffsetFromSeed bool
}

// Defaults of a Pattern's zero fields.
const (
	DefaultBusy      = 400 * time.Millisecond
	DefaultIdle      = 200 * time.Millisecond
	DefaultLoadMin   = 0.5
	DefaultLoadMax   = 0.9
	DefaultCalm      = 3 * time.Second
	DefaultCongested = 3 * time.Second
)

const formPattern = "allowed: off, bursty[:KEY=VALUE,...] or phases[:KEY=VALUE,...] with keys busy, idle (durations), load (MIN:MAX, fractions in (0,1)), calm, congested (phases' lengths), offset (phases: a duration into the cycle, or seed) and seed"

// ParsePattern parses "off", "bursty[:busy=400ms,idle=200ms,load=0.5:0.9,seed=1]"
// or "phases[:calm=3s,congested=3s,busy=...,idle=...,load=...,offset=...,seed=...]"
// (offset: a duration, or "seed" to draw it from the seed);
// omitted keys take the defaults. The result is validated.
func ParsePattern(s string) (Pattern, error) {
	kind, args, _ := strings.Cut(strings.TrimSpace(s), ":")
	p := Pattern{Kind: strings.ToLower(kind)}
	bad := func(why string) (Pattern, error) {
		return Pattern{}, fmt.Errorf("emu: load pattern %q: %s; %s", s, why, formPattern)
	}
	switch p.Kind {
	case PatternOff, PatternBursty, PatternPhases:
	case "":
		p.Kind = PatternOff
	default:
		return bad("unknown kind " + strconv.Quote(kind))
	}
	for item := range strings.SplitSeq(args, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if p.Kind == PatternOff {
			return bad("off takes no keys")
		}
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return bad(strconv.Quote(item) + " is not KEY=VALUE")
		}
		key := strings.ToLower(strings.TrimSpace(k))
		// A zero field means its default in a Pattern; written out,
		// zero is a mistake: every value given must be > 0.
		switch key {
		case "busy", "idle", "calm", "congested":
			if key == "calm" || key == "congested" {
				if p.Kind != PatternPhases {
					return bad(key + " is a key of phases only")
				}
			}
			d, err := units.ParseDuration(v)
			if err != nil || d <= 0 {
				return bad(fmt.Sprintf("%s %q: want a duration > 0", key, v))
			}
			switch key {
			case "busy":
				p.Busy = d
			case "idle":
				p.Idle = d
			case "calm":
				p.Calm = d
			default:
				p.Congested = d
			}
		case "load":
			lo, hi, ok := strings.Cut(v, ":")
			var err1, err2 error
			p.Min, err1 = strconv.ParseFloat(lo, 64)
			p.Max, err2 = strconv.ParseFloat(hi, 64)
			if !ok || err1 != nil || err2 != nil || !(p.Min > 0) || !(p.Max > 0) {
				return bad("load " + strconv.Quote(v) + " is not MIN:MAX with fractions in (0,1)")
			}
		case "offset":
			if p.Kind != PatternPhases {
				return bad("offset is a key of phases only")
			}
			if strings.EqualFold(strings.TrimSpace(v), "seed") {
				p.OffsetFromSeed = true
				break
			}
			d, err := units.ParseDuration(v)
			if err != nil || d < 0 {
				return bad(fmt.Sprintf("offset %q: want a duration >= 0 or seed", v))
			}
			p.Offset = d
		case "seed":
			var err error
			if p.Seed, err = strconv.ParseUint(v, 10, 64); err != nil {
				return bad("seed " + strconv.Quote(v) + " is not an unsigned integer")
			}
		default:
			return bad("unknown key " + strconv.Quote(k))
		}
	}
	return p.Validate()
}

// Validate fills the defaults of the zero fields in and checks the rest;
// the error names the field, its value and what is allowed.
func (p Pattern) Validate() (Pattern, error) {
	if p.Kind == "" {
		p.Kind = PatternOff
	}
	if p.Kind == PatternOff {
		return Pattern{Kind: PatternOff}, nil
	}
	if p.Kind != PatternBursty && p.Kind != PatternPhases {
		return p, fmt.Errorf("emu: Pattern.Kind = %q; allowed off, bursty or phases", p.Kind)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&p.Busy, DefaultBusy)
	def(&p.Idle, DefaultIdle)
	if p.Min == 0 {
		p.Min = DefaultLoadMin
	}
	if p.Max == 0 {
		p.Max = DefaultLoadMax
	}
	if p.Kind == PatternPhases {
		def(&p.Calm, DefaultCalm)
		def(&p.Congested, DefaultCongested)
	}
	inRange := func(d time.Duration) bool { return d >= time.Millisecond && d <= time.Hour }
	switch {
	case !inRange(p.Busy):
		return p, fmt.Errorf("emu: Pattern.Busy = %v; allowed 1ms..1h", p.Busy)
	case !inRange(p.Idle):
		return p, fmt.Errorf("emu: Pattern.Idle = %v; allowed 1ms..1h", p.Idle)
	case !(p.Min > 0 && p.Min < 1):
		return p, fmt.Errorf("emu: Pattern.Min = %v; allowed (0, 1)", p.Min)
	case !(p.Max >= p.Min && p.Max < 1):
		return p, fmt.Errorf("emu: Pattern.Max = %v; allowed [Min = %v, 1)", p.Max, p.Min)
	case p.Kind == PatternPhases && !inRange(p.Calm):
		return p, fmt.Errorf("emu: Pattern.Calm = %v; allowed 1ms..1h", p.Calm)
	case p.Kind == PatternPhases && !inRange(p.Congested):
		return p, fmt.Errorf("emu: Pattern.Congested = %v; allowed 1ms..1h", p.Congested)
	case p.Offset < 0 || p.Offset > 2*time.Hour:
		return p, fmt.Errorf("emu: Pattern.Offset = %v; allowed 0..2h", p.Offset)
	case p.Kind != PatternPhases && (p.Offset != 0 || p.OffsetFromSeed):
		return p, fmt.Errorf("emu: Pattern.Offset with kind %s; allowed with phases only", p.Kind)
	}
	return p, nil
}

// String returns the pattern in the form ParsePattern reads, every key
// spelled out.
func (p Pattern) String() string {
	p, err := p.Validate()
	if err != nil || p.Kind == PatternOff {
		return PatternOff
	}
	s := fmt.Sprintf("%s:busy=%s,idle=%s,load=%s:%s", p.Kind, units.FormatDuration(p.Busy), units.FormatDuration(p.Idle),
		strconv.FormatFloat(p.Min, 'g', -1, 64), strconv.FormatFloat(p.Max, 'g', -1, 64))
	if p.Kind == PatternPhases {
		s += fmt.Sprintf(",calm=%s,congested=%s", units.FormatDuration(p.Calm), units.FormatDuration(p.Congested))
		switch {
		case p.OffsetFromSeed:
			s += ",offset=seed"
		case p.Offset != 0:
			s += ",offset=" + units.FormatDuration(p.Offset)
		}
	}
	return s + ",seed=" + strconv.FormatUint(p.Seed, 10)
}

// InCalm reports whether t after the schedule's start falls in a calm
// phase: always for off, never for bursty, for phases when t plus the
// offset, modulo a calm-congested cycle, is under Calm.
func (p Pattern) InCalm(t time.Duration) bool {
	switch p.Kind {
	case PatternBursty:
		return false
	case PatternPhases:
		if cycle := p.Calm + p.Congested; cycle > 0 {
			return (t+p.PhaseOffset())%cycle < p.Calm
		}
	}
	return true
}

// PhaseOffset is where in its calm-congested cycle a phases schedule
// starts, in [0, cycle): Offset wrapped, or drawn from Seed with
// OffsetFromSeed; 0 for other kinds.
func (p Pattern) PhaseOffset() time.Duration {
	cycle := p.Calm + p.Congested
	if p.Kind != PatternPhases || cycle <= 0 {
		return 0
	}
	if p.OffsetFromSeed {
		return time.Duration(rand.New(rand.NewPCG(p.Seed, 0x6f6666736574)).Int64N(int64(cycle)))
	}
	return p.Offset % cycle
}

// Loads returns the pattern's load steps for rail over [0, horizon),
// drawn from rng (callers seed it with Seed and whatever identifies the
// link). p must be valid.
func (p Pattern) Loads(rng *rand.Rand, rail int, horizon time.Duration) []Load {
	switch p.Kind {
	case PatternBursty:
		return Bursty(rng, rail, p.Busy, p.Idle, p.Min, p.Max, horizon)
	case PatternPhases:
		// Cycles from -offset; what falls before 0 collapses into the
		// level in force at 0.
		var out []Load
		for t := -p.PhaseOffset(); t < horizon; t += p.Calm + p.Congested {
			out = appendFrom0(out, Load{Rail: rail, At: t})
			for _, l := range Bursty(rng, rail, p.Busy, p.Idle, p.Min, p.Max, p.Congested) {
				l.At += t + p.Calm
				out = appendFrom0(out, l)
			}
		}
		return out
	}
	return nil
}

// appendFrom0 appends l to a schedule built in time order, a step before
// time 0 becoming (or replacing) the step at 0.
func appendFrom0(out []Load, l Load) []Load {
	if l.At >= 0 {
		return append(out, l)
	}
	l.At = 0
	if n := len(out); n > 0 && out[n-1].At == 0 {
		out[n-1] = l
		return out
	}
	return append(out, l)
}
