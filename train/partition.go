package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// Partition kinds.
const (
	PartitionIID       = "iid"
	PartitionShards    = "shards"
	PartitionDirichlet = "dirichlet"
)

// Partition is how the training set is split across the workers. The zero
// value is IID.
type Partition struct {
	// Kind is PartitionIID (contiguous equal shards of the shuffled
	// set: every worker sees every class), PartitionShards (the samples
	// sorted by label and cut into Workers x K shards, K of them dealt to
	// each worker at random, as in McMahan et al.'s non-IID MNIST: with
	// K = 2 most workers see two classes) or PartitionDirichlet (each
	// class split across the workers in proportions drawn from a
	// symmetric Dirichlet of concentration Alpha: small Alpha, few
	// classes per worker). "" means PartitionIID.
	Kind string
	// K is the shards per worker of PartitionShards, 1..100.
	K int
	// Alpha is PartitionDirichlet's concentration, 0.001..1000.
	Alpha float64
}

// minPerWorker is the fewest samples a Dirichlet split may give a worker
// before it is drawn again.
const minPerWorker = 10

// ParsePartition parses "iid", "shards:K" or "dirichlet:ALPHA".
func ParsePartition(s string) (Partition, error) {
	kind, arg, has := strings.Cut(strings.TrimSpace(s), ":")
	kind = strings.ToLower(kind)
	bad := func(why string) (Partition, error) {
		return Partition{}, fmt.Errorf("%w: partition %q: %s; allowed iid, shards:K (K 1..100) or dirichlet:ALPHA (0.001..1000)", ErrConfig, s, why)
	}
	switch kind {
	case PartitionIID, "":
		if has {
			return bad("iid takes no argument")
		}
		return Partition{Kind: PartitionIID}, nil
	case PartitionShards:
		k, err := strconv.Atoi(arg)
		if err != nil || !has {
			return bad("K is not an integer")
		}
		p := Partition{Kind: PartitionShards, K: k}
		if err := p.validate(); err != nil {
			return Partition{}, err
		}
		return p, nil
	case PartitionDirichlet:
		a, err := strconv.ParseFloat(arg, 64)
		if err != nil || !has {
			return bad("ALPHA is not a number")
		}
		p := Partition{Kind: PartitionDirichlet, Alpha: a}
		if err := p.validate(); err != nil {
			return Partition{}, err
		}
		return p, nil
	}
	return bad("unknown kind")
}

// String returns the partition in the form ParsePartition reads.
func (p Partition) String() string {
	switch p.Kind {
	case PartitionShards:
		return fmt.Sprintf("%s:%d", p.Kind, p.K)
	case PartitionDirichlet:
		return p.Kind + ":" + strconv.FormatFloat(p.Alpha, 'g', -1, 64)
	}
	return PartitionIID
}

func (p Partition) validate() error {
	switch p.Kind {
	case "", PartitionIID:
		return nil
	case PartitionShards:
		if p.K < 1 || p.K > 100 {
			return fmt.Errorf("%w: Partition.K = %d out of range; allowed 1..100", ErrConfig, p.K)
		}
		return nil
	case PartitionDirichlet:
		if !(p.Alpha >= 0.001 && p.Alpha <= 1000) {
			return fmt.Errorf("%w: Partition.Alpha = %v out of range; allowed 0.001..1000", ErrConfig, p.Alpha)
		}
		return nil
	}
	return fmt.Errorf("%w: Partition.Kind = %q; allowed %q, %q or %q", ErrConfig, p.Kind, PartitionIID, PartitionShards, PartitionDirichlet)
}

// Split returns the sample indices of each of workers workers for labels y
// (labels 0..9), drawn from rng. IID gives contiguous shards (Dataset.Shard's);
// every worker gets at least one sample or Split fails.
func (p Partition) Split(y []uint8, workers int, rng *rand.Rand) ([][]int, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	n := len(y)
	if workers < 1 || n < workers {
		return nil, fmt.Errorf("%w: %d samples for %d workers; want at least one each", ErrConfig, n, workers)
	}
	out := make([][]int, workers)
	switch p.Kind {
	case PartitionShards:
		if n < workers*p.K {
			return nil, fmt.Errorf("%w: %d samples for %d shards (%d workers x %d)", ErrConfig, n, workers*p.K, workers, p.K)
		}
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		// Sort by label, keeping the set's order within a label.
		slices.SortStableFunc(idx, func(a, b int) int { return int(y[a]) - int(y[b]) })
		shards := rng.Perm(workers * p.K)
		for w := range workers {
			for _, s := range shards[w*p.K : (w+1)*p.K] {
				lo, hi := s*n/(workers*p.K), (s+1)*n/(workers*p.K)
				out[w] = append(out[w], idx[lo:hi]...)
			}
			slices.Sort(out[w])
		}
	case PartitionDirichlet:
		var byClass [NumClasses][]int
		for i, l := range y {
			if int(l) >= NumClasses {
				return nil, fmt.Errorf("%w: label %d at %d; allowed 0..%d", ErrConfig, l, i, NumClasses-1)
			}
			byClass[l] = append(byClass[l], i)
		}
		least := min(minPerWorker, n/workers)
		for range 1000 {
			for w := range out {
				out[w] = out[w][:0]
			}
			for _, cls := range byClass {
				props := dirichlet(rng, workers, p.Alpha)
				lo, acc := 0, 0.0
				for w, q := range props {
					acc += q
					hi := int(math.Round(acc * float64(len(cls))))
					if w == workers-1 {
						hi = len(cls)
					}
					hi = max(hi, lo)
					out[w] = append(out[w], cls[lo:hi]...)
					lo = hi
				}
			}
			ok := true
			for _, o := range out {
				ok = ok && len(o) >= least
			}
			if ok {
				for _, o := range out {
					slices.Sort(o)
				}
				return out, nil
			}
		}
		return nil, fmt.Errorf("%w: dirichlet:%v left a worker with fewer than %d samples in 1000 draws; use a larger ALPHA or fewer workers", ErrConfig, p.Alpha, least)
	default:
		for w := range workers {
			lo, hi := w*n/workers, (w+1)*n/workers
			for i := lo; i < hi; i++ {
				out[w] = append(out[w], i)
			}
		}
	}
	return out, nil
}

// dirichlet draws k proportions from a symmetric Dirichlet(alpha).
func dirichlet(rng *rand.Rand, k int, alpha float64) []float64 {
	g := make([]float64, k)
	sum := 0.0
	for i := range g {
		g[i] = gamma(rng, alpha)
		sum += g[i]
	}
	if !(sum > 0) {
		// Every draw underflowed (tiny alpha): all to one worker.
		clear(g)
		g[rng.IntN(k)] = 1
		return g
	}
	for i := range g {
		g[i] /= sum
	}
	return g
}

// gamma draws from Gamma(alpha, 1): Marsaglia and Tsang's method, with
// Gamma(alpha) = Gamma(alpha+1) U^(1/alpha) below 1.
func gamma(rng *rand.Rand, alpha float64) float64 {
	if alpha < 1 {
		return gamma(rng, alpha+1) * math.Pow(rng.Float64(), 1/alpha)
	}
	d := alpha - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}

// Classes returns how many samples of each class a worker's indices hold.
func Classes(y []uint8, idx []int) [NumClasses]int {
	var c [NumClasses]int
	for _, i := range idx {
		if int(y[i]) < NumClasses {
			c[y[i]]++
		}
	}
	return c
}
