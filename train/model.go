package train

import (
	"fmt"
	"math/rand/v2"
)

// Model is what a worker trains: an MLP or a CNN. Gradient, Step,
// Params and SetParams use one flat parameter layout per model.
type Model interface {
	NumParams() int
	Params() []float64
	SetParams(p []float64) error
	// Gradient writes the gradient of the mean loss over the samples idx
	// of ds into grad and returns that loss.
	Gradient(ds Dataset, idx []int, grad []float32) float64
	// Step applies params -= lr * grad.
	Step(grad []float32, lr float64)
	// Accuracy is the fraction of ds classified right.
	Accuracy(ds Dataset) float64
	// CloneModel returns an independent copy.
	CloneModel() Model
}

// Model kinds (Options.Model).
const (
	ModelMLP = "mlp"
	ModelCNN = "cnn"
)

// newModel builds o's model from rng.
func (o Options) newModel(rng *rand.Rand) (Model, error) {
	switch o.Model {
	case ModelCNN:
		return NewCNN(o.CNN, rng)
	case ModelMLP, "":
		return NewMLP(o.MLP, rng)
	}
	return nil, fmt.Errorf("%w: Model = %q; allowed %q or %q", ErrConfig, o.Model, ModelMLP, ModelCNN)
}
