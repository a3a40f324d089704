package train

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multirail/multirail/comm"
	"github.com/multirail/multirail/lossy"
	"github.com/multirail/multirail/lossy/discard"
)

// TestRunRank: three workers, each a rank of a communicator (in one
// process here; `multirail train --per-process` runs them as processes),
// train both modes on a non-IID split. The reliable mode keeps the
// replicas identical; the loss-tolerant one discards packets (the
// controller starts at 0.3), and both learn.
func TestRunRank(t *testing.T) {
	tr, te := smallData(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := comm.NewLocal(ctx, 3, comm.Config{Stage: lossy.StageConfig{Discard: discard.Config{Initial: 0.3, Max: 0.5}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range cs {
			_ = c.Close()
		}
	}()
	o := Options{Steps: 120, EvalEvery: 40, Train: tr, Test: te, Partition: Partition{Kind: PartitionShards, K: 4}}
	res := make([][]Result, len(cs))
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { res[i], errs[i] = RunRank(ctx, c, o) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	r := res[0]
	if len(r) != 2 || r[0].Mode != Reliable || r[1].Mode != LossTolerant {
		t.Fatalf("modes: %+v", r)
	}
	if r[0].ReplicaSpread != 0 || r[0].MeanDiscardRate != 0 {
		t.Fatalf("reliable: spread %v, discard %v; want 0 and 0", r[0].ReplicaSpread, r[0].MeanDiscardRate)
	}
	if r[1].MeanDiscardRate <= 0.05 {
		t.Fatalf("losstolerant discarded %.3f of its packets; the controller starts at 0.3", r[1].MeanDiscardRate)
	}
	for _, m := range r {
		if len(m.Curve) != 4 || m.FinalAccuracy < 0.6 {
			t.Fatalf("%s: curve %+v, final accuracy %.3f (want 4 checkpoints and >= 0.6)", m.Mode, m.Curve, m.FinalAccuracy)
		}
	}
	if len(res[1][0].Curve) != 0 {
		t.Fatal("rank 1 evaluated too")
	}
}

func TestRunRankErrors(t *testing.T) {
	ctx := context.Background()
	cs, err := comm.NewLocal(ctx, 1, comm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs[0].Close()
	if _, err := RunRank(ctx, cs[0], Options{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("one rank: %v", err)
	}
	if _, err := RunRank(ctx, cs[0], Options{Workers: 4}); !errors.Is(err, ErrConfig) {
		t.Fatalf("Workers 4 on 1 rank: %v", err)
	}
	two, err := comm.NewLocal(ctx, 2, comm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range two {
			c.Close()
		}
	}()
	// The oracle needs a phases load to follow; checked before any step.
	if _, err := RunRank(ctx, two[0], Options{PhaseRates: PhaseRates{Calm: 0.05, Congested: 0.6}}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "phases") {
		t.Fatalf("PhaseRates without a phases load: %v", err)
	}
	for _, pr := range []PhaseRates{{Calm: 0, Congested: 0.5}, {Calm: 0.1, Congested: 1}} {
		if _, err := RunRank(ctx, two[0], Options{PhaseRates: pr}); !errors.Is(err, ErrConfig) {
			t.Fatalf("PhaseRates %v: %v", pr, err)
		}
	}
	if _, err := Run(ctx, Options{PhaseRates: PhaseRates{Calm: 0.05, Congested: 0.6}, Steps: 1}); !errors.Is(err, ErrConfig) {
		t.Fatalf("PhaseRates in one process: %v", err)
	}
}
