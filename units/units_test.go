package units

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
	}{
		// Forms that emu.ParseRate, sim.ParseRate and the lab's --rates took.
		{"200mbit", 200e6}, {"1.5gbit", 1.5e9}, {"1.5Gbit", 1.5e9}, {"64kbps", 64e3}, {"10mbps", 10e6},
		{"1gbps", 1e9}, {"100gbit", 100e9}, {"1bit", 1}, {"123bit", 123}, {"0.5gbit", 5e8}, {"0.5bit", 0.5},
		{"1000kbit", 1e6}, {"200Mbit", 200e6}, {"2e8", 2e8}, {"100", 100}, {"10 mbit", 10e6},
		{" 200mbit ", 200e6}, {"+200mbit", 200e6}, {".5gbit", 5e8}, {"5.mbit", 5e6}, {"1_000", 1000},
		{"1_000mbit", 1e9}, {"0x1p27", 1 << 27}, {"0X1P3", 8}, {"99.999999999gbit", 99.999999999e9},
		{"0.000001bit", 1e-6}, {"5\u00a0mbit", 5e6},
		// New: exponents before a unit, /s, zero.
		{"1e6bit", 1e6}, {"2.5Gbit/s", 2.5e9}, {"100mbit/s", 100e6}, {"1 bit/S", 1}, {"0", 0},
		{"0mbit", 0}, {"-0", 0}, {"-0.0gbit", 0},
	} {
		got, err := ParseRate(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseRateErrors(t *testing.T) {
	for _, tc := range []struct {
		in     string
		sent   error
		reason string
	}{
		{"", ErrSyntax, "empty"},
		{"   ", ErrSyntax, "empty"},
		{"fast", ErrSyntax, "no number"},
		{"mbit", ErrSyntax, "no number"},
		{"200mbt", ErrSyntax, `unknown unit "mbt"`},
		{"200mb", ErrSyntax, `unknown unit "mb"`},
		{"200mbitt", ErrSyntax, `unknown unit "mbitt"`},
		{"1..5mbit", ErrSyntax, `unknown unit ".5mbit"`},
		{"5 mbit/s/s", ErrSyntax, "unknown unit"},
		{"5mbps/s", ErrSyntax, `unknown unit "mbps/s"`},
		{"5/s", ErrSyntax, `unknown unit "/s"`},
		{"1e6 bit 5", ErrSyntax, "unknown unit"},
		{"0x10", ErrSyntax, `bad number "0x10"`},
		{"1__0", ErrSyntax, `bad number "1__0"`},
		{"-1mbit", ErrRange, "negative"},
		{"-5", ErrRange, "negative"},
		{"NaN", ErrRange, "not finite"},
		{"inf", ErrRange, "not finite"},
		{"-Infinity bit", ErrRange, "not finite"},
		{"1e400", ErrRange, "too large"},
		{"1e300gbit", ErrRange, "too large"},
	} {
		_, err := ParseRate(tc.in)
		checkErr(t, "ParseRate", tc.in, err, "rate", tc.sent, tc.reason, RateForm)
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		// Forms that sim.ParseSize and the command's --size took.
		{"65536", 65536}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"4m", 4 << 20}, {"4M", 4 << 20}, {"1MB", 1e6},
		{"10B", 10}, {"2 GiB", 2 << 30}, {"1GiB", 1 << 30}, {"8KB", 8000}, {"3GB", 3e9}, {"5k", 5 << 10},
		{"5K", 5 << 10}, {"1g", 1 << 30}, {"1G", 1 << 30}, {"+5", 5}, {"007", 7}, {"-0", 0}, {"0", 0},
		{" 64KiB ", 64 << 10}, {"9223372036854775807", math.MaxInt64}, {"8589934591GiB", 8589934591 << 30},
		// New on the command line: any case.
		{"64kib", 64 << 10}, {"64KIB", 64 << 10}, {"1mib", 1 << 20}, {"64kb", 64000}, {"64Kb", 64000}, {"10b", 10},
	} {
		got, err := ParseSize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseSizeErrors(t *testing.T) {
	for _, tc := range []struct {
		in     string
		sent   error
		reason string
	}{
		{"", ErrSyntax, "empty"},
		{"x", ErrSyntax, "no number"},
		{"KiB", ErrSyntax, "no number"},
		{"1.5MiB", ErrSyntax, "fractions and exponents"},
		{"1e3", ErrSyntax, "fractions and exponents"},
		{"1MB2", ErrSyntax, `unknown unit "MB2"`},
		{"5kbit", ErrSyntax, `unknown unit "kbit"`},
		{"0x10", ErrSyntax, `unknown unit "x10"`},
		{"1_000", ErrSyntax, `unknown unit "_000"`},
		{"-1", ErrRange, "negative"},
		{"-1KiB", ErrRange, "negative"},
		{"-99999999999999999999", ErrRange, "negative"},
		{"9999999999GiB", ErrRange, "too large"},
		{"9223372036854775808", ErrRange, "too large"},
		{"8589934592GiB", ErrRange, "too large"},
		{"nan", ErrRange, "not finite"},
	} {
		_, err := ParseSize(tc.in)
		checkErr(t, "ParseSize", tc.in, err, "size", tc.sent, tc.reason, SizeForm)
	}
}

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		// Forms that sim.ParseDuration and time.ParseDuration took.
		{"4ms", 4 * time.Millisecond}, {"1.5s", 1500 * time.Millisecond}, {"2", 2 * time.Second},
		{"0.25", 250 * time.Millisecond}, {"500us", 500 * time.Microsecond}, {"500µs", 500 * time.Microsecond},
		{"500μs", 500 * time.Microsecond}, {"1m30s", 90 * time.Second}, {"2h", 2 * time.Hour}, {"1ns", 1},
		{"0", 0}, {"-0", 0}, {"-0s", 0}, {"+5s", 5 * time.Second}, {".5s", 500 * time.Millisecond},
		{" 4ms ", 4 * time.Millisecond}, {"1e3", 1000 * time.Second}, {"1_000", 1000 * time.Second},
		{"0x1p-1", 500 * time.Millisecond}, {"1e-10", 0}, {"1.5e-9", 2}, {"2562047h47m16.854775807s", math.MaxInt64},
		// New: upper-case units, and numbers of seconds beyond 1e9.
		{"4MS", 4 * time.Millisecond}, {"1H", time.Hour}, {"2e9", 2e9 * time.Second},
	} {
		got, err := ParseDuration(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseDurationErrors(t *testing.T) {
	for _, tc := range []struct {
		in     string
		sent   error
		reason string
	}{
		{"", ErrSyntax, "empty"},
		{"soon", ErrSyntax, "neither a Go duration nor a number of seconds"},
		{"4 ms", ErrSyntax, "neither"},
		{"1x", ErrSyntax, "neither"},
		{"1.5.5s", ErrSyntax, "neither"},
		{"-1s", ErrRange, "negative"},
		{"-4ms", ErrRange, "negative"},
		{"-2.5", ErrRange, "negative"},
		{"1e300", ErrRange, "too large"},
		{"9.3e9", ErrRange, "too large"},
		{"9999999999h", ErrRange, "too large"},
		{"2562047h47m16.854775808s", ErrRange, "too large"},
		{"NaN", ErrRange, "not finite"},
		{"-inf", ErrRange, "not finite"},
	} {
		_, err := ParseDuration(tc.in)
		checkErr(t, "ParseDuration", tc.in, err, "duration", tc.sent, tc.reason, DurationForm)
	}
}

// checkErr checks the contract of a parser's error: one line, "units: "
// first, the quantity and the value named, the reason, what is allowed,
// an *Error wrapping exactly one of ErrSyntax and ErrRange.
func checkErr(t *testing.T, fn, in string, err error, quantity string, sent error, reason, form string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s(%q): no error", fn, in)
		return
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "units: "+quantity+" ") {
		t.Errorf("%s(%q): error %q is not one line starting with %q", fn, in, msg, "units: "+quantity)
	}
	if !strings.Contains(msg, strings.TrimSpace(strings.ReplaceAll(in, "\u00a0", " "))) && len(in) <= maxQuoted {
		t.Errorf("%s(%q): error %q does not name the value", fn, in, msg)
	}
	if !strings.Contains(msg, reason) || !strings.HasSuffix(msg, "; allowed: "+form) {
		t.Errorf("%s(%q): error %q; want the reason %q and allowed: FORM", fn, in, msg, reason)
	}
	var ue *Error
	if !errors.As(err, &ue) || ue.Quantity != quantity || ue.Value != in {
		t.Errorf("%s(%q): error %#v is not an *Error for the %s %q", fn, in, err, quantity, in)
	}
	other := ErrRange
	if sent == ErrRange {
		other = ErrSyntax
	}
	if !errors.Is(err, sent) || errors.Is(err, other) {
		t.Errorf("%s(%q): error %v: errors.Is(%v) = %v, errors.Is(%v) = %v", fn, in, err, sent, errors.Is(err, sent), other, errors.Is(err, other))
	}
}

func TestErrorCutsLongValues(t *testing.T) {
	long := strings.Repeat("é", 100) + "x"
	_, err := ParseRate(long)
	msg := err.Error()
	if !strings.HasPrefix(msg, `units: rate "`+strings.Repeat("é", maxQuoted/2)+`"...: `) {
		t.Errorf("error %q: want the value cut at %d bytes on a rune boundary", msg, maxQuoted)
	}
	var ue *Error
	if !errors.As(err, &ue) || ue.Value != long {
		t.Errorf("Error.Value is not the whole value")
	}
	_, err = ParseSize("12\n34")
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q is not one line", err)
	}
}

func TestFormatRate(t *testing.T) {
	for _, tc := range []struct {
		bps  float64
		want string
	}{
		{0, "0bit"}, {1, "1bit"}, {999, "999bit"}, {1000, "1kbit"}, {1500, "1.5kbit"}, {2e8, "200mbit"},
		{1.5e9, "1.5gbit"}, {100e9, "100gbit"}, {1234567, "1.234567mbit"}, {0.25, "0.25bit"}, {1e12, "1000gbit"},
	} {
		got := FormatRate(tc.bps)
		if got != tc.want {
			t.Errorf("FormatRate(%v) = %q, want %q", tc.bps, got, tc.want)
		}
		if back, err := ParseRate(got); err != nil || back != tc.bps {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", got, back, err, tc.bps)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0B"}, {1, "1B"}, {1000, "1000B"}, {1024, "1KiB"}, {1536, "1536B"}, {65536, "64KiB"},
		{1 << 20, "1MiB"}, {3 << 30, "3GiB"}, {1<<30 + 1<<20, "1025MiB"}, {math.MaxInt64, "9223372036854775807B"},
	} {
		got := FormatSize(tc.n)
		if got != tc.want {
			t.Errorf("FormatSize(%v) = %q, want %q", tc.n, got, tc.want)
		}
		if back, err := ParseSize(got); err != nil || back != tc.n {
			t.Errorf("ParseSize(%q) = %v, %v; want %v", got, back, err, tc.n)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {1, "1ns"}, {2 * time.Millisecond, "2ms"}, {1500 * time.Microsecond, "1500us"},
		{time.Hour, "3600s"}, {1001, "1001ns"}, {math.MaxInt64, "9223372036854775807ns"},
	} {
		got := FormatDuration(tc.d)
		if got != tc.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
		if back, err := ParseDuration(got); err != nil || back != tc.d {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", got, back, err, tc.d)
		}
	}
}

func TestFormatSizeWords(t *testing.T) {
	for n, want := range map[int64]string{65536: "64 KiB", 4 << 20: "4 MiB", 1000: "1000-byte", 0: "0-byte", 1536: "1536-byte", 3 << 10: "3 KiB"} {
		if got := FormatSizeWords(n); got != want {
			t.Errorf("FormatSizeWords(%d) = %q, want %q", n, got, want)
		}
	}
}
