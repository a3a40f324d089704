package comm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/comm/launch"
	"github.com/multirail/multirail/lossy"
)

func TestFloat16RoundTrip(t *testing.T) {
	for h := range 1 << 16 {
		f := Float16ToFloat32(uint16(h))
		if f != f { // NaN stays NaN
			if g := Float16ToFloat32(Float32ToFloat16(f)); g == g {
				t.Fatalf("f16 %#04x: NaN became %v", h, g)
			}
			continue
		}
		if back := Float32ToFloat16(f); back != uint16(h) {
			t.Fatalf("f16 %#04x -> %v -> %#04x", h, f, back)
		}
		if b := BFloat16ToFloat32(uint16(h)); b == b && Float32ToBFloat16(b) != uint16(h) {
			t.Fatalf("bf16 %#04x -> %v -> %#04x", h, b, Float32ToBFloat16(b))
		}
	}
}

func TestFloat16Table(t *testing.T) {
	for _, c := range []struct {
		f    float32
		h, b uint16
	}{
		{0, 0, 0},
		{1, 0x3c00, 0x3f80},
		{-2, 0xc000, 0xc000},
		{65504, 0x7bff, 0x4780},                          // bf16 rounds up
		{65520, 0x7c00, 0x4780},                          // rounds up to Inf in f16
		{float32(math.Inf(1)), 0x7c00, 0x7f80},           // Inf
		{5.960464477539063e-08, 0x0001, 0x3380},          // the smallest subnormal f16
		{2.9802322387695312e-08, 0x0000, 0x3300},         // half of it: ties to even (0)
		{1.0009765625, 0x3c01, 0x3f80},                   // 1 + 2^-10; bf16 rounds down
		{1.00048828125, 0x3c00, 0x3f80},                  // 1 + 2^-11: tie to even (down)
		{1.00146484375, 0x3c02, 0x3f80},                  // 1 + 3*2^-11: tie to even (up)
		{float32(1 + 1.0/128 + 1.0/256), 0x3c0c, 0x3f82}, // bf16 tie rounds to even (up)
	} {
		if got := Float32ToFloat16(c.f); got != c.h {
			t.Errorf("Float32ToFloat16(%v) = %#04x, want %#04x", c.f, got, c.h)
		}
		if got := Float32ToBFloat16(c.f); got != c.b {
			t.Errorf("Float32ToBFloat16(%v) = %#04x, want %#04x", c.f, got, c.b)
		}
	}
}

// nearest is the reference rounding: among all finite values of a 16-bit
// format, the one closest to f, ties to the even bit pattern.
func nearest(f float32, decode func(uint16) float32) uint16 {
	best, bestD := uint16(0), math.Inf(1)
	for h := range 1 << 15 { // positive patterns; sign handled by the caller
		v := float64(decode(uint16(h)))
		if math.IsInf(v, 0) || math.IsNaN(v) {
			continue
		}
		d := math.Abs(v - math.Abs(float64(f)))
		if d < bestD || (d == bestD && h%2 == 0) {
			best, bestD = uint16(h), d
		}
	}
	return best
}

func TestFloat16RoundingProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := math.Float32frombits(rapid.Uint32Range(0, 0x477fe000).Draw(t, "bits")) // below f16's overflow
		if got, want := Float32ToFloat16(f), nearest(f, Float16ToFloat32); got != want {
			t.Fatalf("Float32ToFloat16(%g) = %#04x, want %#04x", f, got, want)
		}
		if got, want := Float32ToBFloat16(f), nearest(f, BFloat16ToFloat32); got != want {
			t.Fatalf("Float32ToBFloat16(%g) = %#04x, want %#04x", f, got, want)
		}
	})
}

// encode writes integer-valued v as elements of d.
func encode(d DType, v []int64) []byte {
	b := make([]byte, len(v)*d.Size())
	for i, x := range v {
		switch d {
		case Uint8, Int8, Bool:
			b[i] = byte(x)
		case Int32:
			view[int32](b)[i] = int32(x)
		case Int64:
			view[int64](b)[i] = x
		case Float16:
			view[uint16](b)[i] = Float32ToFloat16(float32(x))
		case BFloat16:
			view[uint16](b)[i] = Float32ToBFloat16(float32(x))
		case Float32:
			view[float32](b)[i] = float32(x)
		case Float64:
			view[float64](b)[i] = float64(x)
		}
	}
	return b
}

