package train

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// CNNConfig describes a CNN's convolution layers. The zero value of every
// field means its default.
type CNNConfig struct {
	// C1 and C2 are the channels of the first and second convolution,
	// 1..64; 0 means 8 and 16.
	C1, C2 int
}

// validate fills the defaults in; the error wraps ErrConfig and names the
// field, its value and what is allowed.
func (c *CNNConfig) validate() error {
	if c.C1 == 0 {
		c.C1 = 8
	}
	if c.C2 == 0 {
		c.C2 = 16
	}
	if c.C1 < 1 || c.C1 > 64 {
		return fmt.Errorf("%w: CNNConfig.C1 = %d out of range; allowed 1..64 (0 = 8)", ErrConfig, c.C1)
	}
	if c.C2 < 1 || c.C2 > 64 {
		return fmt.Errorf("%w: CNNConfig.C2 = %d out of range; allowed 1..64 (0 = 16)", ErrConfig, c.C2)
	}
	return nil
}

// Image and feature-map sides.
const (
	side  = 28 // input
	side1 = 14 // after the first pooling
	side2 = 7  // after the second
)

// CNN is a small convolutional network for MNIST: a 3x3 convolution of C1
// channels (zero padding, ReLU), 2x2 max pooling, a 3x3 convolution of C2
// channels (ReLU), 2x2 max pooling, and a dense layer from the C2 x 7 x 7
// features to NumClasses logits, trained with softmax cross-entropy. Pure
// Go, one sample at a time.
//
// Parameter layout (Params, SetParams, Gradient, Step): conv1 weights
// [C1][3][3], conv1 biases [C1], conv2 weights [C2][C1][3][3], conv2
// biases [C2], dense weights [C2*49][NumClasses] (row-major, input-major),
// dense biases [NumClasses].
//
// A CNN keeps scratch buffers, so it is not safe for concurrent use; Clone
// gives each goroutine its own.
type CNN struct {
	cfg    CNNConfig
	params []float64
	grad   []float64
	// Views into params (and the same offsets into grad).
	w1, b1, w2, b2, w3, b3 int // offsets
	// Per-sample scratch.
	a1, a2   []float64 // pre-activation conv outputs
	p1, p2   []float64 // pooled
	i1, i2   []int32   // argmax of each pooled cell (index into a1, a2)
	logit    []float64
	dp1, dp2 []float64
	da1, da2 []float64
	dlog     []float64
}

// NewCNN returns a CNN for cfg with He initialisation drawn from rng
// (biases 0).
func NewCNN(cfg CNNConfig, rng *rand.Rand) (*CNN, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := newCNN(cfg)
	he := func(off, n, fanIn int) {
		s := math.Sqrt(2 / float64(fanIn))
		for i := range n {
			m.params[off+i] = s * rng.NormFloat64()
		}
	}
	he(m.w1, cfg.C1*9, 9)
	he(m.w2, cfg.C2*cfg.C1*9, cfg.C1*9)
	he(m.w3, cfg.C2*side2*side2*NumClasses, cfg.C2*side2*side2)
	return m, nil
}

func newCNN(cfg CNNConfig) *CNN {
	m := &CNN{cfg: cfg}
	n := 0
	m.w1, n = n, n+cfg.C1*9
	m.b1, n = n, n+cfg.C1
	m.w2, n = n, n+cfg.C2*cfg.C1*9
	m.b2, n = n, n+cfg.C2
	m.w3, n = n, n+cfg.C2*side2*side2*NumClasses
	m.b3, n = n, n+NumClasses
	m.params, m.grad = make([]float64, n), make([]float64, n)
	m.a1, m.da1 = make([]float64, cfg.C1*side*side), make([]float64, cfg.C1*side*side)
	m.p1, m.dp1 = make([]float64, cfg.C1*side1*side1), make([]float64, cfg.C1*side1*side1)
	m.i1 = make([]int32, cfg.C1*side1*side1)
	m.a2, m.da2 = make([]float64, cfg.C2*side1*side1), make([]float64, cfg.C2*side1*side1)
	m.p2, m.dp2 = make([]float64, cfg.C2*side2*side2), make([]float64, cfg.C2*side2*side2)
	m.i2 = make([]int32, cfg.C2*side2*side2)
	m.logit, m.dlog = make([]float64, NumClasses), make([]float64, NumClasses)
	return m
}

// NumParams returns the number of parameters.
func (m *CNN) NumParams() int { return len(m.params) }

// Params returns a copy of the parameters in the documented layout.
func (m *CNN) Params() []float64 { return append([]float64(nil), m.params...) }

