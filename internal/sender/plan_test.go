package sender

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

func TestSplitTable(t *testing.T) {
	const M = 1 << 20
	tests := []struct {
		name     string
		n        int64
		lanes    []Lane
		minShare int64
		want     []int64
	}{
		{"idle, rates 4:2:1", 7 * M, []Lane{{true, 4e6, 0, false}, {true, 2e6, 0, false}, {true, 1e6, 0, false}}, 0, []int64{4 * M, 2 * M, 1 * M}},
		{"backlog on the fast rail", 6 * M, []Lane{{true, 2e6, 2 * M, false}, {true, 2e6, 0, false}}, 0, []int64{2 * M, 4 * M}},
		{"a rail busy past the others' finish gets nothing", M, []Lane{{true, 1e6, 10 * M, false}, {true, 1e6, 0, false}}, 0, []int64{0, M}},
		{"a rail that is down gets nothing", 3 * M, []Lane{{false, 8e6, 0, false}, {true, 1e6, 0, false}, {true, 2e6, 0, false}}, 0, []int64{0, M, 2 * M}},
		{"below minShare is dropped", 100 << 10, []Lane{{true, 100e6, 0, false}, {true, 1e6, 0, false}}, 4 << 10, []int64{100 << 10, 0}},
		{"nothing up", M, []Lane{{false, 1e6, 0, false}}, 0, []int64{0}},
		{"zero bytes", 0, []Lane{{true, 1e6, 0, false}}, 0, []int64{0}},
		{"every lane below minShare: the one left takes all", 10, []Lane{{true, 1e6, 0, false}, {true, 1e6, 0, false}}, 1 << 20, []int64{0, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Split(tt.n, 1, tt.lanes, tt.minShare, nil)
			for i := range tt.want {
				if got[i] != tt.want[i] {
					t.Fatalf("Split = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestResolve(t *testing.T) {
	l := Resolve([]Lane{{true, 0, 0, false}, {true, 5e6, 0, false}, {true, 2e6, 0, false}, {false, 0, 0, false}})
	if l[0].Rate != 2e6 || l[1].Rate != 5e6 || l[3].Rate != 0 {
		t.Fatalf("Resolve = %+v: an unknown rate takes the smallest known, a lane that is down stays 0", l)
	}
	l = Resolve([]Lane{{Up: true, Rate: 1e6, Stale: true}, {Up: true, Rate: 3e6}, {Up: true, Rate: 9e6, Stale: true}})
	if l[0].Rate != 3e6 || l[2].Rate != 9e6 {
		t.Fatalf("Resolve = %+v: a stale rate below the smallest fresh one is raised to it, one above is kept", l)
	}
	l = Resolve([]Lane{{true, 0, 0, false}, {true, 0, 0, false}})
	if l[0].Rate != 1 || l[1].Rate != 1 {
		t.Fatalf("Resolve with nothing known = %+v, want equal rates", l)
	}
}

// bestFinish is the reference model: the earliest time by which the lanes
// can move n more bytes, by bisection on the finish time t (feasible when
// the lanes' room before t, sum of max(0, rate*t - backlog), holds n).
func bestFinish(n int64, lanes []Lane) float64 {
	lo, hi := 0.0, 1.0
	room := func(t float64) float64 {
		s := 0.0
		for _, l := range lanes {
			if l.Up {
				s += math.Max(0, l.Rate/8*t-float64(l.Backlog))
			}
		}
		return s
	}
	for room(hi) < float64(n) {
		hi *= 2
	}
	for range 200 {
		mid := (lo + hi) / 2
		if room(mid) >= float64(n) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

func TestSplitProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.IntRange(1, 8).Draw(t, "rails")
		lanes := make([]Lane, k)
		up := 0
		for i := range lanes {
			lanes[i] = Lane{
				Up:      rapid.IntRange(0, 4).Draw(t, "up") > 0,
				Rate:    float64(rapid.Int64Range(1e5, 1e10).Draw(t, "rate")),
				Backlog: rapid.Int64Range(0, 64<<20).Draw(t, "backlog"),
			}
			if lanes[i].Up {
				up++
			}
		}
		n := rapid.Int64Range(0, 1<<30).Draw(t, "n")
		minShare := rapid.Int64Range(0, 64<<10).Draw(t, "minShare")
		unit := rapid.SampledFrom([]int64{1, 4096, 64 << 10}).Draw(t, "unit")
		shares := Split(n, unit, lanes, minShare, nil)
		var sum int64
		used := 0
		makespan := 0.0
		for i, s := range shares {
			if s < 0 {
				t.Fatalf("share %d = %d < 0", i, s)
			}
			if s > 0 && !lanes[i].Up {
				t.Fatalf("lane %d is down and got %d", i, s)
			}
			if s > 0 {
				used++
				makespan = math.Max(makespan, lanes[i].Finish(s))
			}
			sum += s
		}
		if up == 0 || n == 0 {
			if sum != 0 {
				t.Fatalf("sum %d with nothing to plan", sum)
			}
			return
		}
		if sum != n {
			t.Fatalf("shares %v sum to %d, want %d", shares, sum, n)
		}
		// Whole units, but for one lane's last partial unit.
		partial := 0
		for _, s := range shares {
			if s%unit != 0 {
				partial++
			}
		}
		if partial > 1 || (partial == 1) != (n%unit != 0) {
			t.Fatalf("shares %v: %d not whole units of %d (n %d)", shares, partial, unit, n)
		}
		if minShare == 0 {
			// Water-filling is optimal: no split finishes sooner, within
			// a unit per lane (rounding) and float error.
			best := bestFinish(n, lanes)
			slack := 0.0
			for _, l := range lanes {
				if l.Up {
					slack = math.Max(slack, float64(unit+8)*8/l.Rate)
				}
			}
			if makespan > best*(1+1e-9)+slack {
				t.Fatalf("makespan %.9f s, the best split finishes at %.9f s (shares %v)", makespan, best, shares)
			}
		}
	})
}

func TestMovesNeverBack(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		from := Lane{Up: true, Rate: float64(rapid.Int64Range(1e5, 1e10).Draw(t, "rf")), Backlog: rapid.Int64Range(0, 64<<20).Draw(t, "bf")}
		to := Lane{Up: true, Rate: float64(rapid.Int64Range(1e5, 1e10).Draw(t, "rt")), Backlog: rapid.Int64Range(0, 64<<20).Draw(t, "bt")}
		size := rapid.Int64Range(1, 1<<20).Draw(t, "size")
		if !Moves(from, to, size) {
			return
		}
		// After the move, moving it back must not pay.
		from.Backlog -= size
		to.Backlog += size
		if Moves(to, from, size) {
			t.Fatalf("a segment moved would move back: %+v %+v %d", from, to, size)
		}
	})
}
