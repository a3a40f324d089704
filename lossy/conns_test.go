package lossy

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/internal/topo"
	"github.com/multirail/multirail/lossy/discard"
)

// loopRing connects n ranks in a ring over real multirail connections of
// two loopback rails each: out[i] is rank i's connection to rank i+1,
// in[i] its connection from rank i-1.
func loopRing(t *testing.T, n int) (out, in []*multirail.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := topo.NewRing(ctx, n, func(int) topo.PairConfig {
		return topo.PairConfig{Rails: []emu.Spec{{Kind: emu.KindLoop}, {Kind: emu.KindLoop}}, CloseListener: true}
	})
	if err != nil {
		t.Fatal(err)
	}
	return r.Out, r.In
}

func randomInputs(N, n int, seed uint64) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 0))
	xs := make([][]float32, N)
	for i := range xs {
		xs[i] = make([]float32, n)
		for j := range xs[i] {
			xs[i][j] = float32(rng.NormFloat64())
		}
	}
	return xs
}

// ringOverConns runs calls Allreduces over real connections, reporting a
// quality after each, and returns the last results and the stage conns.
func ringOverConns(t *testing.T, N, n, calls int, lossy bool, dc discard.Config, inputs [][]float32) ([][]float32, []*StageConn) {
	out, in := loopRing(t, N)
	ts := make([]RingTransport, N)
	var scs []*StageConn
	if lossy {
		so, si := make([]*StageConn, N), make([]*StageConn, N)
		for i := range N {
			var err error
			if so[i], err = NewStageConn(out[i], StageConfig{Discard: dc, Seed: uint64(i)}); err != nil {
				t.Fatal(err)
			}
			if si[i], err = NewStageConn(in[i], StageConfig{Discard: dc}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range N {
			ts[i] = StageLink{Next: so[i], Prev: si[i]}
		}
		scs = so
		t.Cleanup(func() {
			for i := range N {
				so[i].Close()
				si[i].Close()
			}
		})
	} else {
		for i := range N {
			ts[i] = &ConnLink{Next: out[i], Prev: in[i]}
		}
		t.Cleanup(func() {
			for i := range N {
				out[i].Close()
				in[i].Close()
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rings := make([]*Ring, N)
	for i := range N {
		rings[i], _ = NewRing(i, N, ts[i], Config{PacketFloats: 256})
	}
	res := make([][]float32, N)
	for call := range calls {
		var wg sync.WaitGroup
		errs := make([]error, N)
		for i := range N {
			res[i] = append([]float32(nil), inputs[i]...)
			wg.Go(func() {
				if errs[i] = rings[i].Allreduce(ctx, res[i]); errs[i] == nil {
					errs[i] = rings[i].ReportQuality(ctx, float64(call))
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("call %d rank %d: %v", call, i, err)
			}
		}
	}
	return res, scs
}

// TestRateZeroBitForBit: the loss-tolerant ring over StageConns whose rate
// stays 0 gives the reliable ring's results bit for bit, on every rank.
func TestRateZeroBitForBit(t *testing.T) {
	const N, n = 3, 5000
	inputs := randomInputs(N, n, 11)
	rel, _ := ringOverConns(t, N, n, 2, false, discard.Config{}, inputs)
	// Initial 0 and a delay threshold no period reaches: nothing is
	// ever discarded.
	lt, scs := ringOverConns(t, N, n, 2, true, discard.Config{DelayThreshold: 1e9}, inputs)
	for r := range N {
		for j := range n {
			if math.Float32bits(rel[r][j]) != math.Float32bits(lt[r][j]) {
				t.Fatalf("rank %d element %d: reliable %v, loss-tolerant %v", r, j, rel[r][j], lt[r][j])
			}
		}
	}
	for _, s := range scs {
		if st := s.Stats(); st.PacketsDropped != 0 || st.StagesSent != 2 {
			t.Fatalf("stats %+v", st)
		}
	}
}

// TestLossyOverConns: with a rate the controller reaches from the
// receivers' feedback, stages lose packets and the results stay close to
// the exact sum.
func TestLossyOverConns(t *testing.T) {
	const N, n = 3, 8000
	inputs := randomInputs(N, n, 12)
	exact := make([]float64, n)
	for _, x := range inputs {
		for j, v := range x {
			exact[j] += float64(v)
		}
	}
	// Rp = 0.3 from the first feedback on; quality (the call number) only
	// grows, so the rate never goes down, and no period may raise it.
	lt, scs := ringOverConns(t, N, n, 4, true, discard.Config{Initial: 0.3, DelayThreshold: 1e9}, inputs)
	dropped := uint64(0)
	for _, s := range scs {
		st := s.Stats()
		dropped += st.PacketsDropped
		if st.Controller.Applied == 0 {
			t.Fatalf("no feedback applied: %+v", st.Controller)
		}
	}
	if dropped == 0 {
		t.Fatal("nothing discarded at rate 0.3")
	}
	// The estimate differs from the exact sum, but not by more than the
	// inputs' spread allows.
	var se float64
	for j := range n {
		d := float64(lt[0][j]) - exact[j]
		se += d * d
	}
	if rmse := math.Sqrt(se / n); rmse > 3 {
		t.Fatalf("RMS error %.2f against the exact sum", rmse)
	}
}
