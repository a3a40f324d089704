package coll

import (
	"context"
	"fmt"
	"strings"
)

// Transport is one rank's view of one collective call in progress.
//
// The collectives call Send and Recv concurrently from several goroutines
// on one Transport. A Transport carries exactly one call: step numbers are
// unique per (src, dst) within a call, not across calls, so the caller
// keeps calls apart (for instance with a call sequence number in its
// message header).
type Transport interface {
	// Rank is this rank, in [0, Size()).
	Rank() int
	// Size is the number of ranks taking part in the call.
	Size() int
	// Send sends b to rank dst as step `step` of this call. Within one call each
	// (src, dst, step) triple is used at most once. Send may block until the peer's
	// transport has the bytes (not until it is matched); b may be reused when Send returns.
	// dst != Rank().
	Send(ctx context.Context, dst, step int, b []byte) error
	// Recv returns the message sent by src as `step` of this call (a fresh buffer the
	// caller owns). src != Rank().
	Recv(ctx context.Context, src, step int) ([]byte, error)
}

// TrySender is a Transport that can send at once when that needs no wait
// for the peer. An exchange (a rank sending to one peer while receiving
// from another) then sends from the calling goroutine, and sends
// concurrently with the receive only when TrySend declines: a small
// exchange costs no goroutine.
type TrySender interface {
	// TrySend sends b to rank dst as step `step`, as Send does, if that
	// needs no wait for the peer, and reports whether it sent; when it
	// declines nothing was sent and the triple is still unused.
	TrySend(ctx context.Context, dst, step int, b []byte) (bool, error)
}

// Number is the element type of the collectives' buffers. On the wire
// elements are little-endian IEEE 754 or two's complement values of their
// size (1, 4 or 8 bytes).
type Number interface {
	~float32 | ~float64 | ~int32 | ~int64 | ~int8 | ~uint8
}

// Op is a reduction operator. All four are commutative and associative
// (for floating point associative only up to rounding, see the package
// documentation).
type Op int

// The reduction operators. Min and Max are Go's built-in min and max: for
// floating point a NaN operand gives NaN and -0 is less than +0.
const (
	Sum Op = iota
	Prod
	Min
	Max
	// Band, Bor and Bxor are bitwise and, or and exclusive or of the
	// elements' bits (meant for integers).
	Band
	Bor
	Bxor
	numOps
)

var opNames = [...]string{Sum: "sum", Prod: "prod", Min: "min", Max: "max", Band: "band", Bor: "bor", Bxor: "bxor"}

func (o Op) String() string {
	if o >= 0 && o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

func (o Op) valid() bool { return o >= 0 && o < numOps }

// ParseOp returns the Op whose String is name.
func ParseOp(name string) (Op, error) {
	for o := range numOps {
		if opNames[o] == name {
			return o, nil
		}
	}
	return 0, fmt.Errorf("coll: unknown op %q (want one of %s)", name, strings.Join(opNames[:], ", "))
}

// Algo names a collective algorithm. Auto (the zero value) lets the
// collective choose with Choose and DefaultThresholds.
type Algo int

// The algorithms. Algorithms tells which of them each collective offers.
const (
	Auto Algo = iota
	RecursiveDoubling
	Ring
	Binomial
	Bruck
	Pairwise
	Linear
	Rabenseifner
	ScatterAllgather
	Dissemination
	RecursiveHalving
	numAlgos
)

var algoNames = [...]string{
	Auto:              "auto",
	RecursiveDoubling: "recursive-doubling",
	Ring:              "ring",
	Binomial:          "binomial",
	Bruck:             "bruck",
	Pairwise:          "pairwise",
	Linear:            "linear",
	Rabenseifner:      "rabenseifner",
	ScatterAllgather:  "scatter-allgather",
	Dissemination:     "dissemination",
	RecursiveHalving:  "recursive-halving",
}

func (a Algo) String() string {
	if a >= 0 && a < numAlgos {
		return algoNames[a]
	}
	return fmt.Sprintf("Algo(%d)", int(a))
}

// ParseAlgo returns the Algo whose String is name.
func ParseAlgo(name string) (Algo, error) {
	for a := range numAlgos {
		if algoNames[a] == name {
			return a, nil
		}
	}
	return 0, fmt.Errorf("coll: unknown algorithm %q (want one of %s)", name, strings.Join(algoNames[:], ", "))
}

// Collective names a collective operation.
type Collective int

// The collectives, prefixed Coll because the functions running them take
// the plain names.
const (
	CollBarrier Collective = iota
	CollBcast
	CollReduce
	CollAllreduce
	CollAllgather
	CollReduceScatter
	CollAlltoall
	CollGather
	CollScatter
	// CollAlltoallv is Alltoall with a count per pair of ranks.
	CollAlltoallv
	numCollectives
)

var collNames = [...]string{
	CollBarrier:       "barrier",
	CollBcast:         "bcast",
	CollReduce:        "reduce",
	CollAllreduce:     "allreduce",
	CollAllgather:     "allgather",
	CollReduceScatter: "reduce-scatter",
	CollAlltoall:      "alltoall",
	CollGather:        "gather",
	CollScatter:       "scatter",
	CollAlltoallv:     "alltoallv",
}

func (c Collective) String() string {
	if c >= 0 && c < numCollectives {
		return collNames[c]
	}
	return fmt.Sprintf("Collective(%d)", int(c))
}

// ParseCollective returns the Collective whose String is name.
func ParseCollective(name string) (Collective, error) {
	for c := range numCollectives {
		if collNames[c] == name {
			return c, nil
		}
	}
	return 0, fmt.Errorf("coll: unknown collective %q (want one of %s)", name, strings.Join(collNames[:], ", "))
}

// Algorithms returns every algorithm implemented for c (not Auto), the
// small-message one first. It returns nil for an unknown collective.
func Algorithms(c Collective) []Algo {
	switch c {
	case CollBarrier:
		return []Algo{Dissemination, RecursiveDoubling}
	case CollBcast:
		return []Algo{Binomial, ScatterAllgather, Linear}
	case CollReduce:
		return []Algo{Binomial, Rabenseifner}
	case CollAllreduce:
		return []Algo{RecursiveDoubling, Rabenseifner, Ring}
	case CollAllgather:
		return []Algo{RecursiveDoubling, Bruck, Ring}
	case CollReduceScatter:
		return []Algo{RecursiveHalving, Pairwise, Ring}
	case CollAlltoall:
		return []Algo{Bruck, Linear, Pairwise}
	case CollGather, CollScatter:
		return []Algo{Binomial, Linear}
	case CollAlltoallv:
		return []Algo{Pairwise}
	}
	return nil
}

// resolve returns the algorithm to run for c: algo itself if c offers it,
// Choose's pick with the default thresholds for Auto. It fails if ctx is
// already done, so that a call under a done context starts no
// communication.
func resolve(ctx context.Context, c Collective, algo Algo, size, bytes int) (Algo, error) {
	if err := ctx.Err(); err != nil {
		return algo, fmt.Errorf("coll: %s %s: %w", c, algo, err)
	}
	if algo == Auto {
		return Choose(c, size, bytes, Thresholds{}), nil
	}
	for _, a := range Algorithms(c) {
		if a == algo {
			return a, nil
		}
	}
	names := make([]string, 0, 4)
	for _, a := range Algorithms(c) {
		names = append(names, a.String())
	}
	return 0, fmt.Errorf("coll: %s has no algorithm %s (want auto or one of %s)", c, algo, strings.Join(names, ", "))
}
