package netif

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestLocal(t *testing.T) {
	ifs, err := Local()
	if err != nil {
		t.Fatalf("Local: %v", err)
	}
	sawLo := false
	for _, f := range ifs {
		for _, p := range f.Addrs {
			if !p.IsValid() || p.Addr().Zone() != "" || p.Addr().Is4In6() {
				t.Errorf("%s: bad address %v", f.Name, p)
			}
		}
		if f.Name == "lo" {
			sawLo = true
			if !f.Loopback {
				t.Errorf("lo not reported as Loopback: %+v", f)
			}
		}
	}
	if !sawLo {
		t.Skip("no lo interface here; Loopback not checked")
	}
	t.Logf("%+v", ifs)
}

func TestToPrefix(t *testing.T) {
	for _, tt := range []struct {
		in   net.Addr
		want string
	}{
		{&net.IPNet{IP: net.ParseIP("10.0.1.2"), Mask: net.CIDRMask(24, 32)}, "10.0.1.2/24"},
		{&net.IPNet{IP: net.ParseIP("10.0.1.2"), Mask: net.CIDRMask(120, 128)}, "10.0.1.2/24"},
		{&net.IPNet{IP: net.ParseIP("10.0.1.2").To4(), Mask: net.CIDRMask(16, 32)}, "10.0.1.2/16"},
		{&net.IPNet{IP: net.ParseIP("fd00::2"), Mask: net.CIDRMask(64, 128)}, "fd00::2/64"},
		{&net.IPAddr{IP: net.ParseIP("10.0.1.2")}, "10.0.1.2/32"},
	} {
		p, ok := toPrefix(tt.in)
		if !ok || p.String() != tt.want {
			t.Errorf("toPrefix(%v) = %v, %v; want %s", tt.in, p, ok, tt.want)
		}
	}
	if _, ok := toPrefix(&net.IPNet{IP: net.ParseIP("10.0.1.2"), Mask: net.IPMask{255, 0, 255, 0}}); ok {
		t.Errorf("non-canonical mask accepted")
	}
}

func TestReadSpeed(t *testing.T) {
	dir := t.TempDir()
	old := sysClassNet
	sysClassNet = dir
	t.Cleanup(func() { sysClassNet = old })
	write := func(name, s string) {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "speed"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("eth0", "10000\n")
	write("veth0", "-1\n")
	write("bad", "fast\n")
	for name, want := range map[string]int{"eth0": 10000, "veth0": 0, "bad": 0, "missing": 0, "../x": 0} {
		if got := readSpeed(name); got != want {
			t.Errorf("readSpeed(%q) = %d, want %d", name, got, want)
		}
	}
}
