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
	"github.com/multirail/multirail/comm/netif"
	"github.com/multirail/multirail/sched"
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

// TestStartErrorReachesOthers: a rank that cannot start (here rank 0,
// whose scheduler does not exist) tells the others at the rendezvous:
// they fail with its error, naming it, instead of waiting for its
// connections until their timeout; it fails with its own.
func TestStartErrorReachesOthers(t *testing.T) {
	for _, rdzv := range []string{fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t)), "file://" + t.TempDir() + "/rdzv"} {
		host, _ := os.Hostname()
		const n = 3
		errs := make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			cfg := Config{Transport: transportToken("s3cret-" + t.Name())}
			if r == 0 {
				cfg.Transport.Scheduler = "no-such-scheduler"
			}
			wg.Go(func() {
				info := launch.Info{Launcher: "env", Rank: r, Size: n, LocalRank: r, LocalSize: n, JobID: "job-" + t.Name(), Rdzv: rdzv, Serve: true, Host: host}
				c, err := Start(context.Background(), info, cfg)
				if c != nil {
					_ = c.Close()
				}
				errs[r] = err
			})
		}
		wg.Wait()
		if errs[0] == nil || !strings.Contains(errs[0].Error(), "no-such-scheduler") {
			t.Errorf("%s: rank 0: want its own error naming the scheduler, got %v", rdzv, errs[0])
		}
		for r := 1; r < n; r++ {
			var se *StartError
			if !errors.As(errs[r], &se) || se.Rank != 0 || !strings.Contains(se.Err, "no-such-scheduler") || !errors.Is(errs[r], ErrBootstrap) {
				t.Errorf("%s: rank %d: want a bootstrap error carrying rank 0's, got %v", rdzv, r, errs[r])
				continue
			}
			if errors.Is(errs[r], context.DeadlineExceeded) || errors.Is(errs[r], context.Canceled) {
				t.Errorf("%s: rank %d: waited for its context: %v", rdzv, r, errs[r])
			}
			t.Logf("%s: rank %d: %v", rdzv, r, errs[r])
		}
	}
}

// TestWeightedNeedsRates: the weighted scheduler on NIC rails without a
// rate for each is a configuration error before the rendezvous, naming
// the NICs and the variable; with every rate it passes.
func TestWeightedNeedsRates(t *testing.T) {
	ifaces := []netif.Iface{{Name: "rail0"}, {Name: "rail1"}}
	b := &boot{cfg: config{Config: Config{RailRates: map[string]float64{"rail0": 2e8}}}}
	b.tcfg.Scheduler = sched.NameWeighted
	err := b.checkScheduler(ifaces)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "rail1") || strings.Contains(err.Error(), "rail0,") || !strings.Contains(err.Error(), EnvRailRates) {
		t.Fatalf("one rate missing: want a config error naming rail1 and %s, got %v", EnvRailRates, err)
	}
	b.cfg.RailRates["rail1"] = 1e8
	if err := b.checkScheduler(ifaces); err != nil {
		t.Fatalf("every rate given: %v", err)
	}
	b.tcfg.Scheduler = ""
	b.cfg.RailRates = nil
	if err := b.checkScheduler(ifaces); err != nil {
		t.Fatalf("default scheduler, no rates: %v", err)
	}
}

func TestParseRailRates(t *testing.T) {
	m, err := ParseRailRates(" rail0=200mbit, rail1=1e8 ,")
	if err != nil || len(m) != 2 || m["rail0"] != 2e8 || m["rail1"] != 1e8 {
		t.Fatalf("got %v, %v", m, err)
	}
	for _, bad := range []string{"", "rail0", "=200mbit", "rail0=0", "rail0=fast", "rail0=1mbit,rail0=2mbit"} {
		if _, err := ParseRailRates(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		} else {
			t.Logf("%q: %v", bad, err)
		}
	}
	cfg, err := ConfigFromEnv(Config{}, func(k string) (string, bool) {
		if k == EnvRailRates {
			return "rail0=0", true
		}
		return "", false
	})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), EnvRailRates) {
		t.Fatalf("bad %s: want a config error naming it, got %v (%+v)", EnvRailRates, err, cfg.RailRates)
	}
}
