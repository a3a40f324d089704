package train

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// TestCNNGradientCheck compares Gradient with central finite differences
// of Loss on every parameter of a small CNN (dense inputs, so that no
// pooling cell holds a tie).
func TestCNNGradientCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	m, err := NewCNN(CNNConfig{C1: 2, C2: 3}, rng)
	if err != nil {
		t.Fatal(err)
	}
	p := m.Params()
	if len(p) != 2*9+2+3*2*9+3+3*49*NumClasses+NumClasses {
		t.Fatalf("%d parameters", len(p))
	}
	for i := range p {
		p[i] += 0.05 * rng.NormFloat64()
	}
	if err := m.SetParams(p); err != nil {
		t.Fatal(err)
	}
	ds := Dataset{X: make([]float64, 4*ImageSize), Y: []uint8{3, 7, 0, 9}, N: 4}
	for i := range ds.X {
		ds.X[i] = rng.Float64()
	}
	idx := []int{2, 0, 3, 2}
	grad := make([]float32, m.NumParams())
	loss := m.Gradient(ds, idx, grad)
	if want := m.Loss(ds, idx); math.Abs(loss-want) > 1e-12*want {
		t.Fatalf("Gradient returned loss %v, Loss says %v", loss, want)
	}
	finiteDiff(t, m.params, func() float64 { return m.Loss(ds, idx) }, grad)
}

// TestCNNLearns: SGD on the lit-block data drives the loss down and the
// accuracy up; a clone is independent of its original.
func TestCNNLearns(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	ds := blocks(300, rng)
	m, _ := NewCNN(CNNConfig{C1: 4, C2: 4}, rng)
	all := make([]int, ds.N)
	for i := range all {
		all[i] = i
	}
	start := m.Loss(ds, all)
	before := m.Clone()
	grad := make([]float32, m.NumParams())
	batch := make([]int, 16)
	for range 150 {
		for i := range batch {
			batch[i] = rng.IntN(ds.N)
		}
		m.Gradient(ds, batch, grad)
		m.Step(grad, 0.05)
	}
	end, acc := m.Loss(ds, all), m.Accuracy(ds)
	if end > start/4 || acc < 0.95 {
		t.Fatalf("loss %v -> %v, accuracy %v after 150 steps, want loss / 4 and accuracy >= 0.95", start, end, acc)
	}
	if l := before.Loss(ds, all); l != start {
		t.Fatalf("the clone changed with its original: loss %v, was %v", l, start)
	}
}

func TestCNNConfigErrors(t *testing.T) {
	for _, c := range []CNNConfig{{C1: -1}, {C2: 65}} {
		if _, err := NewCNN(c, rand.New(rand.NewPCG(1, 1))); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", c, err)
		}
	}
	m, _ := NewCNN(CNNConfig{}, rand.New(rand.NewPCG(1, 1)))
	if err := m.SetParams(make([]float64, 3)); !errors.Is(err, ErrConfig) {
		t.Fatalf("SetParams of 3 values: %v", err)
	}
	if _, err := (Options{Model: "rnn"}).validate(); !errors.Is(err, ErrConfig) {
		t.Fatalf("Model rnn: %v", err)
	}
}
