package bench

import (
	"slices"
	"time"

	"github.com/multirail/multirail/internal/measure"
)

// Sampler records the cumulative per-rail byte counters that Run reports
// through Options.Progress. The zero value is ready to use; it is not
// safe for concurrent use (Run calls Progress from one goroutine).
type Sampler struct {
	t     []time.Duration
	bytes [][]uint64
}

// Add records the counters perRail at elapsed.
func (s *Sampler) Add(elapsed time.Duration, perRail []uint64) {
	s.t = append(s.t, elapsed)
	s.bytes = append(s.bytes, slices.Clone(perRail))
}

// Bin turns the samples into per-rail goodput in bins of width bin
// (measure.CumulativeRates): the bin midpoints in seconds and
// bps[rail][bin] in bits per second.
func (s *Sampler) Bin(bin time.Duration) (mid []float64, bps [][]float64) {
	return measure.CumulativeRates(s.t, s.bytes, bin)
}
