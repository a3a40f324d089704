package lossy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/lossy/discard"
)

const rankEnv = "MULTIRAIL_LOSSY_TEST_RANK"

// TestRingAcrossProcesses: three ranks in three processes (this test
// binary, run again as children), connected by multirail connections of
// two loopback rails each, allreduce over StageConns (nothing discarded)
// and get every rank exactly the sequential sum.
func TestRingAcrossProcesses(t *testing.T) {
	if os.Getenv(rankEnv) != "" {
		t.Skip("running as a child rank")
	}
	const N, n = 3, 3000
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type child struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Reader
	}
	kids := make([]child, N)
	addrs := make([]string, N)
	for i := range N {
		cmd := exec.CommandContext(ctx, exe, "-test.run=^TestRankChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", rankEnv, i), fmt.Sprintf("MULTIRAIL_LOSSY_TEST_N=%d", N))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		kids[i] = child{cmd, in, bufio.NewReader(out)}
		line, err := readTagged(kids[i].out, "ADDR ")
		if err != nil {
			t.Fatalf("rank %d: %v", i, err)
		}
		addrs[i] = line
	}
	for i, k := range kids {
		fmt.Fprintf(k.in, "%s\n", addrs[(i+1)%N])
	}
	want := make([]float32, n)
	for r := range N {
		for j, v := range rankInput(r, n) {
			want[j] += v
		}
	}
	for i, k := range kids {
		line, err := readTagged(k.out, "RESULT ")
		if err != nil {
			t.Fatalf("rank %d: %v", i, err)
		}
		var got []float32
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("rank %d: %v", i, err)
		}
		if len(got) != n {
			t.Fatalf("rank %d: %d values", i, len(got))
		}
		for j := range n {
			if got[j] != want[j] {
				t.Fatalf("rank %d element %d: %v, sequential sum %v", i, j, got[j], want[j])
			}
		}
	}
	for i, k := range kids {
		k.in.Close()
		if err := k.cmd.Wait(); err != nil {
			t.Fatalf("rank %d exited: %v", i, err)
		}
	}
}

// readTagged returns the rest of the first line of r that starts with tag
// (the test framework prints its own lines too).
func readTagged(r *bufio.Reader, tag string) (string, error) {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("waiting for %q: %w", tag, err)
		}
		if rest, ok := strings.CutPrefix(line, tag); ok {
			return strings.TrimSpace(rest), nil
		}
	}
}

func rankInput(rank, n int) []float32 {
	x := make([]float32, n)
	for j := range x {
		x[j] = float32((rank+1)*(j%101) - 50)
	}
	return x
}

// TestRankChild is one rank of TestRingAcrossProcesses; it does nothing
// unless started by it.
func TestRankChild(t *testing.T) {
	rs := os.Getenv(rankEnv)
	if rs == "" {
		t.Skip("only run as a child of TestRingAcrossProcesses")
	}
	rank, _ := strconv.Atoi(rs)
	N, _ := strconv.Atoi(os.Getenv("MULTIRAIL_LOSSY_TEST_N"))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	ln, err := multirail.Listen("127.0.0.1:0", multirail.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fmt.Printf("ADDR %s\n", ln.Addr())
	next, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	next = strings.TrimSpace(next)
	accepted := make(chan *multirail.Conn, 1)
	go func() { c, _ := ln.Accept(ctx); accepted <- c }()
	out, err := multirail.Dial(ctx, multirail.Config{Rails: []multirail.Rail{{Addr: next}, {Addr: next}}})
	if err != nil {
		t.Fatal(err)
	}
	in := <-accepted
	if in == nil {
		t.Fatal("accept failed")
	}
	// Stages whose rate stays 0: the loss-tolerant path, exact.
	cfg := StageConfig{Discard: discard.Config{DelayThreshold: 1e9}}
	so, err := NewStageConn(out, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer so.Close()
	si, err := NewStageConn(in, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer si.Close()
	ring, err := NewRing(rank, N, StageLink{Next: so, Prev: si}, Config{PacketFloats: 500})
	if err != nil {
		t.Fatal(err)
	}
	x := rankInput(rank, 3000)
	if err := ring.Allreduce(ctx, x); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(x)
	fmt.Printf("RESULT %s\n", b)
	// Stay until the parent has read every rank's result (it closes our
	// stdin): closing early would cut the neighbours' last hops.
	io.Copy(io.Discard, os.Stdin)
}
