package emu

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/multirail/multirail/units"
)

const formLoad = `allowed: RAIL:FRACTION@TIME, comma-separated, like 0:0.5@4s,0:0@8s with RAIL a rail index, FRACTION in [0,1) and TIME a duration >= 0 like 4s or 1500ms`

// Load is one background-load step: from time At on (relative to the
// link's epoch), Fraction of the rail's capacity is taken away (replacing
// any earlier step for the same rail). Fraction is in [0, 1).
type Load struct {
	Rail     int
	Fraction float64
	At       time.Duration
}

// String returns the load in the form ParseLoads reads: "0:0.5@4s".
func (l Load) String() string {
	return strconv.Itoa(l.Rail) + ":" + strconv.FormatFloat(l.Fraction, 'f', -1, 64) + "@" + units.FormatDuration(l.At)
}

// ParseLoads parses a comma-separated list of background-load steps
// "RAIL:FRACTION@TIME", e.g. "0:0.5@4s,0:0@8s,2:0.25@0s", for a setup of
// rails rails (every RAIL must be < rails). The empty string (or only white
// space) gives nil. Steps come back in the order given; for steps of one
// rail at the same time, the later one wins.
func ParseLoads(s string, rails int) ([]Load, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	items := strings.Split(s, ",")
	loads := make([]Load, 0, len(items))
	for _, item := range items {
		item = strings.TrimSpace(item)
		railStr, rest, ok1 := strings.Cut(item, ":")
		fracStr, atStr, ok2 := strings.Cut(rest, "@")
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("emu: bad load %q: %s", item, formLoad)
		}
		rail, err := strconv.Atoi(railStr)
		if err != nil || rail < 0 || rail >= rails {
			return nil, fmt.Errorf("emu: bad load %q: rail %q must be an integer in [0,%d); %s", item, railStr, rails, formLoad)
		}
		frac, err := strconv.ParseFloat(fracStr, 64)
		if err != nil || !(frac >= 0 && frac < 1) {
			return nil, fmt.Errorf("emu: bad load %q: fraction %q must be in [0,1); %s", item, fracStr, formLoad)
		}
		at, err := units.ParseDuration(atStr)
		if err != nil {
			return nil, fmt.Errorf("emu: bad load %q: time: %w; %s", item, err, formLoad)
		}
		loads = append(loads, Load{Rail: rail, Fraction: frac, At: at})
	}
	return loads, nil
}

// RailLoads returns the steps of loads that belong to rail, in order.
func RailLoads(loads []Load, rail int) []Load {
	var out []Load
	for _, l := range loads {
		if l.Rail == rail {
			out = append(out, l)
		}
	}
	return out
}

// Profile is the pure capacity-over-time model of one rail direction: the
// nominal rate, reduced from each step's At on by the step's Fraction.
// Steps must be sorted by At (NewProfile does that); of several steps with
// the same At the last one counts. A Fraction outside [0,1] is clamped.
type Profile struct {
	RateBps float64
	Steps   []Load // only this rail's steps, sorted by At
}

// NewProfile returns the profile of a rail of rate rateBps under the given
// steps, all of which are taken to belong to this rail (their Rail field is
// ignored; filter with RailLoads first). The steps are copied and sorted
// stably by At, so that of two steps at the same time the later one wins.
func NewProfile(rateBps float64, steps []Load) Profile {
	s := slices.Clone(steps)
	slices.SortStableFunc(s, func(a, b Load) int { return cmp.Compare(a.At, b.At) })
	return Profile{RateBps: rateBps, Steps: s}
}

func clampFraction(f float64) float64 {
	if !(f > 0) { // also NaN
		return 0
	}
	if f > 1 {
		return 1
	}
	return f
}

// fractionAt returns the fraction in force at t and the index of the first
// step after t (len(Steps) if none).
func (p Profile) fractionAt(t time.Duration) (float64, int) {
	i := sort.Search(len(p.Steps), func(i int) bool { return p.Steps[i].At > t })
	if i == 0 {
		return 0, 0
	}
	return clampFraction(p.Steps[i-1].Fraction), i
}

// RateAt returns the rate in bits per second offered at time t:
// RateBps*(1-fraction in force at t).
func (p Profile) RateAt(t time.Duration) float64 {
	f, _ := p.fractionAt(t)
	return p.RateBps * (1 - f)
}

// MeanRate returns the exact time-average of RateAt over [from, to) in bits
// per second. For to <= from it returns RateAt(from).
func (p Profile) MeanRate(from, to time.Duration) float64 {
	if to <= from {
		return p.RateAt(from)
	}
	return p.bitsBetween(from, to) / (float64(to-from) / 1e9)
}

// bitsBetween returns the integral of RateAt over [from, to) in bits
// (0 if to <= from).
func (p Profile) bitsBetween(from, to time.Duration) float64 {
	if to <= from {
		return 0
	}
	f, i := p.fractionAt(from)
	total := 0.0
	cur := from
	for cur < to {
		end := to
		if i < len(p.Steps) && p.Steps[i].At < to {
			end = p.Steps[i].At
		}
		total += p.RateBps * (1 - f) * (float64(end-cur) / 1e9)
		cur = end
		if i < len(p.Steps) && p.Steps[i].At <= cur {
			// Steps at the same instant: the last one counts.
			for i < len(p.Steps) && p.Steps[i].At <= cur {
				f = clampFraction(p.Steps[i].Fraction)
				i++
			}
		}
	}
	return total
}

// advance returns the earliest time t' >= from at which the profile has
// offered bits bits since from, rounded up to the nanosecond. ok is false
// if it never does (the rate stays zero from some point on).
func (p Profile) advance(from time.Duration, bits float64) (t time.Duration, ok bool) {
	if !(bits > 0) {
		return from, true
	}
	f, i := p.fractionAt(from)
	cur := from
	for {
		rate := p.RateBps * (1 - f) // bits per second
		if rate > 0 {
			need := bits / rate * 1e9 // ns
			if i >= len(p.Steps) || float64(p.Steps[i].At-cur) >= need {
				end := float64(cur) + math.Ceil(need)
				if end >= math.MaxInt64/2 {
					return 0, false
				}
				return time.Duration(end), true
			}
			bits -= rate * (float64(p.Steps[i].At-cur) / 1e9)
		} else if i >= len(p.Steps) {
			return 0, false
		}
		cur = p.Steps[i].At
		for i < len(p.Steps) && p.Steps[i].At <= cur {
			f = clampFraction(p.Steps[i].Fraction)
			i++
		}
	}
}

// Bursty returns background-load steps for rail that model competing
// traffic coming and going: busy periods, during which a fraction drawn
// uniformly from [lo, hi] of the capacity is taken, alternate with idle
// ones; both last an exponentially distributed time of mean busy and idle.
// It covers [0, horizon) and is fully determined by rng's state.
func Bursty(rng *rand.Rand, rail int, busy, idle time.Duration, lo, hi float64, horizon time.Duration) []Load {
	var out []Load
	on := rng.IntN(2) == 0
	for t := time.Duration(0); t < horizon; {
		mean, f := idle, 0.0
		if on {
			mean, f = busy, lo+(hi-lo)*rng.Float64()
		}
		out = append(out, Load{Rail: rail, Fraction: f, At: t})
		t += time.Duration(rng.ExpFloat64()*float64(mean)) + time.Millisecond
		on = !on
	}
	return out
}
