package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/filecopy"
	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// cpReport is what `multirail cp` prints with --json.
type cpReport struct {
	filecopy.Result
	Planned    int      `json:"planned"`     // files in the manifest
	TotalBytes int64    `json:"total_bytes"` // their sizes
	Skipped    []string `json:"skipped,omitempty"`
	DurationS  float64  `json:"duration_s"`
	// GoodputBps is the bytes sent in this run over the time from the
	// manifest to the serving end's report (after its sync).
	GoodputBps float64 `json:"goodput_bps"`
}

func newCp(g *globals) *cobra.Command {
	var (
		serveDir, listen, metrics string
		rails, peer               string
		port                      int
		jsonOut, quiet            bool
	)
	cmd := &cobra.Command{
		Use:   "cp [--serve DIR | --rails SPECS SRC...]",
		Short: "Copy files and directory trees over every rail to a `multirail cp --serve DIR`",
		Long: `cp copies files and directories to a serving end over all rails. On the
receiving host:

  multirail cp --serve /data/incoming --listen :7200

On the sending host:

  multirail cp --rails tcp:10.10.1.1>10.10.1.2,tcp:10.10.2.1>10.10.2.2 --port 7200 big.iso photos/

Each SRC lands under the served directory by its base name (photos/ as
photos/...). Every file is checked end to end with SHA-256; an interrupted
copy run again resumes after the part the serving end verified; when cp
returns, the serving end has synced the files to disk. Paths that would
leave the served directory refuse the copy; symlinks in the sources are
skipped. Set MULTIRAIL_TOKEN (the same on both hosts).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := parseMetricsAddr(metrics); err != nil {
				return err
			}
			if serveDir != "" {
				if len(args) > 0 || rails != "" {
					return usagef("--serve takes no SRC and no --rails (it is the receiving end)")
				}
				if _, _, err := net.SplitHostPort(listen); err != nil {
					return usagef("--listen %q: want HOST:PORT or :PORT", listen)
				}
				return cpServe(g, serveDir, listen, metrics)
			}
			if len(args) == 0 {
				return usagef("cp needs SRC... to send (or --serve DIR to receive)")
			}
			if metrics != "" {
				return usagef("--metrics %q: only the serving end (--serve DIR) serves metrics", metrics)
			}
			if rails == "" {
				return usagef("--rails is required: comma-separated tcp:LOCALIP>REMOTEIP[:PORT] rails")
			}
			specs, err := emu.ParseSpecs(rails)
			if err != nil {
				return usageError{fmt.Errorf("--rails: %w", err)}
			}
			m, locals, skipped, err := filecopy.Plan(args)
			if err != nil {
				return usageError{err}
			}
			for _, s := range skipped {
				fmt.Fprintf(g.stderr, "multirail: skipping %s (not a regular file or directory)\n", s)
			}
			mrails, closeLinks, err := dialRails(g, specs, port, peer, "cp")
			if err != nil {
				return err
			}
			defer closeLinks()
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			c, err := multirail.Dial(ctx, filecopy.ConnConfig(multirail.Config{Rails: mrails, Logger: g.logger()}))
			if err != nil {
				return err
			}
			defer c.Close()
			rep := cpReport{Planned: len(m.Files), Skipped: skipped}
			for _, f := range m.Files {
				rep.TotalBytes += f.Size
			}
			bar := newCpProgress(g.stderr, quiet || jsonOut && !isTerminal(g.stderr), rep.TotalBytes)
			start := time.Now()
			r, err := filecopy.Send(ctx, c, m, locals, filecopy.SendConfig{Progress: bar.set, Logger: g.logger()})
			bar.done()
			if err != nil {
				return err
			}
			rep.Result = r
			rep.DurationS = time.Since(start).Seconds()
			rep.GoodputBps = float64(r.Bytes) * 8 / rep.DurationS
			if jsonOut {
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(g.stdout, "%d of %d files copied and verified (SHA-256), %d bytes sent in %.2fs: %s Mbit/s", r.Files, rep.Planned, r.Bytes, rep.DurationS, mbit(rep.GoodputBps))
				if r.Resumed > 0 {
					fmt.Fprintf(g.stdout, "; %d bytes kept from an earlier run", r.Resumed)
				}
				if r.Synced {
					fmt.Fprintln(g.stdout, "; synced")
				} else {
					fmt.Fprintln(g.stdout, "; NOT synced (see the serving end's log)")
				}
				for _, f := range r.Failures {
					fmt.Fprintf(g.stdout, "failed: %s: %s\n", f.Path, f.Error)
				}
			}
			if len(r.Failures) > 0 || !r.Synced {
				return errCopyIncomplete
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&serveDir, "serve", "", "receive copies into DIR (the receiving end)")
	fl.StringVar(&listen, "listen", ":7200", "with --serve: address the rails connect to")
	fl.StringVar(&metrics, "metrics", "", "with --serve: serve Prometheus metrics of the live connections at http://ADDR/metrics")
	fl.StringVar(&rails, "rails", "", "comma-separated tcp:LOCALIP>REMOTEIP[:PORT] rails; with --peer, emu:RATE/DELAY rails")
	fl.IntVar(&port, "port", 7200, "remote port for rails that name none")
	fl.StringVar(&peer, "peer", "", "HOST:PORT of a cp --serve reached over emulated --rails built in this process")
	fl.BoolVar(&jsonOut, "json", false, "print one JSON object on stdout")
	fl.BoolVarP(&quiet, "quiet", "q", false, "no progress on stderr")
	return cmd
}

// errCopyIncomplete makes cp exit 1 after it printed which files failed.
var errCopyIncomplete = errors.New("the copy is incomplete")

func cpServe(g *globals, dir, listen, metrics string) error {
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return usagef("--serve %q: not a directory", dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := multirail.Listen(listen, filecopy.ConnConfig(multirail.Config{Logger: g.logger()}))
	if err != nil {
		return err
	}
	defer ln.Close()
	var conns metricsConns
	stopMetrics, err := startMetricsFlag(g, metrics, &conns)
	if err != nil {
		return err
	}
	defer stopMetrics()
	fmt.Fprintf(g.stderr, "multirail: cp listening on %s, serving %s\n", ln.Addr(), dir)
	var out sync.Mutex
	return acceptEach(ctx, func() (*multirail.Conn, error) { return ln.Accept(ctx) }, func(n int, c *multirail.Conn) {
		defer c.Close()
		defer conns.add(c, strconv.Itoa(n))()
		start := time.Now()
		r, err := filecopy.Serve(ctx, c, root, filecopy.ServeConfig{Logger: g.logger()})
		out.Lock()
		defer out.Unlock()
		if err != nil {
			fmt.Fprintf(g.stderr, "multirail: copy %d ended: %v (%d files, %d bytes received; part files are kept for a resume)\n", n, err, r.Files, r.Bytes)
			return
		}
		fmt.Fprintf(g.stderr, "multirail: copy %d: %d files, %d bytes in %.2fs (%d kept from an earlier run), %d failed\n",
			n, r.Files, r.Bytes, time.Since(start).Seconds(), r.Resumed, len(r.Failures))
	})
}

// cpProgress shows the bytes sent: a bar on a terminal, a line a second
// otherwise.
type cpProgress struct {
	quiet bool
	w     io.Writer
	total int64
	sent  atomic.Int64
	p     *mpb.Progress
	bar   *mpb.Bar
	stop  chan struct{}
	wg    sync.WaitGroup
}

func newCpProgress(w io.Writer, quiet bool, total int64) *cpProgress {
	pr := &cpProgress{quiet: quiet, w: w, total: total, stop: make(chan struct{})}
	if quiet {
		return pr
	}
	if isTerminal(w) {
		pr.p = mpb.New(mpb.WithOutput(w), mpb.WithWidth(40), mpb.WithRefreshRate(150*time.Millisecond))
		pr.bar = pr.p.AddBar(max(total, 1), mpb.PrependDecorators(decor.Name("cp "), decor.CountersKibiByte("% .1f / % .1f")),
			mpb.AppendDecorators(decor.AverageSpeed(decor.SizeB1000(0), "% .1f"), decor.Name("  "), decor.AverageETA(decor.ET_STYLE_GO)))
		return pr
	}
	pr.wg.Add(1)
	go func() {
		defer pr.wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		start, last := time.Now(), int64(0)
		for {
			select {
			case <-pr.stop:
				return
			case now := <-t.C:
				s := pr.sent.Load()
				fmt.Fprintf(w, "  cp t=%4.0fs %d/%d bytes (%.1f %%) %s Mbit/s\n", now.Sub(start).Seconds(), s, total, 100*float64(s)/float64(max(total, 1)), mbit(float64(s-last)*8))
				last = s
			}
		}
	}()
	return pr
}

func (pr *cpProgress) set(sent int64) {
	if pr.quiet {
		return
	}
	prev := pr.sent.Swap(sent)
	if pr.bar != nil {
		pr.bar.IncrInt64(sent - prev)
	}
}

func (pr *cpProgress) done() {
	if pr.quiet {
		return
	}
	close(pr.stop)
	pr.wg.Wait()
	if pr.p != nil {
		pr.bar.SetTotal(-1, true)
		pr.p.Wait()
	}
}
