package train_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/multirail/multirail/train"
)

// Two replicas train on their own shards and average their gradients
// before every step, as the workers of the data-parallel example do over
// the network. The data here is synthetic (the digit lights one block of
// pixels); with MNIST it would come from train.MNISTDir and train.LoadMNIST.
func Example() {
	rng := rand.New(rand.NewPCG(1, 2))
	ds := train.Dataset{X: make([]float64, 1000*train.ImageSize), Y: make([]uint8, 1000), N: 1000}
	for i := range ds.N {
		y := rng.IntN(train.NumClasses)
		ds.Y[i] = uint8(y)
		for j := 70 * y; j < 70*y+70; j++ {
			ds.X[i*train.ImageSize+j] = rng.Float64()
		}
	}

	const ranks, batch = 2, 32
	cfg := train.MLPConfig{Hidden: []int{32}}
	replicas := make([]*train.MLP, ranks)
	for r := range replicas {
		// The same seed on every rank: identical starting parameters.
		m, err := train.NewMLP(cfg, rand.New(rand.NewPCG(42, 0)))
		if err != nil {
			panic(err)
		}
		replicas[r] = m
	}
	fmt.Println("parameters:", replicas[0].NumParams())

	grads := make([][]float32, ranks)
	for r := range grads {
		grads[r] = make([]float32, replicas[r].NumParams())
	}
	idx := make([]int, batch)
	for range 200 {
		for r, m := range replicas {
			shard := ds.Shard(r, ranks)
			for i := range idx {
				idx[i] = rng.IntN(shard.N)
			}
			m.Gradient(shard, idx, grads[r])
		}
		// "Allreduce": every rank gets the mean gradient.
		for j := range grads[0] {
			grads[0][j] = (grads[0][j] + grads[1][j]) / ranks
			grads[1][j] = grads[0][j]
		}
		for r, m := range replicas {
			m.Step(grads[r], 0.1)
		}
	}

	p0, p1 := replicas[0].Params(), replicas[1].Params()
	same := true
	for j := range p0 {
		same = same && p0[j] == p1[j]
	}
	fmt.Println("replicas identical:", same)
	fmt.Printf("accuracy: %.2f\n", replicas[0].Accuracy(ds))
	// Output:
	// parameters: 25450
	// replicas identical: true
	// accuracy: 1.00
}
