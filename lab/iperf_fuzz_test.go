package lab

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseIperf: any output either is refused or parses into intervals
// that are in order, each with End >= Start and no negative bytes. Seeds:
// the iperf3 3.12 reports in testdata and testdata/fuzz/FuzzParseIperf.
func FuzzParseIperf(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "iperf3-*.json"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseIperf(b)
		if err != nil {
			return
		}
		for i, iv := range r.Intervals {
			if iv.End < iv.Start || iv.Bytes < 0 || iv.Omitted {
				t.Fatalf("interval %d: %+v", i, iv)
			}
			if i > 0 && iv.Start < r.Intervals[i-1].End {
				t.Fatalf("interval %d starts at %v, before %d ends at %v", i, iv.Start, i-1, r.Intervals[i-1].End)
			}
		}
	})
}
