package train

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestParsePartition(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Partition
	}{
		{"iid", Partition{Kind: PartitionIID}},
		{" IID ", Partition{Kind: PartitionIID}},
		{"shards:2", Partition{Kind: PartitionShards, K: 2}},
		{"dirichlet:0.5", Partition{Kind: PartitionDirichlet, Alpha: 0.5}},
	} {
		got, err := ParsePartition(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParsePartition(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if back, err := ParsePartition(got.String()); err != nil || back != got {
			t.Errorf("round trip of %q: %q gives %+v, %v", tc.in, got.String(), back, err)
		}
	}
	for _, bad := range []string{"iid:3", "shards", "shards:0", "shards:x", "shards:101", "dirichlet", "dirichlet:0", "dirichlet:-1", "dirichlet:nan", "dirichlet:1e9", "labels:2"} {
		if _, err := ParsePartition(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("ParsePartition(%q): got %v, want ErrConfig", bad, err)
		}
	}
}

// labels returns n labels 0..9 in a random order.
func labels(n int, seed uint64) []uint8 {
	rng := rand.New(rand.NewPCG(seed, 1))
	y := make([]uint8, n)
	for i := range y {
		y[i] = uint8(rng.IntN(NumClasses))
	}
	return y
}

// classesSeen counts the classes with at least min samples in idx.
func classesSeen(y []uint8, idx []int, min int) int {
	k := 0
	for _, c := range Classes(y, idx) {
		if c >= min {
			k++
		}
	}
	return k
}

// TestSplitCoversOnce: every partition gives every sample to exactly one
// worker, and the same seed gives the same split.
func TestSplitCoversOnce(t *testing.T) {
	y := labels(5000, 3)
	for _, p := range []Partition{{Kind: PartitionIID}, {Kind: PartitionShards, K: 1}, {Kind: PartitionShards, K: 2}, {Kind: PartitionDirichlet, Alpha: 0.1}, {Kind: PartitionDirichlet, Alpha: 100}} {
		for _, w := range []int{2, 4, 7} {
			parts, err := p.Split(y, w, rand.New(rand.NewPCG(1, 2)))
			if err != nil {
				t.Fatalf("%v on %d workers: %v", p, w, err)
			}
			var all []int
			for _, idx := range parts {
				if len(idx) == 0 {
					t.Fatalf("%v on %d workers: an empty worker", p, w)
				}
				all = append(all, idx...)
			}
			slices.Sort(all)
			for i, v := range all {
				if v != i {
					t.Fatalf("%v on %d workers: samples %d..: %v, want each of 0..%d once", p, w, i, all[i:min(i+5, len(all))], len(y)-1)
				}
			}
			again, _ := p.Split(y, w, rand.New(rand.NewPCG(1, 2)))
			if !slices.EqualFunc(parts, again, slices.Equal) {
				t.Fatalf("%v: same seed, different split", p)
			}
		}
	}
}

// TestSplitSkew: IID workers see every class; shards:2 workers at most
// four (two shards, each at most straddling two labels), most of them two;
// a small Dirichlet concentration gives few classes per worker and a large
// one all of them.
func TestSplitSkew(t *testing.T) {
	y := labels(20000, 5)
	const W = 5
	split := func(p Partition) [][]int {
		parts, err := p.Split(y, W, rand.New(rand.NewPCG(9, 9)))
		if err != nil {
			t.Fatal(err)
		}
		return parts
	}
	for w, idx := range split(Partition{Kind: PartitionIID}) {
		if k := classesSeen(y, idx, 1); k != NumClasses {
			t.Fatalf("iid worker %d sees %d classes", w, k)
		}
	}
	for w, idx := range split(Partition{Kind: PartitionShards, K: 2}) {
		// A shard holds 2000 samples, 1/10 of the set: one or two labels.
		if k := classesSeen(y, idx, 1); k < 2 || k > 4 {
			t.Fatalf("shards:2 worker %d sees %d classes, want 2..4", w, k)
		}
	}
	small, large := 0, 0
	for _, idx := range split(Partition{Kind: PartitionDirichlet, Alpha: 0.05}) {
		small += classesSeen(y, idx, 50)
	}
	for _, idx := range split(Partition{Kind: PartitionDirichlet, Alpha: 1000}) {
		large += classesSeen(y, idx, 50)
	}
	if large != W*NumClasses || small > W*NumClasses/2 {
		t.Fatalf("dirichlet: %d class-worker pairs with >= 50 samples at alpha 0.05, %d at 1000; want <= %d and %d", small, large, W*NumClasses/2, W*NumClasses)
	}
}

func TestSplitErrors(t *testing.T) {
	y := labels(30, 1)
	if _, err := (Partition{Kind: PartitionShards, K: 8}).Split(y, 4, rand.New(rand.NewPCG(1, 1))); !errors.Is(err, ErrConfig) {
		t.Fatalf("32 shards of 30 samples: %v", err)
	}
	if _, err := (Partition{}).Split(y, 31, rand.New(rand.NewPCG(1, 1))); !errors.Is(err, ErrConfig) {
		t.Fatalf("31 workers for 30 samples: %v", err)
	}
	if _, err := (Partition{Kind: "odd"}).Split(y, 2, rand.New(rand.NewPCG(1, 1))); !errors.Is(err, ErrConfig) {
		t.Fatalf("unknown kind: %v", err)
	}
}

// TestGammaMean: the Gamma sampler behind the Dirichlet split has mean
// alpha (checked where it takes each branch).
func TestGammaMean(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, a := range []float64{0.1, 0.7, 1, 3.5} {
		sum := 0.0
		const n = 200000
		for range n {
			sum += gamma(rng, a)
		}
		if m := sum / n; m < 0.97*a || m > 1.03*a {
			t.Fatalf("Gamma(%v) mean %v", a, m)
		}
	}
}
