package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail/lab"
	"github.com/multirail/multirail/lab/labbench"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestParseRates(t *testing.T) {
	got, err := parseRates("200mbit, 100mbit,1.5gbit")
	if err != nil || !slices.Equal(got, []float64{200e6, 100e6, 1.5e9}) {
		t.Fatalf("%v, %v", got, err)
	}
	for _, bad := range []string{"0mbit", "200", "200mbitt", "500kbit", "20gbit", "", "1,2,3,4,5,6,7,8,9"} {
		if _, err := parseRates(bad); err == nil {
			t.Errorf("%q: no error", bad)
		} else if !strings.Contains(err.Error(), "--rates") || !strings.Contains(err.Error(), "allowed") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	nine := strings.TrimSuffix(strings.Repeat("10mbit,", 9), ",")
	if _, err := parseRates(nine); err == nil || !strings.Contains(err.Error(), "1..8") {
		t.Errorf("nine rails: %v", err)
	}
}

func TestLabUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lab", "up", "--rates", "0mbit"}, `multirail: --rates: "0mbit" is out of range: allowed`},
		{[]string{"lab", "up", "--rates", "-5mbit"}, `multirail: --rates: "-5mbit" is not a rate (negative): allowed`},
		{[]string{"lab", "up", "--prefix", "a b"}, "--prefix"},
		{[]string{"lab", "up", "--cc", "Cubic"}, "--cc"},
		{[]string{"lab", "up", "--tbf-latency", "5s"}, "--tbf-latency"},
		{[]string{"lab", "up", "extra"}, "takes no arguments"},
		{[]string{"lab", "load", "--duration", "0s"}, "--duration"},
		{[]string{"lab", "bench", "--duration", "1s"}, "--duration 1s is out of range"},
		{[]string{"lab", "bench", "--duration", "5100ms"}, "multiples of 250ms"},
		{[]string{"lab", "bench", "--sizes", "12"}, "--sizes"},
		{[]string{"lab", "bench", "--systems", "nccl"}, `--systems "nccl": unknown system`},
		{[]string{"lab", "bench", "--sched", "fastest"}, `--sched "fastest": unknown scheduler`},
		{[]string{"lab", "bench", "--systems", "multirail-fastest"}, "unknown system"},
		{[]string{"lab", "bench", "--rates", "100mbit,x"}, `--rates: "x"`},
		{[]string{"lab", "bench", "--competitor", "netperf"}, `multirail: --competitor "netperf": unknown competitor (allowed: iperf3, go)`},
		{[]string{"lab", "bench", "--competitor", "Iperf3"}, `--competitor "Iperf3": unknown competitor`},
		{[]string{"lab", "load", "--tool", "iperf2"}, `multirail: --tool "iperf2": unknown tool (allowed: iperf3, go)`},
		{[]string{"lab", "nope"}, "unknown command"},
		{[]string{"lab", "up", "--hosts", "9"}, "--hosts = 9 is out of range: allowed 2..8"},
		{[]string{"lab", "bench", "--hosts", "1"}, "--hosts = 1 is out of range"},
		{[]string{"lab", "bench", "--hosts", "4", "--tests", "allreduce,nccl"}, `unknown test "nccl"`},
		{[]string{"lab", "bench", "--hosts", "4", "--sizes", "8:4"}, "range 8:4 has MIN > MAX"},
		{[]string{"lab", "bench", "--hosts", "4", "--duration", "8500ms"}, "--duration 8.5s: iperf3-ring's length in the collective bench; allowed whole seconds"},
		{[]string{"lab", "bench", "--hosts", "4", "--cc", "reno"}, "--cc does not apply to the collective bench"},
		{[]string{"lab", "bench", "--hosts", "4", "--systems", "tcp-per-rail"}, "tcp-per-rail is not a collective system"},
		{[]string{"lab", "bench", "--hosts", "4", "--rounds", "0"}, "--rounds 0 is out of range: allowed 1..20"},
		{[]string{"lab", "bench", "--rounds", "3"}, "--rounds, --iters, --warmup, --ddp-batch and --torch-python apply to the collective bench only"},
		{[]string{"lab", "bench", "--ddp-batch", "16"}, "--rounds, --iters, --warmup, --ddp-batch and --torch-python apply to the collective bench only"},
		{[]string{"lab", "bench", "--tests", "bw", "--iters", "-1"}, "--iters -1"},
	} {
		code, _, stderr := runCLI(tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
		if strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%v: error is not one line: %q", tc.args, stderr)
		}
	}
}

