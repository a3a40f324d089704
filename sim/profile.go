package sim

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
)

const never = math.MaxInt64

// Kinds of load generator.
const (
	genPoints uint8 = iota // steps or a trace: a list of (time, fraction)
	genOnOff
	genPoisson
)

// gen is one background-load generator of a rail: a piecewise-constant
// fraction of capacity taken, produced change by change.
type gen struct {
	kind uint8
	cur  float64 // fraction in force now
	next int64   // time of the next change, never if none

	pts []TracePoint // genPoints
	idx int

	frac       float64 // genOnOff, genPoisson: fraction while on
	on         bool
	period     int64 // genOnOff
	onLen      int64
	phase      int64      // genOnOff: start of the current period
	rng        *rand.Rand // genPoisson
	gap, burst float64    // genPoisson: mean gap and burst length, ns
}

// advance applies the change at g.next and finds the one after it.
func (g *gen) advance() {
	t := g.next
	switch g.kind {
	case genPoints:
		g.cur = g.pts[g.idx].Fraction
		g.idx++
		for g.idx < len(g.pts) && int64(g.pts[g.idx].At) <= t {
			g.cur = g.pts[g.idx].Fraction
			g.idx++
		}
		g.next = never
		if g.idx < len(g.pts) {
			g.next = int64(g.pts[g.idx].At)
		}
	case genOnOff:
		if !g.on {
			g.on, g.cur, g.phase = true, g.frac, t
			g.next = addTime(t, g.onLen)
		} else {
			g.on, g.cur = false, 0
			g.next = addTime(g.phase, g.period)
		}
	case genPoisson:
		if !g.on {
			g.on, g.cur = true, g.frac
			g.next = addTime(t, expNs(g.rng, g.burst))
		} else {
			g.on, g.cur = false, 0
			g.next = addTime(t, expNs(g.rng, g.gap))
		}
	}
}

func addTime(t, d int64) int64 {
	if d >= never-t {
		return never
	}
	return t + d
}

// expNs draws an exponentially distributed duration of the given mean in
// nanoseconds, at least 1 ns.
func expNs(r *rand.Rand, mean float64) int64 {
	v := r.ExpFloat64() * mean
	if v >= 1e18 {
		return 1e18
	}
	return max(1, int64(v))
}

// profile is a rail's capacity over time: the nominal rate minus the sum
// of its generators' fractions (clamped to [0,1]). It only moves forward.
type profile struct {
	rate float64 // nominal bits/s
	gens []gen
	frac float64 // total fraction in force
	next int64   // earliest change of any generator
}

// newProfile builds the profile of a rail of rate bits/s under loads. The
// random bursts of poisson loads are drawn from streams derived from seed
// and stream (the rail's number), so every run of a scenario sees the same
// load.
func newProfile(rate float64, loads []Load, seed, stream uint64) profile {
	p := profile{rate: rate}
	var steps []TracePoint
	for _, l := range loads {
		if l.Kind == LoadStep {
			steps = append(steps, TracePoint{At: l.At, Fraction: l.Fraction})
		}
	}
	if len(steps) > 0 {
		slices.SortStableFunc(steps, func(a, b TracePoint) int { return cmp.Compare(a.At, b.At) })
		p.gens = append(p.gens, pointsGen(steps))
	}
	for j, l := range loads {
		switch l.Kind {
		case LoadTrace:
			if len(l.Points) > 0 {
				p.gens = append(p.gens, pointsGen(l.Points))
			}
		case LoadOnOff:
			on := int64(math.Round(l.Duty * float64(l.Period)))
			if on <= 0 || l.Fraction == 0 {
				continue
			}
			g := gen{kind: genOnOff, frac: l.Fraction, period: int64(l.Period), onLen: on, next: int64(l.Start)}
			if on >= g.period { // always on from Start
				g.kind, g.pts, g.next = genPoints, []TracePoint{{At: l.Start, Fraction: l.Fraction}}, int64(l.Start)
			}
			p.gens = append(p.gens, g)
		case LoadPoisson:
			if l.Fraction == 0 {
				continue
			}
			r := rand.New(rand.NewPCG(seed^0x5851f42d4c957f2d, mix(stream<<16|uint64(j))))
			g := gen{kind: genPoisson, frac: l.Fraction, rng: r, gap: float64(l.Gap), burst: float64(l.Length)}
			g.next = addTime(int64(l.Start), expNs(r, g.gap))
			p.gens = append(p.gens, g)
		}
	}
	p.next = never
	for i := range p.gens {
		p.next = min(p.next, p.gens[i].next)
	}
	p.advanceTo(0)
	return p
}

func pointsGen(pts []TracePoint) gen {
	return gen{kind: genPoints, pts: pts, next: int64(pts[0].At)}
}

// mix is SplitMix64's finaliser: distinct inputs give unrelated outputs.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// advanceTo applies every change at or before t.
func (p *profile) advanceTo(t int64) {
	for p.next <= t {
		tn := p.next
		sum, next := 0.0, int64(never)
		for i := range p.gens {
			g := &p.gens[i]
			for g.next <= tn {
				g.advance()
			}
			sum += g.cur
			next = min(next, g.next)
		}
		p.frac = min(1, max(0, sum))
		p.next = next
	}
}

// avail is the rate in bits/s available now.
func (p *profile) avail() float64 { return p.rate * (1 - p.frac) }

// finish returns when a transmission of bits bits that starts at t0 ends,
// integrating the available rate over the load changes on the way; never
// when the rail has no capacity left for good. t0 must not be before an
// earlier call's t0.
func (p *profile) finish(t0 int64, bits float64) int64 {
	p.advanceTo(t0)
	t := t0
	for {
		a := p.avail()
		tn := p.next
		if a > 0 {
			need := bits / a * 1e9
			if tn == never || float64(t)+need <= float64(tn) {
				d := int64(math.Ceil(need))
				if d < 1 {
					d = 1
				}
				return addTime(t, d)
			}
			bits -= a * float64(tn-t) / 1e9
		} else if tn == never {
			return never
		}
		t = tn
		p.advanceTo(t)
	}
}

// capacityBits is the integral of the available rate over [0, end] of a
// fresh profile, in bits. It consumes p.
func (p *profile) capacityBits(end int64) float64 {
	return p.capacityBins(end, end, nil)
}

// capacityBins is capacityBits, and when bins is not nil it also adds the
// bits of each interval [i*bin, (i+1)*bin) within [0, end] to bins[i].
func (p *profile) capacityBins(end, bin int64, bins []float64) float64 {
	var bits float64
	t := int64(0)
	for t < end {
		tn := min(p.next, end)
		if bins != nil {
			tn = min(tn, (t/bin+1)*bin)
		}
		b := p.avail() * float64(tn-t) / 1e9
		bits += b
		if i := int(t / bin); bins != nil && i < len(bins) {
			bins[i] += b
		}
		t = tn
		p.advanceTo(t)
	}
	return bits
}
