package lossy

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/multirail/multirail"
	"go.uber.org/goleak"
	"pgregory.net/rapid"
)

// TestMain allows short tokens (multirail.InsecureEnv), which the tests
// use, in this process and the ranks it starts.
func TestMain(m *testing.M) {
	os.Setenv(multirail.InsecureEnv, "1")
	goleak.VerifyTestMain(m)
}

// runRing runs Allreduce on every rank at once, calls times, with inputs
// from gen(call, rank), and returns each rank's results of the last call.
func runRing(t testing.TB, ts []RingTransport, cfg Config, n, calls int, gen func(call, rank int) []float32) ([][]float32, []*Ring) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	N := len(ts)
	rings := make([]*Ring, N)
	for i := range rings {
		r, err := NewRing(i, N, ts[i], cfg)
		if err != nil {
			t.Fatal(err)
		}
		rings[i] = r
	}
	out := make([][]float32, N)
	for call := range calls {
		var wg sync.WaitGroup
		errs := make([]error, N)
		for i := range N {
			out[i] = gen(call, i)
			wg.Go(func() { errs[i] = rings[i].Allreduce(ctx, out[i]) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: %v", i, err)
			}
		}
	}
	return out, rings
}

// TestPropertySum: for random N (2-16), lengths and packet sizes, the
// reliable ring (nothing discarded) gives every rank exactly the
// sequential sum (inputs are small integers, so float32 sums are exact in
// any order), and Mean gives the sum divided by N.
func TestPropertySum(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		N := rapid.IntRange(2, 16).Draw(rt, "N")
		n := rapid.IntRange(0, 3000).Draw(rt, "len")
		cfg := Config{PacketFloats: rapid.IntRange(1, 400).Draw(rt, "packet"), Mean: rapid.Bool().Draw(rt, "mean")}
		seed := rapid.Uint64().Draw(rt, "seed")
		inputs := make([][]float32, N)
		want := make([]float32, n)
		rng := rand.New(rand.NewPCG(seed, 1))
		for i := range inputs {
			inputs[i] = make([]float32, n)
			for j := range inputs[i] {
				inputs[i][j] = float32(rng.IntN(2001) - 1000)
				want[j] += inputs[i][j]
			}
		}
		if cfg.Mean {
			for j := range want {
				want[j] /= float32(N)
			}
		}
		out, _ := runRing(t, MemRing(N, 0, seed), cfg, n, 1, func(_, r int) []float32 { return append([]float32(nil), inputs[r]...) })
		for r := range N {
			for j := range n {
				if out[r][j] != want[j] {
					rt.Fatalf("rank %d element %d: %v, sequential %v", r, j, out[r][j], want[j])
				}
			}
		}
	})
}

// TestPropertyRealValues: with arbitrary float inputs the ring's sum is
// the sequential sum up to float32 rounding.
func TestPropertyRealValues(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		N := rapid.IntRange(2, 16).Draw(rt, "N")
		n := rapid.IntRange(1, 2000).Draw(rt, "len")
		cfg := Config{PacketFloats: rapid.IntRange(1, 300).Draw(rt, "packet")}
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "seed"), 2))
		inputs := make([][]float32, N)
		want := make([]float64, n)
		for i := range inputs {
			inputs[i] = make([]float32, n)
			for j := range inputs[i] {
				inputs[i][j] = float32(rng.NormFloat64())
				want[j] += float64(inputs[i][j])
			}
		}
		out, _ := runRing(t, MemRing(N, 0, 1), cfg, n, 1, func(_, r int) []float32 { return append([]float32(nil), inputs[r]...) })
		for r := range N {
			for j := range n {
				if math.Abs(float64(out[r][j])-want[j]) > 1e-5*float64(N)*4 {
					rt.Fatalf("rank %d element %d: %v, sequential %v", r, j, out[r][j], want[j])
				}
			}
		}
	})
}

