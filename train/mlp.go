package train

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

const (
	// defaultHidden is the hidden layer of the zero MLPConfig.
	defaultHidden = 128
	// maxHiddenUnits and maxHiddenLayers bound MLPConfig.Hidden.
	maxHiddenUnits  = 4096
	maxHiddenLayers = 4
	// evalBatch is the number of samples Loss and Accuracy push through the
	// network at once, which bounds their buffers.
	evalBatch = 256
)

// MLPConfig describes the hidden layers of an MLP.
type MLPConfig struct {
	// Hidden lists the widths of the hidden ReLU layers, input side first:
	// at most 4 layers of 1 to 4096 units each. Empty (the zero value)
	// means the default, one hidden layer of 128 units.
	Hidden []int
}

// validate fills the default of c in and checks c; the error wraps
// ErrConfig and names the field, its value and what is allowed.
func (c *MLPConfig) validate() error {
	if len(c.Hidden) > maxHiddenLayers {
		return fmt.Errorf("%w: MLPConfig.Hidden = %v has %d layers, allowed 0..%d (0 means the default [%d])", ErrConfig, c.Hidden, len(c.Hidden), maxHiddenLayers, defaultHidden)
	}
	for i, h := range c.Hidden {
		if h < 1 || h > maxHiddenUnits {
			return fmt.Errorf("%w: MLPConfig.Hidden[%d] = %d, allowed 1..%d", ErrConfig, i, h, maxHiddenUnits)
		}
	}
	if len(c.Hidden) == 0 {
		c.Hidden = []int{defaultHidden}
	}
	return nil
}

// MLP is a multilayer perceptron for MNIST: ImageSize inputs, the hidden
// ReLU layers of its MLPConfig, and NumClasses outputs (logits) trained with
// the softmax cross-entropy loss.
//
// Parameter layout. Params, SetParams, Gradient and Step use one flat
// vector: for each layer l from the input side, its weights W_l then its
// biases b_l. W_l is in_l×out_l, row-major: the weight from unit i of the
// layer's input to unit o of its output is at offset i*out_l+o of the
// layer's block, and b_l has out_l entries. For the default config the
// layers are 784×128 (+128) and 128×10 (+10), 101770 parameters.
//
// An MLP keeps scratch buffers for its computations, so it is not safe for
// concurrent use, not even of Loss or Accuracy: give each goroutine its own
// (Clone). Computation is serial and deterministic: the same parameters and
// inputs give bit-identical results in every replica on the same platform.
type MLP struct {
	sizes  []int       // layer widths: ImageSize, hidden..., NumClasses
	params []float64   // all parameters, in the documented layout
	w, b   [][]float64 // per layer views into params
	grad   []float64   // float64 gradient, same layout, filled by Gradient
	gw, gb [][]float64 // per layer views into grad

	// Scratch, grown to the largest batch seen (rows samples) and reused.
	rows  int
	x     []float64   // gathered input, rows×ImageSize
	y     []uint8     // gathered labels, rows
	act   [][]float64 // act[l]: output of layer l, rows×sizes[l+1]; ReLU'd except the last (logits)
	delta [][]float64 // delta[l]: dLoss/d(pre-activation of layer l), rows×sizes[l+1]
}

// NewMLP returns an MLP for cfg with He initialisation: every weight drawn
// from N(0, 2/in) for its layer's input width in, biases zero. The draws
// come from rng in the parameter layout's order, so the same seed gives the
// same network. It fails if cfg is invalid or rng is nil.
func NewMLP(cfg MLPConfig, rng *rand.Rand) (*MLP, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if rng == nil {
		return nil, errors.New("train: NewMLP rng = nil, allowed a non-nil *rand.Rand")
	}
	sizes := make([]int, 0, len(cfg.Hidden)+2)
	sizes = append(sizes, ImageSize)
	sizes = append(sizes, cfg.Hidden...)
	sizes = append(sizes, NumClasses)
	m := newMLP(sizes)
	for l := range m.w {
		std := math.Sqrt(2 / float64(sizes[l]))
		for i := range m.w[l] {
			m.w[l][i] = std * rng.NormFloat64()
		}
	}
	return m, nil
}

