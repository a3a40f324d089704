package netif

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func ifc(name string, addrs ...string) Iface {
	return Iface{Name: name, Up: true, Addrs: pfx(addrs...)}
}

// railStrings renders rails compactly: "rail0 10.0.1.1>rail0 10.0.1.2 in 10.0.1.0/24".
func railStrings(rails []RailPair) []string {
	var out []string
	for _, r := range rails {
		out = append(out, fmt.Sprintf("%s %s>%s %s in %s", r.LocalIface, r.Local, r.RemoteIface, r.Remote, r.Prefix))
	}
	return out
}

func TestPair(t *testing.T) {
	tests := []struct {
		name    string
		a, b    []Iface
		rails   []string
		skipped []Skip
	}{
		{
			name:  "one shared subnet",
			a:     []Iface{ifc("eth0", "10.0.1.1/24")},
			b:     []Iface{ifc("eth0", "10.0.1.2/24")},
			rails: []string{"eth0 10.0.1.1>eth0 10.0.1.2 in 10.0.1.0/24"},
		},
		{
			name: "several rails, a's order, peer names differ",
			a: []Iface{
				ifc("rail2", "10.0.3.1/24"),
				ifc("rail0", "10.0.1.1/24"),
				ifc("rail1", "10.0.2.1/24"),
			},
			b: []Iface{
				ifc("ib0", "10.0.1.2/24"),
				ifc("ib1", "10.0.2.2/24"),
				ifc("ib2", "10.0.3.2/24"),
			},
			rails: []string{
				"rail2 10.0.3.1>ib2 10.0.3.2 in 10.0.3.0/24",
				"rail0 10.0.1.1>ib0 10.0.1.2 in 10.0.1.0/24",
				"rail1 10.0.2.1>ib1 10.0.2.2 in 10.0.2.0/24",
			},
		},
		{
			name: "no shared subnet",
			a:    []Iface{ifc("eth0", "10.0.1.1/24"), ifc("eth1", "fd00:1::1/64")},
			b:    []Iface{ifc("eth0", "10.0.9.2/24"), ifc("eth1", "fd00:9::2/64")},
			skipped: []Skip{
				{"eth0", "no peer address in 10.0.1.0/24"},
				{"eth1", "no peer address in fd00:1::/64"},
			},
		},
		{
			name:    "no interfaces",
			b:       []Iface{ifc("eth0", "10.0.9.2/24")},
			skipped: []Skip{{"", "no candidate interfaces"}},
		},
		{
			name: "interface without address",
			a:    []Iface{{Name: "eth0", Up: true}},
			b:    []Iface{ifc("eth0", "10.0.9.2/24")},
			skipped: []Skip{
				{"eth0", "no address"},
			},
		},
		{
			name: "duplicate local subnet",
			a: []Iface{
				ifc("eth0", "10.0.1.1/24"),
				ifc("eth1", "10.0.1.11/24"),
			},
			b: []Iface{
				ifc("eth0", "10.0.1.2/24"),
				ifc("eth1", "10.0.1.12/24"),
			},
			rails: []string{"eth0 10.0.1.1>eth0 10.0.1.2 in 10.0.1.0/24"},
			skipped: []Skip{
				{"eth1", "same subnet 10.0.1.0/24 as eth0 (Linux routes by destination: its rail would leave through eth0)"},
			},
		},
		{
			name: "duplicate subnet, overlapping prefix lengths",
			a: []Iface{
				ifc("eth0", "10.0.0.1/16"),
				ifc("eth1", "10.0.1.1/24"),
			},
			b:     []Iface{ifc("eth0", "10.0.1.2/16")},
			rails: []string{"eth0 10.0.0.1>eth0 10.0.1.2 in 10.0.0.0/16"},
			skipped: []Skip{
				{"eth1", "same subnet 10.0.1.0/24 as eth0 (Linux routes by destination: its rail would leave through eth0)"},
			},
		},
		{
			name: "duplicate subnet on the peer: one rail, the other local NIC told why",
			a: []Iface{
				ifc("eth0", "10.0.1.1/24"),
				ifc("eth1", "10.0.2.1/24"),
			},
			b: []Iface{
				ifc("eth0", "10.0.1.2/24"),
				ifc("eth1", "10.0.1.3/24", "10.0.2.2/24"),
			},
			// b's eth1 keeps only 10.0.2.2/24.
			rails: []string{
				"eth0 10.0.1.1>eth0 10.0.1.2 in 10.0.1.0/24",
				"eth1 10.0.2.1>eth1 10.0.2.2 in 10.0.2.0/24",
			},
		},
		{
			name: "duplicate subnet, other address still pairs",
			a: []Iface{
				ifc("eth0", "10.0.1.1/24"),
				ifc("eth1", "10.0.1.11/24", "10.0.2.1/24"),
			},
			b: []Iface{
				ifc("eth0", "10.0.1.2/24"),
				ifc("eth1", "10.0.2.2/24"),
			},
			rails: []string{
				"eth0 10.0.1.1>eth0 10.0.1.2 in 10.0.1.0/24",
				"eth1 10.0.2.1>eth1 10.0.2.2 in 10.0.2.0/24",
			},
		},
		{
			name: "mixed v4/v6: v4 preferred within an interface pair",
			a: []Iface{
				ifc("eth0", "fd00:1::1/64", "10.0.1.1/24"),
				ifc("eth1", "fd00:2::1/64"),
			},
			b: []Iface{
				ifc("eth0", "10.0.1.2/24", "fd00:1::2/64"),
				ifc("eth1", "fd00:2::2/64", "10.0.7.2/24"),
			},
			rails: []string{
				"eth0 10.0.1.1>eth0 10.0.1.2 in 10.0.1.0/24",
				"eth1 fd00:2::1>eth1 fd00:2::2 in fd00:2::/64",
			},
		},
		{
			name:  "v6 link-local gets the local interface as zone",
			a:     []Iface{ifc("eth0", "fe80::1/64")},
			b:     []Iface{ifc("ib0", "fe80::2/64")},
			rails: []string{"eth0 fe80::1%eth0>ib0 fe80::2%eth0 in fe80::/64"},
		},
		{
			name:  "different prefix lengths: the longer one is the rail's subnet",
			a:     []Iface{ifc("eth0", "10.0.1.1/24")},
			b:     []Iface{ifc("eth0", "10.0.1.2/16")},
			rails: []string{"eth0 10.0.1.1>eth0 10.0.1.2 in 10.0.1.0/24"},
		},
		{
			name: "different prefix lengths, not on-link both ways",
			a:    []Iface{ifc("eth0", "10.0.2.1/24")},
			b:    []Iface{ifc("eth0", "10.0.1.2/16")},
			skipped: []Skip{
				{"eth0", "no peer address in 10.0.2.0/24"},
			},
		},
		{
			name: "each interface once: the peer's interface is taken",
			a: []Iface{
				ifc("eth0", "10.0.1.1/24"),
				ifc("eth1", "10.0.2.1/24"),
			},
			b: []Iface{
				ifc("eth0", "10.0.1.2/24", "10.0.2.2/24"),
			},
			rails: []string{"eth0 10.0.1.1>eth0 10.0.1.2 in 10.0.1.0/24"},
			skipped: []Skip{
				{"eth1", "shares 10.0.2.0/24 with peer eth0, which has a rail from eth0 (one rail per interface)"},
			},
		},
		{
			name: "maximum matching beats first come",
			// a.eth0 shares 10.0.1/24 with b.eth0 and 10.0.2/24 with b.eth1;
			// a.eth1 shares only 10.0.3/24 with b.eth0. Greedy by subnet
			// would give one rail; two are possible.
			a: []Iface{
				ifc("eth0", "10.0.1.1/24", "10.0.2.1/24"),
				ifc("eth1", "10.0.3.1/24"),
			},
			b: []Iface{
				ifc("eth0", "10.0.1.2/24", "10.0.3.2/24"),
				ifc("eth1", "10.0.2.2/24"),
			},
			rails: []string{
				"eth0 10.0.2.1>eth1 10.0.2.2 in 10.0.2.0/24",
				"eth1 10.0.3.1>eth0 10.0.3.2 in 10.0.3.0/24",
			},
		},
		{
			name: "same address on both hosts is not a link",
			a:    []Iface{ifc("eth0", "10.0.1.1/24"), ifc("docker0", "172.17.0.1/16")},
			b:    []Iface{ifc("eth0", "10.0.1.2/24"), ifc("docker0", "172.17.0.1/16")},
			rails: []string{
				"eth0 10.0.1.1>eth0 10.0.1.2 in 10.0.1.0/24",
			},
			skipped: []Skip{
				{"docker0", "no peer address in 172.17.0.0/16 (the peer has the same address: not a shared link)"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rails, skipped := Pair(Host{"A", tt.a}, Host{"B", tt.b})
			if got := railStrings(rails); !reflect.DeepEqual(got, tt.rails) {
				t.Errorf("rails:\n got %q\nwant %q", got, tt.rails)
			}
			if !reflect.DeepEqual(skipped, tt.skipped) {
				t.Errorf("skipped:\n got %q\nwant %q", skipped, tt.skipped)
			}
			// Mirrored.
			back, _ := Pair(Host{"B", tt.b}, Host{"A", tt.a})
			if !sameMirrored(rails, back) {
				t.Errorf("Pair(b, a) = %q, not the mirror of %q", railStrings(back), railStrings(rails))
			}
		})
	}
}

func TestPairSameHost(t *testing.T) {
	h := Host{"hostA/boot1", []Iface{ifc("eth0", "10.0.1.1/24")}}
	rails, skipped := Pair(h, h)
	if rails != nil || skipped != nil {
		t.Fatalf("Pair(same host) = %v, %v; want nothing", rails, skipped)
	}
	if got, want := Describe(0, 1, "hostA", rails, skipped), "rank 0 -> rank 1 (hostA): loopback"; got != want {
		t.Fatalf("Describe = %q, want %q", got, want)
	}
}

// TestDockerDecoy: both hosts have docker0 172.17.0.1/16. The default policy
// drops it before pairing; named explicitly, it still makes no rail.
func TestDockerDecoy(t *testing.T) {
	hostA := []Iface{
		{Name: "lo", Up: true, Loopback: true, Addrs: pfx("127.0.0.1/8")},
		ifc("rail0", "10.0.1.1/24"),
		ifc("docker0", "172.17.0.1/16"),
		ifc("rail1", "10.0.2.1/24"),
	}
	hostB := []Iface{
		{Name: "lo", Up: true, Loopback: true, Addrs: pfx("127.0.0.1/8")},
		ifc("docker0", "172.17.0.1/16"),
		ifc("rail0", "10.0.1.2/24"),
		ifc("rail1", "10.0.2.2/24"),
	}
	run := func(spec string) (string, []RailPair) {
		f := mustFilter(t, spec)
		ca, sa := Candidates(hostA, f)
		cb, _ := Candidates(hostB, f)
		rails, sp := Pair(Host{"A", ca}, Host{"B", cb})
		return Describe(0, 1, "hostB", rails, append(sa, sp...)), rails
	}

	line, rails := run("")
	for _, r := range rails {
		if r.LocalIface == "docker0" || r.RemoteIface == "docker0" {
			t.Fatalf("docker0 became a rail: %q", railStrings(rails))
		}
	}
	want := "rank 0 -> rank 1 (hostB): rail0 10.0.1.1>10.0.1.2, rail1 10.0.2.1>10.0.2.2; skipped lo (loopback), docker0 (virtual bridge (name matches docker*))"
	if line != want {
		t.Errorf("default:\n got %s\nwant %s", line, want)
	}

	// Named: it reaches Pair, which refuses a "link" to its own address.
	line, rails = run("rail,docker")
	if len(rails) != 2 {
		t.Fatalf("rails %q", railStrings(rails))
	}
	want = "rank 0 -> rank 1 (hostB): rail0 10.0.1.1>10.0.1.2, rail1 10.0.2.1>10.0.2.2; skipped lo (not selected by MULTIRAIL_IFNAME=rail,docker), docker0 (no peer address in 172.17.0.0/16 (the peer has the same address: not a shared link))"
	if line != want {
		t.Errorf("named:\n got %s\nwant %s", line, want)
	}
}

func TestDescribe(t *testing.T) {
	rails := []RailPair{
		{LocalIface: "rail0", Local: mustAddr("10.0.1.1"), RemoteIface: "rail0", Remote: mustAddr("10.0.1.2"), Prefix: pfx("10.0.1.0/24")[0]},
		{LocalIface: "rail1", Local: mustAddr("10.0.2.1"), RemoteIface: "rail1", Remote: mustAddr("10.0.2.2"), Prefix: pfx("10.0.2.0/24")[0]},
	}
	tests := []struct {
		host    string
		rails   []RailPair
		skipped []Skip
		want    string
	}{
		{"hostB", rails, []Skip{{"docker0", "no peer address in 172.17.0.0/16"}},
			"rank 0 -> rank 1 (hostB): rail0 10.0.1.1>10.0.1.2, rail1 10.0.2.1>10.0.2.2; skipped docker0 (no peer address in 172.17.0.0/16)"},
		{"hostB", rails[:1], nil, "rank 0 -> rank 1 (hostB): rail0 10.0.1.1>10.0.1.2"},
		{"", rails[:1], nil, "rank 0 -> rank 1: rail0 10.0.1.1>10.0.1.2"},
		{"hostB", nil, []Skip{{"eth0", "no peer address in 10.0.1.0/24"}},
			"rank 0 -> rank 1 (hostB): no rails; skipped eth0 (no peer address in 10.0.1.0/24)"},
		{"hostB", nil, []Skip{{"", "no candidate interfaces"}},
			"rank 0 -> rank 1 (hostB): no rails; skipped no candidate interfaces"},
		{"hostB", []RailPair{{Remote: mustAddr("192.168.5.7")}}, []Skip{{"eth0", "no peer address in 10.0.1.0/24"}},
			"rank 0 -> rank 1 (hostB): routed any>192.168.5.7; skipped eth0 (no peer address in 10.0.1.0/24)"},
		{"hostA", nil, nil, "rank 0 -> rank 1 (hostA): loopback"},
	}
	for _, tt := range tests {
		got := Describe(0, 1, tt.host, tt.rails, tt.skipped)
		if got != tt.want {
			t.Errorf("Describe:\n got %s\nwant %s", got, tt.want)
		}
		if strings.Contains(got, "\n") {
			t.Errorf("Describe: more than one line: %q", got)
		}
	}
}
