package comm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// runAll runs f on every rank and returns each rank's error.
func runAll(cs []*Comm, d time.Duration, f func(ctx context.Context, c *Comm) error) []error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { errs[i] = f(ctx, c) })
	}
	wg.Wait()
	return errs
}

// TestMismatchFailsEveryRank: a collective called with different counts
// or roots gives every rank an error naming a rank and the operation
// (from the call itself or, on a rank that finished it, from the next
// collective), never a hang.
func TestMismatchFailsEveryRank(t *testing.T) {
	cases := []struct {
		name string
		call func(ctx context.Context, c *Comm) error
	}{
		{"allreduce count", func(ctx context.Context, c *Comm) error {
			x := make([]float32, 4+c.Rank()/2) // ranks 2, 3 pass 5
			return Allreduce(ctx, c, x, Sum)
		}},
		{"bcast root", func(ctx context.Context, c *Comm) error {
			root := 0
			if c.Rank() == 3 {
				root = 1
			}
			return Bcast(ctx, c, make([]int32, 10), root)
		}},
		{"gather count", func(ctx context.Context, c *Comm) error {
			n := 3
			if c.Rank() == 1 {
				n = 2
			}
			return Gather(ctx, c, make([]int64, n), make([]int64, 4*n), 0)
		}},
		{"different algorithms", func(ctx context.Context, c *Comm) error {
			a := AlgoRing
			if c.Rank() == 0 {
				a = AlgoRecursiveDoubling
			}
			return Allreduce(ctx, c, make([]float64, 100), Sum, WithAlgo(a))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := local(t, 4, Config{})
			errs := runAll(cs, 20*time.Second, func(ctx context.Context, c *Comm) error {
				err := tc.call(ctx, c)
				if err == nil {
					err = c.Barrier(ctx)
				}
				return err
			})
			for r, err := range errs {
				var pe *PeerError
				switch {
				case err == nil:
					t.Errorf("rank %d: no error", r)
				case errors.Is(err, context.DeadlineExceeded):
					t.Errorf("rank %d: hung: %v", r, err)
				case !errors.As(err, &pe) || pe.Rank < 0 || !strings.Contains(err.Error(), "rank"):
					t.Errorf("rank %d: want a *PeerError naming a rank, got %v", r, err)
				case !errors.Is(err, ErrMismatch):
					t.Errorf("rank %d: want ErrMismatch, got %v", r, err)
				}
			}
			if !t.Failed() {
				t.Logf("rank 0: %v", errs[0])
			}
		})
	}
}

// TestLocalValidationFailsEveryRank: a rank that rejects its own
// arguments still makes the others fail instead of hang.
func TestLocalValidationFailsEveryRank(t *testing.T) {
	cs := local(t, 3, Config{})
	errs := runAll(cs, 20*time.Second, func(ctx context.Context, c *Comm) error {
		recv := make([]int32, 3*4)
		if c.Rank() == 2 {
			recv = recv[:5] // wrong length
		}
		err := Allgather(ctx, c, make([]int32, 4), recv)
		if err == nil {
			err = c.Barrier(ctx)
		}
		return err
	})
	for r, err := range errs {
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	if !errors.Is(errs[2], ErrConfig) {
		t.Errorf("rank 2: want ErrConfig, got %v", errs[2])
	}
}

// TestClosedRankFailsCollective: a rank that leaves mid-job makes the
// others' collective fail with a *PeerError naming it, within seconds.
func TestClosedRankFailsCollective(t *testing.T) {
	cs := local(t, 4, Config{})
	start := time.Now()
	errs := runAll(cs, 20*time.Second, func(ctx context.Context, c *Comm) error {
		if c.Rank() == 2 {
			return c.Close()
		}
		x := make([]float32, 1000)
		for i := 0; ; i++ {
			if err := Allreduce(ctx, c, x, Sum); err != nil {
				return err
			}
		}
	})
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
	for r, err := range errs {
		if r == 2 {
			continue
		}
		var pe *PeerError
		if !errors.As(err, &pe) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("rank %d: want a *PeerError, got %v", r, err)
			continue
		}
		if !strings.Contains(err.Error(), "rank 2") {
			t.Errorf("rank %d: error does not name rank 2: %v", r, err)
		}
	}
	t.Logf("rank 0: %v", errs[0])
}

func TestAbort(t *testing.T) {
	cs := local(t, 3, Config{})
	errs := runAll(cs, 20*time.Second, func(ctx context.Context, c *Comm) error {
		if c.Rank() == 1 {
			c.Abort("bad input file")
			return nil
		}
		_, err := c.Recv(ctx, AnySource, AnyTag)
		return err
	})
	for _, r := range []int{0, 2} {
		if !errors.Is(errs[r], ErrAborted) || !strings.Contains(errs[r].Error(), "rank 1") || !strings.Contains(errs[r].Error(), "bad input file") {
			t.Errorf("rank %d: %v", r, errs[r])
		}
	}
}

func TestCollectiveCancel(t *testing.T) {
	cs := local(t, 3, Config{})
	errs := runAll(cs, 20*time.Second, func(ctx context.Context, c *Comm) error {
		if c.Rank() == 0 {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			err := c.Barrier(cctx)
			if !errors.Is(err, context.Canceled) {
				return fmt.Errorf("cancelled barrier: %v", err)
			}
			return nil
		}
		if err := c.Barrier(ctx); err == nil {
			return errors.New("barrier succeeded without rank 0")
		} else if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("hung: %w", err)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