func decodeAll(d DType, b []byte) []int64 {
	v := make([]int64, len(b)/d.Size())
	for i := range v {
		switch d {
		case Uint8, Bool:
			v[i] = int64(b[i])
		case Int8:
			v[i] = int64(int8(b[i]))
		case Int32:
			v[i] = int64(view[int32](b)[i])
		case Int64:
			v[i] = view[int64](b)[i]
		case Float16:
			v[i] = int64(Float16ToFloat32(view[uint16](b)[i]))
		case BFloat16:
			v[i] = int64(BFloat16ToFloat32(view[uint16](b)[i]))
		case Float32:
			v[i] = int64(view[float32](b)[i])
		case Float64:
			v[i] = int64(view[float64](b)[i])
		}
	}
	return v
}

// input is rank r's element i for type d: small values whose reductions
// stay exact in every type (bools are 0/1).
func input(d DType, r, i int) int64 {
	if d == Bool {
		return int64((r + i) % 2)
	}
	if d == Uint8 {
		return int64((r+1)*(i%3+1) + 2*(i%2)) // 1..11
	}
	return int64((r+1)*(i%3+1) - 2*(i%2)) // 1..9 and -1..7
}

// reduceRef is the closed form of op over the ranks' inputs at i.
func reduceRef(d DType, op Op, n, i int) int64 {
	acc := input(d, 0, i)
	for r := 1; r < n; r++ {
		x := input(d, r, i)
		switch op {
		case Sum, Mean:
			acc += x
		case Prod:
			acc *= x
		case Min:
			acc = min(acc, x)
		case Max:
			acc = max(acc, x)
		case Band:
			acc &= x
		case Bor:
			acc |= x
		case Bxor:
			acc ^= x
		}
	}
	if d == Bool {
		switch op {
		case Sum, Max:
			acc = min(acc, 1)
		}
		return acc
	}
	if op == Mean {
		acc /= int64(n) // truncation, as Go's integer division
		if d >= Float16 {
			return int64(math.Trunc(float64(reduceRefSum(d, n, i)) / float64(n)))
		}
	}
	if d == Uint8 {
		acc = int64(uint8(acc))
	}
	return acc
}

func reduceRefSum(d DType, n, i int) int64 {
	var s int64
	for r := range n {
		s += input(d, r, i)
	}
	return s
}

func opsFor(d DType) []Op {
	switch d {
	case Float16, BFloat16, Float32, Float64:
		return []Op{Sum, Mean, Prod, Min, Max}
	case Bool:
		return []Op{Sum, Prod, Min, Max, Band, Bor, Bxor}
	}
	return []Op{Sum, Mean, Prod, Min, Max, Band, Bor, Bxor}
}

func TestBytesReductionsEveryTypeAndOp(t *testing.T) {
	const n, count = 3, 7
	cs := local(t, n, Config{})
	for d := range numDTypes {
		for _, op := range opsFor(d) {
			t.Run(fmt.Sprintf("%s/%s", d, op), func(t *testing.T) {
				each(t, cs, func(ctx context.Context, c *Comm) error {
					in := make([]int64, count)
					for i := range in {
						in[i] = input(d, c.Rank(), i)
					}
					buf := encode(d, in)
					if err := AllreduceBytes(ctx, c, d, buf, op); err != nil {
						return err
					}
					red := make([]byte, len(buf))
					if err := ReduceBytes(ctx, c, d, encode(d, in), red, op, 1); err != nil {
						return err
					}
					rs := make([]byte, d.Size())
					if err := ReduceScatterBytes(ctx, c, d, encode(d, append(in[:n:n], in[:0]...)), rs, op); err != nil {
						return err
					}
					got := decodeAll(d, buf)
					for i := range count {
						want := reduceRef(d, op, n, i)
						if d == Int8 {
							want = int64(int8(want))
						}
						if got[i] != want {
							return fmt.Errorf("allreduce element %d: got %d, want %d", i, got[i], want)
						}
						if c.Rank() == 1 && decodeAll(d, red)[i] != want {
							return fmt.Errorf("reduce at the root, element %d: got %d, want %d", i, decodeAll(d, red)[i], want)
						}
					}
					if want := got[c.Rank()]; decodeAll(d, rs)[0] != want {
						return fmt.Errorf("reduce-scatter: got %d, want %d", decodeAll(d, rs)[0], want)
					}
					return nil
				})
			})
		}
	}
}

