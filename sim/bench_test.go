package sim

import (
	"testing"
	"time"
)

// BenchmarkSim runs built-in scenarios and reports simulated events per
// second of wall time.
func BenchmarkSim(b *testing.B) {
	for _, c := range []struct{ scenario, sched string }{
		{"many-rails", "qlearn"},
		{"many-rails", "shortestqueue"},
		{"many-rails", "roundrobin"},
		{"step-shift", "weighted"},
		{"allreduce-1024", "qlearn"},
		{"allreduce-1024", "shortestqueue"},
	} {
		b.Run(c.scenario+"/"+c.sched, func(b *testing.B) {
			sc, err := Builtin(c.scenario)
			if err != nil {
				b.Fatal(err)
			}
			if c.scenario != "allreduce-1024" {
				sc.Duration = 60 * time.Second
			}
			var events uint64
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				r, err := Run(sc, c.sched)
				if err != nil {
					b.Fatal(err)
				}
				events += r.Events
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(events)/float64(b.N), "events/op")
		})
	}
}
