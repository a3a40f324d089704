package bench

import (
	"math"
	"testing"
	"time"
)

func TestBinGoodput(t *testing.T) {
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
	mid, bps := BinGoodput(ts, cum, 500*time.Millisecond)
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
	if m, b := BinGoodput(nil, nil, time.Second); m != nil || b != nil {
		t.Errorf("no samples: got %v, %v", m, b)
	}
}

func TestSampler(t *testing.T) {
	var s Sampler
	per := []uint64{125000, 0}
	s.Add(500*time.Millisecond, per)
	per[0] = 250000 // the caller's slice is reused: the sample is a copy
	s.Add(time.Second, per)
	mid, bps := s.Bin(500 * time.Millisecond)
	if len(mid) != 2 || bps[0][0] != 2e6 || bps[0][1] != 2e6 || bps[1][1] != 0 {
		t.Errorf("%v %v", mid, bps)
	}
}
