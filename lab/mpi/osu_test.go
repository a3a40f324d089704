package mpi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail/comm/osu"
)

func TestCollArgs(t *testing.T) {
	base := CollJob{
		Hosts: []string{"mr0", "mr1", "mr2"}, RshAgent: "/usr/bin/multirail lab rsh", OOBNet: "10.10.99.0/24",
		RailNets: []string{"10.10.1.0/24", "10.10.2.0/24"}, RailDevs: []string{"rail0", "rail1"},
		Program: "/cache/mrosu-0123", Test: "allreduce", Sizes: []int{4, 1024, 1 << 20},
	}
	common := []string{
		"mpirun", "-np", "3", "--host", "mr0:1,mr1:1,mr2:1", "--bind-to", "none",
		"--mca", "plm_rsh_agent", "/usr/bin/multirail lab rsh",
		"--mca", "oob_tcp_if_include", "10.10.99.0/24",
		"--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
		"--mca", "btl_tcp_if_include", "10.10.1.0/24,10.10.2.0/24",
	}
	yield := []string{"--mca", "mpi_yield_when_idle", "1"}
	cat := func(parts ...[]string) []string { return slices.Concat(parts...) }
	for _, tc := range []struct {
		name string
		edit func(*CollJob)
		want []string
	}{
		{"defaults", func(*CollJob) {},
			cat(common, yield, []string{"/cache/mrosu-0123", "allreduce", "4,1024,1048576", "0", "0"})},
		{"iterations and validation", func(j *CollJob) { j.Iters, j.Warmup, j.Validate = 50, 5, true },
			cat(common, yield, []string{"/cache/mrosu-0123", "--validate", "allreduce", "4,1024,1048576", "50", "5"})},
		{"weights", func(j *CollJob) { j.BandwidthMbps = []int{200, 100} },
			cat(common, []string{"--mca", "btl_tcp_bandwidth_rail0", "200", "--mca", "btl_tcp_bandwidth_rail1", "100"}, yield,
				[]string{"/cache/mrosu-0123", "allreduce", "4,1024,1048576", "0", "0"})},
		{"weights without devices are dropped", func(j *CollJob) { j.RailDevs, j.BandwidthMbps = j.RailDevs[:1], []int{200, 100} },
			cat(common, []string{"--mca", "btl_tcp_bandwidth_rail0", "200"}, yield,
				[]string{"/cache/mrosu-0123", "allreduce", "4,1024,1048576", "0", "0"})},
		{"point to point, one size", func(j *CollJob) { j.Test, j.Sizes = "bw", []int{65536} },
			cat(common, yield, []string{"/cache/mrosu-0123", "bw", "65536", "0", "0"})},
	} {
		j := base
		j.RailDevs = slices.Clone(base.RailDevs)
		tc.edit(&j)
		if got := CollArgs(j); !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}

	// Four hosts: -np and --host follow them.
	j := base
	j.Hosts = []string{"a", "b", "c", "d"}
	got := strings.Join(CollArgs(j), " ")
	if !strings.HasPrefix(got, "mpirun -np 4 --host a:1,b:1,c:1,d:1 --bind-to none ") {
		t.Errorf("four hosts: %s", got)
	}
	// Args (mrbw's) shares the start and has no yield.
	a := Args(Job{Hosts: [2]string{"mr0", "mr1"}, RshAgent: base.RshAgent, OOBNet: base.OOBNet, RailNets: base.RailNets, Program: "/cache/mrbw", Size: 1, Seconds: 1, Window: 1})
	if strings.Contains(strings.Join(a, " "), "mpi_yield_when_idle") || a[2] != "2" || a[4] != "mr0:1,mr1:1" {
		t.Errorf("Args: %q", a)
	}
}

