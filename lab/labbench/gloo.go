package labbench

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/multirail/multirail/lab"
	"github.com/multirail/multirail/lab/mpi"
	"github.com/multirail/multirail/scripts"
)

// GlooOSUSource is gloo_osu.py: the OSU-style tests of `multirail osu`
// for torch.distributed with the gloo backend, measured as comm/osu and
// mrosu measure, printing mrosu's result lines.
//
//go:embed gloo_osu.py
var GlooOSUSource []byte

// GlooPython is the Python that has Debian's torch (python3-torch).
const GlooPython = "/usr/bin/python3"

// GlooTests are the tests gloo_osu.py takes (the names of `multirail
// osu`). Those the installed torch's gloo backend cannot run (torch 1.13:
// reduce-scatter) fail at their first call with exit status 3 and a line
// that says so.
var GlooTests = []string{"latency", "bw", "bibw", "barrier", "bcast", "allreduce", "allgather", "reduce-scatter", "alltoall"}

// glooProbe imports what gloo_osu.py needs and prints torch's version.
const glooProbe = `import numpy, torch, torch.distributed as d
assert d.is_available(), "torch.distributed is not available"
assert d.is_gloo_available(), "torch.distributed has no gloo backend"
print(torch.__version__)`

// GlooAvailable reports whether the gloo system can run here: GlooPython
// imports torch with torch.distributed and its gloo backend (and numpy).
// It returns torch's version. Importing torch takes a second or two.
func GlooAvailable(ctx context.Context) (version string, err error) {
	if _, err := os.Stat(GlooPython); err != nil {
		return "", fmt.Errorf("gloo: %s not found: install python3-torch (as root: sh scripts/lab-deps.sh --torch)", GlooPython)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, GlooPython, "-c", glooProbe)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		why := lastLines(stderr.String(), 1)
		if why == "" {
			why = err.Error()
		}
		return "", fmt.Errorf("gloo: %s cannot import torch.distributed with gloo (%s): install python3-torch (as root: sh scripts/lab-deps.sh --torch)", GlooPython, why)
	}
	return strings.TrimSpace(stdout.String()), nil
}

// GlooFiles are gloo_osu.py, ddp_bench.py and scripts/torchrun-wrapper.py
// written where every host of a lab reads them.
type GlooFiles struct {
	Program, DDP, Wrapper string
}

// WriteGlooFiles writes GlooOSUSource, DDPBenchSource and the torchrun
// wrapper into dir, each as NAME-HASH.py (HASH the start of its SHA-256)
// unless it is there already.
func WriteGlooFiles(dir string) (GlooFiles, error) {
	var f GlooFiles
	var err error
	if f.Program, err = writeCached(dir, "gloo_osu", ".py", GlooOSUSource); err != nil {
		return f, err
	}
	if f.DDP, err = writeCached(dir, "ddp_bench", ".py", DDPBenchSource); err != nil {
		return f, err
	}
	if f.Wrapper, err = writeCached(dir, "torchrun-wrapper", ".py", scripts.TorchrunWrapper); err != nil {
		return f, err
	}
	return f, nil
}

