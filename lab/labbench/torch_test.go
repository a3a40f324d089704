package labbench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail/lab"
	"github.com/multirail/multirail/lab/mpi"
)

func TestCollPlanRuns(t *testing.T) {
	p := CollPlan{Tests: []string{DDPTest, "allreduce"}, Systems: []string{"gloo", "torch-multirail", "torch-multirail-plaintext", "multirail-qlearn", "openmpi-default"}, Rounds: 3}
	if got := p.Runs(); got != 3*(3+5) {
		t.Errorf("runs %d, want %d", got, 3*(3+5))
	}
	for _, tc := range []struct {
		sys, test string
		want      bool
	}{
		{"gloo", DDPTest, true}, {"torch-multirail-plaintext", DDPTest, true}, {"multirail-qlearn", DDPTest, false},
		{"openmpi-weighted", DDPTest, false}, {"multirail-qlearn", "allreduce", true}, {"torch-multirail", "latency", true},
	} {
		if Applies(tc.sys, tc.test) != tc.want {
			t.Errorf("Applies(%s, %s) = %v", tc.sys, tc.test, !tc.want)
		}
	}
	if got := strings.Join(p.DDPArgs("multirail"), " "); got != "--backend multirail --batch 8 --steps 30 --warmup 5" {
		t.Errorf("default DDPArgs: %s", got)
	}
	p.Iters, p.Warmup, p.DDPBatch = 3, 1, 32
	if got := strings.Join(p.DDPArgs("gloo"), " "); got != "--backend gloo --batch 32 --steps 3 --warmup 1" {
		t.Errorf("DDPArgs: %s", got)
	}
}

// TestTorchJob: the torch systems start as gloo does, with the backend,
// Python and environment of their own; the DDP test runs ddp_bench.py.
func TestTorchJob(t *testing.T) {
	files := GlooFiles{Program: "/c/gloo_osu-1.py", DDP: "/c/ddp_bench-2.py", Wrapper: "/c/torchrun-wrapper-3.py"}
	tm := TorchSetup{Python: "/repo/.venv/bin/python", Env: []string{"PYTHONPATH=/repo/python"}}
	o := CollOptions{Exe: "/usr/bin/multirail", Plan: CollPlan{Sizes: []int{8, 4 << 20}, Iters: 0, Warmup: 0}}
	hosts := []string{"mrch0", "mrch1", "mrch2", "mrch3"}
	devs := []string{"rail0", "rail1", "rail2"}
	for _, tc := range []struct {
		sys, test string
		python    string
		env       []string // -x values after OMP_NUM_THREADS=1
		gloo      bool     // GLOO_SOCKET_IFNAME
		tail      []string
	}{
		{sys: "gloo", test: "allreduce", python: GlooPython, gloo: true, tail: []string{"/c/gloo_osu-1.py", "allreduce", "8,4194304", "0", "0"}},
		{sys: "torch-multirail", test: "allreduce", python: tm.Python, env: []string{"PYTHONPATH=/repo/python", "MULTIRAIL_IFNAME=rail", "MULTIRAIL_SCHED=qlearn"},
			tail: []string{"/c/gloo_osu-1.py", "--backend", "multirail", "allreduce", "8,4194304", "0", "0"}},
		{sys: "torch-multirail-plaintext", test: "allreduce", python: tm.Python,
			env:  []string{"PYTHONPATH=/repo/python", "MULTIRAIL_IFNAME=rail", "MULTIRAIL_SCHED=qlearn", "MULTIRAIL_PLAINTEXT=1"},
			tail: []string{"/c/gloo_osu-1.py", "--backend", "multirail", "allreduce", "8,4194304", "0", "0"}},
		{sys: "gloo", test: DDPTest, python: GlooPython, gloo: true, tail: []string{"/c/ddp_bench-2.py", "--backend", "gloo", "--batch", "8", "--steps", "30", "--warmup", "5"}},
		{sys: "torch-multirail", test: DDPTest, python: tm.Python, env: []string{"PYTHONPATH=/repo/python", "MULTIRAIL_IFNAME=rail", "MULTIRAIL_SCHED=qlearn"},
			tail: []string{"/c/ddp_bench-2.py", "--backend", "multirail", "--batch", "8", "--steps", "30", "--warmup", "5"}},
	} {
		j := torchJobOn(o, hosts, devs, files, tm, "0123456789abcdef", 7, tc.sys, tc.test)
		argv := GlooArgs(j)
		var xs []string
		for i := range argv {
			if argv[i] == "-x" {
				xs = append(xs, argv[i+1])
			}
		}
		want := []string{"OMP_NUM_THREADS=1"}
		if tc.gloo {
			want = append([]string{"GLOO_SOCKET_IFNAME=rail0,rail1,rail2"}, want...)
		}
		want = append(want, tc.env...)
		if !slices.Equal(xs, want) {
			t.Errorf("%s %s: -x %q, want %q", tc.sys, tc.test, xs, want)
		}
		i := slices.Index(argv, "sh")
		if i < 0 || argv[i+3] != tc.python || argv[i+4] != files.Wrapper || !slices.Contains(argv, "mrch0:29507") {
			t.Errorf("%s %s: not started by %s: %q", tc.sys, tc.test, tc.python, argv)
		}
		if got := argv[len(argv)-len(tc.tail):]; !slices.Equal(got, tc.tail) {
			t.Errorf("%s %s: program and arguments %q, want %q", tc.sys, tc.test, got, tc.tail)
		}
	}
}