// SetParams copies p into the parameters; p must have NumParams entries.
func (m *CNN) SetParams(p []float64) error {
	if len(p) != len(m.params) {
		return fmt.Errorf("%w: SetParams with %d values, allowed NumParams() = %d", ErrConfig, len(p), len(m.params))
	}
	copy(m.params, p)
	return nil
}

// Clone returns an independent copy of m.
func (m *CNN) Clone() *CNN {
	c := newCNN(m.cfg)
	copy(c.params, m.params)
	return c
}

// CloneModel is Clone as a Model.
func (m *CNN) CloneModel() Model { return m.Clone() }

// conv computes out[k][i][j] = b[k] + sum_c sum_{di,dj} w[k][c][di][dj]
// in[c][i+di-1][j+dj-1] over n x n maps with zero padding.
func conv(in []float64, cin int, w, b []float64, out []float64, cout, n int) {
	for k := range cout {
		o := out[k*n*n : (k+1)*n*n]
		for i := range o {
			o[i] = b[k]
		}
		for c := range cin {
			x := in[c*n*n : (c+1)*n*n]
			wk := w[(k*cin+c)*9 : (k*cin+c+1)*9]
			for di := range 3 {
				for dj := range 3 {
					wv := wk[di*3+dj]
					for i := max(0, 1-di); i < min(n, n+1-di); i++ {
						xr := x[(i+di-1)*n:]
						or := o[i*n : (i+1)*n]
						for j := max(0, 1-dj); j < min(n, n+1-dj); j++ {
							or[j] += wv * xr[j+dj-1]
						}
					}
				}
			}
		}
	}
}

// convBack accumulates, for conv's out gradient dout, the weight gradient
// into gw, the bias gradient into gb and (if din is not nil) the input
// gradient into din.
func convBack(in []float64, cin int, w []float64, dout []float64, cout, n int, gw, gb, din []float64) {
	for k := range cout {
		d := dout[k*n*n : (k+1)*n*n]
		s := 0.0
		for _, v := range d {
			s += v
		}
		gb[k] += s
		for c := range cin {
			x := in[c*n*n : (c+1)*n*n]
			wk := w[(k*cin+c)*9 : (k*cin+c+1)*9]
			gk := gw[(k*cin+c)*9 : (k*cin+c+1)*9]
			var dx []float64
			if din != nil {
				dx = din[c*n*n : (c+1)*n*n]
			}
			for di := range 3 {
				for dj := range 3 {
					wv, g := wk[di*3+dj], 0.0
					for i := max(0, 1-di); i < min(n, n+1-di); i++ {
						xr := x[(i+di-1)*n:]
						dr := d[i*n : (i+1)*n]
						var dxr []float64
						if dx != nil {
							dxr = dx[(i+di-1)*n:]
						}
						for j := max(0, 1-dj); j < min(n, n+1-dj); j++ {
							g += dr[j] * xr[j+dj-1]
							if dxr != nil {
								dxr[j+dj-1] += wv * dr[j]
							}
						}
					}
					gk[di*3+dj] += g
				}
			}
		}
	}
}

// reluPool applies ReLU to a (c maps of n x n) and 2x2 max pooling into p
// (c maps of n/2 x n/2), recording each cell's argmax in idx.
func reluPool(a []float64, c, n int, p []float64, idx []int32) {
	h := n / 2
	for k := range c {
		for i := range h {
			for j := range h {
				best, bi := 0.0, int32(-1) // ReLU: the max of the cell, floored at 0
				for di := range 2 {
					for dj := range 2 {
						q := k*n*n + (2*i+di)*n + 2*j + dj
						if a[q] > best {
							best, bi = a[q], int32(q)
						}
					}
				}
				p[k*h*h+i*h+j], idx[k*h*h+i*h+j] = best, bi
			}
		}
	}
}

// forward runs one sample x and returns its loss for label y; softmax
// probabilities are left in m.logit.
func (m *CNN) forward(x []float64, y uint8) float64 {
	c1, c2 := m.cfg.C1, m.cfg.C2
	p := m.params
	conv(x, 1, p[m.w1:m.b1], p[m.b1:m.w2], m.a1, c1, side)
	reluPool(m.a1, c1, side, m.p1, m.i1)
	conv(m.p1, c1, p[m.w2:m.b2], p[m.b2:m.w3], m.a2, c2, side1)
	reluPool(m.a2, c2, side1, m.p2, m.i2)
	w3 := p[m.w3:m.b3]
	copy(m.logit, p[m.b3:])
	for f, v := range m.p2 {
		if v == 0 {
			continue
		}
		row := w3[f*NumClasses : (f+1)*NumClasses]
		for o := range m.logit {
			m.logit[o] += v * row[o]
		}
	}
	return softmaxLoss(m.logit, y)
}

