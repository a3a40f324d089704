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

// pipelined lists the collectives and algorithms that cut their steps
// into pieces (runPipe).
var pipelined = []struct {
	c    Collective
	algo Algo
}{
	{CollAllreduce, Rabenseifner}, {CollAllreduce, Ring},
	{CollReduce, Rabenseifner},
	{CollReduceScatter, RecursiveHalving}, {CollReduceScatter, Ring},
	{CollAllgather, RecursiveDoubling}, {CollAllgather, Ring},
	{CollBcast, ScatterAllgather}, // a binomial scatter, then the ring allgather
}

// smallFraming makes pieces of a few elements, so that small vectors are
// cut into many pieces of uneven alignment.
var smallFraming = Framing{Segment: 64, Overhead: 24}

// TestPipelined runs the pipelined algorithms on vectors cut into many
// pieces whose grid does not line up with the blocks, on rank counts with
// uneven blocks and folds, with misaligned buffers, with sends that return
// only once received, and with a transport that reads the sender's buffer
// only when the receiver takes the message (so that a receive that
// overwrote elements a send still reads would deliver wrong values).
func TestPipelined(t *testing.T) {
	t.Parallel()
	for _, pc := range pipelined {
		for _, n := range []int{2, 3, 4, 5, 7, 8} {
			count := 37*n + 5
			if pc.c == CollAllgather {
				count = 37 + n
			}
			for i, typ := range []string{"float64", "int32", "int8"} {
				s := spec{c: pc.c, algo: pc.algo, n: n, count: count, root: n - 1 - i%n, op: Op(i), typ: typ,
					opts: meshOpts{failRank: -1, misalign: i == 0, rendezvous: i == 1, lazy: i == 2, framing: smallFraming}, seed: uint64(n)}
				t.Run(s.String(), func(t *testing.T) {
					t.Parallel()
					if err := runSpec(s); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}

// TestPieceElems: a full piece's header and payload fill whole segments
// (less than one element short), PipeDepth pieces to a block when blocks
// are large enough, never beyond MaxPiece, at least one segment and one
// element.
func TestPieceElems(t *testing.T) {
	const kib = 1 << 10
	seg64 := Framing{Segment: 64 * kib, Overhead: 40}
	segs := func(k int) int { return min(max(k/PipeDepth, 1), MaxPiece/(64*kib)) }
	for _, tc := range []struct {
		name       string
		f          Framing
		blockBytes int
		elem       int
		want       int // elements
	}{
		{"small block: one segment", seg64, 16 * kib, 4, (64*kib - 40) / 4},
		{"256 KiB block", seg64, 256 * kib, 4, (segs(4)*64*kib - 40) / 4},
		{"512 KiB block", seg64, 512 * kib, 4, (segs(8)*64*kib - 40) / 4},
		{"1 MiB block", seg64, 1024 * kib, 8, (segs(16)*64*kib - 40) / 8},
		{"64 MiB block: MaxPiece", seg64, 64 * 1024 * kib, 4, (MaxPiece - 40) / 4},
		{"element that does not divide: rounded down", seg64, 0, 3, (64*kib - 40) / 3},
		{"segment above MaxPiece: one segment", Framing{Segment: 1024 * kib, Overhead: 40}, 64 * 1024 * kib, 8, (1024*kib - 40) / 8},
		{"no header", Framing{Segment: 64 * kib}, 64 * 1024 * kib, 1, MaxPiece},
		{"header as large as a segment: one element", Framing{Segment: 16, Overhead: 16}, 0, 8, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PieceElems(tc.f, tc.blockBytes, tc.elem)
			if got != tc.want {
				t.Fatalf("PieceElems(%+v, %d, %d) = %d, want %d", tc.f, tc.blockBytes, tc.elem, got, tc.want)
			}
			if tc.f.Overhead >= tc.f.Segment {
				return
			}
			// Header plus payload: whole segments, less than an element short.
			total := tc.f.Overhead + got*tc.elem
			n := (total + tc.f.Segment - 1) / tc.f.Segment
			if slack := n*tc.f.Segment - total; slack >= tc.elem {
				t.Fatalf("a piece of %d elements and a %d-byte header leaves %d bytes of its %d segments empty", got, tc.f.Overhead, slack, n)
			}
			if n*tc.f.Segment > max(MaxPiece, tc.f.Segment) {
				t.Fatalf("a piece takes %d segments of %d bytes, beyond MaxPiece %d", n, tc.f.Segment, MaxPiece)
			}
		})
	}
}

// TestCut: a range is cut into pieces whose header and payload fill
// whole segments, but for the last, which carries the remainder (with a
// full piece when the remainder is shorter than a segment); the pieces
// cover the range in order and take no more segments than one message
// for the whole range would (one more when the remainder, a segment or
// longer, is a piece of its own and its header crosses a segment).
func TestCut(t *testing.T) {
	f := Framing{Segment: 64 << 10, Overhead: 40}
	const elem = 4
	pc := PieceElems(f, 1<<30, elem)
	p := newPlan(pieces{elems: pc, minTail: f.Segment / elem}, 0)
	segs := func(elems int) int { return (f.Overhead + elems*elem + f.Segment - 1) / f.Segment }
	for _, tc := range []struct {
		name   string
		elems  int
		pieces int
	}{
		{"empty: one empty piece", 0, 1},
		{"one element", 1, 1},
		{"one piece exactly", pc, 1},
		{"a power of two: one piece and the remainder in it", MaxPiece / elem, 1},
		{"4 MiB: 16 pieces, the remainder in the last", 4 << 20 / elem, 16},
		{"a remainder of a segment: a piece of its own", 3*pc + f.Segment/elem, 4},
		{"a remainder just short of a segment: in the last piece", 3*pc + f.Segment/elem - 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const lo = 12345
			var got [][2]int
			p.cut(lo, lo+tc.elems, func(a, b int) { got = append(got, [2]int{a, b}) })
			if len(got) != tc.pieces {
				t.Fatalf("%d pieces %v, want %d", len(got), got, tc.pieces)
			}
			at, total := lo, 0
			for i, g := range got {
				if g[0] != at || g[1] < g[0] {
					t.Fatalf("piece %d is [%d, %d), want it to start at %d", i, g[0], g[1], at)
				}
				at = g[1]
				total += segs(g[1] - g[0])
				if i+1 < len(got) && g[1]-g[0] != pc {
					t.Fatalf("piece %d of %d has %d elements, want a full piece of %d", i, len(got), g[1]-g[0], pc)
				}
			}
			if at != lo+tc.elems {
				t.Fatalf("pieces end at %d, want %d", at, lo+tc.elems)
			}
			// A remainder of a piece of its own may cost its header's
			// segment; riding in the last piece it costs nothing more.
			whole := segs(tc.elems)
			if tc.elems%pc >= f.Segment/elem && len(got) > 1 {
				whole++
			}
			if total > whole {
				t.Fatalf("pieces take %d segments, one message %d", total, whole)
			}
		})
	}
}

// TestPlanPieces: the receiver expects every piece with the sender's step
// number and elements; the algorithms move 2(n-1)/n of the vector; a ring
// of 1 MiB blocks is cut into pieces. 4 MiB of float32 over 4 ranks, ring
// and rabenseifner.
func TestPlanPieces(t *testing.T) {
	f := Framing{Segment: 64 << 10, Overhead: 40}
	const n = 4
	count := (4 << 20) / 4
	for _, algo := range []Algo{Rabenseifner, Ring} {
		t.Run(algo.String(), func(t *testing.T) {
			bounds := evenBounds(count, n)
			pc := piecesFor[float32](framedTransport{f}, bounds)
			plans := make([]*plan, n)
			for r := range plans {
				plans[r] = newPlan(pc, 0)
				if algo == Ring {
					plans[r].ring(r, n, func(v int) int { return v }, bounds, 0, 2*(n-1))
				} else {
					plans[r].halving(newFold(n), r, bounds)
					plans[r].doubling(newFold(n), r, bounds)
				}
			}
			for r, pl := range plans {
				total := 0
				for _, s := range pl.sends {
					total += s.hi - s.lo
				}
				if total != count*2*(n-1)/n {
					t.Fatalf("rank %d sends %d elements, want %d", r, total, count*2*(n-1)/n)
				}
				if algo == Ring && len(pl.sends) <= 2*(n-1) {
					t.Fatalf("rank %d: %d pieces for %d ring stages of 1 MiB blocks: not cut", r, len(pl.sends), 2*(n-1))
				}
				for _, s := range pl.sends {
					found := false
					for _, rv := range plans[s.peer].recvs {
						if rv.peer == r && rv.step == s.step {
							if rv.lo != s.lo || rv.hi != s.hi {
								t.Fatalf("rank %d step %d to %d: sends [%d, %d), the receiver expects [%d, %d)", r, s.step, s.peer, s.lo, s.hi, rv.lo, rv.hi)
							}
							found = true
						}
					}
					if !found {
						t.Fatalf("rank %d: step %d to %d is not expected", r, s.step, s.peer)
					}
				}
			}
		})
	}
}

// framedTransport is a Transport stub that only has a framing.
type framedTransport struct{ f Framing }

func (framedTransport) Rank() int                                      { return 0 }
func (framedTransport) Size() int                                      { return 1 }
func (framedTransport) Send(context.Context, int, int, []byte) error   { return nil }
func (framedTransport) Recv(context.Context, int, int) ([]byte, error) { return nil, nil }
func (t framedTransport) Framing() Framing                             { return t.f }

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
