package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/internal/topo"
	"github.com/multirail/multirail/sched"
	"github.com/multirail/multirail/tunnel"
	"github.com/spf13/cobra"
)

func newTunnel(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tunnel",
		Short: "Carry unmodified TCP programs over every rail (serve on the target's host, connect on the client's)",
		Long: `tunnel carries TCP connections over one multirail session. On the host
that can reach the target service:

  multirail tunnel serve --listen :7100 --to 127.0.0.1:5201

On the client's host, over every rail to it:

  multirail tunnel connect --rails tcp:10.10.1.1>10.10.1.2,tcp:10.10.2.1>10.10.2.2 --port 7100 --local 127.0.0.1:5201

Every TCP connection accepted at --local is then a stream to --to: both
directions, half-close, per-stream flow control; rails may fail and rejoin
underneath. Set MULTIRAIL_TOKEN (the same on both hosts).`,
	}
	cmd.AddCommand(newTunnelServe(g), newTunnelConnect(g), newTunnelBench(g))
	return cmd
}

// tunnelFlags are the flags both ends take.
type tunnelFlags struct {
	window, chunk string
	maxStreams    int
	metrics       string
}

func (f *tunnelFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.window, "window", "16MiB", "per-stream receive window ("+sizeForm+"; 256KiB..1GiB)")
	fl.StringVar(&f.chunk, "chunk", "64KiB", "largest read from a local connection, sent as one frame ("+sizeForm+"; 1KiB..16MiB)")
	fl.IntVar(&f.maxStreams, "max-streams", tunnel.DefaultMaxStreams, "streams open at once, at most (1..1048576)")
	fl.StringVar(&f.metrics, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics (rails and tunnel streams)")
}

// config validates the flags into a tunnel config (Dial unset).
func (f *tunnelFlags) config(log *slog.Logger) (tunnel.Config, error) {
	w, err := parseSize("window", f.window, tunnel.MinWindow, tunnel.MaxWindow)
	if err != nil {
		return tunnel.Config{}, err
	}
	c, err := parseSize("chunk", f.chunk, 1<<10, 16<<20)
	if err != nil {
		return tunnel.Config{}, err
	}
	if c == 64<<10 {
		c = tunnel.DefaultChunkSize // one frame per default segment
	}
	if f.maxStreams < 1 || f.maxStreams > 1<<20 {
		return tunnel.Config{}, usagef("--max-streams %d is out of range: allowed 1..1048576", f.maxStreams)
	}
	if err := parseMetricsAddr(f.metrics); err != nil {
		return tunnel.Config{}, err
	}
	return tunnel.Config{Window: int(w), ChunkSize: int(c), MaxStreams: f.maxStreams, Logger: log}, nil
}

func newTunnelServe(g *globals) *cobra.Command {
	var (
		listen, to string
		f          tunnelFlags
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Accept tunnel sessions and connect each stream to --to",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, _, err := net.SplitHostPort(listen); err != nil {
				return usagef("--listen %q: want HOST:PORT or :PORT", listen)
			}
			if to == "" {
				return usagef("--to is required: the HOST:PORT every stream is connected to")
			}
			if _, _, err := net.SplitHostPort(to); err != nil {
				return usagef("--to %q: want HOST:PORT", to)
			}
			tcfg, err := f.config(g.logger())
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ln, err := multirail.Listen(listen, tunnel.ConnConfig(multirail.Config{Logger: g.logger()}, tcfg.ChunkSize))
			if err != nil {
				return err
			}
			defer ln.Close()
			var conns metricsConns
			stopMetrics, err := startMetricsFlag(g, f.metrics, &conns)
			if err != nil {
				return err
			}
			defer stopMetrics()
			fmt.Fprintf(g.stderr, "multirail: tunnel listening on %s, streams go to %s\n", ln.Addr(), to)
			tcfg.Dial = func(ctx context.Context) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", to)
			}
			return acceptEach(ctx, func() (*multirail.Conn, error) { return ln.Accept(ctx) }, func(n int, c *multirail.Conn) {
				defer c.Close()
				s, err := tunnel.NewSession(c, tcfg)
				if err != nil {
					g.logger().Warn("tunnel session refused", "err", err)
					return
				}
				peer := strconv.Itoa(n)
				defer conns.add(c, peer)()
				defer conns.addTunnel(s, peer)()
				g.logger().Info("tunnel session opened", "peer", peer)
				select {
				case <-s.Done():
				case <-ctx.Done():
				}
				err = s.Close()
				st := s.Stats()
				g.logger().Info("tunnel session ended", "peer", peer, "err", err, "streams", st.StreamsOpened, "sent", st.BytesSent, "received", st.BytesReceived)
			})
		},
	}
	cmd.Flags().StringVar(&listen, "listen", ":7100", "address the rails connect to")
	cmd.Flags().StringVar(&to, "to", "", "HOST:PORT every stream is connected to (required)")
	f.register(cmd)
	return cmd
}

