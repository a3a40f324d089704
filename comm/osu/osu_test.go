package osu

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multirail/multirail/comm"
)

func TestElemSizes(t *testing.T) {
	got := ElemSizes([]int{1, 2, 4, 6, 7, 8, 1024})
	if want := []int{4, 8, 1024}; !slices.Equal(got, want) {
		t.Errorf("ElemSizes = %v, want %v", got, want)
	}
}

func TestDefaultIters(t *testing.T) {
	for _, tc := range []struct {
		kind          Kind
		size          int
		iters, warmup int
	}{
		{Latency, 1, 10000, 100},
		{Latency, 8 << 10, 10000, 100},
		{Latency, 16 << 10, 100, 10},
		{Latency, 1 << 20, 20, 2},
		{Coll, 4, 1000, 100},
		{Coll, 512 << 10, 100, 10},
		{Coll, 4 << 20, 20, 2},
		{BW, 8 << 10, 100, 10},
		{BW, 16 << 10, 20, 2},
		{BW, 1 << 20, 3, 1},
		{BiBW, 4 << 20, 3, 1},
		{BW, 64 << 20, 3, 1},
	} {
		i, w := DefaultIters(tc.kind, tc.size)
		if i != tc.iters || w != tc.warmup {
			t.Errorf("DefaultIters(%d, %d) = %d/%d, want %d/%d", tc.kind, tc.size, i, w, tc.iters, tc.warmup)
		}
	}
	// The promise of the help text: a 4 MiB bw point takes at most 30 s at
	// 350 Mbit/s, and iterations never grow with the size.
	i, w := DefaultIters(BW, 4<<20)
	if secs := float64(i+w) * Window * (4 << 20) * 8 / 350e6; secs > 30 {
		t.Errorf("a 4 MiB bw point moves %d windows: %.1f s at 350 Mbit/s, want <= 30 s", i+w, secs)
	}
	for _, k := range []Kind{Latency, BW, Coll} {
		prev := 1 << 30
		for s := 1; s <= 64<<20; s *= 2 {
			i, w := DefaultIters(k, s)
			if i > prev || i < 3 || w < 1 {
				t.Errorf("kind %d size %d: %d/%d iterations after %d", k, s, i, w, prev)
			}
			prev = i
		}
	}
}

func TestClosedForms(t *testing.T) {
	for n := 1; n <= 9; n++ {
		for i := range 30 {
			var sum float32
			for r := range n {
				sum += reduceIn(r, i)
			}
			if want := reduceWant(n, i); sum != want {
				t.Fatalf("n=%d i=%d: sum of inputs %v, closed form %v", n, i, sum, want)
			}
		}
	}
	// float32 holds the largest sum exactly at 2000 ranks.
	if n := 2000; float64(reduceWant(n, 6)) != float64(n*(n+1)/2*7) {
		t.Errorf("closed form not exact at %d ranks", n)
	}
	// alltoall/allgather/bcast values tell (source, destination, index)
	// apart and never equal the -1 that marks an unwritten element.
	seen := make(map[int32]string)
	for a := -2; a < 8; a++ {
		for b := -2; b < 8; b++ {
			for i := range 256 {
				v := value(a, b, i)
				key := fmt.Sprint(a, b, i)
				if v < 0 {
					t.Fatalf("value(%s) = %d < 0", key, v)
				}
				if prev, dup := seen[v]; dup {
					t.Fatalf("value(%s) = value(%s) = %d", key, prev, v)
				}
				seen[v] = key
			}
		}
	}
	if patternByte(0, 8, 3) == patternByte(1, 8, 3) || patternByte(0, 8, 3) == patternByte(0, 16, 3) {
		t.Error("patternByte does not depend on the source and the size")
	}
	p := payload(1, 100)
	if bad := checkPayload(p, 1, 100, 0); bad != nil {
		t.Errorf("checkPayload of a good payload: %+v", bad)
	}
	p[42]++
	if bad := checkPayload(p, 1, 100, 7); bad == nil || bad.index != 42 || bad.iter != 7 {
		t.Errorf("checkPayload of a payload wrong at 42: %+v", bad)
	}
	if bad := checkPayload(p[:50], 1, 100, 0); bad == nil || !strings.Contains(bad.got, "50 bytes") {
		t.Errorf("checkPayload of a short payload: %+v", bad)
	}
	if bad := firstDiff([]int32{1, 2, 3}, []int32{1, 2, 4}, 5); bad == nil || bad.index != 2 || bad.got != "3" || bad.want != "4" {
		t.Errorf("firstDiff: %+v", bad)
	}
}