// TestLossyUnbiased: when every rank's input is an independent, unbiased
// estimate of the same vector (data-parallel gradients), the loss-tolerant
// ring's result is an unbiased estimate of the sum: averaged over many
// calls at a 40 % discard rate it matches N*mu, where filling the gaps
// with zeros would come out about a third short.
func TestLossyUnbiased(t *testing.T) {
	const N, n, calls = 6, 600, 60
	for _, op := range []bool{false, true} {
		mean := make([]float64, n)
		ts := MemRing(N, 0.4, 9)
		rng := rand.New(rand.NewPCG(3, 4))
		var mu sync.Mutex
		gen := func(call, rank int) []float32 {
			mu.Lock()
			defer mu.Unlock()
			x := make([]float32, n)
			for j := range x {
				x[j] = float32(10 + rng.NormFloat64())
			}
			return x
		}
		ctx := context.Background()
		rings := make([]*Ring, N)
		for i := range rings {
			rings[i], _ = NewRing(i, N, ts[i], Config{PacketFloats: 20, Mean: op})
		}
		for range calls {
			var wg sync.WaitGroup
			outs := make([][]float32, N)
			for i := range N {
				outs[i] = gen(0, i)
				wg.Go(func() {
					if err := rings[i].Allreduce(ctx, outs[i]); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			for j := range n {
				mean[j] += float64(outs[0][j]) / calls
			}
		}
		want := 10.0
		if !op {
			want = 10 * N
		}
		avg := 0.0
		for _, v := range mean {
			avg += v / n
		}
		if math.Abs(avg-want) > 0.01*want {
			t.Fatalf("mean=%t: mean result %.3f, want %.1f (unbiased)", op, avg, want)
		}
		st := rings[0].Stats()
		if st.PacketsMissing == 0 || st.PacketsDropped == 0 {
			t.Fatalf("nothing was discarded: %+v", st)
		}
	}
}

// TestErrorFeedback: with error feedback, what a reduce-scatter hop
// discards is kept and sent with the next call, and the owner of a chunk
// divides by N: no contribution is lost or counted twice. Over T calls,
// the owners' results times N plus what is still kept add up to exactly T
// times every rank's input.
func TestErrorFeedback(t *testing.T) {
	const N, n, T = 4, 400, 6
	ts := MemRing(N, 0.5, 5)
	rings := make([]*Ring, N)
	for i := range rings {
		rings[i], _ = NewRing(i, N, ts[i], Config{PacketFloats: 10, Mean: true, ErrorFeedback: true})
	}
	total := make([]float64, n) // sum over calls of the owner's results, times N
	for call := range T {
		if call%2 == 1 {
			// A whole call in between (other data, as a model sync
			// is) is exact and leaves what the lossy calls kept alone.
			whole := make([][]float32, N)
			var wg sync.WaitGroup
			for i := range N {
				whole[i] = make([]float32, n)
				for j := range whole[i] {
					whole[i][j] = float32(100 * (i + 1))
				}
				wg.Go(func() {
					if err := rings[i].AllreduceWhole(context.Background(), whole[i]); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			for i := range N {
				for j, v := range whole[i] {
					if v != 250 {
						t.Fatalf("whole call, rank %d element %d: %v, want 250", i, j, v)
					}
				}
			}
		}
		out := make([][]float32, N)
		var wg sync.WaitGroup
		for i := range N {
			out[i] = make([]float32, n)
			for j := range out[i] {
				out[i][j] = 3
			}
			wg.Go(func() {
				if err := rings[i].Allreduce(context.Background(), out[i]); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for c := range N {
			owner := mod(c-1, N)
			lo, hi := rings[0].chunk(c)
			for e := lo; e < hi; e++ {
				total[e] += float64(out[owner][e]) * N
			}
		}
	}
	deferred := uint64(0)
	for s, r := range rings {
		deferred += r.Stats().Deferred
		for k, res := range r.resid {
			lo, _ := r.chunk(mod(s-k, N))
			for i, v := range res {
				total[lo+i] += float64(v)
			}
		}
	}
	if deferred == 0 {
		t.Fatal("nothing was kept for error feedback")
	}
	for e, v := range total {
		if v != T*N*3 {
			t.Fatalf("element %d: results and kept mass add up to %v, want %v", e, v, T*N*3)
		}
	}
}

func TestNewRingErrors(t *testing.T) {
	ts := MemRing(2, 0, 1)
	for _, tc := range []struct {
		rank, size int
		t          RingTransport
		cfg        Config
	}{
		{0, 0, ts[0], Config{}},
		{2, 2, ts[0], Config{}},
		{-1, 2, ts[0], Config{}},
		{0, 2, nil, Config{}},
		{0, 2, ts[0], Config{PacketFloats: -1}},
		{0, 2, ts[0], Config{Fill: -1}},
	} {
		if _, err := NewRing(tc.rank, tc.size, tc.t, tc.cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("NewRing(%d, %d, %+v) = %v, want ErrConfig", tc.rank, tc.size, tc.cfg, err)
		}
	}
	r, err := NewRing(0, 1, nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	x := []float32{1, 2}
	if err := r.Allreduce(context.Background(), x); err != nil || x[0] != 1 || x[1] != 2 {
		t.Fatalf("ring of one: %v %v", x, err)
	}
}

// badLink delivers one malformed stage.
type badLink struct{ st Received }

func (b badLink) Send(context.Context, [][]byte, int, int, bool) ([]bool, error) { return nil, nil }
func (b badLink) Recv(context.Context) (Received, error)                         { return b.st, nil }
func (b badLink) ReportQuality(context.Context, uint64, float64) error           { return nil }

func TestBadNeighbour(t *testing.T) {
	for name, st := range map[string]Received{
		"wrong packet count": {Packets: [][]byte{{1, 0, 0, 0}, {1, 0, 0, 0}}},
		"short packet":       {Packets: [][]byte{{1, 0}}},
		"zero count":         {Packets: [][]byte{{0, 0, 0, 0, 0, 0, 128, 63}}},
	} {
		r, _ := NewRing(0, 2, badLink{st}, Config{PacketFloats: 8})
		if err := r.Allreduce(context.Background(), []float32{1}); !errors.Is(err, ErrPeer) {
			t.Errorf("%s: %v, want ErrPeer", name, err)
		}
	}
}

// TestAllreduceWhole: a whole allreduce over a lossy transport discards
// nothing and leaves the stages of the last lossy call for ReportQuality.
func TestAllreduceWhole(t *testing.T) {
	const N, n = 4, 1000
	ts := MemRing(N, 0.5, 3)
	rings := make([]*Ring, N)
	for i := range rings {
		rings[i], _ = NewRing(i, N, ts[i], Config{PacketFloats: 16})
	}
	call := func(whole bool) [][]float32 {
		out := make([][]float32, N)
		var wg sync.WaitGroup
		for i := range N {
			out[i] = make([]float32, n)
			for j := range out[i] {
				out[i][j] = float32(i + j%7)
			}
			wg.Go(func() {
				var err error
				if whole {
					err = rings[i].AllreduceWhole(context.Background(), out[i])
				} else {
					err = rings[i].Allreduce(context.Background(), out[i])
				}
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		return out
	}
	call(false)
	stages := append([]uint64(nil), rings[1].Stages()...)
	dropped := rings[1].Stats().PacketsDropped
	out := call(true)
	for r := range N {
		for j := range n {
			if want := float32(6 + 4*(j%7)); out[r][j] != want {
				t.Fatalf("rank %d element %d: %v, want %v", r, j, out[r][j], want)
			}
		}
	}
	if rings[1].Stats().PacketsDropped != dropped || len(stages) != 1 || rings[1].Stages()[0] != stages[0] {
		t.Fatalf("whole call dropped packets or changed the stages: %v -> %v", stages, rings[1].Stages())
	}
}
