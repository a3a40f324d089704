package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail/lab"
	"github.com/multirail/multirail/lab/mpi"
	"github.com/multirail/multirail/sched"
)

// TestMain lets lab bench start this test binary as its agents and rsh
// agent (`<test binary> lab agent ...`), as it starts the multirail
// binary outside tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "lab" && (os.Args[2] == "agent" || os.Args[2] == "rsh") {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

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
		{[]string{"lab", "nope"}, "unknown command"},
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

func TestLabSystems(t *testing.T) {
	nS := len(sched.Names())
	noMPI := errors.New("mpi: mpicc and mpirun not found")
	for _, tc := range []struct {
		systems, sched string
		mpiErr         error
		want           []string // nil: just check the count
		count, skipped int
		err            string
	}{
		{systems: "all", sched: "all", count: 4 + nS},
		{systems: "all", sched: "all", mpiErr: noMPI, count: 2 + nS, skipped: 2},
		{systems: "tcp-per-rail,mptcp,tcp-per-rail", sched: "all", want: []string{"tcp-per-rail", "mptcp"}},
		{systems: "multirail", sched: "roundrobin,qlearn", want: []string{"multirail-roundrobin", "multirail-qlearn"}},
		{systems: "multirail-weighted,openmpi", sched: "all", want: []string{"multirail-weighted", "openmpi-default", "openmpi-weighted"}},
		{systems: "openmpi", sched: "all", mpiErr: noMPI, err: "cannot run here"},
		{systems: "openmpi-weighted", sched: "all", mpiErr: noMPI, err: "openmpi-weighted, which cannot run here"},
		{systems: "mptcp,all", sched: "qlearn", mpiErr: noMPI, want: []string{"mptcp", "tcp-per-rail", "multirail-qlearn"}, skipped: 2},
		{systems: "infiniband", sched: "all", err: "unknown system"},
		{systems: "all", sched: "best", err: "unknown scheduler"},
	} {
		got, skipped, err := labSystems(tc.systems, tc.sched, tc.mpiErr)
		name := tc.systems + "/" + tc.sched
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if tc.want != nil && !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
		if tc.count > 0 && len(got) != tc.count {
			t.Errorf("%s: %d systems (%v), want %d", name, len(got), got, tc.count)
		}
		if len(skipped) != tc.skipped {
			t.Errorf("%s: skipped %v, want %d", name, skipped, tc.skipped)
		}
	}
}

func TestParseRsh(t *testing.T) {
	for _, tc := range []struct {
		args []string
		host string
		cmd  []string
		err  string
	}{
		{[]string{"mrB", "orted", "-mca", "ess", "env"}, "mrB", []string{"orted", "-mca", "ess", "env"}, ""},
		{[]string{"-x", "-T", "mrbB", "PATH=/usr/bin", ";", "orted"}, "mrbB", []string{"PATH=/usr/bin", ";", "orted"}, ""},
		{[]string{"-p", "22", "-o", "BatchMode=yes", "-l", "root", "mrB", "echo", "hi"}, "mrB", []string{"echo", "hi"}, ""},
		{[]string{"--", "mrB", "true"}, "mrB", []string{"true"}, ""},
		{[]string{"mrB"}, "", nil, "no command"},
		{[]string{}, "", nil, "no host"},
		{[]string{"-x"}, "", nil, "no host"},
		{[]string{"mr;B", "true"}, "", nil, "namespace name"},
	} {
		host, cmd, err := parseRsh(tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || host != tc.host || !slices.Equal(cmd, tc.cmd) {
			t.Errorf("%q: %q %q %v; want %q %q", tc.args, host, cmd, err, tc.host, tc.cmd)
		}
	}
	argv := rshArgv("/sbin/ip", "mrB", []string{"orted", "-mca", "x", `"y z"`})
	want := []string{"/sbin/ip", "netns", "exec", "mrB", "unshare", "--uts", "sh", "-c", `hostname "$0" && exec sh -c "$1"`, "mrB", `orted -mca x "y z"`}
	if !slices.Equal(argv, want) {
		t.Errorf("rshArgv: %q", argv)
	}
}

func TestAgentSpecValidate(t *testing.T) {
	ok := agentSpec{Role: "recv", Kind: kindTCP, Listen: []string{"10.10.1.2:0"}, NRails: 1, EpochNs: 1, Duration: time.Second, Bucket: labBucket}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	for _, mod := range []func(*agentSpec){
		func(s *agentSpec) { s.Role = "relay" },
		func(s *agentSpec) { s.Kind = "udp" },
		func(s *agentSpec) { s.Duration = 0 },
		func(s *agentSpec) { s.Listen = nil },
		func(s *agentSpec) { s.Role = "send" }, // no rails, no size
	} {
		s := ok
		mod(&s)
		if err := s.validate(); err == nil {
			t.Errorf("%+v: no error", s)
		}
	}
	code, _, stderr := runCLI("lab", "agent", "--spec", "{")
	if code != 2 || !strings.Contains(stderr, "--spec") {
		t.Errorf("bad spec: exit %d, %q", code, stderr)
	}
}

func TestRailOf(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want int
	}{{"10.10.1.2", 0}, {"10.10.3.1", 2}, {"10.10.4.2", -1}, {"10.10.99.2", -1}, {"192.168.1.1", -1}, {"::ffff:10.10.2.2", 1}, {"fe80::1", -1}} {
		if got := railOf(netip.MustParseAddr(tc.addr), 3); got != tc.want {
			t.Errorf("railOf(%s) = %d, want %d", tc.addr, got, tc.want)
		}
	}
}

