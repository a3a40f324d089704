package train

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/comm"
	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/lossy/discard"
)

// smallData is a subset of MNIST, enough for short runs.
func smallData(t *testing.T) (*Dataset, *Dataset) {
	t.Helper()
	dir, err := MNISTDir()
	if err != nil {
		t.Skipf("MNIST data not found: %v", err)
	}
	tr, te, err := LoadMNIST(dir)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	a := tr.Subset(rng.Perm(tr.N)[:8000])
	b := te.Subset(rng.Perm(te.N)[:2000])
	return &a, &b
}

func TestOptionsErrors(t *testing.T) {
	bad := []Options{
		{Workers: 1}, {Workers: 17}, {Steps: -1}, {Batch: 5000}, {LR: -1},
		{Modes: []Mode{"fast"}}, {Target: 1.5}, {EvalEvery: -2},
		{Rails: []emu.Spec{{Kind: emu.KindTCP}}}, {Rails: []emu.Spec{}},
		{Congestion: Congestion{Min: 0.9, Max: 0.5}}, {Congestion: Congestion{Busy: time.Hour}},
		{Discard: discard.Config{History: 1}}, {MLP: MLPConfig{Hidden: []int{0}}},
		{QualitySmoothing: 2}, {PacketFloats: -1},
		{StepTime: -time.Millisecond}, {StepTime: MaxStepTime + 1}, {Targets: []float64{0.5, 1}}, {Targets: []float64{0}},
	}
	for _, o := range bad {
		if _, err := o.validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", o, err)
		}
	}
	if _, err := Run(context.Background(), Options{Workers: 1}); !errors.Is(err, ErrConfig) {
		t.Fatalf("Run with 1 worker: %v", err)
	}
}

