package netif

import (
	"fmt"
	"net/netip"
	"strings"
)

// EnvVar is the environment variable whose value ParseFilter reads; it
// names the filter in errors and skip reasons.
const EnvVar = "MULTIRAIL_IFNAME"

const syntax = `want [^][=]ENTRY[,ENTRY...], ENTRY a name prefix or a CIDR, e.g. "eth,ib", "^docker,lo", "=eth0", "10.0.0.0/16"`

// Filter selects candidate interfaces, parsed from MULTIRAIL_IFNAME by
// ParseFilter. The zero Filter applies the default policy only.
type Filter struct {
	spec    string
	exclude bool
	exact   bool
	names   []string
	cidrs   []netip.Prefix
}

// String returns the specification the filter was parsed from, normalised
// (spaces and empty entries removed); ParseFilter(f.String()) gives f back.
func (f Filter) String() string { return f.spec }

// IsZero reports whether f is the empty filter (default policy only).
func (f Filter) IsZero() bool { return len(f.names) == 0 && len(f.cidrs) == 0 }

// ParseFilter parses MULTIRAIL_IFNAME, which uses NCCL_SOCKET_IFNAME's
// syntax plus CIDRs:
//
//	eth,ib          interfaces whose names start with eth or ib
//	^docker,lo      every interface except those starting with docker or lo
//	=eth0,eth1      exactly eth0 and eth1
//	^=eth1          every interface except exactly eth1
//	10.0.0.0/16     addresses inside 10.0.0.0/16, on any interface
//	fd00::/8,ib     addresses inside fd00::/8, plus every address of ib*
//	^10.9.0.0/16    every address except those inside 10.9.0.0/16
//
// "^" and "=" apply to the whole list and only at its start ("^" first when
// both). Entries are separated by commas; spaces around them and empty
// entries are ignored. An entry containing "/" is a CIDR (host bits are
// masked off); a bare IP address is a one-address CIDR; anything else is an
// interface name (prefix), at most 15 bytes, without spaces, "/", ":", "*",
// "^" or "=". The empty string is the empty filter. Errors are one line and
// name the offending entry and the syntax.
func ParseFilter(spec string) (Filter, error) {
	var f Filter
	s := strings.TrimSpace(spec)
	if s == "" {
		return f, nil
	}
	bad := func(entry, why string) (Filter, error) {
		return Filter{}, fmt.Errorf("netif: %s=%q: bad entry %q: %s; %s", EnvVar, spec, entry, why, syntax)
	}
	if strings.HasPrefix(s, "^") {
		f.exclude = true
		s = s[1:]
	}
	if strings.HasPrefix(s, "=") {
		f.exact = true
		s = s[1:]
	}
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		switch {
		case strings.HasPrefix(e, "^"):
			return bad(e, `"^" is allowed only at the start of the whole list`)
		case strings.HasPrefix(e, "="):
			if f.exclude || f.exact {
				return bad(e, `"=" is allowed only at the start of the whole list, after "^"`)
			}
			return bad(e, `"=" is allowed only at the start of the whole list`)
		case strings.Contains(e, "/"):
			p, err := netip.ParsePrefix(e)
			if err != nil {
				return bad(e, "not a CIDR")
			}
			f.cidrs = append(f.cidrs, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(e); err == nil {
			if a.Zone() != "" {
				return bad(e, "address zones are not allowed")
			}
			a = a.Unmap()
			f.cidrs = append(f.cidrs, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		if why := badName(e); why != "" {
			return bad(e, why)
		}
		f.names = append(f.names, e)
	}
	if f.IsZero() {
		return Filter{}, fmt.Errorf("netif: %s=%q: no entries; %s", EnvVar, spec, syntax)
	}
	f.spec = f.format()
	return f, nil
}

// badName says what is wrong with an interface name (prefix), "" if nothing.
func badName(e string) string {
	switch {
	case len(e) > 15:
		return "interface names are at most 15 bytes"
	case e == "." || e == "..":
		return "not an interface name"
	case strings.Contains(e, "*"):
		return `"*" is not allowed (names are prefixes already; use "=" for exact names)`
	case strings.Contains(e, ":"):
		return `":" is not allowed (not an IPv6 address; ports are not supported)`
	case strings.ContainsAny(e, "^="):
		return `"^" and "=" are allowed only at the start of the whole list`
	}
	for _, r := range e {
		if r <= ' ' || r == 0x7f {
			return "spaces and control characters are not allowed"
		}
	}
	return ""
}

func (f Filter) format() string {
	var b strings.Builder
	if f.exclude {
		b.WriteByte('^')
	}
	if f.exact {
		b.WriteByte('=')
	}
	n := 0
	for _, s := range f.names {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s)
		n++
	}
	for _, p := range f.cidrs {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p.String())
		n++
	}
	return b.String()
}

func (f Filter) nameMatches(name string) (string, bool) {
	for _, n := range f.names {
		if f.exact && name == n || !f.exact && strings.HasPrefix(name, n) {
			return n, true
		}
	}
	return "", false
}

func (f Filter) inCIDR(a netip.Addr) bool {
	for _, p := range f.cidrs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Skip says why an interface is not a candidate or got no rail. Name is
// empty for a reason about the pair as a whole.
type Skip struct{ Name, Reason string }

// virtual lists the name prefixes of virtual interfaces the default policy
// skips: container and VM bridges, veth ends, overlay and tunnel devices.
// They exist on many hosts with the same addresses (docker0 is
// 172.17.0.1/16 everywhere), so pairing them would make rails that go
// nowhere.
var virtual = []struct{ prefix, kind string }{
	{"docker", "virtual bridge"},  // Docker's default bridge docker0
	{"br-", "virtual bridge"},     // Docker user-defined networks
	{"virbr", "virtual bridge"},   // libvirt
	{"lxcbr", "virtual bridge"},   // LXC
	{"lxdbr", "virtual bridge"},   // LXD
	{"podman", "virtual bridge"},  // Podman
	{"cni", "virtual bridge"},     // CNI bridge plugin (cni0)
	{"veth", "virtual link"},      // container end pairs
	{"cali", "virtual link"},      // Calico veths
	{"flannel", "overlay"},        // flannel.1
	{"vxlan", "overlay"},          // VXLAN devices
	{"cilium", "overlay"},         // cilium_host, cilium_vxlan
	{"weave", "overlay"},          // Weave Net
	{"kube-ipvs", "virtual link"}, // kube-proxy IPVS dummy
	{"tunl", "tunnel"},            // IP-in-IP fallback device
}

// VirtualPrefixes returns the name prefixes the default policy treats as
// virtual interfaces and skips unless the filter selects them.
func VirtualPrefixes() []string {
	out := make([]string, len(virtual))
	for i, v := range virtual {
		out[i] = v.prefix
	}
	return out
}

// Candidates applies the filter and the default policy to ifs and returns,
// in ifs' order, the interfaces to pair (with only their usable addresses)
// and, for every other interface, why it was skipped. It does not modify
// ifs.
//
// Rules, in order:
//
//  1. An interface that is down is skipped ("down"), even when named.
//  2. The filter. An including filter keeps an interface whose name
//     matches a name entry (all its addresses) and, on any interface, the
//     addresses inside a CIDR entry; anything else is skipped ("not
//     selected by MULTIRAIL_IFNAME=rail", or "no address in 10.0.0.0/16"
//     for a filter of CIDRs only). An excluding filter skips the
//     interfaces whose names match ("excluded by MULTIRAIL_IFNAME=^eth1")
//     and drops the addresses inside its CIDRs (skipping the interface,
//     with the same reason, when none is left).
//  3. The default policy, unless an including filter selected the
//     interface (by name or by one of its addresses): loopback interfaces
//     are skipped ("loopback"; the caller makes loopback rails itself
//     between ranks of one host), and so are the virtual interfaces listed
//     by VirtualPrefixes ("virtual bridge (name matches docker*)").
//  4. Link-local addresses (169.254.0.0/16, fe80::/10) are dropped unless
//     a CIDR entry of an including filter contains them; naming the
//     interface is not enough, since every IPv6 link has fe80::/64 and
//     rails could not be told apart by subnet. An interface left without
//     addresses is skipped ("only link-local addresses", or "no address"
//     when it had none).
func Candidates(ifs []Iface, f Filter) (cands []Iface, skipped []Skip) {
	include := !f.IsZero() && !f.exclude
	fspec := EnvVar + "=" + f.spec
	for _, ifc := range ifs {
		skip := func(reason string) { skipped = append(skipped, Skip{ifc.Name, reason}) }
		if !ifc.Up {
			skip("down")
			continue
		}
		addrs := make([]netip.Prefix, 0, len(ifc.Addrs))
		for _, p := range ifc.Addrs {
			if p.IsValid() {
				addrs = append(addrs, p)
			}
		}
		hadAny := len(addrs) > 0
		selected := false // named by an including filter
		excludedAddrs := false
		switch {
		case include:
			if _, ok := f.nameMatches(ifc.Name); ok {
				selected = true
				break
			}
			addrs = keep(addrs, func(p netip.Prefix) bool { return f.inCIDR(p.Addr()) })
			if len(addrs) == 0 {
				if len(f.names) == 0 {
					skip("no address in " + joinPrefixes(f.cidrs))
				} else {
					skip("not selected by " + fspec)
				}
				continue
			}
			selected = true
		case f.exclude:
			if _, ok := f.nameMatches(ifc.Name); ok {
				skip("excluded by " + fspec)
				continue
			}
			n := len(addrs)
			addrs = keep(addrs, func(p netip.Prefix) bool { return !f.inCIDR(p.Addr()) })
			excludedAddrs = len(addrs) < n
		}
		if !selected {
			if ifc.Loopback || ifc.Name == "lo" {
				skip("loopback")
				continue
			}
			if v, ok := virtualKind(ifc.Name); ok {
				skip(v)
				continue
			}
		}
		nonLL := 0
		addrs = keep(addrs, func(p netip.Prefix) bool {
			if !p.Addr().IsLinkLocalUnicast() {
				nonLL++
				return true
			}
			return include && f.inCIDR(p.Addr())
		})
		if len(addrs) == 0 {
			switch {
			case !hadAny:
				skip("no address")
			case excludedAddrs && nonLL == 0 && hasNonLL(ifc.Addrs):
				skip("excluded by " + fspec)
			default:
				skip("only link-local addresses")
			}
			continue
		}
		c := ifc
		c.Addrs = addrs
		cands = append(cands, c)
	}
	return cands, skipped
}

func hasNonLL(ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.IsValid() && !p.Addr().IsLinkLocalUnicast() {
			return true
		}
	}
	return false
}

func virtualKind(name string) (string, bool) {
	for _, v := range virtual {
		if strings.HasPrefix(name, v.prefix) {
			return fmt.Sprintf("%s (name matches %s*)", v.kind, v.prefix), true
		}
	}
	return "", false
}

// keep returns the elements of ps for which ok is true, in a new slice.
func keep(ps []netip.Prefix, ok func(netip.Prefix) bool) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		if ok(p) {
			out = append(out, p)
		}
	}
	return out
}

func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, " or ")
}
