package sender

import "time"

// The planner: a large message's bytes split over the rails so that every
// rail used is expected to finish its share at the same time, and the
// tail moved from a rail that fell behind to one that ran dry.

// Lane is what the planner knows of one rail.
type Lane struct {
	// Up is false for a rail that must get nothing.
	Up bool
	// Rate is the rail's drain rate in bits/s that the planner trusts; 0
	// when unknown (see Resolve).
	Rate float64
	// Backlog is the bytes the rail must still move before a new byte:
	// queued, and taken but not yet acknowledged (what the kernel still
	// holds, what is on the wire, what the peer has not yet acknowledged).
	Backlog int64
	// Stale is true when Rate was measured, but longer than RateTrust ago:
	// the rail may have changed since (see Resolve).
	Stale bool
}

// RateTrust is how long a drain-rate sample is trusted by the planner. A
// rate is sampled only while the rail has a backlog; a rail the planner
// has given little or nothing since keeps an old figure (a rail that was
// loaded and is free again), which Resolve then raises to the others'.
const RateTrust = time.Second

// Lane is the planner's view of r at now: its measured drain rate, else
// its nominal rate, else 0; its backlog is its queued bytes plus what is
// still in flight: the bytes taken and not acknowledged, less what the
// rail has drained at its measured rate since the last acknowledgement
// (a receiver acknowledges a busy rail every few hundred KiB, so the
// count of bytes not acknowledged lags by up to that much).
func (r *Rail[T]) Lane(now int64, up bool) Lane {
	rate := r.rate
	stale := rate > 0 && now-r.rateAt > int64(RateTrust)
	flying := r.flying
	if rate > 0 && flying > 0 && now > r.lastAck {
		flying -= min(flying, int64(rate/8*float64(now-r.lastAck)/1e9))
	}
	if rate <= 0 {
		rate = r.cfg.Nominal
	}
	return Lane{Up: up, Rate: rate, Backlog: r.queued + flying, Stale: stale}
}

// MinPlanTime is the shortest message, in time on all the rails at once,
// that the planner plans: a shorter one is as long as the delays of the
// kernel and the acknowledgements (about a millisecond) that the plan
// cannot see, and a scheduler that learns from each segment's delay
// places it as well (the simulator's 64-rank allreduce on 1-10 Gbit/s
// rails with bursts of load: 0.47x shortestqueue's time planned, 0.28x
// not).
const MinPlanTime = 2 * time.Millisecond

// Plannable reports whether a message of n bytes is for the planner: every
// lane that is up has a rate (measured, or nominal; before Resolve), and
// the message takes at least MinPlanTime on all of them at once.
// Otherwise it is left to the scheduler, which learns by other means
// while a rate is unknown (and its placement gives the rail the backlog a
// rate is measured from).
func Plannable(n int64, lanes []Lane) bool {
	var rate float64
	for _, l := range lanes {
		if !l.Up {
			continue
		}
		if !(l.Rate > 0) {
			return false
		}
		rate += l.Rate
	}
	return rate > 0 && float64(n)*8/rate >= MinPlanTime.Seconds()
}

// Resolve settles the rates of the lanes that are up, in place, and
// returns lanes. An unknown rate takes the smallest rate known and fresh
// (a rail not yet measured gets a modest share, enough to measure it),
// or 1 when none is (an equal split); a stale rate is raised to that
// smallest fresh rate if it is below (a rail measured slow long ago gets
// enough to be measured again: the tail moves bound the cost if it still
// is).
func Resolve(lanes []Lane) []Lane {
	low := 0.0
	for _, l := range lanes {
		if l.Up && l.Rate > 0 && !l.Stale && (low == 0 || l.Rate < low) {
			low = l.Rate
		}
	}
	if low == 0 {
		for _, l := range lanes { // every known rate is stale: the lowest
			if l.Up && l.Rate > 0 && (low == 0 || l.Rate < low) {
				low = l.Rate
			}
		}
	}
	if low == 0 {
		low = 1
	}
	for i := range lanes {
		if lanes[i].Up && (!(lanes[i].Rate > 0) || (lanes[i].Stale && lanes[i].Rate < low)) {
			lanes[i].Rate = low
		}
	}
	return lanes
}

