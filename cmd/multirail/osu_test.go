package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/multirail/multirail/comm"
	"github.com/multirail/multirail/comm/osu"
)

func TestParseOSUSizes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
	}{
		{"1:1024", []int{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}},
		{"4:1KiB", []int{4, 8, 16, 32, 64, 128, 256, 512, 1024}},
		{"3:100", []int{3, 6, 12, 24, 48, 96}}, // OSU's doubling from MIN
		{"1MiB", []int{1 << 20}},
		{"64KiB, 8,1k,8", []int{8, 1024, 65536}}, // sorted, no duplicates
		{"1:4,16:32", []int{1, 2, 4, 16, 32}},
		{"4MiB:4MiB", []int{4 << 20}},
		{"64MiB", []int{64 << 20}},
		{"8,", []int{8}},
	} {
		got, err := parseOSUSizes(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseOSUSizes(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "0", "0:16", "16:4", "abc", "1:abc", "65MiB", "1:128MiB", "4:", ":4", "-1", "1:2:3", ","} {
		_, err := parseOSUSizes(bad)
		var ue usageError
		if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), "--sizes") {
			t.Errorf("parseOSUSizes(%q): %v; want a usage error naming --sizes", bad, err)
		}
	}
}

func TestOSUUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"osu"}, "needs a TEST; allowed: latency, bw, bibw, barrier, bcast, allreduce, allgather, reduce-scatter, alltoall"},
		{[]string{"osu", "pingpong"}, `unknown test "pingpong"; allowed: latency`},
		{[]string{"osu", "bw", "bibw"}, "one TEST"},
		{[]string{"osu", "allreduce", "--algo", "bruck"}, `--algo "bruck": allreduce has no such algorithm; allowed: recursive-doubling, rabenseifner, ring`},
		{[]string{"osu", "allreduce", "--algo", "fastest"}, `--algo "fastest"`},
		{[]string{"osu", "latency", "--algo", "ring"}, "--algo applies to the collective tests"},
		{[]string{"osu", "bw", "--sizes", "0"}, `--sizes "0"`},
		{[]string{"osu", "bw", "--sizes", "4:1"}, "MIN > MAX"},
		{[]string{"osu", "allreduce", "--sizes", "1:2"}, "below 4 bytes"},
		{[]string{"osu", "bw", "--sched", "fastest"}, `--sched "fastest": unknown scheduler; allowed:`},
		{[]string{"osu", "bw", "--iters", "-1"}, "--iters -1 is out of range"},
		{[]string{"osu", "bw", "--warmup", "-2"}, "--warmup -2 is out of range"},
		{[]string{"osu", "bw", "--timeout", "-1s"}, "--timeout -1s"},
		{[]string{"osu", "bw", "--bogus"}, "unknown flag: --bogus"},
	} {
		code, stdout, stderr := runCLI(tc.args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

// launcherPrefixes are the environment variables of every launcher
// package launch detects: a test's children get none of them but those
// it sets.
var launcherPrefixes = []string{"MULTIRAIL_", "RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE=", "MASTER_",
	"TORCHELASTIC_", "OMPI_", "PMI_", "PMIX_", "MPI_LOCAL", "SLURM_", "JOB_COMPLETION_INDEX="}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !slices.ContainsFunc(launcherPrefixes, func(p string) bool { return strings.HasPrefix(kv, p) }) {
			env = append(env, kv)
		}
	}
	return env
}

func TestOSUInitFailure(t *testing.T) {
	for _, kv := range os.Environ() {
		for _, p := range launcherPrefixes {
			if strings.HasPrefix(kv, p) {
				k, _, _ := strings.Cut(kv, "=")
				t.Setenv(k, "") // empty counts as unset
			}
		}
	}
	code, stdout, stderr := runCLI("osu", "allreduce")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "no launcher detected") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 naming the missing launcher", code, stdout, stderr)
	}
}

