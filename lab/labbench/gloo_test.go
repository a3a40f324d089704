package labbench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multirail/multirail/comm/osu"
	"github.com/multirail/multirail/lab"
	"github.com/multirail/multirail/lab/mpi"
	"github.com/multirail/multirail/scripts"
)

func TestGlooArgs(t *testing.T) {
	j := GlooJob{
		Hosts: []string{"mrch0", "mrch1", "mrch2"}, RshAgent: "/usr/bin/multirail lab rsh", OOBNet: "10.10.99.0/24",
		RailDevs: []string{"rail0", "rail1", "rail2"}, Python: "/usr/bin/python3", Wrapper: "/cache/torchrun-wrapper-0a.py",
		Program: "/cache/gloo_osu-0b.py", Port: 29507, RunID: "mrosu-abc-7", Test: "allreduce", Sizes: []int{8, 65536},
	}
	want := slices.Concat(
		mpi.LaunchArgs(mpi.CollJob{Hosts: j.Hosts, RshAgent: j.RshAgent, OOBNet: j.OOBNet}),
		[]string{"-x", "GLOO_SOCKET_IFNAME=rail0,rail1,rail2", "-x", "OMP_NUM_THREADS=1",
			"sh", "-c", glooShell, "/usr/bin/python3", "/cache/torchrun-wrapper-0a.py",
			"--nnodes", "3", "--nproc_per_node", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint", "mrch0:29507",
			"--rdzv_id", "mrosu-abc-7", "--rdzv_conf", "join_timeout=120", "--max_restarts", "0", "--monitor_interval", "0.2",
			"/cache/gloo_osu-0b.py", "allreduce", "8,65536", "0", "0"})
	if got := GlooArgs(j); !slices.Equal(got, want) {
		t.Errorf("GlooArgs:\n got %q\nwant %q", got, want)
	}
	if got := strings.Join(GlooArgs(j), " "); !strings.HasPrefix(got, "mpirun -np 3 --host mrch0:1,mrch1:1,mrch2:1 --bind-to none --mca plm_rsh_agent /usr/bin/multirail lab rsh --mca oob_tcp_if_include 10.10.99.0/24 -x ") {
		t.Errorf("not started as the other systems are: %s", got)
	}
	j.Hosts, j.Test, j.Sizes, j.Iters, j.Warmup, j.Validate = j.Hosts[:2], "bw", []int{1}, 5, 1, true
	got := GlooArgs(j)
	if tail := got[len(got)-6:]; !slices.Equal(tail, []string{"/cache/gloo_osu-0b.py", "--validate", "bw", "1", "5", "1"}) ||
		!slices.Contains(got, "2") || !slices.Contains(got, "mrch0:29507") {
		t.Errorf("two hosts, bw, validated: %q", got)
	}
}