// Finish is when lane l is expected to have moved its backlog and extra
// more bytes, in seconds from now; +Inf-like (a large number) for a lane
// that is down or has no rate.
func (l Lane) Finish(extra int64) float64 {
	if !l.Up || !(l.Rate > 0) {
		return 1e300
	}
	return float64(l.Backlog+extra) * 8 / l.Rate
}

// Split divides n bytes among lanes in whole units of unit bytes (the
// wire's segment size: a frame starts at a multiple of it) so that every
// lane given a share is expected to finish at about the same time
// (water-filling over the lanes' backlogs and rates, then the units
// rounded so that the latest finish is as early as it can be), and
// appends the shares, one per lane, to shares[:0]. Every share is a
// multiple of unit but one, the lane that carries the message's last,
// partial unit (when n is not a multiple of unit): its range must come
// last. A lane that is down gets 0, and so does a lane whose share would
// be below minShare bytes (it is already busy past the others' finish, or
// too slow to matter); the rest is planned again without it. The shares
// sum to n exactly and at least one lane gets a share when any is up
// (n > 0). Rates must be resolved (see Resolve); a lane that is up with
// no rate gets nothing.
func Split(n, unit int64, lanes []Lane, minShare int64, shares []int64) []int64 {
	shares = shares[:0]
	for range lanes {
		shares = append(shares, 0)
	}
	if n <= 0 {
		return shares
	}
	unit = max(unit, 1)
	// in: lanes still in the plan (at most 64 rails, as wire allows).
	var in uint64
	for i, l := range lanes {
		if l.Up && l.Rate > 0 && i < 64 {
			in |= 1 << i
		}
	}
	if in == 0 {
		return shares
	}
	x := make([]float64, len(lanes))
	for {
		var backlog, rate float64
		for i, l := range lanes {
			if in&(1<<i) != 0 {
				backlog += float64(l.Backlog)
				rate += l.Rate / 8
			}
		}
		t := (float64(n) + backlog) / rate // the common finish, in seconds
		drop, low := -1, 0.0
		for i, l := range lanes {
			if in&(1<<i) == 0 {
				continue
			}
			x[i] = l.Rate/8*t - float64(l.Backlog)
			if x[i] < float64(minShare) && (drop < 0 || x[i] < low) {
				drop, low = i, x[i]
			}
		}
		if drop < 0 || in == 1<<drop {
			break
		}
		in &^= 1 << drop
	}
	// Whole units: round down, then each unit left to the lane that
	// finishes soonest with it.
	units := (n + unit - 1) / unit
	var sum int64
	for i := range lanes {
		if in&(1<<i) != 0 {
			shares[i] = max(int64(x[i]/float64(unit)), 0)
			sum += shares[i]
		}
	}
	for ; sum > units; sum-- { // float error: take from the latest
		late := pick(lanes, shares, in, unit, true)
		shares[late]--
	}
	for ; sum < units; sum++ {
		shares[pick(lanes, shares, in, unit, false)]++
	}
	// The last unit is partial: the lane that finishes last carries it.
	partial := -1
	if n%unit != 0 {
		partial = pick(lanes, shares, in, unit, true)
	}
	for i := range shares {
		shares[i] *= unit
	}
	if partial >= 0 {
		shares[partial] -= unit - n%unit
	}
	return shares
}

// pick returns the lane of in (with units units each) that finishes last
// with what it has (latest) or first with one unit more.
func pick(lanes []Lane, units []int64, in uint64, unit int64, latest bool) int {
	best, bt := -1, 0.0
	for i, l := range lanes {
		if in&(1<<i) == 0 || (latest && units[i] == 0) {
			continue
		}
		var t float64
		if latest {
			t = l.Finish(units[i] * unit)
		} else {
			t = l.Finish((units[i] + 1) * unit)
		}
		if best < 0 || (latest && t > bt) || (!latest && t < bt) {
			best, bt = i, t
		}
	}
	return best
}

// Moves reports whether a segment of size bytes at the end of lane
// from's queue (counted in from's Backlog) should move to lane to: to
// would finish it before from finishes even without it. The margin of
// that segment's time on from keeps estimates a few per cent off from
// moving segments where they end later; and a segment moved so never
// comes back.
func Moves(from, to Lane, size int64) bool {
	if !to.Up || !(to.Rate > 0) || size <= 0 || from.Backlog < size {
		return false
	}
	return to.Finish(size) < from.Finish(-size)
}