func TestParseOSULine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want OSUResult
		err  error // nil, ErrNoResult or ErrMalformed
	}{
		{"MROSU allreduce 4 1024 172.408 106.920 219.554 69602424.4 0.000 20 2",
			OSUResult{Test: "allreduce", Ranks: 4, Size: 1024, AvgUs: 172.408, MinUs: 106.920, MaxUs: 219.554, BusBWBps: 69602424.4, Iters: 20, Warmup: 2}, nil},
		{"MROSU latency 2 1 38.071 31.265 76.837 0.0 0.000 1000 100",
			OSUResult{Test: "latency", Ranks: 2, Size: 1, AvgUs: 38.071, MinUs: 31.265, MaxUs: 76.837, Iters: 1000, Warmup: 100}, nil},
		{"  MROSU\tbw 2 4096 9.487 6.618 15.399 0.0 431.747 100 10  ",
			OSUResult{Test: "bw", Ranks: 2, Size: 4096, AvgUs: 9.487, MinUs: 6.618, MaxUs: 15.399, MBs: 431.747, Iters: 100, Warmup: 10}, nil},
		{"MROSU barrier 1 0 0.000 0.000 0.000 0.0 0.000 3 0",
			OSUResult{Test: "barrier", Ranks: 1, Iters: 3}, nil},
		{"# MROSU test ranks size avg_us min_us max_us busbw_bps mb_s iters warmup", OSUResult{}, ErrNoResult},
		{"# mrosu: OSU-style Allreduce Latency Test (Open MPI), ranks 4, datatype float32", OSUResult{}, ErrNoResult},
		{"[mr0:01234] some Open MPI warning", OSUResult{}, ErrNoResult},
		{"MRBW done 10 167772160 4.016843", OSUResult{}, ErrNoResult},
		{"mrosu allreduce 4 1024 1 1 1 1 0 20 2", OSUResult{}, ErrNoResult},
		{"", OSUResult{}, ErrNoResult},
		{"MROSU", OSUResult{}, ErrMalformed},
		{"MROSU allreduce 4 1024 172.4 106.9 219.5 69602424.4 0.000 20", OSUResult{}, ErrMalformed},
		{"MROSU allreduce 4 1024 172.4 106.9 219.5 69602424.4 0.000 20 2 7", OSUResult{}, ErrMalformed},
		{"MROSU allredux 4 1024 172.4 106.9 219.5 69602424.4 0.000 20 2", OSUResult{}, ErrMalformed},
		{"MROSU allreduce four 1024 172.4 106.9 219.5 69602424.4 0.000 20 2", OSUResult{}, ErrMalformed},
		{"MROSU allreduce 0 1024 172.4 106.9 219.5 69602424.4 0.000 20 2", OSUResult{}, ErrMalformed},
		{"MROSU allreduce 4 -4 172.4 106.9 219.5 69602424.4 0.000 20 2", OSUResult{}, ErrMalformed},
		{"MROSU allreduce 4 1024 1e3x 106.9 219.5 69602424.4 0.000 20 2", OSUResult{}, ErrMalformed},
		{"MROSU allreduce 4 1024 -1 -2 219.5 69602424.4 0.000 20 2", OSUResult{}, ErrMalformed},
		{"MROSU allreduce 4 1024 NaN 106.9 219.5 69602424.4 0.000 20 2", OSUResult{}, ErrMalformed},
		{"MROSU allreduce 4 1024 172.4 106.9 219.5 +Inf 0.000 20 2", OSUResult{}, ErrMalformed},
		{"MROSU allreduce 4 1024 172.4 106.9 219.5 69602424.4 0.000 0 2", OSUResult{}, ErrMalformed},
		{"MROSU allreduce 4 1024 172.4 106.9 219.5 69602424.4 0.000 20 -1", OSUResult{}, ErrMalformed},
		{"MROSU allreduce 4 1024 172.4 106.9 219.5 69602424.4 0.000 2.5 2", OSUResult{}, ErrMalformed},
		{"MROSU allreduce 4 1024 100 106.9 219.5 69602424.4 0.000 20 2", OSUResult{}, ErrMalformed}, // avg < min
		{"MROSU allreduce 4 1024 300 106.9 219.5 69602424.4 0.000 20 2", OSUResult{}, ErrMalformed}, // avg > max
	} {
		got, err := ParseOSULine(tc.line)
		switch {
		case tc.err == nil && err != nil:
			t.Errorf("%q: %v", tc.line, err)
		case tc.err == nil && got != tc.want:
			t.Errorf("%q:\n got %+v\nwant %+v", tc.line, got, tc.want)
		case tc.err != nil && !errors.Is(err, tc.err):
			t.Errorf("%q: err %v, want %v", tc.line, err, tc.err)
		case errors.Is(err, ErrMalformed) && !strings.Contains(err.Error(), strings.TrimSpace(tc.line)):
			t.Errorf("%q: the error %q does not quote the line", tc.line, err)
		case errors.Is(err, ErrMalformed) && errors.Is(err, ErrNoResult):
			t.Errorf("%q: a malformed line must not be ErrNoResult too", tc.line)
		}
	}
}

