package train

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

func TestMLPConfigValidate(t *testing.T) {
	for _, c := range []struct {
		hidden []int
		want   string // "" for valid, else a substring of the error
	}{
		{nil, ""},
		{[]int{}, ""},
		{[]int{128}, ""},
		{[]int{1}, ""},
		{[]int{4096}, ""},
		{[]int{1, 2, 3, 4}, ""},
		{[]int{0}, "MLPConfig.Hidden[0] = 0, allowed 1..4096"},
		{[]int{-5}, "MLPConfig.Hidden[0] = -5, allowed 1..4096"},
		{[]int{4097}, "MLPConfig.Hidden[0] = 4097, allowed 1..4096"},
		{[]int{128, 0}, "MLPConfig.Hidden[1] = 0, allowed 1..4096"},
		{[]int{1, 2, 3, 4, 5}, "MLPConfig.Hidden = [1 2 3 4 5] has 5 layers, allowed 0..4"},
	} {
		cfg := MLPConfig{Hidden: c.hidden}
		err := cfg.validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("validate(%v) = %v, want valid", c.hidden, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrConfig)):
			t.Errorf("validate(%v) = %v, want error containing %q", c.hidden, err, c.want)
		}
		// NewMLP must agree with validate.
		m, nerr := NewMLP(cfg, rand.New(rand.NewPCG(1, 2)))
		if (nerr == nil) != (err == nil) || (m == nil) == (nerr == nil) {
			t.Errorf("NewMLP(%v) = %v, %v; validate says %v", c.hidden, m != nil, nerr, err)
		}
	}
	if _, err := NewMLP(MLPConfig{}, nil); err == nil || !strings.Contains(err.Error(), "rng = nil") {
		t.Errorf("NewMLP with nil rng: %v, want an error naming rng", err)
	}
}

func TestNumParamsAndLayout(t *testing.T) {
	for _, c := range []struct {
		hidden []int
		want   int
	}{
		{nil, 784*128 + 128 + 128*10 + 10},
		{[]int{5, 4}, 784*5 + 5 + 5*4 + 4 + 4*10 + 10},
	} {
		m, err := NewMLP(MLPConfig{Hidden: c.hidden}, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatal(err)
		}
		if m.NumParams() != c.want || len(m.Params()) != c.want {
			t.Errorf("hidden %v: NumParams %d, len(Params) %d, want %d", c.hidden, m.NumParams(), len(m.Params()), c.want)
		}
	}
	// The layout: per layer W (in×out, row-major) then b. Setting one
	// weight of the last layer moves exactly the logit it should.
	m, _ := NewMLP(MLPConfig{Hidden: []int{3}}, rand.New(rand.NewPCG(1, 2)))
	p := make([]float64, m.NumParams())
	off := 784*3 + 3 // start of layer 1's W (3×10)
	p[784*0+1] = 1   // W0[0][1]: input pixel 0 -> hidden unit 1
	p[off+1*10+7] = 2
	p[off+30+4] = 0.5 // b1[4]
	if err := m.SetParams(p); err != nil {
		t.Fatal(err)
	}
	d := Dataset{X: make([]float64, ImageSize), Y: []uint8{7}, N: 1}
	d.X[0] = 1 // hidden 1 = 1, logit 7 = 2, logit 4 = 0.5, others 0
	m.Loss(d, []int{0})
	probs := m.act[1][:10]
	z := []float64{0, 0, 0, 0, 0.5, 0, 0, 2, 0, 0}
	s := 0.0
	for _, v := range z {
		s += math.Exp(v)
	}
	for o, v := range z {
		if want := math.Exp(v) / s; math.Abs(probs[o]-want) > 1e-15 {
			t.Fatalf("probability of %d = %v, want %v (layout mismatch)", o, probs[o], want)
		}
	}
}