// TestRateZeroSameTraining: a loss-tolerant exchange that discards
// nothing trains exactly as the reliable one, step for step.
func TestRateZeroSameTraining(t *testing.T) {
	tr, te := smallData(t)
	zero := 0.0
	res, err := Run(context.Background(), Options{Workers: 3, Steps: 40, EvalEvery: 20, Train: tr, Test: te, memRate: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Mode != Reliable || res[1].Mode != LossTolerant {
		t.Fatalf("results %+v", res)
	}
	for i := range res[0].Losses {
		if res[0].Losses[i] != res[1].Losses[i] {
			t.Fatalf("step %d: loss %v reliable, %v loss-tolerant", i, res[0].Losses[i], res[1].Losses[i])
		}
	}
	if res[0].FinalAccuracy != res[1].FinalAccuracy || res[0].FinalAccuracy < 0.5 {
		t.Fatalf("final accuracy %v and %v", res[0].FinalAccuracy, res[1].FinalAccuracy)
	}
}

// TestRunOverRails: both modes over real multirail connections and
// emulated, congested rails: the reliable mode discards nothing and its
// replicas stay identical; the loss-tolerant mode's controllers get every
// stage's feedback and keep the rate within [0, Max]; the curve and the
// per-step series are complete.
func TestRunOverRails(t *testing.T) {
	tr, te := smallData(t)
	specs, err := emu.ParseSpecs("emu:400mbit,emu:200mbit")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Workers: 3, Steps: 30, EvalEvery: 10, Train: tr, Test: te, Rails: specs,
		Discard: discard.Config{Initial: 0.3, Max: 0.4}, Allreduce: AllreduceRing}
	var progress int
	o.Progress = func(p Progress) { progress = p.Step }
	// Observe sees every link of each mode's ring while it runs.
	var observed, done []string
	var omu sync.Mutex
	o.Observe = func(c *multirail.Conn, name string) func() {
		omu.Lock()
		defer omu.Unlock()
		if len(c.Stats().Rails) != 2 {
			t.Errorf("observed link %s has %d rails", name, len(c.Stats().Rails))
		}
		observed = append(observed, name)
		return func() { omu.Lock(); done = append(done, name); omu.Unlock() }
	}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(observed, ",") != "0,1,2,0,1,2" || len(done) != 6 {
		t.Fatalf("Observe saw links %v, done %v; want 0,1,2 for each of the two modes, all done", observed, done)
	}
	rel, lt := res[0], res[1]
	if rel.MeanDiscardRate != 0 || rel.ReplicaSpread != 0 {
		t.Fatalf("reliable: discard %v, replica spread %v", rel.MeanDiscardRate, rel.ReplicaSpread)
	}
	if lt.MeanDiscardRate <= 0 || lt.MeanDiscardRate > 0.4+0.05 {
		t.Fatalf("loss-tolerant mean discard %v, want in (0, 0.4]", lt.MeanDiscardRate)
	}
	// The last step re-synchronises the replicas exactly.
	if lt.ReplicaSpread != 0 {
		t.Fatalf("loss-tolerant replicas differ by %v after the final sync", lt.ReplicaSpread)
	}
	c := lt.Controller
	// Every stage but the last few (whose feedback may still be on its
	// way when the run ends) was applied.
	if c == nil || c.Stages != 3*30 || c.Applied < c.Stages-3*2 || c.Unknown != 0 || c.Invalid != 0 {
		t.Fatalf("controllers %+v", c)
	}
	for _, r := range res {
		if len(r.Curve) != 4 || r.Curve[3].Step != 30 || len(r.DiscardRates) != 30 || len(r.Losses) != 30 || r.Wall <= 0 {
			t.Fatalf("%s: curve %+v, %d rates, %d losses", r.Mode, r.Curve, len(r.DiscardRates), len(r.Losses))
		}
	}
	if progress != 30 {
		t.Fatalf("last progress step %d", progress)
	}
}

// TestRunInProcessTranspose: by default Run's workers each run through a
// communicator of their own (the per-process path, in one process): the
// reliable mode's replicas stay identical, the loss-tolerant mode
// discards within [0, Max] and ends with identical replicas after the
// final sync, the curve and series are complete, progress comes from
// rank 0, and ObserveComm sees rank 0's communicator once per mode. A
// phases load with PhaseRates (the oracle) works in process.
func TestRunInProcessTranspose(t *testing.T) {
	tr, te := smallData(t)
	specs, err := emu.ParseSpecs("emu:400mbit,emu:200mbit")
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	o := Options{Workers: 3, Steps: 30, EvalEvery: 10, Train: tr, Test: te, Rails: specs,
		Discard: discard.Config{Initial: 0.3, Max: 0.4}, Congestion: Congestion{Off: true},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	var progress atomic.Int64
	o.Progress = func(p Progress) { progress.Store(int64(p.Step)) }
	var observed, done atomic.Int64
	o.ObserveComm = func(c *comm.Comm) func() {
		if c.Rank() != 0 || c.Size() != 3 {
			t.Errorf("observed rank %d of %d", c.Rank(), c.Size())
		}
		observed.Add(1)
		return func() { done.Add(1) }
	}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if observed.Load() != 1 || done.Load() != 1 {
		t.Fatalf("ObserveComm called %d times, done %d", observed.Load(), done.Load())
	}
	// Closing the communicators is not news.
	if strings.Contains(logs.String(), "ended") {
		t.Fatalf("warnings as the run closed:\n%s", logs.String())
	}
	rel, lt := res[0], res[1]
	if rel.MeanDiscardRate != 0 || rel.ReplicaSpread != 0 {
		t.Fatalf("reliable: discard %v, replica spread %v", rel.MeanDiscardRate, rel.ReplicaSpread)
	}
	if lt.MeanDiscardRate <= 0 || lt.MeanDiscardRate > 0.4+0.05 || lt.ReplicaSpread != 0 {
		t.Fatalf("loss-tolerant: mean discard %v (want in (0, 0.4]), replica spread %v", lt.MeanDiscardRate, lt.ReplicaSpread)
	}
	for _, r := range res {
		if len(r.Curve) != 4 || r.Curve[3].Step != 30 || len(r.DiscardRates) != 30 || len(r.Losses) != 30 || r.Wall <= 0 || len(r.Targets) != 2 {
			t.Fatalf("%s: curve %+v, %d rates, %d losses, targets %+v", r.Mode, r.Curve, len(r.DiscardRates), len(r.Losses), r.Targets)
		}
	}
	if progress.Load() != 30 {
		t.Fatalf("last progress step %d", progress.Load())
	}
	// The oracle, in process: 0.05 in calm phases and 0.5 in congested
	// ones of a short phases load.
	o = Options{Workers: 2, Steps: 40, EvalEvery: 20, Train: tr, Test: te, Rails: specs, Modes: []Mode{LossTolerant},
		Congestion: Congestion{Phases: true, Calm: 150 * time.Millisecond, Congested: 150 * time.Millisecond}, PhaseRates: PhaseRates{Calm: 0.05, Congested: 0.5}}
	res, err = Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	pd := res[0].PhaseDiscard
	// A step across a phase boundary mixes the two rates (each rank
	// pins by its own clock): the bounds leave room for that.
	if pd == nil || pd.CalmSteps == 0 || pd.CongestedSteps == 0 || pd.Calm > 0.2 || pd.Congested < 0.35 || pd.Congested > 0.6 || pd.CalmStep <= 0 || pd.CongestedStep <= 0 {
		t.Fatalf("oracle in process: phase discard %+v", pd)
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