// writeCached writes data into dir as name-HASH+ext, by renaming a
// temporary file, unless a file of that name is there, and returns its
// path.
func writeCached(dir, name, ext string, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	path := filepath.Join(dir, name+"-"+hex.EncodeToString(sum[:6])+ext)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("lab bench: %w", err)
	}
	tmp, err := os.CreateTemp(dir, name+"-*.tmp")
	if err != nil {
		return "", fmt.Errorf("lab bench: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return "", fmt.Errorf("lab bench: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", fmt.Errorf("lab bench: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("lab bench: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("lab bench: %w", err)
	}
	return path, nil
}

// GlooJob is one run of a torch program (gloo_osu.py, ddp_bench.py)
// across the hosts of a lab: one torchrun per host, every one started by
// Open MPI's mpirun (from Hosts[0]) with the lab's rsh agent, its node
// rank mpirun's rank.
type GlooJob struct {
	// Hosts are the namespace names of ranks 0, 1, ...; they double as
	// host names. RshAgent and OOBNet are as in mpi.CollJob.
	Hosts    []string
	RshAgent string
	OOBNet   string
	// RailDevs are GLOO_SOCKET_IFNAME: Gloo makes one device (a full
	// mesh of TCP pairs) per interface. Empty: no GLOO_SOCKET_IFNAME
	// (the multirail backend finds its rails from MULTIRAIL_IFNAME in
	// Env).
	RailDevs []string
	// Env are further KEY=VALUE passed to every rank with mpirun -x,
	// after GlooEnv.
	Env []string
	// Python runs Wrapper (scripts/torchrun-wrapper.py), which runs
	// torchrun; Program is gloo_osu.py or ddp_bench.py.
	Python, Wrapper, Program string
	// Args, when not nil, are Program's arguments (ddp_bench.py's), in
	// place of gloo_osu.py's below.
	Args []string
	// Backend is gloo_osu.py's --backend; "" (gloo, without the flag)
	// or "multirail".
	Backend string
	// Port is where torchrun's c10d rendezvous listens on Hosts[0];
	// RunID names the rendezvous.
	Port  int
	RunID string
	// Test, Sizes, Iters, Warmup and Validate are gloo_osu.py's
	// arguments, as mpi.CollJob's are mrosu's.
	Test          string
	Sizes         []int
	Iters, Warmup int
	Validate      bool
}

// glooShell is what each rank runs under mpirun: torchrun (Python
// running the wrapper, "$0" and "$1") with --node_rank from Open MPI's
// rank, then the rest of the arguments.
const glooShell = `w=$1; shift; exec "$0" "$w" --node_rank "${OMPI_COMM_WORLD_RANK:?is not set: start this under Open MPI mpirun}" "$@"`

// glooMonitorInterval is how often torchrun looks at its worker, in
// seconds (its default, 5, adds up to 5 s to every run).
const glooMonitorInterval = "0.2"

// GlooEnv is what GlooArgs passes to every rank with mpirun -x besides
// GLOO_SOCKET_IFNAME: one intra-op thread per rank (several ranks share
// this machine's cores, as the other systems' do).
var GlooEnv = []string{"OMP_NUM_THREADS=1"}

// GlooArgs is the mpirun command line of j (argv, "mpirun" first): as
// mpi.LaunchArgs starts a program on every host, with
// GLOO_SOCKET_IFNAME=<RailDevs> (if any), GlooEnv and Env, each rank runs
//
//	sh -c glooShell Python Wrapper --node_rank $OMPI_COMM_WORLD_RANK --nnodes N
//	  --nproc_per_node 1 --rdzv_backend c10d --rdzv_endpoint Hosts[0]:Port
//	  --rdzv_id RunID ... Program [--backend B] [--validate] Test SIZES ITERS WARMUP
//
// or Program Args.
func GlooArgs(j GlooJob) []string {
	args := mpi.LaunchArgs(mpi.CollJob{Hosts: j.Hosts, RshAgent: j.RshAgent, OOBNet: j.OOBNet})
	if len(j.RailDevs) > 0 {
		args = append(args, "-x", "GLOO_SOCKET_IFNAME="+strings.Join(j.RailDevs, ","))
	}
	for _, kv := range slices.Concat(GlooEnv, j.Env) {
		args = append(args, "-x", kv)
	}
	args = append(args, "sh", "-c", glooShell, j.Python, j.Wrapper,
		"--nnodes", strconv.Itoa(len(j.Hosts)), "--nproc_per_node", "1",
		"--rdzv_backend", "c10d", "--rdzv_endpoint", j.Hosts[0]+":"+strconv.Itoa(j.Port), "--rdzv_id", j.RunID,
		"--rdzv_conf", "join_timeout=120", "--max_restarts", "0", "--monitor_interval", glooMonitorInterval,
		j.Program)
	if j.Args != nil {
		return append(args, j.Args...)
	}
	if j.Backend != "" && j.Backend != Gloo {
		args = append(args, "--backend", j.Backend)
	}
	return append(args, mpi.OSUArgs(j.Validate, j.Test, j.Sizes, j.Iters, j.Warmup)...)
}

// GlooError is a gloo_osu.py run that failed and said why.
type GlooError struct {
	Test string
	// Unsupported is set when the installed torch's gloo backend cannot
	// run the test (gloo_osu.py's exit status 3).
	Unsupported bool
	// Msg is gloo_osu.py's own line, without "gloo_osu: ".
	Msg string
}

// Error implements error.
func (e *GlooError) Error() string { return "gloo_osu " + e.Msg }

// ErrGlooUnsupported is wrapped by a GlooError for a test the installed
// torch's gloo backend cannot run.
var ErrGlooUnsupported = errors.New("labbench: gloo cannot run this test")

// Unwrap makes errors.Is find ErrGlooUnsupported.
func (e *GlooError) Unwrap() error {
	if e.Unsupported {
		return ErrGlooUnsupported
	}
	return nil
}

// glooFailure turns what a failed gloo_osu.py run wrote on stderr into a
// GlooError, nil if it said nothing of its own.
func glooFailure(test, stderr string) *GlooError {
	var first string
	for _, line := range strings.Split(stderr, "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "gloo_osu: "); ok {
			if strings.Contains(m, " backend cannot run it") {
				return &GlooError{Test: test, Unsupported: true, Msg: m}
			}
			if first == "" {
				first = m
			}
		}
	}
	if first == "" {
		return nil
	}
	return &GlooError{Test: test, Msg: first}
}

