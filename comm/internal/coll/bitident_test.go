package coll

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// floatValues returns count random non-integer values (some -0 for min
// and max), near 1 for products so that they neither overflow nor vanish.
func floatValues[T Number](rng *rand.Rand, count int, op Op) []T {
	v := make([]T, count)
	for i := range v {
		switch {
		case op == Prod:
			v[i] = T(0.5 + rng.Float64())
		case (op == Min || op == Max) && rng.IntN(8) == 0:
			v[i] = T(math.Copysign(0, -1))
		default:
			v[i] = T(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(7)-3)))
		}
	}
	return v
}

// allreduceFloats runs Allreduce on every rank's copy of ins and returns
// the results.
func allreduceFloats[T Number](ins [][]T, op Op, algo Algo, opts meshOpts) ([][]T, error) {
	out := make([][]T, len(ins))
	for r := range ins {
		out[r] = slices.Clone(ins[r])
	}
	m := newMesh(len(ins), opts)
	errs := runRanks(context.Background(), m, -1, true, func(ctx context.Context, t Transport) error {
		return Allreduce(ctx, t, out[t.Rank()], op, algo)
	})
	return out, errors.Join(errs...)
}

// TestBitIdentical checks the package documentation's claim: with random
// non-integer floats every rank's Allreduce result is bit for bit the same
// with every algorithm, and a rerun under different message timing gives
// the same bits again.
func TestBitIdentical(t *testing.T) {
	t.Parallel()
	for _, algo := range Algorithms(CollAllreduce) {
		t.Run(algo.String(), func(t *testing.T) {
			t.Parallel()
			for _, typ := range []string{"float32", "float64"} {
				for _, op := range opsOf(typ) {
					for n := 1; n <= 17; n++ {
						for _, count := range []int{1, n - 1, 3*n + 2, 200} {
							var err error
							if typ == "float32" {
								err = checkBitIdentical[float32](n, count, op, algo)
							} else {
								err = checkBitIdentical[float64](n, count, op, algo)
							}
							if err != nil {
								t.Fatalf("%s n=%d count=%d %s: %v", typ, n, count, op, err)
							}
						}
					}
				}
			}
		})
	}
}

func checkBitIdentical[T Number](n, count int, op Op, algo Algo) error {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(count)))
	ins := make([][]T, n)
	for r := range ins {
		ins[r] = floatValues[T](rng, count, op)
	}
	out, err := allreduceFloats(ins, op, algo, meshOpts{failRank: -1})
	if err != nil {
		return err
	}
	again, err := allreduceFloats(ins, op, algo, meshOpts{failRank: -1, rendezvous: true, misalign: true})
	if err != nil {
		return err
	}
	for r := range n {
		if !bytes.Equal(asBytes(out[r]), asBytes(out[0])) {
			return fmt.Errorf("rank %d's result differs from rank 0's", r)
		}
		if !bytes.Equal(asBytes(again[r]), asBytes(out[0])) {
			return fmt.Errorf("rank %d's result differs between runs", r)
		}
	}
	return nil
}

// TestAlgorithmsDiffer documents that the bit-identical guarantee is per
// algorithm and size: different algorithms associate the floating-point
// reduction differently. It only checks that the results agree to within
// rounding.
func TestAlgorithmsDiffer(t *testing.T) {
	const n, count = 7, 300
	rng := rand.New(rand.NewPCG(1, 2))
	ins := make([][]float32, n)
	for r := range ins {
		ins[r] = floatValues[float32](rng, count, Sum)
	}
	ref := reduceRef(ins, Sum)
	differ := 0
	for _, algo := range Algorithms(CollAllreduce) {
		out, err := allreduceFloats(ins, Sum, algo, meshOpts{failRank: -1})
		if err != nil {
			t.Fatal(err)
		}
		for i := range ref {
			d := math.Abs(float64(out[0][i] - ref[i]))
			if d > 1e-4*(1+math.Abs(float64(ref[i]))) {
				t.Fatalf("%s: element %d = %v, want about %v", algo, i, out[0][i], ref[i])
			}
			if out[0][i] != ref[i] {
				differ++
			}
		}
	}
	t.Logf("%d of %d results differ in the last bits from the rank-order sum", differ, 3*count)
}