// osuLocal runs the benchmark of args on every rank of an in-process
// world of n ranks and returns rank 0's stdout and stderr and every rank's
// error.
func osuLocal(t *testing.T, n int, args ...string) (stdout, stderr string, errs []error) {
	t.Helper()
	f := &osuFlags{}
	cmd := newOSU(&globals{})
	if err := cmd.ParseFlags(args[1:]); err != nil {
		t.Fatal(err)
	}
	f.sizes, _ = cmd.Flags().GetString("sizes")
	f.iters, _ = cmd.Flags().GetInt("iters")
	f.warmup, _ = cmd.Flags().GetInt("warmup")
	f.algo, _ = cmd.Flags().GetString("algo")
	f.validate, _ = cmd.Flags().GetBool("validate")
	f.json, _ = cmd.Flags().GetBool("json")
	p, err := f.plan([]string{args[0]}, cmd.Flags().Changed("sizes"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := comm.NewLocal(ctx, n, comm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var o, e bytes.Buffer
	errs = make([]error, n)
	var wg sync.WaitGroup
	defer closeLocal(cs)
	for r, c := range cs {
		wg.Go(func() {
			var finished atomic.Bool
			so, se := &bytes.Buffer{}, &bytes.Buffer{}
			if r == 0 {
				so, se = &o, &e
			}
			errs[r] = osuBench(ctx, c, p, so, se, &finished)
			if r != 0 && so.Len() > 0 {
				errs[r] = errors.Join(errs[r], fmt.Errorf("rank %d wrote %q on stdout", r, so.String()))
			}
		})
	}
	wg.Wait()
	return o.String(), e.String(), errs
}

// closeLocal closes the ranks of an in-process world one after the other:
// closing both ends of a multirail connection at once takes the transport's
// whole close linger (2.2 s), one after the other a millisecond.
func closeLocal(cs []*comm.Comm) {
	for _, c := range cs {
		c.Close()
	}
}

// TestOSUEveryTestInProcess runs every test on three ranks of one process
// (under -race, the data races of the benchmark code show here), checks
// the results and the table's columns.
func TestOSUEveryTestInProcess(t *testing.T) {
	for _, name := range osu.Names() {
		ot, _ := osu.Find(name)
		t.Run(ot.Name, func(t *testing.T) {
			args := []string{ot.Name, "--validate", "--sizes", "4,1000,16KiB", "--iters", "5", "--warmup", "1"}
			stdout, stderr, errs := osuLocal(t, 3, append(args, "--json")...)
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			var rep osu.Report
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("%v in %q", err, stdout)
			}
			wantSizes := []int{4, 1000, 16384}
			if ot.Coll == comm.CollBarrier && ot.Kind == osu.Coll {
				wantSizes = []int{0}
			}
			if rep.Test != ot.Name || rep.Ranks != 3 || rep.Launcher != "local" || !slices.Equal(rep.Rails, []int{0, 1, 1}) || len(rep.RailBytes) != 3 || len(rep.Results) != len(wantSizes) {
				t.Fatalf("report %+v", rep)
			}
			for i, r := range rep.Results {
				if r.Size != wantSizes[i] || !r.Validated || r.Iterations != 5 || r.Warmup != 1 || !(r.AvgUs > 0) || r.MinUs > r.AvgUs || r.MaxUs < r.AvgUs {
					t.Errorf("result %d: %+v", i, r)
				}
				isBW := ot.Kind == osu.BW || ot.Kind == osu.BiBW
				if (r.MBs != nil) != isBW || isBW && !(*r.MBs > 0) {
					t.Errorf("result %d: mb_s %v for %s", i, r.MBs, ot.Name)
				}
				hasBus := ot.Kind == osu.Coll && ot.Coll != comm.CollBarrier
				if (r.BusBWBps != nil) != hasBus || hasBus && !(*r.BusBWBps > 0) {
					t.Errorf("result %d: busbw_bps %v for %s", i, r.BusBWBps, ot.Name)
				}
				if (r.Algo != "") != (ot.Kind == osu.Coll) {
					t.Errorf("result %d: algo %q for %s", i, r.Algo, ot.Name)
				}
			}
			if rep.RailBytes[1][0] == 0 || len(rep.RailBytes[0]) != 0 {
				t.Errorf("rail_bytes %v", rep.RailBytes)
			}
			if !strings.Contains(stderr, "# bytes rank 0 sent per rail:\n#   to rank 1 (") {
				t.Errorf("stderr has no rail summary: %q", stderr)
			}
			if !strings.Contains(stderr, "\n#     per message (") || !strings.Contains(stderr, "seals ") {
				t.Errorf("stderr's rail summary has no per-message path counts: %q", stderr)
			}

			// The table.
			stdout, _, errs = osuLocal(t, 3, args...)
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
			if len(lines) != 3+len(wantSizes) || lines[0] != "# OSU MPI-style "+ot.Title+" Test (multirail)" {
				t.Fatalf("table:\n%s", stdout)
			}
			head := map[osu.Kind]string{osu.Latency: "# Size       Avg Latency(us)", osu.BW: "# Size      Bandwidth (MB/s)", osu.BiBW: "# Size      Bandwidth (MB/s)",
				osu.Coll: "# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations    Bus BW(Mbit/s)  Algorithm"}[ot.Kind]
			if ot.Coll == comm.CollBarrier && ot.Kind == osu.Coll {
				head = "# Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations  Algorithm"
			}
			if lines[2] != head {
				t.Errorf("header %q, want %q", lines[2], head)
			}
			for i, l := range lines[3:] {
				f := strings.Fields(l)
				if ot.Coll == comm.CollBarrier && ot.Kind == osu.Coll {
					if len(f) != 5 || f[3] != "5" {
						t.Errorf("row %q", l)
					}
					continue
				}
				if len(f) < 2 || f[0] != strconv.Itoa(wantSizes[i]) {
					t.Errorf("row %q, want size %d first", l, wantSizes[i])
				}
			}
		})
	}
}

func TestOSUAlgoAndErrors(t *testing.T) {
	stdout, _, errs := osuLocal(t, 4, "allreduce", "--json", "--algo", "ring", "--sizes", "64,4KiB", "--iters", "3", "--warmup", "1", "--validate")
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var rep osu.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.Algo != "ring" {
			t.Errorf("size %d ran %q, want ring (forced)", r.Size, r.Algo)
		}
	}
	_, _, errs = osuLocal(t, 1, "latency", "--sizes", "8", "--iters", "2")
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "needs at least 2 ranks; this job has 1") {
		t.Errorf("latency on one rank: %v", errs[0])
	}
}