func TestNewMLPDeterministic(t *testing.T) {
	a, _ := NewMLP(MLPConfig{}, rand.New(rand.NewPCG(7, 7)))
	b, _ := NewMLP(MLPConfig{}, rand.New(rand.NewPCG(7, 7)))
	c, _ := NewMLP(MLPConfig{}, rand.New(rand.NewPCG(7, 8)))
	pa, pb, pc := a.Params(), b.Params(), c.Params()
	same := 0
	for i := range pa {
		if pa[i] != pb[i] {
			t.Fatalf("same seed, param %d: %v != %v", i, pa[i], pb[i])
		}
		if pa[i] == pc[i] {
			same++
		}
	}
	if same > 300 { // the biases are zero in both
		t.Fatalf("different seeds share %d parameters", same)
	}
	// He init: layer 0 weights have std sqrt(2/784), biases 0.
	w := pa[:784*128]
	var s2 float64
	for _, v := range w {
		s2 += v * v
	}
	if std, want := math.Sqrt(s2/float64(len(w))), math.Sqrt(2.0/784); math.Abs(std/want-1) > 0.02 {
		t.Errorf("layer 0 weight std %v, want %v", std, want)
	}
	for _, v := range pa[784*128 : 784*128+128] {
		if v != 0 {
			t.Fatalf("initial bias %v, want 0", v)
		}
	}
}

// randomData returns n samples with pixels in [0,1], about half of them
// zero (MNIST is sparse, and the products skip zeros), and random labels.
func randomData(n int, rng *rand.Rand) Dataset {
	d := Dataset{X: make([]float64, n*ImageSize), Y: make([]uint8, n), N: n}
	for i := range d.X {
		if rng.IntN(2) == 0 {
			d.X[i] = rng.Float64()
		}
	}
	for i := range d.Y {
		d.Y[i] = uint8(rng.IntN(NumClasses))
	}
	return d
}

// TestGradientCheck compares Gradient with central finite differences of
// Loss on every parameter of small networks.
func TestGradientCheck(t *testing.T) {
	for _, hidden := range [][]int{{5}, {6, 4}, {3, 4, 3, 5}} {
		t.Run(fmt.Sprint(hidden), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, uint64(len(hidden))))
			m, err := NewMLP(MLPConfig{Hidden: hidden}, rng)
			if err != nil {
				t.Fatal(err)
			}
			// Non-zero biases, so their gradients and the ReLU masks are
			// exercised away from the initial point.
			p := m.Params()
			for i := range p {
				p[i] += 0.05 * rng.NormFloat64()
			}
			m.SetParams(p)
			ds := randomData(8, rng)
			idx := []int{3, 0, 7, 3, 5, 1} // a repeat, a subset
			grad := make([]float32, m.NumParams())
			loss := m.Gradient(ds, idx, grad)
			if want := m.Loss(ds, idx); math.Abs(loss-want) > 1e-12*want {
				t.Fatalf("Gradient returned loss %v, Loss says %v", loss, want)
			}
			finiteDiff(t, m.params, func() float64 { return m.Loss(ds, idx) }, grad)
		})
	}
}

// finiteDiff compares grad with central finite differences of loss over
// every entry of params (the model's own slice, perturbed in place and
// restored): at most 1e-6 relative error overall and 1e-4 on any entry.
func finiteDiff(t *testing.T, params []float64, loss func() float64, grad []float32) {
	t.Helper()
	const h = 1e-5
	var diff2, norm2, worst float64
	worstAt := -1
	for j := range params {
		orig := params[j]
		params[j] = orig + h
		lp := loss()
		params[j] = orig - h
		lm := loss()
		params[j] = orig
		num, got := (lp-lm)/(2*h), float64(grad[j])
		diff2 += (num - got) * (num - got)
		norm2 += num*num + got*got
		if e := math.Abs(num-got) / max(math.Abs(num)+math.Abs(got), 1e-4); e > worst {
			worst, worstAt = e, j
		}
	}
	rel := math.Sqrt(diff2 / norm2)
	t.Logf("%d params: relative error %.2g overall, %.2g worst (param %d)", len(params), rel, worst, worstAt)
	if rel > 1e-6 || worst > 1e-4 {
		t.Fatalf("gradient mismatch: relative error %.3g overall (want <= 1e-6), %.3g at param %d (want <= 1e-4)", rel, worst, worstAt)
	}
}

