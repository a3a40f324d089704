package lab

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The tools that can make a competing stream (LoadWith).
const (
	// ToolIperf3 is Debian's iperf3: a server in B, a client in A
	// (LoadIperf).
	ToolIperf3 = "iperf3"
	// ToolGo is a Go TCP stream between sockets made in the namespaces
	// (Load).
	ToolGo = "go"
)

// Tools lists the tools LoadWith takes, the default first.
func Tools() []string { return []string{ToolIperf3, ToolGo} }

// ErrNoIperf3 is wrapped by Iperf3Available's error.
var ErrNoIperf3 = errors.New("lab: iperf3 not found")

// Iperf3Available returns nil if iperf3 is on PATH, otherwise an error that
// wraps ErrNoIperf3 and says how to install it.
func Iperf3Available() error {
	if _, err := exec.LookPath("iperf3"); err != nil {
		return fmt.Errorf("%w in PATH (%s): install it (apt-get install iperf3, or scripts/lab-deps.sh)", ErrNoIperf3, os.Getenv("PATH"))
	}
	return nil
}

// ChooseTool resolves the tool asked for: "" is iperf3 when it is on PATH
// and the Go stream otherwise, with a note that says why; "iperf3" when
// iperf3 is missing is an error; an unknown name is an error naming the
// allowed ones. avail is Iperf3Available's answer.
func ChooseTool(asked string, avail error) (tool, note string, err error) {
	switch asked {
	case "":
		if avail != nil {
			return ToolGo, fmt.Sprintf("the competing stream is the Go stream: %v", avail), nil
		}
		return ToolIperf3, "", nil
	case ToolIperf3:
		if avail != nil {
			return "", "", avail
		}
		return ToolIperf3, "", nil
	case ToolGo:
		return ToolGo, "", nil
	}
	return "", "", fmt.Errorf("lab: tool %q: allowed %s", asked, strings.Join(Tools(), ", "))
}

// LoadWith starts a competing stream made by tool (ToolIperf3: LoadIperf,
// ToolGo: Load) on rail during [now+start, now+start+dur).
func (l *Lab) LoadWith(ctx context.Context, tool string, rail int, start, dur time.Duration) (*LoadStream, error) {
	switch tool {
	case ToolIperf3:
		return l.LoadIperf(ctx, rail, start, dur)
	case ToolGo:
		return l.Load(ctx, rail, start, dur)
	}
	return nil, fmt.Errorf("lab: tool %q: allowed %s", tool, strings.Join(Tools(), ", "))
}

// LoadIperf is Load made by iperf3: `iperf3 -s -1 --json` in B bound to
// rail's address in B, on a free port, and, from now+start on, `iperf3 -c`
// in A bound to rail's address in A, sending for dur. The result is the
// server's (the receiver's) interval report, spread over the buckets of
// Series from the moment the test began (which the client's interval
// reports tell, within a few ms of now+start); what arrives after
// start+dur is left out, as Load leaves it out. iperf3 sends
// for whole seconds only: a dur that is not is rounded up, and the client
// ends late by that much.
//
// LoadIperf returns once the server listens (and after checking that the
// rail carries a TCP connection: an unreachable rail is an error here).
// Ending ctx or calling Stop ends the client with SIGTERM (iperf3 then
// tells the server, which reports what it got) and returns what was
// measured until then; neither process outlives Wait.
func (l *Lab) LoadIperf(ctx context.Context, rail int, start, dur time.Duration) (*LoadStream, error) {
	if rail < 0 || rail >= l.Rails() {
		return nil, fmt.Errorf("lab: load on rail %d: allowed 0..%d", rail, l.Rails()-1)
	}
	if start < 0 || dur <= 0 || dur > 24*time.Hour {
		return nil, fmt.Errorf("lab: load start %v, duration %v: want start >= 0 and 0 < duration <= 24h", start, dur)
	}
	if err := Iperf3Available(); err != nil {
		return nil, err
	}
	if err := l.probeOne(0, 1, RailIP(0, rail), RailIP(1, rail)); err != nil {
		return nil, fmt.Errorf("lab: load on rail %d: %w", rail, err)
	}
	srv, port, err := l.startIperfServer(rail, iperfInterval(dur))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &LoadStream{cancel: cancel, done: make(chan struct{})}
	t0 := time.Now().Add(start)
	go func() {
		s.res, s.err = l.runIperf(ctx, srv, rail, port, t0, dur)
		cancel()
		close(s.done)
	}()
	return s, nil
}