func TestBusFactor(t *testing.T) {
	for _, tc := range []struct {
		test        string
		n           int
		factor, alg float64 // alg: AlgBytes of size 1000
	}{
		{"allreduce", 4, 1.5, 1000},
		{"allgather", 4, 0.75, 4000},
		{"reduce-scatter", 4, 0.75, 1000},
		{"alltoall", 2, 0.5, 2000},
		{"bcast", 8, 1, 1000},
		{"barrier", 8, 0, 1000},
	} {
		ot, _ := Find(tc.test)
		if f := ot.BusFactor(tc.n); f != tc.factor {
			t.Errorf("%s n=%d: factor %v, want %v", tc.test, tc.n, f, tc.factor)
		}
		if a := ot.AlgBytes(1000, tc.n); a != tc.alg {
			t.Errorf("%s n=%d: AlgBytes %v, want %v", tc.test, tc.n, a, tc.alg)
		}
	}
}

// TestValidationFailure: a rank that found a wrong element fails with
// its rank, size, element and values; the others fail naming it.
func TestValidationFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := comm.NewLocal(ctx, 3, comm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ot, _ := Find("allreduce")
	p := Plan{Test: ot, Validate: true}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	defer closeLocal(cs)
	for r, c := range cs {
		wg.Go(func() {
			m := measure{avg: 1, min: 1, max: 1}
			if r == 1 {
				m.bad = &mismatch{index: 17, iter: 3, got: "12", want: "15"}
			}
			_, errs[r] = combine(ctx, c, p, 4096, 10, 1, m)
		})
	}
	wg.Wait()
	want := []string{
		"osu allreduce: validation failed at size 4096 on rank 1 (element 17)",
		"osu allreduce: validation failed on rank 1 at size 4096: element 17 (iteration 3) = 12, want 15",
		"osu allreduce: validation failed at size 4096 on rank 1 (element 17)",
	}
	for r, err := range errs {
		var ve *ValidationError
		if err == nil || !strings.HasPrefix(err.Error(), want[r]) || !errors.As(err, &ve) || ve.Size != 4096 {
			t.Errorf("rank %d: %v; want %q", r, err, want[r])
		}
	}
}

// closeLocal closes the ranks of an in-process world one after the other:
// closing both ends of a multirail connection at once takes the transport's
// whole close linger, one after the other a millisecond.
func closeLocal(cs []*comm.Comm) {
	for _, c := range cs {
		c.Close()
	}
}

func TestValidationErrorType(t *testing.T) {
	e := &ValidationError{Test: "bcast", Size: 8, Rank: -1, Ranks: []string{"rank 2 (element 1)"}}
	if !errors.Is(e, ErrValidation) || e.Error() != "osu bcast: validation failed at size 8 on rank 2 (element 1); that rank's error has the values" {
		t.Errorf("%v", e)
	}
}

