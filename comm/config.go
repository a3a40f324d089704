package comm

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/comm/internal/coll"
	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/lossy"
)

// Defaults for the zero values of Config.
const (
	DefaultTimeout       = 60 * time.Second
	DefaultMaxUnmatched  = 64 << 20
	DefaultLoopbackRails = 1
	// DefaultRailTimeout is the transport's RailTimeout in a
	// communicator unless Config.Transport sets one: longer than the
	// transport's own default (500 ms) because N ranks sharing a few
	// cores (and user-space emulated rails) can leave a rank unscheduled
	// for that long, and a rail taken down for it loses what it learned.
	DefaultRailTimeout = 2 * time.Second
	// DefaultBusyPoll is the transport's BusyPoll in a communicator
	// unless Config.Transport sets one: a rank waiting for a message polls
	// its sockets for up to 200 us after the last one came or went, as MPI
	// libraries do, instead of sleeping in the kernel (a wake-up costs
	// tens of microseconds per message in a virtual machine). See
	// docs/comm.md, "Busy polling".
	DefaultBusyPoll = 200 * time.Microsecond
)

// Config configures a communicator. The zero value of every field means
// its default; Init also fills empty fields from the environment (see
// Init).
type Config struct {
	// Transport is the template of every peer connection: scheduler,
	// segment size, token, timeouts (see multirail.Config). Rails and
	// DialRail are set by the communicator; a zero RailTimeout means
	// DefaultRailTimeout (2 s), a zero BusyPoll DefaultBusyPoll (200 us;
	// negative: never poll), a zero MaxMessageSize 1 GiB (messages of
	// the job's own ranks; the library's default is 64 MiB) and a zero
	// MaxListenerBuffer room for a window from every other rank. An
	// empty Token means the
	// MULTIRAIL_TOKEN environment variable; the rendezvous uses the same
	// token.
	Transport multirail.Config
	// IfName selects the NICs that may become rails, in NCCL's
	// NCCL_SOCKET_IFNAME syntax plus CIDRs (see package netif); empty
	// means the default policy (no loopback, no virtual bridges, no
	// link-local addresses).
	IfName string
	// Emu gives every pair of ranks emulated rails instead of NICs: rail
	// specs such as "emu:200mbit,emu:100mbit/2ms" (see package emu). Each
	// rank shapes the rails of the connections it accepts. Ranks must
	// share one host.
	Emu string
	// EmuLoad is background load on the emulated rails (needs Emu): a
	// pattern as emu.ParsePattern reads it, e.g. "bursty", or
	// "phases:calm=3s,congested=3s" (congestion that comes and goes).
	// Each rank loads the rails of the connections it accepts, on a
	// schedule drawn from the pattern's seed, its rank and the rail, that
	// covers two hours from the communicator's start (RestartEmuLoad
	// restarts it). "" or "off": none.
	EmuLoad string
	// LoopbackRails is the number of loopback rails between two ranks of
	// one host (without Emu), 1..multirail.MaxRails; 0 means 1.
	LoopbackRails int
	// Timeout bounds the bootstrap: rendezvous and connections; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// MaxUnmatched bounds the bytes of messages held per peer that no
	// receive has matched yet (point-to-point and collective steps of
	// calls this rank has not reached, each counted with 256 bytes of
	// overhead). When it is reached the peer's connection is not read
	// until the application receives, and the transport's flow control
	// holds the peer back. >= 1; 0 means DefaultMaxUnmatched (64 MiB).
	MaxUnmatched int64
	// Algorithms forces an algorithm per collective (every rank must
	// force the same); collectives not listed choose by size.
	Algorithms map[Collective]Algo
	// Thresholds are the sizes at which collectives switch algorithm;
	// a zero field means MeasuredThresholds' value (docs/comm.md).
	Thresholds Thresholds
	// Stage is the template of the loss-tolerant stage connections (the
	// discard controller's constants and seed); Shared and the tags are
	// set by the communicator.
	Stage lossy.StageConfig
	// RailRates are the rates of this host's NICs in bits per second, by
	// interface name (Init: MULTIRAIL_RAIL_RATES, e.g.
	// "rail0=200mbit,rail1=100mbit"). A rail to another host gets its
	// local NIC's rate as its multirail.Rail.Bandwidth, and the listener
	// gets them, in the order of this host's NICs, for the reverse
	// direction of the connections it accepts (a peer's rails are in the
	// order of its NICs: the rates fit when the hosts list their NICs
	// alike, and a warning says when they do not). The weighted scheduler
	// needs a rate for every rail: with it and a NIC that may become a
	// rail but has no rate, Init fails before connecting, and tells every
	// other rank why. Empty: no rates (every Bandwidth 0).
	RailRates map[string]float64
	// KeepGOMAXPROCS leaves GOMAXPROCS alone. By default, when processes
	// of other ranks of the job run on this machine's CPUs (the same
	// kernel, whatever their host names and network namespaces) and the
	// GOMAXPROCS environment variable is not set, Init lowers GOMAXPROCS
	// to this process's share: GOMAXPROCS / processes, at least 1 (as MPI
	// libraries yield when ranks outnumber cores). Ranks of one process
	// (NewLocal) count once; a process that a CPU limit (a container's
	// quota) already gave fewer than the machine's CPUs keeps its
	// GOMAXPROCS.
	KeepGOMAXPROCS bool
	// Logger receives the communicator's logs (one line per peer at
	// start, failures); nil discards them.
	Logger *slog.Logger
}

// config is a validated Config.
type config struct {
	Config
	emu     []emu.Spec
	emuLoad emu.Pattern
}

