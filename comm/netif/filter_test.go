package netif

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func pfx(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

func TestParseFilter(t *testing.T) {
	tests := []struct {
		spec    string
		want    Filter
		str     string
		wantErr string // substring of the error; "" for success
	}{
		{spec: "", want: Filter{}, str: ""},
		{spec: "  ", want: Filter{}, str: ""},
		{spec: "eth", want: Filter{names: []string{"eth"}}, str: "eth"},
		{spec: "eth,ib", want: Filter{names: []string{"eth", "ib"}}, str: "eth,ib"},
		{spec: " eth , ib ,", want: Filter{names: []string{"eth", "ib"}}, str: "eth,ib"},
		{spec: "^docker,lo", want: Filter{exclude: true, names: []string{"docker", "lo"}}, str: "^docker,lo"},
		{spec: "=eth0,eth1", want: Filter{exact: true, names: []string{"eth0", "eth1"}}, str: "=eth0,eth1"},
		{spec: "^=eth1", want: Filter{exclude: true, exact: true, names: []string{"eth1"}}, str: "^=eth1"},
		{spec: "10.0.0.0/16", want: Filter{cidrs: pfx("10.0.0.0/16")}, str: "10.0.0.0/16"},
		{spec: "10.0.3.7/16", want: Filter{cidrs: pfx("10.0.0.0/16")}, str: "10.0.0.0/16"},
		{spec: "fd00::/8,ib", want: Filter{names: []string{"ib"}, cidrs: pfx("fd00::/8")}, str: "ib,fd00::/8"},
		{spec: "^10.9.0.0/16", want: Filter{exclude: true, cidrs: pfx("10.9.0.0/16")}, str: "^10.9.0.0/16"},
		{spec: "10.0.1.2", want: Filter{cidrs: pfx("10.0.1.2/32")}, str: "10.0.1.2/32"},
		{spec: "fd00::1", want: Filter{cidrs: pfx("fd00::1/128")}, str: "fd00::1/128"},
		{spec: "eth0.100", want: Filter{names: []string{"eth0.100"}}, str: "eth0.100"},
		{spec: "br-", want: Filter{names: []string{"br-"}}, str: "br-"},

		{spec: "^", wantErr: "no entries"},
		{spec: "^=", wantErr: "no entries"},
		{spec: ",", wantErr: "no entries"},
		{spec: "=^eth", wantErr: `bad entry "^eth"`},
		{spec: "eth,^ib", wantErr: `bad entry "^ib": "^" is allowed only at the start`},
		{spec: "eth,=ib", wantErr: `bad entry "=ib"`},
		{spec: "eth*", wantErr: `bad entry "eth*": "*" is not allowed`},
		{spec: "10.0.0.0/33", wantErr: `bad entry "10.0.0.0/33": not a CIDR`},
		{spec: "eth0/24", wantErr: `bad entry "eth0/24": not a CIDR`},
		{spec: "fe80::%eth0/64", wantErr: "not a CIDR"},
		{spec: "fe80::1%eth0", wantErr: "zones are not allowed"},
		{spec: "eth0:5000", wantErr: `":" is not allowed`},
		{spec: "averyveryverylongname", wantErr: "at most 15 bytes"},
		{spec: "et h0", wantErr: "spaces"},
		{spec: "eth=0", wantErr: `"^" and "=" are allowed only at the start`},
		{spec: "..", wantErr: "not an interface name"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			f, err := ParseFilter(tt.spec)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseFilter(%q) = %+v, want error containing %q", tt.spec, f, tt.wantErr)
				}
				msg := err.Error()
				if !strings.Contains(msg, tt.wantErr) || !strings.Contains(msg, "MULTIRAIL_IFNAME") ||
					!strings.Contains(msg, "[^][=]ENTRY") || strings.Contains(msg, "\n") {
					t.Fatalf("ParseFilter(%q) error %q: want one line with %q, the variable and the syntax", tt.spec, msg, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseFilter(%q): %v", tt.spec, err)
			}
			if f.String() != tt.str {
				t.Errorf("String() = %q, want %q", f.String(), tt.str)
			}
			tt.want.spec = tt.str
			if !reflect.DeepEqual(f, tt.want) {
				t.Errorf("ParseFilter(%q) = %+v, want %+v", tt.spec, f, tt.want)
			}
			if f.IsZero() != (tt.str == "") {
				t.Errorf("IsZero() = %v", f.IsZero())
			}
		})
	}
}

