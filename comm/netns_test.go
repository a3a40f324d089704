package comm

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multirail/multirail/lab"
)

const netnsChildEnv = "MULTIRAIL_COMM_NETNS_CHILD"

// netnsReport is what a rank of TestRailsFromNICs prints.
type netnsReport struct {
	Rails []string `json:"rails"`
	Bytes []uint64 `json:"bytes"`
	Sum   int64    `json:"sum"`
}

// TestRailsFromNICs: two ranks in two network namespaces (two hosts, as
// far as they can tell) with two rail subnets, a control network and a
// docker0 decoy with the same subnet on both sides. Started through Init
// by MULTIRAIL_* variables (rank 0 serving the rendezvous on the control
// network), they find their rails from the NICs alone: with
// MULTIRAIL_IFNAME=rail exactly rail0 and rail1, and by default every
// NIC but docker0; a 4 MiB allreduce crosses every rail.
func TestRailsFromNICs(t *testing.T) {
	if os.Getenv(netnsChildEnv) != "" {
		t.Skip("running as a child rank")
	}
	if err := lab.Available(); err != nil {
		t.Skipf("needs network namespaces (root, iproute2): %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, noEthtool := exec.LookPath("ethtool")
	l, err := lab.Up(ctx, lab.Config{Rates: []float64{200e6, 100e6}, Prefix: fmt.Sprintf("mrc%04x", rand.IntN(1<<16)), Offloads: noEthtool != nil})
	if err != nil {
		t.Fatalf("lab up: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Down(); err != nil {
			t.Errorf("lab down: %v", err)
		}
	})
	for side := range 2 {
		for _, args := range [][]string{
			// A bridge-like decoy: same name and subnet on both sides,
			// leading nowhere (a veth pair inside the namespace).
			{"ip", "link", "add", "docker0", "type", "veth", "peer", "name", "dockerp"},
			{"ip", "addr", "add", "172.17.0.1/16", "dev", "docker0"},
			{"ip", "link", "set", "dockerp", "up"},
			{"ip", "link", "set", "docker0", "up"},
		} {
			if out, err := l.Command(ctx, side, args[0], args[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%v: %v: %s", args, err, out)
			}
		}
	}
	// A fresh veth can report no carrier for a few seconds while it
	// already carries traffic; the ranks skip interfaces without one, so
	// wait until every interface of both sides has it.
	for side := range 2 {
		for deadline := time.Now().Add(30 * time.Second); ; {
			out, err := exec.Command("ip", "-n", l.NS(side), "-br", "link").Output()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), "NO-CARRIER") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("namespace %s: interfaces without carrier after 30 s:\n%s", l.NS(side), out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, tc := range []struct {
		ifname string
		want   []string
	}{
		{"rail", []string{"rail0", "rail1"}},
		{"", []string{"ctl", "rail0", "rail1"}},
	} {
		port := 20000 + rand.IntN(10000)
		reports := make([]netnsReport, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for side := range 2 {
			wg.Go(func() {
				cmd := l.Command(ctx, side, exe, "-test.run=^TestNetnsChild$", "-test.count=1")
				cmd.Env = append(os.Environ(), netnsChildEnv+"=1",
					fmt.Sprintf("MULTIRAIL_RANK=%d", side), "MULTIRAIL_SIZE=2",
					fmt.Sprintf("MULTIRAIL_RDZV=tcp://%s:%d", l.CtlIP(0), port),
					"MULTIRAIL_JOB_ID=netns", "MULTIRAIL_TOKEN=t0ken", "MULTIRAIL_IFNAME="+tc.ifname)
				var stderr strings.Builder
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					errs[side] = fmt.Errorf("rank %d: %v\n%s\n%s", side, err, out, stderr.String())
					return
				}
				for line := range strings.Lines(string(out)) {
					if s, ok := strings.CutPrefix(line, "REPORT "); ok {
						errs[side] = json.Unmarshal([]byte(s), &reports[side])
						return
					}
				}
				errs[side] = fmt.Errorf("rank %d printed no report:\n%s\n%s", side, out, stderr.String())
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
		for side, r := range reports {
			// The dialing rank (0) names its rails by local interface; the
			// accepting one by the peer's address.
			got := slices.Sorted(slices.Values(r.Rails))
			if side == 0 && !slices.Equal(got, tc.want) || len(got) != len(tc.want) {
				t.Errorf("MULTIRAIL_IFNAME=%q: rank %d has rails %v, want %v", tc.ifname, side, r.Rails, tc.want)
			}
			if r.Sum != 3 {
				t.Errorf("rank %d: allreduce gave %d, want 3", side, r.Sum)
			}
			for k, b := range r.Bytes {
				if b < 64<<10 {
					t.Errorf("MULTIRAIL_IFNAME=%q: rank %d: rail %s carried %d bytes", tc.ifname, side, r.Rails[k], b)
				}
			}
			t.Logf("MULTIRAIL_IFNAME=%q: rank %d: rails %v, bytes sent %v", tc.ifname, side, r.Rails, r.Bytes)
		}
	}
}

// TestNetnsChild is one rank of TestRailsFromNICs.
func TestNetnsChild(t *testing.T) {
	if os.Getenv(netnsChildEnv) == "" {
		t.Skip("only run as a child of TestRailsFromNICs")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Init(ctx, Config{Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	x := make([]int64, 1<<19) // 4 MiB: the ring stripes its steps over every rail
	for i := range x {
		x[i] = int64(c.Rank() + 1)
	}
	if err := Allreduce(ctx, c, x, Sum, WithAlgo(AlgoRing)); err != nil {
		t.Fatal(err)
	}
	var rep netnsReport
	rep.Sum = x[len(x)-1]
	p := c.Stats().Peers[1-c.Rank()]
	for _, r := range p.Conn.Rails {
		rep.Rails = append(rep.Rails, r.Name)
		rep.Bytes = append(rep.Bytes, r.BytesSent)
	}
	b, _ := json.Marshal(rep)
	fmt.Printf("REPORT %s\n", b)
	if err := c.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
}
