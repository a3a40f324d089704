package main

import (
	"errors"
	"fmt"

	"github.com/multirail/multirail/units"
)

// sizeForm describes the sizes the flags take (package units' grammar), for
// help texts.
const sizeForm = "bytes as an integer or with a unit in any case (64KiB, 4MiB, 1GiB; k/m/g = KiB/MiB/GiB; KB/MB/GB = powers of 10)"

// parseSize parses the value s of --flag with units.ParseSize and checks it
// lies in [lo, hi]. Errors are usage errors; those of malformed values
// wrap the units error.
func parseSize(flag, s string, lo, hi int64) (int64, error) {
	n, err := units.ParseSize(s)
	var ue *units.Error
	switch {
	case errors.As(err, &ue) && errors.Is(err, units.ErrRange):
		return 0, usagef("--%s %q is out of range (%s): allowed %d..%d bytes", flag, s, ue.Reason, lo, hi)
	case err != nil:
		return 0, usagef("--%s: %w", flag, err)
	case n < lo || n > hi:
		return 0, usagef("--%s %q = %d bytes is out of range: allowed %d..%d", flag, s, n, lo, hi)
	}
	return n, nil
}

// formatRate writes a rate as the flags take it: units.FormatRate.
func formatRate(bps float64) string { return units.FormatRate(bps) }

// mbit writes a rate in Mbit/s with one decimal, for tables.
func mbit(bps float64) string { return fmt.Sprintf("%.1f", bps/1e6) }
