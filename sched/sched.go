package sched

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
)

// RailState is what the transport (or the simulator) tells a scheduler about
// one rail at the moment of a decision. All fields are plain values so a
// decision needs no allocation.
type RailState struct {
	// Up is false for a rail that is broken or not yet joined; schedulers
	// must never pick a rail that is not up.
	Up bool
	// Queued is counter[i]: segments currently waiting in the rail's send
	// queue.
	Queued int
	// QueuedBytes is the payload plus header bytes waiting in the queue.
	QueuedBytes int64
	// QueueCap is queue_max: the queue's capacity in segments. A rail with
	// Queued >= QueueCap is full.
	QueueCap int
	// LastWait is the queueing delay, in nanoseconds, of the last segment
	// that left this rail's queue.
	LastWait int64
	// SegmentTime is the estimated time, in nanoseconds, to transmit one
	// full segment on this rail (time_interval); 0 when unknown yet.
	SegmentTime int64
	// RateBps is the transport's running estimate of the rail's drain rate
	// in bits per second; 0 when unknown yet.
	RateBps float64
	// NominalBps is the configured bandwidth of the rail in bits per second;
	// 0 when none was configured.
	NominalBps float64
	// AckDue is true when the peer's frames that arrived on this rail are
	// not all acknowledged yet: a frame sent on it now carries that
	// acknowledgement (and the kernel's TCP ACK) at no cost.
	AckDue bool
}

// Full reports whether the rail's queue has no room for another segment.
func (r *RailState) Full() bool { return r.Queued >= r.QueueCap }

// Usable reports whether a segment can be queued on the rail now.
func (r *RailState) Usable() bool { return r.Up && !r.Full() }

// Scheduler decides, segment by segment, which rail a segment goes to.
//
// Implementations are pure: no I/O, no goroutines, no clock, no global RNG.
// Time is passed in as nanoseconds since an arbitrary origin. A Scheduler is
// not safe for concurrent use; the caller serialises calls.
type Scheduler interface {
	// Name is the registry name of the scheduler (e.g. "roundrobin").
	Name() string
	// Pick returns the rail for the next segment of size bytes. rails has
	// one entry per rail, indexed by rail number. It returns -1 when no
	// rail should be used right now (the caller waits for a Departed or a
	// change of rail state and asks again). It may return a rail whose
	// queue is full: the caller then waits until that rail has room (the
	// patent's blocking behaviour); it never returns a rail that is not up.
	Pick(now int64, size int, rails []RailState) int
	// Departed reports that a segment of size bytes left rail's queue (the
	// rail's writer took it) after waiting waited nanoseconds in the queue.
	// rails is the state after the departure.
	Departed(now int64, rail int, size int, waited int64, rails []RailState)
}

// Config carries what a scheduler may need to be built. Every field's zero
// value means its default, except Rails, which is required.
type Config struct {
	// Rails is the number of rails (m). Required, >= 1.
	Rails int
	// SegmentSize is seg_max in bytes. 0 means 64 KiB.
	SegmentSize int
	// Bandwidths are the configured rail bandwidths in bits per second, one
	// per rail; required by "weighted" (every entry > 0), ignored otherwise.
	Bandwidths []float64
	// Rand is the scheduler's random source. nil means a source seeded with
	// Seed.
	Rand *rand.Rand
	// Seed seeds the random source when Rand is nil.
	Seed uint64
	// Options are scheduler-specific constants as "key=value,..." (for
	// the learning schedulers see qlearn.ParseOptions); empty means the
	// defaults. Schedulers without constants refuse any.
	Options string
}

// noOptions refuses Options for a scheduler that has no constants.
func noOptions(name string, cfg Config) error {
	if cfg.Options != "" {
		return fmt.Errorf("%w: %s takes no options, got %q", ErrConfig, name, cfg.Options)
	}
	return nil
}

// ErrUnknown is returned (wrapped) by New for a name not in the registry.
var ErrUnknown = errors.New("sched: unknown scheduler")