// iperfInterval is the server's reporting interval for a stream of dur:
// SeriesBucket, or coarser for long streams, so that the report stays
// small (at most about 4096 intervals; SpreadIntervals spreads them).
func iperfInterval(dur time.Duration) time.Duration {
	return max(SeriesBucket, (dur / 4096).Round(time.Millisecond))
}

// secondsArg is d in seconds, for iperf3's -i.
func secondsArg(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }

// iperfIntervalRE matches the interval reports of iperf3's text output:
// "[  5]   0.25-0.50   sec  1.49 MBytes  50.0 Mbits/sec    0    119 KBytes".
var iperfIntervalRE = regexp.MustCompile(`^\[\s*(?:\d+|SUM)\]\s+(\d+\.\d+)-(\d+\.\d+)\s+sec\s`)

// iperfIntervalEnd returns the end, in seconds since the test began, of
// the interval that line of iperf3's text output reports.
func iperfIntervalEnd(line string) (float64, bool) {
	m := iperfIntervalRE.FindStringSubmatch(line)
	if m == nil {
		return 0, false
	}
	end, err := strconv.ParseFloat(m[2], 64)
	return end, err == nil && end > 0
}

// iperfProc is one iperf3 process in a namespace.
type iperfProc struct {
	what   string // "iperf3 server on rail 0 (10.10.1.2:5201)"
	cmd    *exec.Cmd
	out    bytes.Buffer // stdout, complete once done is closed
	errBuf bytes.Buffer // stderr, likewise
	done   chan struct{}
	err    error // cmd.Wait's
}