func TestBoolsOtherThanZeroOrOne(t *testing.T) {
	cs := local(t, 2, Config{})
	each(t, cs, func(ctx context.Context, c *Comm) error {
		send := []byte{0, 2, byte(7 * c.Rank())}
		recv := make([]byte, 3)
		if err := ReduceBytes(ctx, c, Bool, send, recv, Band, 0); err != nil {
			return err
		}
		if !slices.Equal(send, []byte{0, 2, byte(7 * c.Rank())}) {
			return fmt.Errorf("reduce changed the send buffer: %v", send)
		}
		if c.Rank() == 0 && !slices.Equal(recv, []byte{0, 1, 0}) {
			return fmt.Errorf("and: %v, want [0 1 0]", recv)
		}
		buf := []byte{0, 2, byte(7 * c.Rank())}
		if err := AllreduceBytes(ctx, c, Bool, buf, Bor); err != nil {
			return err
		}
		if !slices.Equal(buf, []byte{0, 1, 1}) {
			return fmt.Errorf("or in place: %v, want [0 1 1]", buf)
		}
		return nil
	})
}

func TestBytesRefusals(t *testing.T) {
	cs := local(t, 1, Config{})
	ctx := context.Background()
	for _, c := range []struct {
		name string
		err  error
	}{
		{"float band", AllreduceBytes(ctx, cs[0], Float32, make([]byte, 8), Band)},
		{"f16 bxor", AllreduceBytes(ctx, cs[0], Float16, make([]byte, 8), Bxor)},
		{"bool mean", AllreduceBytes(ctx, cs[0], Bool, make([]byte, 8), Mean)},
		{"unknown type", AllreduceBytes(ctx, cs[0], DType(42), make([]byte, 8), Sum)},
		{"partial element", AllreduceBytes(ctx, cs[0], Int32, make([]byte, 6), Sum)},
		{"lossy int", AllreduceBytes(ctx, cs[0], Int32, make([]byte, 8), Sum, LossTolerant(lossy.Config{}))},
	} {
		if !errors.Is(c.err, ErrConfig) {
			t.Errorf("%s: got %v, want ErrConfig", c.name, c.err)
		}
	}
	if _, err := ParseDType("complex64"); !errors.Is(err, ErrConfig) {
		t.Errorf("ParseDType(complex64): %v", err)
	}
	for d := range numDTypes {
		if p, err := ParseDType(d.String()); err != nil || p != d {
			t.Errorf("ParseDType(%q) = %v, %v", d.String(), p, err)
		}
	}
}

func TestBytesMovesEveryType(t *testing.T) {
	const n = 3
	cs := local(t, n, Config{})
	for d := range numDTypes {
		t.Run(d.String(), func(t *testing.T) {
			each(t, cs, func(ctx context.Context, c *Comm) error {
				r := c.Rank()
				mine := []int64{int64(r + 1), int64(r + 4)}
				b := encode(d, []int64{7, 8, 9})
				if r != 2 {
					b = make([]byte, len(b))
				}
				if err := BcastBytes(ctx, c, d, b, 2); err != nil {
					return err
				}
				if d != Bool && !slices.Equal(decodeAll(d, b), []int64{7, 8, 9}) {
					return fmt.Errorf("bcast: %v", decodeAll(d, b))
				}
				all := make([]byte, n*2*d.Size())
				if err := AllgatherBytes(ctx, c, d, encode(d, mine), all); err != nil {
					return err
				}
				if got := decodeAll(d, all); d != Bool && !slices.Equal(got, []int64{1, 4, 2, 5, 3, 6}) {
					return fmt.Errorf("allgather: %v", got)
				}
				// alltoall: rank r sends 10*r+j to rank j.
				send := make([]int64, n)
				for j := range send {
					send[j] = int64(10*r + j)
				}
				recv := make([]byte, n*d.Size())
				if err := AlltoallBytes(ctx, c, d, encode(d, send), recv); err != nil {
					return err
				}
				for j, v := range decodeAll(d, recv) {
					if d != Bool && v != int64(10*j+r) {
						return fmt.Errorf("alltoall: from rank %d got %d, want %d", j, v, 10*j+r)
					}
				}
				g := make([]byte, n*2*d.Size())
				if err := GatherBytes(ctx, c, d, encode(d, mine), g, 0); err != nil {
					return err
				}
				if got := decodeAll(d, g); r == 0 && d != Bool && !slices.Equal(got, []int64{1, 4, 2, 5, 3, 6}) {
					return fmt.Errorf("gather: %v", got)
				}
				s := make([]byte, d.Size())
				if err := ScatterBytes(ctx, c, d, encode(d, []int64{5, 6, 7}), s, 1); err != nil {
					return err
				}
				if got := decodeAll(d, s)[0]; d != Bool && got != int64(5+r) {
					return fmt.Errorf("scatter: got %d, want %d", got, 5+r)
				}
				return nil
			})
		})
	}
}

