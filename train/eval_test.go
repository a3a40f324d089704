package train

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"
)

// fakeModel's accuracy is its first parameter: evaluate's bookkeeping
// without a network.
type fakeModel struct{ p []float64 }

func (m *fakeModel) NumParams() int                             { return len(m.p) }
func (m *fakeModel) Params() []float64                          { return slices.Clone(m.p) }
func (m *fakeModel) SetParams(p []float64) error                { m.p = slices.Clone(p); return nil }
func (m *fakeModel) Gradient(Dataset, []int, []float32) float64 { return 0 }
func (m *fakeModel) Step([]float32, float64)                    {}
func (m *fakeModel) Accuracy(Dataset) float64                   { return m.p[0] }
func (m *fakeModel) CloneModel() Model                          { return &fakeModel{p: slices.Clone(m.p)} }

// TestEvaluateTargets: each target is the first checkpoint at or above
// it (not a later or an earlier one, even where accuracy dips again);
// every checkpoint is evaluated until the last target (GOMAXPROCS at a
// time), then one per 10 steps and the last; TimeToTarget is Target's entry.
func TestEvaluateTargets(t *testing.T) {
	accs := []float64{0.1, 0.5, 0.87, 0.885, 0.86, 0.89, 0.91, 0.89, 0.92, 0.93, 0.93, 0.94, 0.95, 0.95, 0.96, 0.96, 0.97, 0.97}
	var snaps []snapshot
	for k, a := range accs {
		snaps = append(snaps, snapshot{step: 2 * k, t: time.Duration(k) * time.Second, params: []float32{float32(a)}})
	}
	res := Result{TargetAccuracy: 0.9}
	if err := res.evaluate(&fakeModel{p: []float64{0}}, snaps, Dataset{}, []float64{0.88, 0.9, 0.99}, 2); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		acc  float64
		step int
	}{{0.88, 6}, {0.9, 12}}
	for i, w := range want {
		r := res.Targets[i]
		if r.Accuracy != w.acc || r.Steps == nil || *r.Steps != w.step || *r.Time != float64(w.step/2) {
			t.Fatalf("target %v: %+v, want step %d", w.acc, r, w.step)
		}
	}
	if r := res.Targets[2]; r.Time != nil || r.Steps != nil {
		t.Fatalf("0.99 was never reached: %+v", r)
	}
	if res.TimeToTarget == nil || *res.StepsToTarget != 12 {
		t.Fatalf("TimeToTarget %v", res.TimeToTarget)
	}
	// 0.99 is never reached: every checkpoint is evaluated.
	if len(res.Curve) != len(accs) || res.FinalAccuracy != float64(float32(0.97)) {
		t.Fatalf("curve of %d points, final %v", len(res.Curve), res.FinalAccuracy)
	}
	// With the targets reached by step 12, later checkpoints thin out to
	// one per 10 steps plus the last.
	res = Result{TargetAccuracy: 0.9}
	if err := res.evaluate(&fakeModel{p: []float64{0}}, snaps, Dataset{}, []float64{0.88, 0.9}, 2); err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, p := range res.Curve {
		steps = append(steps, p.Step)
	}
	if !slices.Equal(steps[:7], []int{0, 2, 4, 6, 8, 10, 12}) || steps[len(steps)-1] != 34 {
		t.Fatalf("evaluated steps %v", steps)
	}
	// Checkpoints are evaluated GOMAXPROCS at a time: the batch that
	// reached the last target may hold a few more.
	extra := 0
	for _, s := range steps[7 : len(steps)-1] {
		if s%10 != 0 {
			extra++
		}
	}
	if extra >= runtime.GOMAXPROCS(0) || len(steps) > 7+runtime.GOMAXPROCS(0)+3 {
		t.Fatalf("after the targets, evaluated steps %v (want one per 10 steps and the last)", steps)
	}
}

// TestAverageSnapshots: the evaluated losstolerant model is the mean of
// the replicas, checkpoint by checkpoint.
func TestAverageSnapshots(t *testing.T) {
	all := [][]snapshot{
		{{step: 0, params: []float32{1, 2}}, {step: 2, t: time.Second, params: []float32{3, 4}}},
		{{step: 0, params: []float32{3, 2}}, {step: 2, params: []float32{5, 0}}},
		{{step: 0, params: []float32{2, 2}}, {step: 2, params: []float32{4, -1}}},
	}
	got := average(all)
	if !slices.Equal(got[0].params, []float32{2, 2}) || !slices.Equal(got[1].params, []float32{4, 1}) || got[1].t != time.Second || got[1].step != 2 {
		t.Fatalf("average: %+v", got)
	}
}

// TestStepTimePads: with StepTime every step lasts at least that long
// (the sleep pads the computation; the exchange comes on top), and the
// learning rate stays constant without Decay: two runs that differ only
// in Decay end apart, and a run of StepTime 0 trains exactly as one
// with a StepTime (the padding changes timing, not the arithmetic).
func TestStepTimePads(t *testing.T) {
	tr, te := smallData(t)
	zero := 0.0
	base := Options{Workers: 2, Steps: 10, EvalEvery: 5, Train: tr, Test: te, memRate: &zero, Modes: []Mode{Reliable}}
	padded := base
	padded.StepTime = 30 * time.Millisecond
	a, err := Run(context.Background(), padded)
	if err != nil {
		t.Fatal(err)
	}
	if a[0].MeanStep < padded.StepTime.Seconds() {
		t.Fatalf("mean step %.1f ms with StepTime %v", 1000*a[0].MeanStep, padded.StepTime)
	}
	b, err := Run(context.Background(), base)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a[0].Losses, b[0].Losses) || a[0].FinalAccuracy != b[0].FinalAccuracy {
		t.Fatalf("padding changed the training: losses %v against %v", a[0].Losses, b[0].Losses)
	}
	decay := base
	decay.Decay = true
	decay.Steps = 10
	c, err := Run(context.Background(), decay)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(b[0].Losses, c[0].Losses) {
		t.Fatal("Decay changed nothing: the learning rate did not fall")
	}
}
