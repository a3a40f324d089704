package measure

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		q    float64
		want float64
	}{
		{nil, 0.5, 0},
		{[]float64{7}, 0.5, 7},
		{[]float64{7}, 0.99, 7},
		{[]float64{4, 1, 3, 2}, 0.5, 2},
		{[]float64{4, 1, 3, 2}, 0.25, 1},
		{[]float64{4, 1, 3, 2}, 0.26, 2},
		{[]float64{4, 1, 3, 2}, 0.75, 3},
		{[]float64{4, 1, 3, 2}, 0.99, 4},
		{[]float64{5, 1, 4, 2, 3}, 0.5, 3},
		{[]float64{5, 1, 4, 2, 3}, 0.99, 5},
		{[]float64{5, 1, 4, 2, 3}, 0, 1},
		{[]float64{5, 1, 4, 2, 3}, -1, 1},
		{[]float64{5, 1, 4, 2, 3}, math.NaN(), 1},
		{[]float64{5, 1, 4, 2, 3}, 1, 5},
		{[]float64{5, 1, 4, 2, 3}, 2, 5},
		{[]float64{2, 2, 1, 1}, 0.5, 1},
		{[]float64{2, 2, 1, 1}, 0.51, 2},
	} {
		in := slices.Clone(tc.xs)
		if got := Percentile(in, tc.q); got != tc.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", tc.xs, tc.q, got, tc.want)
		}
		if !slices.Equal(in, tc.xs) {
			t.Errorf("Percentile(%v) changed its argument to %v", tc.xs, in)
		}
	}
	// p99 of 1..100 is 99; p99 of 1..1000 is 990; p50 of 1..2000 is 1000.
	for _, tc := range []struct{ n, want int }{{100, 99}, {1000, 990}, {2000, 1980}} {
		xs := make([]float64, tc.n)
		for i := range xs {
			xs[i] = float64(tc.n - i)
		}
		if got := Percentile(xs, 0.99); got != float64(tc.want) {
			t.Errorf("p99 of 1..%d = %v, want %d", tc.n, got, tc.want)
		}
		if got := Percentile(xs, 0.5); got != float64(tc.n/2) {
			t.Errorf("p50 of 1..%d = %v, want %d", tc.n, got, tc.n/2)
		}
	}
}

func TestSummarize(t *testing.T) {
	if got := Summarize(nil); got != (Summary{}) {
		t.Errorf("Summarize(nil) = %+v", got)
	}
	if got, want := Summarize([]float64{3, -1, 4, 1.5}), (Summary{N: 4, Mean: 1.875, Min: -1, Max: 4}); got != want {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}
	if got, want := Summarize([]float64{2}), (Summary{N: 1, Mean: 2, Min: 2, Max: 2}); got != want {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}
}

func TestRates(t *testing.T) {
	got := Rates([]int64{0, 125, 250000}, 250*time.Millisecond)
	if want := []float64{0, 4000, 8e6}; !slices.Equal(got, want) {
		t.Errorf("Rates = %v, want %v", got, want)
	}
	if got := Rates([]int64{1}, 0); got != nil {
		t.Errorf("Rates with bin 0 = %v, want nil", got)
	}
	if got := Rates(nil, time.Second); len(got) != 0 {
		t.Errorf("Rates(nil) = %v", got)
	}
}

func TestWindowRate(t *testing.T) {
	// Bins of 250 ms: 1000, 2000, 3000, 4000 bytes.
	s := []int64{1000, 2000, 3000, 4000}
	w := 250 * time.Millisecond
	for _, tc := range []struct {
		from, to time.Duration
		want     float64
	}{
		{0, time.Second, 2500 * 8 / 0.25},
		{250 * time.Millisecond, 750 * time.Millisecond, 2500 * 8 / 0.25},
		{100 * time.Millisecond, 800 * time.Millisecond, 2500 * 8 / 0.25}, // bins 1 and 2 only
		{0, 200 * time.Millisecond, 0},                                    // no whole bin
		{time.Second, 2 * time.Second, 0},                                 // past the end
		{-time.Second, 250 * time.Millisecond, 1000 * 8 / 0.25},
	} {
		if got := WindowRate(s, w, tc.from, tc.to); got != tc.want {
			t.Errorf("WindowRate(%v, %v) = %g, want %g", tc.from, tc.to, got, tc.want)
		}
	}
	if got := WindowRate(s, 0, 0, time.Second); got != 0 {
		t.Errorf("WindowRate with bin 0 = %v", got)
	}
}

func TestCumulativeRates(t *testing.T) {
	// Rail 0 delivers 1e6 B/s for the first second and 3e6 B/s after;
	// rail 1 a constant 0.5e6 B/s. Samples every 100 ms up to 2.04 s: the
	// 40 ms remainder joins the last bin.
	var ts []time.Duration
	var cum [][]uint64
	at := func(s float64) []uint64 {
		r0 := min(s, 1)*1e6 + max(s-1, 0)*3e6
		return []uint64{uint64(math.Round(r0)), uint64(math.Round(s * 0.5e6))}
	}
	for i := 1; i <= 20; i++ {
		s := float64(i) / 10
		ts = append(ts, time.Duration(i)*100*time.Millisecond)
		cum = append(cum, at(s))
	}
	ts = append(ts, 2040*time.Millisecond)
	cum = append(cum, at(2.04))
	mid, bps := CumulativeRates(ts, cum, 500*time.Millisecond)
	wantMid := []float64{0.25, 0.75, 1.25, 1.77}
	want0 := []float64{8e6, 8e6, 24e6, 24e6}
	if len(mid) != len(wantMid) || len(bps) != 2 {
		t.Fatalf("got %d bins, %d rails; want %d, 2", len(mid), len(bps), len(wantMid))
	}
	for i := range mid {
		if math.Abs(mid[i]-wantMid[i]) > 1e-9 {
			t.Errorf("bin %d middle %v, want %v", i, mid[i], wantMid[i])
		}
		if math.Abs(bps[0][i]-want0[i]) > 1e3 || math.Abs(bps[1][i]-4e6) > 1e3 {
			t.Errorf("bin %d: %v / %v bit/s, want %v / 4e6", i, bps[0][i], bps[1][i], want0[i])
		}
	}
	for _, bad := range []struct {
		ts  []time.Duration
		cum [][]uint64
		bin time.Duration
	}{
		{nil, nil, time.Second},
		{ts, cum[:3], time.Second},
		{ts[:2], [][]uint64{{1, 2}, {3}}, time.Second},
		{ts, cum, 0},
	} {
		if m, b := CumulativeRates(bad.ts, bad.cum, bad.bin); m != nil || b != nil {
			t.Errorf("CumulativeRates(%d samples, %d counters, bin %v) = %v, %v; want nil, nil", len(bad.ts), len(bad.cum), bad.bin, m, b)
		}
	}
}
