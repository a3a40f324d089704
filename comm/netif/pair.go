package netif

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Host is one host's candidate interfaces (usually Candidates' output)
// under a host identity. Hosts with the same ID are the same host.
type Host struct {
	ID     string // e.g. hostname plus boot id; equal IDs mean one host
	Ifaces []Iface
}

// RailPair is one rail between two hosts: from address Local of the local
// interface LocalIface to address Remote of the peer's RemoteIface, both in
// Prefix. IPv6 link-local addresses carry the local interface as their
// zone, ready to dial.
type RailPair struct {
	LocalIface  string
	Local       netip.Addr
	RemoteIface string
	Remote      netip.Addr
	Prefix      netip.Prefix
}

// addrRef is one usable address of one interface of a host.
type addrRef struct {
	iface int
	p     netip.Prefix // host bits kept
}

// edge is one way to pair interface a of the local host with interface b
// of the peer: addresses la and rb share subnet key.
type edge struct {
	a, b   int
	la, rb netip.Prefix
	key    netip.Prefix
}

// Pair decides the rails between host a (local) and host b (the peer). It
// is pure and symmetric: Pair(b, a) gives the same rails mirrored.
//
// Rules:
//
//   - Same host (a.ID == b.ID): no rails and no skips; the caller uses
//     loopback rails, and Describe prints "loopback".
//   - Shared subnet: an address of a and an address of b share a subnet
//     when each lies in the other's prefix (10.0.1.1/24 and 10.0.1.2/24),
//     so that both hosts reach each other on-link. With different prefix
//     lengths (10.0.1.1/24 and 10.0.1.2/16) the same test applies and the
//     rail's Prefix is the longer one, the range both hosts consider
//     on-link (10.0.1.0/24); 10.0.2.1/24 and 10.0.1.2/16 do not pair,
//     since the first host would route to the second through a gateway.
//     Two equal addresses (docker0 is 172.17.0.1/16 on every host) never
//     pair.
//   - Duplicate subnet: Linux routes by destination, so two local
//     interfaces with overlapping subnets would send both rails out of
//     one NIC. On each host, an address whose subnet overlaps one of an
//     earlier interface (in Ifaces' order) is dropped; an interface left
//     with none is skipped ("same subnet 10.0.1.0/24 as eth0 ...").
//   - One rail per interface pair, each interface in at most one rail of
//     the pair (Open MPI's rule). Among the interface pairs that share a
//     subnet, Pair takes a maximum matching: the largest number of rails,
//     ties broken by taking shared subnets in order (IPv4 first, then by
//     address), which makes the choice the same from both sides.
//   - Within an interface pair, IPv4 is preferred over IPv6; IPv6 is used
//     only when no IPv4 subnet is shared; then the lowest subnet, then the
//     lowest address.
//   - Rails come in a's interface order, then by local address.
//   - Every interface of a without a rail is in skipped, in a's order, with
//     a reason ("no peer address in 172.17.0.0/16"). Skips concern a only.
//   - No shared subnet at all: no rails, and skipped is never empty. The
//     caller then opens one routed rail to the address the peer used for
//     the rendezvous, which the routing table reaches somehow (Describe
//     prints such a rail, RailPair{Remote: addr} with no LocalIface and no
//     Prefix, as "routed any>addr").
//
// Invalid prefixes in Addrs are ignored. Pair does not apply the
// default policy: pass it the output of Candidates.
func Pair(a, b Host) (rails []RailPair, skipped []Skip) {
	if a.ID == b.ID {
		return nil, nil
	}
	aAddrs, aDup := dedup(a.Ifaces)
	bAddrs, _ := dedup(b.Ifaces)

	var edges []edge
	for _, x := range aAddrs {
		for _, y := range bAddrs {
			if k, ok := shared(x.p, y.p); ok {
				edges = append(edges, edge{x.iface, y.iface, x.p, y.p, k})
			}
		}
	}
	// One best edge per interface pair: IPv4 first, lowest subnet, then the
	// lower of the two addresses, then the higher (symmetric in a and b).
	slices.SortFunc(edges, cmpEdge)
	best := map[[2]int]edge{}
	var pairs []edge // best edge of each interface pair, in edge order
	for _, e := range edges {
		k := [2]int{e.a, e.b}
		if _, ok := best[k]; !ok {
			best[k] = e
			pairs = append(pairs, e)
		}
	}
	chosen := canonicalMatching(pairs, len(a.Ifaces), len(b.Ifaces))

	slices.SortFunc(chosen, func(x, y edge) int { return cmp.Compare(x.a, y.a) })
	aRail := make([]bool, len(a.Ifaces))
	bOwner := make(map[int]int, len(chosen)) // b iface -> a iface
	for _, e := range chosen {
		aRail[e.a] = true
		bOwner[e.b] = e.a
		la, rb := e.la.Addr(), e.rb.Addr()
		name := a.Ifaces[e.a].Name
		if la.Is6() && la.IsLinkLocalUnicast() {
			la, rb = la.WithZone(name), rb.WithZone(name)
		}
		rails = append(rails, RailPair{
			LocalIface:  name,
			Local:       la,
			RemoteIface: b.Ifaces[e.b].Name,
			Remote:      rb,
			Prefix:      e.key,
		})
	}

	for i, ifc := range a.Ifaces {
		if !aRail[i] {
			skipped = append(skipped, Skip{ifc.Name, unpairedReason(i, a, b, aAddrs, bAddrs, aDup[i], pairs, bOwner)})
		}
	}
	if len(rails) == 0 && len(skipped) == 0 {
		skipped = append(skipped, Skip{"", "no candidate interfaces"})
	}
	return rails, skipped
}

