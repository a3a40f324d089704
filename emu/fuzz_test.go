package emu

import (
	"strings"
	"testing"
)

// FuzzParseSpec: ParseSpec never panics, errors are one line, and a spec
// that parses round-trips through String.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{
		"emu:200mbit", "emu:200mbit/2ms", "emu:1.5gbit/500us", "loop",
		"tcp:10.0.0.1>10.0.0.2", "tcp:fd00::1>[fd00::2]:7000", "emu:0.000001bit/1ns",
		"emu:99.999999999gbit/9999ms", "tcp:fe80::1%eth0>fe80::2%eth0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := ParseSpec(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("ParseSpec(%q): error not one line: %q", s, err)
			}
			return
		}
		canon := sp.String()
		back, err := ParseSpec(canon)
		if err != nil {
			t.Fatalf("ParseSpec(%q) = %+v, but its String %q does not parse: %v", s, sp, canon, err)
		}
		if back != sp {
			t.Fatalf("ParseSpec(%q) = %+v; String %q parses as %+v", s, sp, canon, back)
		}
		if again := back.String(); again != canon {
			t.Fatalf("String not stable: %q then %q", canon, again)
		}
		if list, err := ParseSpecs(canon + "," + canon); err != nil || len(list) != 2 || list[0] != sp {
			t.Fatalf("ParseSpecs(%q): %v, %v", canon+","+canon, list, err)
		}
	})
}

// FuzzParsePattern: ParsePattern never panics, errors are one line, and a
// pattern that parses round-trips through String.
func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{"off", "bursty", "bursty:busy=1s,idle=50ms,load=0.1:0.2,seed=9", "phases:calm=2s,congested=1s", "phases:load=0.5:0.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePattern(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("ParsePattern(%q): error not one line: %q", s, err)
			}
			return
		}
		back, err := ParsePattern(p.String())
		if err != nil || back != p {
			t.Fatalf("ParsePattern(%q) = %+v; String %q parses as %+v, %v", s, p, p.String(), back, err)
		}
	})
}
