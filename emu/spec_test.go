package emu

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail/units"
)

func TestParseSpec(t *testing.T) {
	good := []struct {
		in    string
		want  Spec
		canon string
	}{
		{"emu:200mbit", Spec{Kind: "emu", RateBps: 200e6}, "emu:200mbit"},
		{"emu:200mbit/2ms", Spec{Kind: "emu", RateBps: 200e6, Delay: 2 * time.Millisecond}, "emu:200mbit/2ms"},
		{"emu:1.5gbit/500us", Spec{Kind: "emu", RateBps: 1.5e9, Delay: 500 * time.Microsecond}, "emu:1.5gbit/500us"},
		{"emu:1.5gbit/500µs", Spec{Kind: "emu", RateBps: 1.5e9, Delay: 500 * time.Microsecond}, "emu:1.5gbit/500us"},
		{"emu:0.5gbit", Spec{Kind: "emu", RateBps: 5e8}, "emu:500mbit"},
		{"emu:1000kbit", Spec{Kind: "emu", RateBps: 1e6}, "emu:1mbit"},
		{"emu:64kbps", Spec{Kind: "emu", RateBps: 64e3}, "emu:64kbit"},
		{"emu:10mbps/1s", Spec{Kind: "emu", RateBps: 10e6, Delay: time.Second}, "emu:10mbit/1s"},
		{"emu:1gbps/0ms", Spec{Kind: "emu", RateBps: 1e9}, "emu:1gbit"},
		{"emu:100gbit/10s", Spec{Kind: "emu", RateBps: 100e9, Delay: 10 * time.Second}, "emu:100gbit/10s"},
		{"emu:1bit/1ns", Spec{Kind: "emu", RateBps: 1, Delay: 1}, "emu:1bit/1ns"},
		{"emu:123bit/1500us", Spec{Kind: "emu", RateBps: 123, Delay: 1500 * time.Microsecond}, "emu:123bit/1500us"},
		{"emu:0.5bit", Spec{Kind: "emu", RateBps: 0.5}, "emu:0.5bit"},
		{"EMU:200Mbit", Spec{Kind: "emu", RateBps: 200e6}, "emu:200mbit"},
		{"emu:200", Spec{Kind: "emu", RateBps: 200}, "emu:200bit"},
		{"emu:5.mbit", Spec{Kind: "emu", RateBps: 5e6}, "emu:5mbit"},
		{"emu:.5mbit", Spec{Kind: "emu", RateBps: 5e5}, "emu:500kbit"},
		{"emu:1e6bit", Spec{Kind: "emu", RateBps: 1e6}, "emu:1mbit"},
		{"emu:10 mbit/4MS", Spec{Kind: "emu", RateBps: 10e6, Delay: 4 * time.Millisecond}, "emu:10mbit/4ms"},
		{"emu:200mbit/2", Spec{Kind: "emu", RateBps: 200e6, Delay: 2 * time.Second}, "emu:200mbit/2s"},
		{"emu:200mbit/0.0025", Spec{Kind: "emu", RateBps: 200e6, Delay: 2500 * time.Microsecond}, "emu:200mbit/2500us"},
		{"  emu:200mbit/2ms ", Spec{Kind: "emu", RateBps: 200e6, Delay: 2 * time.Millisecond}, "emu:200mbit/2ms"},
		{"loop", Spec{Kind: "loop"}, "loop"},
		{"tcp:10.0.0.1>10.0.0.2", Spec{Kind: "tcp", Local: "10.0.0.1", Remote: "10.0.0.2"}, "tcp:10.0.0.1>10.0.0.2"},
		{"tcp:10.0.0.1>10.0.0.2:7000", Spec{Kind: "tcp", Local: "10.0.0.1", Remote: "10.0.0.2:7000"}, "tcp:10.0.0.1>10.0.0.2:7000"},
		{"tcp:fd00::1>FD00:0::2", Spec{Kind: "tcp", Local: "fd00::1", Remote: "fd00::2"}, "tcp:fd00::1>fd00::2"},
		{"tcp:fd00::1>[fd00::2]:7000", Spec{Kind: "tcp", Local: "fd00::1", Remote: "[fd00::2]:7000"}, "tcp:fd00::1>[fd00::2]:7000"},
		{"tcp:fe80::1%eth0>fe80::2%eth0", Spec{Kind: "tcp", Local: "fe80::1%eth0", Remote: "fe80::2%eth0"}, "tcp:fe80::1%eth0>fe80::2%eth0"},
	}
	for _, tc := range good {
		got, err := ParseSpec(tc.in)
		if err != nil {
			t.Errorf("ParseSpec(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseSpec(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		if s := got.String(); s != tc.canon {
			t.Errorf("ParseSpec(%q).String() = %q, want %q", tc.in, s, tc.canon)
		}
		back, err := ParseSpec(got.String())
		if err != nil || back != got {
			t.Errorf("round trip of %q: got %+v, %v", tc.in, back, err)
		}
	}

	bad := []struct {
		in, bad, form string
	}{
		{"", `""`, "emu:RATE[/DELAY]"},
		{"emu", `"emu"`, "emu:RATE[/DELAY]"},
		{"emu:", `""`, "a rate in bits per second"},
		{"emu:200mb", `unknown unit "mb"`, "a rate in bits per second"},
		{"emu:mbit", `"mbit"`, "a rate in bits per second"},
		{"emu:-5mbit", `"-5mbit": negative`, "a rate in bits per second"},
		{"emu:0mbit", `"0mbit"`, "> 0 and <= 100gbit"},
		{"emu:101gbit", `"101gbit"`, "> 0 and <= 100gbit"},
		{"emu:200mbit/", `""`, "a duration"},
		{"emu:200mbit/-1ms", `"-1ms": negative`, "a duration"},
		{"emu:200mbit/11s", `"11s"`, "0..10s"},
		{"emu:200mbit/2ms/3ms", `"2ms/3ms"`, "a duration"},
		{"loop:1", `"loop:1"`, "loop"},
		{"tcp", `"tcp"`, "tcp:LOCALIP>REMOTEIP"},
		{"tcp:10.0.0.1", `"tcp:10.0.0.1"`, "tcp:LOCALIP>REMOTEIP"},
		{"tcp:10.0.0.1>", `""`, "tcp:LOCALIP>REMOTEIP"},
		{"tcp:host>10.0.0.2", `"host"`, "tcp:LOCALIP>REMOTEIP"},
		{"tcp:10.0.0.1>10.0.0.2:0", `"10.0.0.2:0"`, "tcp:LOCALIP>REMOTEIP"},
		{"tcp:10.0.0.1>10.0.0.2:70000", `"10.0.0.2:70000"`, "tcp:LOCALIP>REMOTEIP"},
		{"tcp:10.0.0.1:5>10.0.0.2", `"10.0.0.1:5"`, "tcp:LOCALIP>REMOTEIP"},
		{"tcp:fe80::1%a,b>fe80::2", `"fe80::1%a,b"`, "tcp:LOCALIP>REMOTEIP"},
		{"udp:1.2.3.4>1.2.3.5", `"udp:1.2.3.4>1.2.3.5"`, "emu:RATE[/DELAY]"},
	}
	for _, tc := range bad {
		_, err := ParseSpec(tc.in)
		if err == nil {
			t.Errorf("ParseSpec(%q): no error", tc.in)
			continue
		}
		checkErr(t, "ParseSpec("+tc.in+")", err, tc.bad, tc.form)
	}
}

// TestParseSpecUnitsErrors: a rate or delay that package units refuses
// comes back wrapped, for errors.Is.
func TestParseSpecUnitsErrors(t *testing.T) {
	for in, want := range map[string]error{
		"emu:fast":        units.ErrSyntax,
		"emu:-1mbit":      units.ErrRange,
		"emu:1mbit/soon":  units.ErrSyntax,
		"emu:1mbit/-2ms":  units.ErrRange,
		"loop,emu:1mbt":   units.ErrSyntax,
		"emu:1gbit,emu:x": units.ErrSyntax,
	} {
		_, err := ParseSpecs(in)
		if !errors.Is(err, want) {
			t.Errorf("ParseSpecs(%q) = %v; want an error wrapping %v", in, err, want)
		}
	}
	if _, err := ParseLoads("0:0.5@-1s", 1); !errors.Is(err, units.ErrRange) {
		t.Errorf("ParseLoads(0:0.5@-1s) = %v; want an error wrapping units.ErrRange", err)
	}
}

// checkErr checks that err is one line, names the bad value and says
// what is allowed.
func checkErr(t *testing.T, call string, err error, bad, form string) {
	t.Helper()
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("%s: error is not one line: %q", call, msg)
	}
	if !strings.Contains(msg, bad) {
		t.Errorf("%s: error %q does not name the bad value %s", call, msg, bad)
	}
	if !strings.Contains(msg, "allowed") || !strings.Contains(msg, form) {
		t.Errorf("%s: error %q does not give the allowed form %q", call, msg, form)
	}
}