// unpairedReason says why interface i of a got no rail.
func unpairedReason(i int, a, b Host, aAddrs, bAddrs []addrRef, dup string, pairs []edge, bOwner map[int]int) string {
	if dup != "" {
		return dup
	}
	for _, e := range pairs {
		if e.a == i {
			return fmt.Sprintf("shares %s with peer %s, which has a rail from %s (one rail per interface)",
				e.key, b.Ifaces[e.b].Name, a.Ifaces[bOwner[e.b]].Name)
		}
	}
	var own []netip.Prefix
	same := false
	for _, x := range aAddrs {
		if x.iface != i {
			continue
		}
		own = append(own, x.p.Masked())
		for _, y := range bAddrs {
			same = same || x.p.Addr() == y.p.Addr()
		}
	}
	if len(own) == 0 {
		return "no address"
	}
	reason := "no peer address in " + joinPrefixes(own)
	if same {
		reason += " (the peer has the same address: not a shared link)"
	}
	return reason
}

// dedup returns the usable addresses of ifs, dropping those whose subnet
// overlaps one kept on an earlier interface, and for each interface left
// with nothing because of that, the skip reason.
func dedup(ifs []Iface) ([]addrRef, []string) {
	var kept []addrRef
	dup := make([]string, len(ifs))
	for i, ifc := range ifs {
		n, firstDup := 0, ""
		for _, p := range ifc.Addrs {
			if !p.IsValid() {
				continue
			}
			p = netip.PrefixFrom(p.Addr().WithZone(""), p.Bits())
			clash := -1
			for _, k := range kept {
				if k.iface != i && k.p.Masked().Overlaps(p.Masked()) {
					clash = k.iface
					break
				}
			}
			if clash >= 0 {
				if firstDup == "" {
					o := ifs[clash].Name
					firstDup = fmt.Sprintf("same subnet %s as %s (Linux routes by destination: its rail would leave through %s)",
						p.Masked(), o, o)
				}
				continue
			}
			kept = append(kept, addrRef{i, p})
			n++
		}
		if n == 0 {
			dup[i] = firstDup
		}
	}
	return kept, dup
}

// shared reports whether addresses x and y (host bits kept) can form a
// rail, and the subnet: each in the other's prefix, not equal, and the
// subnet is the longer of the two prefixes.
func shared(x, y netip.Prefix) (netip.Prefix, bool) {
	if x.Addr() == y.Addr() || x.Addr().BitLen() != y.Addr().BitLen() {
		return netip.Prefix{}, false
	}
	if !x.Masked().Contains(y.Addr()) || !y.Masked().Contains(x.Addr()) {
		return netip.Prefix{}, false
	}
	if x.Bits() >= y.Bits() {
		return x.Masked(), true
	}
	return y.Masked(), true
}

func cmpPrefix(x, y netip.Prefix) int {
	return cmp.Or(x.Addr().Compare(y.Addr()), cmp.Compare(x.Bits(), y.Bits()))
}

func minMax(x, y netip.Addr) (netip.Addr, netip.Addr) {
	if x.Compare(y) <= 0 {
		return x, y
	}
	return y, x
}

