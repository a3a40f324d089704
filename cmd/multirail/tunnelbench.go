package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/internal/measure"
	"github.com/multirail/multirail/internal/topo"
	"github.com/multirail/multirail/tunnel"
	"github.com/spf13/cobra"
)

// tunnelBenchResult is what `tunnel bench` measures on one set of rails.
type tunnelBenchResult struct {
	Rails       string  `json:"rails"`
	CapacityBps float64 `json:"capacity_bps"` // sum of the rails' rates
	// Bulk: one stream for the duration, goodput at the target.
	BulkBps float64 `json:"bulk_bps"`
	// Request/response of RRSize bytes each way, one at a time, alone and
	// beside the bulk stream (seconds).
	RRAlone   latencies `json:"rr_alone"`
	RRBesides latencies `json:"rr_beside_bulk"`
}

type latencies struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_s"`
	P99 float64 `json:"p99_s"`
}

type tunnelBenchReport struct {
	RRSize   int                 `json:"rr_size"`
	Duration float64             `json:"duration_s"`
	Results  []tunnelBenchResult `json:"results"`
	// FastestAlone is the same measurement over the fastest rail alone.
	FastestAlone *tunnelBenchResult `json:"fastest_alone"`
	// P99Ratio is the tunnel's request/response p99 (alone) over the
	// fastest rail's alone.
	P99Ratio float64 `json:"p99_ratio"`
	// Efficiency is the tunnel's bulk goodput over the sum of the rates.
	Efficiency float64 `json:"efficiency"`
}

