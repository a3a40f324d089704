package labbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/internal/bench"
	"github.com/multirail/multirail/lab"
)

// Agent kinds: what runs between the namespaces in one run.
const (
	KindTCP       = "tcp"       // one TCP stream per rail
	KindMPTCP     = "mptcp"     // one MPTCP connection (Go's SetMultipathTCP)
	KindMultirail = "multirail" // one multirail connection over every rail
)

// Agent roles.
const (
	RoleRecv = "recv" // in B
	RoleSend = "send" // in A
)

// The receiver's output lines, one per line on its stdout.
const (
	Ready      = "READY"  // READY addr,addr,...: listening
	Progress   = "P"      // P bucket cum_rail0 cum_rail1 ...: bytes so far
	ResultLine = "RESULT" // RESULT {json}: done (an AgentResult)
)

// ErrSpec is wrapped by the errors of Spec.Validate.
var ErrSpec = errors.New("labbench: bad agent spec")

// Spec tells an agent (`lab agent --spec JSON`) what to do.
type Spec struct {
	Role string `json:"role"` // RoleRecv or RoleSend
	Kind string `json:"kind"` // KindTCP, KindMPTCP or KindMultirail
	// Listen are the receiver's addresses: one per rail for tcp, one for
	// the others.
	Listen []string `json:"listen,omitempty"`
	// NRails is the number of rails, for the receiver's per-rail series.
	NRails int `json:"nrails"`
	// Rails are the sender's paths: every rail for tcp and multirail, the
	// first for mptcp.
	Rails []Rail `json:"rails,omitempty"`
	Sched string `json:"sched,omitempty"`
	// Size is the message size (multirail) or the write size (tcp, mptcp).
	Size   int `json:"size"`
	Window int `json:"window,omitempty"`
	// EpochNs is when sending starts (Unix nanoseconds); the sender sends
	// for Duration from then and the receiver counts in buckets of Bucket
	// from then.
	EpochNs  int64         `json:"epoch_ns"`
	Duration time.Duration `json:"duration"`
	Bucket   time.Duration `json:"bucket"`
}

// Rail is one of the sender's paths.
type Rail struct {
	Name   string `json:"name"`
	Local  string `json:"local"`
	Remote string `json:"remote"`
	// Bandwidth is the rail's nominal rate, given to the weighted
	// scheduler only (0 otherwise).
	Bandwidth float64 `json:"bandwidth,omitempty"`
}

// AgentResult is the receiver's last line, "RESULT {json}".
type AgentResult struct {
	// Rails[rail][bucket] and Total[bucket] are payload bytes received.
	Rails [][]int64 `json:"rails"`
	Total []int64   `json:"total"`
	// MPTCP reports whether the connection really was MPTCP, and
	// Subflows the most subflows it had at once.
	MPTCP    bool   `json:"mptcp,omitempty"`
	Subflows int    `json:"subflows,omitempty"`
	Note     string `json:"note,omitempty"`
}

// Validate checks s.
func (s Spec) Validate() error {
	switch {
	case s.Role != RoleRecv && s.Role != RoleSend:
		return fmt.Errorf("%w: role %q: allowed recv, send", ErrSpec, s.Role)
	case s.Kind != KindTCP && s.Kind != KindMPTCP && s.Kind != KindMultirail:
		return fmt.Errorf("%w: kind %q: allowed tcp, mptcp, multirail", ErrSpec, s.Kind)
	case s.Duration <= 0 || s.Bucket <= 0 || s.EpochNs <= 0:
		return fmt.Errorf("%w: epoch %d, duration %v, bucket %v: all must be > 0", ErrSpec, s.EpochNs, s.Duration, s.Bucket)
	case s.Role == RoleRecv && (len(s.Listen) == 0 || s.NRails < 1):
		return fmt.Errorf("%w: recv needs listen addresses and nrails >= 1", ErrSpec)
	case s.Role == RoleSend && (len(s.Rails) == 0 || s.Size < 1):
		return fmt.Errorf("%w: send needs rails and size >= 1", ErrSpec)
	}
	return nil
}

// RunAgent is one end of a run, as s says; the receiver writes its lines
// (Ready, Progress, ResultLine) to out. It never outlives the run by more
// than 30 s, whatever the other end does. s must be valid.
func RunAgent(ctx context.Context, s Spec, out io.Writer, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ctx, cancel := context.WithDeadline(ctx, time.Unix(0, s.EpochNs).Add(s.Duration+30*time.Second))
	defer cancel()
	if s.Role == RoleSend {
		return agentSend(ctx, s, log)
	}
	return agentRecv(ctx, s, out, log)
}

