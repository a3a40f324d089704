package measure

import (
	"math"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// refPercentile is the definition of the nearest-rank percentile, checked
// value by value: the smallest x of xs such that at least q*n values are
// <= x.
func refPercentile(xs []float64, q float64) float64 {
	best := math.Inf(1)
	for _, x := range xs {
		k := 0
		for _, y := range xs {
			if y <= x {
				k++
			}
		}
		if float64(k) >= q*float64(len(xs)) && x < best {
			best = x
		}
	}
	return best
}

// genValues draws finite values with many duplicates.
func genValues(t *rapid.T) []float64 {
	return rapid.SliceOfN(rapid.OneOf(
		rapid.Map(rapid.IntRange(-5, 5), func(i int) float64 { return float64(i) }),
		rapid.Float64Range(-1e9, 1e9),
	), 1, 60).Draw(t, "xs")
}

// TestPropPercentile: Percentile agrees with the definition for q in
// (0, 1], is one of the values, grows with q, and leaves xs alone.
func TestPropPercentile(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		xs := genValues(t)
		orig := slices.Clone(xs)
		q := rapid.OneOf(rapid.Float64Range(0, 1), rapid.SampledFrom([]float64{0.5, 0.9, 0.99, 0.999, 1})).Draw(t, "q")
		got := Percentile(xs, q)
		if !slices.Equal(xs, orig) {
			t.Fatalf("Percentile changed xs from %v to %v", orig, xs)
		}
		if q > 0 {
			if want := refPercentile(xs, q); got != want {
				t.Fatalf("Percentile(%v, %v) = %v; the definition gives %v", xs, q, got, want)
			}
		} else if got != slices.Min(xs) {
			t.Fatalf("Percentile(%v, 0) = %v, want the minimum", xs, got)
		}
		if !slices.Contains(xs, got) {
			t.Fatalf("Percentile(%v, %v) = %v is none of the values", xs, q, got)
		}
		q2 := rapid.Float64Range(q, 1).Draw(t, "q2")
		if got2 := Percentile(xs, q2); got2 < got {
			t.Fatalf("Percentile(%v, %v) = %v < Percentile(.., %v) = %v", xs, q2, got2, q, got)
		}
		sorted := slices.Sorted(slices.Values(xs))
		if ps := PercentileSorted(sorted, q); ps != got {
			t.Fatalf("PercentileSorted = %v, Percentile = %v", ps, got)
		}
	})
}

// TestPropSummarize: Summarize agrees with a sorted copy (first, last) and
// a sum in sorted order (within rounding).
func TestPropSummarize(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		xs := genValues(t)
		s := Summarize(xs)
		sorted := slices.Sorted(slices.Values(xs))
		var sum, abs float64
		for _, x := range sorted {
			sum += x
			abs += math.Abs(x)
		}
		if s.N != len(xs) || s.Min != sorted[0] || s.Max != sorted[len(sorted)-1] ||
			math.Abs(s.Mean-sum/float64(len(xs))) > 1e-12*abs/float64(len(xs))+1e-300 {
			t.Fatalf("Summarize(%v) = %+v; want N %d, min %v, max %v, mean %v", xs, s, len(xs), sorted[0], sorted[len(sorted)-1], sum/float64(len(xs)))
		}
		if s.Min > s.Mean || s.Mean > s.Max {
			t.Fatalf("Summarize(%v) = %+v: mean outside [min, max]", xs, s)
		}
	})
}

// TestPropRates: over every whole bin, WindowRate is the mean of Rates,
// and CumulativeRates of the running sums sampled at the bin edges gives
// Rates back (within rounding of the edges, relative to the largest rate).
func TestPropRates(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		bytes := rapid.SliceOfN(rapid.Int64Range(0, 1e9), 1, 40).Draw(t, "bytes")
		bin := time.Duration(rapid.Int64Range(1, 4000).Draw(t, "binMs")) * time.Millisecond
		r := Rates(bytes, bin)
		mean := Summarize(r).Mean
		if w := WindowRate(bytes, bin, 0, time.Duration(len(bytes))*bin); math.Abs(w-mean) > 1e-9*math.Max(1, mean) {
			t.Fatalf("WindowRate over all bins = %v, mean of Rates = %v", w, mean)
		}
		ts := make([]time.Duration, len(bytes))
		cum := make([][]uint64, len(bytes))
		var c uint64
		for i, b := range bytes {
			c += uint64(b)
			ts[i] = time.Duration(i+1) * bin
			cum[i] = []uint64{c}
		}
		mid, bps := CumulativeRates(ts, cum, bin)
		if len(mid) != len(bytes) || len(bps) != 1 {
			t.Fatalf("CumulativeRates: %d bins, %d rails; want %d, 1", len(mid), len(bps), len(bytes))
		}
		top := slices.Max(r)
		for i := range r {
			if math.Abs(bps[0][i]-r[i]) > 1e-6*math.Max(1, top) { // bin edges in float seconds

				t.Fatalf("bin %d: CumulativeRates %v, Rates %v", i, bps[0][i], r[i])
			}
		}
	})
}
