package units

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The allowed forms of each quantity, as error messages quote them after
// "allowed: ". Callers may quote them in their own help texts.
const (
	RateForm     = "a rate in bits per second: a number with an optional unit bit, kbit, mbit, gbit (decimal; bps, kbps, mbps, gbps are synonyms; /s may follow), case-insensitive, like 200mbit, 1.5Gbit/s or 2e8; no unit means bit/s"
	SizeForm     = "a byte count: an integer with an optional unit B, KiB, MiB, GiB (k, m, g mean KiB, MiB, GiB) or KB, MB, GB (powers of 10), case-insensitive, like 65536, 64KiB or 4m"
	DurationForm = "a duration: Go syntax like 4ms, 1.5s or 1m30s (units ns, us, µs, ms, s, m, h, case-insensitive) or a number of seconds like 2.5"
)

// Quantity names, as Error.Quantity holds them.
const (
	qRate     = "rate"
	qSize     = "size"
	qDuration = "duration"
)

// ErrSyntax is wrapped by the errors of values that do not follow the
// grammar; ErrRange by those of values that do but are negative, not
// finite, or too large for the result type.
var (
	ErrSyntax = errors.New("units: invalid syntax")
	ErrRange  = errors.New("units: value out of range")
)

// Error is the error of a parser: which quantity, the value given, what is
// wrong with it, and ErrSyntax or ErrRange.
type Error struct {
	Quantity string // "rate", "size" or "duration"
	Value    string // the value as given
	Reason   string // what is wrong, e.g. `unknown unit "mbt"`
	Err      error  // ErrSyntax or ErrRange
}

// maxQuoted is the longest part of a value an error message quotes.
const maxQuoted = 80

// Error returns the message "units: QUANTITY "VALUE": REASON; allowed:
// FORM", on one line; a value longer than 80 bytes is cut short.
func (e *Error) Error() string {
	v := e.Value
	cut := ""
	if len(v) > maxQuoted {
		n := maxQuoted
		for n > 0 && !utf8.RuneStart(v[n]) {
			n--
		}
		v, cut = v[:n], "..."
	}
	return fmt.Sprintf("units: %s %q%s: %s; allowed: %s", e.Quantity, v, cut, e.Reason, form(e.Quantity))
}

// Unwrap returns ErrSyntax or ErrRange.
func (e *Error) Unwrap() error { return e.Err }

func form(quantity string) string {
	switch quantity {
	case qRate:
		return RateForm
	case qSize:
		return SizeForm
	case qDuration:
		return DurationForm
	}
	return quantity
}

func syntaxErr(q, s, reason string) error {
	return &Error{Quantity: q, Value: s, Reason: reason, Err: ErrSyntax}
}

func rangeErr(q, s, reason string) error {
	return &Error{Quantity: q, Value: s, Reason: reason, Err: ErrRange}
}

// rateUnit returns the bits per second of a rate unit, lower case and
// without a trailing "/s".
func rateUnit(u string) (float64, bool) {
	switch u {
	case "bit", "bps":
		return 1, true
	case "kbit", "kbps":
		return 1e3, true
	case "mbit", "mbps":
		return 1e6, true
	case "gbit", "gbps":
		return 1e9, true
	}
	return 0, false
}

// sizeUnit returns the bytes of a size unit, lower case.
func sizeUnit(u string) (int64, bool) {
	switch u {
	case "b":
		return 1, true
	case "k", "kib":
		return 1 << 10, true
	case "m", "mib":
		return 1 << 20, true
	case "g", "gib":
		return 1 << 30, true
	case "kb":
		return 1e3, true
	case "mb":
		return 1e6, true
	case "gb":
		return 1e9, true
	}
	return 0, false
}