func mustFilter(t *testing.T, spec string) Filter {
	t.Helper()
	f, err := ParseFilter(spec)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// host is a lab-like set of interfaces used by the Candidates tests.
func testIfaces() []Iface {
	return []Iface{
		{Name: "lo", Up: true, Loopback: true, Addrs: pfx("127.0.0.1/8", "::1/128")},
		{Name: "eth0", Up: true, Addrs: pfx("192.168.1.10/24", "fe80::1/64"), SpeedMbps: 1000},
		{Name: "eth1", Up: false, Addrs: pfx("10.0.3.1/24")},
		{Name: "rail0", Up: true, Addrs: pfx("10.0.1.1/24", "fe80::2/64")},
		{Name: "rail1", Up: true, Addrs: pfx("10.0.2.1/24", "fd00:2::1/64")},
		{Name: "docker0", Up: true, Addrs: pfx("172.17.0.1/16")},
		{Name: "br-3f2a", Up: true, Addrs: pfx("172.18.0.1/16")},
		{Name: "veth12ab", Up: true, Addrs: pfx("fe80::3/64")},
		{Name: "virbr0", Up: true, Addrs: pfx("192.168.122.1/24")},
		{Name: "flannel.1", Up: true, Addrs: pfx("10.244.0.0/32")},
		{Name: "ll0", Up: true, Addrs: pfx("169.254.7.7/16", "fe80::4/64")},
		{Name: "bond0slave", Up: true},
	}
}

type cand struct {
	name  string
	addrs []string
}

func TestCandidates(t *testing.T) {
	tests := []struct {
		spec    string
		cands   []cand
		skipped []Skip
	}{
		{
			spec: "",
			cands: []cand{
				{"eth0", []string{"192.168.1.10/24"}},
				{"rail0", []string{"10.0.1.1/24"}},
				{"rail1", []string{"10.0.2.1/24", "fd00:2::1/64"}},
			},
			skipped: []Skip{
				{"lo", "loopback"},
				{"eth1", "down"},
				{"docker0", "virtual bridge (name matches docker*)"},
				{"br-3f2a", "virtual bridge (name matches br-*)"},
				{"veth12ab", "virtual link (name matches veth*)"},
				{"virbr0", "virtual bridge (name matches virbr*)"},
				{"flannel.1", "overlay (name matches flannel*)"},
				{"ll0", "only link-local addresses"},
				{"bond0slave", "no address"},
			},
		},
		{
			spec: "rail",
			cands: []cand{
				{"rail0", []string{"10.0.1.1/24"}},
				{"rail1", []string{"10.0.2.1/24", "fd00:2::1/64"}},
			},
			skipped: []Skip{
				{"lo", "not selected by MULTIRAIL_IFNAME=rail"},
				{"eth0", "not selected by MULTIRAIL_IFNAME=rail"},
				{"eth1", "down"},
				{"docker0", "not selected by MULTIRAIL_IFNAME=rail"},
				{"br-3f2a", "not selected by MULTIRAIL_IFNAME=rail"},
				{"veth12ab", "not selected by MULTIRAIL_IFNAME=rail"},
				{"virbr0", "not selected by MULTIRAIL_IFNAME=rail"},
				{"flannel.1", "not selected by MULTIRAIL_IFNAME=rail"},
				{"ll0", "not selected by MULTIRAIL_IFNAME=rail"},
				{"bond0slave", "not selected by MULTIRAIL_IFNAME=rail"},
			},
		},
		{
			// Excluding keeps the default policy for the rest.
			spec: "^eth",
			cands: []cand{
				{"rail0", []string{"10.0.1.1/24"}},
				{"rail1", []string{"10.0.2.1/24", "fd00:2::1/64"}},
			},
			skipped: []Skip{
				{"lo", "loopback"},
				{"eth0", "excluded by MULTIRAIL_IFNAME=^eth"},
				{"eth1", "down"},
				{"docker0", "virtual bridge (name matches docker*)"},
				{"br-3f2a", "virtual bridge (name matches br-*)"},
				{"veth12ab", "virtual link (name matches veth*)"},
				{"virbr0", "virtual bridge (name matches virbr*)"},
				{"flannel.1", "overlay (name matches flannel*)"},
				{"ll0", "only link-local addresses"},
				{"bond0slave", "no address"},
			},
		},
		{
			spec: "^=rail1,10.0.1.0/24",
			cands: []cand{
				{"eth0", []string{"192.168.1.10/24"}},
			},
			skipped: []Skip{
				{"lo", "loopback"},
				{"eth1", "down"},
				{"rail0", "excluded by MULTIRAIL_IFNAME=^=rail1,10.0.1.0/24"},
				{"rail1", "excluded by MULTIRAIL_IFNAME=^=rail1,10.0.1.0/24"},
				{"docker0", "virtual bridge (name matches docker*)"},
				{"br-3f2a", "virtual bridge (name matches br-*)"},
				{"veth12ab", "virtual link (name matches veth*)"},
				{"virbr0", "virtual bridge (name matches virbr*)"},
				{"flannel.1", "overlay (name matches flannel*)"},
				{"ll0", "only link-local addresses"},
				{"bond0slave", "no address"},
			},
		},
		{
			// Exact names: "rail" alone matches nothing, "=rail0" only rail0.
			spec: "=rail0,docker",
			cands: []cand{
				{"rail0", []string{"10.0.1.1/24"}},
			},
			skipped: []Skip{
				{"lo", "not selected by MULTIRAIL_IFNAME==rail0,docker"},
				{"eth0", "not selected by MULTIRAIL_IFNAME==rail0,docker"},
				{"eth1", "down"},
				{"rail1", "not selected by MULTIRAIL_IFNAME==rail0,docker"},
				{"docker0", "not selected by MULTIRAIL_IFNAME==rail0,docker"},
				{"br-3f2a", "not selected by MULTIRAIL_IFNAME==rail0,docker"},
				{"veth12ab", "not selected by MULTIRAIL_IFNAME==rail0,docker"},
				{"virbr0", "not selected by MULTIRAIL_IFNAME==rail0,docker"},
				{"flannel.1", "not selected by MULTIRAIL_IFNAME==rail0,docker"},
				{"ll0", "not selected by MULTIRAIL_IFNAME==rail0,docker"},
				{"bond0slave", "not selected by MULTIRAIL_IFNAME==rail0,docker"},
			},
		},
		{
			// Naming overrides the default policy: loopback and a bridge.
			// Down stays down.
			spec: "lo,docker,eth1",
			cands: []cand{
				{"lo", []string{"127.0.0.1/8", "::1/128"}},
				{"docker0", []string{"172.17.0.1/16"}},
			},
			skipped: []Skip{
				{"eth0", "not selected by MULTIRAIL_IFNAME=lo,docker,eth1"},
				{"eth1", "down"},
				{"rail0", "not selected by MULTIRAIL_IFNAME=lo,docker,eth1"},
				{"rail1", "not selected by MULTIRAIL_IFNAME=lo,docker,eth1"},
				{"br-3f2a", "not selected by MULTIRAIL_IFNAME=lo,docker,eth1"},
				{"veth12ab", "not selected by MULTIRAIL_IFNAME=lo,docker,eth1"},
				{"virbr0", "not selected by MULTIRAIL_IFNAME=lo,docker,eth1"},
				{"flannel.1", "not selected by MULTIRAIL_IFNAME=lo,docker,eth1"},
				{"ll0", "not selected by MULTIRAIL_IFNAME=lo,docker,eth1"},
				{"bond0slave", "not selected by MULTIRAIL_IFNAME=lo,docker,eth1"},
			},
		},
		{
			// CIDRs select addresses on any interface, bridges included.
			spec: "10.0.0.0/8,fd00::/8",
			cands: []cand{
				{"rail0", []string{"10.0.1.1/24"}},
				{"rail1", []string{"10.0.2.1/24", "fd00:2::1/64"}},
				{"flannel.1", []string{"10.244.0.0/32"}},
			},
			skipped: []Skip{
				{"lo", "no address in 10.0.0.0/8 or fd00::/8"},
				{"eth0", "no address in 10.0.0.0/8 or fd00::/8"},
				{"eth1", "down"},
				{"docker0", "no address in 10.0.0.0/8 or fd00::/8"},
				{"br-3f2a", "no address in 10.0.0.0/8 or fd00::/8"},
				{"veth12ab", "no address in 10.0.0.0/8 or fd00::/8"},
				{"virbr0", "no address in 10.0.0.0/8 or fd00::/8"},
				{"ll0", "no address in 10.0.0.0/8 or fd00::/8"},
				{"bond0slave", "no address in 10.0.0.0/8 or fd00::/8"},
			},
		},
		{
			// A CIDR keeps only the addresses inside it; link-local only
			// when the CIDR names it; names and CIDRs add up.
			spec: "fd00:2::/64,169.254.0.0/16,eth",
			cands: []cand{
				{"eth0", []string{"192.168.1.10/24"}},
				{"rail1", []string{"fd00:2::1/64"}},
				{"ll0", []string{"169.254.7.7/16"}},
			},
			skipped: []Skip{
				{"lo", "not selected by MULTIRAIL_IFNAME=eth,fd00:2::/64,169.254.0.0/16"},
				{"eth1", "down"},
				{"rail0", "not selected by MULTIRAIL_IFNAME=eth,fd00:2::/64,169.254.0.0/16"},
				{"docker0", "not selected by MULTIRAIL_IFNAME=eth,fd00:2::/64,169.254.0.0/16"},
				{"br-3f2a", "not selected by MULTIRAIL_IFNAME=eth,fd00:2::/64,169.254.0.0/16"},
				{"veth12ab", "not selected by MULTIRAIL_IFNAME=eth,fd00:2::/64,169.254.0.0/16"},
				{"virbr0", "not selected by MULTIRAIL_IFNAME=eth,fd00:2::/64,169.254.0.0/16"},
				{"flannel.1", "not selected by MULTIRAIL_IFNAME=eth,fd00:2::/64,169.254.0.0/16"},
				{"bond0slave", "not selected by MULTIRAIL_IFNAME=eth,fd00:2::/64,169.254.0.0/16"},
			},
		},
		{
			// fe80::/10 named: IPv6 link-local kept where present.
			spec: "fe80::/10",
			cands: []cand{
				{"eth0", []string{"fe80::1/64"}},
				{"rail0", []string{"fe80::2/64"}},
				{"veth12ab", []string{"fe80::3/64"}},
				{"ll0", []string{"fe80::4/64"}},
			},
			skipped: []Skip{
				{"lo", "no address in fe80::/10"},
				{"eth1", "down"},
				{"rail1", "no address in fe80::/10"},
				{"docker0", "no address in fe80::/10"},
				{"br-3f2a", "no address in fe80::/10"},
				{"virbr0", "no address in fe80::/10"},
				{"flannel.1", "no address in fe80::/10"},
				{"bond0slave", "no address in fe80::/10"},
			},
		},
		{
			// Excluding every address but link-local ones.
			spec: "^192.168.0.0/16",
			cands: []cand{
				{"rail0", []string{"10.0.1.1/24"}},
				{"rail1", []string{"10.0.2.1/24", "fd00:2::1/64"}},
			},
			skipped: []Skip{
				{"lo", "loopback"},
				{"eth0", "excluded by MULTIRAIL_IFNAME=^192.168.0.0/16"},
				{"eth1", "down"},
				{"docker0", "virtual bridge (name matches docker*)"},
				{"br-3f2a", "virtual bridge (name matches br-*)"},
				{"veth12ab", "virtual link (name matches veth*)"},
				{"virbr0", "virtual bridge (name matches virbr*)"},
				{"flannel.1", "overlay (name matches flannel*)"},
				{"ll0", "only link-local addresses"},
				{"bond0slave", "no address"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			ifs := testIfaces()
			before := testIfaces()
			cands, skipped := Candidates(ifs, mustFilter(t, tt.spec))
			var got []cand
			for _, c := range cands {
				var as []string
				for _, a := range c.Addrs {
					as = append(as, a.String())
				}
				got = append(got, cand{c.Name, as})
			}
			if !reflect.DeepEqual(got, tt.cands) {
				t.Errorf("candidates:\n got %v\nwant %v", got, tt.cands)
			}
			if !reflect.DeepEqual(skipped, tt.skipped) {
				t.Errorf("skipped:\n got %q\nwant %q", skipped, tt.skipped)
			}
			if len(cands)+len(skipped) != len(ifs) {
				t.Errorf("%d candidates + %d skipped != %d interfaces", len(cands), len(skipped), len(ifs))
			}
			if !reflect.DeepEqual(ifs, before) {
				t.Errorf("Candidates modified its input")
			}
		})
	}
}

func TestCandidatesKeepsFields(t *testing.T) {
	cands, _ := Candidates(testIfaces(), Filter{})
	if cands[0].Name != "eth0" || cands[0].SpeedMbps != 1000 || !cands[0].Up {
		t.Fatalf("eth0 = %+v", cands[0])
	}
}

func TestVirtualPrefixes(t *testing.T) {
	got := VirtualPrefixes()
	for _, want := range []string{"docker", "virbr", "br-", "veth", "cni", "flannel", "vxlan"} {
		found := false
		for _, g := range got {
			found = found || g == want
		}
		if !found {
			t.Errorf("VirtualPrefixes() = %q, lacks %q", got, want)
		}
	}
}
