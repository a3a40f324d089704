package emu

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/multirail/multirail/units"
)

// Limits of an emulated rail.
const (
	MaxRateBps = 100e9            // highest rate of an emu rail: 100 gbit/s
	MaxDelay   = 10 * time.Second // longest one-way delay of an emu rail
)

// Spec kinds.
const (
	KindEmu  = "emu"  // emulated rail: a Link shaped to RateBps and Delay
	KindLoop = "loop" // unshaped loopback TCP rail
	KindTCP  = "tcp"  // real TCP rail from Local to Remote
)

// The allowed forms, quoted in error messages.
const (
	formSpec   = `allowed: emu:RATE[/DELAY], loop, or tcp:LOCALIP>REMOTEIP[:PORT]`
	rangeRate  = `allowed: > 0 and <= 100gbit`
	rangeDelay = `allowed: 0..10s`
	formTCP    = `allowed: tcp:LOCALIP>REMOTEIP or tcp:LOCALIP>REMOTEIP:PORT (IPv6 with a port: [::1]:7000)`
	formList   = `allowed: comma-separated rail specs like emu:200mbit/2ms,loop,tcp:10.0.0.1>10.0.0.2`
)

// Spec is one parsed rail spec.
type Spec struct {
	Kind    string        // "emu", "loop" or "tcp"
	RateBps float64       // emu only: bits per second (> 0)
	Delay   time.Duration // emu only: one-way delay (>= 0)
	Local   string        // tcp only: local IP address
	Remote  string        // tcp only: remote IP address, optionally with :port
}

// String returns the canonical form of s, which ParseSpec parses back into
// s: "emu:200mbit", "emu:1.5gbit/500us", "loop", "tcp:10.0.0.1>10.0.0.2".
func (s Spec) String() string {
	switch s.Kind {
	case KindEmu:
		out := "emu:" + units.FormatRate(s.RateBps)
		if s.Delay != 0 {
			out += "/" + units.FormatDuration(s.Delay)
		}
		return out
	case KindLoop:
		return KindLoop
	case KindTCP:
		return "tcp:" + s.Local + ">" + s.Remote
	}
	return fmt.Sprintf("invalid-spec(%q)", s.Kind)
}

// LinkConfig returns the configuration of a Link that emulates an emu
// spec: its rate and delay, under the given background-load steps.
func (s Spec) LinkConfig(loads []Load) LinkConfig {
	return LinkConfig{RateBps: s.RateBps, Delay: s.Delay, Loads: loads}
}

// ParseSpec parses one rail spec: "emu:RATE[/DELAY]" (e.g. "emu:200mbit",
// "emu:200mbit/2ms", "emu:1.5gbit/500us"), "loop", or
// "tcp:LOCALIP>REMOTEIP[:PORT]" (e.g. "tcp:10.0.0.1>10.0.0.2",
// "tcp:fd00::1>[fd00::2]:7000"). RATE is a rate as units.ParseRate reads it
// (bits per second, > 0 and <= 100gbit), DELAY a duration as
// units.ParseDuration reads it (0..10s). Surrounding white space is
// ignored; kinds and units are case-insensitive. IP addresses come back in
// their canonical form.
func ParseSpec(s string) (Spec, error) {
	s = strings.TrimSpace(s)
	kind, rest, hasColon := strings.Cut(s, ":")
	switch strings.ToLower(kind) {
	case KindLoop:
		if hasColon {
			return Spec{}, fmt.Errorf("emu: bad rail spec %q: loop takes no arguments; %s", s, formSpec)
		}
		return Spec{Kind: KindLoop}, nil
	case KindEmu:
		if !hasColon {
			break
		}
		rateStr, delayStr, hasDelay := strings.Cut(rest, "/")
		rate, err := units.ParseRate(rateStr)
		if err != nil {
			return Spec{}, fmt.Errorf("emu: bad rail spec %q: %w", s, err)
		}
		if !(rate > 0) || rate > MaxRateBps {
			return Spec{}, fmt.Errorf("emu: bad rail spec %q: rate %q is out of range; %s", s, rateStr, rangeRate)
		}
		var delay time.Duration
		if hasDelay {
			delay, err = units.ParseDuration(delayStr)
			if err != nil {
				return Spec{}, fmt.Errorf("emu: bad rail spec %q: delay: %w", s, err)
			}
			if delay > MaxDelay {
				return Spec{}, fmt.Errorf("emu: bad rail spec %q: delay %q is out of range; %s", s, delayStr, rangeDelay)
			}
		}
		return Spec{Kind: KindEmu, RateBps: rate, Delay: delay}, nil
	case KindTCP:
		if !hasColon {
			break
		}
		local, remote, ok := strings.Cut(rest, ">")
		if !ok {
			return Spec{}, fmt.Errorf("emu: bad rail spec %q: missing '>'; %s", s, formTCP)
		}
		la, err := parseIP(local)
		if err != nil {
			return Spec{}, fmt.Errorf("emu: bad rail spec %q: local address %q is not an IP address; %s", s, local, formTCP)
		}
		ra, err := parseRemote(remote)
		if err != nil {
			return Spec{}, fmt.Errorf("emu: bad rail spec %q: remote address %q is not IP or IP:PORT with PORT in 1..65535; %s", s, remote, formTCP)
		}
		return Spec{Kind: KindTCP, Local: la, Remote: ra}, nil
	}
	return Spec{}, fmt.Errorf("emu: bad rail spec %q: %s", s, formSpec)
}

// parseIP parses an IP address (IPv4 or IPv6, optionally with a zone made of
// letters, digits, '-', '_' and '.') and returns its canonical form.
func parseIP(s string) (string, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return "", err
	}
	if !validZone(a.Zone()) {
		return "", fmt.Errorf("bad zone %q", a.Zone())
	}
	return a.String(), nil
}

// parseRemote parses IP or IP:PORT ([IPv6]:PORT) and returns its canonical
// form.
func parseRemote(s string) (string, error) {
	if ip, err := parseIP(s); err == nil {
		return ip, nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return "", err
	}
	if ap.Port() == 0 || !validZone(ap.Addr().Zone()) {
		return "", fmt.Errorf("bad port or zone in %q", s)
	}
	return ap.String(), nil
}

func validZone(z string) bool {
	for i := 0; i < len(z); i++ {
		c := z[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// ParseSpecs parses a non-empty comma-separated list of rail specs, e.g.
// "emu:200mbit/2ms,emu:100mbit,loop". White space around items is ignored.
func ParseSpecs(list string) ([]Spec, error) {
	if strings.TrimSpace(list) == "" {
		return nil, fmt.Errorf("emu: empty rail list %q: %s", list, formList)
	}
	items := strings.Split(list, ",")
	specs := make([]Spec, 0, len(items))
	for i, item := range items {
		if strings.TrimSpace(item) == "" {
			return nil, fmt.Errorf("emu: rail list %q: item %d is empty; %s", list, i, formList)
		}
		sp, err := ParseSpec(item)
		if err != nil {
			return nil, fmt.Errorf("emu: rail list %q: item %d: %w", list, i, err)
		}
		specs = append(specs, sp)
	}
	return specs, nil
}

// FormatSpecs is the inverse of ParseSpecs.
func FormatSpecs(specs []Spec) string {
	parts := make([]string, len(specs))
	for i, s := range specs {
		parts[i] = s.String()
	}
	return strings.Join(parts, ",")
}
