package qlearn

import (
	"fmt"
	"testing"

	"github.com/multirail/multirail/sched"
)

// railsFor returns n up rails with room and assorted occupancy and rates.
func railsFor(n int) []sched.RailState {
	rails := make([]sched.RailState, n)
	for i := range rails {
		rails[i] = sched.RailState{Up: true, Queued: (i * 5) % 16, QueueCap: 16,
			RateBps: float64(i+1) * 1e8, NominalBps: float64(i+1) * 1e8}
	}
	return rails
}

func TestZeroAllocs(t *testing.T) {
	for _, p := range []Preset{Patent, Improved} {
		for _, n := range []int{1, 4, 8} {
			t.Run(fmt.Sprintf("%s/rails=%d", p, n), func(t *testing.T) {
				s, err := New(p, sched.Config{Rails: n}, Config{})
				if err != nil {
					t.Fatal(err)
				}
				rails := railsFor(n)
				var now int64
				if a := testing.AllocsPerRun(2000, func() {
					now++
					r := s.Pick(now, 65584, rails)
					rails[r].Queued = (rails[r].Queued + 7) % 16
					s.Departed(now, r, 65584, now%5000, rails)
				}); a != 0 {
					t.Errorf("Pick+Departed: %v allocs per run, want 0", a)
				}
				for i := range rails {
					rails[i].Up = false
				}
				if a := testing.AllocsPerRun(100, func() { s.Pick(now, 100, rails) }); a != 0 {
					t.Errorf("Pick with no rail up: %v allocs per run, want 0", a)
				}
			})
		}
	}
}

// BenchmarkDecide measures one decision plus one update (a Pick and the
// Departed of a segment), the cost the transport pays per segment.
func BenchmarkDecide(b *testing.B) {
	for _, p := range []Preset{Improved, Patent} {
		for _, n := range []int{2, 4, 8} {
			b.Run(fmt.Sprintf("%s/rails=%d/k=16", p, n), func(b *testing.B) {
				s, err := New(p, sched.Config{Rails: n}, Config{K: 16})
				if err != nil {
					b.Fatal(err)
				}
				rails := railsFor(n)
				b.ReportAllocs()
				var now int64
				for b.Loop() {
					now++
					r := s.Pick(now, 65584, rails)
					rails[r].Queued = (rails[r].Queued + 7) % 16
					s.Departed(now, r, 65584, now%5000, rails)
				}
			})
		}
	}
}