// TestOSUTests keeps OSUTests in step with `multirail osu`'s tests.
func TestOSUTests(t *testing.T) {
	if !slices.Equal(OSUTests, osu.Names()) {
		t.Errorf("OSUTests %v, osu.Names %v", OSUTests, osu.Names())
	}
}

// strictMPI reports whether missing or broken Open MPI fails the tests
// instead of skipping them: under CI (CI=true) as root, where .ci/run
// installs it (scripts/lab-deps.sh).
func strictMPI() bool {
	return os.Getenv("CI") == "true" && os.Geteuid() == 0
}

// mpiUnavailable skips t, or fails it under CI as root.
func mpiUnavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if strictMPI() {
		t.Fatalf("%s (CI=true as root: .ci/run should have installed Open MPI with scripts/lab-deps.sh)", msg)
	}
	t.Skip(msg)
}

// buildOSU builds mrosu into a temporary directory, or skips t when
// Open MPI is not installed (fails under CI as root).
func buildOSU(t *testing.T, ctx context.Context) string {
	t.Helper()
	if err := Available(); err != nil {
		mpiUnavailable(t, "%v", err)
	}
	dir := t.TempDir()
	bin, err := BuildOSU(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := BuildOSU(ctx, dir); err != nil || again != bin {
		t.Fatalf("second BuildOSU: %q, %v; want the cached %q", again, err, bin)
	}
	if filepath.Dir(bin) != dir || !strings.HasPrefix(filepath.Base(bin), "mrosu-") {
		t.Errorf("binary %s: want mrosu-HASH in %s", bin, dir)
	}
	return bin
}

// localMPIRun is mpirun with np ranks on this machine, over TCP, sharing
// its cores.
func localMPIRun(np int) []string {
	return []string{"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", strconv.Itoa(np),
		"--mca", "btl", "tcp,self", "--mca", "pml", "ob1", "--bind-to", "none", "--mca", "mpi_yield_when_idle", "1"}
}

// runMPI runs argv with Env and returns its stdout, its stderr and its
// exit status (-1 if it did not exit).
func runMPI(ctx context.Context, argv []string) (stdout, stderr string, code int, err error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), Env()...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), cmd.ProcessState.ExitCode(), err
}

// osuRun is one mrosu run of TestOSURun and what it must print.
type osuRun struct {
	test          string
	np            int
	sizes         string // SIZES as given
	iters, warmup int    // as given; 0: the defaults
}

// wantSizes are the sizes mrosu measures of r.sizes, as `multirail osu`
// plans them.
func (r osuRun) wantSizes(t *testing.T) []int {
	var sizes []int
	for _, s := range strings.Split(r.sizes, ",") {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("size %q: %v", s, err)
		}
		sizes = append(sizes, v)
	}
	sort.Ints(sizes)
	sizes = slices.Compact(sizes)
	tt, _ := osu.Find(r.test)
	switch {
	case tt.Kind == osu.Coll && r.test == "barrier":
		return []int{0}
	case tt.Kind == osu.Coll:
		return osu.ElemSizes(sizes)
	}
	return sizes
}