// TestGlooShell runs the sh -c part of GlooArgs with a program that prints
// its arguments in place of Python: the node rank comes from Open MPI's
// rank, before torchrun's other arguments, and no word is split or lost.
func TestGlooShell(t *testing.T) {
	dir := t.TempDir()
	echo := filepath.Join(dir, "args")
	if err := os.WriteFile(echo, []byte("#!/bin/sh\nfor a; do echo \"[$a]\"; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	j := GlooJob{Hosts: []string{"h0", "h1"}, RshAgent: "x", OOBNet: "n", RailDevs: []string{"rail0"}, Python: echo,
		Wrapper: "/w/torchrun wrapper.py", Program: "/p.py", Port: 1, RunID: "id", Test: "allreduce", Sizes: []int{4, 8}}
	argv := GlooArgs(j)
	i := slices.Index(argv, "sh")
	run := func(env ...string) (string, string, error) {
		cmd := exec.Command(argv[i], argv[i+1:]...)
		cmd.Env = append(os.Environ(), env...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	out, _, err := run("OMPI_COMM_WORLD_RANK=1")
	want := "[/w/torchrun wrapper.py]\n[--node_rank]\n[1]\n[--nnodes]\n[2]\n"
	if err != nil || !strings.HasPrefix(out, want) || !strings.HasSuffix(out, "[/p.py]\n[allreduce]\n[4,8]\n[0]\n[0]\n") {
		t.Errorf("%v:\n%s", err, out)
	}
	// Not under mpirun: a clear error, not a run with rank "".
	cmd := exec.Command(argv[i], argv[i+1:]...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OMPI_COMM_WORLD_RANK=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	msg, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "OMPI_COMM_WORLD_RANK: is not set: start this under Open MPI mpirun") {
		t.Errorf("without OMPI_COMM_WORLD_RANK: %v: %s", err, msg)
	}
}

// anyPython is a python3 to run gloo_osu.py's parts that need no torch.
func anyPython(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(GlooPython); err == nil {
		return GlooPython
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 to run gloo_osu.py")
	}
	return p
}

// writeGloo writes gloo_osu.py and the wrapper into a temporary folder.
func writeGloo(t *testing.T) GlooFiles {
	t.Helper()
	dir := t.TempDir()
	f, err := WriteGlooFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := WriteGlooFiles(dir)
	if err != nil || again != f {
		t.Fatalf("second WriteGlooFiles: %+v, %v; want %+v", again, err, f)
	}
	for path, want := range map[string][]byte{f.Program: GlooOSUSource, f.DDP: DDPBenchSource, f.Wrapper: scripts.TorchrunWrapper} {
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) || filepath.Dir(path) != dir {
			t.Fatalf("%s: %v (%d bytes, want %d)", path, err, len(got), len(want))
		}
	}
	return f
}

// TestGlooOSUPlan: gloo_osu.py plans the sizes and iterations that
// `multirail osu` (comm/osu) plans, for every test, without torch.
func TestGlooOSUPlan(t *testing.T) {
	py, prog := anyPython(t), writeGloo(t).Program
	sizes := []int{1, 3, 4, 7, 8, 1000, 8192, 8193, 8196, 65536, 1<<20 - 4, 1 << 20, 4 << 20, 16 << 20}
	spec := make([]string, len(sizes))
	for i, s := range sizes {
		spec[i] = strconv.Itoa(s)
	}
	for _, name := range GlooTests {
		tt, ok := osu.Find(name)
		if !ok {
			t.Fatalf("%s is not a test of multirail osu", name)
		}
		iters := [][2]int{{0, 0}}
		if name == "allreduce" || name == "bw" {
			iters = append(iters, [2]int{7, 0}, [2]int{0, 3})
		}
		for _, it := range iters {
			out, err := exec.Command(py, prog, "--plan", name, strings.Join(spec, ","), strconv.Itoa(it[0]), strconv.Itoa(it[1])).CombinedOutput()
			if err != nil {
				t.Fatalf("%s --plan: %v: %s", name, err, out)
			}
			want := slices.Clone(sizes)
			switch {
			case name == "barrier":
				want = []int{0}
			case tt.Kind == osu.Coll:
				want = osu.ElemSizes(want)
			}
			var lines []string
			for _, s := range want {
				p := osu.Plan{Test: tt, Iters: it[0], Warmup: it[1]}
				iters, warmup := p.ItersFor(s)
				lines = append(lines, fmt.Sprintf("PLAN %s %d %d %d", name, s, iters, warmup))
			}
			if got := strings.TrimSpace(string(out)); got != strings.Join(lines, "\n") {
				t.Errorf("%s %v:\n got %s\nwant %s", name, it, got, strings.Join(lines, "\n"))
			}
		}
	}
}

// TestGlooOSUBadArgs: bad arguments are one line on stderr and exit
// status 2, as mrosu's, before torch is imported.
func TestGlooOSUBadArgs(t *testing.T) {
	py, prog := anyPython(t), writeGloo(t).Program
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"allreduce"}, "gloo_osu: usage: gloo_osu [--validate] [--backend gloo|multirail] TEST SIZES [ITERS [WARMUP]], got 1 arguments; TEST one of latency, bw, bibw, barrier, bcast, allreduce, allgather, reduce-scatter, alltoall"},
		{[]string{"allredux", "4"}, `gloo_osu: unknown test "allredux"; allowed: latency, bw, bibw, barrier, bcast, allreduce, allgather, reduce-scatter, alltoall`},
		{[]string{"allreduce", "4,1k"}, `gloo_osu: SIZES "4,1k": "1k" is not a size in bytes; allowed: comma-separated sizes 1..67108864 or MIN:MAX ranges`},
		{[]string{"allreduce", "67108865"}, `gloo_osu: SIZES "67108865": size 67108865 is out of range: allowed 1..67108864 bytes`},
		{[]string{"allreduce", "8:4"}, `gloo_osu: SIZES "8:4": range 8:4 has MIN > MAX; want MIN:MAX with MIN <= MAX`},
		{[]string{"allreduce", ","}, `gloo_osu: SIZES ",": no sizes; want a comma-separated list of sizes in bytes or MIN:MAX ranges`},
		{[]string{"allreduce", "1,3"}, `gloo_osu: SIZES "1,3": every size is below 4 bytes; allreduce moves 4-byte float32 elements`},
		{[]string{"bw", "16777217"}, `gloo_osu: SIZES "16777217": 16777217 bytes is too large for bw, which has 64 messages in flight: allowed up to 16777216`},
		{[]string{"allreduce", "4", "-1"}, `gloo_osu: ITERS "-1" is out of range: allowed 1..1000000, or 0 for the defaults by size`},
		{[]string{"allreduce", "4", "10", "x"}, `gloo_osu: WARMUP "x" is out of range: allowed 1..1000000, or 0 for the defaults by size`},
		{[]string{"--fast", "allreduce", "4"}, `gloo_osu: unknown option "--fast"; allowed: --validate, --backend gloo|multirail, --plan`},
		{[]string{"--backend", "nccl", "allreduce", "4"}, `gloo_osu: --backend "nccl": unknown backend; allowed: gloo, multirail`},
		{[]string{"--backend=mpi", "allreduce", "4"}, `gloo_osu: --backend "mpi": unknown backend; allowed: gloo, multirail`},
		{[]string{"--backend"}, `gloo_osu: --backend needs a value; allowed: gloo, multirail`},
		{[]string{"latency", "4"}, "gloo_osu: latency needs at least 2 ranks; this job has 1"},
	} {
		cmd := exec.Command(py, append([]string{prog}, tc.args...)...)
		cmd.Env = append(os.Environ(), "RANK=0", "WORLD_SIZE=1")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.HasPrefix(errb.String(), tc.want) ||
			strings.Count(errb.String(), "\n") != 1 || out.Len() != 0 {
			t.Errorf("%q: %v; stderr %q, stdout %q; want exit status 2 and one line starting %q", tc.args, err, errb.String(), out.String(), tc.want)
		}
	}
	// Ranks other than 0 say nothing.
	cmd := exec.Command(py, prog, "allredux", "4")
	cmd.Env = append(os.Environ(), "RANK=1", "WORLD_SIZE=2")
	if out, err := cmd.CombinedOutput(); err == nil || len(out) != 0 {
		t.Errorf("rank 1: %v: %q", err, out)
	}
}

