package lab

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Step is one action of building a lab: an external command, a sysctl
// written inside a namespace, or a file written.
type Step struct {
	// Args is an external command (argv); nil for the other kinds.
	Args []string
	// Side is the namespace of a sysctl (0 = A, 1 = B).
	Side int
	// Key and Value are a sysctl such as net.ipv4.tcp_no_metrics_save=1.
	Key, Value string
	// Path and Data are a file to write.
	Path, Data string
	// ns is the namespace name of a sysctl, for String.
	ns string
}

// String renders the step as the shell command it corresponds to.
func (s Step) String() string {
	switch {
	case s.Args != nil:
		return strings.Join(s.Args, " ")
	case s.Key != "":
		return fmt.Sprintf("ip netns exec %s sysctl -w %s=%s", s.ns, s.Key, s.Value)
	default:
		return fmt.Sprintf("write %s (%d bytes)", s.Path, len(s.Data))
	}
}

// tcRate formats a rate for tc, in bits per second.
func tcRate(bps float64) string { return strconv.FormatInt(int64(bps), 10) + "bit" }

// etcNetns is where `ip netns exec` finds per-namespace files that it
// bind-mounts over /etc.
const etcNetns = "/etc/netns"

// HostsPath is the hosts file of namespace ns: `ip netns exec` shows it as
// /etc/hosts inside ns.
func HostsPath(ns string) string { return filepath.Join(etcNetns, ns, "hosts") }

// hostsFile resolves both namespace names to their control addresses.
func hostsFile(prefix string) string {
	return fmt.Sprintf("127.0.0.1 localhost\n%s %s\n%s %s\n",
		CtlIP(0), NSName(prefix, 0), CtlIP(1), NSName(prefix, 1))
}

// Plan lists the steps Up takes to build the lab of cfg (normalized), in
// order: namespaces, sysctls, one veth pair per rail with addresses,
// offloads and tbf on both ends, the control link, the MPTCP path manager
// and the hosts files. Up also adds cfg.CC to the init namespace's
// net.ipv4.tcp_allowed_congestion_control first when it is missing, and
// probes every rail afterwards; neither is a step here.
func Plan(cfg Config) []Step {
	a, b := NSName(cfg.Prefix, 0), NSName(cfg.Prefix, 1)
	ns := []string{a, b}
	var steps []Step
	cmd := func(args ...string) { steps = append(steps, Step{Args: args}) }
	sysctl := func(side int, k, v string) {
		steps = append(steps, Step{Side: side, Key: k, Value: v, ns: ns[side]})
	}
	cmd("ip", "netns", "add", a)
	cmd("ip", "netns", "add", b)
	for side, n := range ns {
		cmd("ip", "-n", n, "link", "set", "lo", "up")
		sysctl(side, "net.ipv4.tcp_congestion_control", cfg.CC)
		sysctl(side, "net.ipv4.tcp_no_metrics_save", "1")
		sysctl(side, "net.ipv4.conf.all.rp_filter", "0")
		sysctl(side, "net.ipv4.conf.default.rp_filter", "0")
		sysctl(side, "net.mptcp.enabled", "1")
	}
	for i, rate := range cfg.Rates {
		dev := RailDev(i)
		cmd("ip", "-n", a, "link", "add", dev, "type", "veth", "peer", "name", dev, "netns", b)
		for side, n := range ns {
			cmd("ip", "-n", n, "addr", "add", RailIP(side, i)+"/24", "dev", dev)
			cmd("ip", "-n", n, "link", "set", dev, "up")
			if !cfg.Offloads {
				cmd("ip", "netns", "exec", n, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off")
			}
			cmd("tc", "-n", n, "qdisc", "replace", "dev", dev, "root", "tbf",
				"rate", tcRate(rate), "burst", strconv.FormatInt(Burst(rate), 10),
				"latency", strconv.FormatInt(cfg.TBFLatency.Microseconds(), 10)+"us")
		}
	}
	cmd("ip", "-n", a, "link", "add", CtlDev, "type", "veth", "peer", "name", CtlDev, "netns", b)
	for side, n := range ns {
		cmd("ip", "-n", n, "addr", "add", CtlIP(side)+"/24", "dev", CtlDev)
		cmd("ip", "-n", n, "link", "set", CtlDev, "up")
	}
	lim := strconv.Itoa(MPTCPSubflows)
	for _, n := range ns {
		cmd("ip", "-n", n, "mptcp", "endpoint", "flush")
		cmd("ip", "-n", n, "mptcp", "limits", "set", "subflows", lim, "add_addr_accepted", lim)
	}
	// The dialer connects to rail0's address; B announces the others and
	// A's path manager opens one subflow to each (source by routing, so
	// over the same rail).
	for i := 1; i < len(cfg.Rates); i++ {
		cmd("ip", "-n", b, "mptcp", "endpoint", "add", RailIP(1, i), "dev", RailDev(i), "signal")
	}
	for _, n := range ns {
		steps = append(steps, Step{Path: HostsPath(n), Data: hostsFile(cfg.Prefix)})
	}
	return steps
}
