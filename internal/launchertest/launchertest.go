// Package launchertest gives tests the real launchers users start ranks
// with: Open MPI's mpirun, Slurm's srun (a one-node Slurm that the test
// binary starts and stops itself) and torchrun.
//
// Skip policy: when a launcher is missing or the test does not run as root,
// the test is skipped with a message that says how to get it (sh
// scripts/comm-deps.sh as root) -- except under CI (CI=true) as root, where
// .ci/run has installed the packages: there the test fails instead, so that
// a green CI means the launcher tests ran. torchrun is not installed by CI's
// default, so Torchrun always skips when it is missing.
//
// Slurm is shared by all tests of one test binary. A package whose tests
// call Slurm should stop it in TestMain:
//
//	func TestMain(m *testing.M) { launchertest.Main(m) }
//
// Without Main, Slurm is reference-counted: it stops when the last test
// using it (and its subtests) has finished, and a later test starts it
// again. Either way the daemons also stop when the test binary dies without
// running its cleanups (a panic on -timeout, SIGKILL): scripts/slurm-local.sh
// leaves a watcher that stops them once this process is gone.
package launchertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// RepoRoot is the root of the module (the nearest directory holding go.mod
// at or above the working directory, which go test sets to the package's
// directory).
func RepoRoot(t testing.TB) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("launchertest: %w", err)
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("launchertest: no go.mod at or above %s", wd)
		}
		dir = parent
	}
}

// strict reports whether a missing launcher fails the test instead of
// skipping it: under CI (CI=true) as root, where .ci/run installs them.
func strict() bool {
	return os.Getenv("CI") == "true" && os.Geteuid() == 0
}

// unavailable skips t, or fails it under CI as root.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if strict() {
		t.Fatalf("%s (CI=true as root: .ci/run should have installed it with scripts/comm-deps.sh)", msg)
	}
	t.Skip(msg)
}

// requireRoot skips t when this process is not root (never fails: CI
// without root cannot run these tests either).
func requireRoot(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("%s needs root (running as uid %d)", what, os.Geteuid())
	}
}

// lookPath finds a launcher's programs or skips/fails t.
func lookPath(t testing.TB, pkgs string, names ...string) []string {
	t.Helper()
	paths := make([]string, len(names))
	for i, name := range names {
		p, err := exec.LookPath(name)
		if err != nil {
			unavailable(t, "%s not found on PATH: install %s (as root: sh scripts/comm-deps.sh)", name, pkgs)
			return nil
		}
		paths[i] = p
	}
	return paths
}

// MPIRun returns the path of Open MPI's mpirun and the arguments that go
// before "-n N PROGRAM ARGS..." to run N ranks on this host: more ranks
// than cores (--oversubscribe), no binding to cores (--bind-to none; a
// bound Go rank would see one CPU) and, as root, --allow-run-as-root. It
// does not need root. Local ranks inherit mpirun's environment. The ranks
// are plain programs, not MPI programs; a C MPI program on these 2 cores
// also wants "--mca mpi_yield_when_idle 1" (comm.md), which callers add.
func MPIRun(t testing.TB) (mpirun string, prefix []string) {
	t.Helper()
	p := lookPath(t, "openmpi-bin", "mpirun")
	if os.Geteuid() == 0 {
		prefix = append(prefix, "--allow-run-as-root")
	}
	return p[0], append(prefix, "--oversubscribe", "--bind-to", "none")
}

// mainActive is set by Main: Slurm then keeps its daemons until Main stops
// them after m.Run.
var mainActive atomic.Bool

// Main runs the tests, then stops the Slurm that Slurm started (if any),
// and exits with the tests' code. Call it from TestMain.
func Main(m *testing.M) {
	mainActive.Store(true)
	code := m.Run()
	if err := stopSlurm(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

var slurm struct {
	sync.Mutex
	users   int    // tests holding it (when Main is not in use)
	dir     string // DIR of scripts/slurm-local.sh; "" when not running
	script  string
	lastErr error // a failed start is not retried in this binary
}

// Slurm starts a one-node Slurm with scripts/slurm-local.sh (once per test
// binary, shared by its tests, in a fresh directory under the temp dir, on
// two free ports) and returns the path of srun and the environment to run
// it with: this process's environment without any SLURM_*, SLURMD_* or SRUN_*
// variable (so an outer Slurm job does not leak in), plus SLURM_CONF naming
// the test cluster. Use env as exec.Cmd.Env, appending what the ranks need.
// The cluster has one node, this host, with a partition whose cores may be
// oversubscribed: "srun -n 4 -O PROGRAM" runs 4 tasks on 2 cores.
func Slurm(t testing.TB) (srun string, env []string) {
	t.Helper()
	requireRoot(t, "a local Slurm (slurmd)")
	p := lookPath(t, "slurmctld, slurmd and slurm-client", "srun", "sinfo", "slurmctld", "slurmd")
	srun = p[0]
	root := RepoRoot(t)
	script := filepath.Join(root, "scripts", "slurm-local.sh")
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("launchertest: %v", err)
	}

	slurm.Lock()
	if slurm.dir == "" && slurm.lastErr == nil {
		slurm.lastErr = startSlurm(script)
	}
	err := slurm.lastErr
	dir := slurm.dir
	if err == nil && !mainActive.Load() {
		slurm.users++
		t.Cleanup(releaseSlurm)
	}
	slurm.Unlock()
	if err != nil {
		unavailable(t, "%v", err)
		return "", nil
	}

	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SLURM_") || strings.HasPrefix(kv, "SLURMD_") || strings.HasPrefix(kv, "SRUN_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "SLURM_CONF="+filepath.Join(dir, "slurm.conf"))
	return srun, env
}

