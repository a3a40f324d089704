package coll

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// spec is one collective call to run on a mesh and check against the
// sequential reference. count is, per collective: the buffer (Bcast), the
// vector (Reduce, Allreduce, ReduceScatter's whole send), one rank's
// contribution (Allgather, Gather), one rank's block (Scatter), the block
// sent to each rank (Alltoall).
type spec struct {
	c     Collective
	algo  Algo
	n     int
	count int
	root  int
	op    Op
	typ   string // one of types
	opts  meshOpts
	seed  uint64
}

func (s spec) String() string {
	return fmt.Sprintf("%s/%s/n=%d/count=%d/root=%d/%s/%s/%+v", s.c, s.algo, s.n, s.count, s.root, s.op, s.typ, s.opts)
}

// deadlockTimeout bounds one collective call in the tests.
const deadlockTimeout = 30 * time.Second

var types = []string{"int32", "int64", "float32", "float64", "int8", "uint8"}

// opsOf returns the ops that make sense on typ: the bitwise ones only on
// integers (on floats they make NaNs, which compare unequal to
// themselves).
func opsOf(typ string) []Op {
	ops := []Op{Sum, Prod, Min, Max}
	if typ != "float32" && typ != "float64" {
		ops = append(ops, Band, Bor, Bxor)
	}
	return ops
}

// runSpec runs s and returns what went wrong, nil if every rank's result
// matches the reference.
func runSpec(s spec) error {
	switch s.typ {
	case "int32":
		return runSpecT[int32](s)
	case "int64":
		return runSpecT[int64](s)
	case "float32":
		return runSpecT[float32](s)
	case "float64":
		return runSpecT[float64](s)
	case "int8":
		return runSpecT[int8](s)
	case "uint8":
		return runSpecT[uint8](s)
	}
	return fmt.Errorf("unknown type %q", s.typ)
}

// intValues returns count integer-valued elements for which every op is
// exact in every type whatever the order: products of powers of two, sums
// of small integers.
func intValues[T Number](rng *rand.Rand, count int, op Op) []T {
	v := make([]T, count)
	for i := range v {
		if op == Prod {
			v[i] = T([]int{-2, -1, 1, 2}[rng.IntN(4)])
		} else {
			v[i] = T(rng.IntN(2001) - 1000)
		}
	}
	return v
}

// reduceRef reduces ins elementwise with op in rank order.
func reduceRef[T Number](ins [][]T, op Op) []T {
	out := slices.Clone(ins[0])
	for _, in := range ins[1:] {
		apply(op, out, in)
	}
	return out
}

func runSpecT[T Number](s spec) error {
	rng := rand.New(rand.NewPCG(s.seed, uint64(s.n)<<32|uint64(s.count)))
	n, k := s.n, s.count
	// Every rank's input and output buffer, and the expected output.
	in := make([][]T, n)
	out := make([][]T, n)
	want := make([][]T, n)
	inLen, outLen := k, k
	switch s.c {
	case CollBarrier:
		inLen, outLen = 0, 0
	case CollAllgather:
		outLen = n * k
	case CollGather:
		outLen = n * k // at the root
	case CollScatter:
		inLen = n * k // at the root
	case CollAlltoall:
		inLen, outLen = n*k, n*k
	}
	for r := range n {
		in[r] = intValues[T](rng, inLen, s.op)
		switch {
		case s.c == CollReduceScatter:
			b := evenBounds(k, n)
			out[r] = make([]T, b[r+1]-b[r])
		case (s.c == CollGather || s.c == CollReduce) && r != s.root:
			out[r] = nil
		default:
			out[r] = make([]T, outLen)
		}
	}
	if s.c == CollScatter {
		for r := range n {
			if r != s.root {
				in[r] = nil
			}
		}
	}
	// The reference.
	switch s.c {
	case CollBcast:
		for r := range n {
			want[r] = in[s.root]
		}
	case CollReduce:
		want[s.root] = reduceRef(in, s.op)
	case CollAllreduce:
		red := reduceRef(in, s.op)
		for r := range n {
			want[r] = red
		}
	case CollReduceScatter:
		red := reduceRef(in, s.op)
		b := evenBounds(k, n)
		for r := range n {
			want[r] = red[b[r]:b[r+1]]
		}
	case CollAllgather, CollGather:
		all := slices.Concat(in...)
		for r := range n {
			if s.c == CollAllgather || r == s.root {
				want[r] = all
			}
		}
	case CollScatter:
		for r := range n {
			want[r] = in[s.root][r*k : (r+1)*k]
		}
	case CollAlltoall:
		for r := range n {
			want[r] = make([]T, n*k)
			for j := range n {
				copy(want[r][j*k:(j+1)*k], in[j][r*k:(r+1)*k])
			}
		}
	}
	orig := make([][]T, n)
	for r := range n {
		orig[r] = slices.Clone(in[r])
	}

	// The deadline only turns a deadlocked algorithm into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), deadlockTimeout)
	defer cancel()
	m := newMesh(n, s.opts)
	errs := runRanks(ctx, m, -1, true, func(ctx context.Context, t Transport) error {
		r := t.Rank()
		switch s.c {
		case CollBarrier:
			return Barrier(ctx, t, s.algo)
		case CollBcast:
			if r == s.root {
				copy(out[r], in[r])
			}
			return Bcast(ctx, t, out[r], s.root, s.algo)
		case CollReduce:
			return Reduce(ctx, t, in[r], out[r], s.op, s.root, s.algo)
		case CollAllreduce:
			copy(out[r], in[r])
			return Allreduce(ctx, t, out[r], s.op, s.algo)
		case CollAllgather:
			return Allgather(ctx, t, in[r], out[r], s.algo)
		case CollReduceScatter:
			return ReduceScatter(ctx, t, in[r], out[r], s.op, s.algo)
		case CollAlltoall:
			return Alltoall(ctx, t, in[r], out[r], s.algo)
		case CollGather:
			return Gather(ctx, t, in[r], out[r], s.root, s.algo)
		case CollScatter:
			return Scatter(ctx, t, in[r], out[r], s.root, s.algo)
		}
		return fmt.Errorf("unknown collective %v", s.c)
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%v: %w", s, err)
	}
	if err := m.verify(); err != nil {
		return fmt.Errorf("%v: transport: %w", s, err)
	}
	for r := range n {
		if !slices.Equal(in[r], orig[r]) {
			return fmt.Errorf("%v: rank %d: input modified", s, r)
		}
		if want[r] == nil {
			continue
		}
		if !slices.Equal(out[r], want[r]) {
			return fmt.Errorf("%v: rank %d:\n got %v\nwant %v", s, r, out[r], want[r])
		}
	}
	return nil
}
