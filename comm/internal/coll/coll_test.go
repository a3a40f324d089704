package coll

import (
	"context"
	"fmt"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var collectives = []Collective{
	CollBarrier, CollBcast, CollReduce, CollAllreduce, CollAllgather,
	CollReduceScatter, CollAlltoall, CollGather, CollScatter,
}

func rooted(c Collective) bool {
	return c == CollBcast || c == CollReduce || c == CollGather || c == CollScatter
}

func reducing(c Collective) bool {
	return c == CollReduce || c == CollAllreduce || c == CollReduceScatter
}

// withAuto returns Auto followed by c's algorithms.
func withAuto(c Collective) []Algo { return append([]Algo{Auto}, Algorithms(c)...) }

// TestMatrix runs every collective with every algorithm (and Auto) for
// 1..17 ranks, counts 0, 1, N-1, N+3 and 2N+5, every root, cycling through
// the element types and ops, and compares with the sequential reference.
func TestMatrix(t *testing.T) {
	t.Parallel()
	for _, c := range collectives {
		for _, algo := range withAuto(c) {
			t.Run(fmt.Sprintf("%s/%s", c, algo), func(t *testing.T) {
				t.Parallel()
				i := 0
				for n := 1; n <= 17; n++ {
					counts := []int{0, 1, n - 1, n + 3, 2*n + 5}
					if c == CollBarrier {
						counts = []int{0}
					}
					roots := []int{0}
					if rooted(c) {
						roots = make([]int, n)
						for r := range roots {
							roots[r] = r
						}
					}
					for _, count := range counts {
						for _, root := range roots {
							s := spec{
								c: c, algo: algo, n: n, count: count, root: root,
								typ:  types[i%4],
								op:   Op((i / 4) % 4),
								opts: meshOpts{failRank: -1, misalign: i%3 == 0, rendezvous: i%5 == 0, try: i%2 == 0},
								seed: uint64(i),
							}
							i++
							if err := runSpec(s); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
			})
		}
	}
}

// TestAllTypesOps runs every type with every op for the reducing
// collectives' algorithms on a few sizes.
func TestAllTypesOps(t *testing.T) {
	t.Parallel()
	for _, c := range collectives {
		if !reducing(c) {
			continue
		}
		for _, algo := range Algorithms(c) {
			t.Run(fmt.Sprintf("%s/%s", c, algo), func(t *testing.T) {
				t.Parallel()
				for _, typ := range types {
					for _, op := range opsOf(typ) {
						for _, n := range []int{1, 2, 3, 6, 8, 11} {
							for _, count := range []int{0, 1, n - 1, 3*n + 2} {
								s := spec{c: c, algo: algo, n: n, count: count, root: n / 2, op: op, typ: typ,
									opts: meshOpts{failRank: -1}, seed: 7}
								if err := runSpec(s); err != nil {
									t.Fatal(err)
								}
							}
						}
					}
				}
			})
		}
	}
}

// largeAlgo is the algorithm Choose picks for c's largest messages with
// enough ranks.
var largeAlgo = map[Collective]Algo{
	CollBcast:         ScatterAllgather,
	CollReduce:        Rabenseifner,
	CollAllreduce:     Ring,
	CollAllgather:     Ring,
	CollReduceScatter: Pairwise,
	CollAlltoall:      Pairwise,
	CollGather:        Linear,
	CollScatter:       Linear,
}

// largeCount returns a count (in the spec sense) of 8-byte elements for
// which Choose picks largeAlgo[c] on n ranks, not a multiple of n.
func largeCount(t *testing.T, c Collective, n int) int {
	for count := 1; count <= 1<<17; count *= 2 {
		if cnt := count + 3; Choose(c, n, cnt*8, Thresholds{}) == largeAlgo[c] {
			return cnt
		}
	}
	t.Fatalf("%s on %d ranks: Choose never picks %s", c, n, largeAlgo[c])
	return 0
}

// TestLarge runs every algorithm at a count large enough for Choose to
// pick the large-message algorithm.
func TestLarge(t *testing.T) {
	t.Parallel()
	for _, c := range collectives {
		if c == CollBarrier {
			continue
		}
		for _, n := range []int{8, 13} {
			count := largeCount(t, c, n)
			for _, algo := range withAuto(c) {
				t.Run(fmt.Sprintf("%s/%s/n=%d", c, algo, n), func(t *testing.T) {
					t.Parallel()
					for i, root := range []int{0, n - 1} {
						if i > 0 && !rooted(c) {
							break
						}
						s := spec{c: c, algo: algo, n: n, count: count, root: root,
							op: Op(i + 2*n%3), typ: []string{"int64", "float64"}[i],
							opts: meshOpts{failRank: -1, misalign: i == 1}, seed: 3}
						if err := runSpec(s); err != nil {
							t.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// TestRingPipelined runs the ring algorithms on vectors whose blocks are
// cut into several pieces of uneven length (ringPipe), on rank counts
// with uneven blocks, with misaligned buffers and with sends that return
// only once received.
func TestRingPipelined(t *testing.T) {
	t.Parallel()
	for _, c := range []Collective{CollAllreduce, CollReduceScatter, CollAllgather, CollBcast} {
		algo := Ring
		if c == CollBcast {
			algo = ScatterAllgather // a binomial scatter, then the ring allgather
		}
		for _, n := range []int{2, 3, 5} {
			// About 2.3 pieces per block of 8-byte elements (for
			// allgather the count is each rank's block).
			count := (RingPiece*23/10/8)*n + 5
			if c == CollAllgather {
				count = RingPiece*23/10/8 + 5
			}
			for i, typ := range []string{"float64", "int64"} {
				s := spec{c: c, algo: algo, n: n, count: count, root: n - 1, op: Op(i), typ: typ,
					opts: meshOpts{failRank: -1, misalign: i == 0, rendezvous: i == 1}, seed: uint64(n)}
				t.Run(s.String(), func(t *testing.T) {
					t.Parallel()
					if m := ringPieces(count/n, 8); c != CollAllgather && m < 2 {
						t.Fatalf("blocks of %d elements make %d piece(s); want several", count/n, m)
					}
					if err := runSpec(s); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}

// TestTrySendExchanges: over a transport that can send at once
// (TrySender), the exchanges of recursive doubling send from the calling
// goroutine when TrySend accepts and fall back to a concurrent send when
// it declines, and the result is the same.
func TestTrySendExchanges(t *testing.T) {
	for _, try := range []bool{false, true} {
		m := newMesh(4, meshOpts{failRank: -1, try: try})
		out := make([][]int64, 4)
		errs := runRanks(context.Background(), m, -1, true, func(ctx context.Context, tr Transport) error {
			buf := []int64{int64(tr.Rank() + 1), 10}
			out[tr.Rank()] = buf
			return Allreduce(ctx, tr, buf, Sum, RecursiveDoubling)
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("try=%v rank %d: %v", try, r, err)
			}
			if out[r][0] != 10 || out[r][1] != 40 {
				t.Fatalf("try=%v rank %d: got %v, want [10 40]", try, r, out[r])
			}
		}
		if err := m.verify(); err != nil {
			t.Fatal(err)
		}
		// 4 ranks x 2 exchanges; the mesh declines the triples whose
		// rank+dst+step is a multiple of 3.
		if got := m.tried.Load(); (got > 0) != try || got >= 8 {
			t.Fatalf("try=%v: %d of 8 sends went through TrySend", try, got)
		}
	}
}