// TestSummarize: rank 0's point-to-point numbers, and min/avg/max over
// the ranks with the bus bandwidth for a collective.
func TestSummarize(t *testing.T) {
	bw, _ := Find("bw")
	r := summarize(bw, 1000, 2, []float64{10, 8, 12, 64e6, 2, -1, 0, 0, 0, 0, 0, -1})
	if r.AvgUs != 10 || r.MinUs != 8 || r.MaxUs != 12 || r.MBs == nil || *r.MBs != 32 || r.BusBWBps != nil {
		t.Errorf("bw: %+v", r)
	}
	lat, _ := Find("latency")
	if r := summarize(lat, 8, 2, []float64{3, 2, 4, 0, 0, -1, 0, 0, 0, 0, 0, -1}); r.MBs != nil || r.AvgUs != 3 {
		t.Errorf("latency: %+v", r)
	}
	ar, _ := Find("allreduce")
	r = summarize(ar, 1e6, 2, []float64{100, 0, 0, 0, 0, -1, 300, 0, 0, 0, 0, -1})
	// 1 MB in 200 us: algbw 40 Gbit/s, busbw x 2(n-1)/n = 1.
	if r.AvgUs != 200 || r.MinUs != 100 || r.MaxUs != 300 || r.BusBWBps == nil || *r.BusBWBps != 40e9 {
		t.Errorf("allreduce: %+v (busbw %v)", r, r.BusBWBps)
	}
	bar, _ := Find("barrier")
	if r := summarize(bar, 0, 2, []float64{5, 0, 0, 0, 0, -1, 7, 0, 0, 0, 0, -1}); r.BusBWBps != nil || r.AvgUs != 6 {
		t.Errorf("barrier: %+v", r)
	}
}

// TestRunInProcess runs bw and allreduce, validated, on an in-process
// world: the hooks' order, the report's rails and results.
func TestRunInProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tc := range []struct {
		test  string
		ranks int
		sizes []int
	}{{"bw", 2, []int{4, 4096}}, {"allreduce", 3, []int{4, 65536}}, {"latency", 1, []int{8}}} {
		t.Run(tc.test, func(t *testing.T) {
			cs, err := comm.NewLocal(ctx, tc.ranks, comm.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer closeLocal(cs)
			ot, _ := Find(tc.test)
			p := Plan{Test: ot, Sizes: tc.sizes, Iters: 3, Warmup: 1, Validate: true}
			reps := make([]Report, len(cs))
			errs := make([]error, len(cs))
			events := make([][]string, len(cs))
			var wg sync.WaitGroup
			for r, c := range cs {
				wg.Go(func() {
					ev := &events[r]
					reps[r], errs[r] = Run(ctx, c, p, RunOptions{
						Begin:    func() { *ev = append(*ev, "begin") },
						Result:   func(res Result) { *ev = append(*ev, fmt.Sprint(res.Size)) },
						Measured: func() { *ev = append(*ev, "measured") },
					})
				})
			}
			wg.Wait()
			if tc.ranks == 1 {
				var re *RanksError
				if !errors.As(errs[0], &re) || !errors.Is(errs[0], ErrRanks) || errs[0].Error() != "osu latency needs at least 2 ranks; this job has 1" || len(events[0]) != 0 {
					t.Fatalf("%v, events %v", errs[0], events[0])
				}
				return
			}
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			want := []string{"begin"}
			for _, s := range tc.sizes {
				want = append(want, fmt.Sprint(s))
			}
			want = append(want, "measured")
			rep := reps[0]
			if !slices.Equal(events[0], want) || !slices.Equal(events[1], want) {
				t.Errorf("events %v, want %v", events, want)
			}
			if rep.Test != tc.test || rep.Ranks != tc.ranks || rep.Launcher != "local" || len(rep.Rails) != tc.ranks || rep.Rails[0] != 0 || rep.Rails[1] == 0 ||
				len(rep.RailBytes) != tc.ranks || rep.RailBytes[1][0] == 0 || rep.Sched == "" || len(rep.Stats.Peers) != tc.ranks {
				t.Errorf("report %+v", rep)
			}
			for i, r := range rep.Results {
				if r.Size != tc.sizes[i] || !r.Validated || r.Iterations != 3 || r.Warmup != 1 || !(r.AvgUs > 0) {
					t.Errorf("result %+v", r)
				}
			}
		})
	}
}