func newTunnelBench(g *globals) *cobra.Command {
	var (
		rails, rrSize string
		duration      time.Duration
		jsonOut       bool
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the tunnel over emulated rails in this process: bulk goodput, request/response latency alone and beside bulk, against the fastest rail alone",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			specs, err := emu.ParseSpecs(rails)
			if err != nil {
				return usageError{fmt.Errorf("--rails: %w", err)}
			}
			fastest := -1
			for i, s := range specs {
				if s.Kind != emu.KindEmu {
					return usagef("--rails %q: tunnel bench takes emu:RATE[/DELAY] rails", s.String())
				}
				if fastest < 0 || s.RateBps > specs[fastest].RateBps {
					fastest = i
				}
			}
			n, err := parseSize("rr-size", rrSize, 1, 1<<20)
			if err != nil {
				return err
			}
			if duration < 500*time.Millisecond || duration > time.Hour {
				return usagef("--duration %v is out of range: allowed 500ms..1h", duration)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			rep := tunnelBenchReport{RRSize: int(n), Duration: duration.Seconds()}
			fmt.Fprintf(g.stderr, "multirail: tunnel bench over %s (%v per measurement)\n", rails, duration)
			r, err := runTunnelBench(ctx, g.logger(), specs, int(n), duration)
			if err != nil {
				return err
			}
			rep.Results = append(rep.Results, r)
			if len(specs) > 1 {
				fmt.Fprintf(g.stderr, "multirail: tunnel bench over %s alone\n", specs[fastest].String())
				f, err := runTunnelBench(ctx, g.logger(), specs[fastest:fastest+1], int(n), duration)
				if err != nil {
					return err
				}
				rep.FastestAlone = &f
				if f.RRAlone.P99 > 0 {
					rep.P99Ratio = r.RRAlone.P99 / f.RRAlone.P99
				}
			}
			rep.Efficiency = r.BulkBps / r.CapacityBps
			if jsonOut {
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			tw := tabwriter.NewWriter(g.stdout, 2, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintf(tw, "rails\tcapacity Mbit/s\tbulk Mbit/s\tefficiency\trr p50\trr p99\trr p50 beside bulk\trr p99 beside bulk\t\n")
			all := rep.Results
			if rep.FastestAlone != nil {
				all = append(all, *rep.FastestAlone)
			}
			for _, r := range all {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f %%\t%s\t%s\t%s\t%s\t\n", r.Rails, mbit(r.CapacityBps), mbit(r.BulkBps), 100*r.BulkBps/r.CapacityBps,
					dur(r.RRAlone.P50), dur(r.RRAlone.P99), dur(r.RRBesides.P50), dur(r.RRBesides.P99))
			}
			_ = tw.Flush()
			if rep.FastestAlone != nil {
				fmt.Fprintf(g.stdout, "request/response p99 alone: %.2fx the fastest rail's; bulk goodput %.1f %% of the sum of the rates\n", rep.P99Ratio, 100*rep.Efficiency)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&rails, "rails", "emu:200mbit/5ms,emu:50mbit/40ms", "emulated rails, emu:RATE[/DELAY], comma-separated")
	fl.StringVar(&rrSize, "rr-size", "64", "request and response size ("+sizeForm+")")
	fl.DurationVar(&duration, "duration", 10*time.Second, "length of each measurement (bulk, request/response alone, both together)")
	fl.BoolVar(&jsonOut, "json", false, "print one JSON object on stdout")
	return cmd
}

// tunnelRig is a tunnel over emulated rails in this process, in front of a
// target that sinks ('S') or echoes ('E', fixed-size requests) by the
// first byte of each connection.
type tunnelRig struct {
	local, target net.Listener
	oc, ac        *multirail.Conn
	open, serve   *tunnel.Session
	links         []*emu.Link
	wg            sync.WaitGroup
	rrSize        int
	mu            sync.Mutex
	sunk          []sinkResult
}

type sinkResult struct {
	bytes       int64
	first, last time.Time
}

func newTunnelRig(ctx context.Context, log *slog.Logger, specs []emu.Spec, rrSize int) (_ *tunnelRig, err error) {
	rig := &tunnelRig{rrSize: rrSize}
	defer func() {
		if err != nil {
			rig.close()
		}
	}()
	tok := multirail.NewToken()
	cfg := tunnel.ConnConfig(multirail.Config{Token: tok, Logger: log}, 0)
	ln, err := multirail.Listen("127.0.0.1:0", cfg)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	addrs, links, err := topo.Links(ln.Addr().String(), specs, nil, log)
	if err != nil {
		return nil, err
	}
	rig.links = links
	dcfg := cfg
	for i, a := range addrs {
		dcfg.Rails = append(dcfg.Rails, multirail.Rail{Name: specs[i].String(), Addr: a})
	}
	acc := make(chan *multirail.Conn, 1)
	go func() { c, _ := ln.Accept(ctx); acc <- c }()
	if rig.oc, err = multirail.Dial(ctx, dcfg); err != nil {
		return nil, err
	}
	if rig.ac = <-acc; rig.ac == nil {
		return nil, errors.New("tunnel bench: accept failed")
	}
	if rig.target, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	if rig.local, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	if rig.serve, err = tunnel.NewSession(rig.ac, tunnel.Config{Logger: log, Dial: func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", rig.target.Addr().String())
	}}); err != nil {
		return nil, err
	}
	if rig.open, err = tunnel.NewSession(rig.oc, tunnel.Config{Logger: log}); err != nil {
		return nil, err
	}
	rig.wg.Add(2)
	go rig.acceptLoop(rig.local, func(c net.Conn) {
		if err := rig.open.Open(c); err != nil {
			_ = c.Close()
		}
	})
	go rig.acceptLoop(rig.target, rig.handleTarget)
	return rig, nil
}

func (rig *tunnelRig) acceptLoop(ln net.Listener, h func(net.Conn)) {
	defer rig.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		rig.wg.Add(1)
		go func() { defer rig.wg.Done(); h(c) }()
	}
}

func (rig *tunnelRig) handleTarget(c net.Conn) {
	defer c.Close()
	var mode [1]byte
	if _, err := io.ReadFull(c, mode[:]); err != nil {
		return
	}
	switch mode[0] {
	case 'S':
		buf := make([]byte, 256<<10)
		var r sinkResult
		for {
			n, err := c.Read(buf)
			if n > 0 {
				now := time.Now()
				if r.bytes == 0 {
					r.first = now
				}
				r.bytes += int64(n)
				r.last = now
			}
			if err != nil {
				break
			}
		}
		rig.mu.Lock()
		rig.sunk = append(rig.sunk, r)
		rig.mu.Unlock()
	case 'E':
		buf := make([]byte, rig.rrSize)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}
}

func (rig *tunnelRig) close() {
	for _, l := range []net.Listener{rig.local, rig.target} {
		if l != nil {
			_ = l.Close()
		}
	}
	for _, s := range []*tunnel.Session{rig.open, rig.serve} {
		if s != nil {
			_ = s.Close()
		}
	}
	for _, c := range []*multirail.Conn{rig.oc, rig.ac} {
		if c != nil {
			_ = c.Close()
		}
	}
	rig.wg.Wait()
	for _, l := range rig.links {
		if l != nil {
			_ = l.Close()
		}
	}
}

// bulk sends for d on one stream and returns the goodput the target saw,
// from its first byte to its last.
func (rig *tunnelRig) bulk(ctx context.Context, d time.Duration) (float64, error) {
	c, err := net.Dial("tcp", rig.local.Addr().String())
	if err != nil {
		return 0, err
	}
	defer c.Close()
	buf := make([]byte, 256<<10)
	buf[0] = 'S'
	end := time.Now().Add(d)
	for time.Now().Before(end) && ctx.Err() == nil {
		if _, err := c.Write(buf); err != nil {
			return 0, err
		}
		buf[0] = 0
	}
	_ = c.(*net.TCPConn).CloseWrite()
	// The target closes once it has read everything: wait for that EOF.
	if _, err := io.Copy(io.Discard, c); err != nil {
		return 0, err
	}
	rig.mu.Lock()
	defer rig.mu.Unlock()
	if len(rig.sunk) == 0 {
		return 0, errors.New("tunnel bench: the target saw no bulk stream")
	}
	r := rig.sunk[len(rig.sunk)-1]
	if !r.last.After(r.first) {
		return 0, errors.New("tunnel bench: bulk stream too short to time")
	}
	return float64(r.bytes-1) * 8 / r.last.Sub(r.first).Seconds(), nil
}

// rr runs request/response exchanges one at a time for d.
func (rig *tunnelRig) rr(ctx context.Context, d time.Duration) (latencies, error) {
	c, err := net.Dial("tcp", rig.local.Addr().String())
	if err != nil {
		return latencies{}, err
	}
	defer c.Close()
	if _, err := c.Write([]byte{'E'}); err != nil {
		return latencies{}, err
	}
	req, resp := make([]byte, rig.rrSize), make([]byte, rig.rrSize)
	var lat []float64
	end := time.Now().Add(d)
	for time.Now().Before(end) && ctx.Err() == nil {
		t0 := time.Now()
		if _, err := c.Write(req); err != nil {
			return latencies{}, err
		}
		if _, err := io.ReadFull(c, resp); err != nil {
			return latencies{}, err
		}
		lat = append(lat, time.Since(t0).Seconds())
	}
	// The first exchanges open the stream and warm the scheduler up.
	if len(lat) > 20 {
		lat = lat[10:]
	}
	return latencies{N: len(lat), P50: measure.Percentile(lat, 0.5), P99: measure.Percentile(lat, 0.99)}, nil
}

func runTunnelBench(ctx context.Context, log *slog.Logger, specs []emu.Spec, rrSize int, d time.Duration) (tunnelBenchResult, error) {
	r := tunnelBenchResult{}
	for i, s := range specs {
		if i > 0 {
			r.Rails += ","
		}
		r.Rails += s.String()
		r.CapacityBps += s.RateBps
	}
	rig, err := newTunnelRig(ctx, log, specs, rrSize)
	if err != nil {
		return r, err
	}
	defer rig.close()
	if r.RRAlone, err = rig.rr(ctx, d); err != nil {
		return r, fmt.Errorf("request/response: %w", err)
	}
	if r.BulkBps, err = rig.bulk(ctx, d); err != nil {
		return r, fmt.Errorf("bulk: %w", err)
	}
	var (
		wg   sync.WaitGroup
		berr error
	)
	wg.Add(1)
	go func() { defer wg.Done(); _, berr = rig.bulk(ctx, d+d/5) }()
	r.RRBesides, err = rig.rr(ctx, d)
	wg.Wait()
	if err == nil {
		err = berr
	}
	return r, err
}
