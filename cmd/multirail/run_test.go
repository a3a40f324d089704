package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/multirail/multirail/comm/rdzv"
)

// helperEnv selects what TestHelperProcess does when multirail run starts
// this test binary as its ranks.
const helperEnv = "MULTIRAIL_RUN_HELPER"

// TestHelperProcess is a rank of the tests below, not a test: run starts
// the test binary with -test.run=^TestHelperProcess$ and helperEnv set.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	rank, _ := strconv.Atoi(os.Getenv("MULTIRAIL_RANK"))
	size, _ := strconv.Atoi(os.Getenv("MULTIRAIL_SIZE"))
	exchange := func(timeout time.Duration) [][]byte {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		card := rdzv.Card{JobID: os.Getenv("MULTIRAIL_JOB_ID"), Rank: rank, Size: size, Data: []byte("card-" + strconv.Itoa(rank))}
		table, err := rdzv.Exchange(ctx, os.Getenv("MULTIRAIL_RDZV"), "", card) // token from MULTIRAIL_TOKEN
		if err != nil {
			fmt.Fprintf(os.Stderr, "rank %d: %v\n", rank, err)
			os.Exit(4)
		}
		return table
	}
	block := func() { time.Sleep(time.Hour) }
	switch mode {
	case "ok":
		fmt.Printf("rank %d of %d\n", rank, size)
		fmt.Fprintf(os.Stderr, "err %d\n", rank)
	case "partial":
		fmt.Printf("line %d\npart %d", rank, rank)
		fmt.Fprintf(os.Stderr, "err %d", rank)
	case "rdzv":
		table := exchange(20 * time.Second)
		var cards []string
		for _, c := range table {
			cards = append(cards, string(c))
		}
		fmt.Printf("rank %d: table of %d: %s local=%s/%s serve=%s emu=%s token=%s\n", rank, len(table), strings.Join(cards, ","),
			os.Getenv("MULTIRAIL_LOCAL_RANK"), os.Getenv("MULTIRAIL_LOCAL_SIZE"), os.Getenv("MULTIRAIL_RDZV_SERVE"),
			os.Getenv("MULTIRAIL_EMU"), os.Getenv(rdzv.TokenEnv))
	case "skip1":
		// Rank 1 never comes to the rendezvous; the others give up.
		if rank != 1 {
			exchange(time.Second)
		}
	case "fail1", "fail1-stubborn":
		if mode == "fail1-stubborn" {
			signal.Ignore(syscall.SIGTERM)
		} else if rank == 0 {
			// A child in rank 0's process group: the kill reaches it too.
			c := exec.Command("sleep", "3600")
			if err := c.Start(); err != nil {
				os.Exit(5)
			}
			os.WriteFile(filepath.Join(os.Getenv("MULTIRAIL_RUN_HELPER_DIR"), "child.pid"), []byte(strconv.Itoa(c.Process.Pid)), 0o600)
		}
		exchange(20 * time.Second) // everyone is ready
		if rank == 1 {
			os.Exit(3)
		}
		block()
	case "sleep":
		block()
	case "interrupt":
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT)
		exchange(20 * time.Second)
		os.WriteFile(filepath.Join(os.Getenv("MULTIRAIL_RUN_HELPER_DIR"), "ready-"+strconv.Itoa(rank)), nil, 0o600)
		<-sig
		fmt.Printf("rank %d: interrupted\n", rank)
	}
	os.Exit(0)
}

// runHelper runs `multirail run ARGS... -- <this test binary>` with the
// helper in mode and returns its exit code and output. It fails the test
// when run does not end within 30 s.
func runHelper(t *testing.T, mode string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv(helperEnv, mode)
	// Under -race, a process sleeps a second at exit unless told not to.
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	args = append(append([]string{"run"}, args...), "--", os.Args[0], "-test.run=^TestHelperProcess$")
	type res struct {
		code     int
		out, err string
	}
	done := make(chan res, 1)
	go func() {
		var o, e bytes.Buffer
		c := run(args, &o, &e)
		done <- res{c, o.String(), e.String()}
	}()
	select {
	case r := <-done:
		return r.code, r.out, r.err
	case <-time.After(30 * time.Second):
		t.Fatalf("multirail %s did not end", strings.Join(args, " "))
		return 0, "", ""
	}
}