// softmaxLoss replaces z by softmax(z) and returns -log softmax(z)[y].
func softmaxLoss(z []float64, y uint8) float64 {
	top := z[0]
	for _, v := range z[1:] {
		top = max(top, v)
	}
	s := 0.0
	for i, v := range z {
		z[i] = math.Exp(v - top)
		s += z[i]
	}
	for i := range z {
		z[i] /= s
	}
	return -math.Log(max(z[y], 1e-300))
}

// Gradient computes the gradient of the mean softmax cross-entropy loss
// over the samples idx of ds, writes it into grad (NumParams entries) and
// returns that mean loss, as MLP.Gradient.
func (m *CNN) Gradient(ds Dataset, idx []int, grad []float32) float64 {
	if len(grad) != len(m.params) {
		panic(fmt.Sprintf("train: Gradient len(grad) = %d, allowed NumParams() = %d", len(grad), len(m.params)))
	}
	checkIdx(ds, idx, "Gradient")
	c1, c2 := m.cfg.C1, m.cfg.C2
	clear(m.grad)
	g, p := m.grad, m.params
	inv := 1 / float64(len(idx))
	loss := 0.0
	for _, s := range idx {
		x := ds.X[s*ImageSize : (s+1)*ImageSize]
		y := ds.Y[s]
		loss += m.forward(x, y)
		for o, v := range m.logit {
			m.dlog[o] = v * inv
		}
		m.dlog[y] -= inv
		// Dense layer.
		w3, gw3, gb3 := p[m.w3:m.b3], g[m.w3:m.b3], g[m.b3:]
		for o, d := range m.dlog {
			gb3[o] += d
		}
		for f, v := range m.p2 {
			row, grow := w3[f*NumClasses:(f+1)*NumClasses], gw3[f*NumClasses:(f+1)*NumClasses]
			dv := 0.0
			for o, d := range m.dlog {
				grow[o] += v * d
				dv += row[o] * d
			}
			m.dp2[f] = dv
		}
		// Unpool and ReLU into the second convolution's output.
		clear(m.da2)
		for f, q := range m.i2 {
			if q >= 0 {
				m.da2[q] = m.dp2[f]
			}
		}
		clear(m.dp1)
		convBack(m.p1, c1, p[m.w2:m.b2], m.da2, c2, side1, g[m.w2:m.b2], g[m.b2:m.w3], m.dp1)
		clear(m.da1)
		for f, q := range m.i1 {
			if q >= 0 {
				m.da1[q] = m.dp1[f]
			}
		}
		convBack(x, 1, p[m.w1:m.b1], m.da1, c1, side, g[m.w1:m.b1], g[m.b1:m.w2], nil)
	}
	for j, v := range g {
		grad[j] = float32(v)
	}
	return loss * inv
}

// Loss returns the mean softmax cross-entropy loss over the samples idx of
// ds.
func (m *CNN) Loss(ds Dataset, idx []int) float64 {
	checkIdx(ds, idx, "Loss")
	sum := 0.0
	for _, s := range idx {
		sum += m.forward(ds.X[s*ImageSize:(s+1)*ImageSize], ds.Y[s])
	}
	return sum / float64(len(idx))
}

// Step applies one plain SGD step, params -= lr * grad.
func (m *CNN) Step(grad []float32, lr float64) {
	if len(grad) != len(m.params) {
		panic(fmt.Sprintf("train: Step len(grad) = %d, allowed NumParams() = %d", len(grad), len(m.params)))
	}
	for j, v := range grad {
		m.params[j] -= lr * float64(v)
	}
}

// Accuracy returns the fraction of the samples of ds whose largest logit
// is at their label (ties go to the lower digit).
func (m *CNN) Accuracy(ds Dataset) float64 {
	if err := ds.check(); err != nil || ds.N == 0 {
		panic(fmt.Sprintf("train: Accuracy on a dataset of %d samples: %v", ds.N, err))
	}
	right := 0
	for s := range ds.N {
		m.forward(ds.X[s*ImageSize:(s+1)*ImageSize], ds.Y[s])
		best := 0
		for o, v := range m.logit {
			if v > m.logit[best] {
				best = o
			}
		}
		if best == int(ds.Y[s]) {
			right++
		}
	}
	return float64(right) / float64(ds.N)
}
