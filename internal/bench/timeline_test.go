package bench

import (
	"testing"
	"time"
)

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