// startIperf starts `iperf3 args...` in side's namespace; line, when set,
// is called with each line of its stdout as it comes.
func (l *Lab) startIperf(side int, what string, line func(string), args ...string) (*iperfProc, error) {
	p := &iperfProc{what: what, done: make(chan struct{})}
	p.cmd = l.Command(context.Background(), side, "iperf3", args...)
	p.cmd.Stderr = &p.errBuf
	p.cmd.WaitDelay = 2 * time.Second
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("lab: %s: %w", what, err)
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("lab: starting %s: %w", what, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			if line != nil {
				line(sc.Text())
			}
			p.out.Write(sc.Bytes())
			p.out.WriteByte('\n')
		}
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM (iperf3 then reports and exits) and, if the process
// is still there after grace, SIGKILL; it returns once the process is
// gone.
func (p *iperfProc) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// failure describes how p ended, for errors: its exit status, the error
// in its JSON output (if any) and the last lines of its stderr.
func (p *iperfProc) failure() string {
	msg := fmt.Sprint(p.err)
	if p.err == nil {
		msg = "exit status 0"
	}
	if r, err := ParseIperf(p.out.Bytes()); err == nil && r.Error != "" {
		msg += ": " + r.Error
	}
	if e := strings.TrimSpace(p.errBuf.String()); e != "" {
		lines := strings.Split(e, "\n")
		msg += ": stderr: " + strings.Join(lines[max(0, len(lines)-3):], " | ")
	}
	return msg
}

// startIperfServer starts `iperf3 -s -1 --json` in B on rail's address and
// a free port and waits until it listens. A port taken between choosing
// and binding it (the server exits with "Address already in use") is
// chosen again.
func (l *Lab) startIperfServer(rail int, interval time.Duration) (*iperfProc, int, error) {
	return l.startIperfServerOn(1, rail, interval)
}

// startIperfServerOn is startIperfServer in side's namespace (a host of a
// cluster), on its address on rail.
func (l *Lab) startIperfServerOn(side, rail int, interval time.Duration) (*iperfProc, int, error) {
	addr := RailIP(side, rail)
	var lastErr error
	for try := 0; try < 5; try++ {
		port, err := l.freePort(side, addr)
		if err != nil {
			return nil, 0, fmt.Errorf("lab: rail %d of %s: finding a free port for iperf3: %w", rail, l.NS(side), err)
		}
		what := fmt.Sprintf("iperf3 server in %s on rail %d (%s)", l.NS(side), rail, net.JoinHostPort(addr, strconv.Itoa(port)))
		p, err := l.startIperf(side, what, nil, "-s", "-1", "-B", addr, "-p", strconv.Itoa(port), "--json",
			"-i", secondsArg(interval))
		if err != nil {
			return nil, 0, err
		}
		err = waitListening(p, port, 5*time.Second)
		if err == nil {
			return p, port, nil
		}
		p.stop(time.Second)
		lastErr = err
		if !strings.Contains(p.failure(), "Address already in use") {
			break
		}
	}
	return nil, 0, lastErr
}

// freePort returns a TCP port that is free on addr in side's namespace
// (the kernel picks it; it is closed again at once).
func (l *Lab) freePort(side int, addr string) (int, error) {
	var port int
	err := l.Run(side, func() error {
		ln, err := net.Listen("tcp4", net.JoinHostPort(addr, "0"))
		if err != nil {
			return err
		}
		port = ln.Addr().(*net.TCPAddr).Port
		return ln.Close()
	})
	return port, err
}

// waitListening waits until p has a socket listening on port, as its
// /proc/<pid>/net/tcp and its file descriptors show (no connection is
// made: one would be the one client of `iperf3 -s -1`).
func waitListening(p *iperfProc, port int, timeout time.Duration) error {
	pid := p.cmd.Process.Pid
	deadline := time.Now().Add(timeout)
	for {
		if listensOn(pid, port) {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("lab: %s ended before it listened: %s", p.what, p.failure())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lab: %s does not listen after %v", p.what, timeout)
		}
	}
}

// listensOn reports whether process pid has a TCP socket listening on
// port (in its network namespace).
func listensOn(pid, port int) bool {
	var inodes []uint64
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err == nil {
			inodes = append(inodes, ParseListeners(b, port)...)
		}
	}
	if len(inodes) == 0 {
		return false
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false
	}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err != nil || !strings.HasPrefix(link, "socket:[") {
			continue
		}
		ino, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]"), 10, 64)
		if err == nil && slices.Contains(inodes, ino) {
			return true
		}
	}
	return false
}

// ParseListeners returns the inodes of the sockets that listen on port in
// the text of /proc/net/tcp or /proc/net/tcp6.
func ParseListeners(procNetTCP []byte, port int) []uint64 {
	var out []uint64
	for _, line := range strings.Split(string(procNetTCP), "\n") {
		f := strings.Fields(line)
		// sl local_address rem_address st tx:rx tr:tm retrnsmt uid timeout inode
		if len(f) < 10 || f[3] != "0A" { // TCP_LISTEN
			continue
		}
		i := strings.LastIndexByte(f[1], ':')
		if i < 0 {
			continue
		}
		p, err := strconv.ParseUint(f[1][i+1:], 16, 16)
		if err != nil || int(p) != port {
			continue
		}
		if ino, err := strconv.ParseUint(f[9], 10, 64); err == nil {
			out = append(out, ino)
		}
	}
	return out
}

