package labbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	_ "github.com/multirail/multirail" // registers the learning schedulers
	"github.com/multirail/multirail/lab"
	"github.com/multirail/multirail/sched"
)

// The systems' names, besides MultirailPrefix+<sched>.
const (
	TCPPerRail      = "tcp-per-rail"
	MPTCP           = "mptcp"
	OpenMPIDefault  = "openmpi-default"
	OpenMPIWeighted = "openmpi-weighted"
	// Gloo is torch.distributed with the gloo backend, a system of the
	// collective bench only.
	Gloo = "gloo"
	// TorchMultirail is torch.distributed with multirail's backend
	// (python/multirail over the C ABI), sealed frames;
	// TorchMultirailPlaintext the same with MULTIRAIL_PLAINTEXT=1.
	// Systems of the collective bench only.
	TorchMultirail          = "torch-multirail"
	TorchMultirailPlaintext = TorchMultirail + PlaintextSuffix
	MultirailPrefix         = "multirail-"
	// IperfRing is the collective bench's ceiling in the same run: a ring
	// of kernel TCP flows (iperf3) over the rails, every host sending to
	// the next on every rail at once (lab.Ring).
	IperfRing = "iperf3-ring"
	// PlaintextSuffix after multirail-<sched> (collective bench only)
	// runs `multirail osu` with MULTIRAIL_PLAINTEXT=1: frames in clear,
	// as Gloo's and Open MPI's are.
	PlaintextSuffix = "-plaintext"
)

// The groups Expand takes besides the systems' names.
const (
	GroupAll       = "all"
	GroupOpenMPI   = "openmpi"
	GroupMultirail = "multirail"
	// GroupTorch is gloo, torch-multirail and torch-multirail-plaintext.
	GroupTorch = "torch"
)

// Errors of Expand and Lookup.
var (
	// ErrUnknownSystem is wrapped by an UnknownSystemError.
	ErrUnknownSystem = errors.New("labbench: unknown system")
	// ErrUnavailable is wrapped by an UnavailableError.
	ErrUnavailable = errors.New("labbench: system cannot run here")
)

// UnknownSystemError names an item that is neither a system nor a group.
type UnknownSystemError struct {
	Item string
}

// Error implements error.
func (e *UnknownSystemError) Error() string {
	return fmt.Sprintf("labbench: %q: unknown system (allowed: %s)", e.Item, Allowed())
}

// Unwrap makes errors.Is find the sentinel (and the cause, if any).
func (e *UnknownSystemError) Unwrap() error { return ErrUnknownSystem }

// UnavailableError is a system asked for by name that cannot run here,
// and why.
type UnavailableError struct {
	System string
	Err    error
}

// Error implements error.
func (e *UnavailableError) Error() string {
	return fmt.Sprintf("labbench: %s cannot run here: %v", e.System, e.Err)
}

// Unwrap makes errors.Is find the sentinel (and the cause, if any).
func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// Allowed lists what Expand takes, for messages.
func Allowed() string {
	return fmt.Sprintf("%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s (these five: collective bench), %s, %s<sched>[%s] with sched one of %s (%s: collective bench)",
		GroupAll, TCPPerRail, MPTCP, GroupOpenMPI, OpenMPIDefault, OpenMPIWeighted, GroupTorch, Gloo, TorchMultirail, TorchMultirailPlaintext, IperfRing,
		GroupMultirail, MultirailPrefix, PlaintextSuffix, strings.Join(sched.Names(), ", "), PlaintextSuffix)
}

// Skip is a system that was not run, and why.
type Skip struct {
	System string `json:"system"`
	Reason string `json:"reason"`
}