// newMLP allocates an MLP with the given layer widths and zero parameters.
func newMLP(sizes []int) *MLP {
	n := 0
	for l := 0; l+1 < len(sizes); l++ {
		n += sizes[l]*sizes[l+1] + sizes[l+1]
	}
	m := &MLP{
		sizes:  append([]int(nil), sizes...),
		params: make([]float64, n),
		grad:   make([]float64, n),
	}
	m.w, m.b = m.views(m.params)
	m.gw, m.gb = m.views(m.grad)
	return m
}

// views cuts a flat parameter-layout vector into per layer W and b.
func (m *MLP) views(p []float64) (w, b [][]float64) {
	layers := len(m.sizes) - 1
	w = make([][]float64, layers)
	b = make([][]float64, layers)
	off := 0
	for l := range layers {
		in, out := m.sizes[l], m.sizes[l+1]
		w[l] = p[off : off+in*out : off+in*out]
		off += in * out
		b[l] = p[off : off+out : off+out]
		off += out
	}
	return w, b
}

// NumParams returns the number of parameters: the length of Params and of
// the gradient.
func (m *MLP) NumParams() int { return len(m.params) }

// Params returns a copy of the parameters in the documented layout.
func (m *MLP) Params() []float64 { return append([]float64(nil), m.params...) }

// SetParams copies p into the parameters; p must have NumParams entries in
// the documented layout.
func (m *MLP) SetParams(p []float64) error {
	if len(p) != len(m.params) {
		return fmt.Errorf("train: SetParams len(p) = %d, allowed NumParams() = %d", len(p), len(m.params))
	}
	copy(m.params, p)
	return nil
}

// Clone returns an independent copy of m: same layers and parameters, its
// own scratch buffers, so the copy may be used concurrently with m.
func (m *MLP) Clone() *MLP {
	c := newMLP(m.sizes)
	copy(c.params, m.params)
	return c
}

// CloneModel is Clone as a Model.
func (m *MLP) CloneModel() Model { return m.Clone() }

// Gradient computes the gradient of the mean softmax cross-entropy loss
// over the samples idx of ds with respect to the parameters, writes it into
// grad (float32, NumParams entries, the documented layout) and returns that
// mean loss. Samples may repeat in idx. The mean over the batch makes the
// average of the gradients of equal-sized batches on several replicas the
// gradient of their union.
//
// After the first call with a batch of a given size (or larger) it
// allocates nothing. It panics if len(grad) != NumParams(), idx is empty or
// an index is outside [0, ds.N), or ds is inconsistent (see Dataset).
func (m *MLP) Gradient(ds Dataset, idx []int, grad []float32) float64 {
	if len(grad) != len(m.params) {
		panic(fmt.Sprintf("train: Gradient len(grad) = %d, allowed NumParams() = %d", len(grad), len(m.params)))
	}
	m.gather(ds, idx, "Gradient")
	rows := len(idx)
	loss := m.forward(m.x, m.y, rows)
	// Softmax cross-entropy: forward left softmax probabilities in the last
	// layer's act; dLoss/dlogits = (p - onehot(y)) / rows.
	L := len(m.sizes) - 2
	out := m.sizes[L+1]
	inv := 1 / float64(rows)
	p, d := m.act[L], m.delta[L]
	for r := range rows {
		pr, dr := p[r*out:(r+1)*out], d[r*out:(r+1)*out]
		for o, v := range pr {
			dr[o] = v * inv
		}
		dr[m.y[r]] -= inv
	}
	for l := L; l >= 0; l-- {
		in, out := m.sizes[l], m.sizes[l+1]
		a := m.x
		if l > 0 {
			a = m.act[l-1]
		}
		d := m.delta[l]
		// dW_l = A_{l}ᵀ · delta_l (in×out).
		gemm(true, false, in, out, rows, 1, a, in, d, out, 0, m.gw[l], out)
		// db_l = column sums of delta_l.
		gb := m.gb[l]
		clear(gb)
		for r := range rows {
			for o, v := range d[r*out : (r+1)*out] {
				gb[o] += v
			}
		}
		if l == 0 {
			break
		}
		// delta_{l-1} = (delta_l · W_lᵀ) ⊙ [A_{l} > 0] (rows×in).
		dp := m.delta[l-1]
		gemm(false, true, rows, in, out, 1, d, out, m.w[l], out, 0, dp, in)
		for j, v := range a[:rows*in] {
			if v <= 0 {
				dp[j] = 0
			}
		}
	}
	for j, v := range m.grad {
		grad[j] = float32(v)
	}
	return loss * inv
}