func TestWireRails(t *testing.T) {
	// Four bucket boundaries, two rails; rail0 carries 1514 wire bytes a
	// bucket, rail1 3028; a competing stream (series from half time) took
	// 448 payload bytes of rail0 in the last bucket.
	wire := [][]uint64{{0, 0}, {1514, 3028}, {3028, 6056}, {4542, 9084}}
	got := wireRails(wire, lab.LoadResult{Series: []int64{0, 448}})
	want := [][]int64{{1448, 1448, 1000}, {2896, 2896, 2896}}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("rail %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// fakeRun is a run of 8 s: 100 Mbit/s on each of two rails, one of them
// halved in the second half, and a competing stream of 50 Mbit/s.
func fakeRun(system string) labRun {
	n := 32
	r0, r1, tot := make([]int64, n), make([]int64, n), make([]int64, n)
	per := int64(100e6 / 8 * labBucket.Seconds())
	for k := range n {
		r0[k], r1[k] = per, per
		if k >= n/2 {
			r0[k] = per / 2
		}
		tot[k] = r0[k] + r1[k]
	}
	load := lab.LoadResult{Bucket: labBucket, Series: make([]int64, n/2)}
	for k := range load.Series {
		load.Series[k] = per / 2
	}
	return labRun{system: system, size: 1 << 20, window: 8, rails: [][]int64{r0, r1}, total: tot, railsSource: "receiver", load: load}
}

func TestLabReport(t *testing.T) {
	p := labBenchPlan{rates: []float64{200e6, 100e6}, sizes: []int{1 << 20}, systems: []string{"multirail-weighted", "mptcp"}, duration: 8 * time.Second}
	rep := newLabReport(p, "cubic")
	rep.add(fakeRun("multirail-weighted"), nil, p)
	mp := fakeRun("mptcp")
	yes := true
	mp.mptcp, mp.subflows = &yes, 2
	rep.add(mp, nil, p)
	rep.add(labRun{system: "openmpi-default", size: 1 << 20}, errors.New("mpirun: exit 1"), p)
	if len(rep.Results) != 6 {
		t.Fatalf("%d results, want 6", len(rep.Results))
	}
	st, dy := rep.Results[0], rep.Results[1]
	near := func(a, b float64) bool { return a > b*0.999 && a < b*1.001 }
	if st.Phase != "static" || !near(st.GoodputBps, 200e6) || !near(st.RailsBps[0], 100e6) {
		t.Errorf("static: %+v", st)
	}
	if dy.Phase != "dynamic" || !near(dy.GoodputBps, 150e6) || dy.CompetingBps == nil || !near(*dy.CompetingBps, 50e6) {
		t.Errorf("dynamic: %+v", dy)
	}
	if !near(rep.CeilingBps, 300e6*1448/1514) || !near(rep.DynamicFairBps, 200e6*1448/1514) || !near(st.CeilingFraction, 200e6/rep.CeilingBps) {
		t.Errorf("ceiling %g, fair %g, fraction %g", rep.CeilingBps, rep.DynamicFairBps, st.CeilingFraction)
	}
	if !strings.Contains(st.Note, "given the true rail rates") || !strings.Contains(rep.Results[2].Note, "MPTCP, 2 subflows") || rep.Results[4].Error == "" {
		t.Errorf("notes: %q, %q, error %q", st.Note, rep.Results[2].Note, rep.Results[4].Error)
	}

	// The JSON has the contract's fields.
	var buf bytes.Buffer
	if err := writeJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(buf.Bytes(), &obj); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ceiling_bps", "rates_bps", "results"} {
		if _, ok := obj[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	r0 := obj["results"].([]any)[0].(map[string]any)
	for _, k := range []string{"system", "phase", "size", "goodput_bps"} {
		if _, ok := r0[k]; !ok {
			t.Errorf("result lacks %q", k)
		}
	}

	var tab bytes.Buffer
	printLabTable(&tab, rep)
	out := tab.String()
	for _, want := range []string{"static Mbit/s", "multirail-weighted", "200.0", "150.0", "100/100", "50/100", "FAILED: mpirun", "best multirail static multirail-weighted 200.0", "vs mptcp 150.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestWriteLabOut(t *testing.T) {
	p := labBenchPlan{rates: []float64{200e6, 100e6}, sizes: []int{1 << 20}, systems: []string{"multirail-qlearn"}, duration: 8 * time.Second}
	rep := newLabReport(p, "cubic")
	rep.add(fakeRun("multirail-qlearn"), nil, p)
	dir := t.TempDir()
	if err := writeLabOut(dir, rep, p); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"results.json", "goodput-1MiB.png", "table.txt"} {
		if st, err := os.Stat(dir + "/" + f); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestLabBenchIntegration runs a short lab bench as root.
func TestLabBenchIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("short: a lab bench takes about half a minute")
	}
	if err := lab.Available(); err != nil {
		t.Skip(err.Error())
	}
	if _, err := exec.LookPath("ethtool"); err != nil {
		t.Skip("ethtool not found (scripts/lab-deps.sh installs it)")
	}
	systems := "tcp-per-rail,mptcp,multirail-shortestqueue"
	if mpi.Available() == nil {
		systems += ",openmpi-weighted"
	}
	prefix := fmt.Sprintf("mrc%04x", rand.IntN(1<<16))
	code, stdout, stderr := runCLI("lab", "bench", "--rates", "40mbit,20mbit", "--duration", "4s", "--sizes", "256KiB",
		"--systems", systems, "--prefix", prefix, "--json", "-q")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if lab.Exists(prefix) {
		t.Errorf("lab %s is still up after the bench", prefix)
	}
	var rep labReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if n := len(strings.Split(systems, ",")); len(rep.Results) != 2*n {
		t.Fatalf("%d results for %d systems: %s", len(rep.Results), n, stdout)
	}
	for _, r := range rep.Results {
		// Loose: a sanity check, not a measurement.
		if r.Error != "" || r.GoodputBps < 0.3*rep.DynamicFairBps || r.GoodputBps > 1.3*rep.CeilingBps {
			t.Errorf("%s %s: %.1f Mbit/s (ceiling %.1f), error %q", r.System, r.Phase, r.GoodputBps/1e6, rep.CeilingBps/1e6, r.Error)
		}
		if r.Phase == "dynamic" && (r.CompetingBps == nil || *r.CompetingBps <= 0) {
			t.Errorf("%s: no competing stream measured", r.System)
		}
		if r.System == "mptcp" && (r.MPTCP == nil || !*r.MPTCP) {
			t.Errorf("mptcp: the connection was not MPTCP: %+v", r)
		}
	}
}
