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
	// Side is the host whose namespace a sysctl is written in (0 = A,
	// 1 = B; host i of a cluster).
	Side int
	// Key and Value are a sysctl such as net.ipv4.tcp_no_metrics_save=1.
	Key, Value string
	// IfExists skips a sysctl that this kernel does not have (a module
	// not loaded), instead of failing.
	IfExists bool
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
		if s.IfExists {
			return fmt.Sprintf("ip netns exec %s sysctl -w %s=%s  # where the kernel has it", s.ns, s.Key, s.Value)
		}
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

// hostsFile resolves every host's namespace name to its control address.
func hostsFile(prefix string, hosts int) string {
	var b strings.Builder
	b.WriteString("127.0.0.1 localhost\n")
	for i := 0; i < hosts; i++ {
		fmt.Fprintf(&b, "%s %s\n", CtlIP(i), HostNS(prefix, hosts, i))
	}
	return b.String()
}

// Plan lists the steps Up takes to build the lab of cfg (normalized), in
// order. Two hosts: namespaces, sysctls, one veth pair per rail with
// addresses, offloads and tbf on both ends, the control link, the MPTCP
// path manager and the hosts files. A cluster (cfg.Hosts > 2): the switch
// namespace with one bridge per rail and one for the control network (and
// bridge netfilter off there, where the kernel has it), then
// per host its namespace, sysctls, and per rail a veth from the host to
// the rail's bridge with offloads off and tbf on both ends (the host end
// shapes what the host sends, the switch end what it receives), the
// control NIC, MPTCP endpoints, and the hosts files. Up also adds cfg.CC
// to the init namespace's net.ipv4.tcp_allowed_congestion_control first
// when it is missing, and probes every rail afterwards; neither is a step
// here.
func Plan(cfg Config) []Step {
	if cfg.Hosts > MinHosts {
		return planCluster(cfg)
	}
	return planPair(cfg)
}

// hostSysctls are written in every host's namespace.
func hostSysctls(cfg Config) [][2]string {
	return [][2]string{
		{"net.ipv4.tcp_congestion_control", cfg.CC},
		{"net.ipv4.tcp_no_metrics_save", "1"},
		{"net.ipv4.conf.all.rp_filter", "0"},
		{"net.ipv4.conf.default.rp_filter", "0"},
		{"net.mptcp.enabled", "1"},
	}
}

// tbfArgs is the tc command that shapes dev in namespace ns to rate.
func tbfArgs(cfg Config, ns, dev, verb string, rate float64) []string {
	return []string{"tc", "-n", ns, "qdisc", verb, "dev", dev, "root", "tbf",
		"rate", tcRate(rate), "burst", strconv.FormatInt(Burst(rate), 10),
		"latency", strconv.FormatInt(cfg.TBFLatency.Microseconds(), 10) + "us"}
}

func planPair(cfg Config) []Step {
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
		for _, kv := range hostSysctls(cfg) {
			sysctl(side, kv[0], kv[1])
		}
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
			cmd(tbfArgs(cfg, n, dev, "replace", rate)...)
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
		steps = append(steps, Step{Path: HostsPath(n), Data: hostsFile(cfg.Prefix, MinHosts)})
	}
	return steps
}

func planCluster(cfg Config) []Step {
	sw := SwitchNS(cfg.Prefix)
	var steps []Step
	cmd := func(args ...string) { steps = append(steps, Step{Args: args}) }
	offloadsOff := func(ns, dev string) {
		if !cfg.Offloads {
			cmd("ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off")
		}
	}
	cmd("ip", "netns", "add", sw)
	cmd("ip", "-n", sw, "link", "set", "lo", "up")
	// A switch forwards frames; it does not run them through iptables
	// (br_netfilter, where loaded, would: CPU that no real switch takes
	// from the hosts).
	for _, k := range []string{"iptables", "ip6tables", "arptables"} {
		steps = append(steps, Step{Side: Switch, Key: "net.bridge.bridge-nf-call-" + k, Value: "0", IfExists: true, ns: sw})
	}
	for k := -1; k < len(cfg.Rates); k++ {
		cmd("ip", "-n", sw, "link", "add", Bridge(k), "type", "bridge")
		cmd("ip", "-n", sw, "link", "set", Bridge(k), "up")
	}
	lim := strconv.Itoa(MPTCPSubflows)
	for h := 0; h < cfg.Hosts; h++ {
		n := HostNS(cfg.Prefix, cfg.Hosts, h)
		cmd("ip", "netns", "add", n)
		cmd("ip", "-n", n, "link", "set", "lo", "up")
		for _, kv := range hostSysctls(cfg) {
			steps = append(steps, Step{Side: h, Key: kv[0], Value: kv[1], ns: n})
		}
		for k, rate := range cfg.Rates {
			dev, port := RailDev(k), SwitchPort(h, k)
			cmd("ip", "-n", n, "link", "add", dev, "type", "veth", "peer", "name", port, "netns", sw)
			cmd("ip", "-n", sw, "link", "set", port, "master", Bridge(k))
			cmd("ip", "-n", sw, "link", "set", port, "up")
			cmd("ip", "-n", n, "addr", "add", RailIP(h, k)+"/24", "dev", dev)
			cmd("ip", "-n", n, "link", "set", dev, "up")
			offloadsOff(n, dev)
			offloadsOff(sw, port)
			cmd(tbfArgs(cfg, n, dev, "replace", rate)...)
			cmd(tbfArgs(cfg, sw, port, "replace", rate)...)
		}
		port := SwitchPort(h, -1)
		cmd("ip", "-n", n, "link", "add", CtlDev, "type", "veth", "peer", "name", port, "netns", sw)
		cmd("ip", "-n", sw, "link", "set", port, "master", Bridge(-1))
		cmd("ip", "-n", sw, "link", "set", port, "up")
		cmd("ip", "-n", n, "addr", "add", CtlIP(h)+"/24", "dev", CtlDev)
		cmd("ip", "-n", n, "link", "set", CtlDev, "up")
		// Every host may accept MPTCP connections: each announces its
		// other rails, and a dialer opens one subflow to each.
		cmd("ip", "-n", n, "mptcp", "endpoint", "flush")
		cmd("ip", "-n", n, "mptcp", "limits", "set", "subflows", lim, "add_addr_accepted", lim)
		for k := 1; k < len(cfg.Rates); k++ {
			cmd("ip", "-n", n, "mptcp", "endpoint", "add", RailIP(h, k), "dev", RailDev(k), "signal")
		}
	}
	for h := 0; h < cfg.Hosts; h++ {
		n := HostNS(cfg.Prefix, cfg.Hosts, h)
		steps = append(steps, Step{Path: HostsPath(n), Data: hostsFile(cfg.Prefix, cfg.Hosts)})
	}
	return steps
}