// startSlurm runs "slurm-local.sh up DIR"; slurm is locked.
func startSlurm(script string) error {
	base := os.TempDir()
	if len(base) > 40 { // slurmstepd's unix sockets live under DIR/spool
		base = "/tmp"
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // free ports can be taken between probe and bind
		dir, err := os.MkdirTemp(base, "multirail-slurm-")
		if err != nil {
			return fmt.Errorf("launchertest: %w", err)
		}
		ctld, d, err := freePorts()
		if err != nil {
			os.RemoveAll(dir)
			return fmt.Errorf("launchertest: free ports for Slurm: %w", err)
		}
		_, stderr, err := runScript(script, 120*time.Second, []string{
			"SLURM_LOCAL_CTLD_PORT=" + strconv.Itoa(ctld),
			"SLURM_LOCAL_D_PORT=" + strconv.Itoa(d),
			"SLURM_LOCAL_OWNER_PID=" + strconv.Itoa(os.Getpid()),
		}, "up", dir)
		if err == nil {
			slurm.dir = dir
			slurm.script = script
			return nil
		}
		lastErr = fmt.Errorf("launchertest: a local Slurm did not start (%s up %s: %v):\n%s", script, dir, err, stderr)
		// The script stops what it started when it fails; run down anyway
		// (a watcher may be left) and keep DIR with its logs.
		runScript(script, 60*time.Second, nil, "down", dir)
		if !strings.Contains(stderr, "is taken") && !strings.Contains(stderr, "Address already in use") {
			break
		}
	}
	return lastErr
}

// releaseSlurm ends one test's use of Slurm (without Main).
func releaseSlurm() {
	slurm.Lock()
	slurm.users--
	last := slurm.users == 0
	slurm.Unlock()
	if last {
		if err := stopSlurm(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
}

// stopSlurm runs "slurm-local.sh down DIR" and removes DIR.
func stopSlurm() error {
	slurm.Lock()
	defer slurm.Unlock()
	if slurm.dir == "" || slurm.users > 0 {
		return nil
	}
	dir := slurm.dir
	slurm.dir = ""
	if _, stderr, err := runScript(slurm.script, 60*time.Second, nil, "down", dir); err != nil {
		return fmt.Errorf("launchertest: stopping the local Slurm (%s down %s): %v\n%s", slurm.script, dir, err, stderr)
	}
	return os.RemoveAll(dir)
}

func runScript(script string, timeout time.Duration, env []string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second // the daemons hold none of these pipes; do not hang if one did
	err = cmd.Run()
	if ctx.Err() != nil {
		err = errors.Join(err, ctx.Err())
	}
	return out.String(), errb.String(), err
}

// freePorts returns two TCP ports that were free on all interfaces a moment ago.
func freePorts() (int, int, error) {
	var ports [2]int
	for i := range ports {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			return 0, 0, err
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports[0], ports[1], nil
}

// Torchrun returns the Python that has Debian's torch and the arguments
// that run torchrun through scripts/torchrun-wrapper.py (which fixes
// Debian's torch 1.13 on Python 3.11; see the script): run
// python, append(args, "--standalone", "--nproc_per_node", "2", "--no_python", PROGRAM...).
// It skips when python3-torch is not installed (CI does not install it by
// default; as root: sh scripts/comm-deps.sh --torch).
func Torchrun(t testing.TB) (python string, args []string) {
	t.Helper()
	python = "/usr/bin/python3"
	if _, err := os.Stat("/usr/bin/torchrun"); err != nil {
		t.Skip("torchrun not installed: install python3-torch (as root: sh scripts/comm-deps.sh --torch)")
	}
	wrapper := filepath.Join(RepoRoot(t), "scripts", "torchrun-wrapper.py")
	if _, err := os.Stat(wrapper); err != nil {
		t.Fatalf("launchertest: %v", err)
	}
	return python, []string{wrapper}
}
