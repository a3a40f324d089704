package labbench

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DDPBenchSource is ddp_bench.py: DistributedDataParallel training steps
// of an MLP of about 5 M float32 parameters, timed, with the gloo or the
// multirail backend (the collective bench's test DDPTest).
//
//go:embed ddp_bench.py
var DDPBenchSource []byte

// The DDP test and its defaults.
const (
	// DDPTest is the collective bench's data-parallel training test:
	// ddp_bench.py under one torchrun per host, for the torch systems
	// (gloo, torch-multirail, torch-multirail-plaintext) only.
	DDPTest = "ddp"
	// DefaultDDPBatch is the samples per rank and step. Small on purpose:
	// the lab's CPUs stand in for accelerators, which compute a step of
	// this model in a millisecond or two, and they are shared by every
	// host (4 ranks on 2 cores, Debian's torch on reference BLAS: about
	// 70 ms of computing per rank and step at 8 samples, where the
	// gradients' allreduce takes 0.6-3 s on these rails). ddp_bench.py
	// reports compute_ms (the same steps without the allreduce), so the
	// share of computing is in every result.
	DefaultDDPBatch = 8
	// MaxDDPBatch bounds CollPlan.DDPBatch.
	MaxDDPBatch = 4096
	// DefaultDDPSteps and DefaultDDPWarmup are the timed and warm-up
	// steps when CollPlan.Iters and Warmup are 0.
	DefaultDDPSteps  = 30
	DefaultDDPWarmup = 5
	// torchMultirailBackend is the name `import multirail.torch`
	// registers with torch.distributed.
	torchMultirailBackend = "multirail"
)

// DDPArgs are ddp_bench.py's arguments for backend: the plan's batch,
// steps and warm-up steps (Iters and Warmup, 0 for the defaults).
func (p CollPlan) DDPArgs(backend string) []string {
	steps, warmup := p.DDPSteps()
	return []string{"--backend", backend, "--batch", strconv.Itoa(p.ddpBatch()),
		"--steps", strconv.Itoa(steps), "--warmup", strconv.Itoa(warmup)}
}

// DDPSteps are the timed and the warm-up steps of the DDP test.
func (p CollPlan) DDPSteps() (steps, warmup int) {
	steps, warmup = DefaultDDPSteps, DefaultDDPWarmup
	if p.Iters > 0 {
		steps = p.Iters
	}
	if p.Warmup > 0 {
		warmup = p.Warmup
	}
	return steps, warmup
}

func (p CollPlan) ddpBatch() int {
	if p.DDPBatch > 0 {
		return p.DDPBatch
	}
	return DefaultDDPBatch
}

// TorchSetup is how the torch-multirail systems start Python: a
// Python that imports multirail.torch, and what it needs in its
// environment besides.
type TorchSetup struct {
	// Python is the interpreter (the project's .venv/bin/python, or
	// GlooPython with Env).
	Python string
	// Env are KEY=VALUE every rank gets (PYTHONPATH and MULTIRAIL_LIB
	// when the package is used from the checkout).
	Env []string
	// Torch is torch's version.
	Torch string
	// Lib is the library multirail.torch loaded ("" if the package does
	// not say: multirail._lib.path()).
	Lib string
	// How says, for the report, which of the ways above it is.
	How string
}

// Snapshot copies the library (Lib) into dir as libmultirail-HASH.so and
// returns t with MULTIRAIL_LIB set to the copy (which the package loads
// first), so that a rebuild of the library while the bench runs (a
// build-capi.sh or build-python.sh rewriting the file in place) cannot
// crash the ranks (SIGBUS) or change the code between runs. Without Lib
// it returns t as it is.
func (t TorchSetup) Snapshot(dir string) (TorchSetup, error) {
	if t.Lib == "" {
		return t, nil
	}
	data, err := os.ReadFile(t.Lib)
	if err != nil {
		return t, fmt.Errorf("torch-multirail: %w", err)
	}
	cp, err := writeCached(dir, "libmultirail", ".so", data)
	if err != nil {
		return t, err
	}
	env := []string{}
	for _, kv := range t.Env {
		if !strings.HasPrefix(kv, "MULTIRAIL_LIB=") {
			env = append(env, kv)
		}
	}
	t.Env = append(env, "MULTIRAIL_LIB="+cp)
	t.How += fmt.Sprintf("; the library %s copied to %s for the bench", t.Lib, cp)
	t.Lib = cp
	return t, nil
}

