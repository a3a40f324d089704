package main

import (
	"errors"
	"testing"

	"github.com/multirail/multirail/units"
)

// TestParseSizeFlag: the size flags read package units' grammar (in any
// case, as scenario files always did) and check their range.
func TestParseSizeFlag(t *testing.T) {
	for s, want := range map[string]int64{"65536": 65536, "64KiB": 64 << 10, "64kib": 64 << 10, "64KIB": 64 << 10,
		"4m": 4 << 20, "4M": 4 << 20, "1MB": 1e6, "8kb": 8000, "1 GiB": 1 << 30, " 512B ": 512} {
		if got, err := parseSize("size", s, 1, 1<<30); err != nil || got != want {
			t.Errorf("parseSize(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for s, sentinel := range map[string]error{"1.5MiB": units.ErrSyntax, "x": units.ErrSyntax, "4kbit": units.ErrSyntax} {
		_, err := parseSize("size", s, 1, 1<<30)
		var ue usageError
		if !errors.As(err, &ue) || !errors.Is(err, sentinel) {
			t.Errorf("parseSize(%q) = %v; want a usage error wrapping %v", s, err, sentinel)
		}
	}
	for _, s := range []string{"0", "2GiB", "-1", "9999999999999GiB"} {
		_, err := parseSize("size", s, 1, 1<<30)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("parseSize(%q) = %v; want a usage error", s, err)
		}
	}
}
