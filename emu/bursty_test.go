package emu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBursty(t *testing.T) {
	const horizon = 200 * time.Second
	a := Bursty(rand.New(rand.NewPCG(1, 2)), 3, 300*time.Millisecond, 100*time.Millisecond, 0.5, 0.9, horizon)
	b := Bursty(rand.New(rand.NewPCG(1, 2)), 3, 300*time.Millisecond, 100*time.Millisecond, 0.5, 0.9, horizon)
	if !slices.Equal(a, b) {
		t.Fatal("same seed, different schedules")
	}
	if a[0].At != 0 || a[len(a)-1].At >= horizon {
		t.Fatalf("schedule spans %v..%v, want from 0 to before %v", a[0].At, a[len(a)-1].At, horizon)
	}
	var busy time.Duration
	for i, l := range a {
		if l.Rail != 3 || (l.Fraction != 0 && (l.Fraction < 0.5 || l.Fraction > 0.9)) {
			t.Fatalf("step %d: %+v", i, l)
		}
		if i > 0 && (l.Fraction == 0) == (a[i-1].Fraction == 0) {
			t.Fatalf("steps %d and %d are both busy or both idle", i-1, i)
		}
		if i+1 < len(a) && l.Fraction > 0 {
			busy += a[i+1].At - l.At
		}
	}
	if share := float64(busy) / float64(horizon); math.Abs(share-0.75) > 0.05 {
		t.Fatalf("busy %.2f of the time, want about 0.75", share)
	}
	// The profile built from it offers the capacity those steps leave.
	p := NewProfile(100e6, a)
	if r := p.RateAt(a[1].At); r != 100e6*(1-a[1].Fraction) {
		t.Fatalf("rate at step 1: %v", r)
	}
}
