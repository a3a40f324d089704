package comm

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/comm/launch"
)

func local(t *testing.T, n int, cfg Config) []*Comm {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := NewLocal(ctx, n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Go(func() { _ = c.Close() })
		}
		wg.Wait()
	})
	return cs
}

// each runs f on every rank at once and fails the test with the errors.
func each(t *testing.T, cs []*Comm, f func(ctx context.Context, c *Comm) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { errs[i] = f(ctx, c) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", i, err)
		}
	}
}

func TestLocalSmoke(t *testing.T) {
	cs := local(t, 4, Config{})
	for _, c := range cs {
		// The start's barrier is collective call 1 of the world the
		// caller gets: the first call of the application must be call 2,
		// or a fast rank's first collective meets a slow rank's barrier.
		if c.seq != 1 {
			t.Fatalf("rank %d: the world starts after %d collective calls, want 1", c.Rank(), c.seq)
		}
	}
	each(t, cs, func(ctx context.Context, c *Comm) error {
		n := c.Size()
		next, prev := (c.Rank()+1)%n, (c.Rank()+n-1)%n
		m, err := c.Sendrecv(ctx, []byte(fmt.Sprint(c.Rank())), next, 7, prev, 7)
		if err != nil {
			return err
		}
		if string(m.Data) != fmt.Sprint(prev) || m.Source != prev || m.Tag != 7 {
			return fmt.Errorf("got %q from %d tag %d", m.Data, m.Source, m.Tag)
		}
		x := []float64{float64(c.Rank()), 1}
		if err := Allreduce(ctx, c, x, Sum); err != nil {
			return err
		}
		if x[0] != 6 || x[1] != 4 {
			return fmt.Errorf("allreduce gave %v", x)
		}
		return nil
	})
}

// TestOneHostNeedsNoToken: ranks on one host with no token given and short
// tokens not allowed meet through their file:// store's own token (see
// rdzv.FileToken) and run a collective; a job across hosts (tcp://
// rendezvous) with no token is refused, naming the way out.
func TestOneHostNeedsNoToken(t *testing.T) {
	t.Setenv(multirail.InsecureEnv, "")
	t.Setenv(multirail.TokenEnv, "")
	t.Setenv(multirail.TokenFileEnv, "")
	cs := local(t, 3, Config{})
	each(t, cs, func(ctx context.Context, c *Comm) error { return c.Barrier(ctx) })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info := launch.Info{Launcher: "env", Rank: 1, Size: 2, LocalRank: 1, LocalSize: 1, JobID: "t", Rdzv: "tcp://127.0.0.1:1"}
	_, err := Start(ctx, info, Config{})
	if err == nil || !strings.Contains(err.Error(), "multirail token") {
		t.Fatalf("a tcp:// job with no token: %v, want a refusal naming `multirail token`", err)
	}
}