// TestGlooOSUMirrorsGo keeps the constants of gloo_osu.py in step with
// comm/osu.
func TestGlooOSUMirrorsGo(t *testing.T) {
	src := string(GlooOSUSource)
	for _, want := range []string{
		fmt.Sprintf("MIN_SIZE = %d\n", osu.MinSize),
		fmt.Sprintf("MAX_SIZE = %d << 20\n", osu.MaxSize>>20),
		fmt.Sprintf("MAX_BW_SIZE = %d << 20\n", osu.MaxBWSize>>20),
		fmt.Sprintf("WINDOW = %d\n", osu.Window),
		fmt.Sprintf("MAX_ITERS = %d\n", osu.MaxIters),
	} {
		if !strings.Contains(src, want) {
			t.Errorf("gloo_osu.py lacks %q", want)
		}
	}
	if !slices.Equal(GlooTests, osu.Names()) || !slices.Equal(GlooTests, mpi.OSUTests) {
		t.Errorf("GlooTests %v, osu.Names %v", GlooTests, osu.Names())
	}
	for _, name := range GlooTests {
		if !strings.Contains(src, fmt.Sprintf("Test(%q, ", name)) {
			t.Errorf("gloo_osu.py lacks test %s", name)
		}
	}
}

func TestGlooFailure(t *testing.T) {
	stderr := `[W socket.cpp:601] [c10d] The client socket has failed to connect
gloo_osu: reduce-scatter: torch 1.13.1's gloo backend cannot run it: RuntimeError: ProcessGroupGloo does not support reduce_scatter
ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 3)
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned a non-zero exit code.`
	ge := glooFailure("reduce-scatter", stderr)
	if ge == nil || !ge.Unsupported || !errors.Is(ge, ErrGlooUnsupported) ||
		ge.Error() != "gloo_osu reduce-scatter: torch 1.13.1's gloo backend cannot run it: RuntimeError: ProcessGroupGloo does not support reduce_scatter" {
		t.Errorf("unsupported: %#v", ge)
	}
	ge = glooFailure("allreduce", "noise\ngloo_osu: rank 2: RuntimeError: Connection reset by peer\ngloo_osu: rank 1: RuntimeError: x\n")
	if ge == nil || ge.Unsupported || errors.Is(ge, ErrGlooUnsupported) || ge.Error() != "gloo_osu rank 2: RuntimeError: Connection reset by peer" {
		t.Errorf("other: %#v", ge)
	}
	if ge := glooFailure("allreduce", "mpirun noticed that process rank 0 exited on signal 9\n"); ge != nil {
		t.Errorf("nothing of its own: %#v", ge)
	}
}

