package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestClusterUpDown builds a cluster of four hosts, checks its switches,
// shaping, names and that every host reaches every other on every rail,
// reshapes a rail, replaces it after a crash, and removes it.
func TestClusterUpDown(t *testing.T) {
	needLab(t)
	before, othersBefore := allowedCC(t), othersUp()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := testConfig(t, 20e6, 10e6, 5e6)
	cfg.Hosts = 4
	prefix := cfg.Prefix
	l, err := Up(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Down()

	hosts := l.HostNames()
	want := []string{prefix + "h0", prefix + "h1", prefix + "h2", prefix + "h3"}
	if !slices.Equal(hosts, want) || l.Hosts() != 4 || l.SwitchNS() != prefix+"sw" {
		t.Fatalf("hosts %v, switch %q; want %v and %ssw", hosts, l.SwitchNS(), want, prefix)
	}
	if err := l.Probe(ctx); err != nil {
		t.Fatalf("not every host reaches every other on every link: %v", err)
	}
	// One bridge per rail and one for the control network, each with one
	// port per host.
	for k := -1; k < l.Rails(); k++ {
		out, err := exec.Command("ip", "-n", l.SwitchNS(), "-o", "link", "show", "master", Bridge(k)).Output()
		if err != nil {
			t.Fatalf("ports of %s: %v", Bridge(k), err)
		}
		if n := strings.Count(string(out), "\n"); n != 4 {
			t.Errorf("%s has %d ports, want 4:\n%s", Bridge(k), n, out)
		}
	}
	// The switch does not run bridged frames through iptables.
	if err := l.Run(Switch, func() error {
		b, err := os.ReadFile("/proc/sys/net/bridge/bridge-nf-call-iptables")
		if errors.Is(err, os.ErrNotExist) {
			return nil // no br_netfilter in this kernel
		}
		if err == nil && strings.TrimSpace(string(b)) != "0" {
			err = fmt.Errorf("bridge-nf-call-iptables = %s in the switch namespace, want 0", b)
		}
		return err
	}); err != nil {
		t.Error(err)
	}
	// tbf on every host NIC in both directions.
	for side := Switch; side < l.Hosts(); side++ {
		r, err := l.Qdiscs(side)
		if err != nil {
			t.Fatal(err)
		}
		qd, err := r.Read()
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < l.Rails(); k++ {
			for h := 0; h < l.Hosts(); h++ {
				dev := RailDev(k)
				if side == Switch {
					dev = SwitchPort(h, k)
				} else if h != side {
					continue
				}
				if q := qd[dev]; q.Kind != "tbf" {
					t.Errorf("%s %s: root qdisc %q, want tbf", l.NS(side), dev, q.Kind)
				}
			}
		}
	}
	b, err := os.ReadFile(HostsPath(hosts[2]))
	if err != nil {
		t.Fatal(err)
	}
	for h, name := range hosts {
		if line := CtlIP(h) + " " + name; !strings.Contains(string(b), line) {
			t.Errorf("%s has no line %q:\n%s", HostsPath(hosts[2]), line, b)
		}
	}
	o, err := Open(prefix, nil)
	if err != nil || o.Hosts() != 4 {
		t.Fatalf("Open: %v hosts, %v", o, err)
	}
	// SetRate reshapes both ends of every host's NIC on the rail.
	if err := l.SetRate(1, 3e6); err != nil {
		t.Fatal(err)
	}
	for _, q := range [][2]string{{hosts[3], RailDev(1)}, {l.SwitchNS(), SwitchPort(3, 1)}} {
		out, err := exec.Command("tc", "-n", q[0], "qdisc", "show", "dev", q[1]).Output()
		if err != nil || !strings.Contains(string(out), "rate 3Mbit") {
			t.Errorf("%s %s after SetRate(1, 3e6): %q, %v", q[0], q[1], out, err)
		}
	}
	// A crash, then Up again: the leftovers (four hosts and the switch)
	// are removed first.
	l.lock.Close()
	cfg.Hosts = 3
	l2, err := Up(ctx, cfg)
	if err != nil {
		t.Fatalf("Up after a crash: %v", err)
	}
	defer l2.Down()
	if got := labNamespaces(prefix); len(got) != 4 || nsExists(prefix+"h3") {
		t.Errorf("namespaces after replacing 4 hosts by 3: %v", got)
	}
	if err := l2.Probe(ctx); err != nil {
		t.Error(err)
	}
	if err := l2.Down(); err != nil {
		t.Fatal(err)
	}
	gone(t, prefix)
	checkCCRestored(t, before, othersBefore)
}

func TestClusterPlan(t *testing.T) {
	cfg, err := Config{Hosts: 3, Rates: []float64{100e6, 50e6}, Prefix: "p"}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, s := range Plan(cfg) {
		lines = append(lines, s.String())
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{
		"ip netns add psw",
		"ip -n psw link add br1 type bridge",
		"ip -n psw link add brc type bridge",
		"ip -n ph2 link add rail1 type veth peer name h2r1 netns psw",
		"ip -n psw link set h2r1 master br1",
		"ip -n ph2 addr add 10.10.2.3/24 dev rail1",
		"tc -n ph2 qdisc replace dev rail1 root tbf rate 50000000bit burst 25000 latency 20000us",
		"tc -n psw qdisc replace dev h2r1 root tbf rate 50000000bit burst 25000 latency 20000us",
		"ip -n ph1 addr add 10.10.99.2/24 dev ctl",
		"ip -n ph0 mptcp endpoint add 10.10.2.1 dev rail1 signal",
		"ip netns exec ph2 sysctl -w net.ipv4.tcp_congestion_control=cubic",
		"write /etc/netns/ph1/hosts",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("plan has no step %q", want)
		}
	}
	for _, s := range Plan(cfg) {
		if s.Path == HostsPath("ph0") && s.Data != "127.0.0.1 localhost\n10.10.99.1 ph0\n10.10.99.2 ph1\n10.10.99.3 ph2\n" {
			t.Errorf("hosts file %q", s.Data)
		}
	}
	// Two hosts keep today's plan: no switch.
	pair, _ := Config{Prefix: "p"}.Validate()
	for _, s := range Plan(pair) {
		if strings.Contains(s.String(), "psw") || strings.Contains(s.String(), "ph0") {
			t.Fatalf("two-host plan has a cluster step: %s", s)
		}
	}
	if _, err := (Config{Hosts: 9}).Validate(); err == nil || !strings.Contains(err.Error(), "Config.Hosts = 9") {
		t.Errorf("Hosts 9: %v", err)
	}
}