// alltoallvPlan is rank r's counts and displacements in an uneven
// alltoallv of n ranks: r sends j (r+j)%3 elements (some zero), valued
// 100*r+10*j+k.
func alltoallvPlan(r, n int) (send []int64, sc, sd []int, rc, rd []int) {
	cnt := func(from, to int) int { return (from + 2*to) % 3 }
	sc, sd, rc, rd = make([]int, n), make([]int, n), make([]int, n), make([]int, n)
	for j := range n {
		sd[j] = len(send) + 1 // a gap before each block
		send = append(send, -1)
		sc[j] = cnt(r, j)
		for k := range sc[j] {
			send = append(send, int64(100*r+10*j+k))
		}
	}
	off := 0
	for j := range n {
		rd[j], rc[j] = off, cnt(j, r)
		off += rc[j]
	}
	return
}

func TestAlltoallvUneven(t *testing.T) {
	const n = 3
	cs := local(t, n, Config{})
	for _, d := range []DType{Int32, Float16, Uint8} {
		each(t, cs, func(ctx context.Context, c *Comm) error {
			r := c.Rank()
			send, sc, sd, rc, rd := alltoallvPlan(r, n)
			total := rd[n-1] + rc[n-1]
			recv := make([]byte, total*d.Size())
			if err := AlltoallvBytes(ctx, c, d, encode(d, send), sc, sd, recv, rc, rd); err != nil {
				return err
			}
			got := decodeAll(d, recv)
			for j := range n {
				for k := range rc[j] {
					if want := int64(100*j + 10*r + k); got[rd[j]+k] != want {
						return fmt.Errorf("%s: from rank %d element %d: got %d, want %d", d, j, k, got[rd[j]+k], want)
					}
				}
			}
			return nil
		})
	}
}