// torchMultirailProbe imports what gloo_osu.py and ddp_bench.py need
// with the multirail backend and prints torch's version, then the path
// of the library it loaded ("" if the package cannot say).
const torchMultirailProbe = `import numpy, torch, torch.distributed as d
import multirail.torch
print(torch.__version__)
try:
    import multirail._lib as L
    print(L.path())
except Exception:
    print("")`

// TorchMultirailCandidates are the ways FindTorchMultirail tries, in
// order: python itself when given; else, in the checkout dir, the
// project's .venv (sh scripts/build-python.sh), then GlooPython with
// PYTHONPATH=<dir>/python and MULTIRAIL_LIB=<dir>/build/libmultirail.so
// (sh scripts/build-capi.sh) when both are there.
func TorchMultirailCandidates(python, dir string) []TorchSetup {
	if python != "" {
		return []TorchSetup{{Python: python, How: python + " (--torch-python)"}}
	}
	venv := filepath.Join(dir, ".venv", "bin", "python")
	pkg, lib := filepath.Join(dir, "python"), filepath.Join(dir, "build", "libmultirail.so")
	return []TorchSetup{
		{Python: venv, How: venv + " (the project's .venv: sh scripts/build-python.sh)"},
		{Python: GlooPython, Env: []string{"PYTHONPATH=" + pkg, "MULTIRAIL_LIB=" + lib},
			How: fmt.Sprintf("%s with PYTHONPATH=%s and MULTIRAIL_LIB=%s", GlooPython, pkg, lib)},
	}
}

// FindTorchMultirail finds a Python that imports multirail.torch (see
// TorchMultirailCandidates; dir "" is the working directory) and returns
// the first that works, or an error that says what was tried and how to
// build the backend. Importing torch takes a second or two.
func FindTorchMultirail(ctx context.Context, python, dir string) (TorchSetup, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return TorchSetup{}, fmt.Errorf("torch-multirail: %w", err)
		}
		dir = wd
	}
	var why []string
	for _, c := range TorchMultirailCandidates(python, dir) {
		if _, err := os.Stat(c.Python); err != nil {
			why = append(why, c.How+": "+c.Python+" not found")
			continue
		}
		version, lib, err := probeTorchMultirail(ctx, c)
		if err != nil {
			why = append(why, c.How+": "+err.Error())
			continue
		}
		c.Torch, c.Lib = version, lib
		return c, nil
	}
	return TorchSetup{}, fmt.Errorf("torch-multirail: no Python here imports multirail.torch (build it with sh scripts/build-python.sh in the checkout and run the bench from there, or give --torch-python): %s",
		strings.Join(why, "; "))
}

func probeTorchMultirail(ctx context.Context, c TorchSetup) (version, lib string, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Python, "-c", torchMultirailProbe)
	cmd.Env = append(os.Environ(), c.Env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		w := lastLines(stderr.String(), 1)
		if w == "" {
			w = err.Error()
		}
		return "", "", errors.New(w)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	version = strings.TrimSpace(lines[0])
	if len(lines) > 1 {
		lib = strings.TrimSpace(lines[len(lines)-1])
		if abs, err := filepath.Abs(lib); lib != "" && err == nil {
			lib = abs // the probe ran in this working directory
		}
	}
	return version, lib, nil
}

// TorchMultirailEnv is what the ranks of a torch-multirail system get
// besides TorchSetup.Env: the rails from the hosts' NICs (as `multirail
// osu` finds them), the default scheduler, and frames in clear for
// torch-multirail-plaintext.
func TorchMultirailEnv(system string) []string {
	env := []string{"MULTIRAIL_IFNAME=rail", "MULTIRAIL_SCHED=qlearn"}
	if IsPlaintext(system) {
		env = append(env, "MULTIRAIL_PLAINTEXT=1")
	}
	return env
}

// DDPResult is ddp_bench.py's result line (after "MRDDP ").
type DDPResult struct {
	Ranks        int      `json:"ranks"`
	Backend      string   `json:"backend"`
	Torch        string   `json:"torch"`
	Params       int      `json:"params"`
	GradBytes    int      `json:"grad_bytes"`
	Layers       []int    `json:"layers"`
	Batch        int      `json:"batch"`
	Steps        int      `json:"steps"`
	Warmup       int      `json:"warmup"`
	Buckets      []int    `json:"buckets"`
	StepMs       float64  `json:"step_ms"`
	StepMsMin    float64  `json:"step_ms_min"`
	StepMsMax    float64  `json:"step_ms_max"`
	SamplesPerS  float64  `json:"samples_per_s"`
	ComputeMs    float64  `json:"compute_ms"`
	Busy         *float64 `json:"busy"`
	RanksBusy    float64  `json:"ranks_busy"`
	LossFirst    float64  `json:"loss_first"`
	LossLast     float64  `json:"loss_last"`
	MaxParamDiff *float64 `json:"max_param_diff"`
}

