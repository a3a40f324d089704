package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Forms of the values a scenario accepts, quoted in error messages.
const (
	formRate     = "a rate like 200mbit or 1.5gbit (units bit, kbit, mbit, gbit or bps, kbps, mbps, gbps; decimal, bits per second) or a plain number of bits/s, > 0 and <= 100gbit"
	formSize     = "a byte count like 65536, 64KiB or 1MiB (units B, KiB, MiB, GiB, KB, MB, GB)"
	formDuration = "a duration like 4ms, 1.5s or 2m (Go syntax) or a plain number of seconds"
	formFraction = "a number in [0,1]"
)

// MaxRateBps is the highest rail rate a scenario may give: 100 Gbit/s.
const MaxRateBps = 100e9

var rateUnits = map[string]float64{
	"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9,
	"bps": 1, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9,
}

// ParseRate parses a rate such as "200mbit", "1.5gbit", "64kbps" or
// "2e8" (bits per second) into bits per second. Units are decimal and
// case-insensitive; bps counts bits, not bytes.
func ParseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	num, unit := t, ""
	if _, err := strconv.ParseFloat(t, 64); err != nil {
		i := strings.IndexFunc(t, func(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' })
		if i >= 0 {
			num, unit = strings.TrimSpace(t[:i]), t[i:]
		}
	}
	mult := 1.0
	if unit != "" {
		m, ok := rateUnits[strings.ToLower(unit)]
		if !ok {
			return 0, fmt.Errorf("rate %q: unknown unit %q; want %s", s, unit, formRate)
		}
		mult = m
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("rate %q: want %s", s, formRate)
	}
	bps := v * mult
	if !(bps > 0) || bps > MaxRateBps {
		return 0, fmt.Errorf("rate %q is out of range; want %s", s, formRate)
	}
	return bps, nil
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30},
	{"b", 1},
}

// ParseSize parses a byte count such as "65536", "64KiB" or "1MiB" (k, m,
// g alone mean KiB, MiB, GiB; KB, MB, GB are powers of ten). Units are
// case-insensitive. The count must be >= 0.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	num, mult := t, int64(1)
	low := strings.ToLower(t)
	for _, u := range sizeUnits {
		if strings.HasSuffix(low, u.suffix) {
			num, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want %s", s, formSize)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n * mult, nil
}

// ParseDuration parses a duration such as "4ms" or "1.5s" (Go syntax), or
// a plain number of seconds such as "2.5".
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if d, err := time.ParseDuration(t); err == nil {
		return d, nil
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > 1e9 {
		return 0, fmt.Errorf("duration %q: want %s", s, formDuration)
	}
	return time.Duration(math.Round(v * 1e9)), nil
}
