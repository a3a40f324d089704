package labbench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/multirail/multirail/lab"
	"github.com/multirail/multirail/lab/mpi"
)

// TestMain lets the bench start this test binary as its agents and rsh
// agent (`<test binary> lab agent --spec JSON`, `<test binary> lab rsh
// ...`), as it starts the multirail binary outside tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "lab" {
		switch os.Args[2] {
		case "agent":
			os.Exit(testAgent(os.Args[3:]))
		case "rsh":
			host, command, err := ParseRsh(os.Args[3:])
			if err == nil {
				var ip string
				if ip, err = exec.LookPath("ip"); err == nil {
					err = syscall.Exec(ip, RshArgv(ip, host, command), os.Environ())
				}
			}
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// testAgent is `lab agent --spec JSON`.
func testAgent(args []string) int {
	if len(args) != 2 || args[0] != "--spec" {
		fmt.Fprintf(os.Stderr, "want --spec JSON, got %q\n", args)
		return 2
	}
	var s Spec
	if err := json.Unmarshal([]byte(args[1]), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := s.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := RunAgent(ctx, s, os.Stdout, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// requireLab skips t unless it can build a lab with shaped rails: root,
// iproute2, network namespaces and ethtool. Under CI (CI=true) as root,
// where .ci/run installs them (scripts/lab-deps.sh), it fails instead.
func requireLab(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("short: a lab bench takes about half a minute")
	}
	if uid := os.Geteuid(); uid != 0 {
		t.Skipf("a lab bench needs root (network namespaces, tc, sysctl); running as uid %d", uid)
	}
	unavailable := t.Skipf
	if os.Getenv("CI") == "true" {
		unavailable = t.Fatalf
	}
	if err := lab.Available(); err != nil {
		unavailable("%v", err)
	}
	if _, err := exec.LookPath("ethtool"); err != nil {
		unavailable("ethtool not found (scripts/lab-deps.sh installs it)")
	}
	// The competing stream is iperf3 where it is installed; CI installs it.
	if err := lab.Iperf3Available(); err != nil && os.Getenv("CI") == "true" {
		t.Fatalf("%v", err)
	}
}

// competing is r's competing stream's goodput, for messages.
func competing(r Result) string {
	if r.CompetingBps == nil {
		return "not measured"
	}
	return fmt.Sprintf("%.1f Mbit/s", *r.CompetingBps/1e6)
}

// TestBenchIntegration runs a short bench as root: every agent system,
// and Open MPI when it is there.
func TestBenchIntegration(t *testing.T) {
	requireLab(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	systems := "tcp-per-rail,mptcp,multirail-shortestqueue"
	if mpi.Available() == nil {
		systems += ",openmpi-weighted"
	}
	prefix := fmt.Sprintf("mrc%04x", rand.IntN(1<<16))
	names := strings.Split(systems, ",")
	p := Plan{Rates: []float64{40e6, 20e6}, Sizes: []int{256 << 10}, Systems: names, Duration: 4 * time.Second,
		Lab: lab.Config{Prefix: prefix}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := New(ctx, Options{Plan: p, Exe: exe})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Up(ctx); err != nil {
		t.Fatal(err)
	}
	var started []string
	rep, err := b.RunAll(ctx, Hooks{
		RunStarts: func(n, total int, system string, size int) (func(time.Duration, []uint64), func()) {
			started = append(started, fmt.Sprintf("%d/%d %s %d", n, total, system, size))
			return nil, nil
		},
	})
	if derr := b.Down(); derr != nil {
		t.Errorf("down: %v", derr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if lab.Exists(prefix) {
		t.Errorf("lab %s is still up after the bench", prefix)
	}
	// The default competitor: iperf3 where it is installed, else the Go
	// stream, with a note.
	if lab.Iperf3Available() == nil {
		if rep.Competitor != lab.ToolIperf3 || rep.CompetitorNote != "" {
			t.Errorf("competitor %q (%q), want iperf3", rep.Competitor, rep.CompetitorNote)
		}
	} else if rep.Competitor != lab.ToolGo || rep.CompetitorNote == "" {
		t.Errorf("competitor %q (%q), want go with a note", rep.Competitor, rep.CompetitorNote)
	}
	if len(started) != len(names) || started[0] != fmt.Sprintf("1/%d tcp-per-rail %d", len(names), 256<<10) {
		t.Errorf("runs started: %q", started)
	}
	if len(rep.Results) != 2*len(names) {
		t.Fatalf("%d results for %d systems: %+v", len(rep.Results), len(names), rep.Results)
	}
	for _, r := range rep.Results {
		// Loose: a sanity check, not a measurement.
		if r.Error != "" || r.GoodputBps < 0.3*rep.DynamicFairBps || r.GoodputBps > 1.3*rep.CeilingBps {
			t.Errorf("%s %s: %.1f Mbit/s (ceiling %.1f), error %q", r.System, r.Phase, r.GoodputBps/1e6, rep.CeilingBps/1e6, r.Error)
		}
		// The competing stream on rail0 is measured and gets some of it,
		// but no more than the rail carries. Its share varies a lot: an
		// iperf3 stream that connects into rail0's full tbf queue at half
		// time may get well under a tenth of the rail beside tcp-per-rail.
		if r.Phase == "dynamic" {
			ceil0 := lab.GoodputCeiling(p.Rates[0])
			if r.CompetingBps == nil || *r.CompetingBps <= 0 || *r.CompetingBps > 1.05*ceil0 {
				t.Errorf("%s: competing stream %s (rail0's TCP ceiling %.1f Mbit/s)", r.System, competing(r), ceil0/1e6)
			}
			t.Logf("%s: dynamic %.1f Mbit/s, competing %s (%s)", r.System, r.GoodputBps/1e6, competing(r), rep.Competitor)
		}
		if r.Phase == "dynamic" && strings.Contains(r.Note, "competing stream") {
			t.Errorf("%s: %s", r.System, r.Note)
		}
		if r.System == "mptcp" && (r.MPTCP == nil || !*r.MPTCP) {
			t.Errorf("mptcp: the connection was not MPTCP: %+v", r)
		}
	}
}
