package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/multirail/multirail/comm"
	"github.com/multirail/multirail/comm/rdzv"
	"github.com/multirail/multirail/emu"
	"github.com/spf13/cobra"
)

// maxRanks bounds multirail run's -n: one host.
const maxRanks = 1024

// maxTagLine is the longest line --tag-output tags whole; longer lines
// are cut into several tagged lines.
const maxTagLine = 64 << 10

type runFlags struct {
	np             int
	emu, emuLoad   string
	tagOutput      bool
	json           bool
	timeout, grace time.Duration
}

// runPlan is validated run input.
type runPlan struct {
	np             int
	emu            string // as given; "" when --emu is absent
	emuLoad        string // canonical pattern; "" when --emu-load is absent
	program        string // resolved path
	argv0          string // as given
	args           []string
	tagOutput      bool
	json           bool
	timeout, grace time.Duration
}

func newRun(g *globals) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run -n N [flags] -- PROGRAM [ARGS...]",
		Short: "Start N ranks of a program on this host, with their rendezvous (like mpirun, torchrun --standalone)",
		Long: `run starts N processes ("ranks") of PROGRAM on this host and serves their
rendezvous itself (a comm/rdzv server on 127.0.0.1, with a random token).
Flags end at PROGRAM (or at --): what follows is PROGRAM's.

Every rank inherits run's environment plus
  MULTIRAIL_RANK, MULTIRAIL_SIZE (N), MULTIRAIL_LOCAL_RANK (= rank),
  MULTIRAIL_LOCAL_SIZE (N), MULTIRAIL_JOB_ID (random),
  MULTIRAIL_RDZV=tcp://127.0.0.1:PORT, MULTIRAIL_RDZV_SERVE=0 (run serves it),
  MULTIRAIL_TOKEN (random; run's own MULTIRAIL_TOKEN when that is set),
  MULTIRAIL_EMU=SPECS with --emu (emulated rails between every pair of ranks),
  MULTIRAIL_EMU_LOAD=PATTERN with --emu-load (background load on them).
Standard input is not forwarded (ranks read /dev/null).

Output passes through untouched. --tag-output prefixes every line with
"[1,RANK]<stdout>:" or "[1,RANK]<stderr>:", as Open MPI's mpirun --tag-output
does (job number always 1); a last line without a newline gets one, and lines
longer than 64 KiB are cut into several tagged lines. Tagged output that a
rank's leftover children write more than 2 s after the rank exited is cut off.

Each rank runs in its own process group. SIGINT, SIGTERM, SIGHUP and SIGQUIT
received by run are forwarded to every rank's group; after SIGINT, SIGTERM or
SIGHUP, ranks still running after --grace get SIGKILL. When a rank fails (exits
non-zero or is killed by a signal) the others get SIGTERM, then SIGKILL after
--grace. --timeout stops the whole job the same way. Once a stopped job's ranks
have exited, what is left in their process groups gets SIGKILL.

Exit status: 0 when every rank exits 0, 1 when any fails (or the job timed
out), 2 for bad input. --json prints after the ranks' output one object:
{"np", "duration_s", "ranks": [{"rank", "exit_code", "signal", "duration_s"}]}
with exit_code -1 and signal the signal's name ("SIGKILL") for a rank killed by
a signal; signal is omitted otherwise. A rendezvous that did not complete (a
rank never registered, a refused card) is reported on stderr.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := f.plan(args)
			if err != nil {
				return err
			}
			return runJob(cmd.Context(), g, p)
		},
	}
	fl := cmd.Flags()
	fl.SetInterspersed(false)
	fl.IntVarP(&f.np, "np", "n", 0, "number of ranks, 1.."+strconv.Itoa(maxRanks))
	fl.StringVar(&f.emu, "emu", "", "emulated rails for every pair of ranks, emu:RATE[/DELAY],... (sets MULTIRAIL_EMU)")
	fl.StringVar(&f.emuLoad, "emu-load", "", "background load on the emulated rails: off, bursty[:busy=400ms,idle=200ms,load=0.5:0.9,seed=N] or phases[:calm=3s,congested=3s,offset=seed,...] (congestion that comes and goes; offset: where in its cycle the schedule starts, a duration or seed; sets MULTIRAIL_EMU_LOAD; needs --emu)")
	fl.BoolVar(&f.tagOutput, "tag-output", false, "prefix each output line with [1,RANK]<stdout>: or [1,RANK]<stderr>:")
	fl.DurationVar(&f.timeout, "timeout", 0, "stop the job after this long (0 = never)")
	fl.DurationVar(&f.grace, "grace", 3*time.Second, "time between SIGTERM and SIGKILL when the job is stopped")
	fl.BoolVar(&f.json, "json", false, "print a JSON summary on stdout after the ranks' output")
	return cmd
}

func (f *runFlags) plan(args []string) (runPlan, error) {
	p := runPlan{np: f.np, tagOutput: f.tagOutput, json: f.json, timeout: f.timeout, grace: f.grace}
	if f.np < 1 || f.np > maxRanks {
		return p, usagef("-n %d is out of range: allowed 1..%d ranks", f.np, maxRanks)
	}
	if len(args) == 0 {
		return p, usagef("run needs a program: multirail run -n N [flags] -- PROGRAM [ARGS...]")
	}
	if f.emu != "" {
		specs, err := emu.ParseSpecs(f.emu)
		if err != nil {
			return p, usagef("--emu: %v", err)
		}
		for i, s := range specs {
			if s.Kind != emu.KindEmu {
				return p, usagef("--emu %q: item %d (%s) is not an emulated rail; allowed: emu:RATE[/DELAY],... (the ranks find real rails themselves)", f.emu, i, s.String())
			}
		}
		p.emu = f.emu
	}
	if f.emuLoad != "" {
		pat, err := emu.ParsePattern(f.emuLoad)
		if err != nil {
			return p, usagef("--emu-load: %v", err)
		}
		if pat.Kind != emu.PatternOff && f.emu == "" {
			return p, usagef("--emu-load %q needs --emu: background load runs on emulated rails", f.emuLoad)
		}
		p.emuLoad = pat.String()
	}
	if f.timeout < 0 {
		return p, usagef("--timeout %v is negative: allowed a duration > 0, or 0 for none", f.timeout)
	}
	if f.grace < 0 || f.grace > time.Hour {
		return p, usagef("--grace %v is out of range: allowed 0..1h", f.grace)
	}
	prog, err := exec.LookPath(args[0])
	if err != nil {
		return p, usagef("program %q: %v", args[0], err)
	}
	p.program, p.argv0, p.args = prog, args[0], args[1:]
	return p, nil
}

// runRank is one rank's process and how it ended.
type runRank struct {
	Rank      int     `json:"rank"`
	ExitCode  int     `json:"exit_code"`
	Signal    string  `json:"signal,omitempty"`
	DurationS float64 `json:"duration_s"`

	cmd      *exec.Cmd
	t0       time.Time
	startErr error
	waitErr  error
	tags     []*tagWriter
	copies   []*streamCopy
	outDone  chan struct{} // closed when the rank's output is copied
}

// outputDrain is how long the output of a rank that exited is still
// copied: what its leftover children write later is cut off.
const outputDrain = 2 * time.Second

// streamCopy copies a pipe from a rank to where its output goes.
type streamCopy struct {
	r    *os.File
	done chan struct{}
}

// start starts the rank's process in its own process group. A stream
// that goes untagged to a file is handed to the rank as is (no copy, no
// buffering); any other goes through a pipe and a goroutine.
func (rk *runRank) start(p runPlan, g *globals, outMu *sync.Mutex, env []string) error {
	cmd := exec.Command(p.program, p.args...)
	cmd.Args[0] = p.argv0 // as typed, as a shell passes it
	cmd.Env = env
	setProcessGroup(cmd)
	var childEnds []*os.File
	defer func() {
		for _, f := range childEnds {
			f.Close()
		}
	}()
	for i, dst := range []io.Writer{g.stdout, g.stderr} {
		f, isFile := dst.(*os.File)
		switch {
		case !p.tagOutput && isFile:
			if i == 0 {
				cmd.Stdout = f
			} else {
				cmd.Stderr = f
			}
			continue
		case p.tagOutput:
			t := &tagWriter{prefix: fmt.Appendf(nil, "[1,%d]<%s>:", rk.Rank, [2]string{"stdout", "stderr"}[i]), out: lockedWriter{outMu, dst}}
			rk.tags = append(rk.tags, t)
			dst = t
		default:
			dst = lockedWriter{outMu, dst}
		}
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		childEnds = append(childEnds, w)
		c := &streamCopy{r: r, done: make(chan struct{})}
		rk.copies = append(rk.copies, c)
		go func() {
			defer close(c.done)
			io.Copy(dst, r)
		}()
		if i == 0 {
			cmd.Stdout = w
		} else {
			cmd.Stderr = w
		}
	}
	rk.cmd, rk.t0 = cmd, time.Now()
	err := cmd.Start()
	if err != nil {
		// The pipes' write ends close on return: the copies end.
		for _, c := range rk.copies {
			<-c.done
			c.r.Close()
		}
	}
	return err
}

// wait reports the rank's exit on exited at once, then finishes copying
// its output (for at most outputDrain) and closes outDone.
func (rk *runRank) wait(exited chan<- int) {
	st, err := rk.cmd.Process.Wait()
	rk.DurationS = time.Since(rk.t0).Seconds()
	if err != nil {
		rk.ExitCode, rk.waitErr = -1, err
	} else if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		rk.ExitCode, rk.Signal = -1, signalName(ws.Signal())
	} else {
		rk.ExitCode = st.ExitCode()
	}
	exited <- rk.Rank
	deadline := time.Now().Add(outputDrain)
	for _, c := range rk.copies {
		c.r.SetReadDeadline(deadline)
	}
	for _, c := range rk.copies {
		<-c.done
		c.r.Close()
	}
	for _, t := range rk.tags {
		t.Flush()
	}
	close(rk.outDone)
}

func (r *runRank) failed() bool { return r.startErr != nil || r.ExitCode != 0 }

func (r *runRank) describe() string {
	switch {
	case r.startErr != nil:
		return "could not start: " + r.startErr.Error()
	case r.waitErr != nil:
		return "ended, status unknown: " + r.waitErr.Error()
	case r.Signal != "":
		return "was killed by " + r.Signal
	}
	return fmt.Sprintf("exited with status %d", r.ExitCode)
}

type runSummary struct {
	NP        int        `json:"np"`
	DurationS float64    `json:"duration_s"`
	Ranks     []*runRank `json:"ranks"`
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// rankEnv is run's environment without the variables run sets, then
// those.
func rankEnv(p runPlan, rdzvURL, jobID, token string) []string {
	set := []string{
		"MULTIRAIL_SIZE=" + strconv.Itoa(p.np),
		"MULTIRAIL_LOCAL_SIZE=" + strconv.Itoa(p.np),
		"MULTIRAIL_JOB_ID=" + jobID,
		"MULTIRAIL_RDZV=" + rdzvURL,
		"MULTIRAIL_RDZV_SERVE=0",
		rdzv.TokenEnv + "=" + token,
	}
	if p.emu != "" {
		set = append(set, "MULTIRAIL_EMU="+p.emu)
	}
	if p.emuLoad != "" {
		set = append(set, comm.EnvEmuLoad+"="+p.emuLoad)
	}
	ours := []string{"MULTIRAIL_RANK", "MULTIRAIL_LOCAL_RANK"}
	for _, kv := range set {
		k, _, _ := strings.Cut(kv, "=")
		ours = append(ours, k)
	}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !slices.Contains(ours, k) {
			env = append(env, kv)
		}
	}
	return append(env, set...)
}

// lockedWriter serialises the writes of several ranks to one writer.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// passThrough is where a rank's stream goes untagged: a file as it is
// (the rank writes to it directly, no copy, no buffering), anything else
// through the lock.
func passThrough(w io.Writer, mu *sync.Mutex) io.Writer {
	if f, ok := w.(*os.File); ok {
		return f
	}
	return lockedWriter{mu, w}
}

// tagWriter prefixes every line of one rank's stream and writes whole
// lines, each Write at once, to out. exec's copying goroutine is its
// only writer; Flush runs after Wait.
type tagWriter struct {
	prefix []byte
	out    io.Writer
	part   []byte // a line without its newline yet
}

func (t *tagWriter) Write(p []byte) (int, error) {
	n := len(p)
	var batch []byte
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			t.part = append(t.part, p...)
			for len(t.part) >= maxTagLine {
				batch = t.appendLine(batch, t.part[:maxTagLine])
				t.part = append(t.part[:0], t.part[maxTagLine:]...)
			}
			break
		}
		t.part = append(t.part, p[:i]...)
		batch = t.appendLine(batch, t.part)
		t.part = t.part[:0]
		p = p[i+1:]
	}
	if len(batch) > 0 {
		if _, err := t.out.Write(batch); err != nil {
			return 0, err
		}
	}
	return n, nil
}

func (t *tagWriter) appendLine(b, line []byte) []byte {
	b = append(b, t.prefix...)
	b = append(b, line...)
	return append(b, '\n')
}

// Flush writes a last line that had no newline.
func (t *tagWriter) Flush() {
	if len(t.part) > 0 {
		t.out.Write(t.appendLine(nil, t.part))
		t.part = nil
	}
}

func runJob(ctx context.Context, g *globals, p runPlan) error {
	start := time.Now()
	token, ok := os.LookupEnv(rdzv.TokenEnv)
	if !ok {
		token = randomHex(32)
	}
	jobID := "run-" + randomHex(8)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("rendezvous server: %w", err)
	}
	srv, err := rdzv.NewServer(ln, rdzv.ServerConfig{Size: p.np, JobID: jobID, Token: token, Logger: g.logger()})
	if err != nil {
		ln.Close()
		return err
	}
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Serve(ctx) }()
	rdzvURL := "tcp://" + ln.Addr().String()
	env := rankEnv(p, rdzvURL, jobID, token)

	// Signals are caught before the first rank starts, so none is lost.
	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigc)

	var outMu sync.Mutex
	ranks := make([]*runRank, p.np)
	exited := make(chan int, p.np)
	running := 0
	for r := range p.np {
		rk := &runRank{Rank: r, outDone: make(chan struct{})}
		ranks[r] = rk
		if err := rk.start(p, g, &outMu, append(slices.Clip(env), "MULTIRAIL_RANK="+strconv.Itoa(r), "MULTIRAIL_LOCAL_RANK="+strconv.Itoa(r))); err != nil {
			rk.startErr, rk.ExitCode = err, -1
			break
		}
		running++
		go rk.wait(exited)
	}

	done := make([]bool, p.np)
	// signalAll signals the process group of every rank still running.
	signalAll := func(s syscall.Signal) {
		for _, rk := range ranks {
			if rk != nil && rk.startErr == nil && rk.cmd.Process != nil && !done[rk.Rank] {
				killGroup(rk.cmd.Process, s)
			}
		}
	}
	var (
		firstFail         = -1
		timedOut, killed  bool
		gotSignal         syscall.Signal
		timeoutC, killC   <-chan time.Time
		killTimer, tTimer *time.Timer
	)
	// stop sends s to every rank, and SIGKILL after the grace period.
	stop := func(s syscall.Signal) {
		signalAll(s)
		if killTimer == nil {
			killTimer = time.NewTimer(p.grace)
			killC = killTimer.C
		}
	}
	for _, rk := range ranks {
		if rk != nil && rk.startErr != nil {
			firstFail = rk.Rank
			stop(syscall.SIGTERM)
		}
	}
	if p.timeout > 0 {
		tTimer = time.NewTimer(p.timeout)
		timeoutC = tTimer.C
		defer tTimer.Stop()
	}
	for running > 0 {
		select {
		case r := <-exited:
			done[r] = true
			running--
			if ranks[r].failed() && firstFail < 0 {
				firstFail = r
				stop(syscall.SIGTERM)
			}
		case s := <-sigc:
			sig := s.(syscall.Signal)
			g.logger().Debug("run: forwarding a signal to the ranks", "signal", signalName(sig))
			if sig == syscall.SIGQUIT {
				signalAll(sig)
				break
			}
			if gotSignal == 0 {
				gotSignal = sig
			}
			stop(sig)
		case <-timeoutC:
			timedOut = true
			stop(syscall.SIGTERM)
		case <-killC:
			killed = true
			signalAll(syscall.SIGKILL)
			killC = nil
		}
	}
	if killTimer != nil {
		killTimer.Stop()
		// The job was stopped: what the ranks left behind in their process
		// groups goes too. (A group outlives its leader while it has
		// members, so its id cannot have been reused.)
		for _, rk := range ranks {
			if rk != nil && rk.startErr == nil {
				killGroup(rk.cmd.Process, syscall.SIGKILL)
			}
		}
	}

	for _, rk := range ranks {
		if rk != nil && rk.startErr == nil {
			<-rk.outDone
		}
	}
	// Every rank has exited: stop the rendezvous if it still waits,
	// after reading what the ranks sent before they exited.
	srv.Drain(2 * time.Second)
	if err := <-srvDone; err != nil {
		var ie *rdzv.IncompleteError
		if !errors.As(err, &ie) || ie.Connections > 0 {
			if errors.Is(err, rdzv.ErrServerClosed) {
				fmt.Fprintf(g.stderr, "multirail: run: every rank has exited: %v\n", err)
			} else {
				fmt.Fprintf(g.stderr, "multirail: run: %v\n", err)
			}
		}
	}
	if p.json {
		sum := runSummary{NP: p.np, DurationS: time.Since(start).Seconds()}
		for _, rk := range ranks {
			if rk == nil { // not started: an earlier rank could not start
				break
			}
			sum.Ranks = append(sum.Ranks, rk)
		}
		if err := json.NewEncoder(g.stdout).Encode(sum); err != nil {
			return err
		}
	}
	nfail := 0
	for _, rk := range ranks {
		if rk == nil || rk.failed() {
			nfail++
		}
	}
	after := ""
	if killed {
		after = fmt.Sprintf("; ranks still running after --grace %v got SIGKILL", p.grace)
	}
	switch {
	case timedOut:
		return fmt.Errorf("run: job timed out after %v (--timeout %v): stopped it%s", p.timeout, p.timeout, after)
	case gotSignal != 0:
		return fmt.Errorf("run: received %s: forwarded it to every rank (%d of %d ranks failed)%s", signalName(gotSignal), nfail, p.np, after)
	case firstFail >= 0:
		return fmt.Errorf("run: rank %d %s; run stopped the others (%d of %d ranks failed)%s", firstFail, ranks[firstFail].describe(), nfail, p.np, after)
	}
	return nil
}
