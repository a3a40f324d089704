package bench

import (
	"math"
	"slices"
	"time"
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

// Bin is BinGoodput of the samples.
func (s *Sampler) Bin(bin time.Duration) (mid []float64, bps [][]float64) {
	return BinGoodput(s.t, s.bytes, bin)
}

// BinGoodput turns cumulative per-rail byte counters sampled at times ts
// (increasing, the counters being 0 at time 0) into per-rail goodput in
// bins of width bin. The last bin ends at the last sample and absorbs a
// remainder shorter than half a bin. It returns the bin midpoints in
// seconds and bps[rail][bin] in bits per second.
func BinGoodput(ts []time.Duration, bytes [][]uint64, bin time.Duration) (mid []float64, bps [][]float64) {
	if len(ts) == 0 || len(ts) != len(bytes) || bin <= 0 {
		return nil, nil
	}
	rails := len(bytes[0])
	end := ts[len(ts)-1].Seconds()
	w := bin.Seconds()
	n := max(1, int(math.Round(end/w)))
	// cum is rail r's counter at time t, linearly interpolated.
	cum := func(r int, t float64) float64 {
		pt, pv := 0.0, 0.0
		for i, ti := range ts {
			s, v := ti.Seconds(), float64(bytes[i][r])
			if t <= s {
				if s == pt {
					return v
				}
				return pv + (v-pv)*(t-pt)/(s-pt)
			}
			pt, pv = s, v
		}
		return pv
	}
	bps = make([][]float64, rails)
	for k := range n {
		a, b := float64(k)*w, float64(k+1)*w
		if k == n-1 {
			b = end
		}
		if b <= a {
			continue
		}
		mid = append(mid, (a+b)/2)
		for r := range rails {
			bps[r] = append(bps[r], (cum(r, b)-cum(r, a))*8/(b-a))
		}
	}
	return mid, bps
}