func TestLabNeedsRoot(t *testing.T) {
	defer func(f func() int) { geteuid = f }(geteuid)
	geteuid = func() int { return 1000 }
	for _, args := range [][]string{
		{"lab", "up"}, {"lab", "down"}, {"lab", "status"}, {"lab", "load"}, {"lab", "bench", "--systems", "tcp-per-rail"},
	} {
		code, _, stderr := runCLI(args...)
		if code != 1 || !strings.Contains(stderr, "needs root") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%v as uid 1000: exit %d, %q; want 1 and one line saying it needs root", args, code, stderr)
		}
	}
	// A dry run needs no root.
	code, stdout, _ := runCLI("lab", "up", "--dry-run", "--rates", "100mbit")
	if code != 0 || !strings.Contains(stdout, "ip netns add mrA") || !strings.Contains(stdout, "tbf rate 100000000bit burst 50000") {
		t.Errorf("dry run: exit %d, %q", code, stdout)
	}
}

// TestLabSystems: the flags' errors (the expansion itself is tested in
// package labbench).
func TestLabSystems(t *testing.T) {
	noMPI := errors.New("mpi: mpicc and mpirun not found")
	got, skipped, err := labSystems("mptcp,all", "qlearn", labbench.ExpandOptions{MPI: noMPI})
	if err != nil || !slices.Equal(got, []string{"mptcp", "tcp-per-rail", "multirail-qlearn"}) || len(skipped) != 2 {
		t.Errorf("mptcp,all/qlearn: %v %v %v", got, skipped, err)
	}
	for _, tc := range []struct {
		systems, sched string
		mpiErr         error
		err            string
		usage          bool
	}{
		{"openmpi", "all", noMPI, "--systems asks for openmpi-default, which cannot run here: mpi: mpicc", false},
		{"openmpi-weighted", "all", noMPI, "--systems asks for openmpi-weighted, which cannot run here", false},
		{"infiniband", "all", nil, `--systems "infiniband": unknown system (allowed: all, tcp-per-rail, mptcp, openmpi, openmpi-default, openmpi-weighted, torch, gloo, torch-multirail, torch-multirail-plaintext, iperf3-ring (these five: collective bench), multirail, multirail-<sched>[-plaintext] with sched one of`, true},
		{"all", "best", nil, `--sched "best": unknown scheduler`, true},
	} {
		_, _, err := labSystems(tc.systems, tc.sched, labbench.ExpandOptions{MPI: tc.mpiErr})
		var ue usageError
		if err == nil || !strings.HasPrefix(err.Error(), tc.err) || errors.As(err, &ue) != tc.usage {
			t.Errorf("%s/%s: err %v, want %q (usage error: %v)", tc.systems, tc.sched, err, tc.err, tc.usage)
		}
	}
}

// TestLabCompetitor: --competitor's default is iperf3 when it is there and
// the Go stream with a note when not; iperf3 named when it is missing is
// an error (not a usage error).
func TestLabCompetitor(t *testing.T) {
	missing := fmt.Errorf("%w in PATH (/nowhere): install it", lab.ErrNoIperf3)
	for _, tc := range []struct {
		flag       string
		iperfErr   error
		tool, note string
		err        string
		usage      bool
	}{
		{"", nil, "iperf3", "", "", false},
		{"", missing, "go", "the competing stream is the Go stream: lab: iperf3 not found in PATH (/nowhere): install it", "", false},
		{"iperf3", nil, "iperf3", "", "", false},
		{"go", missing, "go", "", "", false},
		{"iperf3", missing, "", "", "--competitor iperf3 cannot run here: lab: iperf3 not found in PATH", false},
		{"tcp", nil, "", "", `--competitor "tcp": unknown competitor (allowed: iperf3, go)`, true},
	} {
		tool, note, err := competitor(tc.flag, tc.iperfErr)
		var ue usageError
		if tool != tc.tool || note != tc.note || (err == nil) != (tc.err == "") || (err != nil && (!strings.HasPrefix(err.Error(), tc.err) || errors.As(err, &ue) != tc.usage)) {
			t.Errorf("%q (iperf3: %v): %q, %q, %v; want %q, %q, %q (usage error: %v)", tc.flag, tc.iperfErr, tool, note, err, tc.tool, tc.note, tc.err, tc.usage)
		}
	}
	// The plan carries it.
	f := &labBenchFlags{rates: "100mbit", sizes: "65536", systems: "tcp-per-rail", sched: "all", prefix: "mrb", cc: "cubic", duration: 4 * time.Second, competitor: ""}
	p, err := f.plan(nil, missing)
	if err != nil || p.Competitor != "go" || !strings.Contains(p.CompetitorNote, "iperf3 not found") {
		t.Errorf("plan without iperf3: %+v, %v", p, err)
	}
	f.competitor = "iperf3"
	if _, err := f.plan(nil, missing); err == nil || !strings.Contains(err.Error(), "--competitor iperf3 cannot run here") {
		t.Errorf("plan asking for a missing iperf3: %v", err)
	}
}

func TestLabRshUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lab", "rsh"}, "multirail: lab rsh: no host: want [options] HOST COMMAND..."},
		{[]string{"lab", "rsh", "mrB"}, "multirail: lab rsh mrB: no command (an interactive login is not supported)"},
	} {
		code, _, stderr := runCLI(tc.args...)
		if code != 2 || strings.TrimSpace(stderr) != tc.want {
			t.Errorf("%q: exit %d, %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

func TestLabAgentUsage(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"{", "multirail: --spec: unexpected end of JSON input"},
		{`{"role":"relay"}`, `multirail: --spec: role "relay": allowed recv, send`},
	} {
		code, _, stderr := runCLI("lab", "agent", "--spec", tc.spec)
		if code != 2 || strings.TrimSpace(stderr) != tc.want {
			t.Errorf("%s: exit %d, %q; want 2 and %q", tc.spec, code, stderr, tc.want)
		}
	}
}

// fakeRun is a run of 8 s: 100 Mbit/s on each of two rails, one of them
// halved in the second half, and a competing stream of 50 Mbit/s.
func fakeRun(system string) labbench.Run {
	n := 32
	r0, r1, tot := make([]int64, n), make([]int64, n), make([]int64, n)
	per := int64(100e6 / 8 * labbench.Bucket.Seconds())
	for k := range n {
		r0[k], r1[k] = per, per
		if k >= n/2 {
			r0[k] = per / 2
		}
		tot[k] = r0[k] + r1[k]
	}
	load := lab.LoadResult{Bucket: labbench.Bucket, Series: make([]int64, n/2)}
	for k := range load.Series {
		load.Series[k] = per / 2
	}
	return labbench.Run{System: system, Size: 1 << 20, Window: 8, Rails: [][]int64{r0, r1}, Total: tot, RailsSource: "receiver", Load: load}
}

func TestLabTable(t *testing.T) {
	p := labbench.Plan{Rates: []float64{200e6, 100e6}, Sizes: []int{1 << 20}, Systems: []string{"multirail-weighted", "mptcp"}, Duration: 8 * time.Second,
		Competitor: lab.ToolIperf3}
	rep := labbench.NewReport(p, "cubic")
	rep.Add(fakeRun("multirail-weighted"), nil)
	mp := fakeRun("mptcp")
	yes := true
	mp.MPTCP, mp.Subflows = &yes, 2
	rep.Add(mp, nil)
	rep.Add(labbench.Run{System: "openmpi-default", Size: 1 << 20}, errors.New("mpirun: exit 1"))

	var buf bytes.Buffer
	if err := writeJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	var back labbench.Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || len(back.Results) != 6 {
		t.Fatalf("%v, %d results", err, len(back.Results))
	}

	var tab bytes.Buffer
	printLabTable(&tab, rep)
	out := tab.String()
	for _, want := range []string{"static Mbit/s", "CPU s/GB", "multirail-weighted", "200.0", "150.0", "100/100", "50/100", "FAILED: mpirun", "best multirail static multirail-weighted 200.0", "vs mptcp 150.0",
		"ceiling 286.9 Mbit/s (sum of rates x 1448/1514)", "given the true rail rates", "MPTCP, 2 subflows",
		"competing stream: TCP (iperf3) on rail0 from half time on"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if back.Competitor != "iperf3" || !strings.Contains(buf.String(), `"competitor": "iperf3"`) {
		t.Errorf("JSON competitor %q: %s", back.Competitor, buf.String()[:200])
	}
	// A fallback says so.
	p.Competitor, p.CompetitorNote = lab.ToolGo, "the competing stream is the Go stream: lab: iperf3 not found in PATH"
	tab.Reset()
	printLabTable(&tab, labbench.NewReport(p, "cubic"))
	if out := tab.String(); !strings.Contains(out, "competing stream: TCP (Go stream) on rail0") || !strings.Contains(out, "note: the competing stream is the Go stream: lab: iperf3 not found") {
		t.Errorf("table of a fallback:\n%s", out)
	}
}

func TestWriteLabOut(t *testing.T) {
	p := labbench.Plan{Rates: []float64{200e6, 100e6}, Sizes: []int{1 << 20}, Systems: []string{"multirail-qlearn"}, Duration: 8 * time.Second}
	rep := labbench.NewReport(p, "cubic")
	rep.Add(fakeRun("multirail-qlearn"), nil)
	dir := t.TempDir()
	if err := writeLabOut(dir, rep); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"results.json", "goodput-1MiB.png", "table.txt"} {
		if st, err := os.Stat(dir + "/" + f); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}
