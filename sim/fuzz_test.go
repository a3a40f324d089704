package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzParseScenario: the parser never panics, every error names the
// source, and whatever it accepts is valid and runs.
func FuzzParseScenario(f *testing.F) {
	for _, name := range BuiltinNames() {
		f.Add([]byte(BuiltinSource(name)))
	}
	for _, file := range []string{"example.json"} {
		if b, err := os.ReadFile(filepath.Join("testdata", file)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("duration: 1s\nrails: [{rate: 1mbit, load: [{points: [[0, 1], [0.001, 0]]}]}]\ntraffic: {kind: bulk, size: 1000}\n"))
	f.Add([]byte("duration: 1s\ndispatch_interval: 10ms\nrails: [{rate: 1mbit}]\ntraffic: {kind: reqresp, count: 3}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := ParseScenario("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml:") {
				t.Fatalf("error %q does not start with the file name", err)
			}
			return
		}
		if err := sc.Validate(); err != nil {
			t.Fatalf("accepted scenario does not validate: %v", err)
		}
		tr := sc.Traffic
		if tr.Ranks > 64 || tr.Window > 1000 || len(sc.Rails)*max(1, tr.Ranks) > 256 || sc.SegmentSize > 1<<20 {
			return // valid, but too big to run here
		}
		for _, r := range append(sc.Rails, tr.ReverseRails...) {
			if r.RateBps < 1e6 {
				return // slow rails under fast load changes take long
			}
			for _, l := range r.Load {
				if l.Kind == LoadOnOff && l.Period < time.Millisecond || l.Kind == LoadPoisson && min(l.Gap, l.Length) < time.Millisecond || len(l.Points) > 1000 {
					return
				}
			}
		}
		s, err := New(sc, "shortestqueue")
		if err != nil {
			t.Fatalf("New on an accepted scenario: %v", err)
		}
		s.Step(2000)
		s.Result()
	})
}