// check checks mrosu's output of r: the header, then one result per size
// that agrees with `multirail osu`'s formulas.
func (r osuRun) check(t *testing.T, stdout string) {
	t.Helper()
	tt, ok := osu.Find(r.test)
	if !ok {
		t.Fatalf("unknown test %s", r.test)
	}
	var res []OSUResult
	header := 0
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		line := sc.Text()
		got, err := ParseOSULine(line)
		switch {
		case errors.Is(err, ErrNoResult):
			if strings.HasPrefix(line, "#") {
				header++
			}
		case err != nil:
			t.Errorf("%s: %v", r.test, err)
		default:
			res = append(res, got)
		}
	}
	if header != 2 || !strings.HasPrefix(stdout, "# mrosu: OSU-style "+tt.Title+" Test") {
		t.Errorf("%s: %d header lines, want 2 before the results:\n%s", r.test, header, stdout)
	}
	want := r.wantSizes(t)
	if len(res) != len(want) {
		t.Fatalf("%s: %d results, want %d (sizes %v):\n%s", r.test, len(res), len(want), want, stdout)
	}
	const usRound, bpsRound, mbsRound = 0.0005, 0.05, 0.0005 // half the last printed digit
	for i, g := range res {
		wi, ww := osu.DefaultIters(tt.Kind, want[i])
		if r.iters > 0 {
			wi = r.iters
		}
		if r.warmup > 0 {
			ww = r.warmup
		}
		if g.Test != r.test || g.Ranks != r.np || g.Size != want[i] || g.Iters != wi || g.Warmup != ww {
			t.Errorf("%s: result %d is %+v; want ranks %d, size %d, %d iterations, %d warm-up", r.test, i, g, r.np, want[i], wi, ww)
		}
		if g.AvgUs <= 0 || g.MinUs <= 0 || g.MaxUs <= 0 {
			t.Errorf("%s size %d: times %v/%v/%v us, want them positive", r.test, g.Size, g.MinUs, g.AvgUs, g.MaxUs)
		}
		// busbw_bps = AlgBytes x 8 / avg x BusFactor, from the printed
		// (rounded) average.
		busbw := func(avgUs float64) float64 {
			return tt.AlgBytes(g.Size, g.Ranks) * 8 / (avgUs / 1e6) * tt.BusFactor(g.Ranks)
		}
		switch {
		case tt.Kind != osu.Coll || r.test == "barrier":
			if g.BusBWBps != 0 {
				t.Errorf("%s size %d: busbw %v, want 0", r.test, g.Size, g.BusBWBps)
			}
		case g.BusBWBps <= 0:
			t.Errorf("%s size %d: busbw %v, want it positive", r.test, g.Size, g.BusBWBps)
		default:
			lo, hi := busbw(g.AvgUs+usRound)-bpsRound, busbw(g.AvgUs-usRound)+bpsRound
			if g.BusBWBps < lo || g.BusBWBps > hi {
				t.Errorf("%s size %d: busbw %v bit/s; from avg %v us want %v (%v..%v)", r.test, g.Size, g.BusBWBps, g.AvgUs, busbw(g.AvgUs), lo, hi)
			}
		}
		// mb_s: the bytes of a message (both ways for bibw) per
		// microsecond per message.
		switch tt.Kind {
		case osu.BW, osu.BiBW:
			dirs := 1.0
			if tt.Kind == osu.BiBW {
				dirs = 2
			}
			mbs := func(avgUs float64) float64 { return dirs * float64(g.Size) / avgUs }
			lo, hi := mbs(g.AvgUs+usRound)-mbsRound, mbs(g.AvgUs-usRound)+mbsRound
			if g.MBs <= 0 || g.MBs < lo || g.MBs > hi {
				t.Errorf("%s size %d: %v MB/s; from avg %v us want %v (%v..%v)", r.test, g.Size, g.MBs, g.AvgUs, mbs(g.AvgUs), lo, hi)
			}
		default:
			if g.MBs != 0 {
				t.Errorf("%s size %d: mb_s %v, want 0", r.test, g.Size, g.MBs)
			}
		}
	}
}