// sleepUntil waits until t or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) error {
	tm := time.NewTimer(time.Until(t))
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// railOf maps a lab address (10.10.<rail+1>.x) to its rail, -1 if none.
func railOf(a netip.Addr, nrails int) int {
	a = a.Unmap()
	if !a.Is4() {
		return -1
	}
	b := a.As4()
	if b[0] != 10 || b[1] != 10 || int(b[2]) < 1 || int(b[2]) > nrails {
		return -1
	}
	return int(b[2]) - 1
}

// receiver is one kind's receiving end: counters sampled per bucket.
type receiver struct {
	// sample returns the bytes received so far, per rail and in total.
	sample func() (perRail []uint64, total uint64)
	// done is closed when the sender has closed and everything is read.
	done  chan struct{}
	close func()
	res   AgentResult
	mu    sync.Mutex // guards res.MPTCP, res.Subflows, res.Note
}

func agentRecv(ctx context.Context, s Spec, w io.Writer, log *slog.Logger) error {
	out := bufio.NewWriter(w)
	r, err := startReceiver(ctx, s, out, log)
	if err != nil {
		return err
	}
	defer r.close()
	epoch := time.Unix(0, s.EpochNs)
	n := int(s.Duration / s.Bucket)
	r.res.Rails = make([][]int64, s.NRails)
	for i := range r.res.Rails {
		r.res.Rails[i] = make([]int64, n)
	}
	r.res.Total = make([]int64, n)
	if err := sleepUntil(ctx, epoch); err != nil {
		return err
	}
	base, baseTotal := r.sample()
	prev, prevTotal := base, baseTotal
	for k := 1; k <= n; k++ {
		if err := sleepUntil(ctx, epoch.Add(time.Duration(k)*s.Bucket)); err != nil {
			return err
		}
		cur, total := r.sample()
		line := []string{Progress, strconv.Itoa(k)}
		for i := range cur {
			if i < s.NRails {
				r.res.Rails[i][k-1] = int64(cur[i] - prev[i])
			}
			line = append(line, strconv.FormatUint(cur[i]-base[i], 10))
		}
		r.res.Total[k-1] = int64(total - prevTotal)
		prev, prevTotal = cur, total
		fmt.Fprintln(out, strings.Join(line, " "))
		out.Flush()
	}
	// Drain until the sender has closed (its last Sends complete after
	// the deadline), but do not wait forever.
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		r.res.Note = "the sender did not close within 20 s of the end"
	case <-ctx.Done():
		return ctx.Err()
	}
	r.mu.Lock()
	b, err := json.Marshal(r.res)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s %s\n", ResultLine, b)
	return out.Flush()
}

func ready(out *bufio.Writer, addrs []string) {
	fmt.Fprintf(out, "%s %s\n", Ready, strings.Join(addrs, ","))
	out.Flush()
}

