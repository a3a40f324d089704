package comm

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const killChildEnv = "MULTIRAIL_COMM_KILL_CHILD"

// TestKilledRank: four ranks in four processes (this test binary again,
// started through Init with MULTIRAIL_* variables as multirail run sets
// them) allreduce in a loop; rank 2 is killed with SIGKILL; the others
// fail with an error naming rank 2 within seconds.
func TestKilledRank(t *testing.T) {
	if os.Getenv(killChildEnv) != "" {
		t.Skip("running as a child rank")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const N = 4
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	type kid struct {
		cmd *exec.Cmd
		out *bufio.Scanner
	}
	kids := make([]kid, N)
	for r := range N {
		cmd := exec.CommandContext(ctx, exe, "-test.run=^TestKillChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), killChildEnv+"=1",
			fmt.Sprintf("MULTIRAIL_RANK=%d", r), fmt.Sprintf("MULTIRAIL_SIZE=%d", N),
			fmt.Sprintf("MULTIRAIL_LOCAL_RANK=%d", r), fmt.Sprintf("MULTIRAIL_LOCAL_SIZE=%d", N),
			"MULTIRAIL_JOB_ID=killtest", "MULTIRAIL_RDZV=file://"+dir+"/rdzv", "MULTIRAIL_TOKEN=secret")
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		kids[r] = kid{cmd, bufio.NewScanner(out)}
	}
	line := func(r int, prefix string) string {
		for kids[r].out.Scan() {
			if s, ok := strings.CutPrefix(kids[r].out.Text(), prefix); ok {
				return s
			}
		}
		t.Fatalf("rank %d ended without a %q line", r, prefix)
		return ""
	}
	for r := range N {
		line(r, "READY")
	}
	killed := time.Now()
	if err := kids[2].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []int{0, 1, 3} {
		msg := line(r, "ERROR ")
		took := time.Since(killed)
		t.Logf("rank %d after %v: %s", r, took.Round(time.Millisecond), msg)
		if !strings.Contains(msg, "rank 2") || !strings.Contains(msg, "allreduce") {
			t.Errorf("rank %d: error does not name rank 2 and allreduce: %s", r, msg)
		}
		if took > 10*time.Second {
			t.Errorf("rank %d failed only after %v", r, took)
		}
	}
}

// TestKillChild is one rank of TestKilledRank.
func TestKillChild(t *testing.T) {
	if os.Getenv(killChildEnv) == "" {
		t.Skip("only run as a child of TestKilledRank")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	c, err := Init(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	x := make([]float32, 1<<16)
	for i := 0; ; i++ {
		if err := Allreduce(ctx, c, x, Sum); err != nil {
			fmt.Printf("ERROR %v\n", err)
			return
		}
		if i == 0 {
			fmt.Println("READY")
		}
	}
}