func TestLossChunked(t *testing.T) {
	// Loss runs evalBatch samples at a time; Gradient one batch. They must
	// agree on a batch spanning several chunks.
	rng := rand.New(rand.NewPCG(5, 5))
	m, _ := NewMLP(MLPConfig{Hidden: []int{16}}, rng)
	ds := randomData(2*evalBatch+37, rng)
	idx := rng.Perm(ds.N)
	grad := make([]float32, m.NumParams())
	g := m.Gradient(ds, idx, grad)
	l := m.Loss(ds, idx)
	if math.Abs(g-l) > 1e-12*l {
		t.Fatalf("Loss %v over %d samples, Gradient's loss %v", l, len(idx), g)
	}
	// Untrained, the loss is near ln 10.
	if math.Abs(l-math.Log(10)) > 1.5 {
		t.Fatalf("initial loss %v, want near ln 10 = %v", l, math.Log(10))
	}
}

func TestAccuracy(t *testing.T) {
	// With zero weights and a bias favouring digit 3, the network says 3
	// for everything: accuracy is the share of 3s. N spans several chunks.
	ds := numbered(2*evalBatch + 45)
	for i := range ds.X {
		ds.X[i] = 0.5
	}
	for i := range ds.Y {
		ds.Y[i] = uint8(i % 7)
	}
	m, _ := NewMLP(MLPConfig{Hidden: []int{4}}, rand.New(rand.NewPCG(1, 1)))
	p := make([]float64, m.NumParams())
	p[len(p)-10+3] = 1
	m.SetParams(p)
	threes := 0
	for _, y := range ds.Y {
		if y == 3 {
			threes++
		}
	}
	if got, want := m.Accuracy(ds), float64(threes)/float64(ds.N); got != want {
		t.Fatalf("Accuracy %v, want %v", got, want)
	}
	// Ties (all logits zero) go to digit 0.
	m.SetParams(make([]float64, m.NumParams()))
	zeros := 0
	for _, y := range ds.Y {
		if y == 0 {
			zeros++
		}
	}
	if got, want := m.Accuracy(ds), float64(zeros)/float64(ds.N); got != want {
		t.Fatalf("Accuracy with all-equal logits %v, want %v", got, want)
	}
}

func TestParamsSetParamsClone(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	m, _ := NewMLP(MLPConfig{Hidden: []int{8}}, rng)
	p := m.Params()
	p[0] = 42
	if m.Params()[0] == 42 {
		t.Fatal("Params returned the parameters themselves, want a copy")
	}
	if err := m.SetParams(p); err != nil {
		t.Fatal(err)
	}
	if m.Params()[0] != 42 {
		t.Fatal("SetParams did not set")
	}
	err := m.SetParams(p[1:])
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("len(p) = %d, allowed NumParams() = %d", len(p)-1, len(p))) {
		t.Fatalf("SetParams short: %v, want a length error", err)
	}
	if m.Params()[0] != 42 {
		t.Fatal("failed SetParams changed the parameters")
	}

	c := m.Clone()
	ds := randomData(10, rng)
	idx := []int{0, 1, 2, 3}
	g1, g2 := make([]float32, m.NumParams()), make([]float32, m.NumParams())
	l1, l2 := m.Gradient(ds, idx, g1), c.Gradient(ds, idx, g2)
	if l1 != l2 {
		t.Fatalf("clone loss %v, original %v", l2, l1)
	}
	for i := range g1 {
		if g1[i] != g2[i] {
			t.Fatalf("clone gradient %d = %v, original %v", i, g2[i], g1[i])
		}
	}
	c.Step(g2, 0.1)
	if m.Params()[0] != 42 || c.Params()[0] == 42 && g2[0] != 0 {
		t.Fatal("Step on the clone changed the original, or did not change the clone")
	}
}

