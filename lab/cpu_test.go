package lab

import (
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestParseProcStat(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       time.Duration
		err        bool
	}{
		{"linux 6", "cpu  100 20 300 9999 55 4 6 77 0 0\ncpu0 50 10 150 5000 20 2 3 40 0 0\n", 430 * 10 * time.Millisecond, false},
		{"no steal columns", "cpu 1 0 1 5 0 0 0\n", 20 * time.Millisecond, false},
		{"not a cpu line", "intr 1 2 3 4 5 6 7 8\n", 0, true},
		{"short", "cpu 1 2 3\n", 0, true},
		{"garbage number", "cpu 1 x 3 4 5 6 7 8\n", 0, true},
		{"empty", "", 0, true},
	} {
		got, err := ParseProcStat([]byte(c.text))
		if (err != nil) != c.err || got != c.want {
			t.Errorf("%s: %v, %v; want %v, error %v", c.name, got, err, c.want, c.err)
		}
		if err != nil && !errors.Is(err, ErrProcStat) {
			t.Errorf("%s: %v does not wrap ErrProcStat", c.name, err)
		}
	}
}

// TestCPUBetween: with samples of a steady load, the busy time between
// two moments is the load times the interval; outside the samples there
// is no answer; splitting an interval adds up.
func TestCPUBetween(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		t0 := time.Unix(1000, 0)
		load := rapid.Float64Range(0, 8).Draw(t, "cpus busy")
		n := rapid.IntRange(2, 50).Draw(t, "samples")
		var s []CPUSample
		at := t0
		for i := 0; i < n; i++ {
			s = append(s, CPUSample{At: at, Busy: time.Duration(load * float64(at.Sub(t0)))})
			at = at.Add(time.Duration(rapid.IntRange(1, 500).Draw(t, "gap ms")) * time.Millisecond)
		}
		end := s[n-1].At
		a := t0.Add(time.Duration(rapid.Int64Range(0, int64(end.Sub(t0))).Draw(t, "a")))
		b := t0.Add(time.Duration(rapid.Int64Range(0, int64(end.Sub(t0))).Draw(t, "b")))
		if !a.Before(b) {
			if _, ok := CPUBetween(s, a, b); ok {
				t.Fatalf("an empty interval has an answer")
			}
			return
		}
		got, ok := CPUBetween(s, a, b)
		want := time.Duration(load * float64(b.Sub(a)))
		if !ok || absDur(got-want) > time.Microsecond*time.Duration(1+load) {
			t.Fatalf("CPUBetween = %v, %v; want %v", got, ok, want)
		}
		mid := a.Add(b.Sub(a) / 2)
		if x, ok1 := CPUBetween(s, a, mid); ok1 && mid.After(a) {
			y, _ := CPUBetween(s, mid, b)
			if absDur(x+y-got) > 2*time.Microsecond*time.Duration(1+load) {
				t.Fatalf("halves %v + %v != %v", x, y, got)
			}
		}
		if _, ok := CPUBetween(s, t0.Add(-time.Second), b); ok {
			t.Fatal("an interval starting before the samples has an answer")
		}
		if _, ok := CPUBetween(s, a, end.Add(time.Second)); ok {
			t.Fatal("an interval ending after the samples has an answer")
		}
	})
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
