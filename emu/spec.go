package emu

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
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
	formSpec  = `allowed: emu:RATE[/DELAY], loop, or tcp:LOCALIP>REMOTEIP[:PORT]`
	formRate  = `allowed: RATE = NUMBER UNIT like 200mbit or 1.5gbit, UNIT one of bit, kbit, mbit, gbit, bps, kbps, mbps, gbps (decimal, bits per second), > 0 and <= 100gbit`
	formDelay = `allowed: DELAY = a Go duration like 2ms or 500us, >= 0 and <= 10s`
	formTCP   = `allowed: tcp:LOCALIP>REMOTEIP or tcp:LOCALIP>REMOTEIP:PORT (IPv6 with a port: [::1]:7000)`
	formList  = `allowed: comma-separated rail specs like emu:200mbit/2ms,loop,tcp:10.0.0.1>10.0.0.2`
)

// Spec is one parsed rail spec.
type Spec struct {
	Kind    string        // "emu", "loop" or "tcp"
	RateBps float64       // emu only: bits per second (> 0)
	Delay   time.Duration // emu only: one-way delay (>= 0)
	Local   string        // tcp only: local IP address
	Remote  string        // tcp only: remote IP address, optionally with :port
}

// rateUnits maps a rate unit to bits per second. bps, kbps, mbps and gbps
// are synonyms of bit, kbit, mbit and gbit: they count bits, not bytes
// (unlike tc, where mbps means megabytes per second).
var rateUnits = map[string]float64{
	"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9,
	"bps": 1, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9,
}

// String returns the canonical form of s, which ParseSpec parses back into
// s: "emu:200mbit", "emu:1.5gbit/500us", "loop", "tcp:10.0.0.1>10.0.0.2".
func (s Spec) String() string {
	switch s.Kind {
	case KindEmu:
		out := "emu:" + FormatRate(s.RateBps)
		if s.Delay != 0 {
			out += "/" + formatDelay(s.Delay)
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

// FormatRate formats a rate in bits per second with the largest unit among
// gbit, mbit, kbit and bit that represents it exactly, such that ParseRate
// returns bps again: 2e8 -> "200mbit", 1.5e9 -> "1.5gbit".
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

// formatDelay formats d with the largest of s, ms, us, ns that divides it.
func formatDelay(d time.Duration) string {
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

// ParseRate parses a rate such as "200mbit", "1.5gbit" or "64kbps" into bits
// per second. The number is decimal digits with an optional fraction; units
// are decimal (1 mbit = 1e6 bit/s) and case-insensitive. The rate must be
// > 0 and <= 100gbit.
func ParseRate(s string) (float64, error) {
	bps, err := parseRate(s)
	if err != nil {
		return 0, fmt.Errorf("emu: %w", err)
	}
	return bps, nil
}

func parseRate(s string) (float64, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	intDigits := i
	if i < len(s) && s[i] == '.' {
		i++
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == j {
			intDigits = 0 // "5." has no fraction digits: reject below
		}
	}
	if intDigits == 0 {
		return 0, fmt.Errorf("bad rate %q: %s", s, formRate)
	}
	mult, ok := rateUnits[strings.ToLower(s[i:])]
	if !ok {
		return 0, fmt.Errorf("bad rate %q: unit %q unknown; %s", s, s[i:], formRate)
	}
	num, err := strconv.ParseFloat(s[:i], 64)
	if err != nil {
		return 0, fmt.Errorf("bad rate %q: %s", s, formRate)
	}
	bps := num * mult
	if !(bps > 0) || bps > MaxRateBps {
		return 0, fmt.Errorf("rate %q out of range; %s", s, formRate)
	}
	return bps, nil
}

// ParseSpec parses one rail spec: "emu:RATE[/DELAY]" (e.g. "emu:200mbit",
// "emu:200mbit/2ms", "emu:1.5gbit/500us"), "loop", or
// "tcp:LOCALIP>REMOTEIP[:PORT]" (e.g. "tcp:10.0.0.1>10.0.0.2",
// "tcp:fd00::1>[fd00::2]:7000"). Surrounding white space is ignored; kinds
// and units are case-insensitive. IP addresses come back in their canonical
// form.
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
		rate, err := parseRate(rateStr)
		if err != nil {
			return Spec{}, fmt.Errorf("emu: bad rail spec %q: %w", s, err)
		}
		var delay time.Duration
		if hasDelay {
			delay, err = time.ParseDuration(delayStr)
			if err != nil || delay < 0 || delay > MaxDelay {
				return Spec{}, fmt.Errorf("emu: bad rail spec %q: delay %q: %s", s, delayStr, formDelay)
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