// TestDDPBenchPlan: ddp_bench.py's model, counted without torch: about
// 5 M float32 parameters (20 MB of gradients), as the issue asks.
func TestDDPBenchPlan(t *testing.T) {
	py, dir := anyPython(t), t.TempDir()
	files, err := WriteGlooFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(files.DDP); err != nil || !bytes.Equal(got, DDPBenchSource) || !strings.HasPrefix(filepath.Base(files.DDP), "ddp_bench-") {
		t.Fatalf("%s: %v", files.DDP, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--plan"}, "PLAN 5257226 21028904 1024,2048,1024,1024,10"},
		{[]string{"--plan", "--layers", "4,3,2"}, "PLAN 23 92 4,3,2"},
		{[]string{"--layers=10,1", "--plan"}, "PLAN 11 44 10,1"},
	} {
		out, err := exec.Command(py, append([]string{files.DDP}, tc.args...)...).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != tc.want {
			t.Errorf("%q: %v: %q, want %q", tc.args, err, out, tc.want)
		}
	}
}

// TestDDPBenchBadArgs: one line on stderr and exit status 2, from rank 0
// only, before torch is imported.
func TestDDPBenchBadArgs(t *testing.T) {
	py, dir := anyPython(t), t.TempDir()
	files, err := WriteGlooFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend", "nccl"}, `ddp_bench: --backend "nccl": unknown backend; allowed: gloo, multirail`},
		{[]string{"--batch", "0"}, `ddp_bench: --batch "0" is out of range: allowed 1..65536`},
		{[]string{"--steps=x"}, `ddp_bench: --steps "x" is out of range: allowed 1..100000`},
		{[]string{"--warmup"}, "ddp_bench: --warmup needs a value"},
		{[]string{"--layers", "1024"}, `ddp_bench: --layers "1024": want at least two comma-separated widths`},
		{[]string{"--layers", "1024,0"}, `ddp_bench: --layers "0" is out of range: allowed 1..65536`},
		{[]string{"resnet"}, `ddp_bench: unknown argument "resnet"; allowed: --backend gloo|multirail, --batch N, --steps N, --warmup N, --layers A,B,..., --seed N, --plan`},
	} {
		cmd := exec.Command(py, append([]string{files.DDP}, tc.args...)...)
		cmd.Env = append(os.Environ(), "RANK=0")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.HasPrefix(errb.String(), tc.want) || strings.Count(errb.String(), "\n") != 1 || out.Len() != 0 {
			t.Errorf("%q: %v; stderr %q, stdout %q; want exit status 2 and %q", tc.args, err, errb.String(), out.String(), tc.want)
		}
		cmd = exec.Command(py, append([]string{files.DDP}, tc.args...)...)
		cmd.Env = append(os.Environ(), "RANK=2")
		if msg, err := cmd.CombinedOutput(); err == nil || len(msg) != 0 {
			t.Errorf("%q on rank 2: %v: %q", tc.args, err, msg)
		}
	}
}