func TestParseMROSU(t *testing.T) {
	out := "# gloo_osu: header\n# gloo_osu: busy 8 0.412 0.300\nMROSU allreduce 3 8 10.000 9.000 11.000 6400000.0 0.000 5 1\nsome noise\n" +
		"# gloo_osu: busy 4096 -1.000 0.2\nMROSU allreduce 3 4096 100.000 90.000 110.000 1.0 0.000 5 1\n"
	res, err := parseMROSU([]byte(out), "gloo_osu", "allreduce", 3)
	if err != nil || len(res) != 2 || !reflect.DeepEqual(res[0], CollResult{Test: "allreduce", Size: 8, Ranks: 3, AvgUs: 10, MinUs: 9, MaxUs: 11, BusBWBps: 6.4e6, Iters: 5, Warmup: 1, Busy: 0.412, RanksBusy: 0.3}) ||
		res[1].Busy != 0 || res[1].RanksBusy != 0.2 {
		t.Errorf("%+v, %v", res, err)
	}
	if res, err := parseMROSU([]byte("MROSU bw 2 4096 1.000 1.000 1.000 0.0 100.000 5 1\n"), "mrosu", "bw", 2); err != nil || res[0].BusBWBps != 800e6 {
		t.Errorf("bw: %+v, %v", res, err)
	}
	for _, tc := range []struct{ out, want string }{
		{"MROSU allreduce 4 8 1 1 1 1 0 5 1\n", `gloo_osu allreduce: result "MROSU allreduce 4 8 1 1 1 1 0 5 1" is of allreduce with 4 ranks, want allreduce with 3`},
		{"MROSU alltoall 3 8 1 1 1 1 0 5 1\n", "is of alltoall with 3 ranks, want allreduce with 3"},
		{"MROSU allreduce 3 8 1 1\n", "gloo_osu allreduce: mpi: malformed line"},
		{"# only a header\n", "gloo_osu allreduce printed no results: # only a header"},
	} {
		if _, err := parseMROSU([]byte(tc.out), "gloo_osu", "allreduce", 3); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.out, err, tc.want)
		}
	}
}

// requireTorch skips t unless Debian's torch with gloo is installed (CI
// does not install it), and returns its version.
func requireTorch(t *testing.T) string {
	t.Helper()
	v, err := GlooAvailable(context.Background())
	if err != nil {
		t.Skipf("python3-torch is not installed, so gloo cannot run (as root: sh scripts/lab-deps.sh --torch): %v", err)
	}
	return v
}

// checkMROSU checks results of test with ranks ranks, sizes (as
// measured), iters timed iterations: every size once, in order, and the
// bus bandwidth (collectives) or bandwidth (bw) recomputed from avg_us.
func checkMROSU(t *testing.T, res []CollResult, test string, ranks int, sizes []int, iters int) {
	t.Helper()
	tt, _ := osu.Find(test)
	var got []int
	for _, r := range res {
		got = append(got, r.Size)
		if r.Test != test || r.Ranks != ranks || r.Iters != iters || r.AvgUs <= 0 || r.MinUs > r.AvgUs || r.AvgUs > r.MaxUs {
			t.Errorf("%s: %+v; want %d ranks, %d iterations, 0 < min <= avg <= max", test, r, ranks, iters)
		}
		// From the printed (rounded) average: half its last digit.
		const usRound = 0.0005
		var lo, hi float64
		switch tt.Kind {
		case osu.Coll:
			bus := func(us float64) float64 { return tt.AlgBytes(r.Size, r.Ranks) * 8 / (us / 1e6) * tt.BusFactor(r.Ranks) }
			lo, hi = bus(r.AvgUs+usRound)-0.05, bus(r.AvgUs-usRound)+0.05
		case osu.BW:
			mbs := func(us float64) float64 { return float64(r.Size) / us * 8e6 }
			lo, hi = mbs(r.AvgUs+usRound)-8e6*0.0005, mbs(r.AvgUs-usRound)+8e6*0.0005
		default:
			continue
		}
		if r.BusBWBps < lo || r.BusBWBps > hi || math.IsNaN(r.BusBWBps) {
			t.Errorf("%s size %d: busbw %v bit/s; from avg %v us want %v..%v", test, r.Size, r.BusBWBps, r.AvgUs, lo, hi)
		}
	}
	if !slices.Equal(got, sizes) {
		t.Errorf("%s: sizes %v, want %v", test, got, sizes)
	}
}

