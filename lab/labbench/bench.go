package labbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/multirail/multirail/lab"
	"github.com/multirail/multirail/lab/mpi"
	"github.com/multirail/multirail/units"
)

// ErrRunsFailed is wrapped by a RunsError.
var ErrRunsFailed = errors.New("labbench: runs failed")

// RunsError says which runs of RunAll failed (the report has them, with
// their errors).
type RunsError struct {
	// Failed are "system/size" of the failed runs; Runs is every run.
	Failed []string
	Runs   int
}

// Error implements error.
func (e *RunsError) Error() string {
	return fmt.Sprintf("lab bench: %d of %d runs failed: %s", len(e.Failed), e.Runs, strings.Join(e.Failed, ", "))
}

// Unwrap makes errors.Is find the sentinel (and the cause, if any).
func (e *RunsError) Unwrap() error { return ErrRunsFailed }

// Options configure a Bench.
type Options struct {
	Plan Plan
	// Exe is this program (see Env.Exe). Open MPI's rsh agent cannot carry
	// a path with spaces or quotes.
	Exe string
	// Logger gets the lab's and the transport's logs; nil discards them.
	Logger *slog.Logger
	// AgentStderr, when set, gets a copy of the agents' stderr (-v).
	AgentStderr io.Writer
}

// Hooks let the caller follow RunAll.
type Hooks struct {
	// RunStarts is called before each run, the n-th of total, and returns
	// the run's progress callback (see System.Measure) and a function
	// called when the run is over; either may be nil.
	RunStarts func(n, total int, system string, size int) (progress func(time.Duration, []uint64), end func())
	// RunFailed is called when a run failed; the bench goes on.
	RunFailed func(system string, size int, err error)
}

// Bench runs the systems of a plan on a lab of its own.
type Bench struct {
	o    Options
	mrbw string
	lab  *lab.Lab
}

// New checks o and builds the MPI program when an Open MPI system is
// planned.
func New(ctx context.Context, o Options) (*Bench, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Exe == "" {
		return nil, errors.New("labbench: Options.Exe is empty: want the path of this program")
	}
	if strings.ContainsAny(o.Exe, " \t\n'\"") {
		return nil, fmt.Errorf("lab bench: this program's path %q has spaces or quotes; Open MPI's rsh agent cannot carry it", o.Exe)
	}
	if err := o.Plan.ChooseCompetitor(); err != nil {
		return nil, err
	}
	b := &Bench{o: o}
	for _, s := range o.Plan.Systems {
		if !IsMPI(s) {
			continue
		}
		dir, err := mpi.CacheDir()
		if err == nil {
			b.mrbw, err = mpi.Build(ctx, dir)
		}
		if err != nil {
			return nil, fmt.Errorf("lab bench: building the MPI program: %w", err)
		}
		break
	}
	return b, nil
}

// Up builds the bench's lab (root only). The caller must call Down.
func (b *Bench) Up(ctx context.Context) error {
	cfg := b.o.Plan.Lab
	cfg.Rates = b.o.Plan.Rates
	cfg.Logger = b.o.Logger
	l, err := lab.Up(ctx, cfg)
	if err != nil {
		return err
	}
	b.lab = l
	return nil
}

// Lab is the lab that Up built, nil before.
func (b *Bench) Lab() *lab.Lab { return b.lab }

// Down removes the lab.
func (b *Bench) Down() error {
	if b.lab == nil {
		return nil
	}
	return b.lab.Down()
}

