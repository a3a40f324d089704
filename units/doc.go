// Package units is the one grammar for the rates, sizes and durations that
// the multirail command, emulated rails (package emu) and scenario files
// (package sim) read, and the formatting that writes them back.
//
// # Grammar
//
//	quantity  form              units (case-insensitive)                       result
//	rate      NUMBER [UNIT]     bit, kbit, mbit, gbit (10^0, 10^3, 10^6, 10^9  float64, bits per second
//	                            bit/s); bps, kbps, mbps, gbps are synonyms
//	                            (bits, not bytes); any of them may end in /s;
//	                            no unit: bit/s
//	size      INTEGER [UNIT]    B; KiB, MiB, GiB and k, m, g (1024^1..3);      int64, bytes
//	                            KB, MB, GB (1000^1..3); no unit: bytes
//	duration  Go duration       ns, us, µs, ms, s, m, h, also combined         time.Duration
//	          or NUMBER         (1m30s); a bare NUMBER is seconds
//
// NUMBER is a Go floating-point literal as strconv.ParseFloat reads it,
// without Inf and NaN: 200, 1.5, .5, 5., 2e8, 1_000, 0x1p27. INTEGER is
// decimal digits. Either may carry a leading '+', and a '-' only when the
// value is zero ("-0"). White space around the value and between a NUMBER
// or INTEGER and its unit is ignored: " 10 mbit " is 10^7 bit/s.
//
// Examples: rates 200mbit, 1.5gbit, 2.5Gbit/s, 64kbps, 2e8 (bit/s); sizes
// 65536, 64KiB, 64kib, 4m, 1MB; durations 4ms, 1.5s, 1m30s, 250us, 2.5
// (seconds).
//
// Rates and sizes count as bits per second and bytes respectively: "mbps"
// means megabits per second (unlike tc, where it means megabytes), and a
// bare k, m or g after a size means KiB, MiB or GiB, as the multirail flags
// and scenario files always had it.
//
// # Limits and errors
//
// Values must be finite and >= 0, and must fit their result type: a rate
// whose product overflows float64, a size above 2^63-1 bytes or a duration
// above about 292 years is refused. The parsers set no other bounds; a
// caller checks its own range (an emulated rail takes at most 100 gbit, a
// message at most 1 GiB, ...).
//
// Every error is a single line of the form
//
//	units: rate "200mbt": unknown unit "mbt"; allowed: ...
//
// naming the value and the allowed forms, and is an *Error that wraps
// ErrSyntax (the value does not follow the grammar) or ErrRange (it does,
// but is negative, not finite or too large), for errors.Is.
//
// # Formatting
//
// FormatRate, FormatSize and FormatDuration write a value in a compact form
// that the matching parser reads back exactly: FormatRate(1.5e9) is
// "1.5gbit", FormatSize(65536) is "64KiB", and FormatDuration of 1.5 ms is
// "1500us".
package units