// osuChildEnv names the file a child test process writes the command's
// stdout to; osuChildArgs holds its arguments (JSON).
const (
	osuChildOut  = "MULTIRAIL_OSU_TEST_OUT"
	osuChildArgs = "MULTIRAIL_OSU_TEST_ARGS"
)

// TestOSUChild is one rank of TestOSUProcesses: this test binary started
// again, running the multirail command.
func TestOSUChild(t *testing.T) {
	spec := os.Getenv(osuChildArgs)
	if spec == "" {
		t.Skip("a rank of TestOSUProcesses")
	}
	var args []string
	if err := json.Unmarshal([]byte(spec), &args); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(os.Getenv(osuChildOut))
	if err != nil {
		t.Fatal(err)
	}
	code := run(args, out, os.Stderr)
	out.Close()
	if code != 0 {
		os.Exit(code)
	}
}

// osuProcs runs args as n ranks in n processes, each with the variables a
// user sets by hand (MULTIRAIL_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE,
// _JOB_ID, _RDZV) plus extra, and returns every rank's stdout and stderr.
func osuProcs(t *testing.T, n int, extra []string, args ...string) (stdout, stderr []string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	spec, _ := json.Marshal(append([]string{"osu"}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	job := fmt.Sprintf("osu-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	cmds := make([]*exec.Cmd, n)
	errBufs := make([]*bytes.Buffer, n)
	for i := range n {
		cmd := exec.CommandContext(ctx, exe, "-test.run=^TestOSUChild$", "-test.count=1")
		cmd.Env = append(cleanEnv(),
			osuChildArgs+"="+string(spec),
			osuChildOut+"="+filepath.Join(dir, fmt.Sprintf("out%d", i)),
			fmt.Sprintf("MULTIRAIL_RANK=%d", i), fmt.Sprintf("MULTIRAIL_SIZE=%d", n),
			fmt.Sprintf("MULTIRAIL_LOCAL_RANK=%d", i), fmt.Sprintf("MULTIRAIL_LOCAL_SIZE=%d", n),
			"MULTIRAIL_JOB_ID="+job, "MULTIRAIL_RDZV=file://"+filepath.Join(dir, "rdzv"))
		cmd.Env = append(cmd.Env, extra...)
		errBufs[i] = &bytes.Buffer{}
		cmd.Stderr = errBufs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	var failed []string
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			failed = append(failed, fmt.Sprintf("rank %d: %v, stderr:\n%s", i, err, errBufs[i]))
		}
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("out%d", i)))
		stdout = append(stdout, string(b))
		stderr = append(stderr, errBufs[i].String())
	}
	if len(failed) > 0 {
		t.Fatalf("osu %q on %d processes:\n%s", args, n, strings.Join(failed, "\n"))
	}
	for i := 1; i < n; i++ {
		if stdout[i] != "" {
			t.Errorf("rank %d printed on stdout: %q", i, stdout[i])
		}
	}
	return stdout, stderr
}