// runIperf runs the client from t0 on, waits for both processes and
// turns the server's report into the result.
func (l *Lab) runIperf(ctx context.Context, srv *iperfProc, rail, port int, t0 time.Time, dur time.Duration) (LoadResult, error) {
	nb := int((dur + SeriesBucket - 1) / SeriesBucket)
	res := LoadResult{Rail: rail, Start: t0, Duration: dur, Bucket: SeriesBucket, Series: make([]int64, nb)}
	var (
		cl        *iperfProc
		clientErr error
		launched  time.Time // when the client was started
		stopped   time.Time // when ctx ended the stream
		mu        sync.Mutex
		dataStart time.Time // when the client's test began, by its reports
	)
	wait := time.NewTimer(time.Until(t0))
	select {
	case <-wait.C:
		secs := int(math.Ceil(dur.Seconds()))
		what := fmt.Sprintf("iperf3 client on rail %d (%s -> %s)", rail, RailIP(0, rail), net.JoinHostPort(RailIP(1, rail), strconv.Itoa(port)))
		launched = time.Now()
		cl, clientErr = l.startIperf(0, what, func(line string) {
			// Each interval report ("[  5]   0.25-0.50   sec ...") is
			// flushed as its interval ends: the earliest arrival less
			// its end is when the test began (within a few ms).
			if end, ok := iperfIntervalEnd(line); ok {
				at := time.Now().Add(-time.Duration(end * float64(time.Second)))
				mu.Lock()
				if dataStart.IsZero() || at.Before(dataStart) {
					dataStart = at
				}
				mu.Unlock()
			}
		}, "-c", RailIP(1, rail), "-B", RailIP(0, rail), "-p", strconv.Itoa(port), "-t", strconv.Itoa(secs),
			"-i", secondsArg(iperfInterval(dur)), "--forceflush", "--connect-timeout", "3000")
	case <-ctx.Done():
		stopped = time.Now()
	case <-srv.done: // the server ended before the client began
	}
	wait.Stop()
	if cl != nil {
		select {
		case <-cl.done:
		case <-ctx.Done():
			stopped = time.Now()
			cl.stop(2 * time.Second)
		}
	}
	// `iperf3 -s -1` ends by itself after its client's test, also one
	// the client ended early (it tells the server); without a test (no
	// client, or one that failed), it is stopped at once.
	grace := time.Duration(0)
	if cl != nil && (cl.err == nil || !stopped.IsZero()) {
		grace = 3 * time.Second
	}
	gt := time.NewTimer(grace)
	select {
	case <-srv.done:
	case <-gt.C:
		srv.stop(2 * time.Second)
	}
	gt.Stop()

	end := t0.Add(dur)
	if !stopped.IsZero() && stopped.Before(end) {
		res.Duration = max(stopped.Sub(t0), 0)
	}
	// The server's intervals count from its test's start, which is the
	// client's within a millisecond; without the client's reports, from
	// when the client was started (a few ms early).
	mu.Lock()
	if dataStart.IsZero() || dataStart.Before(launched) {
		dataStart = launched
	}
	mu.Unlock()

	// The client's failure first: the server's follows from it.
	var err error
	rep, perr := ParseIperf(srv.out.Bytes())
	switch {
	case clientErr != nil:
		err = clientErr
	case cl != nil && cl.err != nil:
		err = fmt.Errorf("lab: %s: %s", cl.what, cl.failure())
	case perr != nil:
		err = fmt.Errorf("lab: %s: %v (%s)", srv.what, perr, srv.failure())
	case rep.Error != "" || srv.err != nil:
		err = fmt.Errorf("lab: %s: %s", srv.what, srv.failure())
	case cl == nil:
		err = fmt.Errorf("lab: %s ended before the client began", srv.what)
	}
	if perr == nil && !dataStart.IsZero() {
		iv := rep.Intervals
		if extra := rep.ReceivedBytes - rep.IntervalBytes(); extra > 0 && len(iv) > 0 {
			// Bytes that arrived after the last interval the server
			// reported (a client ended early): spread up to the stop.
			last := iv[len(iv)-1].End
			tail := IperfInterval{Start: last, End: last, Bytes: extra}
			if !stopped.IsZero() {
				tail.End = max(last, stopped.Sub(dataStart).Seconds())
			}
			iv = append(iv[:len(iv):len(iv)], tail)
		}
		res.Series = SpreadIntervals(iv, dataStart.Sub(t0), SeriesBucket, res.Duration, nb)
		for _, v := range res.Series {
			res.Bytes += v
		}
	}
	if res.Duration > 0 {
		res.GoodputBps = float64(res.Bytes) * 8 / res.Duration.Seconds()
	}
	if !stopped.IsZero() {
		// Stopped on purpose: iperf3's complaints about it are expected.
		return res, nil
	}
	return res, err
}

// IperfInterval is one interval of an iperf3 report: seconds since the
// test began, and the bytes moved within.
type IperfInterval struct {
	Start   float64 `json:"start"`
	End     float64 `json:"end"`
	Bytes   int64   `json:"bytes"`
	Omitted bool    `json:"omitted"`
}

