package mpi

import (
	"errors"
	"slices"
	"testing"
)

// FuzzParseOSULine: any line either is no result (ErrNoResult), is a
// malformed one (ErrMalformed), or parses into a result that holds what
// ParseOSULine promises. Seeds in testdata/fuzz/FuzzParseOSULine.
func FuzzParseOSULine(f *testing.F) {
	f.Add("MROSU allreduce 4 4194304 198618.6 196000.1 201000.0 253400000.0 0.000 20 2")
	f.Add("MROSU bw 2 1048576 25579.3 25000.0 26000.0 327900000.0 40.99 20 2")
	f.Add("# MROSU test ranks size avg_us min_us max_us busbw_bps mb_s iters warmup")
	f.Fuzz(func(t *testing.T, line string) {
		r, err := ParseOSULine(line)
		if err != nil {
			if !errors.Is(err, ErrNoResult) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("%q: error %v wraps neither ErrNoResult nor ErrMalformed", line, err)
			}
			return
		}
		if !slices.Contains(OSUTests, r.Test) || r.Ranks < 1 || r.Size < 0 || r.Iters < 0 || r.Warmup < 0 {
			t.Fatalf("%q: implausible result %+v", line, r)
		}
		if !(r.MinUs <= r.AvgUs && r.AvgUs <= r.MaxUs) || r.BusBWBps < 0 || r.MBs < 0 {
			t.Fatalf("%q: result %+v breaks min <= avg <= max or has a negative rate", line, r)
		}
	})
}
