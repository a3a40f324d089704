package emu

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestParsePattern(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Pattern
	}{
		{"off", Pattern{Kind: PatternOff}},
		{"", Pattern{Kind: PatternOff}},
		{"bursty", Pattern{Kind: PatternBursty, Busy: DefaultBusy, Idle: DefaultIdle, Min: DefaultLoadMin, Max: DefaultLoadMax}},
		{"bursty:busy=1s,load=0.2:0.4,seed=7", Pattern{Kind: PatternBursty, Busy: time.Second, Idle: DefaultIdle, Min: 0.2, Max: 0.4, Seed: 7}},
		{"Phases:calm=2s,congested=500ms", Pattern{Kind: PatternPhases, Busy: DefaultBusy, Idle: DefaultIdle, Min: DefaultLoadMin, Max: DefaultLoadMax, Calm: 2 * time.Second, Congested: 500 * time.Millisecond}},
		{"phases:offset=1.5", Pattern{Kind: PatternPhases, Busy: DefaultBusy, Idle: DefaultIdle, Min: DefaultLoadMin, Max: DefaultLoadMax, Calm: DefaultCalm, Congested: DefaultCongested, Offset: 1500 * time.Millisecond}},
		{"phases:offset=SEED,seed=4", Pattern{Kind: PatternPhases, Busy: DefaultBusy, Idle: DefaultIdle, Min: DefaultLoadMin, Max: DefaultLoadMax, Calm: DefaultCalm, Congested: DefaultCongested, OffsetFromSeed: true, Seed: 4}},
	} {
		got, err := ParsePattern(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParsePattern(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		if back, err := ParsePattern(got.String()); err != nil || back != got {
			t.Errorf("round trip of %q through %q: %+v, %v", tc.in, got.String(), back, err)
		}
	}
	for _, bad := range []string{"storm", "off:busy=1s", "bursty:calm=1s", "bursty:busy", "bursty:busy=fast", "bursty:load=0.5",
		"bursty:load=0.9:0.5", "bursty:load=0:0.5", "bursty:load=0.5:1", "bursty:idle=0s", "bursty:busy=2h", "phases:calm=0s", "bursty:seed=-1", "bursty:color=red",
		"bursty:offset=1s", "phases:offset=-1s", "phases:offset=later", "phases:offset=3h"} {
		if p, err := ParsePattern(bad); err == nil {
			t.Errorf("ParsePattern(%q) = %+v, want an error", bad, p)
		}
	}
}

// TestPatternLoads: off has no steps; bursty is Bursty's; phases has no
// load in every calm phase and bursty load in the congested ones; the
// same rng state gives the same schedule.
func TestPatternLoads(t *testing.T) {
	if l := (Pattern{Kind: PatternOff}).Loads(rand.New(rand.NewPCG(1, 1)), 0, time.Minute); l != nil {
		t.Fatalf("off: %v", l)
	}
	b, _ := ParsePattern("bursty:seed=3")
	if got, want := b.Loads(rand.New(rand.NewPCG(3, 1)), 1, time.Minute), Bursty(rand.New(rand.NewPCG(3, 1)), 1, DefaultBusy, DefaultIdle, DefaultLoadMin, DefaultLoadMax, time.Minute); !slices.Equal(got, want) {
		t.Fatal("bursty differs from Bursty")
	}
	p, _ := ParsePattern("phases:calm=2s,congested=1s,busy=100ms,idle=50ms")
	loads := p.Loads(rand.New(rand.NewPCG(5, 5)), 2, 30*time.Second)
	if !slices.Equal(loads, p.Loads(rand.New(rand.NewPCG(5, 5)), 2, 30*time.Second)) {
		t.Fatal("same seed, different schedule")
	}
	prof := NewProfile(100e6, loads)
	busy := 0
	for ms := 0; ms < 30000; ms += 10 {
		at := time.Duration(ms) * time.Millisecond
		f, _ := prof.fractionAt(at)
		inCalm := at%(3*time.Second) < 2*time.Second
		if inCalm && f != 0 {
			t.Fatalf("load %v at %v, in a calm phase", f, at)
		}
		if !inCalm && f > 0 {
			busy++
		}
	}
	// Busy 100 ms, idle 50 ms: about two thirds of the congested time.
	if busy < 300 || busy > 900 {
		t.Fatalf("%d of 1000 congested samples busy", busy)
	}
	for _, l := range loads {
		if l.Rail != 2 || l.Fraction != 0 && (l.Fraction < DefaultLoadMin || l.Fraction > DefaultLoadMax) {
			t.Fatalf("step %+v", l)
		}
	}
}

func TestPatternInCalm(t *testing.T) {
	ph := Pattern{Kind: PatternPhases, Calm: 2 * time.Second, Congested: time.Second}
	for _, c := range []struct {
		p    Pattern
		at   time.Duration
		want bool
	}{
		{Pattern{}, time.Hour, true},
		{Pattern{Kind: PatternOff}, 0, true},
		{Pattern{Kind: PatternBursty}, 0, false},
		{ph, 0, true},
		{ph, 2*time.Second - 1, true},
		{ph, 2 * time.Second, false},
		{ph, 3*time.Second - 1, false},
		{ph, 3 * time.Second, true},
		{ph, 31 * time.Second, true}, // 31 = 10 cycles + 1 s
		{ph, 32500 * time.Millisecond, false},
		{Pattern{Kind: PatternPhases, Calm: 2 * time.Second, Congested: time.Second, Offset: 2 * time.Second}, 0, false},
		{Pattern{Kind: PatternPhases, Calm: 2 * time.Second, Congested: time.Second, Offset: 2 * time.Second}, time.Second, true},
		{Pattern{Kind: PatternPhases, Calm: 2 * time.Second, Congested: time.Second, Offset: 5 * time.Second}, 0, false}, // wraps: 2 s in
	} {
		if got := c.p.InCalm(c.at); got != c.want {
			t.Errorf("%v.InCalm(%v) = %v, want %v", c.p, c.at, got, c.want)
		}
	}
}

// TestPatternOffset: a phases schedule started Offset into its cycle is,
// from time 0 on, the schedule without offset seen Offset later, for any
// offset (same draws per cycle); InCalm agrees with it; offsets drawn from
// the seed fall inside the cycle and differ between seeds.
func TestPatternOffset(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		calm := time.Duration(rapid.IntRange(10, 3000).Draw(t, "calm_ms")) * time.Millisecond
		cong := time.Duration(rapid.IntRange(10, 3000).Draw(t, "congested_ms")) * time.Millisecond
		off := time.Duration(rapid.Int64Range(0, int64(3*(calm+cong))).Draw(t, "offset"))
		seed := rapid.Uint64().Draw(t, "seed")
		p, err := Pattern{Kind: PatternPhases, Calm: calm, Congested: cong, Busy: 50 * time.Millisecond, Idle: 30 * time.Millisecond}.Validate()
		if err != nil {
			t.Fatal(err)
		}
		q := p
		q.Offset = off
		horizon := 4 * (calm + cong)
		base := NewProfile(100e6, p.Loads(rand.New(rand.NewPCG(seed, 1)), 0, horizon+off+calm+cong))
		shifted := NewProfile(100e6, q.Loads(rand.New(rand.NewPCG(seed, 1)), 0, horizon))
		wrapped := off % (calm + cong)
		for i := range 200 {
			at := horizon * time.Duration(i) / 200
			got, _ := shifted.fractionAt(at)
			want, _ := base.fractionAt(at + wrapped)
			if got != want {
				t.Fatalf("offset %v: load %v at %v, want %v (the unshifted schedule's at %v)", off, got, at, want, at+wrapped)
			}
			if q.InCalm(at) != p.InCalm(at+wrapped) {
				t.Fatalf("offset %v: InCalm(%v) = %v, unshifted at %v says %v", off, at, q.InCalm(at), at+wrapped, p.InCalm(at+wrapped))
			}
			if q.InCalm(at) && got != 0 {
				t.Fatalf("offset %v: load %v at %v in a calm phase", off, got, at)
			}
		}
	})
	p := Pattern{Kind: PatternPhases, Calm: 3 * time.Second, Congested: 3 * time.Second, OffsetFromSeed: true}
	seen := map[time.Duration]bool{}
	for seed := range uint64(20) {
		p.Seed = seed
		o := p.PhaseOffset()
		if o < 0 || o >= 6*time.Second {
			t.Fatalf("seed %d: offset %v outside the 6 s cycle", seed, o)
		}
		seen[o] = true
	}
	if len(seen) < 15 {
		t.Fatalf("20 seeds drew only %d different offsets", len(seen))
	}
}