func startReceiver(ctx context.Context, s Spec, out *bufio.Writer, log *slog.Logger) (*receiver, error) {
	acceptBy := time.Unix(0, s.EpochNs).Add(10 * time.Second)
	r := &receiver{done: make(chan struct{})}
	switch s.Kind {
	case KindTCP:
		lns := make([]*net.TCPListener, len(s.Listen))
		var addrs []string
		for i, a := range s.Listen {
			ta, err := net.ResolveTCPAddr("tcp4", a)
			if err == nil {
				lns[i], err = net.ListenTCP("tcp4", ta)
			}
			if err != nil {
				return nil, err
			}
			defer lns[i].Close()
			addrs = append(addrs, lns[i].Addr().String())
		}
		ready(out, addrs)
		counters := make([]atomic.Uint64, len(lns))
		conns := make([]net.Conn, len(lns))
		for i, ln := range lns {
			_ = ln.SetDeadline(acceptBy)
			c, err := ln.Accept()
			if err != nil {
				for _, c := range conns[:i] {
					c.Close()
				}
				return nil, fmt.Errorf("accept on %s: %w", ln.Addr(), err)
			}
			conns[i] = c
		}
		var wg sync.WaitGroup
		for i, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				readAll(c, &counters[i])
			}()
		}
		go func() { wg.Wait(); close(r.done) }()
		r.close = func() {
			for _, c := range conns {
				c.Close()
			}
		}
		r.sample = func() ([]uint64, uint64) {
			per := make([]uint64, len(counters))
			var tot uint64
			for i := range counters {
				per[i] = counters[i].Load()
				tot += per[i]
			}
			return per, tot
		}
	case KindMPTCP:
		var lc net.ListenConfig
		lc.SetMultipathTCP(true)
		ln, err := lc.Listen(ctx, "tcp4", s.Listen[0])
		if err != nil {
			return nil, err
		}
		ready(out, []string{ln.Addr().String()})
		_ = ln.(*net.TCPListener).SetDeadline(acceptBy)
		c, err := ln.Accept()
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("accept on %s: %w", ln.Addr(), err)
		}
		tc := c.(*net.TCPConn)
		var total atomic.Uint64
		go func() { readAll(c, &total); close(r.done) }()
		// The listener stays open: the subflows of the other rails join
		// through it (MP_JOIN), some of them after the first Accept.
		r.close = func() { c.Close(); ln.Close() }
		r.res.MPTCP, _ = tc.MultipathTCP()
		r.sample = func() ([]uint64, uint64) {
			per := make([]uint64, s.NRails)
			subs, err := lab.Subflows(tc)
			if err == nil {
				for _, sf := range subs {
					if i := railOf(sf.Local.Addr(), s.NRails); i >= 0 {
						per[i] += sf.BytesReceived
					}
				}
				r.mu.Lock()
				r.res.Subflows = max(r.res.Subflows, len(subs))
				r.mu.Unlock()
			}
			return per, total.Load()
		}
	case KindMultirail:
		ln, err := multirail.Listen(s.Listen[0], multirail.Config{MaxMessageSize: bench.MaxMessage, Logger: log})
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		ready(out, []string{ln.Addr().String()})
		actx, cancel := context.WithDeadline(ctx, acceptBy)
		c, err := ln.Accept(actx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("multirail accept on %s: %w", ln.Addr(), err)
		}
		go func() {
			defer close(r.done)
			if err := bench.Receive(ctx, c, nil); err != nil && ctx.Err() == nil {
				r.mu.Lock()
				r.res.Note = "receive: " + err.Error()
				r.mu.Unlock()
			}
		}()
		r.close = func() { c.Close() }
		r.sample = func() ([]uint64, uint64) {
			return bench.Received(c.Stats())
		}
	}
	return r, nil
}

// readAll reads c until EOF or an error, counting bytes into n.
func readAll(c net.Conn, n *atomic.Uint64) {
	buf := make([]byte, 256<<10)
	for {
		k, err := c.Read(buf)
		n.Add(uint64(k))
		if err != nil {
			return
		}
	}
}

func agentSend(ctx context.Context, s Spec, log *slog.Logger) error {
	epoch := time.Unix(0, s.EpochNs)
	end := epoch.Add(s.Duration)
	buf := bench.Payload(s.Size) // before the epoch: filling it is not part of the run
	if s.Kind == KindMultirail {
		cfg := multirail.Config{Scheduler: s.Sched, MaxMessageSize: bench.MaxMessage, Logger: log}
		for _, r := range s.Rails {
			cfg.Rails = append(cfg.Rails, multirail.Rail{Name: r.Name, Addr: r.Remote, Local: r.Local, Bandwidth: r.Bandwidth})
		}
		c, err := multirail.Dial(ctx, cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := sleepUntil(ctx, epoch); err != nil {
			return err
		}
		if _, err := bench.SendWindow(ctx, c, buf, bench.SendOptions{Window: s.Window, Until: end}); err != nil {
			return err
		}
		return c.Close()
	}
	rails := s.Rails
	if s.Kind == KindMPTCP {
		rails = rails[:1]
	}
	conns := make([]net.Conn, len(rails))
	for i, r := range rails {
		d := net.Dialer{Timeout: 5 * time.Second}
		if s.Kind == KindMPTCP {
			d.SetMultipathTCP(true) // source address by routing: rail0's
		} else {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(r.Local)}
		}
		c, err := d.DialContext(ctx, "tcp4", r.Remote)
		if err != nil {
			return fmt.Errorf("dial %s: %w", r.Remote, err)
		}
		defer c.Close()
		conns[i] = c
	}
	if err := sleepUntil(ctx, epoch); err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetWriteDeadline(end)
			for {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if s.Kind == KindMPTCP {
		if mp, err := conns[0].(*net.TCPConn).MultipathTCP(); err == nil && !mp {
			log.Warn("labbench: the MPTCP connection fell back to plain TCP")
		}
	}
	for _, c := range conns {
		_ = c.(*net.TCPConn).CloseWrite()
	}
	return nil
}