// ParseRate parses a rate into bits per second: a NUMBER with an optional
// unit, such as "200mbit", "1.5gbit", "2.5Gbit/s", "64kbps" or "2e8" (see
// the package documentation). The result is finite and >= 0.
func ParseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	num, unit := splitNumber(t)
	if num == "" {
		return 0, noNumber(qRate, s, t)
	}
	mult := 1.0
	if unit != "" {
		key := lowerASCII(unit)
		m, ok := rateUnit(strings.TrimSuffix(key, "/s"))
		if !ok || strings.HasSuffix(key, "ps/s") {
			return 0, syntaxErr(qRate, s, fmt.Sprintf("unknown unit %q", unit))
		}
		mult = m
	}
	v, err := parseNumber(qRate, s, num)
	if err != nil {
		return 0, err
	}
	bps := v * mult
	if math.IsInf(bps, 0) {
		return 0, rangeErr(qRate, s, "too large")
	}
	return bps, nil
}

// ParseSize parses a byte count: an INTEGER with an optional unit, such as
// "65536", "64KiB", "64kib", "4m" or "1MB" (see the package
// documentation). The result is >= 0.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	num, unit := splitInteger(t)
	if num == "" {
		return 0, noNumber(qSize, s, t)
	}
	mult := int64(1)
	if unit != "" {
		m, ok := sizeUnit(lowerASCII(unit))
		if !ok {
			if unit[0] == '.' || (unit[0] == 'e' || unit[0] == 'E') && len(unit) > 1 && strings.IndexByte("+-0123456789", unit[1]) >= 0 {
				return 0, syntaxErr(qSize, s, "fractions and exponents are not allowed in a size")
			}
			return 0, syntaxErr(qSize, s, fmt.Sprintf("unknown unit %q", unit))
		}
		mult = m
	}
	n, err := strconv.ParseInt(num, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		if num[0] == '-' {
			return 0, rangeErr(qSize, s, "negative")
		}
		return 0, rangeErr(qSize, s, "too large; at most 9223372036854775807 bytes")
	case err != nil:
		return 0, syntaxErr(qSize, s, fmt.Sprintf("bad integer %q", num))
	case n < 0:
		return 0, rangeErr(qSize, s, "negative")
	case n > math.MaxInt64/mult:
		return 0, rangeErr(qSize, s, "too large; at most 9223372036854775807 bytes")
	}
	return n * mult, nil
}

// ParseDuration parses a duration: Go syntax such as "4ms", "1.5s" or
// "1m30s" with case-insensitive units, or a NUMBER of seconds such as
// "2.5" (see the package documentation). A number of seconds is rounded
// to the nearest nanosecond. The result is >= 0.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if num, rest := splitNumber(t); num != "" && rest == "" {
		v, err := parseNumber(qDuration, s, num)
		if err != nil {
			return 0, err
		}
		ns := math.Round(v * 1e9)
		if ns >= 1<<63 {
			return 0, rangeErr(qDuration, s, "too large; at most about 292 years")
		}
		return time.Duration(ns), nil
	}
	if t == "" {
		return 0, syntaxErr(qDuration, s, "empty")
	}
	low := lowerASCII(t)
	d, err := time.ParseDuration(low)
	if err != nil {
		if goDurationSyntax(low) {
			return 0, rangeErr(qDuration, s, "too large; at most about 292 years")
		}
		if isNonFinite(t) {
			return 0, rangeErr(qDuration, s, "not finite")
		}
		return 0, syntaxErr(qDuration, s, "neither a Go duration nor a number of seconds")
	}
	if d < 0 {
		return 0, rangeErr(qDuration, s, "negative")
	}
	return d, nil
}

// noNumber is the error of a value t (s trimmed) that does not start with
// a number.
func noNumber(q, s, t string) error {
	switch {
	case t == "":
		return syntaxErr(q, s, "empty")
	case isNonFinite(t):
		return rangeErr(q, s, "not finite")
	}
	return syntaxErr(q, s, "no number")
}

// parseNumber parses the NUMBER num of the value s of quantity q.
func parseNumber(q, s, num string) (float64, error) {
	v, err := strconv.ParseFloat(num, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, rangeErr(q, s, "too large")
	case err != nil:
		return 0, syntaxErr(q, s, fmt.Sprintf("bad number %q", num))
	case v < 0:
		return 0, rangeErr(q, s, "negative")
	case v == 0:
		return 0, nil // also for "-0"
	}
	return v, nil
}

