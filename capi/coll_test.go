package capi

import (
	"fmt"
	"slices"
	"testing"
)

// call runs the blocking form of a collective or its nonblocking twin
// followed by mr_wait.
func call(block bool, b func() (int32, string), nb func() (int64, int32, string)) (int32, string) {
	if block {
		return b()
	}
	req, c, m := nb()
	if c != OK {
		return c, m
	}
	_, c, m = Wait(req, -1)
	return c, m
}

// TestCollectives runs every collective and its nonblocking twin on 3
// ranks on integer data against closed forms, at two sizes (small and
// large messages take different algorithms).
func TestCollectives(t *testing.T) {
	hs := world(t, 3)
	const size = 3
	for _, n := range []int{5, 20000} {
		for _, block := range []bool{true, false} {
			t.Run(fmt.Sprintf("n=%d/blocking=%v", n, block), func(t *testing.T) {
				collectives(t, hs, size, n, block)
			})
		}
	}
}

func collectives(t *testing.T, hs []int64, size, n int, block bool) {
	onAll(t, hs, func(r int, h int64) {
		check := func(what string, got, want []int64) {
			if !slices.Equal(got, want) {
				t.Errorf("rank %d: %s: got %v..., want %v...", r, what, got[:min(len(got), 8)], want[:min(len(want), 8)])
			}
		}
		seq := func(f func(i int) int64, k int) []int64 {
			v := make([]int64, k)
			for i := range v {
				v[i] = f(i)
			}
			return v
		}
		N := int64(n)

		// barrier
		c, m := call(block, func() (int32, string) { return Barrier(h) }, func() (int64, int32, string) { return Ibarrier(h) })
		ok(t, "barrier", c, m)

		// allreduce: sum of rank+1+i is size*(size+1)/2 + size*i
		send := i64s(seq(func(i int) int64 { return int64(r + 1 + i) }, n)...)
		recv := make([]byte, len(send))
		c, m = call(block, func() (int32, string) { return Allreduce(h, send, recv, N, 4, 0) },
			func() (int64, int32, string) { return Iallreduce(h, send, recv, N, 4, 0) })
		ok(t, "allreduce", c, m)
		check("allreduce", fromI64s(recv), seq(func(i int) int64 { return int64(size*(size+1)/2 + size*i) }, n))
		// in place (sendbuf NULL), max
		buf := i64s(seq(func(i int) int64 { return int64(r*i - r) }, n)...)
		c, m = call(block, func() (int32, string) { return Allreduce(h, nil, buf, N, 4, 3) },
			func() (int64, int32, string) { return Iallreduce(h, nil, buf, N, 4, 3) })
		ok(t, "allreduce in place", c, m)
		check("allreduce max in place", fromI64s(buf), seq(func(i int) int64 { return int64(max((size-1)*(i-1), 0)) }, n))

		// bcast from rank 1
		buf = make([]byte, 8*n)
		if r == 1 {
			buf = i64s(seq(func(i int) int64 { return int64(100 + i) }, n)...)
		}
		c, m = call(block, func() (int32, string) { return Bcast(h, buf, N, 4, 1) },
			func() (int64, int32, string) { return Ibcast(h, buf, N, 4, 1) })
		ok(t, "bcast", c, m)
		check("bcast", fromI64s(buf), seq(func(i int) int64 { return int64(100 + i) }, n))

		// reduce (prod of int32 rank+1 = size!) to rank 2
		s32 := i32s(slices.Repeat([]int32{int32(r + 1)}, n)...)
		var r32 []byte
		if r == 2 {
			r32 = make([]byte, 4*n)
		}
		c, m = call(block, func() (int32, string) { return Reduce(h, s32, r32, N, 3, 1, 2) },
			func() (int64, int32, string) { return Ireduce(h, s32, r32, N, 3, 1, 2) })
		ok(t, "reduce", c, m)
		if r == 2 {
			got := fromI32s(r32)
			if slices.ContainsFunc(got, func(v int32) bool { return v != 6 }) {
				t.Errorf("rank 2: reduce prod: got %v..., want 6s", got[:min(8, n)])
			}
		}

		// allgather
		send = i64s(seq(func(i int) int64 { return int64(r*1000000 + i) }, n)...)
		recv = make([]byte, 8*size*n)
		c, m = call(block, func() (int32, string) { return Allgather(h, send, recv, N, 4) },
			func() (int64, int32, string) { return Iallgather(h, send, recv, N, 4) })
		ok(t, "allgather", c, m)
		check("allgather", fromI64s(recv), seq(func(k int) int64 { return int64(k/n*1000000 + k%n) }, size*n))

		// reduce_scatter: send[k] = rank + k; rank r gets sum_q (q + r*n + i)
		send = i64s(seq(func(k int) int64 { return int64(r + k) }, size*n)...)
		recv = make([]byte, 8*n)
		c, m = call(block, func() (int32, string) { return ReduceScatter(h, send, recv, N, 4, 0) },
			func() (int64, int32, string) { return IreduceScatter(h, send, recv, N, 4, 0) })
		ok(t, "reduce_scatter", c, m)
		check("reduce_scatter", fromI64s(recv), seq(func(i int) int64 { return int64(size*(r*n+i) + size*(size-1)/2) }, n))

		// alltoall: block j of rank r is r*1e6 + j*1e4 + i
		send = i64s(seq(func(k int) int64 { return int64(r*1000000 + k/n*10000 + k%n) }, size*n)...)
		recv = make([]byte, len(send))
		c, m = call(block, func() (int32, string) { return Alltoall(h, send, recv, N, 4) },
			func() (int64, int32, string) { return Ialltoall(h, send, recv, N, 4) })
		ok(t, "alltoall", c, m)
		check("alltoall", fromI64s(recv), seq(func(k int) int64 { return int64(k/n*1000000 + r*10000 + k%n) }, size*n))

		// alltoallv: rank r sends (r+j)%3*n/2+1 elements to rank j (so
		// counts are uneven and symmetric), received with a gap of 2
		// elements before each block.
		cnt := func(a, b int) int64 { return int64((a+b)%3*n/2 + 1) }
		var sc, sd, rc, rd []int64
		var soff, roff int64
		var sv []int64
		var want []int64
		for j := range size {
			sc, sd = append(sc, cnt(r, j)), append(sd, soff)
			for k := range cnt(r, j) {
				sv = append(sv, int64(r*1000000+j*10000)+k)
			}
			soff += cnt(r, j)
			roff += 2
			want = append(want, -1, -1)
			rc, rd = append(rc, cnt(j, r)), append(rd, roff)
			for k := range cnt(j, r) {
				want = append(want, int64(j*1000000+r*10000)+k)
			}
			roff += cnt(j, r)
		}
		send = i64s(sv...)
		recv = i64s(slices.Repeat([]int64{-1}, int(roff))...)
		c, m = call(block, func() (int32, string) { return Alltoallv(h, send, sc, sd, recv, rc, rd, 4) },
			func() (int64, int32, string) { return Ialltoallv(h, send, sc, sd, recv, rc, rd, 4) })
		ok(t, "alltoallv", c, m)
		check("alltoallv", fromI64s(recv), want)

		// gather to rank 0
		send = i64s(seq(func(i int) int64 { return int64(r*1000000 + i) }, n)...)
		recv = nil
		if r == 0 {
			recv = make([]byte, 8*size*n)
		}
		c, m = call(block, func() (int32, string) { return Gather(h, send, recv, N, 4, 0) },
			func() (int64, int32, string) { return Igather(h, send, recv, N, 4, 0) })
		ok(t, "gather", c, m)
		if r == 0 {
			check("gather", fromI64s(recv), seq(func(k int) int64 { return int64(k/n*1000000 + k%n) }, size*n))
		}

		// scatter from rank 1
		send = nil
		if r == 1 {
			send = i64s(seq(func(k int) int64 { return int64(k/n*1000000 + k%n) }, size*n)...)
		}
		recv = make([]byte, 8*n)
		c, m = call(block, func() (int32, string) { return Scatter(h, send, recv, N, 4, 1) },
			func() (int64, int32, string) { return Iscatter(h, send, recv, N, 4, 1) })
		ok(t, "scatter", c, m)
		check("scatter", fromI64s(recv), seq(func(i int) int64 { return int64(r*1000000 + i) }, n))

		// loss-tolerant allreduce with nothing discarded: the exact sum
		fb := f32s(func() []float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(r + 1 + i%100)
			}
			return v
		}()...)
		c, m = call(block, func() (int32, string) { return LossyAllreduce(h, fb, N, 0, 7, "") },
			func() (int64, int32, string) { return IlossyAllreduce(h, fb, N, 0, 7, "") })
		ok(t, "lossy allreduce", c, m)
		for i, v := range fromF32s(fb) {
			if w := float32(size*(size+1)/2 + size*(i%100)); v != w {
				t.Errorf("rank %d: lossy allreduce [%d] = %v, want %v", r, i, v, w)
				break
			}
		}
	})
}

// TestConstSend: sendbuf is const in the header: reductions of bools
// (which comm makes 0/1 in place) and out-of-place calls leave it alone.
func TestConstSend(t *testing.T) {
	hs := world(t, 3)
	onAll(t, hs, func(r int, h int64) {
		send := []byte{2, 0, 7, byte(r)}
		orig := slices.Clone(send)
		recv := make([]byte, 4)
		if c, m := Reduce(h, send, recv, 4, 2, 6, 0); true { // bool, bor
			ok(t, "reduce of bools", c, m)
		}
		if r == 0 && !slices.Equal(recv, []byte{1, 0, 1, 1}) {
			t.Errorf("reduce of bools = %v", recv)
		}
		all := slices.Repeat(send, 3)
		origAll := slices.Clone(all)
		if c, m := ReduceScatter(h, all, recv, 4, 2, 0); true {
			ok(t, "reduce_scatter of bools", c, m)
		}
		if c, m := Allreduce(h, send, recv, 4, 2, 7); true {
			ok(t, "allreduce of bools", c, m)
		}
		if !slices.Equal(send, orig) || !slices.Equal(all, origAll) {
			t.Errorf("rank %d: sendbuf changed: %v (was %v), %v", r, send, orig, all)
		}
	})
}