// ExpandOptions are what Expand needs besides the items.
type ExpandOptions struct {
	// Scheds are the schedulers the groups bring in as multirail-<sched>.
	Scheds []string
	// MPI says why Open MPI cannot run (nil if it can). gloo, which
	// mpirun starts, cannot run then either.
	MPI error
	// Coll expands for the collective bench, where the group all also
	// brings in gloo and torch-multirail. Elsewhere only those named bring
	// them in (and the caller turns them down; IsCollOnly).
	Coll bool
	// Gloo, when set, says why gloo cannot run (nil if it can); Expand
	// calls it once, and only when gloo is among the systems.
	Gloo func() error
	// Iperf3, when set, says why iperf3-ring cannot run (nil if it can);
	// called once, only when it is among the systems.
	Iperf3 func() error
	// TorchMultirail, when set, says why torch-multirail (and its
	// plaintext twin) cannot run (nil if it can); called once, only when
	// one of them is among the systems.
	TorchMultirail func() error
}

// Expand turns items (system names and the groups all, openmpi and
// multirail) into the systems to run, in order and without duplicates;
// o.Scheds are the schedulers the groups bring in as multirail-<sched>.
// o.MPI and o.Gloo say why Open MPI and gloo cannot run: the systems a
// group brings in are then skipped, those named are an UnavailableError.
// An unknown item is an UnknownSystemError.
func Expand(items []string, o ExpandOptions) ([]string, []Skip, error) {
	multi := func() []string {
		var out []string
		for _, s := range o.Scheds {
			out = append(out, MultirailPrefix+s)
		}
		return out
	}
	var (
		out      []string
		explicit = map[string]bool{}
	)
	for _, item := range items {
		item = strings.TrimSpace(item)
		switch {
		case item == GroupAll:
			out = append(out, TCPPerRail, MPTCP, OpenMPIDefault, OpenMPIWeighted)
			if o.Coll {
				out = append(out, IperfRing, Gloo, TorchMultirail)
			}
			out = append(out, multi()...)
		case item == GroupTorch:
			out = append(out, Gloo, TorchMultirail, TorchMultirailPlaintext)
		case item == IperfRing:
			out = append(out, item)
			explicit[item] = true
		case item == TorchMultirail || item == TorchMultirailPlaintext:
			out = append(out, item)
			explicit[item] = true
		case item == TCPPerRail || item == MPTCP:
			out = append(out, item)
		case item == GroupOpenMPI:
			out = append(out, OpenMPIDefault, OpenMPIWeighted)
			explicit[OpenMPIDefault], explicit[OpenMPIWeighted] = true, true
		case item == OpenMPIDefault || item == OpenMPIWeighted || item == Gloo:
			out = append(out, item)
			explicit[item] = true
		case item == GroupMultirail:
			out = append(out, multi()...)
		case IsMultirail(item):
			out = append(out, item)
		default:
			return nil, nil, &UnknownSystemError{Item: item}
		}
	}
	var systems []string
	var skipped []Skip
	var glooErr, torchErr, iperfErr error
	glooChecked, torchChecked, iperfChecked := false, false, false
	for _, s := range out {
		if slices.Contains(systems, s) || slices.ContainsFunc(skipped, func(k Skip) bool { return k.System == s }) {
			continue
		}
		var why error
		switch {
		case s == IperfRing && o.Iperf3 != nil:
			if !iperfChecked {
				iperfErr, iperfChecked = o.Iperf3(), true
			}
			why = iperfErr
		case IsMPI(s):
			why = o.MPI
		case IsTorch(s) && o.MPI != nil:
			why = fmt.Errorf("%s is started by Open MPI's mpirun: %w", s, o.MPI)
		case s == Gloo && o.Gloo != nil:
			if !glooChecked {
				glooErr, glooChecked = o.Gloo(), true
			}
			why = glooErr
		case IsTorch(s) && s != Gloo && o.TorchMultirail != nil:
			if !torchChecked {
				torchErr, torchChecked = o.TorchMultirail(), true
			}
			why = torchErr
		}
		if why != nil {
			if explicit[s] {
				return nil, nil, &UnavailableError{System: s, Err: why}
			}
			skipped = append(skipped, Skip{s, why.Error()})
			continue
		}
		systems = append(systems, s)
	}
	return systems, skipped, nil
}