// TestClonesConcurrently trains clones in parallel goroutines on a shared
// dataset, as the runner's workers do; under -race this checks that clones
// share no mutable state, and the replicas must end bit-identical to a
// serial run.
func TestClonesConcurrently(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	ds := blocks(200, rng)
	m, _ := NewMLP(MLPConfig{Hidden: []int{16}}, rng)
	run := func(r *MLP) {
		grad := make([]float32, r.NumParams())
		for k := range 20 {
			idx := []int{k, k + 50, k + 100, k + 150}
			r.Gradient(ds, idx, grad)
			r.Step(grad, 0.1)
			r.Loss(ds, idx)
		}
		r.Accuracy(ds)
	}
	want := m.Clone()
	run(want)
	clones := []*MLP{m.Clone(), m.Clone(), m.Clone()}
	var wg sync.WaitGroup
	for _, c := range clones {
		wg.Go(func() { run(c) })
	}
	wg.Wait()
	for i, c := range clones {
		for j, v := range c.Params() {
			if v != want.params[j] {
				t.Fatalf("clone %d param %d = %v, serial run %v", i, j, v, want.params[j])
			}
		}
	}
}

func TestStep(t *testing.T) {
	m, _ := NewMLP(MLPConfig{Hidden: []int{2}}, rand.New(rand.NewPCG(1, 1)))
	before := m.Params()
	g := make([]float32, m.NumParams())
	for i := range g {
		g[i] = float32(i%7) - 3
	}
	m.Step(g, 0.25)
	for i, v := range m.Params() {
		if want := before[i] - 0.25*float64(g[i]); v != want {
			t.Fatalf("param %d = %v after Step, want %v", i, v, want)
		}
	}
}

func TestSGDDecreasesLoss(t *testing.T) {
	// Synthetic, learnable: the label is which of 10 pixel blocks is lit.
	rng := rand.New(rand.NewPCG(11, 11))
	ds := blocks(500, rng)
	m, _ := NewMLP(MLPConfig{Hidden: []int{32}}, rng)
	all := make([]int, ds.N)
	for i := range all {
		all[i] = i
	}
	start := m.Loss(ds, all)
	grad := make([]float32, m.NumParams())
	batch := make([]int, 32)
	for range 100 {
		for i := range batch {
			batch[i] = rng.IntN(ds.N)
		}
		m.Gradient(ds, batch, grad)
		m.Step(grad, 0.1)
	}
	end := m.Loss(ds, all)
	acc := m.Accuracy(ds)
	if end > start/4 || acc < 0.99 {
		t.Fatalf("loss %v -> %v, accuracy %v after 100 steps, want loss / 4 and accuracy >= 0.99", start, end, acc)
	}
}

// blocks returns n samples whose label y lights pixels 70y..70y+69 with
// random intensity, plus noise elsewhere.
func blocks(n int, rng *rand.Rand) Dataset {
	d := Dataset{X: make([]float64, n*ImageSize), Y: make([]uint8, n), N: n}
	for i := range n {
		y := rng.IntN(NumClasses)
		d.Y[i] = uint8(y)
		x := d.X[i*ImageSize : (i+1)*ImageSize]
		for j := 70 * y; j < 70*y+70; j++ {
			x[j] = 0.5 + 0.5*rng.Float64()
		}
		for range 20 {
			x[rng.IntN(ImageSize)] = 0.3 * rng.Float64()
		}
	}
	return d
}