// IperfReport is what the lab reads of `iperf3 --json`'s output.
type IperfReport struct {
	// Version is iperf3's ("iperf 3.12").
	Version string
	// Intervals are the report's intervals (their sums over the streams),
	// in order, without those omitted (-O) and without the repeat of the
	// last one that iperf3 prints when its peer ends the test early.
	Intervals []IperfInterval
	// ReceivedBytes is end.sum_received.bytes: the receiver's total, which
	// includes what arrived after the last interval when the test was
	// ended early; 0 if absent. ReceivedSeconds is the time it covers
	// (end.sum_received's end less its start).
	ReceivedBytes   int64
	ReceivedSeconds float64
	// Error is the error iperf3 reported ("" if none).
	Error string
}

// IntervalBytes is the sum of the intervals' bytes.
func (r IperfReport) IntervalBytes() int64 {
	var n int64
	for _, iv := range r.Intervals {
		n += iv.Bytes
	}
	return n
}

// ParseIperf parses the JSON object that `iperf3 --json` prints.
func ParseIperf(b []byte) (IperfReport, error) {
	var raw struct {
		Start struct {
			Version string `json:"version"`
		} `json:"start"`
		Intervals []struct {
			Sum *IperfInterval `json:"sum"`
		} `json:"intervals"`
		End struct {
			SumReceived *IperfInterval `json:"sum_received"`
		} `json:"end"`
		Error string `json:"error"`
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return IperfReport{}, errors.New("iperf3 printed nothing")
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return IperfReport{}, fmt.Errorf("iperf3's output is not its JSON report: %w", err)
	}
	r := IperfReport{Version: raw.Start.Version, Error: raw.Error}
	if raw.End.SumReceived != nil {
		r.ReceivedBytes = raw.End.SumReceived.Bytes
		r.ReceivedSeconds = raw.End.SumReceived.End - raw.End.SumReceived.Start
	}
	for _, x := range raw.Intervals {
		iv := x.Sum
		if iv == nil || iv.Omitted {
			continue
		}
		if iv.End < iv.Start || iv.Bytes < 0 || math.IsNaN(iv.Start) || math.IsNaN(iv.End) {
			return IperfReport{}, fmt.Errorf("iperf3's report has a bad interval: %+v", *iv)
		}
		if n := len(r.Intervals); n > 0 && iv.Start < r.Intervals[n-1].End {
			continue // a repeat (the test ended early) or an overlap
		}
		r.Intervals = append(r.Intervals, *iv)
	}
	return r, nil
}

// SpreadIntervals puts the bytes of intervals into n buckets of width:
// an interval's times are seconds since a moment that lies offset after
// bucket 0's start, and its bytes are spread evenly over its time (all at
// its start if it has none). What lies before bucket 0 or at or after
// limit is left out. Rounding keeps the sums: the buckets add up to the
// bytes within [0, limit), rounded once.
func SpreadIntervals(intervals []IperfInterval, offset, width, limit time.Duration, n int) []int64 {
	out := make([]int64, n)
	if n <= 0 || width <= 0 {
		return out
	}
	acc := make([]float64, n)
	off, w := offset.Seconds(), width.Seconds()
	lim := min(max(limit, 0), time.Duration(n)*width).Seconds()
	for _, iv := range intervals {
		s, e, b := iv.Start+off, iv.End+off, float64(iv.Bytes)
		if e <= s { // no time: all at its start
			if s >= 0 && s < lim {
				acc[min(int(s/w), n-1)] += b
			}
			continue
		}
		lo, hi := max(s, 0), min(e, lim)
		for k := int(lo / w); k < n && float64(k)*w < hi; k++ {
			if a, z := max(lo, float64(k)*w), min(hi, float64(k+1)*w); z > a {
				acc[k] += b * min((z-a)/(e-s), 1)
			}
		}
	}
	// Round the running sum, not each bucket, so that the buckets add up.
	var sum, prev float64
	for k, v := range acc {
		sum += v
		r := math.Round(sum)
		out[k] = int64(r - prev)
		prev = r
	}
	return out
}
