package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// RingFlow is one flow of a Ring: host From sends to host To over Rail.
type RingFlow struct {
	From, To, Rail int
	// Bytes are what To's iperf3 server received; Seconds the time they
	// cover (its end.sum_received).
	Bytes   int64
	Seconds float64
}

// Bps is the flow's goodput at its receiver in bits per second (0 without
// a time).
func (f RingFlow) Bps() float64 {
	if f.Seconds <= 0 {
		return 0
	}
	return float64(f.Bytes) * 8 / f.Seconds
}

// RingResult is what Ring measured.
type RingResult struct {
	Hosts, Rails int
	Flows        []RingFlow
	// Start is when the first client was started, End when the last one
	// had ended: the window in which the ring's bytes moved.
	Start, End time.Time
}

// HostBps is each host's goodput to its successor, its rails summed.
func (r RingResult) HostBps() []float64 {
	out := make([]float64, r.Hosts)
	for _, f := range r.Flows {
		if f.From >= 0 && f.From < r.Hosts {
			out[f.From] += f.Bps()
		}
	}
	return out
}

// MeanHostBps is the mean of HostBps: the per-host goodput in one
// direction, what a collective's bus bandwidth is compared with.
func (r RingResult) MeanHostBps() float64 {
	h := r.HostBps()
	if len(h) == 0 {
		return 0
	}
	var sum float64
	for _, v := range h {
		sum += v
	}
	return sum / float64(len(h))
}

// Bytes is what every flow's receiver got, summed.
func (r RingResult) Bytes() int64 {
	var n int64
	for _, f := range r.Flows {
		n += f.Bytes
	}
	return n
}

// serverEnd bounds the wait for a ring's iperf3 server to end after its
// client did (it reports and exits at once when the test is over).
const serverEnd = 5 * time.Second

// ErrRing is wrapped by Ring's errors about its arguments.
var ErrRing = errors.New("lab: ring")

// Ring runs a ring of kernel TCP flows for dur (whole seconds, as iperf3
// sends them; at least 1 s): every host i sends to host i+1 (the last to
// host 0) on every rail at once, one `iperf3 -c` per rail bound to host
// i's address on it, to an `iperf3 -s -1` on host i+1's. Every host thus
// sends and receives on every rail, as in a ring collective's steps; a
// host's goodput is what the rails can carry in one direction with the
// kernel's TCP and its CPU cost beside every other host's. The caller
// kills what a failed run left (KillProcesses).
func (l *Lab) Ring(ctx context.Context, dur time.Duration) (RingResult, error) {
	n, k := l.Hosts(), l.Rails()
	res := RingResult{Hosts: n, Rails: k}
	secs := int(dur / time.Second)
	if dur < time.Second || dur%time.Second != 0 || n < 2 || k < 1 {
		return res, fmt.Errorf("%w: duration %v on %d hosts with %d rails; allowed: whole seconds from 1 s, 2 hosts and 1 rail", ErrRing, dur, n, k)
	}
	type flow struct {
		f        RingFlow
		srv, cl  *iperfProc
		port     int
		clientTo string
	}
	var flows []*flow
	stopAll := func() {
		for _, f := range flows {
			if f.cl != nil {
				f.cl.stop(time.Second)
			}
			if f.srv != nil {
				f.srv.stop(time.Second)
			}
		}
	}
	for i := range n {
		for r := range k {
			to := (i + 1) % n
			srv, port, err := l.startIperfServerOn(to, r, time.Duration(secs)*time.Second)
			if err != nil {
				stopAll()
				return res, err
			}
			flows = append(flows, &flow{f: RingFlow{From: i, To: to, Rail: r}, srv: srv, port: port,
				clientTo: net.JoinHostPort(RailIP(to, r), strconv.Itoa(port))})
		}
	}
	res.Start = time.Now()
	for _, f := range flows {
		what := fmt.Sprintf("iperf3 client in %s on rail %d (%s -> %s)", l.NS(f.f.From), f.f.Rail, RailIP(f.f.From, f.f.Rail), f.clientTo)
		cl, err := l.startIperf(f.f.From, what, nil, "-c", RailIP(f.f.To, f.f.Rail), "-B", RailIP(f.f.From, f.f.Rail),
			"-p", strconv.Itoa(f.port), "-t", strconv.Itoa(secs), "--connect-timeout", "3000", "--json")
		if err != nil {
			stopAll()
			return res, err
		}
		f.cl = cl
	}
	for _, f := range flows {
		select {
		case <-f.cl.done:
		case <-ctx.Done():
			stopAll()
			return res, ctx.Err()
		}
	}
	res.End = time.Now()
	var errs []error
	for _, f := range flows {
		// `iperf3 -s -1` ends by itself once its client's test is over;
		// without a test (the client failed) it is stopped.
		if f.cl.err != nil {
			f.srv.stop(time.Second)
		}
		t := time.NewTimer(serverEnd)
		select {
		case <-f.srv.done:
		case <-t.C:
			f.srv.stop(time.Second)
		case <-ctx.Done():
			t.Stop()
			stopAll()
			return res, ctx.Err()
		}
		t.Stop()
		rep, perr := ParseIperf(f.srv.out.Bytes())
		switch {
		case f.cl.err != nil:
			errs = append(errs, fmt.Errorf("lab: %s: %s", f.cl.what, f.cl.failure()))
			continue
		case perr != nil:
			errs = append(errs, fmt.Errorf("lab: %s: %v (%s)", f.srv.what, perr, f.srv.failure()))
			continue
		case rep.Error != "" || f.srv.err != nil:
			errs = append(errs, fmt.Errorf("lab: %s: %s", f.srv.what, f.srv.failure()))
			continue
		}
		f.f.Bytes, f.f.Seconds = rep.ReceivedBytes, rep.ReceivedSeconds
		res.Flows = append(res.Flows, f.f)
	}
	return res, errors.Join(errs...)
}
