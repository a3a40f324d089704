package sched

import (
	"errors"
	"math"
	"strings"
	"testing"
)

const seg = 64 << 10

// up returns an up rail with room and no rate information.
func up() RailState { return RailState{Up: true, QueueCap: 4} }

// down returns a rail that is not up (with room, so only Up matters).
func down() RailState { return RailState{Up: false, QueueCap: 4} }

// full returns an up rail whose queue is full.
func full() RailState { return RailState{Up: true, Queued: 4, QueueCap: 4, QueuedBytes: 4 * seg} }

func mustNew(t testing.TB, name string, cfg Config) Scheduler {
	t.Helper()
	s, err := New(name, cfg)
	if err != nil {
		t.Fatalf("New(%q): %v", name, err)
	}
	if s.Name() != name {
		t.Fatalf("New(%q).Name() = %q", name, s.Name())
	}
	return s
}

// picks calls Pick n times on the same state and returns the picks.
func picks(s Scheduler, n int, rails []RailState) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = s.Pick(int64(i), seg, rails)
	}
	return out
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRegistered(t *testing.T) {
	names := Names()
	for _, want := range []string{NameRoundRobin, NameWeighted, NameShortestQueue} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("Names() = %v, missing %q", names, want)
		}
	}
}

func TestRoundRobin(t *testing.T) {
	tests := []struct {
		name  string
		rails []RailState
		want  []int
	}{
		{"all up cycles", []RailState{up(), up(), up()}, []int{0, 1, 2, 0, 1, 2, 0}},
		{"single rail", []RailState{up()}, []int{0, 0, 0}},
		{"skips down", []RailState{up(), down(), up(), down()}, []int{0, 2, 0, 2, 0}},
		{"only last up", []RailState{down(), down(), up()}, []int{2, 2, 2}},
		{"full rail still returned", []RailState{up(), full(), up()}, []int{0, 1, 2, 0, 1, 2}},
		{"all full still returned", []RailState{full(), full()}, []int{0, 1, 0, 1}},
		{"all down", []RailState{down(), down(), down()}, []int{-1, -1, -1}},
		{"no rails", nil, []int{-1, -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustNew(t, NameRoundRobin, Config{Rails: max(len(tc.rails), 1)})
			if got := picks(s, len(tc.want), tc.rails); !equalInts(got, tc.want) {
				t.Errorf("picks = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRoundRobinResumesAfterRailChanges(t *testing.T) {
	s := mustNew(t, NameRoundRobin, Config{Rails: 4})
	rails := []RailState{up(), up(), up(), up()}
	if got := picks(s, 2, rails); !equalInts(got, []int{0, 1}) {
		t.Fatalf("picks = %v", got)
	}
	// Rail 2 goes down: its turn passes to 3, then the cycle goes on.
	rails[2] = down()
	if got := picks(s, 3, rails); !equalInts(got, []int{3, 0, 1}) {
		t.Fatalf("after rail 2 down: picks = %v, want [3 0 1]", got)
	}
	// Everything down: -1, and the turn does not move.
	all := []RailState{down(), down(), down(), down()}
	if got := s.Pick(0, seg, all); got != -1 {
		t.Fatalf("all down: pick = %d, want -1", got)
	}
	rails[2] = up()
	if got := picks(s, 4, rails); !equalInts(got, []int{2, 3, 0, 1}) {
		t.Fatalf("after rail 2 up: picks = %v, want [2 3 0 1]", got)
	}
	// Fewer rails than the turn pointer: restarts at 0.
	if got := picks(s, 2, rails[:1]); !equalInts(got, []int{0, 0}) {
		t.Fatalf("shrunk rails: picks = %v, want [0 0]", got)
	}
}

func TestWeighted(t *testing.T) {
	tests := []struct {
		name  string
		bw    []float64
		rails []RailState
		want  []int
	}{
		{"equal weights alternate", []float64{1, 1}, []RailState{up(), up()}, []int{0, 1, 0, 1}},
		{"2:1 smooth", []float64{2, 1}, []RailState{up(), up()}, []int{0, 1, 0, 0, 1, 0}},
		{"4:2:1 smooth", []float64{4, 2, 1}, []RailState{up(), up(), up()}, []int{0, 1, 0, 2, 0, 1, 0}},
		{"skips down", []float64{1, 5, 1}, []RailState{up(), down(), up()}, []int{0, 2, 0, 2}},
		{"full rail still returned", []float64{1, 1}, []RailState{full(), up()}, []int{0, 1, 0, 1}},
		{"all down", []float64{1, 2}, []RailState{down(), down()}, []int{-1, -1}},
		{"no rails", []float64{1}, nil, []int{-1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustNew(t, NameWeighted, Config{Rails: len(tc.bw), Bandwidths: tc.bw})
			if got := picks(s, len(tc.want), tc.rails); !equalInts(got, tc.want) {
				t.Errorf("picks = %v, want %v", got, tc.want)
			}
		})
	}
}

// byteShares runs n picks of the given sizes and returns each rail's share
// of the bytes.
func byteShares(t *testing.T, s Scheduler, rails []RailState, n int, size func(i int) int) []float64 {
	t.Helper()
	bytes := make([]float64, len(rails))
	var total float64
	for i := range n {
		sz := size(i)
		r := s.Pick(int64(i), sz, rails)
		if r < 0 || !rails[r].Up {
			t.Fatalf("pick %d = %d", i, r)
		}
		bytes[r] += float64(sz)
		total += float64(sz)
	}
	for i := range bytes {
		bytes[i] /= total
	}
	return bytes
}

func checkShares(t *testing.T, got, want []float64, tol float64) {
	t.Helper()
	for i := range want {
		if math.Abs(got[i]-want[i]) > tol*want[i] && !(want[i] == 0 && got[i] == 0) {
			t.Errorf("rail %d: byte share %.5f, want %.5f (within %.0f%%); all shares %v",
				i, got[i], want[i], tol*100, got)
		}
	}
}

func TestWeightedByteSharesConverge(t *testing.T) {
	bw := []float64{200e6, 100e6, 50e6}
	want := []float64{4.0 / 7, 2.0 / 7, 1.0 / 7}
	rails := []RailState{up(), up(), up()}
	// One rail full must not change a static split.
	railsFull := []RailState{up(), full(), up()}
	sizes := map[string]func(int) int{
		"fixed":    func(int) int { return seg },
		"variable": func(i int) int { return 1 + (i*7919)%seg }, // deterministic spread over [1, seg]
		"mixed":    func(i int) int { return []int{seg, 1500, 9000, 100}[i%4] },
	}
	for name, size := range sizes {
		t.Run(name, func(t *testing.T) {
			s := mustNew(t, NameWeighted, Config{Rails: 3, Bandwidths: bw})
			checkShares(t, byteShares(t, s, rails, 10000, size), want, 0.01)
			s = mustNew(t, NameWeighted, Config{Rails: 3, Bandwidths: bw})
			checkShares(t, byteShares(t, s, railsFull, 10000, size), want, 0.01)
		})
	}
	t.Run("renormalised without rail 0", func(t *testing.T) {
		s := mustNew(t, NameWeighted, Config{Rails: 3, Bandwidths: bw})
		got := byteShares(t, s, []RailState{down(), up(), up()}, 10000, sizes["variable"])
		checkShares(t, got, []float64{0, 2.0 / 3, 1.0 / 3}, 0.01)
	})
	t.Run("rail goes down and comes back", func(t *testing.T) {
		s := mustNew(t, NameWeighted, Config{Rails: 3, Bandwidths: bw})
		byteShares(t, s, rails, 1000, sizes["variable"])
		byteShares(t, s, []RailState{up(), down(), up()}, 1000, sizes["variable"])
		checkShares(t, byteShares(t, s, rails, 10000, sizes["variable"]), want, 0.01)
	})
}

func TestShortestQueue(t *testing.T) {
	q := func(queued int, bytes int64, rate, nominal float64) RailState {
		return RailState{Up: true, Queued: queued, QueuedBytes: bytes, QueueCap: 8, RateBps: rate, NominalBps: nominal}
	}
	tests := []struct {
		name  string
		size  int
		rails []RailState
		want  int
	}{
		{"fewest bytes, no rates", seg, []RailState{q(3, 3*seg, 0, 0), q(1, seg, 0, 0), q(2, 2*seg, 0, 0)}, 1},
		{"tie goes to lowest index", seg, []RailState{q(2, seg, 0, 0), q(1, seg, 0, 0)}, 0},
		{"all empty", seg, []RailState{up(), up(), up()}, 0},
		{"faster rail drains first", seg, []RailState{
			q(1, seg, 100e6, 0),   // (1+1) seg / 100 Mb/s
			q(2, 2*seg, 400e6, 0), // (2+1) seg / 400 Mb/s: fastest to drain
			q(0, 0, 10e6, 0),      // 1 seg / 10 Mb/s
		}, 1},
		{"size counts", 10 * seg, []RailState{
			q(0, 0, 100e6, 0),      // 10 seg / 100 = 0.1
			q(4, 4*seg, 1000e6, 0), // 14 seg / 1000 = 0.014
		}, 1},
		{"nominal when rate unknown", seg, []RailState{q(1, seg, 0, 100e6), q(1, seg, 0, 200e6)}, 1},
		{"rate beats nominal", seg, []RailState{q(1, seg, 300e6, 100e6), q(1, seg, 0, 200e6)}, 0},
		{"NaN and Inf rates fall back to nominal", seg, []RailState{q(1, seg, math.NaN(), 100e6), q(1, seg, math.Inf(1), 200e6)}, 1},
		{"one rail without any rate: fewest bytes", seg, []RailState{q(2, 2*seg, 1e9, 0), q(1, seg, 0, 0), q(0, 0, 1e6, 0)}, 2},
		{"equal drain time tie lowest index", seg, []RailState{q(3, 3*seg, 200e6, 0), q(1, seg, 100e6, 0)}, 0},
		{"skips down", seg, []RailState{{Up: false, QueueCap: 8}, q(5, 5*seg, 0, 0)}, 1},
		{"skips full", seg, []RailState{full(), q(3, 3*seg, 0, 0)}, 1},
		{"full fast rail skipped", seg, []RailState{{Up: true, Queued: 8, QueueCap: 8, RateBps: 1e12}, q(7, 7*seg, 1e6, 0)}, 1},
		{"all full", seg, []RailState{full(), full()}, -1},
		{"all down", seg, []RailState{down(), down()}, -1},
		{"down and full", seg, []RailState{down(), full()}, -1},
		{"zero capacity is full", seg, []RailState{{Up: true}}, -1},
		{"no rails", seg, nil, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustNew(t, NameShortestQueue, Config{Rails: max(len(tc.rails), 1)})
			for range 3 { // stateless: the same answer every time
				if got := s.Pick(0, tc.size, tc.rails); got != tc.want {
					t.Fatalf("pick = %d, want %d", got, tc.want)
				}
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	good := []float64{200e6, 100e6}
	tests := []struct {
		name     string
		sched    string
		cfg      Config
		sentinel error
		contains []string
	}{
		{"unknown name", "nope", Config{Rails: 2}, ErrUnknown,
			[]string{`"nope"`, NameRoundRobin, NameWeighted, NameShortestQueue}},
		{"rails 0 roundrobin", NameRoundRobin, Config{}, ErrConfig, []string{"Rails", "0"}},
		{"rails 0 shortestqueue", NameShortestQueue, Config{Rails: 0}, ErrConfig, []string{"Rails", "0"}},
		{"rails negative weighted", NameWeighted, Config{Rails: -1, Bandwidths: good}, ErrConfig, []string{"Rails", "-1"}},
		{"negative segment size", NameRoundRobin, Config{Rails: 1, SegmentSize: -5}, ErrConfig, []string{"SegmentSize", "-5"}},
		{"weighted no bandwidths", NameWeighted, Config{Rails: 2}, ErrConfig, []string{"Bandwidths", "0", "2"}},
		{"weighted too many bandwidths", NameWeighted, Config{Rails: 1, Bandwidths: good}, ErrConfig, []string{"Bandwidths", "2", "1"}},
		{"weighted zero", NameWeighted, Config{Rails: 2, Bandwidths: []float64{1, 0}}, ErrConfig, []string{"Bandwidths[1]", "0"}},
		{"weighted negative", NameWeighted, Config{Rails: 2, Bandwidths: []float64{-3, 1}}, ErrConfig, []string{"Bandwidths[0]", "-3"}},
		{"weighted NaN", NameWeighted, Config{Rails: 2, Bandwidths: []float64{1, math.NaN()}}, ErrConfig, []string{"Bandwidths[1]", "NaN"}},
		{"weighted +Inf", NameWeighted, Config{Rails: 2, Bandwidths: []float64{math.Inf(1), 1}}, ErrConfig, []string{"Bandwidths[0]", "+Inf"}},
		{"weighted -Inf", NameWeighted, Config{Rails: 2, Bandwidths: []float64{1, math.Inf(-1)}}, ErrConfig, []string{"Bandwidths[1]", "-Inf"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.sched, tc.cfg)
			if err == nil {
				t.Fatalf("New(%q, %+v) = %v, want error", tc.sched, tc.cfg, s)
			}
			if s != nil {
				t.Errorf("New returned a scheduler with the error: %v", s)
			}
			if !errors.Is(err, tc.sentinel) {
				t.Errorf("error %q does not wrap %v", err, tc.sentinel)
			}
			if !strings.HasPrefix(err.Error(), "sched: ") {
				t.Errorf("error %q does not start with the package's name", err)
			}
			for _, sub := range tc.contains {
				if !strings.Contains(err.Error(), sub) {
					t.Errorf("error %q does not mention %q", err, sub)
				}
			}
		})
	}
}

func TestConfigValidateFillsDefaults(t *testing.T) {
	c := Config{Rails: 2, Seed: 7}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.SegmentSize != DefaultSegmentSize || c.Rand == nil {
		t.Errorf("Validate left %+v", c)
	}
	if err := (&Config{}).Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Rails = 0") {
		t.Errorf("zero Config: %v", err)
	}
}

func TestNewOK(t *testing.T) {
	for _, name := range []string{NameRoundRobin, NameShortestQueue} {
		mustNew(t, name, Config{Rails: 3})                            // needs nothing but Rails
		mustNew(t, name, Config{Rails: 2, Bandwidths: []float64{-1}}) // Bandwidths ignored
	}
	mustNew(t, NameWeighted, Config{Rails: 1, Bandwidths: []float64{1}})
}

func TestWeightedCopiesBandwidths(t *testing.T) {
	bw := []float64{1, 1}
	s := mustNew(t, NameWeighted, Config{Rails: 2, Bandwidths: bw})
	bw[0] = 1000 // must not change the built scheduler
	if got := picks(s, 4, []RailState{up(), up()}); !equalInts(got, []int{0, 1, 0, 1}) {
		t.Errorf("picks = %v, want [0 1 0 1]", got)
	}
}

// TestDeterministic: two schedulers built from the same Config make the same
// decisions on the same inputs.
func TestDeterministic(t *testing.T) {
	for _, name := range []string{NameRoundRobin, NameWeighted, NameShortestQueue} {
		cfg := Config{Rails: 4, Bandwidths: []float64{1e9, 2e8, 3e8, 4e7}, Seed: 7}
		a, b := mustNew(t, name, cfg), mustNew(t, name, cfg)
		rails := benchRails(4)
		for i := range 1000 {
			rails[i%4].Up = i%7 != 0
			rails[(i+1)%4].Queued = i % 5
			rails[(i+2)%4].QueuedBytes = int64(i*977) % (4 * seg)
			pa, pb := a.Pick(int64(i), 1+i%seg, rails), b.Pick(int64(i), 1+i%seg, rails)
			if pa != pb {
				t.Fatalf("%s: pick %d: %d != %d", name, i, pa, pb)
			}
		}
	}
}

func TestWeightedHugeBandwidths(t *testing.T) {
	bw := []float64{math.MaxFloat64, math.MaxFloat64 / 2}
	s := mustNew(t, NameWeighted, Config{Rails: 2, Bandwidths: bw})
	if got := picks(s, 6, []RailState{up(), up()}); !equalInts(got, []int{0, 1, 0, 0, 1, 0}) {
		t.Errorf("picks = %v, want [0 1 0 0 1 0]", got)
	}
}