// emuLoadHorizon is how long the background-load schedule of Config.EmuLoad
// runs from its epoch.
const emuLoadHorizon = 2 * time.Hour

// DefaultMaxMessageSize is the largest message between ranks unless
// Config.Transport sets another.
const DefaultMaxMessageSize = 1 << 30

// validate returns c with its defaults filled in, or an error naming the
// first bad field, its value and what is allowed. The transport's own
// fields are checked by multirail when the connections are made.
func (c Config) validate() (config, error) {
	out := config{Config: c}
	if out.Transport.RailTimeout == 0 {
		out.Transport.RailTimeout = DefaultRailTimeout
	}
	if out.Transport.MaxMessageSize == 0 {
		out.Transport.MaxMessageSize = DefaultMaxMessageSize
	}
	switch {
	case c.Transport.BusyPoll == 0:
		out.Transport.BusyPoll = DefaultBusyPoll
	case c.Transport.BusyPoll < 0:
		out.Transport.BusyPoll = 0 // never
	case c.Transport.BusyPoll > multirail.MaxBusyPoll:
		return out, fmt.Errorf("%w: Config.Transport.BusyPoll = %v; allowed: up to %v (0 = default %v, negative = never)", ErrConfig, c.Transport.BusyPoll, multirail.MaxBusyPoll, DefaultBusyPoll)
	}
	if c.LoopbackRails == 0 {
		out.LoopbackRails = DefaultLoopbackRails
	}
	if out.LoopbackRails < 1 || out.LoopbackRails > multirail.MaxRails {
		return out, fmt.Errorf("%w: Config.LoopbackRails = %d; allowed: 1..%d (0 = default 1)", ErrConfig, c.LoopbackRails, multirail.MaxRails)
	}
	if c.Timeout == 0 {
		out.Timeout = DefaultTimeout
	}
	if out.Timeout < 0 {
		return out, fmt.Errorf("%w: Config.Timeout = %v; allowed: > 0 (0 = default %v)", ErrConfig, c.Timeout, DefaultTimeout)
	}
	if c.MaxUnmatched == 0 {
		out.MaxUnmatched = DefaultMaxUnmatched
	}
	if out.MaxUnmatched < 1 {
		return out, fmt.Errorf("%w: Config.MaxUnmatched = %d; allowed: >= 1 byte (0 = default 64 MiB)", ErrConfig, c.MaxUnmatched)
	}
	for cl, a := range c.Algorithms {
		if a == AlgoAuto {
			continue
		}
		ok := false
		for _, b := range Algorithms(cl) {
			ok = ok || a == b
		}
		if !ok {
			return out, fmt.Errorf("%w: Config.Algorithms[%s] = %s; allowed: %v", ErrConfig, cl, a, Algorithms(cl))
		}
	}
	for name, r := range c.RailRates {
		if name == "" || r <= 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			return out, fmt.Errorf("%w: Config.RailRates[%q] = %v; allowed: an interface name and a finite rate > 0 bits/s", ErrConfig, name, r)
		}
	}
	if c.Emu != "" {
		specs, err := emu.ParseSpecs(c.Emu)
		if err != nil {
			return out, fmt.Errorf("%w: Config.Emu: %w", ErrConfig, err)
		}
		for _, s := range specs {
			if s.Kind != emu.KindEmu {
				return out, fmt.Errorf("%w: Config.Emu = %q: rail %q is not emulated; allowed: emu:RATE[/DELAY] specs only", ErrConfig, c.Emu, s.String())
			}
		}
		if len(specs) > multirail.MaxRails {
			return out, fmt.Errorf("%w: Config.Emu = %q has %d rails; allowed: 1..%d", ErrConfig, c.Emu, len(specs), multirail.MaxRails)
		}
		out.emu = specs
	}
	if c.EmuLoad != "" {
		p, err := emu.ParsePattern(c.EmuLoad)
		if err != nil {
			return out, fmt.Errorf("%w: Config.EmuLoad: %w", ErrConfig, err)
		}
		if p.Kind != emu.PatternOff && c.Emu == "" {
			return out, fmt.Errorf("%w: Config.EmuLoad = %q without Config.Emu: background load needs emulated rails", ErrConfig, c.EmuLoad)
		}
		out.emuLoad = p
	}
	out.Thresholds = withMeasured(c.Thresholds)
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out, nil
}

// MeasuredThresholds returns the thresholds AlgoAuto uses by default:
// MPICH's, except where measured on multirail connections (4 ranks on
// emulated rails of 200, 100 and 50 Mbit/s, every algorithm forced;
// BENCHMARKS.md, "Collectives on N ranks"; alltoall's upper threshold
// on the lab's tbf rails, 3 and 4 hosts at 150/75/40 Mbit/s; allreduce's
// upper one on the lab's tbf rails, 4 hosts at 200/100/50 and 100/50/25
// Mbit/s, checked on held-out 150/75/40 and 300/50 and on emulated rails,
// docs/comm.md):
//
//   - allreduce: recursive doubling up to 8 KiB (MPICH: 2 KiB),
//     rabenseifner up to 256 KiB (512 KiB), ring above;
func MeasuredThresholds() Thresholds {
	th := coll.DefaultThresholds()
	th.BcastShort = 1 << 20
	th.BcastMinProcs = 4
	th.AllreduceShort = 8 << 10
	th.AllreduceLong = 256 << 10
	th.AlltoallShort = 4 << 10
	th.AlltoallMinProcs = 4
	th.AlltoallMedium = 512 << 10
	return th
}

// withMeasured fills th's zero fields from MeasuredThresholds.
func withMeasured(th Thresholds) Thresholds { return th.Or(MeasuredThresholds()) }