func TestGradientPanics(t *testing.T) {
	m, _ := NewMLP(MLPConfig{Hidden: []int{2}}, rand.New(rand.NewPCG(1, 1)))
	ds := randomData(4, rand.New(rand.NewPCG(1, 1)))
	grad := make([]float32, m.NumParams())
	for _, c := range []struct {
		name string
		f    func()
		want string
	}{
		{"short grad", func() { m.Gradient(ds, []int{0}, grad[1:]) }, "len(grad) = "},
		{"empty batch", func() { m.Gradient(ds, nil, grad) }, "len(idx) = 0"},
		{"index", func() { m.Gradient(ds, []int{0, 4}, grad) }, "idx[1] = 4, allowed 0..3"},
		{"negative", func() { m.Gradient(ds, []int{-1}, grad) }, "idx[0] = -1"},
		{"bad dataset", func() { m.Gradient(Dataset{X: ds.X, Y: ds.Y, N: 5}, []int{0}, grad) }, "N = 5"},
		{"step", func() { m.Step(grad[1:], 0.1) }, "Step len(grad)"},
		{"loss empty", func() { m.Loss(ds, nil) }, "len(idx) = 0"},
		{"accuracy empty", func() { m.Accuracy(Dataset{}) }, "ds.N = 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if !strings.Contains(msg, c.want) {
					t.Fatalf("panic %v, want a message containing %q", r, c.want)
				}
			}()
			c.f()
		})
	}
}

func TestGradientZeroAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	ds := randomData(300, rng)
	for _, hidden := range [][]int{nil, {300, 200}} {
		m, _ := NewMLP(MLPConfig{Hidden: hidden}, rng)
		grad := make([]float32, m.NumParams())
		big, small := rng.Perm(ds.N)[:256], rng.Perm(ds.N)[:32]
		m.Gradient(ds, big, grad) // warm-up at the largest batch
		for _, idx := range [][]int{big, small} {
			allocs := testing.AllocsPerRun(5, func() {
				m.Gradient(ds, idx, grad)
				m.Step(grad, 0.01)
			})
			if allocs != 0 {
				t.Errorf("hidden %v batch %d: Gradient+Step allocate %v times per call after warm-up, want 0", hidden, len(idx), allocs)
			}
		}
		m.Loss(ds, big) // same buffers
		if allocs := testing.AllocsPerRun(3, func() { m.Loss(ds, big); m.Accuracy(ds) }); allocs != 0 {
			t.Errorf("hidden %v: Loss+Accuracy allocate %v times per call after warm-up, want 0", hidden, allocs)
		}
	}
}

// TestSGDOnMNIST is the behaviour test: plain SGD, lr 0.1, batch 64, 300
// steps from a fixed seed must reach 85% accuracy on the MNIST test set.
func TestSGDOnMNIST(t *testing.T) {
	s := needMNIST(t)
	rng := rand.New(rand.NewPCG(2026, 1))
	m, err := NewMLP(MLPConfig{}, rng)
	if err != nil {
		t.Fatal(err)
	}
	before := m.Accuracy(s.test)
	grad := make([]float32, m.NumParams())
	batch := make([]int, 64)
	for range 300 {
		for i := range batch {
			batch[i] = rng.IntN(s.train.N)
		}
		m.Gradient(s.train, batch, grad)
		m.Step(grad, 0.1)
	}
	acc := m.Accuracy(s.test)
	t.Logf("test accuracy %.4f before, %.4f after 300 steps", before, acc)
	if acc < 0.85 {
		t.Fatalf("test accuracy %.4f after 300 steps of SGD (lr 0.1, batch 64), want >= 0.85", acc)
	}
}

func BenchmarkGradientStep(b *testing.B) {
	s := needMNIST(b)
	for _, batch := range []int{32, 64, 128} {
		b.Run(fmt.Sprintf("hidden=128/batch=%d", batch), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			m, _ := NewMLP(MLPConfig{}, rng)
			grad := make([]float32, m.NumParams())
			idx := make([]int, batch)
			b.ReportAllocs()
			for b.Loop() {
				for i := range idx {
					idx[i] = rng.IntN(s.train.N)
				}
				m.Gradient(s.train, idx, grad)
				m.Step(grad, 0.1)
			}
		})
	}
}

func BenchmarkAccuracy(b *testing.B) {
	s := needMNIST(b)
	m, _ := NewMLP(MLPConfig{}, rand.New(rand.NewPCG(1, 1)))
	for b.Loop() {
		m.Accuracy(s.test)
	}
}
