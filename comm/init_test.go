package comm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/comm/launch"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startRanks runs Start for the given ranks of a job of size n and
// returns their communicators and errors.
func startRanks(t *testing.T, n int, ranks []int, rdzv string, serve bool, cfg Config) ([]*Comm, []error) {
	t.Helper()
	host, _ := os.Hostname()
	cs := make([]*Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for _, r := range ranks {
		wg.Go(func() {
			info := launch.Info{Launcher: "env", Rank: r, Size: n, LocalRank: r, LocalSize: n, JobID: "job-" + t.Name(), Rdzv: rdzv, Serve: serve, Host: host}
			cs[r], errs[r] = Start(context.Background(), info, cfg)
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range cs {
			if c != nil {
				_ = c.Close()
			}
		}
	})
	return cs, errs
}

// TestRankZeroServes: as under torchrun or env://, rank 0 serves the tcp
// rendezvous itself, and the ranks may come in any order.
func TestRankZeroServes(t *testing.T) {
	rdzv := fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))
	cs, errs := startRanks(t, 3, []int{2, 1, 0}, rdzv, true, Config{Transport: transportToken("s3cret")})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	each(t, cs, func(ctx context.Context, c *Comm) error {
		x := []int32{1}
		if err := Allreduce(ctx, c, x, Sum); err != nil || x[0] != 3 {
			return fmt.Errorf("allreduce %v %v", x, err)
		}
		return nil
	})
}

// TestMissingRankNamed: when a rank never comes, the others fail after
// the timeout with an error that names it.
func TestMissingRankNamed(t *testing.T) {
	for _, rdzv := range []string{fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t)), "file://" + t.TempDir() + "/rdzv"} {
		_, errs := startRanks(t, 3, []int{0, 1}, rdzv, true, Config{Timeout: 1500 * time.Millisecond})
		for r := range 2 {
			err := errs[r]
			// Under load the other present rank may register late too:
			// then it is named with the missing one ("rank(s) 1-2").
			if !errors.Is(err, ErrBootstrap) || !(strings.Contains(err.Error(), "rank(s) 2 ") || strings.Contains(err.Error(), "rank(s) 1-2 ")) {
				t.Errorf("%s: rank %d: want a bootstrap error naming rank 2, got %v", rdzv, r, err)
				continue
			}
			t.Logf("%s: rank %d: %v", rdzv, r, err)
		}
	}
}

func transportToken(tok string) (c multirail.Config) {
	c.Token = tok
	return c
}

// TestShareCPUs: processes on one kernel (one boot id, whatever their
// hosts and namespaces) share its CPUs, ranks of one process count once,
// and GOMAXPROCS becomes an equal share, at least 1, never more.
func TestShareCPUs(t *testing.T) {
	c := func(proc string) card { return card{Proc: proc} }
	for _, tc := range []struct {
		name  string
		cards []card
		want  int
	}{
		{"alone", []card{c("b1|ns|10")}, 1},
		{"four processes on one kernel", []card{c("b1|ns|10"), c("b1|ns|11"), c("b1|ns2|10"), c("b1|ns|12")}, 4},
		{"other machines", []card{c("b1|ns|10"), c("b2|ns|10"), c("b3|ns|10")}, 1},
		{"ranks of one process", []card{c("b1|ns|10"), c("b1|ns|10"), c("b1|ns|10")}, 1},
		{"mixed", []card{c("b1|ns|10"), c("b1|ns|11"), c("b2|ns|11"), c("b2|ns|12"), c("b1|ns|11")}, 2},
		{"no proc (older card)", []card{c("b1|ns|10"), {}, {}}, 1},
	} {
		if got := cpuSharers(tc.cards, 0); got != tc.want {
			t.Errorf("%s: cpuSharers = %d, want %d", tc.name, got, tc.want)
		}
	}
	if got := cpuSharers([]card{{}, c("b1|ns|10")}, 0); got != 1 {
		t.Errorf("a card without Proc: cpuSharers = %d, want 1", got)
	}
	for _, tc := range []struct{ procs, sharers, want int }{
		{2, 1, 2}, {2, 2, 1}, {2, 4, 1}, {8, 3, 2}, {64, 2, 32}, {1, 8, 1}, {4, 0, 4},
	} {
		if got := procsFor(tc.procs, tc.sharers); got != tc.want {
			t.Errorf("procsFor(%d, %d) = %d, want %d", tc.procs, tc.sharers, got, tc.want)
		}
	}
	if !strings.HasSuffix(procID(), "|"+strconv.Itoa(os.Getpid())) {
		t.Errorf("procID() = %q, want it to end with this PID", procID())
	}
}

// TestLocalKeepsGOMAXPROCS: ranks in one process (NewLocal) do not divide
// the process's GOMAXPROCS among themselves.
func TestLocalKeepsGOMAXPROCS(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	local(t, 3, Config{})
	if after := runtime.GOMAXPROCS(0); after != before {
		t.Fatalf("GOMAXPROCS went from %d to %d", before, after)
	}
}