// RunAll runs every system at every size, in the plan's order (sizes
// outside, systems inside), and returns the report. A failed run is in
// the report with its error, and RunAll then returns a *RunsError with the
// report; an interruption (ctx) ends it at once with ctx's error.
func (b *Bench) RunAll(ctx context.Context, h Hooks) (Report, error) {
	p := b.o.Plan
	rep := NewReport(p, b.lab.Config().CC)
	env := &Env{Lab: b.lab, Rates: p.Rates, Duration: p.Duration, Exe: b.o.Exe, MPIProgram: b.mrbw, AgentStderr: b.o.AgentStderr, Competitor: p.Competitor}
	var failed []string
	n := 0
	for _, size := range p.Sizes {
		for _, name := range p.Systems {
			n++
			var (
				progress func(time.Duration, []uint64)
				end      func()
			)
			if h.RunStarts != nil {
				progress, end = h.RunStarts(n, p.Runs(), name, size)
			}
			run, rerr := b.measure(ctx, env, name, size, progress)
			if end != nil {
				end()
			}
			_ = b.lab.KillProcesses()
			if ctx.Err() != nil {
				return rep, fmt.Errorf("lab bench: interrupted: %w", ctx.Err())
			}
			if rerr != nil {
				if h.RunFailed != nil {
					h.RunFailed(name, size, rerr)
				}
				failed = append(failed, fmt.Sprintf("%s/%s", name, units.FormatSizeWords(int64(size))))
			}
			rep.Add(run, rerr)
			time.Sleep(500 * time.Millisecond) // let the queues drain
		}
	}
	if len(failed) > 0 {
		return rep, &RunsError{Failed: failed, Runs: p.Runs()}
	}
	return rep, nil
}

// measure runs one system at one size.
func (b *Bench) measure(ctx context.Context, env *Env, name string, size int, progress func(time.Duration, []uint64)) (Run, error) {
	sys, err := Lookup(name)
	if err != nil {
		return Run{System: name, Size: size}, err
	}
	ctx, cancel := context.WithTimeout(ctx, env.Duration+startMargin+90*time.Second)
	defer cancel()
	if progress == nil {
		progress = func(time.Duration, []uint64) {}
	}
	stop := sampleCPU(cpuEvery)
	run, err := sys.Measure(ctx, env, size, progress)
	run.CPU = stop()
	run.System, run.Size = name, size
	return run, err
}

// cpuEvery is how often a run samples the machine's busy CPU time.
const cpuEvery = 100 * time.Millisecond

// sampleCPU samples lab.ReadCPU every d from now until stop is called,
// which returns the samples (none if /proc/stat cannot be read).
func sampleCPU(d time.Duration) (stop func() []lab.CPUSample) {
	done := make(chan struct{})
	out := make(chan []lab.CPUSample, 1)
	go func() {
		var s []lab.CPUSample
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			if c, err := lab.ReadCPU(); err == nil {
				s = append(s, c)
			}
			select {
			case <-t.C:
			case <-done:
				if c, err := lab.ReadCPU(); err == nil {
					s = append(s, c)
				}
				out <- s
				return
			}
		}
	}()
	return sync.OnceValue(func() []lab.CPUSample {
		close(done)
		return <-out
	})
}

// Competitor returns the plan's competitor once New has resolved it.
func (b *Bench) Competitor() (tool, note string) {
	return b.o.Plan.Competitor, b.o.Plan.CompetitorNote
}

// startLoad starts the competing stream on rail0 for the second half of
// the run that starts at epoch, made by env.Competitor (the Go stream if
// unset).
func startLoad(ctx context.Context, env *Env, epoch time.Time) (*lab.LoadStream, error) {
	half := env.Duration / 2
	tool := env.Competitor
	if tool == "" {
		tool = lab.ToolGo
	}
	return env.Lab.LoadWith(ctx, tool, 0, max(time.Until(epoch.Add(half)), 0), env.Duration-half)
}

// tail keeps the last bytes written to it (a process's stderr).
type tail struct {
	mu  sync.Mutex
	buf []byte
	w   io.Writer // also copy here, when set (-v)
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 8<<10 {
		t.buf = t.buf[len(t.buf)-8<<10:]
	}
	if t.w != nil {
		_, _ = t.w.Write(p)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// lastLines returns the last n lines of s, joined with " | ".
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// command is name args run in namespace side, its stderr kept in a tail;
// ending ctx sends it SIGTERM.
func command(ctx context.Context, env *Env, side int, name string, args ...string) (*exec.Cmd, *tail) {
	cmd := env.Lab.Command(ctx, side, name, args...)
	t := &tail{w: env.AgentStderr}
	cmd.Stderr = t
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 3 * time.Second
	return cmd, t
}
