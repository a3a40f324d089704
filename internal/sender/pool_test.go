package sender

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestPool(t *testing.T) {
	sec := int64(time.Second)
	type add struct {
		at   int64
		rate float64
	}
	for _, tc := range []struct {
		name    string
		adds    []add
		now     int64
		want    float64
		samples uint64
	}{
		{"empty", nil, 0, 0, 0},
		{"first sample is the rate", []add{{0, 100e6}}, 0, 100e6, 1},
		{"later ones move it by PoolGain", []add{{0, 100e6}, {1, 200e6}}, 1, 100e6 + PoolGain*100e6, 2},
		{"non-positive and NaN ignored", []add{{0, 100e6}, {1, 0}, {2, -5}, {3, math.NaN()}}, 3, 100e6, 1},
		{"fresh for RateTrust", []add{{0, 100e6}}, int64(RateTrust), 100e6, 1},
		{"stale after RateTrust", []add{{0, 100e6}}, int64(RateTrust) + 1, 0, 1},
		{"the first sample's time is its own, before 0 too", []add{{-2 * int64(RateTrust), 100e6}}, 0, 0, 1},
		{"a newer sample refreshes it", []add{{0, 100e6}, {2 * sec, 100e6}}, 2*sec + int64(RateTrust)/2, 100e6, 2},
		{"an older timestamp does not move the freshness back", []add{{2 * sec, 100e6}, {0, 100e6}}, 2*sec + int64(RateTrust)/2, 100e6, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p Pool
			for _, a := range tc.adds {
				p.Add(a.at, a.rate)
			}
			if got := p.Rate(tc.now); math.Abs(got-tc.want) > 1e-6 {
				t.Errorf("Rate(%d) = %.0f, want %.0f", tc.now, got, tc.want)
			}
			if got := p.Samples(); got != tc.samples {
				t.Errorf("Samples() = %d, want %d", got, tc.samples)
			}
		})
	}
}

// TestPoolBetweenSamples checks the pool against its reference: a moving
// average stays within the smallest and largest sample it took, and a
// pool given one rate over and over has that rate.
func TestPoolBetweenSamples(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		samples := rapid.SliceOfN(rapid.Float64Range(1e3, 1e11), 1, 50).Draw(t, "samples")
		var p Pool
		lo, hi := math.Inf(1), math.Inf(-1)
		for i, s := range samples {
			p.Add(int64(i), s)
			lo, hi = min(lo, s), max(hi, s)
			if r := p.Rate(int64(i)); r < lo*(1-1e-12) || r > hi*(1+1e-12) {
				t.Fatalf("rate %g after %d samples outside [%g, %g]", r, i+1, lo, hi)
			}
		}
		var q Pool
		for i := range len(samples) {
			q.Add(int64(i), samples[0])
		}
		if r := q.Rate(int64(len(samples))); math.Abs(r-samples[0]) > samples[0]*1e-12 {
			t.Fatalf("a pool of %g only: rate %g", samples[0], r)
		}
	})
}
