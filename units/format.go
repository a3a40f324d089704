package units

import (
	"fmt"
	"strconv"
	"time"
)

// FormatRate writes a rate in bits per second with the largest of the
// units gbit, mbit, kbit and bit that represents it exactly, so that
// ParseRate returns bps again: 2e8 -> "200mbit", 1.5e9 -> "1.5gbit",
// 1234.5 -> "1.2345kbit", 0.25 -> "0.25bit". bps should be finite and
// >= 0; other values give strings that ParseRate refuses.
func FormatRate(bps float64) string {
	for _, u := range []struct {
		name string
		mult float64
	}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}} {
		if bps < u.mult {
			continue
		}
		num := strconv.FormatFloat(bps/u.mult, 'f', -1, 64)
		if back, err := strconv.ParseFloat(num, 64); err == nil && back*u.mult == bps {
			return num + u.name
		}
	}
	return strconv.FormatFloat(bps, 'f', -1, 64) + "bit"
}

// FormatSize writes a byte count with the largest of the units GiB, MiB
// and KiB that divides it, or in bytes: 65536 -> "64KiB", 1<<30 ->
// "1GiB", 1000 -> "1000B", 0 -> "0B". ParseSize returns n again. n should
// be >= 0; a negative n gives a string that ParseSize refuses.
func FormatSize(n int64) string {
	for _, u := range []struct {
		name string
		mult int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// FormatDuration writes d as a whole number of the largest of the units
// s, ms, us and ns that divides it: 2*time.Millisecond -> "2ms",
// 1500*time.Microsecond -> "1500us", 0 -> "0s". ParseDuration (and
// time.ParseDuration) return d again. d should be >= 0; a negative d gives
// a string that ParseDuration refuses.
func FormatDuration(d time.Duration) string {
	for _, u := range []struct {
		name string
		unit time.Duration
	}{{"s", time.Second}, {"ms", time.Millisecond}, {"us", time.Microsecond}} {
		if d%u.unit == 0 {
			return strconv.FormatInt(int64(d/u.unit), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

// FormatSizeWords writes n bytes for prose: "64 KiB" or "4 MiB" when n is
// a whole multiple, else "1000-byte" (as in "1000-byte messages").
func FormatSizeWords(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d-byte", n)
}