func TestParseDDP(t *testing.T) {
	const good = `{"backend": "multirail", "batch": 8, "buckets": [4239400, 16789504], "busy": 0.83, "compute_ms": 190.5, "grad_bytes": 21028904, ` +
		`"layers": [1024, 2048, 1024, 1024, 10], "loss_first": 2.29, "loss_last": 2.1, "max_param_diff": 0.0, "params": 5257226, "ranks": 4, ` +
		`"ranks_busy": 0.41, "samples_per_s": 32.0, "step_ms": 1000.0, "step_ms_max": 1100.0, "step_ms_min": 950.0, "steps": 30, "torch": "1.13.0a0", "warmup": 5}`
	out := "# ddp_bench: DDP of an MLP\n# ddp_bench: hosts of ranks 0..3: mrch0 mrch1 mrch2 mrch3; MULTIRAIL_IFNAME=rail\nMRDDP " + good + "\n"
	r, err := parseDDP([]byte(out), 4)
	if err != nil {
		t.Fatal(err)
	}
	if r.Test != DDPTest || r.Size != 21028904 || r.Ranks != 4 || r.AvgUs != 1e6 || r.MinUs != 950e3 || r.MaxUs != 1100e3 || r.Iters != 30 || r.Warmup != 5 ||
		r.StepMs != 1000 || r.SamplesPerS != 32 || r.ComputeMs != 190.5 || r.Busy != 0.83 || r.RanksBusy != 0.41 || r.Params != 5257226 || r.Batch != 8 ||
		!slices.Equal(r.Buckets, []int{4239400, 16789504}) || r.LossFirst != 2.29 || r.LossLast != 2.1 || r.MaxParamDiff == nil || *r.MaxParamDiff != 0 {
		t.Errorf("%+v", r)
	}
	if err := checkGlooHosts([]byte(out), []string{"mrch3", "mrch2", "mrch1", "mrch0"}, "ddp_bench"); err != nil {
		t.Error(err)
	}
	// busy null (no /proc/stat): 0, not an error.
	if r, err := parseDDP([]byte("MRDDP "+strings.Replace(good, `"busy": 0.83`, `"busy": null`, 1)), 4); err != nil || r.Busy != 0 {
		t.Errorf("busy null: %v, %v", r.Busy, err)
	}
	for _, tc := range []struct{ out, want string }{
		{"# nothing\n", `ddp_bench printed no result line "MRDDP "...: # nothing`},
		{"MRDDP " + good + "\nMRDDP " + good, "ddp_bench printed two result lines"},
		{"MRDDP {", "ddp_bench: result \"{\": unexpected EOF"},
		{"MRDDP " + strings.Replace(good, `"ranks": 4`, `"ranks": 3`, 1), "ddp_bench: result of 3 ranks, want 4"},
		{"MRDDP " + strings.Replace(good, `"step_ms": 1000.0`, `"step_ms": 0`, 1), "want step_ms, samples_per_s > 0"},
		{"MRDDP " + strings.Replace(good, `"max_param_diff": 0.0`, `"max_param_diff": 0.25`, 1), "ddp_bench: replicas differ at the end: a parameter differs by 0.25"},
		{"MRDDP " + strings.Replace(good, `"max_param_diff": 0.0, `, ``, 1), "has no max_param_diff"},
	} {
		if _, err := parseDDP([]byte(tc.out), 4); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.60q: %v, want %q", tc.out, err, tc.want)
		}
	}
	if m := ddpFailure("[W socket.cpp] noise\nddp_bench: cannot import multirail.torch with /usr/bin/python3 (ModuleNotFoundError: x)\nddp_bench: rank 1: y\n"); m != "cannot import multirail.torch with /usr/bin/python3 (ModuleNotFoundError: x)" {
		t.Errorf("ddpFailure: %q", m)
	}
	if m := ddpFailure("mpirun noticed that process rank 0 exited\n"); m != "" {
		t.Errorf("ddpFailure without a line of its own: %q", m)
	}
}