// runGlooRanks starts np processes of gloo_osu.py with args on this
// machine, as torchrun would (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
// the loopback as GLOO_SOCKET_IFNAME), without torchrun's agents, which
// import torch too: rank 0's stdout, every rank's stderr, and rank 0's
// exit status (-1 if it did not exit).
func runGlooRanks(ctx context.Context, t *testing.T, prog string, np int, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var out, errb bytes.Buffer
	var cmds []*exec.Cmd
	for r := range np {
		cmd := exec.CommandContext(ctx, GlooPython, append([]string{prog}, args...)...)
		cmd.Env = append(os.Environ(), "GLOO_SOCKET_IFNAME=lo", "OMP_NUM_THREADS=1", "MASTER_ADDR=127.0.0.1",
			"MASTER_PORT="+strconv.Itoa(port), "RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(np))
		if r == 0 {
			cmd.Stdout = &out
		}
		cmd.Stderr = &syncWriter{w: &errb}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		cmd.Wait()
	}
	return out.String(), errb.String(), cmds[0].ProcessState.ExitCode()
}

// syncWriter serialises the writes of several processes' stderr.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestGlooOSURanks runs gloo_osu.py with two ranks on this machine (no
// lab, no root), validated: allreduce, bw, and reduce-scatter, which
// torch 1.13's gloo cannot run (exit status 3 and one line that says so).
// TestCollGlooIntegration runs it under torchrun and mpirun on a lab.
func TestGlooOSURanks(t *testing.T) {
	if testing.Short() {
		t.Skip("short: starts six Pythons that import torch")
	}
	requireTorch(t)
	prog := writeGloo(t).Program
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stdout, stderr, code := runGlooRanks(ctx, t, prog, 2, "--validate", "allreduce", "3,8,4096", "5", "1")
	if code != 0 {
		t.Fatalf("allreduce: exit status %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.HasPrefix(stdout, "# gloo_osu: OSU-style Allreduce Latency Test (torch ") || !strings.Contains(stdout, ", gloo), ranks 2, datatype float32, validated\n") {
		t.Errorf("header:\n%s", stdout)
	}
	if err := checkGlooHosts([]byte(stdout), []string{hostname(t), hostname(t)}, "gloo_osu"); err != nil {
		t.Error(err)
	}
	res, err := parseMROSU([]byte(stdout), "gloo_osu", "allreduce", 2)
	if err != nil {
		t.Fatal(err)
	}
	checkMROSU(t, res, "allreduce", 2, []int{8, 4096}, 5)

	stdout, stderr, code = runGlooRanks(ctx, t, prog, 2, "--validate", "bw", "1,65536", "3", "1")
	if code != 0 {
		t.Fatalf("bw: exit status %d\n%s\n%s", code, stdout, stderr)
	}
	if res, err = parseMROSU([]byte(stdout), "gloo_osu", "bw", 2); err != nil {
		t.Fatal(err)
	}
	checkMROSU(t, res, "bw", 2, []int{1, 65536}, 3)

	stdout, stderr, code = runGlooRanks(ctx, t, prog, 2, "--validate", "reduce-scatter", "20", "3", "1")
	if code == 0 {
		// A torch whose gloo has reduce_scatter.
		res, err := parseMROSU([]byte(stdout), "gloo_osu", "reduce-scatter", 2)
		if err != nil {
			t.Fatal(err)
		}
		checkMROSU(t, res, "reduce-scatter", 2, []int{20}, 3)
		return
	}
	ge := glooFailure("reduce-scatter", stderr)
	if code != 3 || ge == nil || !ge.Unsupported || !strings.Contains(ge.Error(), "gloo backend cannot run it: RuntimeError: ProcessGroupGloo does not support reduce_scatter") ||
		strings.Count(stderr, "gloo_osu: ") != 1 || strings.Contains(stdout, "MROSU reduce") {
		t.Errorf("reduce-scatter: exit status %d, %#v\nstdout:\n%s\nstderr:\n%s", code, ge, stdout, stderr)
	}
}

func hostname(t *testing.T) string {
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestCollGlooIntegration runs gloo in the collective bench on a lab
// cluster of 3 hosts: allreduce and alltoall at two small sizes, a few
// iterations, validated. It needs root, the lab's tools, Open MPI and
// python3-torch; it skips without torch (CI does not install it).
func TestCollGlooIntegration(t *testing.T) {
	requireLab(t)
	torch := requireTorch(t)
	if err := mpi.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("mrc%04x", rand.IntN(1<<16))
	p := CollPlan{Lab: lab.Config{Hosts: 3, Rates: []float64{40e6, 20e6}, Prefix: prefix}, Tests: []string{"allreduce", "alltoall"},
		Sizes: []int{8, 4096}, Systems: []string{Gloo}, Iters: 5, Warmup: 1, Validate: true}
	if p.Lab, err = p.Lab.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	var started []string
	rep, err := RunColl(ctx, CollOptions{Plan: p, Exe: exe, Stderr: &stderr, RunTimeout: 2 * time.Minute}, CollHooks{
		RunStarts: func(n, total int, system, test string, round int) {
			started = append(started, fmt.Sprintf("%d/%d %s %s", n, total, system, test))
		},
	})
	if lab.Exists(prefix) {
		t.Errorf("lab %s is still up after the bench", prefix)
	}
	if err != nil {
		t.Fatalf("%v\n%+v\nstderr (last lines): %s", err, rep.Failed, lastLines(stderr.String(), 30))
	}
	if !slices.Equal(started, []string{"1/2 gloo allreduce", "2/2 gloo alltoall"}) {
		t.Errorf("runs: %q", started)
	}
	for _, test := range p.Tests {
		var res []CollResult
		for _, r := range rep.Results {
			if r.Test == test {
				if r.System != Gloo || r.Round != 1 {
					t.Errorf("%+v", r)
				}
				res = append(res, r)
			}
		}
		checkMROSU(t, res, test, 3, p.Sizes, 5)
		for _, r := range res {
			t.Logf("gloo %s %d B: %.1f us, busbw %.2f Mbit/s", r.Test, r.Size, r.AvgUs, r.BusBWBps/1e6)
		}
	}
	note := strings.Join(rep.Notes, "\n")
	if !strings.Contains(note, "gloo: torch.distributed "+torch+" ") || !strings.Contains(note, "GLOO_SOCKET_IFNAME=rail0,rail1") {
		t.Errorf("notes: %s", note)
	}
	// gloo_osu.py had nothing to complain about.
	sc := bufio.NewScanner(strings.NewReader(stderr.String()))
	for sc.Scan() {
		if strings.Contains(sc.Text(), "gloo_osu: ") {
			t.Errorf("gloo_osu said: %s", sc.Text())
		}
	}
}

func TestCheckGlooHosts(t *testing.T) {
	hosts := []string{"mrch0", "mrch1", "mrch2"}
	for _, tc := range []struct{ out, err string }{
		{"# gloo_osu: hosts of ranks 0..2: mrch0 mrch1 mrch2; GLOO_SOCKET_IFNAME=rail0\n", ""},
		{"# x\n# gloo_osu: hosts of ranks 0..2: mrch1 mrch0 mrch2; GLOO_SOCKET_IFNAME=rail0\n", ""},
		{"# gloo_osu: hosts of ranks 0..2: mrch0 mrch0 mrch2; GLOO_SOCKET_IFNAME=\n", "gloo_osu: ranks 0..2 ran on hosts mrch0 mrch0 mrch2, want one on each of mrch0 mrch1 mrch2"},
		{"MROSU allreduce 3 8 1 1 1 1 0 5 1\n", `gloo_osu printed no line "# gloo_osu: hosts of ranks "`},
	} {
		err := checkGlooHosts([]byte(tc.out), hosts, "gloo_osu")
		if (err == nil) != (tc.err == "") || (err != nil && !strings.HasPrefix(err.Error(), tc.err)) {
			t.Errorf("%q: %v, want %q", tc.out, err, tc.err)
		}
	}
}
