package lab

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"strconv"
	"time"
)

// Limits of a lab.
const (
	MaxRails   = 8     // most rails a lab builds
	MinHosts   = 2     // fewest hosts of a lab
	MaxHosts   = 8     // most hosts of a lab
	MinRateBps = 1e6   // lowest rail rate: 1 Mbit/s
	MaxRateBps = 10e9  // highest rail rate: 10 Gbit/s
	MinBurst   = 16000 // smallest tbf burst in bytes (about ten full frames)
	TimerHZ    = 250   // kernel timer frequency the tbf burst is sized for
	CtlSubnet  = 99    // third octet of the control link, 10.10.99.0/24
	DefaultCC  = "cubic"
	// DefaultPrefix names the namespaces mrA and mrB.
	DefaultPrefix = "mr"
	// DefaultTBFLatency bounds each tbf queue.
	DefaultTBFLatency = 20 * time.Millisecond
	MinTBFLatency     = time.Millisecond
	MaxTBFLatency     = time.Second
	// MPTCPSubflows is the in-kernel path manager's subflow and
	// add_addr_accepted limit on both sides.
	MPTCPSubflows = 8
)

// DefaultRates are the rail rates of a Config with none: 200, 100 and
// 50 Mbit/s, the anchors' topology.
var DefaultRates = []float64{200e6, 100e6, 50e6}

// ErrConfig is wrapped by every error about an invalid Config.
var ErrConfig = errors.New("lab: invalid config")

// Config describes a lab. The zero value is a valid configuration: three
// rails of 200, 100 and 50 Mbit/s, namespaces mrA and mrB, cubic, a 20 ms
// tbf queue bound, offloads off.
type Config struct {
	// Rates are the rail rates in bits/s, one per rail, 1..8 rails, each
	// 1 Mbit/s..10 Gbit/s; nil means DefaultRates.
	Rates []float64
	// Hosts is the number of hosts, 2..8; 0 means 2. Two hosts are joined
	// directly, one veth pair per rail. More hosts are a cluster: each
	// host has one NIC per rail plugged into that rail's switch (a Linux
	// bridge in namespace <Prefix>sw), shaped by tbf on the host side and
	// on the switch side, and a NIC on an unshaped control switch.
	Hosts int
	// Prefix names the namespaces <Prefix>A (side 0, the sender) and
	// <Prefix>B (side 1, the receiver) of a two-host lab, or
	// <Prefix>h0..<Prefix>h<N-1> and the switch namespace <Prefix>sw of
	// a cluster, and the lab's state under /run/multirail-lab/<Prefix>/.
	// "" means "mr". A letter followed by up to 14 letters, digits or
	// '-' (the names are also host names for Open MPI and Slurm).
	Prefix string
	// CC is the TCP congestion control of both namespaces; "" means
	// "cubic". Lower-case letters, digits and '_', at most 15.
	CC string
	// TBFLatency bounds each tbf queue (tc's "latency"); 0 means 20 ms,
	// allowed 1ms..1s.
	TBFLatency time.Duration
	// Offloads keeps TSO/GSO/GRO on the rails. false (the default) turns
	// them off with ethtool so that tbf shapes MTU-sized frames.
	Offloads bool
	// Logger receives what Up and Down do at debug level; nil discards.
	Logger *slog.Logger
}