// isNonFinite reports whether t is a signed or unsigned inf, infinity or
// nan, with or without something after it.
func isNonFinite(t string) bool {
	t = strings.TrimLeft(t, "+-")
	low := lowerASCII(t[:min(len(t), 3)])
	return low == "inf" || low == "nan"
}

// splitNumber splits t into a leading NUMBER (the longest prefix that can
// be a strconv.ParseFloat literal, which ParseFloat then checks) and the
// rest with leading white space removed. num is "" when t does not start
// with a number.
func splitNumber(t string) (num, rest string) {
	i := 0
	if i < len(t) && (t[i] == '+' || t[i] == '-') {
		i++
	}
	start := i
	if len(t) >= i+2 && t[i] == '0' && (t[i+1] == 'x' || t[i+1] == 'X') {
		// Hexadecimal: 0x MANTISSA [. MANTISSA] p EXPONENT.
		i += 2
		i = skip(t, i, isHexDigit)
		if i < len(t) && t[i] == '.' {
			i = skip(t, i+1, isHexDigit)
		}
		if i < len(t) && (t[i] == 'p' || t[i] == 'P') {
			i = exponent(t, i)
		}
	} else {
		j := skip(t, i, isDigit)
		digits := j > i
		if j < len(t) && t[j] == '.' {
			k := skip(t, j+1, isDigit)
			digits = digits || k > j+1
			j = k
		}
		if !digits {
			return "", t
		}
		i = j
		if i < len(t) && (t[i] == 'e' || t[i] == 'E') {
			i = exponent(t, i)
		}
	}
	if i == start {
		return "", t
	}
	return t[:i], strings.TrimLeftFunc(t[i:], unicode.IsSpace)
}

// exponent returns the end of the exponent that starts with the letter at
// t[i] (e or p), or i if no digit follows the letter and its sign.
func exponent(t string, i int) int {
	j := i + 1
	if j < len(t) && (t[j] == '+' || t[j] == '-') {
		j++
	}
	if j < len(t) && t[j] >= '0' && t[j] <= '9' {
		return skip(t, j, isDigit)
	}
	return i
}

// splitInteger splits t into a leading INTEGER (optional sign and decimal
// digits) and the rest with leading white space removed.
func splitInteger(t string) (num, rest string) {
	i := 0
	if i < len(t) && (t[i] == '+' || t[i] == '-') {
		i++
	}
	j := skipDigits(t, i)
	if j == i {
		return "", t
	}
	return t[:j], strings.TrimLeftFunc(t[j:], unicode.IsSpace)
}

func skip(t string, i int, ok func(byte) bool) int {
	for i < len(t) && (ok(t[i]) || t[i] == '_') {
		i++
	}
	return i
}

func skipDigits(t string, i int) int {
	for i < len(t) && isDigit(t[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHexDigit(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// lowerASCII lowers the ASCII letters of s and leaves every other byte
// alone (so "µs" stays as it is).
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// goDurationSyntax reports whether s (lower case) follows the syntax of
// time.ParseDuration: [+-] then one or more NUMBER UNIT with NUMBER decimal
// digits with an optional fraction and UNIT one of ns, us, µs, μs, ms, s,
// m, h. ParseDuration uses it to tell an overflow from a syntax error.
func goDurationSyntax(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for s != "" {
		i := skipDigits(s, 0)
		j := i
		if j < len(s) && s[j] == '.' {
			j = skipDigits(s, j+1)
		}
		if j == 0 || j == 1 && i == 0 {
			return false // no digits
		}
		s = s[j:]
		u := 0
		for u < len(s) && s[u] != '.' && !isDigit(s[u]) {
			u++
		}
		switch s[:u] {
		case "ns", "us", "µs", "μs", "ms", "s", "m", "h":
		default:
			return false
		}
		s = s[u:]
	}
	return true
}
