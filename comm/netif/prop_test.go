package netif

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// genAddr draws an address from a small pool of subnets, with mixed prefix
// lengths, so that random hosts share, overlap and duplicate subnets.
func genAddr(t *rapid.T) netip.Prefix {
	k := rapid.IntRange(0, 3).Draw(t, "subnet")
	h := rapid.IntRange(1, 6).Draw(t, "host")
	switch rapid.IntRange(0, 9).Draw(t, "kind") {
	case 0:
		return netip.MustParsePrefix("172.17.0.1/16") // docker0 everywhere
	case 1, 2:
		bits := rapid.SampledFrom([]int{56, 64}).Draw(t, "bits6")
		return netip.MustParsePrefix(fmt.Sprintf("fd00:0:0:%x::%x/%d", k, h, bits))
	case 3:
		return netip.MustParsePrefix(fmt.Sprintf("fe80::%x/64", h))
	default:
		bits := rapid.SampledFrom([]int{16, 23, 24, 24, 24, 25}).Draw(t, "bits4")
		return netip.MustParsePrefix(fmt.Sprintf("10.0.%d.%d/%d", k, h*20, bits))
	}
}

func genHost(t *rapid.T, label string) Host {
	n := rapid.IntRange(0, 5).Draw(t, label+"ifaces")
	h := Host{ID: label}
	for i := range n {
		na := rapid.IntRange(0, 3).Draw(t, label+"addrs")
		f := Iface{Name: fmt.Sprintf("%s%d", label, i), Up: true}
		for range na {
			f.Addrs = append(f.Addrs, genAddr(t))
		}
		h.Ifaces = append(h.Ifaces, f)
	}
	return h
}

func hasAddr(ifs []Iface, name string, a netip.Addr) bool {
	for _, f := range ifs {
		if f.Name != name {
			continue
		}
		for _, p := range f.Addrs {
			if p.Addr() == a.WithZone("") {
				return true
			}
		}
	}
	return false
}

func TestPairProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genHost(t, "a"), genHost(t, "b")
		rails, skipped := Pair(a, b)

		usedL, usedR := map[string]bool{}, map[string]bool{}
		for _, r := range rails {
			if !r.Prefix.Contains(r.Local.WithZone("")) || !r.Prefix.Contains(r.Remote.WithZone("")) {
				t.Fatalf("rail %+v: addresses not both in %s", r, r.Prefix)
			}
			if r.Local.WithZone("") == r.Remote.WithZone("") {
				t.Fatalf("rail %+v to its own address", r)
			}
			if usedL[r.LocalIface] || usedR[r.RemoteIface] {
				t.Fatalf("interface twice in %q", railStrings(rails))
			}
			usedL[r.LocalIface], usedR[r.RemoteIface] = true, true
			if !hasAddr(a.Ifaces, r.LocalIface, r.Local) || !hasAddr(b.Ifaces, r.RemoteIface, r.Remote) {
				t.Fatalf("rail %+v: address not on its interface", r)
			}
		}
		// Every local interface is a rail or a skip, once, in a's order.
		i := 0
		for _, f := range a.Ifaces {
			if usedL[f.Name] {
				if i >= len(rails) || rails[i].LocalIface != f.Name {
					t.Fatalf("rails out of a's order: %q", railStrings(rails))
				}
				i++
			}
		}
		if len(rails)+len(skipped) != max(len(a.Ifaces), 1) {
			t.Fatalf("%d rails + %d skips for %d interfaces: %q", len(rails), len(skipped), len(a.Ifaces), skipped)
		}
		for _, s := range skipped {
			if usedL[s.Name] || s.Reason == "" {
				t.Fatalf("bad skip %+v", s)
			}
		}

		again, skippedAgain := Pair(a, b)
		if !reflect.DeepEqual(rails, again) || !reflect.DeepEqual(skipped, skippedAgain) {
			t.Fatalf("not deterministic: %q then %q", railStrings(rails), railStrings(again))
		}
		back, _ := Pair(b, a)
		if !sameMirrored(rails, back) {
			t.Fatalf("Pair(b, a) = %q, not the mirror of Pair(a, b) = %q", railStrings(back), railStrings(rails))
		}

		if r, s := Pair(a, Host{ID: a.ID, Ifaces: b.Ifaces}); r != nil || s != nil {
			t.Fatalf("same ID gave %v, %v", r, s)
		}
	})
}

// TestPairMaximum checks on small random hosts that Pair finds as many
// rails as a brute-force search over interface pairs allows, given the
// edges Pair itself considers (those of its mirror are the same).
func TestPairMaximum(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genHost(t, "a"), genHost(t, "b")
		rails, _ := Pair(a, b)
		aAddrs, _ := dedup(a.Ifaces)
		bAddrs, _ := dedup(b.Ifaces)
		adj := map[[2]int]bool{}
		for _, x := range aAddrs {
			for _, y := range bAddrs {
				if _, ok := shared(x.p, y.p); ok {
					adj[[2]int{x.iface, y.iface}] = true
				}
			}
		}
		var best func(i int, usedB map[int]bool) int
		best = func(i int, usedB map[int]bool) int {
			if i == len(a.Ifaces) {
				return 0
			}
			m := best(i+1, usedB)
			for j := range b.Ifaces {
				if adj[[2]int{i, j}] && !usedB[j] {
					usedB[j] = true
					m = max(m, 1+best(i+1, usedB))
					usedB[j] = false
				}
			}
			return m
		}
		if want := best(0, map[int]bool{}); len(rails) != want {
			t.Fatalf("%d rails, a maximum matching has %d", len(rails), want)
		}
	})
}