func TestAlltoallvMismatchFailsEveryRank(t *testing.T) {
	const n = 3
	cs := local(t, n, Config{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, c := range cs {
		wg.Go(func() {
			counts := []int{1, 1, 1}
			rcounts := []int{1, 1, 1}
			if i == 0 {
				rcounts[1] = 2 // rank 1 sends rank 0 one element
			}
			errs[i] = Alltoallv(ctx, c, make([]int32, 3), counts, []int{0, 1, 2}, make([]int32, 4), rcounts, []int{0, 1, 3})
			if i != 0 && errs[i] == nil {
				// Its own blocks were right: the failure reaches it at its
				// next collective.
				errs[i] = c.Barrier(ctx)
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("a mismatched alltoallv hung")
	}
	for i, err := range errs {
		if err == nil {
			t.Errorf("rank %d: a mismatched alltoallv and the barrier after it succeeded", i)
		}
	}
	if !strings.Contains(errs[0].Error(), "got 4 bytes, want 8") {
		t.Errorf("rank 0's error does not say what arrived: %v", errs[0])
	}
}

func TestGroupWithoutCommunication(t *testing.T) {
	const n = 4
	cs := local(t, n, Config{})
	members := []int{3, 1} // new rank 0 is world rank 3
	each(t, cs, func(ctx context.Context, c *Comm) error {
		if !slices.Contains(members, c.Rank()) {
			if _, err := c.Group(members, "g"); !errors.Is(err, ErrConfig) {
				return fmt.Errorf("a non-member's Group: %v, want ErrConfig", err)
			}
			return nil
		}
		g, err := c.Group(members, "g")
		if err != nil {
			return err
		}
		defer g.Close()
		if _, err := c.Group(members, "g"); !errors.Is(err, ErrConfig) {
			return fmt.Errorf("the same group twice: %v, want ErrConfig", err)
		}
		h, err := c.Group(members, "h") // same members, another key
		if err != nil {
			return err
		}
		defer h.Close()
		if want := slices.Index(members, c.Rank()); g.Rank() != want || g.Size() != 2 {
			return fmt.Errorf("group rank %d of %d, want %d of 2", g.Rank(), g.Size(), want)
		}
		x := []int64{int64(c.Rank())}
		y := []int64{int64(10 * c.Rank())}
		// Interleave the two groups' collectives in opposite orders: their
		// traffic must not mix.
		if g.Rank() == 0 {
			if err := Allreduce(ctx, g, x, Sum); err != nil {
				return err
			}
			if err := Allreduce(ctx, h, y, Sum); err != nil {
				return err
			}
		} else {
			var wg sync.WaitGroup
			var e1, e2 error
			wg.Go(func() { e1 = Allreduce(ctx, h, y, Sum) })
			wg.Go(func() { e2 = Allreduce(ctx, g, x, Sum) })
			wg.Wait()
			if err := errors.Join(e1, e2); err != nil {
				return err
			}
		}
		if x[0] != 4 || y[0] != 40 {
			return fmt.Errorf("group sums %d and %d, want 4 and 40", x[0], y[0])
		}
		return nil
	})
	for _, bad := range [][]int{nil, {0, 0}, {0, 9}} {
		if _, err := cs[0].Group(bad, "x"); err == nil {
			t.Errorf("Group(%v) succeeded", bad)
		}
	}
}

func TestLossyStreamsKeepTheirOwnState(t *testing.T) {
	const n = 3
	cs := local(t, n, Config{})
	cfg := lossy.Config{PacketFloats: 4, ErrorFeedback: true}
	each(t, cs, func(ctx context.Context, c *Comm) error {
		for round := range 3 {
			for _, s := range []uint64{7, 0, 1 << 40} {
				x := make([]float32, 10+int(s%5))
				for i := range x {
					x[i] = float32(c.Rank() + i + round)
				}
				if err := Allreduce(ctx, c, x, Sum, LossTolerant(cfg), WithStream(s)); err != nil {
					return err
				}
				for i, v := range x { // nothing is discarded here: exact
					if want := float32(3*(i+round) + 3); v != want {
						return fmt.Errorf("stream %d element %d: %v, want %v", s, i, v, want)
					}
				}
				if err := c.ReportQualityStream(ctx, s, 1); err != nil {
					return err
				}
			}
		}
		for _, s := range []uint64{7, 0, 1 << 40} {
			if st := c.LossyStatsStream(s); st.Calls != 3 {
				return fmt.Errorf("stream %d: %d calls, want 3", s, st.Calls)
			}
		}
		if err := c.ReportQualityStream(ctx, 99, 1); !errors.Is(err, ErrConfig) {
			return fmt.Errorf("a report on an unused stream: %v", err)
		}
		return nil
	})
}

func TestLossyStreamCollisionRefused(t *testing.T) {
	// A stream whose stage key is the world's stream 0's.
	var s uint64
	for s = 1; stageKey(worldID, s) != stageKey(worldID, 0); s++ {
	}
	cs := local(t, 1, Config{})
	c := cs[0]
	// One rank needs no stages: check the key bookkeeping directly.
	c.w.mu.Lock()
	c.w.stageOwners = map[uint32]stageOwner{stageKey(worldID, 0): {worldID, 0}}
	c.w.mu.Unlock()
	c.ranks = append(c.ranks, 0) // pretend two ranks so that keys are taken
	defer func() { c.ranks = c.ranks[:1] }()
	_, err := c.newLossy(lossy.Config{}, s)
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("stream %d colliding with stream 0: %v, want ErrConfig", s, err)
	}
}

func TestPrepareConnect(t *testing.T) {
	const n = 3
	ctx := context.Background()
	tok := "a-test-token-of-at-least-32-characters"
	ps := make([]*Pending, n)
	for r := range n {
		p, err := Prepare(ctx, launch.Info{Rank: r, Size: n}, Config{Transport: multirail.Config{Token: tok}})
		if err != nil {
			t.Fatal(err)
		}
		ps[r] = p
	}
	cards := make([][]byte, n)
	for r, p := range ps {
		cards[r] = p.Card()
	}
	short, err := Prepare(ctx, launch.Info{Rank: 0, Size: n}, Config{Transport: multirail.Config{Token: tok}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := short.Connect(ctx, cards[:2]); err == nil {
		t.Error("Connect with too few cards accepted them")
	}
	cs := make([]*Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, p := range ps {
		wg.Go(func() { cs[r], errs[r] = p.Connect(ctx, cards) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range cs {
			wg.Go(func() { _ = c.Close() })
		}
		wg.Wait()
	}()
	each(t, cs, func(ctx context.Context, c *Comm) error {
		x := []int32{int32(c.Rank())}
		if err := Allreduce(ctx, c, x, Sum); err != nil {
			return err
		}
		if x[0] != 3 || c.Launcher() != "cards" {
			return fmt.Errorf("sum %d (want 3), launcher %q", x[0], c.Launcher())
		}
		return nil
	})
	if _, err := ps[0].Connect(ctx, cards); !errors.Is(err, ErrUsed) {
		t.Errorf("a second Connect: %v, want ErrUsed", err)
	}
}

func TestPrepareRefusals(t *testing.T) {
	t.Setenv("MULTIRAIL_TOKEN", "")
	t.Setenv("MULTIRAIL_TOKEN_FILE", "")
	ctx := context.Background()
	if _, err := Prepare(ctx, launch.Info{Rank: 0, Size: 2}, Config{}); !errors.Is(err, ErrConfig) {
		t.Errorf("two ranks without a token: %v, want ErrConfig", err)
	}
	if _, err := Prepare(ctx, launch.Info{Rank: 2, Size: 2}, Config{}); !errors.Is(err, ErrConfig) {
		t.Errorf("rank 2 of 2: %v, want ErrConfig", err)
	}
	p, err := Prepare(ctx, launch.Info{Rank: 0, Size: 1}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Connect(ctx, [][]byte{p.Card()}); !errors.Is(err, ErrUsed) {
		t.Errorf("Connect after Close: %v, want ErrUsed", err)
	}
	p, err = Prepare(ctx, launch.Info{Rank: 0, Size: 1}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Connect(ctx, [][]byte{[]byte(`{"port": 0}`)}); err == nil {
		t.Error("a card with port 0 was accepted")
	}
}

// memStore is a Store in memory whose Get waits for the key.
type memStore struct {
	mu   sync.Mutex
	cond *sync.Cond
	m    map[string][]byte
}

func newMemStore() *memStore {
	s := &memStore{m: map[string][]byte{}}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *memStore) Set(_ context.Context, k string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k] = append([]byte(nil), v...)
	s.cond.Broadcast()
	return nil
}

func (s *memStore) Get(ctx context.Context, k string) ([]byte, error) {
	stop := context.AfterFunc(ctx, func() { s.mu.Lock(); s.cond.Broadcast(); s.mu.Unlock() })
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if v, ok := s.m[k]; ok {
			return v, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.cond.Wait()
	}
}

func TestStartStoreDrawsTheToken(t *testing.T) {
	t.Setenv("MULTIRAIL_TOKEN", "")
	t.Setenv("MULTIRAIL_TOKEN_FILE", "")
	const n = 3
	st := newMemStore()
	cs := make([]*Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { cs[r], errs[r] = StartStore(context.Background(), st, r, n, Config{}) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range cs {
			wg.Go(func() { _ = c.Close() })
		}
		wg.Wait()
	}()
	if tok := st.m[StoreTokenKey]; len(tok) < 32 {
		t.Errorf("rank 0 put a token of %d characters in the store", len(tok))
	}
	for r := range n {
		if len(st.m[StoreCardKey+strconv.Itoa(r)]) == 0 {
			t.Errorf("no card for rank %d", r)
		}
	}
	each(t, cs, func(ctx context.Context, c *Comm) error {
		b := encode(BFloat16, []int64{int64(c.Rank()), 2})
		if err := AllreduceBytes(ctx, c, BFloat16, b, Max); err != nil {
			return err
		}
		if got := decodeAll(BFloat16, b); !slices.Equal(got, []int64{2, 2}) {
			return fmt.Errorf("bfloat16 max: %v", got)
		}
		return nil
	})
}
