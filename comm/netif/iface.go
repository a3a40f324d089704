package netif

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// Iface is one network interface of a host as rail discovery sees it.
type Iface struct {
	Name string
	// Up is true when the interface is administratively up and has a
	// carrier (IFF_UP and IFF_RUNNING): a NIC whose cable is out is down.
	Up bool
	// Loopback is IFF_LOOPBACK (lo on Linux).
	Loopback bool
	// Addrs are the interface's addresses with their prefix lengths, host
	// bits kept (10.0.1.2/24, not 10.0.1.0/24), IPv4 unmapped, no zones.
	Addrs []netip.Prefix
	// SpeedMbps is /sys/class/net/NAME/speed when readable and positive,
	// 0 when unknown (virtual interfaces, other systems).
	SpeedMbps int
}

// sysClassNet is where Local reads link speeds; a variable for tests.
var sysClassNet = "/sys/class/net"

// Local lists this host's interfaces in the kernel's order, with their
// addresses and, where the kernel reports one, their link speed. It is the
// package's only I/O; everything else works on the values it returns.
func Local() ([]Iface, error) {
	nifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("netif: listing interfaces: %w", err)
	}
	out := make([]Iface, 0, len(nifs))
	for _, ni := range nifs {
		addrs, err := ni.Addrs()
		if err != nil {
			return nil, fmt.Errorf("netif: addresses of %s: %w", ni.Name, err)
		}
		ifc := Iface{
			Name:      ni.Name,
			Up:        ni.Flags&net.FlagUp != 0 && ni.Flags&net.FlagRunning != 0,
			Loopback:  ni.Flags&net.FlagLoopback != 0,
			SpeedMbps: readSpeed(ni.Name),
		}
		for _, a := range addrs {
			if p, ok := toPrefix(a); ok {
				ifc.Addrs = append(ifc.Addrs, p)
			}
		}
		out = append(out, ifc)
	}
	return out, nil
}

// toPrefix converts what net.Interface.Addrs returns to a netip.Prefix with
// the host bits kept.
func toPrefix(a net.Addr) (netip.Prefix, bool) {
	var ip net.IP
	var mask net.IPMask
	switch v := a.(type) {
	case *net.IPNet:
		ip, mask = v.IP, v.Mask
	case *net.IPAddr:
		ip = v.IP
	default:
		return netip.Prefix{}, false
	}
	addr, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Prefix{}, false
	}
	addr = addr.Unmap()
	bits := addr.BitLen()
	if mask != nil {
		ones, size := mask.Size()
		if size == 0 { // non-canonical mask
			return netip.Prefix{}, false
		}
		if addr.Is4() && size == 128 {
			ones -= 96
		}
		bits = ones
	}
	p := netip.PrefixFrom(addr, bits)
	return p, p.IsValid()
}

func readSpeed(name string) int {
	if strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return 0
	}
	b, err := os.ReadFile(sysClassNet + "/" + name + "/speed")
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 0 {
		return 0
	}
	return n
}
