package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multirail/multirail/internal/launchertest"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// multirailBinary builds the command once per test binary.
func multirailBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "multirail-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "multirail")
		out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput()
		if err != nil {
			buildErr = err
			builtBin = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("go build: %v\n%s", buildErr, builtBin)
	}
	return builtBin
}

// osuLaunchResult is the part of `multirail osu --json` the launcher tests check.
type osuLaunchResult struct {
	Test      string     `json:"test"`
	Ranks     int        `json:"ranks"`
	Launcher  string     `json:"launcher"`
	Rails     []int      `json:"rails"`
	RailNames [][]string `json:"rail_names"`
	Results   []struct {
		Size      int  `json:"size"`
		Validated bool `json:"validated"`
	} `json:"results"`
}

// checkOSU runs a launcher command line whose ranks run `multirail osu
// TEST --validate --json` and checks rank 0's JSON, which it returns.
func checkOSU(t *testing.T, launcher string, env []string, argv ...string) osuLaunchResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(argv, " "), err, stdout.String(), stderr.String())
	}
	var res osuLaunchResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("%s: stdout is not one JSON object: %v\n%s\nstderr:\n%s", strings.Join(argv, " "), err, stdout.String(), stderr.String())
	}
	if res.Ranks != 4 || res.Launcher != launcher || len(res.Rails) != 4 || len(res.Results) == 0 {
		t.Fatalf("%s: got ranks %d launcher %q rails %v, %d results; want 4 ranks from %q", strings.Join(argv, " "), res.Ranks, res.Launcher, res.Rails, len(res.Results), launcher)
	}
	for _, r := range res.Results {
		if !r.Validated {
			t.Errorf("%s: size %d not validated", strings.Join(argv, " "), r.Size)
		}
	}
	t.Logf("%s: %s over %s, rails %v, %d sizes validated", launcher, res.Test, launcher, res.Rails, len(res.Results))
	return res
}

// Sizes on both sides of the algorithm thresholds (small, medium and
// large algorithms run), few iterations: these tests check correctness
// under each launcher, not speed.
var launcherOSUArgs = [][]string{
	{"osu", "allreduce", "--validate", "--json", "--sizes", "4,4096,262144,1048576", "--iters", "5", "--warmup", "1"},
	{"osu", "alltoall", "--validate", "--json", "--sizes", "4,4096,65536", "--iters", "5", "--warmup", "1"},
}

// TestOSUUnderMultirailRun: `multirail run -n 4 -- multirail osu ...`.
func TestOSUUnderMultirailRun(t *testing.T) {
	bin := multirailBinary(t)
	for _, osu := range launcherOSUArgs {
		checkOSU(t, "multirail", os.Environ(), append([]string{bin, "run", "-n", "4", "--", bin}, osu...)...)
	}
}

// TestOSUUnderMPIRun: real Open MPI mpirun on one host, no extra variable.
func TestOSUUnderMPIRun(t *testing.T) {
	mpirun, prefix := launchertest.MPIRun(t)
	bin := multirailBinary(t)
	for _, osu := range launcherOSUArgs {
		argv := append(append([]string{mpirun}, prefix...), "-n", "4", bin)
		checkOSU(t, "ompi", os.Environ(), append(argv, osu...)...)
	}
}

// TestOSUUnderSrun: real Slurm srun on a one-node Slurm this test starts.
func TestOSUUnderSrun(t *testing.T) {
	srun, env := launchertest.Slurm(t)
	bin := multirailBinary(t)
	for _, osu := range launcherOSUArgs {
		checkOSU(t, "slurm", env, append([]string{srun, "-n", "4", "-O", bin}, osu...)...)
	}
}