// lastJSON parses the summary, the last line of stdout.
func lastJSON(t *testing.T, stdout string) runSummary {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	var s struct {
		NP        int     `json:"np"`
		DurationS float64 `json:"duration_s"`
		Ranks     []struct {
			Rank      int      `json:"rank"`
			ExitCode  int      `json:"exit_code"`
			Signal    *string  `json:"signal"`
			DurationS *float64 `json:"duration_s"`
		} `json:"ranks"`
	}
	dec := json.NewDecoder(strings.NewReader(lines[len(lines)-1]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("summary %q: %v", lines[len(lines)-1], err)
	}
	out := runSummary{NP: s.NP, DurationS: s.DurationS}
	for i, r := range s.Ranks {
		if r.Rank != i || r.DurationS == nil || *r.DurationS < 0 || s.DurationS < *r.DurationS {
			t.Errorf("summary rank %d: %+v", i, r)
		}
		rr := &runRank{Rank: r.Rank, ExitCode: r.ExitCode}
		if r.Signal != nil {
			if *r.Signal == "" {
				t.Errorf("rank %d: empty signal field (omitted when there is none)", i)
			}
			rr.Signal = *r.Signal
		}
		out.Ranks = append(out.Ranks, rr)
	}
	return out
}

func TestRunAllOK(t *testing.T) {
	code, stdout, stderr := runHelper(t, "ok", "-n", "3", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for r := range 3 {
		if !strings.Contains(stdout, fmt.Sprintf("rank %d of 3\n", r)) || !strings.Contains(stderr, fmt.Sprintf("err %d\n", r)) {
			t.Errorf("rank %d's output missing: stdout %q stderr %q", r, stdout, stderr)
		}
	}
	s := lastJSON(t, stdout)
	if s.NP != 3 || len(s.Ranks) != 3 {
		t.Fatalf("%+v", s)
	}
	for _, r := range s.Ranks {
		if r.ExitCode != 0 || r.Signal != "" {
			t.Errorf("rank %d: %+v", r.Rank, r)
		}
	}
}

// TestRunFailureKillsTheRest: rank 1 exits 3 while the others block: they
// get SIGTERM (and so does rank 0's child), run exits 1.
func TestRunFailureKillsTheRest(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MULTIRAIL_RUN_HELPER_DIR", dir)
	code, stdout, stderr := runHelper(t, "fail1", "-n", "3", "--json")
	if code != 1 || !strings.HasSuffix(stderr, "multirail: run: rank 1 exited with status 3; run stopped the others (3 of 3 ranks failed)\n") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	s := lastJSON(t, stdout)
	for _, r := range s.Ranks {
		want := runRank{Rank: r.Rank, ExitCode: -1, Signal: "SIGTERM"}
		if r.Rank == 1 {
			want = runRank{Rank: 1, ExitCode: 3}
		}
		if r.ExitCode != want.ExitCode || r.Signal != want.Signal {
			t.Errorf("rank %d: exit %d signal %q, want %d %q", r.Rank, r.ExitCode, r.Signal, want.ExitCode, want.Signal)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(b))
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("rank 0's child %d survived the job", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie waiting for init to reap it
// does not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) && runtime.GOOS != "linux"
	}
	// pid (comm) STATE ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return true
	}
	_, rest, _ := strings.Cut(string(b[i:]), " ")
	return !strings.HasPrefix(rest, "Z")
}

// TestRunGraceKill: ranks that ignore SIGTERM get SIGKILL after --grace.
func TestRunGraceKill(t *testing.T) {
	code, stdout, stderr := runHelper(t, "fail1-stubborn", "-n", "3", "--grace", "200ms", "--json")
	if code != 1 || !strings.Contains(stderr, "rank 1 exited with status 3; run stopped the others (3 of 3 ranks failed); ranks still running after --grace 200ms got SIGKILL\n") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, r := range lastJSON(t, stdout).Ranks {
		if r.Rank != 1 && (r.ExitCode != -1 || r.Signal != "SIGKILL") {
			t.Errorf("rank %d: %+v", r.Rank, r)
		}
	}
}

func TestRunTimeout(t *testing.T) {
	start := time.Now()
	code, stdout, stderr := runHelper(t, "sleep", "-n", "2", "--timeout", "300ms", "--json")
	if code != 1 || !strings.HasSuffix(stderr, "multirail: run: job timed out after 300ms (--timeout 300ms): stopped it\n") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Errorf("ended after %v, before the timeout", el)
	}
	for _, r := range lastJSON(t, stdout).Ranks {
		if r.ExitCode != -1 || r.Signal != "SIGTERM" {
			t.Errorf("rank %d: %+v", r.Rank, r)
		}
	}
}

func TestRunTagOutput(t *testing.T) {
	code, stdout, stderr := runHelper(t, "partial", "-n", "2", "--tag-output")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	sorted := func(s string) []string {
		l := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
		slices.Sort(l)
		return l
	}
	wantOut := []string{"[1,0]<stdout>:line 0", "[1,0]<stdout>:part 0", "[1,1]<stdout>:line 1", "[1,1]<stdout>:part 1"}
	if got := sorted(stdout); !slices.Equal(got, wantOut) || !strings.HasSuffix(stdout, "\n") {
		t.Errorf("stdout %q, want the lines %q", stdout, wantOut)
	}
	if got := sorted(stderr); !slices.Equal(got, []string{"[1,0]<stderr>:err 0", "[1,1]<stderr>:err 1"}) {
		t.Errorf("stderr %q", stderr)
	}
	// Each rank's lines keep their order.
	if i, j := strings.Index(stdout, "line 0"), strings.Index(stdout, "part 0"); i > j {
		t.Errorf("rank 0's lines out of order: %q", stdout)
	}
}

func TestTagWriter(t *testing.T) {
	var out bytes.Buffer
	tw := &tagWriter{prefix: []byte("[1,7]<stdout>:"), out: &out}
	for _, p := range []string{"a", "b\nc\n", "", "d", "\n\n", "e"} {
		tw.Write([]byte(p))
	}
	tw.Flush()
	if want := "[1,7]<stdout>:ab\n[1,7]<stdout>:c\n[1,7]<stdout>:d\n[1,7]<stdout>:\n[1,7]<stdout>:e\n"; out.String() != want {
		t.Errorf("%q, want %q", out.String(), want)
	}
	out.Reset()
	tw.Write(bytes.Repeat([]byte("x"), maxTagLine+10))
	tw.Flush()
	if lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); len(lines) != 2 || len(lines[1]) != len("[1,7]<stdout>:")+10 {
		t.Errorf("a long line became %d lines", len(lines))
	}
}