func newTunnelConnect(g *globals) *cobra.Command {
	var (
		rails, local, peer, schedName string
		port                          int
		f                             tunnelFlags
	)
	cmd := &cobra.Command{
		Use:   "connect",
		Short: "Accept local TCP connections at --local and carry each over every rail to a tunnel serve",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rails == "" {
				return usagef("--rails is required: comma-separated tcp:LOCALIP>REMOTEIP[:PORT] rails")
			}
			if _, _, err := net.SplitHostPort(local); err != nil {
				return usagef("--local %q: want HOST:PORT or :PORT", local)
			}
			specs, err := emu.ParseSpecs(rails)
			if err != nil {
				return usageError{fmt.Errorf("--rails: %w", err)}
			}
			if _, err := sched.New(schedName, sched.Config{Rails: 1, Bandwidths: []float64{1}}); err != nil || schedName == "weighted" {
				return usagef("--sched %q: allowed %s", schedName, strings.Join(slicesDelete(sched.Names(), "weighted"), ", "))
			}
			tcfg, err := f.config(g.logger())
			if err != nil {
				return err
			}
			mrails, closeLinks, err := dialRails(g, specs, port, peer, "connect")
			if err != nil {
				return err
			}
			defer closeLinks()
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var conns metricsConns
			td := &tunnelDialer{cfg: tcfg, conns: &conns, log: g.logger(),
				mcfg: tunnel.ConnConfig(multirail.Config{Rails: mrails, Scheduler: schedName, Logger: g.logger()}, tcfg.ChunkSize)}
			defer td.close()
			// Dial now, so that a wrong address or token shows at once.
			if _, err := td.session(ctx); err != nil {
				return err
			}
			lst, err := net.Listen("tcp", local)
			if err != nil {
				return fmt.Errorf("--local %q: %w", local, err)
			}
			stopMetrics, err := startMetricsFlag(g, f.metrics, &conns)
			if err != nil {
				_ = lst.Close()
				return err
			}
			defer stopMetrics()
			fmt.Fprintf(g.stderr, "multirail: tunnel from %s over %d rails\n", lst.Addr(), len(mrails))
			go func() { <-ctx.Done(); _ = lst.Close() }()
			return acceptEach(ctx, lst.Accept, func(_ int, nc net.Conn) {
				s, err := td.session(ctx)
				if err == nil {
					err = s.Open(nc)
				}
				if err != nil {
					g.logger().Warn("tunnel: connection dropped", "from", nc.RemoteAddr(), "err", err)
					_ = nc.Close()
				}
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&rails, "rails", "", "comma-separated tcp:LOCALIP>REMOTEIP[:PORT] rails (required); with --peer, emu:RATE/DELAY rails")
	fl.StringVar(&local, "local", "127.0.0.1:7101", "address local programs connect to")
	fl.IntVar(&port, "port", 7100, "remote port for rails that name none")
	fl.StringVar(&peer, "peer", "", "HOST:PORT of a tunnel serve reached over emulated --rails (emu:RATE/DELAY, loop) built in this process")
	fl.StringVar(&schedName, "sched", multirail.DefaultScheduler, "scheduler")
	f.register(cmd)
	return cmd
}

// tunnelDialer holds the client's session and dials a new one when it
// ended (every rail down past the grace, the serving end restarted).
type tunnelDialer struct {
	mcfg  multirail.Config
	cfg   tunnel.Config
	conns *metricsConns
	log   *slog.Logger

	mu     sync.Mutex
	cur    *tunnel.Session
	c      *multirail.Conn
	remove func()
	n      int
}

func (d *tunnelDialer) session(ctx context.Context) (*tunnel.Session, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur != nil {
		select {
		case <-d.cur.Done():
			d.log.Warn("tunnel session ended; dialing a new one", "err", d.cur.Err())
			d.drop()
		default:
			return d.cur, nil
		}
	}
	c, err := multirail.Dial(ctx, d.mcfg)
	if err != nil {
		return nil, err
	}
	s, err := tunnel.NewSession(c, d.cfg)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	d.n++
	peer := strconv.Itoa(d.n)
	r1, r2 := d.conns.add(c, peer), d.conns.addTunnel(s, peer)
	d.cur, d.c, d.remove = s, c, func() { r1(); r2() }
	return s, nil
}

// drop closes the current session (d.mu held).
func (d *tunnelDialer) drop() {
	if err := d.cur.Close(); err != nil && !errors.Is(err, tunnel.ErrClosed) {
		d.log.Debug("tunnel session", "err", err)
	}
	_ = d.c.Close()
	d.remove()
	d.cur, d.c = nil, nil
}

func (d *tunnelDialer) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur != nil {
		d.drop()
	}
}

// dialRails turns --rails into the rails to dial: tcp: rails (PORT
// defaulting to port), or with --peer emulated rails (emu:, loop) built in
// this process in front of peer. closeLinks is never nil.
func dialRails(g *globals, specs []emu.Spec, port int, peer, cmd string) (rails []multirail.Rail, closeLinks func(), err error) {
	if peer == "" {
		rails, err = tcpRails(specs, port, cmd+" takes tcp:LOCALIP>REMOTEIP[:PORT] rails (emu: and loop rails need --peer)")
		return rails, func() {}, err
	}
	if _, _, err := net.SplitHostPort(peer); err != nil {
		return nil, nil, usagef("--peer %q: want HOST:PORT", peer)
	}
	addrs, links, err := topo.Links(peer, specs, nil, g.logger())
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("--rails with --peer: %w", err)}
	}
	for i, a := range addrs {
		rails = append(rails, multirail.Rail{Name: specs[i].String(), Addr: a})
	}
	return rails, func() {
		for _, l := range links {
			if l != nil {
				_ = l.Close()
			}
		}
	}, nil
}

// acceptEach accepts connections with accept until ctx ends, handing
// each to handle, numbered from 1, in a goroutine of its own. It returns
// once every handler has returned: nil when ctx ended, else why accept
// failed. accept must fail once ctx has ended.
func acceptEach[C any](ctx context.Context, accept func() (C, error), handle func(n int, c C)) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for n := 1; ; n++ {
		c, err := accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			handle(n, c)
		}()
	}
}