// Step applies one plain SGD step, params -= lr * grad, with grad in the
// documented layout. It allocates nothing; it panics if len(grad) !=
// NumParams().
func (m *MLP) Step(grad []float32, lr float64) {
	if len(grad) != len(m.params) {
		panic(fmt.Sprintf("train: Step len(grad) = %d, allowed NumParams() = %d", len(grad), len(m.params)))
	}
	p := m.params[:len(grad)]
	for j, g := range grad {
		p[j] -= lr * float64(g)
	}
}

// Loss returns the mean softmax cross-entropy loss over the samples idx of
// ds, computed evalBatch samples at a time. It panics like Gradient on an
// empty or out-of-range idx.
func (m *MLP) Loss(ds Dataset, idx []int) float64 {
	if len(idx) == 0 {
		panic("train: Loss len(idx) = 0, allowed at least one sample")
	}
	sum := 0.0
	for lo := 0; lo < len(idx); lo += evalBatch {
		chunk := idx[lo:min(lo+evalBatch, len(idx))]
		m.gather(ds, chunk, "Loss")
		sum += m.forward(m.x, m.y, len(chunk))
	}
	return sum / float64(len(idx))
}

// Accuracy returns the fraction of the samples of ds whose largest logit is
// at their label (ties go to the lower digit), computed evalBatch samples
// at a time so memory stays bounded. It panics if ds is empty or
// inconsistent.
func (m *MLP) Accuracy(ds Dataset) float64 {
	if err := ds.check(); err != nil {
		panic(err.Error())
	}
	if ds.N == 0 {
		panic("train: Accuracy ds.N = 0, allowed at least one sample")
	}
	L := len(m.sizes) - 2
	out := m.sizes[L+1]
	correct := 0
	for lo := 0; lo < ds.N; lo += evalBatch {
		rows := min(evalBatch, ds.N-lo)
		m.grow(rows)
		m.forward(ds.X[lo*ImageSize:(lo+rows)*ImageSize], ds.Y[lo:lo+rows], rows)
		p := m.act[L]
		for r := range rows {
			pr := p[r*out : (r+1)*out]
			best := 0
			for o, v := range pr {
				if v > pr[best] {
					best = o
				}
			}
			if best == int(ds.Y[lo+r]) {
				correct++
			}
		}
	}
	return float64(correct) / float64(ds.N)
}

// checkIdx panics unless ds is consistent and idx a non-empty list of its
// samples.
func checkIdx(ds Dataset, idx []int, op string) {
	if err := ds.check(); err != nil {
		panic(err.Error())
	}
	if len(idx) == 0 {
		panic("train: " + op + " len(idx) = 0, allowed at least one sample")
	}
	for r, i := range idx {
		if i < 0 || i >= ds.N {
			panic(fmt.Sprintf("train: %s idx[%d] = %d, allowed 0..%d", op, r, i, ds.N-1))
		}
	}
}