// runReducing runs reducing collective c with algo on every rank's ins
// over a mesh with opts and returns every rank's result (nil where the
// collective leaves none).
func runReducing[T Number](c Collective, algo Algo, ins [][]T, op Op, root int, opts meshOpts) ([][]T, error) {
	n := len(ins)
	out := make([][]T, n)
	m := newMesh(n, opts)
	errs := runRanks(context.Background(), m, -1, true, func(ctx context.Context, t Transport) error {
		r := t.Rank()
		switch c {
		case CollAllreduce:
			out[r] = slices.Clone(ins[r])
			return Allreduce(ctx, t, out[r], op, algo)
		case CollReduce:
			if r == root {
				out[r] = make([]T, len(ins[r]))
			}
			return Reduce(ctx, t, ins[r], out[r], op, root, algo)
		case CollReduceScatter:
			b := evenBounds(len(ins[r]), n)
			out[r] = make([]T, b[r+1]-b[r])
			return ReduceScatter(ctx, t, ins[r], out[r], op, algo)
		}
		return fmt.Errorf("not a reducing collective: %v", c)
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, m.verify()
}

// TestPipelinedBitIdentical: the pipelined reducing algorithms, their
// steps cut into pieces of any size (down to one element), give every
// rank the same bits as the same algorithm with every step one message
// (each element is reduced in the same order whatever the pieces), for
// random non-integer floats, every op, rank count, count and root.
func TestPipelinedBitIdentical(t *testing.T) {
	t.Parallel()
	whole := Framing{Segment: 1 << 30} // one piece per range: unpipelined
	var reducingPipelined []struct {
		c    Collective
		algo Algo
	}
	for _, pc := range pipelined {
		if reducing(pc.c) {
			reducingPipelined = append(reducingPipelined, pc)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		pc := rapid.SampledFrom(reducingPipelined).Draw(t, "algorithm")
		n := rapid.IntRange(1, 12).Draw(t, "n")
		count := rapid.IntRange(0, 40*n).Draw(t, "count")
		seg := rapid.IntRange(1, 200).Draw(t, "segment")
		f := Framing{Segment: seg, Overhead: rapid.IntRange(0, seg-1).Draw(t, "overhead")}
		root := rapid.IntRange(0, n-1).Draw(t, "root")
		typ := rapid.SampledFrom([]string{"float32", "float64"}).Draw(t, "type")
		op := rapid.SampledFrom(opsOf(typ)).Draw(t, "op")
		opts := meshOpts{failRank: -1, misalign: rapid.Bool().Draw(t, "misalign"), lazy: rapid.Bool().Draw(t, "lazy"),
			try: rapid.Bool().Draw(t, "try"), framing: f}
		seed := rapid.Uint64().Draw(t, "seed")
		var err error
		if typ == "float32" {
			err = checkPipelinedBits[float32](pc.c, pc.algo, n, count, op, root, seed, opts, whole)
		} else {
			err = checkPipelinedBits[float64](pc.c, pc.algo, n, count, op, root, seed, opts, whole)
		}
		if err != nil {
			t.Fatal(err)
		}
	})
}

func checkPipelinedBits[T Number](c Collective, algo Algo, n, count int, op Op, root int, seed uint64, opts meshOpts, whole Framing) error {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	ins := make([][]T, n)
	for r := range ins {
		ins[r] = floatValues[T](rng, count, op)
	}
	piped, err := runReducing(c, algo, ins, op, root, opts)
	if err != nil {
		return err
	}
	ref, err := runReducing(c, algo, ins, op, root, meshOpts{failRank: -1, framing: whole})
	if err != nil {
		return err
	}
	for r := range n {
		if !bytes.Equal(asBytes(piped[r]), asBytes(ref[r])) {
			return fmt.Errorf("rank %d: pipelined %v, one message per step %v", r, piped[r], ref[r])
		}
	}
	return nil
}