// ErrConfig is returned (wrapped) by New when Config is invalid for the
// scheduler.
var ErrConfig = errors.New("sched: invalid config")

// DefaultSegmentSize is the SegmentSize of a zero Config.
const DefaultSegmentSize = 64 << 10

// Validate fills the defaults of c in (SegmentSize, and Rand from Seed)
// and checks the fields every scheduler relies on; the error wraps
// ErrConfig and names the field, its value and what is allowed.
// Scheduler-specific fields (Bandwidths, Options) are checked by the
// scheduler's Factory. New calls it; so must a Factory that is called
// directly.
func (c *Config) Validate() error {
	if c.Rails < 1 {
		return fmt.Errorf("%w: Rails = %d, need >= 1", ErrConfig, c.Rails)
	}
	if c.SegmentSize == 0 {
		c.SegmentSize = DefaultSegmentSize
	}
	if c.SegmentSize < 0 {
		return fmt.Errorf("%w: SegmentSize = %d, need > 0 (0 = %d)", ErrConfig, c.SegmentSize, DefaultSegmentSize)
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(c.Seed, c.Seed^0x9e3779b97f4a7c15))
	}
	return nil
}

// Factory builds a scheduler from a validated Config.
type Factory func(cfg Config) (Scheduler, error)

var registry = map[string]Factory{}

// Register adds a scheduler factory under name. It panics on a duplicate
// name; it is meant to be called from init functions.
func Register(name string, f Factory) {
	if _, dup := registry[name]; dup {
		panic("sched: duplicate scheduler " + name)
	}
	registry[name] = f
}

// Names lists the registered schedulers in sorted order.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New builds the scheduler registered under name.
func New(name string, cfg Config) (Scheduler, error) {
	f, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (allowed: %s)", ErrUnknown, name, strings.Join(Names(), ", "))
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return f(cfg)
}

// DeliveryObserver is implemented by schedulers that learn from each
// segment's own end-to-end delay. Callers that can tell when the peer has a
// segment (the transport: its acknowledgement; the simulator: arrival plus
// the way back) call Delivered once per segment, for each rail in the order
// the rail's segments departed. Callers that cannot never call it, and the
// scheduler must work without it.
type DeliveryObserver interface {
	// Delivered reports that the peer confirmed a segment of size bytes
	// sent on rail, delay nanoseconds after it was queued (queueing,
	// sending and the confirmation's way back), now being when the
	// confirmation came back. A caller that knows when the segment arrived
	// (the transport: its ACKs carry arrival times) reports the
	// confirmation as if it had left the peer at once and come back at the
	// rail's base delay, so that the peer's turnaround and the queue on
	// the way back do not count. rails is the state now.
	Delivered(now int64, rail int, size int, delay int64, rails []RailState)
}

// Planning is implemented by schedulers that leave large messages to the
// transport's planner when Plans returns true: a message of several
// segments is then split over the rails up front, each rail a contiguous
// share sized so that all are expected to finish together (from each
// rail's measured rate and backlog; internal/sender.Split), and the
// scheduler places only the segments of small messages. Schedulers that
// do not implement it (or return false) place every segment.
type Planning interface {
	Plans() bool
}

// Explainer is implemented by schedulers that can say why traffic goes
// where it goes. The transport and the simulator call Explain when a user
// asks for statistics, never on the hot path.
type Explainer interface {
	// Explain fills x with the scheduler's current view of the rails. It
	// reuses x's slices (resizing them to the number of rails).
	Explain(x *Explanation)
}

// Explanation is a scheduler's view of the rails at one moment.
type Explanation struct {
	// Levels is each rail's current state level (k_i in 0..k-1).
	Levels []int
	// Values is, for each rail, the learned value of sending the next
	// segment there from the current state; higher is preferred. Its unit
	// depends on the scheduler (docs/scheduler.md).
	Values []float64
	// Decisions counts Picks since the scheduler was built; Explorations
	// counts those that deliberately did not take the best-valued rail.
	Decisions, Explorations uint64
}
