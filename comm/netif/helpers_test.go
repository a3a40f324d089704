package netif

import "net/netip"

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// mirrorKey is a rail seen from the local side, zones dropped.
type mirrorKey struct {
	li, ri string
	l, r   netip.Addr
	p      netip.Prefix
}

// sameMirrored reports whether back (Pair(b, a)) is ab (Pair(a, b)) with
// the sides swapped, as a set.
func sameMirrored(ab, back []RailPair) bool {
	if len(ab) != len(back) {
		return false
	}
	set := map[mirrorKey]int{}
	for _, r := range ab {
		set[mirrorKey{r.LocalIface, r.RemoteIface, r.Local.WithZone(""), r.Remote.WithZone(""), r.Prefix}]++
	}
	for _, r := range back {
		k := mirrorKey{r.RemoteIface, r.LocalIface, r.Remote.WithZone(""), r.Local.WithZone(""), r.Prefix}
		if set[k] == 0 {
			return false
		}
		set[k]--
	}
	return true
}