// TestOSUProcesses runs the command as ranks in separate processes, as a
// launcher starts them.
func TestOSUProcesses(t *testing.T) {
	if os.Getenv(osuChildArgs) != "" {
		t.Skip("a child")
	}
	decode := func(t *testing.T, out string) osu.Report {
		t.Helper()
		var rep osu.Report
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rep); err != nil || dec.More() {
			t.Fatalf("stdout is not one report object (%v):\n%s", err, out)
		}
		return rep
	}
	t.Run("allreduce", func(t *testing.T) {
		t.Parallel()
		out, _ := osuProcs(t, 3, nil, "allreduce", "--validate", "--json", "--sizes", "4:4096", "--iters", "20", "--warmup", "2")
		rep := decode(t, out[0])
		if rep.Test != "allreduce" || rep.Ranks != 3 || rep.Launcher != "multirail" || !slices.Equal(rep.Rails, []int{0, 1, 1}) || len(rep.Results) != 11 {
			t.Fatalf("report %+v", rep)
		}
		for i, r := range rep.Results {
			if r.Size != 4<<i || !r.Validated || r.BusBWBps == nil || !(*r.BusBWBps > 0) || r.MBs != nil || r.Iterations != 20 || r.Algo == "" {
				t.Errorf("result %d: %+v", i, r)
			}
		}
	})
	t.Run("alltoall", func(t *testing.T) {
		t.Parallel()
		out, _ := osuProcs(t, 4, nil, "alltoall", "--validate", "--json", "--sizes", "4,1KiB,16KiB", "--iters", "10", "--warmup", "1")
		rep := decode(t, out[0])
		if rep.Ranks != 4 || len(rep.Results) != 3 || len(rep.RailBytes) != 4 {
			t.Fatalf("report %+v", rep)
		}
		for i, r := range rep.Results {
			if !r.Validated || !(r.AvgUs > 0) || r.MinUs > r.MaxUs {
				t.Errorf("result %d: %+v", i, r)
			}
		}
	})
	t.Run("bw-emulated-rails", func(t *testing.T) {
		// Every rail of the pair carries bytes.
		t.Parallel()
		out, errs := osuProcs(t, 2, []string{"MULTIRAIL_EMU=emu:400mbit,emu:200mbit"},
			"bw", "--json", "--validate", "--sizes", "64KiB", "--iters", "4", "--warmup", "1")
		rep := decode(t, out[0])
		if !slices.Equal(rep.Rails, []int{0, 2}) || !slices.Equal(rep.RailNames[1], []string{"emu0", "emu1"}) || len(rep.Results) != 1 {
			t.Fatalf("report %+v", rep)
		}
		for k, b := range rep.RailBytes[1] {
			if b < 1<<20 {
				t.Errorf("rail %s carried %d bytes, want every rail > 1 MiB of the 20 MiB sent", rep.RailNames[1][k], b)
			}
		}
		r := rep.Results[0]
		if r.MBs == nil || !(*r.MBs > 1) || *r.MBs > 600e6/8/1e6*1.2 || !r.Validated {
			t.Errorf("result %+v (mb_s %v), want 1..90 MB/s on 600 Mbit/s of rails", r, r.MBs)
		}
		if !strings.Contains(errs[0], "#   to rank 1 (") || !strings.Contains(errs[0], "emu0 ") || !strings.Contains(errs[0], "emu1 ") {
			t.Errorf("rank 0's stderr has no rail summary:\n%s", errs[0])
		}
	})
	t.Run("latency-table", func(t *testing.T) {
		t.Parallel()
		out, errs := osuProcs(t, 2, nil, "latency", "--sizes", "1:16", "--iters", "20", "--warmup", "2")
		lines := strings.Split(strings.TrimSuffix(out[0], "\n"), "\n")
		if len(lines) != 8 || lines[0] != "# OSU MPI-style Latency Test (multirail)" || lines[2] != "# Size       Avg Latency(us)" || !strings.HasPrefix(lines[3], "1 ") {
			t.Errorf("stdout:\n%s", out[0])
		}
		for r, e := range errs {
			if strings.Contains(e, "level=WARN") {
				t.Errorf("rank %d warned:\n%s", r, e)
			}
		}
	})
}

func TestQuietEndHandler(t *testing.T) {
	var buf bytes.Buffer
	var finished atomic.Bool
	log := slog.New(quietEndHandler{slog.NewTextHandler(&buf, nil), &finished}).With("rank", 1)
	log.Warn("comm: connection to a peer ended", "peer", 0)
	log.Warn("something else")
	finished.Store(true)
	log.Warn("comm: connection to a peer ended", "peer", 2)
	log.Warn("rail down; resending its segments on the others")
	log.Warn("something else after")
	got := buf.String()
	if strings.Count(got, "\n") != 3 || !strings.Contains(got, "peer=0") || strings.Contains(got, "peer=2") || !strings.Contains(got, "something else after") {
		t.Errorf("logged:\n%s", got)
	}
}
