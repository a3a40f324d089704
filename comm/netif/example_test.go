package netif_test

import (
	"fmt"
	"net/netip"

	"github.com/multirail/multirail/comm/netif"
)

func ExamplePair() {
	p := netip.MustParsePrefix
	hostA := netif.Host{ID: "hostA", Ifaces: []netif.Iface{
		{Name: "rail0", Up: true, Addrs: []netip.Prefix{p("10.0.1.1/24")}},
		{Name: "rail1", Up: true, Addrs: []netip.Prefix{p("10.0.2.1/24")}},
		{Name: "docker0", Up: true, Addrs: []netip.Prefix{p("172.17.0.1/16")}},
	}}
	hostB := netif.Host{ID: "hostB", Ifaces: []netif.Iface{
		{Name: "rail0", Up: true, Addrs: []netip.Prefix{p("10.0.1.2/24")}},
		{Name: "rail1", Up: true, Addrs: []netip.Prefix{p("10.0.2.2/24")}},
	}}
	rails, skipped := netif.Pair(hostA, hostB)
	for _, r := range rails {
		fmt.Printf("%s %s -> %s %s (%s)\n", r.LocalIface, r.Local, r.RemoteIface, r.Remote, r.Prefix)
	}
	fmt.Println(netif.Describe(0, 1, "hostB", rails, skipped))
	// Output:
	// rail0 10.0.1.1 -> rail0 10.0.1.2 (10.0.1.0/24)
	// rail1 10.0.2.1 -> rail1 10.0.2.2 (10.0.2.0/24)
	// rank 0 -> rank 1 (hostB): rail0 10.0.1.1>10.0.1.2, rail1 10.0.2.1>10.0.2.2; skipped docker0 (no peer address in 172.17.0.0/16)
}

// The whole path on one rank: filter, candidates, pairing with the peer's
// candidates (received during the rendezvous), the log line.
func ExampleCandidates() {
	p := netip.MustParsePrefix
	local := []netif.Iface{
		{Name: "lo", Up: true, Loopback: true, Addrs: []netip.Prefix{p("127.0.0.1/8")}},
		{Name: "ctl", Up: true, Addrs: []netip.Prefix{p("10.30.99.1/24")}},
		{Name: "rail0", Up: true, Addrs: []netip.Prefix{p("10.30.1.1/24"), p("fe80::1/64")}},
		{Name: "rail1", Up: true, Addrs: []netip.Prefix{p("10.30.2.1/24")}},
		{Name: "docker0", Up: true, Addrs: []netip.Prefix{p("172.17.0.1/16")}},
	}
	peer := netif.Host{ID: "clh1", Ifaces: []netif.Iface{
		{Name: "rail0", Up: true, Addrs: []netip.Prefix{p("10.30.1.2/24")}},
		{Name: "rail1", Up: true, Addrs: []netip.Prefix{p("10.30.2.2/24")}},
	}}
	f, err := netif.ParseFilter("^ctl") // MULTIRAIL_IFNAME
	if err != nil {
		fmt.Println(err)
		return
	}
	cands, skipped := netif.Candidates(local, f)
	rails, unpaired := netif.Pair(netif.Host{ID: "clh0", Ifaces: cands}, peer)
	fmt.Println(netif.Describe(0, 1, "clh1", rails, append(skipped, unpaired...)))

	_, err = netif.ParseFilter("eth*")
	fmt.Println(err)
	// Output:
	// rank 0 -> rank 1 (clh1): rail0 10.30.1.1>10.30.1.2, rail1 10.30.2.1>10.30.2.2; skipped lo (loopback), ctl (excluded by MULTIRAIL_IFNAME=^ctl), docker0 (virtual bridge (name matches docker*))
	// netif: MULTIRAIL_IFNAME="eth*": bad entry "eth*": "*" is not allowed (names are prefixes already; use "=" for exact names); want [^][=]ENTRY[,ENTRY...], ENTRY a name prefix or a CIDR, e.g. "eth,ib", "^docker,lo", "=eth0", "10.0.0.0/16"
}
