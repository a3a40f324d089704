package units

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The fuzz targets check, for any input: no panic; an error is one line,
// an *Error starting with "units: QUANTITY " and wrapping exactly one of
// ErrSyntax and ErrRange; a result is finite and >= 0; the Format of a
// result parses back to it; changing the case of the ASCII letters and
// adding white space around does not change the outcome; and the result
// agrees with a slow reference that tries every split of the input into
// a number (strconv) and a unit (a table). Seeds: testdata/fuzz/NAME.

func FuzzParseRate(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseRate(s)
		ref, refOK := refRate(s)
		if err != nil {
			checkFuzzErr(t, "ParseRate", s, err, "rate")
			if refOK && !math.IsInf(ref, 0) {
				t.Fatalf("ParseRate(%q): %v; the reference reads %v", s, err, ref)
			}
			return
		}
		if !(v >= 0) || math.IsInf(v, 0) {
			t.Fatalf("ParseRate(%q) = %v; want finite and >= 0", s, v)
		}
		if !refOK || ref != v {
			t.Fatalf("ParseRate(%q) = %v; the reference reads %v (ok %v)", s, v, ref, refOK)
		}
		if back, err := ParseRate(FormatRate(v)); err != nil || back != v {
			t.Fatalf("ParseRate(FormatRate(%v) = %q) = %v, %v", v, FormatRate(v), back, err)
		}
		for _, w := range variants(s) {
			if got, err := ParseRate(w); err != nil || got != v {
				t.Fatalf("ParseRate(%q) = %v, but ParseRate(%q) = %v, %v", s, v, w, got, err)
			}
		}
	})
}

func FuzzParseSize(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		ref, refOK, overflow := refSize(s)
		if err != nil {
			checkFuzzErr(t, "ParseSize", s, err, "size")
			if refOK && !overflow {
				t.Fatalf("ParseSize(%q): %v; the reference reads %v", s, err, ref)
			}
			return
		}
		if n < 0 {
			t.Fatalf("ParseSize(%q) = %v; want >= 0", s, n)
		}
		if !refOK || overflow || ref != n {
			t.Fatalf("ParseSize(%q) = %v; the reference reads %v (ok %v, overflow %v)", s, n, ref, refOK, overflow)
		}
		if back, err := ParseSize(FormatSize(n)); err != nil || back != n {
			t.Fatalf("ParseSize(FormatSize(%v) = %q) = %v, %v", n, FormatSize(n), back, err)
		}
		for _, w := range variants(s) {
			if got, err := ParseSize(w); err != nil || got != n {
				t.Fatalf("ParseSize(%q) = %v, but ParseSize(%q) = %v, %v", s, n, w, got, err)
			}
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		ref, refOK := refDuration(s)
		if err != nil {
			checkFuzzErr(t, "ParseDuration", s, err, "duration")
			if refOK {
				t.Fatalf("ParseDuration(%q): %v; the reference reads %v", s, err, ref)
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v; want >= 0", s, d)
		}
		if !refOK || ref != d {
			t.Fatalf("ParseDuration(%q) = %v; the reference reads %v (ok %v)", s, d, ref, refOK)
		}
		for _, w := range []string{FormatDuration(d), d.String()} {
			if back, err := ParseDuration(w); err != nil || back != d {
				t.Fatalf("ParseDuration(%q) = %v, %v; want %v", w, back, err, d)
			}
		}
		for _, w := range variants(s) {
			if got, err := ParseDuration(w); err != nil || got != d {
				t.Fatalf("ParseDuration(%q) = %v, but ParseDuration(%q) = %v, %v", s, d, w, got, err)
			}
		}
	})
}

func checkFuzzErr(t *testing.T, fn, s string, err error, quantity string) {
	t.Helper()
	msg := err.Error()
	var ue *Error
	if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "units: "+quantity+" ") || !strings.Contains(msg, "; allowed: ") {
		t.Fatalf("%s(%q): error %q is not one line of the form units: %s VALUE: REASON; allowed: FORM", fn, s, msg, quantity)
	}
	if !errors.As(err, &ue) || ue.Value != s || errors.Is(err, ErrSyntax) == errors.Is(err, ErrRange) {
		t.Fatalf("%s(%q): error %#v is not an *Error for the value wrapping one of ErrSyntax, ErrRange", fn, s, err)
	}
}

// variants returns s with its ASCII letters in upper and in lower case,
// and with white space around.
func variants(s string) []string {
	up, low := []byte(s), []byte(s)
	for i, c := range up {
		switch {
		case c >= 'a' && c <= 'z':
			up[i] = c - 'a' + 'A'
		case c >= 'A' && c <= 'Z':
			low[i] = c - 'A' + 'a'
		}
	}
	return []string{string(up), string(low), " \t" + s + "\n "}
}

// The references below try every split of the trimmed input into a
// number that strconv accepts and a unit from a table (from the shortest
// unit to the longest one there is), and are slow but obviously right.

func refRate(s string) (float64, bool) {
	t := strings.TrimSpace(s)
	mults := map[string]float64{"": 1, "bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bps": 1, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9,
		"bit/s": 1, "kbit/s": 1e3, "mbit/s": 1e6, "gbit/s": 1e9}
	for i := len(t); i > 0; i-- {
		unit := strings.TrimSpace(t[i:])
		if len(unit) > len("kbit/s") {
			// Not a unit; a split inside a multi-byte space (U+00A0)
			// leaves a byte TrimSpace keeps, so a smaller i may still
			// give a short unit: go on rather than stop.
			continue
		}
		mult, ok := mults[strings.ToLower(unit)]
		if !ok {
			continue
		}
		num := t[:i]
		if strings.ContainsAny(strings.ToLower(num), "in") { // inf, nan
			continue
		}
		v, err := strconv.ParseFloat(num, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) || v < 0 {
			continue
		}
		return math.Abs(v) * mult, true
	}
	return 0, false
}

func refSize(s string) (n int64, ok, overflow bool) {
	t := strings.TrimSpace(s)
	mults := map[string]int64{"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gib": 1 << 30,
		"kb": 1e3, "mb": 1e6, "gb": 1e9}
	for i := len(t); i > 0; i-- {
		unit := strings.TrimSpace(t[i:])
		if len(unit) > len("kib") {
			continue // not a unit (see refRate)
		}
		mult, ok := mults[strings.ToLower(unit)]
		if !ok {
			continue
		}
		v, err := strconv.ParseInt(t[:i], 10, 64)
		if errors.Is(err, strconv.ErrRange) && t[0] != '-' {
			return 0, true, true
		}
		if err != nil || v < 0 {
			continue
		}
		if v > math.MaxInt64/mult {
			return 0, true, true
		}
		return v * mult, true, false
	}
	return 0, false, false
}

func refDuration(s string) (time.Duration, bool) {
	t := strings.TrimSpace(s)
	if d, err := time.ParseDuration(strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r - 'A' + 'a'
		}
		return r
	}, t)); err == nil {
		return d, d >= 0
	}
	if strings.ContainsAny(strings.ToLower(t), "in") {
		return 0, false
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || v*1e9 >= 1<<63 {
		return 0, false
	}
	return time.Duration(math.Round(math.Abs(v) * 1e9)), true
}
