package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/internal/bench"
	"github.com/multirail/multirail/sched"
	"github.com/spf13/cobra"
)

func newServe(g *globals) *cobra.Command {
	var (
		listen, metrics string
		jsonOut         bool
		once            bool
		dispatch        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Accept multirail connections and measure what arrives (the receiving host)",
		Long: `serve listens on --listen; every rail of a sender's connection connects to it.
For each connection it receives messages until the sender closes, then prints
the goodput and each rail's share. Set MULTIRAIL_TOKEN on both hosts.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, _, err := net.SplitHostPort(listen); err != nil {
				return usagef("--listen %q: want HOST:PORT or :PORT", listen)
			}
			if err := parseDispatch("dispatch", dispatch); err != nil {
				return err
			}
			if err := parseMetricsAddr(metrics); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			ln, err := multirail.Listen(listen, multirail.Config{DispatchInterval: dispatch, MaxMessageSize: maxMessage, Logger: g.logger()})
			if err != nil {
				return err
			}
			defer ln.Close()
			fmt.Fprintf(g.stderr, "multirail: listening on %s\n", ln.Addr())
			var conns metricsConns
			stopMetrics, err := startMetricsFlag(g, metrics, &conns)
			if err != nil {
				return err
			}
			defer stopMetrics()
			accepted := 0
			var wg sync.WaitGroup
			defer wg.Wait()
			var outMu sync.Mutex
			for {
				c, err := ln.Accept(ctx)
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				accepted++
				remove := conns.add(c, strconv.Itoa(accepted))
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer c.Close()
					defer remove()
					r, err := bench.ReceiveAll(ctx, c)
					outMu.Lock()
					defer outMu.Unlock()
					if err != nil {
						fmt.Fprintf(g.stderr, "multirail: connection failed: %v\n", err)
						return
					}
					if jsonOut {
						_ = json.NewEncoder(g.stdout).Encode(r)
					} else {
						fmt.Fprintf(g.stdout, "%d messages, %d bytes in %.2fs: %s Mbit/s (per rail:", r.Messages, r.Bytes, r.DurationS, mbit(r.GoodputBps))
						for _, rr := range r.Rails {
							fmt.Fprintf(g.stdout, " %s %s", rr.Name, mbit(rr.GoodputBps))
						}
						fmt.Fprintln(g.stdout, ")")
					}
					if once {
						stop()
					}
				}()
				if once {
					wg.Wait()
					return nil
				}
			}
		},
	}
	cmd.Flags().StringVar(&listen, "listen", ":7000", "address to listen on")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object per connection on stdout")
	cmd.Flags().BoolVar(&once, "once", false, "exit after the first connection ends")
	cmd.Flags().StringVar(&metrics, "metrics", "", "serve Prometheus metrics of the live connections at http://ADDR/metrics (peer label: the connection's number, from 1)")
	cmd.Flags().DurationVar(&dispatch, "dispatch", 0, "send-queue dispatch of this side's sends (acknowledgements only go out at once regardless): 0 = continuous, or a timer interval 10ms..1s")
	return cmd
}

func newSend(g *globals) *cobra.Command {
	var (
		rails, schedName, size string
		schedOpt               string
		duration, dispatch     time.Duration
		port, window           int
		jsonOut                bool
	)
	cmd := &cobra.Command{
		Use:   "send",
		Short: "Send messages to a `multirail serve` over real rails and measure (the sending host)",
		Long: `send opens one connection over every rail in --rails (tcp:LOCALIP>REMOTEIP[:PORT],
comma-separated; PORT defaults to --port), sends --size messages back to back
for --duration and prints the goodput and each rail's share, measured when the
receiver acknowledged the data. Set MULTIRAIL_TOKEN on both hosts.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rails == "" {
				return usagef("--rails is required: comma-separated tcp:LOCALIP>REMOTEIP[:PORT] rails")
			}
			specs, err := emu.ParseSpecs(rails)
			if err != nil {
				return usageError{fmt.Errorf("--rails: %w", err)}
			}
			mrails, err := tcpRails(specs, port, "send takes tcp:LOCALIP>REMOTEIP[:PORT] rails (bench runs emu: and loop)")
			if err != nil {
				return err
			}
			if _, err := sched.New(schedName, sched.Config{Rails: 1, Bandwidths: []float64{1}}); err != nil {
				return usagef("--sched %q: unknown scheduler (allowed: %s)", schedName, strings.Join(sched.Names(), ", "))
			}
			if schedName == "weighted" {
				return usagef("--sched weighted needs rail bandwidths, which tcp: rails do not carry (allowed here: %s)", strings.Join(slicesDelete(sched.Names(), "weighted"), ", "))
			}
			if _, err := parseSchedOpts(schedOpt, []string{schedName}, len(mrails)); err != nil {
				return err
			}
			n, err := parseSize("size", size, 1, maxMessage)
			if err != nil {
				return err
			}
			if duration < 100*time.Millisecond || duration > 24*time.Hour {
				return usagef("--duration %v is out of range: allowed 100ms..24h", duration)
			}
			if err := parseDispatch("dispatch", dispatch); err != nil {
				return err
			}
			if window == 0 {
				window = bench.AutoWindow(int(n))
			}
			if window < 1 || window > 1024 {
				return usagef("--window %d is out of range: allowed 1..1024 concurrent sends (0 = auto)", window)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			c, err := multirail.Dial(ctx, multirail.Config{Rails: mrails, Scheduler: schedName, SchedulerOptions: schedOpt, DispatchInterval: dispatch, MaxMessageSize: maxMessage, Logger: g.logger()})
			if err != nil {
				return err
			}
			defer c.Close()
			r, err := bench.SendFor(ctx, c, int(n), duration, window, dispatch)
			if err != nil {
				return err
			}
			if jsonOut {
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			printBenchTable(g.stdout, benchReport{Results: []bench.Result{r}})
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&rails, "rails", "", "comma-separated tcp:LOCALIP>REMOTEIP[:PORT] rails (required)")
	fl.StringVar(&schedName, "sched", multirail.DefaultScheduler, "scheduler ("+strings.Join(sched.Names(), ", ")+")")
	fl.StringVar(&schedOpt, "sched-opt", "", "constants of a learning scheduler as key=value,... (see docs/scheduler.md)")
	fl.StringVar(&size, "size", "4MiB", "message size ("+sizeForm+")")
	fl.DurationVar(&duration, "duration", 10*time.Second, "how long to send")
	fl.IntVar(&port, "port", 7000, "remote port for rails that name none")
	fl.IntVar(&window, "window", 0, "concurrent sends in flight (0 = auto: 8 MiB worth, 4..256)")
	fl.DurationVar(&dispatch, "dispatch", 0, "send-queue dispatch: 0 = continuous, or a timer interval 10ms..1s")
	fl.BoolVar(&jsonOut, "json", false, "print one JSON object on stdout")
	return cmd
}

// maxMessage is the largest message bench, serve and send move (and so
// what serve accepts): more than the library's default, for measurements.
const maxMessage = bench.MaxMessage

// tcpRails turns tcp: rail specs into rails, PORT defaulting to port;
// other kinds fail with hint.
func tcpRails(specs []emu.Spec, port int, hint string) ([]multirail.Rail, error) {
	if port < 1 || port > 65535 {
		return nil, usagef("--port %d is out of range: allowed 1..65535", port)
	}
	var mrails []multirail.Rail
	for _, s := range specs {
		if s.Kind != "tcp" {
			return nil, usagef("--rails %q: %s", s.String(), hint)
		}
		addr := s.Remote
		if _, _, err := net.SplitHostPort(addr); err != nil {
			addr = net.JoinHostPort(strings.Trim(addr, "[]"), strconv.Itoa(port))
		}
		mrails = append(mrails, multirail.Rail{Name: s.String(), Addr: addr, Local: s.Local})
	}
	return mrails, nil
}
