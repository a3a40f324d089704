package sched

import (
	"fmt"
	"testing"
)

var allNames = []string{NameRoundRobin, NameWeighted, NameShortestQueue}

// benchRails returns n up rails with room, different loads and rates.
func benchRails(n int) []RailState {
	rails := make([]RailState, n)
	for i := range rails {
		rails[i] = RailState{
			Up:          true,
			Queued:      i % 3,
			QueuedBytes: int64(i%3) * seg,
			QueueCap:    8,
			RateBps:     float64(i+1) * 1e8,
			NominalBps:  float64(i+1) * 1e8,
		}
	}
	return rails
}

func benchConfig(n int) Config {
	bw := make([]float64, n)
	for i := range bw {
		bw[i] = float64(n-i) * 1e8
	}
	return Config{Rails: n, Bandwidths: bw}
}

func TestZeroAllocs(t *testing.T) {
	for _, name := range allNames {
		for _, n := range []int{1, 4, 8} {
			t.Run(fmt.Sprintf("%s/rails=%d", name, n), func(t *testing.T) {
				s := mustNew(t, name, benchConfig(n))
				rails := benchRails(n)
				var now int64
				if a := testing.AllocsPerRun(1000, func() {
					now++
					r := s.Pick(now, seg, rails)
					s.Departed(now, max(r, 0), seg, 100, rails)
				}); a != 0 {
					t.Errorf("Pick+Departed: %v allocs per run, want 0", a)
				}
				// The -1 path must not allocate either.
				for i := range rails {
					rails[i].Up = false
				}
				if a := testing.AllocsPerRun(1000, func() { s.Pick(now, seg, rails) }); a != 0 {
					t.Errorf("Pick with no rail up: %v allocs per run, want 0", a)
				}
			})
		}
	}
}

var sink int

func BenchmarkPick(b *testing.B) {
	for _, name := range allNames {
		for _, n := range []int{4, 8} {
			b.Run(fmt.Sprintf("%s/rails=%d", name, n), func(b *testing.B) {
				s, err := New(name, benchConfig(n))
				if err != nil {
					b.Fatal(err)
				}
				rails := benchRails(n)
				b.ReportAllocs()
				b.ResetTimer()
				var now int64
				for b.Loop() {
					now++
					r := s.Pick(now, seg, rails)
					sink += r
				}
			})
		}
	}
}
