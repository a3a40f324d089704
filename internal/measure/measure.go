package measure

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the nearest-rank q-quantile of xs: the
// ceil(q*len(xs))-th smallest value, the smallest for q <= 0 (or NaN) and
// the largest for q >= 1; 0 if xs is empty. It sorts a copy of xs.
func Percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return PercentileSorted(s, q)
}

// PercentileSorted is Percentile of values already sorted in increasing
// order, without a copy.
func PercentileSorted(sorted []float64, q float64) float64 {
	n := len(sorted)
	switch {
	case n == 0:
		return 0
	case !(q > 0):
		return sorted[0]
	case q >= 1:
		return sorted[n-1]
	}
	i := int(math.Ceil(q*float64(n))) - 1
	return sorted[min(max(i, 0), n-1)]
}

// Summary is the count, mean, minimum and maximum of some values.
type Summary struct {
	N    int
	Mean float64
	Min  float64
	Max  float64
}

// Summarize returns the Summary of xs; all zero if xs is empty. The mean
// is the sum of xs in their order divided by len(xs).
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := Summary{N: len(xs), Min: xs[0], Max: xs[0]}
	var sum float64
	for _, x := range xs {
		sum += x
		s.Min = min(s.Min, x)
		s.Max = max(s.Max, x)
	}
	s.Mean = sum / float64(len(xs))
	return s
}

// Rates turns bytes counted per time bin of width bin into bits per
// second per bin: bytes[i]*8/bin. It returns nil if bin <= 0.
func Rates(bytes []int64, bin time.Duration) []float64 {
	if bin <= 0 {
		return nil
	}
	out := make([]float64, len(bytes))
	for i, b := range bytes {
		out[i] = float64(b) * 8 / bin.Seconds()
	}
	return out
}

// WindowRate returns the mean rate in bits per second of the bins of bytes
// (each bin wide, the first starting at 0) that lie entirely within
// [from, to); 0 when none does or bin <= 0.
func WindowRate(bytes []int64, bin, from, to time.Duration) float64 {
	if bin <= 0 {
		return 0
	}
	var sum int64
	n := 0
	for i, b := range bytes {
		lo := time.Duration(i) * bin
		if lo >= from && lo+bin <= to {
			sum += b
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return float64(sum) * 8 / (float64(n) * bin.Seconds())
}

// CumulativeRates turns cumulative per-rail byte counters sampled at
// times ts (increasing; counters are 0 at time 0; cum[i][rail] at ts[i])
// into per-rail goodput in bins of width bin. A counter between two
// samples is interpolated linearly. The last bin ends at the last sample
// and absorbs a remainder shorter than half a bin. It returns the bin
// midpoints in seconds and bps[rail][bin] in bits per second; nil, nil
// when there are no samples, len(ts) != len(cum), the samples count
// different numbers of rails, or bin <= 0.
func CumulativeRates(ts []time.Duration, cum [][]uint64, bin time.Duration) (mid []float64, bps [][]float64) {
	if len(ts) == 0 || len(ts) != len(cum) || bin <= 0 {
		return nil, nil
	}
	rails := len(cum[0])
	for _, c := range cum {
		if len(c) != rails {
			return nil, nil
		}
	}
	end := ts[len(ts)-1].Seconds()
	w := bin.Seconds()
	n := max(1, int(math.Round(end/w)))
	// at is rail r's counter at time t, linearly interpolated.
	at := func(r int, t float64) float64 {
		pt, pv := 0.0, 0.0
		for i, ti := range ts {
			s, v := ti.Seconds(), float64(cum[i][r])
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
			bps[r] = append(bps[r], (at(r, b)-at(r, a))*8/(b-a))
		}
	}
	return mid, bps
}