// TestRunRendezvous: the ranks' environment, and a real rdzv.Exchange
// through the server run serves.
func TestRunRendezvous(t *testing.T) {
	t.Setenv(rdzv.TokenEnv, "") // unset below; Setenv restores it
	os.Unsetenv(rdzv.TokenEnv)
	code, stdout, stderr := runHelper(t, "rdzv", "-n", "4", "--emu", "emu:100mbit/1ms,emu:50mbit")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	slices.Sort(lines)
	if len(lines) != 4 {
		t.Fatalf("stdout %q", stdout)
	}
	var token string
	for r, l := range lines {
		prefix := fmt.Sprintf("rank %d: table of 4: card-0,card-1,card-2,card-3 local=%d/4 serve=0 emu=emu:100mbit/1ms,emu:50mbit token=", r, r)
		tok, ok := strings.CutPrefix(l, prefix)
		if !ok || len(tok) != 64 || (token != "" && tok != token) {
			t.Errorf("line %q, want %q and a 64-digit token shared by all", l, prefix)
		}
		token = tok
	}
	if stderr != "" {
		t.Errorf("stderr %q", stderr)
	}
	// run's own MULTIRAIL_TOKEN is passed through (and used by its server).
	t.Setenv(rdzv.TokenEnv, "given")
	code, stdout, stderr = runHelper(t, "rdzv", "-n", "2")
	if code != 0 || strings.Count(stdout, "emu= token=given\n") != 2 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestRunRendezvousIncomplete: a rank that never registers fails the
// others' Exchange, and run names it.
func TestRunRendezvousIncomplete(t *testing.T) {
	code, _, stderr := runHelper(t, "skip1", "-n", "3")
	if code != 1 || !strings.Contains(stderr, "gave up waiting for rank(s) 1") ||
		!strings.Contains(stderr, "multirail: run: every rank has exited: rendezvous of job \"run-") ||
		!strings.Contains(stderr, "rank(s) 1 of 3 never registered") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// TestRunForwardsSignals: SIGINT to run reaches every rank.
func TestRunForwardsSignals(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MULTIRAIL_RUN_HELPER_DIR", dir)
	go func() {
		// Once both ranks wait for it (so run has its handler too).
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if m, _ := filepath.Glob(filepath.Join(dir, "ready-*")); len(m) == 2 {
				syscall.Kill(os.Getpid(), syscall.SIGINT)
				return
			}
		}
	}()
	code, stdout, stderr := runHelper(t, "interrupt", "-n", "2")
	if code != 1 || !strings.Contains(stderr, "multirail: run: received SIGINT: forwarded it to every rank (0 of 2 ranks failed)\n") ||
		!strings.Contains(stdout, "rank 0: interrupted") || !strings.Contains(stdout, "rank 1: interrupted") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestRunBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"run", "--", "true"}, []string{"-n 0 is out of range", "1..1024"}},
		{[]string{"run", "-n", "2000", "true"}, []string{"-n 2000 is out of range"}},
		{[]string{"run", "-n", "2"}, []string{"run needs a program", "-- PROGRAM"}},
		{[]string{"run", "-n", "2", "--"}, []string{"run needs a program"}},
		{[]string{"run", "-n", "2", "--emu", "loop", "--", "true"}, []string{`--emu "loop": item 0 (loop) is not an emulated rail`, "allowed: emu:RATE"}},
		{[]string{"run", "-n", "2", "--emu", "emu:fast", "--", "true"}, []string{"--emu", `"emu:fast"`, "allowed"}},
		{[]string{"run", "-n", "2", "--emu-load", "phases", "--", "true"}, []string{`--emu-load "phases" needs --emu`}},
		{[]string{"run", "-n", "2", "--emu", "emu:10mbit", "--emu-load", "storm", "--", "true"}, []string{"--emu-load", `"storm"`, "allowed: off, bursty"}},
		{[]string{"run", "-n", "2", "--timeout", "soon", "--", "true"}, []string{`"soon"`, "--timeout"}},
		{[]string{"run", "-n", "2", "--timeout", "-1s", "--", "true"}, []string{"--timeout -1s is negative"}},
		{[]string{"run", "-n", "2", "--grace", "2h", "--", "true"}, []string{"--grace 2h0m0s is out of range: allowed 0..1h"}},
		{[]string{"run", "-n", "x", "--", "true"}, []string{`"x"`, "-n"}},
		{[]string{"run", "-n", "2", "--", "no-such-program-xyz"}, []string{`program "no-such-program-xyz"`, "not found"}},
	} {
		var stdout, stderr bytes.Buffer
		code := run(c.args, &stdout, &stderr)
		msg := stderr.String()
		if code != 2 || strings.Count(msg, "\n") != 1 || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit 2 and one line", c.args, code, msg, stdout.String())
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%v: message %q does not mention %q", c.args, msg, w)
			}
		}
	}
}

// TestRunFlagsEndAtProgram: flags after PROGRAM are PROGRAM's.
func TestRunFlagsEndAtProgram(t *testing.T) {
	code, stdout, stderr := runCLI("run", "-n", "1", "sh", "-c", "echo $0 $1", "--json", "-n")
	if code != 0 || stdout != "--json -n\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestRunLeftoverChild: a rank's background child that keeps its stdout
// open does not hold run up for more than outputDrain.
func TestRunLeftoverChild(t *testing.T) {
	start := time.Now()
	code, stdout, stderr := runCLI("run", "-n", "1", "--tag-output", "--", "sh", "-c", "sleep 5 & echo hi")
	if code != 0 || stdout != "[1,0]<stdout>:hi\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if el := time.Since(start); el > outputDrain+2*time.Second {
		t.Errorf("run took %v", el)
	}
}