// ddpPrefix starts ddp_bench.py's result line.
const ddpPrefix = "MRDDP "

// parseDDP reads ddp_bench.py's result line in out (ranks ranks) into a
// CollResult of DDPTest: Size is the gradients' bytes, AvgUs the step's
// time, Min/MaxUs rank 0's fastest and slowest step, Iters the timed steps.
func parseDDP(out []byte, ranks int) (CollResult, error) {
	var line string
	for _, l := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), ddpPrefix); ok {
			if line != "" {
				return CollResult{}, fmt.Errorf("ddp_bench printed two result lines")
			}
			line = rest
		}
	}
	if line == "" {
		return CollResult{}, fmt.Errorf("ddp_bench printed no result line %q...: %s", ddpPrefix, lastLines(string(out), 8))
	}
	var d DDPResult
	dec := json.NewDecoder(strings.NewReader(line))
	if err := dec.Decode(&d); err != nil {
		return CollResult{}, fmt.Errorf("ddp_bench: result %.200q: %w", line, err)
	}
	switch {
	case d.Ranks != ranks:
		return CollResult{}, fmt.Errorf("ddp_bench: result of %d ranks, want %d", d.Ranks, ranks)
	case !(d.StepMs > 0) || !(d.SamplesPerS > 0) || d.Steps < 1 || d.Batch < 1 || d.Params < 1:
		return CollResult{}, fmt.Errorf("ddp_bench: result %.200q: want step_ms, samples_per_s > 0 and steps, batch, params >= 1", line)
	case d.MaxParamDiff == nil:
		return CollResult{}, fmt.Errorf("ddp_bench: result %.200q has no max_param_diff", line)
	case *d.MaxParamDiff != 0:
		return CollResult{}, fmt.Errorf("ddp_bench: replicas differ at the end: a parameter differs by %g between rank 0 and another rank", *d.MaxParamDiff)
	}
	r := CollResult{Test: DDPTest, Size: d.GradBytes, Ranks: d.Ranks, AvgUs: d.StepMs * 1e3, MinUs: d.StepMsMin * 1e3, MaxUs: d.StepMsMax * 1e3,
		Iters: d.Steps, Warmup: d.Warmup, StepMs: d.StepMs, SamplesPerS: d.SamplesPerS, ComputeMs: d.ComputeMs,
		Params: d.Params, Batch: d.Batch, Buckets: d.Buckets, LossFirst: d.LossFirst, LossLast: d.LossLast, MaxParamDiff: d.MaxParamDiff}
	if d.Busy != nil && *d.Busy >= 0 {
		r.Busy = *d.Busy
	}
	if d.RanksBusy > 0 {
		r.RanksBusy = d.RanksBusy
	}
	return r, nil
}

// ddpFailure is ddp_bench.py's first own line on stderr ("ddp_bench: "
// dropped), "" if it wrote none.
func ddpFailure(stderr string) string {
	for _, line := range strings.Split(stderr, "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "ddp_bench: "); ok {
			return m
		}
	}
	return ""
}

// busyShares are the machine's busy CPU share and the ranks' own share
// of all CPUs while one size ran.
type busyShares struct{ machine, ranks float64 }

// busyPrefix begins gloo_osu.py's per-size busy line.
const busyPrefix = "# gloo_osu: busy "

// parseBusy reads gloo_osu.py's lines "# gloo_osu: busy SIZE SHARE RANKS"
// in out: the machine's busy CPU share and the ranks' by size (negative
// shares, unknown, are 0).
func parseBusy(out []byte) map[int]busyShares {
	m := map[int]busyShares{}
	for _, line := range strings.Split(string(out), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), busyPrefix)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 3 {
			continue
		}
		size, err1 := strconv.Atoi(f[0])
		share, err2 := strconv.ParseFloat(f[1], 64)
		ranks, err3 := strconv.ParseFloat(f[2], 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		m[size] = busyShares{max(share, 0), max(ranks, 0)}
	}
	return m
}
