package units

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// genRate draws a finite rate >= 0: round numbers of a unit, decimals with
// a few digits, and arbitrary float64 values (bit patterns).
func genRate(t *rapid.T) float64 {
	switch rapid.IntRange(0, 2).Draw(t, "rateKind") {
	case 0:
		mult := rapid.SampledFrom([]float64{1, 1e3, 1e6, 1e9}).Draw(t, "mult")
		return float64(rapid.IntRange(0, 100000).Draw(t, "count")) * mult
	case 1:
		return float64(rapid.Int64Range(0, 1e12).Draw(t, "mantissa")) / math.Pow10(rapid.IntRange(0, 12).Draw(t, "scale"))
	}
	v := math.Float64frombits(rapid.Uint64().Draw(t, "bits") &^ (1 << 63))
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// TestPropFormatParse: FormatRate, FormatSize and FormatDuration write
// strings that the parsers read back exactly, also in other letter cases
// and with white space around; durations also round-trip through
// time.Duration.String.
func TestPropFormatParse(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		bps := genRate(t)
		s := FormatRate(bps)
		for _, v := range []string{s, strings.ToUpper(s), " " + s + "\t"} {
			if got, err := ParseRate(v); err != nil || got != bps {
				t.Fatalf("ParseRate(%q) = %v, %v; want %v (FormatRate(%v) = %q)", v, got, err, bps, bps, s)
			}
		}

		n := rapid.OneOf(rapid.Int64Min(0), rapid.Map(rapid.Int64Range(0, 1<<40), func(k int64) int64 { return k << 10 })).Draw(t, "size")
		s = FormatSize(n)
		for _, v := range []string{s, strings.ToLower(s), strings.ToUpper(s), " " + s + " "} {
			if got, err := ParseSize(v); err != nil || got != n {
				t.Fatalf("ParseSize(%q) = %v, %v; want %v (FormatSize(%v) = %q)", v, got, err, n, n, s)
			}
		}

		d := time.Duration(rapid.OneOf(rapid.Int64Min(0), rapid.Map(rapid.Int64Range(0, 1e6), func(k int64) int64 { return k * 1e6 })).Draw(t, "duration"))
		for _, v := range []string{FormatDuration(d), d.String(), strings.ToUpper(FormatDuration(d))} {
			if got, err := ParseDuration(v); err != nil || got != d {
				t.Fatalf("ParseDuration(%q) = %v, %v; want %v", v, got, err, d)
			}
		}
	})
}

// randomCase changes the case of each ASCII letter of s at random.
func randomCase(t *rapid.T, s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' && rapid.Bool().Draw(t, "upper") {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// TestPropRateGrammar: a number literal, optional white space and a unit
// in any case (with or without /s) parse as the number times the unit.
func TestPropRateGrammar(t *testing.T) {
	units := []string{"", "bit", "kbit", "mbit", "gbit", "bps", "kbps", "mbps", "gbps", "bit/s", "kbit/s", "mbit/s", "gbit/s"}
	mults := []float64{1, 1, 1e3, 1e6, 1e9, 1, 1e3, 1e6, 1e9, 1, 1e3, 1e6, 1e9}
	rapid.Check(t, func(t *rapid.T) {
		num := rapid.OneOf(
			rapid.StringMatching(`\+?[0-9]{1,6}(\.[0-9]{0,6})?([eE][+-]?[0-9]{1,2})?`),
			rapid.StringMatching(`\.[0-9]{1,6}`),
			rapid.Map(rapid.Float64Range(0, 1e12), func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }),
		).Draw(t, "number")
		k := rapid.IntRange(0, len(units)-1).Draw(t, "unit")
		space := rapid.SampledFrom([]string{"", " ", "  "}).Draw(t, "space")
		s := num + space + randomCase(t, units[k])
		want, _ := strconv.ParseFloat(num, 64)
		want *= mults[k]
		got, err := ParseRate(s)
		if math.IsInf(want, 0) {
			if err == nil {
				t.Fatalf("ParseRate(%q) = %v; want ErrRange", s, got)
			}
			return
		}
		if err != nil || got != want {
			t.Fatalf("ParseRate(%q) = %v, %v; want %v", s, got, err, want)
		}
	})
}

// TestPropSizeGrammar: an integer, optional white space and a unit in any
// case parse as the integer times the unit, or as ErrRange exactly when
// the product overflows int64.
func TestPropSizeGrammar(t *testing.T) {
	units := map[string]int64{"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
		"g": 1 << 30, "gib": 1 << 30, "kb": 1e3, "mb": 1e6, "gb": 1e9}
	names := make([]string, 0, len(units))
	for u := range units {
		names = append(names, u)
	}
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.OneOf(rapid.Int64Range(0, 1<<34), rapid.Int64Min(0)).Draw(t, "n")
		u := rapid.SampledFrom(names).Draw(t, "unit")
		s := strconv.FormatInt(n, 10) + rapid.SampledFrom([]string{"", " "}).Draw(t, "space") + randomCase(t, u)
		got, err := ParseSize(s)
		mult := units[u]
		if n > math.MaxInt64/mult {
			if err == nil {
				t.Fatalf("ParseSize(%q) = %v; want ErrRange", s, got)
			}
			return
		}
		if err != nil || got != n*mult {
			t.Fatalf("ParseSize(%q) = %v, %v; want %v", s, got, err, n*mult)
		}
	})
}

// TestPropSeconds: a plain number of seconds is rounded to the nearest
// nanosecond.
func TestPropSeconds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := rapid.Float64Range(0, 9e9).Draw(t, "seconds")
		s := strconv.FormatFloat(v, 'g', -1, 64)
		got, err := ParseDuration(s)
		if err != nil || math.Abs(float64(got)-v*1e9) > 0.5+v*1e9*1e-15 {
			t.Fatalf("ParseDuration(%q) = %v, %v; want %v s", s, got, err, v)
		}
	})
}