var (
	prefixRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,14}$`)
	ccRE     = regexp.MustCompile(`^[a-z0-9_]{1,15}$`)
)

// prefixAllowed says what a prefix may be.
const prefixAllowed = "a letter then up to 14 letters, digits or '-'"

func cfgErr(field string, value any, allowed string) error {
	return fmt.Errorf("%w: %s = %v is out of range: allowed %s", ErrConfig, field, value, allowed)
}

// Normalized is Validate under its former name.
//
// Deprecated: use Validate.
func (c Config) Normalized() (Config, error) { return c.Validate() }

// Validate returns c with every default filled in, or an error that
// names the first invalid field, its value and the allowed range.
func (c Config) Validate() (Config, error) {
	if c.Rates == nil {
		c.Rates = append([]float64(nil), DefaultRates...)
	} else {
		c.Rates = append([]float64(nil), c.Rates...)
	}
	if len(c.Rates) < 1 || len(c.Rates) > MaxRails {
		return c, cfgErr("Config.Rates", fmt.Sprintf("%d rails", len(c.Rates)), fmt.Sprintf("1..%d rails", MaxRails))
	}
	for i, r := range c.Rates {
		if math.IsNaN(r) || r < MinRateBps || r > MaxRateBps {
			return c, cfgErr(fmt.Sprintf("Config.Rates[%d]", i), strconv.FormatFloat(r, 'g', -1, 64)+" bit/s", "1e6..1e10 bit/s (1 Mbit/s..10 Gbit/s)")
		}
	}
	if c.Hosts == 0 {
		c.Hosts = MinHosts
	}
	if c.Hosts < MinHosts || c.Hosts > MaxHosts {
		return c, cfgErr("Config.Hosts", c.Hosts, fmt.Sprintf("%d..%d (0 = %d)", MinHosts, MaxHosts, MinHosts))
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if !prefixRE.MatchString(c.Prefix) {
		return c, cfgErr("Config.Prefix", strconv.Quote(c.Prefix), prefixAllowed)
	}
	if c.CC == "" {
		c.CC = DefaultCC
	}
	if !ccRE.MatchString(c.CC) {
		return c, cfgErr("Config.CC", strconv.Quote(c.CC), "a congestion control name: 1..15 of a-z, 0-9, _ (e.g. cubic, bbr, reno)")
	}
	if c.TBFLatency == 0 {
		c.TBFLatency = DefaultTBFLatency
	}
	if c.TBFLatency < MinTBFLatency || c.TBFLatency > MaxTBFLatency {
		return c, cfgErr("Config.TBFLatency", c.TBFLatency, fmt.Sprintf("%v..%v (0 = %v)", MinTBFLatency, MaxTBFLatency, DefaultTBFLatency))
	}
	if c.Logger == nil {
		c.Logger = discard()
	}
	return c, nil
}

// Burst is the tbf bucket size in bytes for a rail of rateBps:
// max(rateBps/8/TimerHZ, MinBurst).
//
// Why: tbf refills its bucket when it is dequeued or when its watchdog
// timer fires, and without high-resolution timers that is once a jiffy
// (4 ms at HZ=250). A bucket smaller than one jiffy's worth of tokens
// overflows between two refills and the rail then runs below its rate, so
// the burst is at least rate/HZ. The floor of 16000 bytes (about ten
// 1514-byte frames) keeps slow rails from stalling on a bucket that holds
// hardly more than one frame.
func Burst(rateBps float64) int64 {
	return max(int64(rateBps/8/TimerHZ), MinBurst)
}

// GoodputCeiling is the best TCP goodput of a rail of rateBps: tbf counts
// Ethernet frames of 1514 bytes that carry 1448 bytes of payload (an MSS
// of 1460 minus 12 bytes of TCP timestamps).
func GoodputCeiling(rateBps float64) float64 { return rateBps * 1448 / 1514 }

// RailIP is the address of rail's end on side (0 = A, 1 = B), or of host
// side's NIC on rail in a cluster: 10.10.<rail+1>.<side+1>.
func RailIP(side, rail int) string { return fmt.Sprintf("10.10.%d.%d", rail+1, side+1) }

// RailNet is rail's subnet, 10.10.<rail+1>.0/24.
func RailNet(rail int) string { return fmt.Sprintf("10.10.%d.0/24", rail+1) }

// CtlIP is side's (or host side's) address on the unshaped control
// network: 10.10.99.<side+1>.
func CtlIP(side int) string { return fmt.Sprintf("10.10.%d.%d", CtlSubnet, side+1) }

// CtlNet is the control link's subnet, 10.10.99.0/24.
func CtlNet() string { return fmt.Sprintf("10.10.%d.0/24", CtlSubnet) }

// RailDev is the interface name of rail on both sides: rail0, rail1, ...
func RailDev(rail int) string { return "rail" + strconv.Itoa(rail) }

// CtlDev is the interface name of the control link on both sides.
const CtlDev = "ctl"

// NSName is the namespace of side (0 = A, 1 = B) of a two-host lab with
// prefix.
func NSName(prefix string, side int) string {
	if side == 0 {
		return prefix + "A"
	}
	return prefix + "B"
}

// HostNS is the namespace of host i of a lab with prefix and hosts hosts:
// NSName(prefix, i) for two hosts, <prefix>h<i> for a cluster.
func HostNS(prefix string, hosts, i int) string {
	if hosts <= MinHosts {
		return NSName(prefix, i)
	}
	return prefix + "h" + strconv.Itoa(i)
}

// SwitchNS is the namespace of a cluster's switches (one bridge per rail
// and one for the control network): <prefix>sw.
func SwitchNS(prefix string) string { return prefix + "sw" }

// Bridge is the name of rail's switch in SwitchNS (br0, br1, ...); rail
// -1 is the control network's, brc.
func Bridge(rail int) string {
	if rail < 0 {
		return "brc"
	}
	return "br" + strconv.Itoa(rail)
}

// SwitchPort is the switch-side end of host's NIC on rail (h<host>r<rail>;
// rail -1: the control NIC, h<host>c).
func SwitchPort(host, rail int) string {
	if rail < 0 {
		return "h" + strconv.Itoa(host) + "c"
	}
	return "h" + strconv.Itoa(host) + "r" + strconv.Itoa(rail)
}