// TestOSURun builds mrosu and runs every test with a few ranks on this
// machine (no lab), validated: the output parses and agrees with
// `multirail osu`'s sizes, iterations and formulas.
func TestOSURun(t *testing.T) {
	if testing.Short() {
		t.Skip("short: runs mpirun about ten times")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := buildOSU(t, ctx)
	runs := []osuRun{
		// The first run tells whether mpirun works here at all.
		{test: "allreduce", np: 4, sizes: "3,4,10,4096,8", iters: 5, warmup: 1},
		{test: "latency", np: 4, sizes: "7,1,4096"}, // defaults: 1000/100
		{test: "bw", np: 2, sizes: "1,65536"},       // defaults: 100/10 windows, then 20/2
		{test: "bibw", np: 2, sizes: "1,4096", iters: 5, warmup: 1},
		{test: "alltoall", np: 4, sizes: "4,1000,16384", iters: 5, warmup: 1},
		{test: "allgather", np: 4, sizes: "4,1000", iters: 5, warmup: 1},
		{test: "reduce-scatter", np: 4, sizes: "4,20,4096", iters: 5, warmup: 1}, // 4 bytes: 3 ranks get no element; 20: blocks 1,1,1,2
		{test: "bcast", np: 4, sizes: "16384,1048576"},                           // defaults: 100/10, then 20/2
		{test: "barrier", np: 4, sizes: "1", iters: 5, warmup: 1},
	}
	for i, r := range runs {
		argv := append(localMPIRun(r.np), bin, "--validate", r.test, r.sizes, strconv.Itoa(r.iters), strconv.Itoa(r.warmup))
		stdout, stderr, _, err := runMPI(ctx, argv)
		if err != nil {
			if i == 0 {
				mpiUnavailable(t, "mpirun could not run %d local ranks here (%v): %s", r.np, err, stderr)
			}
			t.Fatalf("%s: %v\n%s\n%s", strings.Join(argv, " "), err, stdout, stderr)
		}
		r.check(t, stdout)
	}
}

// TestOSUCollArgs runs the command line of CollArgs on this machine: four
// ranks on "localhost", the rails and the out-of-band network on the
// loopback.
func TestOSUCollArgs(t *testing.T) {
	if testing.Short() {
		t.Skip("short: runs mpirun")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bin := buildOSU(t, ctx)
	j := CollJob{
		Hosts: []string{"localhost", "localhost", "localhost", "localhost"}, RshAgent: "false", OOBNet: "127.0.0.0/8",
		RailNets: []string{"127.0.0.0/8"}, RailDevs: []string{"lo"}, BandwidthMbps: []int{100},
		Program: bin, Test: "alltoall", Sizes: []int{1024, 4}, Iters: 3, Warmup: 1, Validate: true,
	}
	argv := CollArgs(j)
	argv = append(argv[:1:1], append([]string{"--allow-run-as-root"}, argv[1:]...)...)
	stdout, stderr, _, err := runMPI(ctx, argv)
	if err != nil {
		mpiUnavailable(t, "%s: %v: %s", strings.Join(argv, " "), err, stderr)
	}
	osuRun{test: "alltoall", np: 4, sizes: "1024,4", iters: 3, warmup: 1}.check(t, stdout)
}

// TestOSUBadArgs runs mrosu with bad arguments: exit status 2 and one
// line on stderr (rank 0's) that names the value and what is allowed. It
// runs mrosu as an MPI singleton, without mpirun, where that works (mpirun
// takes seconds to end a job whose ranks failed), else under mpirun -np 1;
// and once under mpirun with two ranks.
func TestOSUBadArgs(t *testing.T) {
	if testing.Short() {
		t.Skip("short: runs mrosu a dozen times")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := buildOSU(t, ctx)
	// check runs argv and checks that it fails as it should.
	check := func(argv []string, want string) (ok bool) {
		t.Helper()
		stdout, stderr, code, _ := runMPI(ctx, argv)
		var ours []string
		for _, l := range strings.Split(stderr, "\n") {
			if strings.HasPrefix(l, "mrosu") {
				ours = append(ours, l)
			}
		}
		if code != 2 || len(ours) != 1 || !strings.HasPrefix(ours[0], want) || strings.Contains(stdout, "MROSU") {
			t.Errorf("%s: exit status %d, mrosu's lines on stderr %q; want 2 and one line starting %q\nstdout:\n%s\nstderr:\n%s",
				strings.Join(argv, " "), code, ours, want, stdout, stderr)
			return false
		}
		return true
	}
	launcher := []string{bin}
	if _, stderr, code, _ := runMPI(ctx, []string{bin, "allredux", "4"}); code != 2 || !strings.HasPrefix(stderr, "mrosu: ") {
		t.Logf("mrosu does not run as a singleton here (exit status %d: %s); using mpirun -np 1", code, strings.TrimSpace(stderr))
		launcher = append(localMPIRun(1), bin)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"allreduce"}, "mrosu: usage: mrosu [--validate] TEST SIZES [ITERS [WARMUP]], got 1 arguments; TEST one of latency, bw, bibw, barrier, bcast, allreduce, allgather, reduce-scatter, alltoall"},
		{[]string{"allredux", "4"}, `mrosu: unknown test "allredux"; allowed: latency, bw, bibw, barrier, bcast, allreduce, allgather, reduce-scatter, alltoall`},
		{[]string{"allreduce", "4,1k"}, `mrosu: SIZES "4,1k": "1k" is not a size in bytes; allowed: comma-separated sizes 1..67108864 or MIN:MAX ranges`},
		{[]string{"allreduce", "67108865"}, `mrosu: SIZES "67108865": size 67108865 is out of range: allowed 1..67108864 bytes`},
		{[]string{"allreduce", "8:4"}, `mrosu: SIZES "8:4": range 8:4 has MIN > MAX; want MIN:MAX with MIN <= MAX`},
		{[]string{"allreduce", ","}, `mrosu: SIZES ",": no sizes; want a comma-separated list of sizes in bytes or MIN:MAX ranges`},
		{[]string{"allreduce", "1,3"}, `mrosu: SIZES "1,3": every size is below 4 bytes; allreduce moves 4-byte float32 elements`},
		{[]string{"bw", "16777217"}, `mrosu: SIZES "16777217": 16777217 bytes is too large for bw, which has 64 messages in flight: allowed up to 16777216`},
		{[]string{"allreduce", "4", "-1"}, `mrosu: ITERS "-1" is out of range: allowed 1..1000000, or 0 for the defaults by size`},
		{[]string{"allreduce", "4", "10", "x"}, `mrosu: WARMUP "x" is out of range: allowed 1..1000000, or 0 for the defaults by size`},
		{[]string{"--fast", "allreduce", "4"}, `mrosu: unknown option "--fast"; allowed: --validate`},
		{[]string{"latency", "4"}, "mrosu: latency needs at least 2 ranks; this job has 1"},
	} {
		check(append(slices.Clone(launcher), tc.args...), tc.want)
	}
	// Under mpirun with two ranks: one line (rank 0's), mpirun's exit status 2.
	check(append(localMPIRun(2), bin, "allreduce", "4", "1000001"), `mrosu: ITERS "1000001" is out of range: allowed 1..1000000`)
}

// TestOSUMirrorsGo keeps the constants of mrosu.c in step with comm/osu.
func TestOSUMirrorsGo(t *testing.T) {
	src := string(OSUSource)
	for _, want := range []string{
		fmt.Sprintf("#define MAX_SIZE (%dL << 20)", osu.MaxSize>>20),
		fmt.Sprintf("#define MAX_BW_SIZE (%dL << 20)", osu.MaxBWSize>>20),
		fmt.Sprintf("#define WINDOW %d\n", osu.Window),
		fmt.Sprintf("#define MAX_ITERS %dL", osu.MaxIters),
		fmt.Sprintf("#define MIN_SIZE %dL", osu.MinSize),
	} {
		if !strings.Contains(src, want) {
			t.Errorf("mrosu.c lacks %q", want)
		}
	}
}