// gather checks ds and idx and copies the samples idx into m.x.
func (m *MLP) gather(ds Dataset, idx []int, op string) {
	checkIdx(ds, idx, op)
	m.grow(len(idx))
	for r, i := range idx {
		copy(m.x[r*ImageSize:(r+1)*ImageSize], ds.X[i*ImageSize:(i+1)*ImageSize])
		m.y[r] = ds.Y[i]
	}
}

// grow makes the scratch buffers hold at least rows samples.
func (m *MLP) grow(rows int) {
	if rows <= m.rows {
		return
	}
	m.rows = rows
	m.x = make([]float64, rows*ImageSize)
	m.y = make([]uint8, rows)
	layers := len(m.sizes) - 1
	m.act = make([][]float64, layers)
	m.delta = make([][]float64, layers)
	for l := range layers {
		m.act[l] = make([]float64, rows*m.sizes[l+1])
		m.delta[l] = make([]float64, rows*m.sizes[l+1])
	}
}

// forward pushes the rows samples of x (rows×ImageSize, labels y) through
// the network. It leaves the hidden activations (after ReLU) in act, the
// softmax probabilities in the last act, and returns the summed
// cross-entropy loss of the rows.
func (m *MLP) forward(x []float64, y []uint8, rows int) float64 {
	a := x
	L := len(m.sizes) - 2
	for l := 0; l <= L; l++ {
		in, out := m.sizes[l], m.sizes[l+1]
		z := m.act[l][:rows*out]
		b := m.b[l]
		for r := range rows {
			copy(z[r*out:(r+1)*out], b)
		}
		// Z = A · W + b. A (MNIST pixels, ReLU outputs) is mostly zeros,
		// which gonum's kernel skips.
		gemm(false, false, rows, out, in, 1, a, in, m.w[l], out, 1, z, out)
		if l < L {
			for j, v := range z {
				if v < 0 {
					z[j] = 0
				}
			}
		}
		a = z
	}
	// Softmax in place; the loss of a row is
	// -log p_y = log Σ_o exp(z_o - max) - (z_y - max).
	out := m.sizes[L+1]
	loss := 0.0
	for r := range rows {
		zr := a[r*out : (r+1)*out]
		mx := zr[0]
		for _, v := range zr[1:] {
			mx = max(mx, v)
		}
		loss -= zr[y[r]] - mx
		s := 0.0
		for o, v := range zr {
			e := math.Exp(v - mx)
			zr[o] = e
			s += e
		}
		loss += math.Log(s)
		inv := 1 / s
		for o := range zr {
			zr[o] *= inv
		}
	}
	return loss
}

// Matrix products go through gonum's BLAS (blas64, pure Go with assembly
// kernels by default). Its Dgemm starts goroutines, which allocate, once C
// spans 4 or more blocks of 64×64 (blockSize and minParBlock in
// gonum.org/v1/gonum/blas/gonum). gemm cuts C into panels of at most
// 64×192, 3 blocks, so every call runs serially: no goroutines, no
// allocation, and each element summed in the same order as unsplit.
const panelRows, panelCols = 64, 192

// gemm computes C = alpha·op(A)·op(B) + beta·C for row-major matrices,
// with op(A) m×k, op(B) k×n and C m×n; tA and tB select transposition.
func gemm(tA, tB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	impl := blas64.Implementation()
	ta, tb := blas.NoTrans, blas.NoTrans
	if tA {
		ta = blas.Trans
	}
	if tB {
		tb = blas.Trans
	}
	for i := 0; i < m; i += panelRows {
		pm := min(panelRows, m-i)
		var as []float64
		if tA {
			as = a[i:] // columns i.. of A
		} else {
			as = a[i*lda:] // rows i.. of A
		}
		for j := 0; j < n; j += panelCols {
			pn := min(panelCols, n-j)
			var bs []float64
			if tB {
				bs = b[j*ldb:] // rows j.. of B
			} else {
				bs = b[j:] // columns j.. of B
			}
			impl.Dgemm(ta, tb, pm, pn, k, alpha, as, lda, bs, ldb, beta, c[i*ldc+j:], ldc)
		}
	}
}
