package osu

import (
	"slices"

	"github.com/multirail/multirail/comm"
)

// Kind is how a test measures.
type Kind int

// The kinds of test.
const (
	Latency Kind = iota // ping-pong between ranks 0 and 1
	BW                  // rank 0 -> rank 1, windows of nonblocking sends
	BiBW                // both directions at once
	Coll                // a collective, every rank
)

// Test is one of the benchmarks.
type Test struct {
	Name  string // the CLI name
	Title string // OSU's name for it, in the header line
	Kind  Kind
	Coll  comm.Collective // Coll only
	Elem  string          // element type of a collective: "float32" or "int32"
}

// tests are the benchmarks, in the order of the help text.
var tests = []Test{
	{Name: "latency", Title: "Latency", Kind: Latency},
	{Name: "bw", Title: "Bandwidth", Kind: BW},
	{Name: "bibw", Title: "Bi-Directional Bandwidth", Kind: BiBW},
	{Name: "barrier", Title: "Barrier Latency", Kind: Coll, Coll: comm.CollBarrier},
	{Name: "bcast", Title: "Broadcast Latency", Kind: Coll, Coll: comm.CollBcast, Elem: "int32"},
	{Name: "allreduce", Title: "Allreduce Latency", Kind: Coll, Coll: comm.CollAllreduce, Elem: "float32"},
	{Name: "allgather", Title: "Allgather Latency", Kind: Coll, Coll: comm.CollAllgather, Elem: "int32"},
	{Name: "reduce-scatter", Title: "Reduce_scatter Latency", Kind: Coll, Coll: comm.CollReduceScatter, Elem: "float32"},
	{Name: "alltoall", Title: "All-to-All Personalized Exchange Latency", Kind: Coll, Coll: comm.CollAlltoall, Elem: "int32"},
}

// Names lists the tests' names.
func Names() []string {
	names := make([]string, len(tests))
	for i, t := range tests {
		names[i] = t.Name
	}
	return names
}

// Find returns the test of a name.
func Find(name string) (*Test, bool) {
	for i := range tests {
		if tests[i].Name == name {
			return &tests[i], true
		}
	}
	return nil, false
}

// BusFactor is nccl-tests' bus-bandwidth factor for a collective of n
// ranks (0 for the barrier, which moves no data).
func (t *Test) BusFactor(n int) float64 {
	if n < 1 {
		return 0
	}
	f := float64(n-1) / float64(n)
	switch t.Coll {
	case comm.CollAllreduce:
		return 2 * f
	case comm.CollAllgather, comm.CollReduceScatter, comm.CollAlltoall:
		return f
	case comm.CollBcast:
		return 1
	}
	return 0
}

// AlgBytes is the message size nccl-tests divides by the time for its
// algorithm bandwidth, given the OSU size (per rank for allgather, per pair
// for alltoall, the whole vector otherwise): nccl-tests' size is the whole
// buffer, n blocks for allgather and alltoall.
func (t *Test) AlgBytes(size, n int) float64 {
	switch t.Coll {
	case comm.CollAllgather, comm.CollAlltoall:
		return float64(size) * float64(n)
	}
	return float64(size)
}

// Limits and defaults of a plan.
const (
	MinSize          = 1
	MaxSize          = 64 << 20
	MaxBWSize        = 16 << 20  // bw, bibw: 64 of them in flight
	Window           = 64        // messages in flight per bw/bibw iteration (OSU's window)
	bwBudget         = 128 << 20 // bytes one large bw point aims to move (iterations x window x size)
	smallSize        = 8 << 10   // OSU's large-message threshold: above it, fewer iterations
	largeSize        = 1 << 20   // from here on, fewer still
	DefaultP2PSizes  = "1:1MiB"
	DefaultCollSizes = "4:1MiB"
	MaxIters         = 1_000_000
)

// DefaultIters returns the iterations and warm-up iterations of a
// point of size bytes when Plan.Iters and Plan.Warmup are 0, shrinking with the
// size as OSU's do: up to 8 KiB OSU's own counts (latency 10000/100,
// collectives 1000/100), then fewer than OSU's 1000/10 and 100/10 so that
// slow rails finish: 100/10 below 1 MiB, 20/2 from 1 MiB. bw and bibw run 100/10 windows up to 8
// KiB, then as many windows of 64 messages as move about 128 MiB, at
// least 3 and at most 20 (OSU's large-message count), plus a tenth of that
// (at least 1) to warm up: a 4 MiB point moves 3+1 windows of 64 x 4 MiB,
// 1 GiB, about 25 s at 350 Mbit/s.
func DefaultIters(kind Kind, size int) (iters, warmup int) {
	switch kind {
	case BW, BiBW:
		if size <= smallSize {
			return 100, 10
		}
		iters = min(max(bwBudget/(Window*size), 3), 20)
		return iters, max(1, iters/10)
	}
	switch {
	case size <= smallSize && kind == Latency:
		return 10000, 100
	case size <= smallSize:
		return 1000, 100
	case size < largeSize:
		return 100, 10
	}
	return 20, 2
}

// ElemSizes turns byte sizes into whole 4-byte elements for a
// collective: each size is rounded down to a multiple of 4 and sizes below
// 4 bytes are dropped (OSU's reductions start at one float, 4 bytes).
func ElemSizes(sizes []int) []int {
	var out []int
	for _, s := range sizes {
		if s >= 4 {
			out = append(out, s/4*4)
		}
	}
	return slices.Compact(out)
}

// Plan is what to measure.
type Plan struct {
	Test *Test
	// Sizes are the message sizes in bytes, ascending; whole 4-byte
	// elements for the collectives (ElemSizes), {0} for the barrier.
	Sizes []int
	// Iters and Warmup are the timed and untimed iterations per size; 0
	// means DefaultIters.
	Iters, Warmup int
	// Algo forces the collective's algorithm (comm.AlgoAuto: chosen by
	// size).
	Algo comm.Algo
	// Validate checks every result against its closed form.
	Validate bool
}

// ItersFor returns the iterations and warm-up of a point.
func (p *Plan) ItersFor(size int) (iters, warmup int) {
	iters, warmup = DefaultIters(p.Test.Kind, size)
	if p.Iters > 0 {
		iters = p.Iters
	}
	if p.Warmup > 0 {
		warmup = p.Warmup
	}
	return iters, warmup
}
