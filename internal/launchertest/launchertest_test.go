package launchertest_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail/internal/launchertest"
)

func TestMain(m *testing.M) { launchertest.Main(m) }

// values collects the values of KEY=VALUE lines of env dumps.
func values(out, key string) []string {
	var vs []string
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			vs = append(vs, v)
		}
	}
	slices.Sort(vs)
	return vs
}

func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstderr:\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

func TestSrun(t *testing.T) {
	srun, env := launchertest.Slurm(t)
	out := run(t, env, srun, "-n", "4", "-O", "env")
	if got, want := values(out, "SLURM_PROCID"), []string{"0", "1", "2", "3"}; !slices.Equal(got, want) {
		t.Errorf("SLURM_PROCID: got %q, want %q\n%s", got, want, out)
	}
	if got, want := values(out, "SLURM_NTASKS"), []string{"4", "4", "4", "4"}; !slices.Equal(got, want) {
		t.Errorf("SLURM_NTASKS: got %q, want %q", got, want)
	}
	if ids := values(out, "SLURM_JOB_ID"); len(ids) != 4 || ids[0] != ids[3] {
		t.Errorf("SLURM_JOB_ID: want one job id in 4 tasks, got %q", ids)
	}
}

// A second user of the same Slurm (shared within the test binary).
func TestSrunAgain(t *testing.T) {
	srun, env := launchertest.Slurm(t)
	out := run(t, env, srun, "-n", "2", "-O", "env")
	if got, want := values(out, "SLURM_LOCALID"), []string{"0", "1"}; !slices.Equal(got, want) {
		t.Errorf("SLURM_LOCALID: got %q, want %q", got, want)
	}
}

func TestMPIRun(t *testing.T) {
	mpirun, prefix := launchertest.MPIRun(t)
	args := append(prefix, "-n", "4", "env")
	out := run(t, nil, mpirun, args...)
	if got, want := values(out, "OMPI_COMM_WORLD_RANK"), []string{"0", "1", "2", "3"}; !slices.Equal(got, want) {
		t.Errorf("OMPI_COMM_WORLD_RANK: got %q, want %q\n%s", got, want, out)
	}
	if got, want := values(out, "OMPI_COMM_WORLD_SIZE"), []string{"4", "4", "4", "4"}; !slices.Equal(got, want) {
		t.Errorf("OMPI_COMM_WORLD_SIZE: got %q, want %q", got, want)
	}
}

func TestRepoRoot(t *testing.T) {
	root := launchertest.RepoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "scripts", "slurm-local.sh")); err != nil {
		t.Fatalf("RepoRoot %s: %v", root, err)
	}
}