// torchJob is the GlooJob of system sys (gloo or torch-multirail*) on
// the lab's hosts for test, the n-th run of the bench: gloo_osu.py with
// the OSU tests, ddp_bench.py with DDPTest.
func torchJob(o CollOptions, l *lab.Lab, files GlooFiles, tm TorchSetup, token string, n int, sys, test string) GlooJob {
	_, devs := railNets(l)
	return torchJobOn(o, ranksOf(l, test), devs, files, tm, token, n, sys, test)
}

// torchJobOn is torchJob on hosts with rails devs.
func torchJobOn(o CollOptions, hosts, devs []string, files GlooFiles, tm TorchSetup, token string, n int, sys, test string) GlooJob {
	j := GlooJob{Hosts: hosts, RshAgent: o.Exe + " lab rsh", OOBNet: lab.CtlNet(),
		Python: GlooPython, Wrapper: files.Wrapper, Program: files.Program,
		Port: rdzvPort + n%400, RunID: fmt.Sprintf("mrosu-%.8s-%d", token, n),
		Test: test, Sizes: o.Plan.Sizes, Iters: o.Plan.Iters, Warmup: o.Plan.Warmup, Validate: o.Plan.Validate}
	backend := Gloo
	if sys == Gloo {
		j.RailDevs = devs
	} else {
		backend = "multirail"
		j.Backend, j.Python, j.Env = backend, tm.Python, slices.Concat(tm.Env, TorchMultirailEnv(sys))
	}
	if test == DDPTest {
		j.Program, j.Args = files.DDP, o.Plan.DDPArgs(backend)
	}
	return j
}

// runGloo runs gloo_osu.py's test (or ddp_bench.py) with system sys
// (gloo, torch-multirail*) on the lab's hosts (ranksOf), the n-th run of
// the bench.
func runGloo(ctx context.Context, o CollOptions, l *lab.Lab, files GlooFiles, tm TorchSetup, token string, n int, sys, test string) ([]CollResult, error) {
	j := torchJob(o, l, files, tm, token, n, sys, test)
	stdout, stderr, err := execMPIRun(ctx, o, j.Hosts[0], GlooArgs(j))
	program := "gloo_osu"
	if test == DDPTest {
		program = "ddp_bench"
	}
	if err != nil {
		if ctx.Err() == nil {
			if test == DDPTest {
				if m := ddpFailure(string(stderr)); m != "" {
					return nil, errors.New("ddp_bench " + m)
				}
			} else if ge := glooFailure(test, string(stderr)); ge != nil {
				return nil, ge
			}
		}
		return nil, err
	}
	if err := checkGlooHosts(stdout, j.Hosts, program); err != nil {
		return nil, err
	}
	if test == DDPTest {
		r, err := parseDDP(stdout, len(j.Hosts))
		if err != nil {
			return nil, err
		}
		return []CollResult{r}, nil
	}
	return parseMROSU(stdout, program, test, len(j.Hosts))
}

// checkGlooHosts checks the line "# PROGRAM: hosts of ranks 0..N-1: H0 H1
// ...;" of gloo_osu.py or ddp_bench.py (program) in out: every host of
// hosts has one rank. (torchrun's c10d rendezvous gives the ranks out
// itself, in the order of the hosts' names, whatever --node_rank says.)
func checkGlooHosts(out []byte, hosts []string, program string) error {
	prefix := "# " + program + ": hosts of ranks "
	for _, line := range strings.Split(string(out), "\n") {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		_, list, _ := strings.Cut(rest, ": ")
		list, _, _ = strings.Cut(list, ";")
		got := strings.Fields(list)
		sorted, want := slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(hosts))
		if !slices.Equal(sorted, want) {
			return fmt.Errorf("%s: ranks 0..%d ran on hosts %s, want one on each of %s", program, len(got)-1, strings.Join(got, " "), strings.Join(hosts, " "))
		}
		return nil
	}
	return fmt.Errorf("%s printed no line %q...: %s", program, prefix, lastLines(string(out), 8))
}
