package capi

import (
	"context"
	"encoding/binary"
	"math"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/multirail/multirail/comm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// world starts n ranks in this process (comm.NewLocal), registers them and
// frees them when the test ends (checking that no handle is left).
func world(t *testing.T, n int) []int64 {
	t.Helper()
	return worldCfg(t, n, comm.Config{})
}

func worldCfg(t *testing.T, n int, cfg comm.Config) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := comm.NewLocal(ctx, n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := make([]int64, n)
	for i, c := range cs {
		hs[i] = Register(c)
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, h := range hs {
			wg.Go(func() {
				if c, m := Free(h); c != OK && c != ErrClosed {
					t.Errorf("Free(%d) = %d %s", h, c, m)
				}
			})
		}
		wg.Wait()
	})
	return hs
}

// onAll runs f on every rank at once; the test fails if that takes more
// than 20 s (a hang).
func onAll(t *testing.T, hs []int64, f func(r int, h int64)) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for r, h := range hs {
			wg.Go(func() { f(r, h) })
		}
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the ranks did not finish within 20 s (a hang)")
	}
}

// ok fails the test unless c is OK.
func ok(t *testing.T, what string, c int32, m string) {
	t.Helper()
	if c != OK {
		t.Errorf("%s: code %d (%s): %s", what, c, Strerror(c), m)
	}
}

// want fails the test unless c is w.
func want(t *testing.T, what string, w, c int32, m string) {
	t.Helper()
	if c != w {
		t.Errorf("%s: code %d (%s), want %d (%s); message %q", what, c, Strerror(c), w, Strerror(w), m)
	}
}

// i64s and friends convert between numbers and little-endian bytes.
func i64s(v ...int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

func fromI64s(b []byte) []int64 {
	v := make([]int64, len(b)/8)
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v
}

func i32s(v ...int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func fromI32s(b []byte) []int32 {
	v := make([]int32, len(b)/4)
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func f32s(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func fromF32s(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}