// fakePython writes an executable script at path that stands in for a
// Python: run with -c, it prints version and the library's path, or fails
// with why on stderr.
func fakePython(t *testing.T, path, version, why string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	body := "#!/bin/sh\necho " + version + "\necho " + filepath.Join(filepath.Dir(path), "libmultirail.so") + "\n"
	if why != "" {
		body = "#!/bin/sh\necho 'Traceback (most recent call last):' >&2\necho '" + why + "' >&2\nexit 1\n"
	}
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestFindTorchMultirail(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := TorchMultirailCandidates("", dir)
	if len(c) != 2 || c[0].Python != filepath.Join(dir, ".venv/bin/python") || len(c[0].Env) != 0 || c[1].Python != GlooPython ||
		!slices.Equal(c[1].Env, []string{"PYTHONPATH=" + filepath.Join(dir, "python"), "MULTIRAIL_LIB=" + filepath.Join(dir, "build/libmultirail.so")}) {
		t.Errorf("candidates: %+v", c)
	}
	if c := TorchMultirailCandidates("/opt/py", dir); len(c) != 1 || c[0].Python != "/opt/py" || !strings.Contains(c[0].How, "--torch-python") {
		t.Errorf("given: %+v", c)
	}
	// The venv works: it is chosen, with nothing in its environment.
	venv := filepath.Join(dir, ".venv/bin/python")
	fakePython(t, venv, "1.13.1", "")
	got, err := FindTorchMultirail(ctx, "", dir)
	if err != nil || got.Python != venv || got.Torch != "1.13.1" || len(got.Env) != 0 || !strings.Contains(got.How, "build-python.sh") ||
		got.Lib != filepath.Join(dir, ".venv/bin/libmultirail.so") {
		t.Errorf("venv: %+v, %v", got, err)
	}
	// The bench runs a copy of the library: a rebuild meanwhile cannot
	// touch it.
	if err := os.WriteFile(got.Lib, []byte("ELF v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	got.Env = []string{"PYTHONPATH=/p", "MULTIRAIL_LIB=/old.so"}
	snap, err := got.Snapshot(cache)
	if err != nil || filepath.Dir(snap.Lib) != cache || !strings.HasPrefix(filepath.Base(snap.Lib), "libmultirail-") ||
		!slices.Equal(snap.Env, []string{"PYTHONPATH=/p", "MULTIRAIL_LIB=" + snap.Lib}) || !strings.Contains(snap.How, "copied to "+snap.Lib) {
		t.Errorf("snapshot: %+v, %v", snap, err)
	}
	if b, err := os.ReadFile(snap.Lib); err != nil || string(b) != "ELF v1" {
		t.Errorf("copy: %q, %v", b, err)
	}
	if err := os.WriteFile(got.Lib, []byte("ELF v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(snap.Lib); string(b) != "ELF v1" {
		t.Errorf("the copy changed with the library: %q", b)
	}
	if same, err := (TorchSetup{Python: "p"}).Snapshot(cache); err != nil || same.Python != "p" || len(same.Env) != 0 {
		t.Errorf("no library: %+v, %v", same, err)
	}
	// Neither works: one error naming every way tried and why.
	fakePython(t, venv, "", "ModuleNotFoundError: No module named multirail")
	given := filepath.Join(dir, "other-python")
	fakePython(t, given, "", "OSError: libmultirail.so: cannot open shared object file")
	_, err = FindTorchMultirail(ctx, given, dir)
	if err == nil || !strings.Contains(err.Error(), "torch-multirail: no Python here imports multirail.torch") ||
		!strings.Contains(err.Error(), given+" (--torch-python): OSError: libmultirail.so: cannot open shared object file") {
		t.Errorf("given, failing: %v", err)
	}
	if _, err := FindTorchMultirail(ctx, "", dir); err == nil || !strings.Contains(err.Error(), "(the project's .venv: sh scripts/build-python.sh): ModuleNotFoundError: No module named multirail") {
		t.Errorf("venv failing: %v", err)
	}
	if _, err := FindTorchMultirail(ctx, filepath.Join(dir, "nope"), dir); err == nil || !strings.Contains(err.Error(), "nope not found") {
		t.Errorf("missing: %v", err)
	}
}

func TestCollRun(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := collRun("gloo", DDPTest, 2, lab.CPUSample{At: t0, Busy: 10 * time.Second}, lab.CPUSample{At: t0.Add(10 * time.Second), Busy: 16 * time.Second}, nil, true)
	if r.System != "gloo" || r.Test != DDPTest || r.Round != 2 || r.Seconds != 10 || r.CPUs < 1 || r.Busy != 6/(10*float64(r.CPUs)) || !r.OK {
		t.Errorf("%+v", r)
	}
	if r := collRun("gloo", DDPTest, 1, lab.CPUSample{At: t0}, lab.CPUSample{At: t0.Add(time.Second)}, errors.New("no /proc"), false); r.Busy != -1 || r.OK {
		t.Errorf("without /proc/stat: %+v", r)
	}
}

// TestDDPBenchRanks runs ddp_bench.py with two gloo ranks on this machine
// (no lab, no root; a small model): the result line parses, replicas
// agree, the loss falls. TestCollDDPIntegration runs it in a lab.
func TestDDPBenchRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("short: starts two Pythons that import torch")
	}
	requireTorch(t)
	files := writeGloo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stdout, stderr, code := runGlooRanks(ctx, t, files.DDP, 2, "--layers", "64,128,10", "--batch", "4", "--steps", "6", "--warmup", "2")
	if code != 0 {
		t.Fatalf("exit status %d\n%s\n%s", code, stdout, stderr)
	}
	r, err := parseDDP([]byte(stdout), 2)
	if err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if r.Params != 64*128+128+128*10+10 || r.Batch != 4 || r.Iters != 6 || r.Warmup != 2 || !(r.LossLast < r.LossFirst) || r.SamplesPerS <= 0 ||
		r.MinUs > r.AvgUs || len(r.Buckets) == 0 {
		t.Errorf("%+v", r)
	}
	if err := checkGlooHosts([]byte(stdout), []string{hostname(t), hostname(t)}, "ddp_bench"); err != nil {
		t.Error(err)
	}
}

// TestCollDDPIntegration runs the DDP test with gloo in the collective
// bench on a lab cluster of 3 hosts, rails 200/100 Mbit/s, 1+2 steps of
// 4 samples (about 30 s on a 2-core machine with torch-multirail; the
// command line's equivalent: lab bench --hosts 3 --rates 200mbit,100mbit
// --tests ddp --systems gloo,torch-multirail --iters 2 --warmup 1
// --ddp-batch 4). It needs root, the
// lab's tools, Open MPI and python3-torch; it skips without torch (CI does
// not install it), and runs torch-multirail beside gloo when a Python
// here imports multirail.torch.
func TestCollDDPIntegration(t *testing.T) {
	requireLab(t)
	requireTorch(t)
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
	systems := []string{Gloo}
	repo, _ := filepath.Abs("../..")
	tm, tmErr := FindTorchMultirail(context.Background(), "", repo)
	if tmErr == nil {
		systems = append(systems, TorchMultirail)
	} else {
		t.Logf("torch-multirail left out: %v", tmErr)
	}
	prefix := "mrcddp"
	p := CollPlan{Lab: lab.Config{Hosts: 3, Rates: []float64{200e6, 100e6}, Prefix: prefix}, Tests: []string{DDPTest},
		Systems: systems, Iters: 2, Warmup: 1, DDPBatch: 4, TorchPython: tm.Python}
	if p.Lab, err = p.Lab.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	start := time.Now()
	rep, err := RunColl(ctx, CollOptions{Plan: p, Exe: exe, Stderr: &stderr, RunTimeout: 3 * time.Minute}, CollHooks{})
	if lab.Exists(prefix) {
		t.Errorf("lab %s is still up after the bench", prefix)
	}
	if err != nil {
		t.Fatalf("%v\n%+v\nstderr (last lines): %s", err, rep.Failed, lastLines(stderr.String(), 30))
	}
	t.Logf("%d systems in %v", len(systems), time.Since(start).Round(time.Second))
	if len(rep.Results) != len(systems) || len(rep.Runs) != len(systems) {
		t.Fatalf("results %+v runs %+v", rep.Results, rep.Runs)
	}
	for i, r := range rep.Results {
		if r.System != systems[i] || r.Test != DDPTest || r.Ranks != 3 || r.Iters != 2 || r.Batch != 4 || r.Params != 5257226 || r.StepMs <= 0 ||
			r.SamplesPerS <= 0 || r.MaxParamDiff == nil || *r.MaxParamDiff != 0 {
			t.Errorf("%+v", r)
		}
		t.Logf("%s: step %.1f ms, %.2f samples/s, compute %.1f ms, busy %.2f (ranks %.2f)", r.System, r.StepMs, r.SamplesPerS, r.ComputeMs, r.Busy, r.RanksBusy)
	}
	for _, r := range rep.Runs {
		if !r.OK || r.Seconds <= 0 || r.Busy < 0 || r.Busy > 1.05 {
			t.Errorf("run %+v", r)
		}
	}
}
