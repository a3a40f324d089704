package osu

import (
	"context"
	"fmt"

	"github.com/multirail/multirail/comm"
)

// Closed forms of Plan.Validate. Every value is an integer small enough to be
// exact in its type, so any correct algorithm gives exactly these.

// reduceIn is element i of rank r's input to allreduce and
// reduce-scatter.
func reduceIn(r, i int) float32 { return float32((r + 1) * (i%7 + 1)) }

// reduceWant is element i of the sum over n ranks of reduceIn:
// n(n+1)/2 x (i%7+1), exact in float32 up to 2190 ranks.
func reduceWant(n, i int) float32 { return float32(n * (n + 1) / 2 * (i%7 + 1)) }

// value is a non-negative int32 determined by (a, b, i): the element i
// that rank a sends to rank b (alltoall), that rank a contributes (allgather,
// b = -1) or that the root broadcasts (a = b = -2). Distinct triples give
// distinct values but for hash collisions (about 1 in 2^31 per pair), so a
// block delivered to the wrong place or shifted is found.
func value(a, b, i int) int32 {
	x := uint64(uint32(a))<<40 ^ uint64(uint32(b))<<20 ^ uint64(i)*0x9e3779b97f4a7c15
	x ^= uint64(uint32(a)) * 0xbf58476d1ce4e5b9
	x ^= uint64(uint32(b)) * 0x94d049bb133111eb
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return int32(x & 0x7fffffff)
}

// patternByte is byte k of the point-to-point messages of size bytes that rank
// src sends.
func patternByte(src, size, k int) byte { return byte((k*131 + size*7 + src*17 + 1) % 251) }

// payload is the point-to-point message of size bytes that rank src sends.
func payload(src, size int) []byte {
	b := make([]byte, size)
	for k := range b {
		b[k] = patternByte(src, size, k)
	}
	return b
}

// checkPayload returns the first wrong byte of a message from src.
func checkPayload(data []byte, src, size, iter int) *mismatch {
	if len(data) != size {
		return &mismatch{index: min(len(data), size), iter: iter, got: fmt.Sprintf("a message of %d bytes", len(data)), want: fmt.Sprintf("%d bytes", size)}
	}
	for k, v := range data {
		if w := patternByte(src, size, k); v != w {
			return &mismatch{index: k, iter: iter, got: fmt.Sprint(v), want: fmt.Sprint(w)}
		}
	}
	return nil
}

// checkWindow validates the messages of completed receives.
func checkWindow(ctx context.Context, reqs []*comm.Request, src, size, iter int) *mismatch {
	for _, rq := range reqs {
		msg, err := rq.Wait(ctx)
		if err != nil {
			continue
		}
		if bad := checkPayload(msg.Data, src, size, iter); bad != nil {
			return bad
		}
	}
	return nil
}

// fill sets every element of s to v.
func fill[T any](s []T, v T) {
	for i := range s {
		s[i] = v
	}
}

// firstDiff returns the first element where got differs from want.
func firstDiff(got, want []int32, iter int) *mismatch {
	for i := range got {
		if got[i] != want[i] {
			return &mismatch{index: i, iter: iter, got: fmt.Sprint(got[i]), want: fmt.Sprint(want[i])}
		}
	}
	return nil
}
