package main

import (
	"fmt"
	"strconv"
	"strings"
)

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
	{"k", 1 << 10}, {"K", 1 << 10}, {"m", 1 << 20}, {"M", 1 << 20}, {"g", 1 << 30}, {"G", 1 << 30},
	{"B", 1},
}

const sizeForm = "bytes as an integer or with a unit (64KiB, 4MiB, 1GiB; k/m/g = KiB/MiB/GiB; KB/MB/GB = powers of 10)"

// parseSize parses a byte count such as 65536, 64KiB or 4m and checks it
// lies in [lo, hi].
func parseSize(flag, s string, lo, hi int64) (int64, error) {
	num, mult := s, int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n < 0 {
		return 0, usagef("--%s %q: want %s", flag, s, sizeForm)
	}
	if mult > 1 && n > hi/mult {
		return 0, usagef("--%s %q is out of range: allowed %d..%d bytes", flag, s, lo, hi)
	}
	n *= mult
	if n < lo || n > hi {
		return 0, usagef("--%s %q = %d bytes is out of range: allowed %d..%d", flag, s, n, lo, hi)
	}
	return n, nil
}

func mbit(bps float64) string { return fmt.Sprintf("%.1f", bps/1e6) }
