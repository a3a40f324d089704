package coll

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// BenchmarkCodec compares the portable element-by-element encoding with
// the memory views used on little-endian hosts.
func BenchmarkCodec(b *testing.B) {
	v := make([]float32, 1<<16)
	buf := make([]byte, len(v)*4)
	b.Run("putLE", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			putLE(buf, v)
		}
	})
	b.Run("getLE", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			getLE(v, buf)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			decode(v, buf)
		}
	})
	x := newXfer[float32](context.Background(), nil, Sum)
	b.Run("reduceBytes-aligned", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			x.reduceBytes(v, buf)
		}
	})
	mis := make([]byte, len(buf)+1)[1:]
	b.Run("reduceBytes-misaligned", func(b *testing.B) {
		b.SetBytes(int64(len(mis)))
		for b.Loop() {
			x.reduceBytes(v, mis)
		}
	})
}

// BenchmarkAllreduce runs Allreduce over the in-memory mesh: mostly a
// measure of the algorithms' copying and goroutine overhead.
func BenchmarkAllreduce(b *testing.B) {
	for _, n := range []int{4, 8} {
		for _, count := range []int{256, 1 << 18} {
			for _, algo := range Algorithms(CollAllreduce) {
				b.Run(fmt.Sprintf("n=%d/count=%d/%s", n, count, algo), func(b *testing.B) {
					bufs := make([][]float32, n)
					for r := range bufs {
						bufs[r] = make([]float32, count)
					}
					b.SetBytes(int64(count * 4))
					for b.Loop() {
						m := newMesh(n, meshOpts{failRank: -1})
						errs := runRanks(context.Background(), m, -1, true, func(ctx context.Context, t Transport) error {
							return Allreduce(ctx, t, bufs[t.Rank()], Sum, algo)
						})
						if err := errors.Join(errs...); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
