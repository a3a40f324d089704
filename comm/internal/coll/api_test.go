package coll

import (
	"slices"
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	for a := range numAlgos {
		got, err := ParseAlgo(a.String())
		if err != nil || got != a {
			t.Errorf("ParseAlgo(%q) = %v, %v", a, got, err)
		}
	}
	for o := range numOps {
		got, err := ParseOp(o.String())
		if err != nil || got != o {
			t.Errorf("ParseOp(%q) = %v, %v", o, got, err)
		}
	}
	for _, c := range collectives {
		got, err := ParseCollective(c.String())
		if err != nil || got != c {
			t.Errorf("ParseCollective(%q) = %v, %v", c, got, err)
		}
	}
	if _, err := ParseAlgo("tree"); err == nil || !strings.Contains(err.Error(), `"tree"`) || !strings.Contains(err.Error(), "recursive-halving") {
		t.Errorf("ParseAlgo(tree): %v", err)
	}
	if _, err := ParseOp("avg"); err == nil || !strings.Contains(err.Error(), "sum, prod, min, max") {
		t.Errorf("ParseOp(avg): %v", err)
	}
	if _, err := ParseCollective("scan"); err == nil || !strings.Contains(err.Error(), "reduce-scatter") {
		t.Errorf("ParseCollective(scan): %v", err)
	}
	if s := Algo(-1).String() + Op(9).String() + Collective(42).String(); s != "Algo(-1)Op(9)Collective(42)" {
		t.Errorf("out-of-range names: %q", s)
	}
	if got := CollReduceScatter.String(); got != "reduce-scatter" {
		t.Errorf("CollReduceScatter = %q", got)
	}
	if Algorithms(Collective(42)) != nil {
		t.Error("Algorithms of an unknown collective")
	}
}

func TestChoose(t *testing.T) {
	for _, c := range collectives {
		for _, size := range []int{1, 2, 3, 7, 8, 9, 16, 64, 100} {
			for bytes := 0; bytes <= 1<<24; bytes = bytes*2 + 1 {
				a := Choose(c, size, bytes, Thresholds{})
				if !slices.Contains(Algorithms(c), a) {
					t.Fatalf("Choose(%s, %d, %d) = %s, not one of %v", c, size, bytes, a, Algorithms(c))
				}
			}
		}
	}
	if Choose(Collective(42), 4, 0, Thresholds{}) != Auto {
		t.Error("Choose of an unknown collective")
	}
	cases := []struct {
		c           Collective
		size, bytes int
		th          Thresholds
		want        Algo
	}{
		{CollBarrier, 5, 0, Thresholds{}, Dissemination},
		{CollBcast, 16, 12<<10 - 1, Thresholds{}, Binomial},
		{CollBcast, 16, 12 << 10, Thresholds{}, ScatterAllgather},
		{CollBcast, 7, 1 << 20, Thresholds{}, Binomial},
		{CollBcast, 7, 1 << 20, Thresholds{BcastMinProcs: 2}, ScatterAllgather},
		{CollReduce, 8, 2 << 10, Thresholds{}, Binomial},
		{CollReduce, 8, 2<<10 + 1, Thresholds{}, Rabenseifner},
		{CollAllreduce, 8, 2 << 10, Thresholds{}, RecursiveDoubling},
		{CollAllreduce, 8, 512 << 10, Thresholds{}, Rabenseifner},
		{CollAllreduce, 8, 512<<10 + 1, Thresholds{}, Ring},
		{CollAllreduce, 8, 100, Thresholds{AllreduceShort: -1}, Rabenseifner},
		{CollAllreduce, 8, 100, Thresholds{AllreduceShort: -1, AllreduceLong: -1}, Ring},
		{CollAllgather, 8, 64<<10 - 1, Thresholds{}, RecursiveDoubling},
		{CollAllgather, 8, 64 << 10, Thresholds{}, Ring},
		{CollAllgather, 6, 1 << 10, Thresholds{}, Bruck},
		{CollAllgather, 6, 20 << 10, Thresholds{}, Ring},
		{CollReduceScatter, 6, 512<<10 - 1, Thresholds{}, RecursiveHalving},
		{CollReduceScatter, 6, 512 << 10, Thresholds{}, Pairwise},
		{CollAlltoall, 8, 256, Thresholds{}, Bruck},
		{CollAlltoall, 7, 256, Thresholds{}, Linear},
		{CollAlltoall, 8, 32 << 10, Thresholds{}, Linear},
		{CollAlltoall, 8, 32<<10 + 1, Thresholds{}, Pairwise},
		{CollGather, 8, 8<<10 - 1, Thresholds{}, Binomial},
		{CollGather, 8, 8 << 10, Thresholds{}, Linear},
		{CollScatter, 8, 8 << 10, Thresholds{ScatterLong: 1 << 20}, Binomial},
	}
	for _, c := range cases {
		if got := Choose(c.c, c.size, c.bytes, c.th); got != c.want {
			t.Errorf("Choose(%s, %d, %d, %+v) = %s, want %s", c.c, c.size, c.bytes, c.th, got, c.want)
		}
	}
	if (Thresholds{}).withDefaults() != DefaultThresholds() {
		t.Error("zero Thresholds is not the defaults")
	}
}

// TestCodec checks the portable little-endian encoding against the
// in-memory views used on little-endian hosts, and the misaligned path.
func TestCodec(t *testing.T) {
	testCodec(t, []int32{0, 1, -1, 1 << 30, -1 << 31})
	testCodec(t, []int64{0, 1, -1, 1 << 62, -1 << 63})
	testCodec(t, []float32{0, 1.5, -2.25, float32(1e38), -0.0})
	testCodec(t, []float64{0, 1.5, -2.25, 1e308, 5e-324})
}

func testCodec[T Number](t *testing.T, v []T) {
	t.Helper()
	enc := make([]byte, len(v)*elemSize[T]())
	putLE(enc, v)
	if hostLittleEndian && string(enc) != string(asBytes(v)) {
		t.Errorf("%T: putLE differs from the memory view", v)
	}
	back := make([]T, len(v))
	getLE(back, enc)
	if !slices.Equal(back, v) {
		t.Errorf("%T: getLE(putLE(%v)) = %v", v, v, back)
	}
	dec := make([]T, len(v))
	decode(dec, enc)
	if !slices.Equal(dec, v) {
		t.Errorf("%T: decode = %v, want %v", v, dec, v)
	}
	mis := make([]byte, len(enc)+1)[1:]
	copy(mis, enc)
	if _, ok := viewAs[T](mis); ok {
		t.Errorf("%T: viewAs accepted a misaligned buffer", v)
	}
	if view, ok := viewAs[T](enc); hostLittleEndian && (!ok || !slices.Equal(view, v)) {
		t.Errorf("%T: viewAs = %v, %v", v, view, ok)
	}
}