func TestParseSpecs(t *testing.T) {
	got, err := ParseSpecs("emu:200mbit/2ms, emu:100mbit ,loop,tcp:10.0.0.1>10.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	want := []Spec{
		{Kind: "emu", RateBps: 200e6, Delay: 2 * time.Millisecond},
		{Kind: "emu", RateBps: 100e6},
		{Kind: "loop"},
		{Kind: "tcp", Local: "10.0.0.1", Remote: "10.0.0.2"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d specs, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("spec %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if s := FormatSpecs(got); s != "emu:200mbit/2ms,emu:100mbit,loop,tcp:10.0.0.1>10.0.0.2" {
		t.Errorf("FormatSpecs = %q", s)
	}

	bad := []struct{ in, bad, form string }{
		{"", `""`, "comma-separated rail specs"},
		{"  ", `"  "`, "comma-separated rail specs"},
		{"emu:1mbit,,loop", "item 1 is empty", "comma-separated rail specs"},
		{"emu:1mbit,", "item 1 is empty", "comma-separated rail specs"},
		{"loop,emu:fast", `"fast"`, "a rate in bits per second"},
		{"loop,emu:fast", "item 1", "a rate in bits per second"},
	}
	for _, tc := range bad {
		_, err := ParseSpecs(tc.in)
		if err == nil {
			t.Errorf("ParseSpecs(%q): no error", tc.in)
			continue
		}
		checkErr(t, "ParseSpecs("+tc.in+")", err, tc.bad, tc.form)
	}
}

func TestParseLoads(t *testing.T) {
	got, err := ParseLoads("0:0.5@4s, 0:0@8s,2:0.25@0s,1:0.99@1500ms", 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []Load{
		{Rail: 0, Fraction: 0.5, At: 4 * time.Second},
		{Rail: 0, Fraction: 0, At: 8 * time.Second},
		{Rail: 2, Fraction: 0.25, At: 0},
		{Rail: 1, Fraction: 0.99, At: 1500 * time.Millisecond},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("load %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if s := want[3].String(); s != "1:0.99@1500ms" {
		t.Errorf("Load.String = %q", s)
	}
	if got, err := ParseLoads("0:0.5@4, 0:0.25@1.5S", 1); err != nil || len(got) != 2 || got[0].At != 4*time.Second || got[1].At != 1500*time.Millisecond {
		t.Errorf("ParseLoads with plain seconds and an upper-case unit = %v, %v", got, err)
	}
	if got, err := ParseLoads("", 2); err != nil || got != nil {
		t.Errorf("ParseLoads(\"\") = %v, %v; want nil, nil", got, err)
	}
	if got, err := ParseLoads(" ", 0); err != nil || got != nil {
		t.Errorf("ParseLoads(\" \") = %v, %v; want nil, nil", got, err)
	}

	bad := []struct {
		in    string
		rails int
		bad   string
	}{
		{"0:0.5", 2, `"0:0.5"`},
		{"0.5@4s", 2, `"0.5@4s"`},
		{"2:0.5@4s", 2, `"2"`},
		{"-1:0.5@4s", 2, `"-1"`},
		{"x:0.5@4s", 2, `"x"`},
		{"0:1@4s", 2, `"1"`},
		{"0:-0.1@4s", 2, `"-0.1"`},
		{"0:NaN@4s", 2, `"NaN"`},
		{"0:half@4s", 2, `"half"`},
		{"0:0.5@-1s", 2, `"-1s"`},
		{"0:0.5@4s,", 2, `""`},
		{"0:0.5@4s", 0, `"0"`},
	}
	for _, tc := range bad {
		_, err := ParseLoads(tc.in, tc.rails)
		if err == nil {
			t.Errorf("ParseLoads(%q, %d): no error", tc.in, tc.rails)
			continue
		}
		checkErr(t, "ParseLoads("+tc.in+")", err, tc.bad, "RAIL:FRACTION@TIME")
	}
}

func TestRailLoads(t *testing.T) {
	loads := []Load{{0, 0.5, 4 * time.Second}, {1, 0.1, 0}, {0, 0, 8 * time.Second}}
	got := RailLoads(loads, 0)
	if len(got) != 2 || got[0] != loads[0] || got[1] != loads[2] {
		t.Errorf("RailLoads(0) = %v", got)
	}
	if got := RailLoads(loads, 5); got != nil {
		t.Errorf("RailLoads(5) = %v, want nil", got)
	}
}
