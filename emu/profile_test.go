package emu

import (
	"math"
	"testing"
	"time"
)

const sec = time.Second

func near(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))+1e-9
}

func TestProfileRateAt(t *testing.T) {
	p := NewProfile(100e6, []Load{
		{Fraction: 0, At: 8 * sec},
		{Fraction: 0.5, At: 4 * sec},
		{Fraction: 0.25, At: 6 * sec},
		{Fraction: 0.75, At: 6 * sec}, // same instant: the later one wins
	})
	for _, tc := range []struct {
		t    time.Duration
		want float64
	}{
		{-sec, 100e6},
		{0, 100e6},
		{4*sec - 1, 100e6},
		{4 * sec, 50e6},
		{5 * sec, 50e6},
		{6 * sec, 25e6},
		{8*sec - 1, 25e6},
		{8 * sec, 100e6},
		{100 * sec, 100e6},
	} {
		if got := p.RateAt(tc.t); got != tc.want {
			t.Errorf("RateAt(%v) = %v, want %v", tc.t, got, tc.want)
		}
	}
	if got := (Profile{RateBps: 10}).RateAt(0); got != 10 {
		t.Errorf("no steps: RateAt = %v", got)
	}
	clamped := Profile{RateBps: 10, Steps: []Load{{Fraction: 2}, {Fraction: -1, At: sec}, {Fraction: math.NaN(), At: 2 * sec}}}
	for _, tc := range []struct {
		t    time.Duration
		want float64
	}{{0, 0}, {sec, 10}, {2 * sec, 10}} {
		if got := clamped.RateAt(tc.t); got != tc.want {
			t.Errorf("clamped RateAt(%v) = %v, want %v", tc.t, got, tc.want)
		}
	}
}

func TestProfileMeanRate(t *testing.T) {
	p := NewProfile(100e6, []Load{{Fraction: 0.5, At: 4 * sec}, {Fraction: 0, At: 8 * sec}})
	for _, tc := range []struct {
		from, to time.Duration
		want     float64
	}{
		{0, 4 * sec, 100e6},
		{4 * sec, 8 * sec, 50e6},
		{0, 8 * sec, 75e6},
		{2 * sec, 6 * sec, 75e6},
		{0, 10 * sec, (4*100e6 + 4*50e6 + 2*100e6) / 10},
		{6 * sec, 12 * sec, (2*50e6 + 4*100e6) / 6},
		{-4 * sec, 4 * sec, 100e6},
		{5 * sec, 5 * sec, 50e6}, // empty interval: the rate at from
		{9 * sec, 5 * sec, 100e6},
		{4*sec - time.Millisecond, 4*sec + time.Millisecond, 75e6},
	} {
		if got := p.MeanRate(tc.from, tc.to); !near(got, tc.want) {
			t.Errorf("MeanRate(%v, %v) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
	flat := Profile{RateBps: 1e9}
	if got := flat.MeanRate(0, 3*sec); got != 1e9 {
		t.Errorf("flat MeanRate = %v", got)
	}
}

// TestProfileAdvance checks that advance inverts bitsBetween.
func TestProfileAdvance(t *testing.T) {
	p := NewProfile(8e6, []Load{{Fraction: 0.5, At: sec}, {Fraction: 0.75, At: 2 * sec}, {Fraction: 0, At: 3 * sec}})
	for _, from := range []time.Duration{0, sec / 2, sec, 2500 * time.Millisecond, 5 * sec} {
		for _, bits := range []float64{1, 1e3, 4e6, 8e6, 1.23e7, 5e7} {
			to, ok := p.advance(from, bits)
			if !ok {
				t.Fatalf("advance(%v, %v) not ok", from, bits)
			}
			if got := p.bitsBetween(from, to); got < bits*(1-1e-12) || p.bitsBetween(from, to-1) >= bits {
				t.Errorf("advance(%v, %v) = %v: bits offered %v (one ns earlier %v)", from, bits, to, got, p.bitsBetween(from, to-1))
			}
		}
	}
	// 4 Mbit from 0: 1 s at 8 Mbit/s... is 8 Mbit; 4 Mbit takes 0.5 s.
	if to, _ := p.advance(0, 4e6); to != sec/2 {
		t.Errorf("advance(0, 4e6) = %v, want 500ms", to)
	}
	// 8e6 + 4e6 + 2e6 = 14e6 bits up to 3 s; 2e6 more at 8 Mbit/s = 0.25 s.
	if to, _ := p.advance(0, 16e6); to != 3250*time.Millisecond {
		t.Errorf("advance(0, 16e6) = %v, want 3.25s", to)
	}
	stopped := Profile{RateBps: 8, Steps: []Load{{Fraction: 1, At: sec}}}
	if _, ok := stopped.advance(0, 100); ok {
		t.Error("advance on a rail that stops: ok")
	}
	paused := Profile{RateBps: 8, Steps: []Load{{Fraction: 1, At: 0}, {Fraction: 0, At: 2 * sec}}}
	if to, ok := paused.advance(0, 8); !ok || to != 3*sec {
		t.Errorf("advance on a paused rail = %v, %v; want 3s", to, ok)
	}
}