// cmpEdge orders edges by a key that does not depend on which host is
// local: IPv4 first (Addr.Compare does that), subnet, lower address,
// higher address.
func cmpEdge(e, f edge) int {
	el, eh := minMax(e.la.Addr(), e.rb.Addr())
	fl, fh := minMax(f.la.Addr(), f.rb.Addr())
	return cmp.Or(cmpPrefix(e.key, f.key), el.Compare(fl), eh.Compare(fh),
		cmp.Compare(e.la.Bits()+e.rb.Bits(), f.la.Bits()+f.rb.Bits()))
}

// canonicalMatching returns a maximum matching of the bipartite graph
// whose edges are pairs (at most one per interface pair): it goes through
// the edges in order and keeps an edge when a maximum matching still
// exists that contains it and the edges kept so far. The result depends
// only on the edges' order, not on which side is a.
func canonicalMatching(pairs []edge, na, nb int) []edge {
	size := func(usedA, usedB []bool) int { return maxMatching(pairs, na, nb, usedA, usedB) }
	usedA, usedB := make([]bool, na), make([]bool, nb)
	target := size(usedA, usedB)
	var chosen []edge
	for _, e := range pairs {
		if len(chosen) == target {
			break
		}
		if usedA[e.a] || usedB[e.b] {
			continue
		}
		usedA[e.a], usedB[e.b] = true, true
		if len(chosen)+1+size(usedA, usedB) == target {
			chosen = append(chosen, e)
			continue
		}
		usedA[e.a], usedB[e.b] = false, false
	}
	return chosen
}

// maxMatching is the size of a maximum matching of pairs avoiding the
// vertices marked used (Kuhn's augmenting paths; hosts have few NICs).
func maxMatching(pairs []edge, na, nb int, usedA, usedB []bool) int {
	adj := make([][]int, na)
	for _, e := range pairs {
		if !usedA[e.a] && !usedB[e.b] {
			adj[e.a] = append(adj[e.a], e.b)
		}
	}
	matchB := make([]int, nb)
	for i := range matchB {
		matchB[i] = -1
	}
	var seen []bool
	var try func(u int) bool
	try = func(u int) bool {
		for _, v := range adj[u] {
			if seen[v] {
				continue
			}
			seen[v] = true
			if matchB[v] < 0 || try(matchB[v]) {
				matchB[v] = u
				return true
			}
		}
		return false
	}
	n := 0
	for u := range na {
		if len(adj[u]) == 0 {
			continue
		}
		seen = make([]bool, nb)
		if try(u) {
			n++
		}
	}
	return n
}

// Describe returns the line to log for one peer at start, the one users
// paste into bug reports:
//
//	rank 0 -> rank 1 (hostB): rail0 10.0.1.1>10.0.1.2, rail1 10.0.2.1>10.0.2.2; skipped docker0 (no peer address in 172.17.0.0/16)
//
// Each rail is named by its local interface and shown as local>remote
// address. skipped is usually Candidates' skips followed by Pair's. With no
// rails and no skips (Pair's answer for the same host) the line says
// "loopback"; with no rails but skips, "no rails". A rail without
// LocalIface is shown as "routed", a missing local address as "any". An
// empty peerHost leaves out the parentheses; a skip without a name shows
// its reason alone.
func Describe(rank, peer int, peerHost string, rails []RailPair, skipped []Skip) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rank %d -> rank %d", rank, peer)
	if peerHost != "" {
		fmt.Fprintf(&b, " (%s)", peerHost)
	}
	b.WriteString(": ")
	switch {
	case len(rails) == 0 && len(skipped) == 0:
		b.WriteString("loopback")
		return b.String()
	case len(rails) == 0:
		b.WriteString("no rails")
	}
	for i, r := range rails {
		if i > 0 {
			b.WriteString(", ")
		}
		name, local := r.LocalIface, "any"
		if name == "" {
			name = "routed"
		}
		if r.Local.IsValid() {
			local = r.Local.String()
		}
		fmt.Fprintf(&b, "%s %s>%s", name, local, r.Remote)
	}
	if len(skipped) > 0 {
		b.WriteString("; skipped ")
		for i, s := range skipped {
			if i > 0 {
				b.WriteString(", ")
			}
			if s.Name == "" {
				b.WriteString(s.Reason)
			} else {
				fmt.Fprintf(&b, "%s (%s)", s.Name, s.Reason)
			}
		}
	}
	return b.String()
}