// IsMPI reports whether system is one of the Open MPI systems.
func IsMPI(system string) bool { return system == OpenMPIDefault || system == OpenMPIWeighted }

// IsTorch reports whether system runs torch.distributed: gloo,
// torch-multirail or torch-multirail-plaintext.
func IsTorch(system string) bool {
	return system == Gloo || system == TorchMultirail || system == TorchMultirailPlaintext
}

// IsPlaintext reports whether system is a multirail system with frames in
// clear (torch-multirail-plaintext, multirail-<sched>-plaintext).
func IsPlaintext(system string) bool {
	return (system == TorchMultirailPlaintext || IsMultirail(system)) && strings.HasSuffix(system, PlaintextSuffix)
}

// IsMultirail reports whether system is multirail-<sched> or
// multirail-<sched>-plaintext (Go-native `multirail osu` in the
// collective bench).
func IsMultirail(system string) bool {
	rest, ok := strings.CutPrefix(system, MultirailPrefix)
	if !ok {
		return false
	}
	return slices.Contains(sched.Names(), rest) || slices.Contains(sched.Names(), strings.TrimSuffix(rest, PlaintextSuffix))
}

// SchedOf is the scheduler of multirail-<sched>[-plaintext].
func SchedOf(system string) string {
	rest := strings.TrimPrefix(system, MultirailPrefix)
	if slices.Contains(sched.Names(), rest) {
		return rest
	}
	return strings.TrimSuffix(rest, PlaintextSuffix)
}

// IsCollOnly reports whether system runs in the collective bench only:
// the torch systems and multirail-<sched>-plaintext (the two-host bench
// runs plaintext with the global --plaintext).
func IsCollOnly(system string) bool {
	return IsTorch(system) || system == IperfRing || (IsMultirail(system) && IsPlaintext(system))
}

// Env is what a System measures on: the lab that is up and the plan.
type Env struct {
	Lab      *lab.Lab
	Rates    []float64
	Duration time.Duration
	// Exe is this program, started in the namespaces as `Exe lab agent`
	// and `Exe lab rsh`.
	Exe string
	// MPIProgram is the MPI bandwidth program (Open MPI systems).
	MPIProgram string
	// AgentStderr, when set, gets a copy of what the processes a run
	// starts write on stderr.
	AgentStderr io.Writer
	// Competitor makes the competing stream: lab.ToolIperf3 or lab.ToolGo
	// ("" is the Go stream).
	Competitor string
}

// A System is one contender of the bench.
type System interface {
	// Name is the system's name in the report.
	Name() string
	// Note says how the system was set up, for the report ("" for
	// nothing to say).
	Note() string
	// Measure runs the system once with size-byte messages (writes, for
	// tcp-per-rail and mptcp) for env.Duration, a competing stream on
	// rail 0 from half time on. progress, when set, is called about every
	// Bucket with the time since the start and the payload bytes so far
	// per rail. The caller kills what the run left in the namespaces.
	Measure(ctx context.Context, env *Env, size int, progress func(time.Duration, []uint64)) (Run, error)
}

// Lookup returns the system of a name Expand returns.
func Lookup(name string) (System, error) {
	switch {
	case name == TCPPerRail:
		return agentSystem{name: name, kind: KindTCP}, nil
	case name == MPTCP:
		return agentSystem{name: name, kind: KindMPTCP}, nil
	case name == OpenMPIDefault:
		return mpiSystem{name: name}, nil
	case name == OpenMPIWeighted:
		return mpiSystem{name: name, weighted: true}, nil
	case strings.HasPrefix(name, MultirailPrefix) && slices.Contains(sched.Names(), strings.TrimPrefix(name, MultirailPrefix)):
		return agentSystem{name: name, kind: KindMultirail, sched: strings.TrimPrefix(name, MultirailPrefix)}, nil
	}
	return nil, &UnknownSystemError{Item: name}
}

// IsBaseline reports whether system is one the collective bench compares
// multirail with: Open MPI's and gloo.
func IsBaseline(system string) bool { return IsMPI(system) || system == Gloo }
