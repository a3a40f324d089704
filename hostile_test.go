//go:build linux

package multirail

// Hostile peers (issue 4, item 4): no token, a wrong token, garbage before
// and after the handshake, a header announcing a 1 TiB message, messages
// announced at the largest size until the window is exceeded, 1000
// half-open handshakes, and peers trickling one byte per second (during the
// handshake and in the middle of a frame). Each attacker must be cut off
// with a logged reason while a legitimate session running at the same time
// completes with SHA-256-checked data, and the receiver's memory must stay
// within its configured bound (TestHostileMemoryBound measures the RSS of a
// receiver running in a child process).
//
// The file is Linux-only: it reads /proc/<pid>/status, binds attackers to
// 127.0.0.2 and adjusts RLIMIT_NOFILE.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/multirail/multirail/emu"
	hs "github.com/multirail/multirail/internal/handshake"
	"github.com/multirail/multirail/internal/reasm"
	"github.com/multirail/multirail/internal/wire"
)

// floodConns is the number of half-open handshakes of the flood attacks.
const floodConns = 1000

// cutMargin is how long past a timeout a test waits for a cut-off before
// declaring it missing (generous: -race on a loaded 2-core machine).
const cutMargin = 5 * time.Second

// ---------------------------------------------------------------------------
// Captured logs.

// logSink collects the text output of an slog handler; it is safe for
// concurrent use and lets tests wait for a line to appear.
type logSink struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func newLogSink() *logSink { return &logSink{changed: make(chan struct{})} }

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.buf.Write(p)
	close(s.changed)
	s.changed = make(chan struct{})
	return n, err
}

func (s *logSink) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(s, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (s *logSink) snapshot() (string, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String(), s.changed
}

func (s *logSink) String() string { text, _ := s.snapshot(); return text }

// tail is the end of the log, for failure messages.
// grep returns the lines of the log that contain sub.
func (s *logSink) grep(sub string) string {
	var b strings.Builder
	for line := range strings.Lines(s.String()) {
		if strings.Contains(line, sub) {
			b.WriteString(line)
		}
	}
	return b.String()
}

func (s *logSink) tail() string {
	text := s.String()
	if len(text) > 4000 {
		text = "...\n" + text[len(text)-4000:]
	}
	return text
}

// findLine returns the first complete line of text that contains every one
// of subs.
func findLine(text string, subs []string) (string, bool) {
	for line := range strings.Lines(text) {
		if !strings.HasSuffix(line, "\n") {
			break // still being written
		}
		ok := true
		for _, sub := range subs {
			ok = ok && strings.Contains(line, sub)
		}
		if ok {
			return strings.TrimSuffix(line, "\n"), true
		}
	}
	return "", false
}

// waitLine waits up to timeout for a log line containing every one of subs.
func (s *logSink) waitLine(timeout time.Duration, subs ...string) (string, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		text, changed := s.snapshot()
		if line, ok := findLine(text, subs); ok {
			return line, nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return "", fmt.Errorf("no log line with %q within %v", subs, timeout)
		}
	}
}

// logAttr extracts the value of key from a line of slog's text format
// (key=value or key="quoted value").
func logAttr(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if strings.HasPrefix(v, `"`) {
		if q, err := strconv.QuotedPrefix(v); err == nil {
			s, _ := strconv.Unquote(q)
			return s
		}
	}
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}

// reasonsByPeer maps every peer address named in the log to the messages
// and errors logged about it.
func reasonsByPeer(text string) map[string]string {
	m := make(map[string]string)
	for line := range strings.Lines(text) {
		if p := logAttr(line, "peer"); p != "" {
			m[p] += logAttr(line, "msg") + ": " + logAttr(line, "err") + "; "
		}
	}
	return m
}

// ---------------------------------------------------------------------------
// The legitimate session.

type legitEntry struct {
	sum    [32]byte
	marker bool // the empty message that ends a tag
}

// legitLoad is a legitimate transfer running in the background: one sender
// per tag sends pseudo-random messages of 1..maxSize bytes until stopped,
// then an empty message as end marker; the receiver checks every message's
// SHA-256 and the per-tag order. With echo, the receiving end is a peer
// that answers every message with its SHA-256 (TestHelperHostileServer),
// and those answers are checked instead.
type legitLoad struct {
	send, recv *Conn
	echo       bool
	tags       int
	maxSize    int
	ctx        context.Context
	cancel     context.CancelFunc
	stop       chan struct{}
	wg         sync.WaitGroup

	mu      sync.Mutex
	want    [][]legitEntry // per tag, in send order
	checked int            // messages verified, end markers excluded
	bytes   int64          // bytes verified
	err     error
	changed chan struct{}
}

func startLegit(t *testing.T, send, recv *Conn, echo bool, tags, maxSize int) *legitLoad {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	l := &legitLoad{send: send, recv: recv, echo: echo, tags: tags, maxSize: maxSize, ctx: ctx, cancel: cancel,
		stop: make(chan struct{}), want: make([][]legitEntry, tags), changed: make(chan struct{})}
	for g := range tags {
		l.wg.Add(1)
		go l.sender(g)
	}
	l.wg.Add(1)
	go l.receiver()
	t.Cleanup(func() { l.cancel(); l.wg.Wait() }) // if the test ends early
	return l
}

func (l *legitLoad) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *legitLoad) fail(err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = err
	}
	l.notifyLocked()
	l.mu.Unlock()
	l.cancel()
}

func (l *legitLoad) sender(tag int) {
	defer l.wg.Done()
	var seed [32]byte
	seed[0] = byte(tag)
	rng := rand.NewChaCha8(seed)
	for {
		var p []byte
		marker := false
		select {
		case <-l.stop:
			marker = true
		default:
			p = make([]byte, 1+int(rng.Uint64()%uint64(l.maxSize)))
			_, _ = rng.Read(p)
		}
		l.mu.Lock()
		l.want[tag] = append(l.want[tag], legitEntry{sum: sha256.Sum256(p), marker: marker})
		l.mu.Unlock()
		if err := l.send.Send(l.ctx, uint32(tag), p); err != nil {
			l.fail(fmt.Errorf("legitimate session: send on tag %d: %w", tag, err))
			return
		}
		if marker {
			return
		}
	}
}

func (l *legitLoad) receiver() {
	defer l.wg.Done()
	next := make([]int, l.tags)
	for ended := 0; ended < l.tags; {
		m, err := l.recv.Recv(l.ctx)
		if err != nil {
			l.fail(fmt.Errorf("legitimate session: recv: %w", err))
			return
		}
		g := int(m.Tag)
		if g >= l.tags {
			l.fail(fmt.Errorf("legitimate session: message on unknown tag %d", g))
			return
		}
		l.mu.Lock()
		if next[g] >= len(l.want[g]) {
			l.mu.Unlock()
			l.fail(fmt.Errorf("legitimate session: tag %d: more messages than sent", g))
			return
		}
		e := l.want[g][next[g]]
		l.mu.Unlock()
		var ok bool
		if l.echo {
			ok = bytes.Equal(m.Data, e.sum[:])
		} else {
			ok = sha256.Sum256(m.Data) == e.sum
		}
		if !ok {
			l.fail(fmt.Errorf("legitimate session: tag %d message %d (%d bytes): SHA-256 mismatch, or out of order", g, next[g], len(m.Data)))
			return
		}
		if !l.echo {
			l.recv.Release(m.Data)
		}
		next[g]++
		l.mu.Lock()
		if e.marker {
			ended++
		} else {
			l.checked++
			if !l.echo {
				l.bytes += int64(len(m.Data))
			}
		}
		l.notifyLocked()
		l.mu.Unlock()
	}
}

// progress waits until `more` further messages have been verified: the
// session is alive and delivering correct data at this point.
func (l *legitLoad) progress(t *testing.T, more int) {
	t.Helper()
	l.mu.Lock()
	target := l.checked + more
	l.mu.Unlock()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	for {
		l.mu.Lock()
		n, err, ch := l.checked, l.err, l.changed
		l.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if n >= target {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("legitimate session stalled: %d messages verified, waiting for %d", n, target)
		}
	}
}

// finish stops the senders, waits for every message to be verified and
// reports the first error.
func (l *legitLoad) finish(t *testing.T) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	l.cancel()
	if l.err != nil {
		t.Fatal(l.err)
	}
	what := fmt.Sprintf("%d bytes", l.bytes)
	if l.echo {
		what = "digests echoed by the receiver"
	}
	t.Logf("legitimate session: %d messages verified (%s), all SHA-256 correct", l.checked, what)
}

// ---------------------------------------------------------------------------
// Setup helpers.

// hostileListener listens on loopback with cfg, logging into the returned
// sink.
func hostileListener(t *testing.T, cfg Config) (*Listener, *logSink) {
	t.Helper()
	sink := newLogSink()
	cfg.Logger = sink.logger()
	cfg.Plaintext = true // the raw peers write their frames in clear (rawHandshake)
	ln, err := Listen("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, sink
}

// legitOverEmu opens a legitimate session to ln over emulated rails of the
// given rates (user-space shaped loopback: keeps the CPU for the attacks).
func legitOverEmu(t *testing.T, ln *Listener, cfg Config, rates ...float64) (dialer, acceptor *Conn) {
	t.Helper()
	cfg.Rails = nil
	for i, r := range rates {
		l, err := emu.NewLink(ln.Addr().String(), emu.LinkConfig{RateBps: r})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		cfg.Rails = append(cfg.Rails, Rail{Name: fmt.Sprintf("legit%d", i), Addr: l.Addr(), Bandwidth: r})
	}
	return dialAndAccept(t, ln, cfg)
}

// hostileHello is a valid one-rail HELLO whose session id starts with
// ba d0 00 id, so that the acceptor's logs (session=bad000xx) name it.
func hostileHello(id byte) wire.Hello {
	h := wire.Hello{Version: wire.Version, Rails: 1, SegmentSize: 64 << 10, Window: 1 << 20, MaxMessage: 1 << 20}
	h.Session = [16]byte{0xba, 0xd0, 0, id, 1, 2, 3}
	h.Flags = wire.HelloPlaintext
	return h
}

// helloFrame is a HELLO frame for h whose Noise message is zeros: enough
// for attacks that never get past the HELLO.
func helloFrame(h wire.Hello) []byte {
	return wire.AppendHello(nil, h, make([]byte, wire.HelloSize-wire.HelloPrefixSize))
}

// peerAttr is how the listener's logs name the peer at the other end of c
// (the trailing space: the err attribute follows).
func peerAttr(c net.Conn) string { return "peer=" + c.LocalAddr().String() + " " }

// logSession is how the acceptor's logs name the session of h.
func logSession(h wire.Hello) string { return fmt.Sprintf("session=%x", h.Session[:4]) }

func dialFrom(addr string, local net.IP) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	if local != nil {
		d.LocalAddr = &net.TCPAddr{IP: local}
	}
	return d.Dial("tcp", addr)
}

// rawHandshake completes a handshake by hand (internal/handshake's Dial with
// the given token) and returns the raw socket of the rail. It asks for
// frames in clear (h carries HelloPlaintext) so that the tests can write
// hostile frames by hand; the listener must allow it (Config.Plaintext).
// After the handshake a sealed session reads the very same frames, once
// opened (TestSealed* attack the sealing itself).
func rawHandshake(addr, token string, h wire.Hello) (net.Conn, error) {
	c, err := dialFrom(addr, nil)
	if err != nil {
		return nil, err
	}
	if err := handshakeInClear(c, token, h); err != nil {
		c.Close()
		return nil, fmt.Errorf("handshake: %w", err)
	}
	return c, nil
}

// rawSessionOn completes a handshake with ln by hand and accepts the
// connection; both are closed when the test ends.
func rawSessionOn(t *testing.T, ln *Listener, token string, h wire.Hello) (net.Conn, *Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type res struct {
		c   *Conn
		err error
	}
	ch := make(chan res, 1)
	go func() { c, err := ln.Accept(ctx); ch <- res{c, err} }()
	raw, err := rawHandshake(ln.Addr().String(), token, h)
	if err != nil {
		cancel()
		<-ch
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.c.Close() })
	return raw, r.c
}

// readHsFrame reads one handshake frame (never DATA, small body).
func readHsFrame(c net.Conn) (wire.Header, []byte, error) {
	var hb [wire.HeaderSize]byte
	if _, err := io.ReadFull(c, hb[:]); err != nil {
		return wire.Header{}, nil, err
	}
	h, err := wire.ParseHeader(hb[:], wire.Limits{})
	if err != nil {
		return h, nil, err
	}
	if h.Type == wire.TypeData {
		return h, nil, fmt.Errorf("DATA frame during the handshake")
	}
	body := make([]byte, h.Len)
	_, err = io.ReadFull(c, body)
	return h, body, err
}

// handshakeInClear runs the dialing side of a rail's handshake on c by
// hand, under token, up to WELCOME, and checks that the session's frames
// are in clear (h must ask with HelloPlaintext, the listener allow it).
func handshakeInClear(c net.Conn, token string, h wire.Hello) error {
	deadline := time.Now().Add(10 * time.Second)
	_, keys, err := hs.Dial(c, h, hs.TokenKey([]byte(token)), deadline)
	if err == nil {
		err = hs.WaitWelcome(c, keys, deadline)
	}
	if err == nil && !keys.Plaintext {
		err = errors.New("the listener did not agree to plaintext (Config.Plaintext)")
	}
	return err
}

// helloUnderKey sends h's HELLO with its Noise message under the
// pre-shared key psk and returns the code of the acceptor's REJECT: an
// acceptor must answer a HELLO under a key it does not share with a REJECT
// and nothing else (no CHALLENGE that one could test guesses against).
func helloUnderKey(c net.Conn, h wire.Hello, psk [32]byte) (uint16, error) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	prefix := wire.AppendHelloPrefix(nil, h)
	st, err := hs.NewState(true, prefix, psk, nil)
	if err != nil {
		return 0, err
	}
	msg1, _, _, err := st.WriteMessage(nil, wire.AppendHelloParams(nil, h))
	if err != nil {
		return 0, err
	}
	if _, err := c.Write(wire.AppendHello(nil, h, msg1)); err != nil {
		return 0, err
	}
	fh, body, err := readHsFrame(c)
	if err != nil {
		return 0, fmt.Errorf("no REJECT after a HELLO under the wrong key: %w", err)
	}
	if fh.Type != wire.TypeReject {
		return 0, fmt.Errorf("HELLO under the wrong key answered with frame type %#x, want REJECT", fh.Type)
	}
	rj, err := wire.ParseReject(body)
	return rj.Code, err
}

// waitClosed drains c until the peer closes it (EOF or a reset: the peer
// closed with our bytes unread) and fails unless that happens by deadline.
func waitClosed(c net.Conn, deadline time.Time) error {
	_ = c.SetReadDeadline(deadline)
	var buf [4096]byte
	for {
		_, err := c.Read(buf[:])
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			return nil
		}
		return fmt.Errorf("connection not closed by the peer: %w", err)
	}
}

// dataHeader encodes the DATA header of a segment of a message on the
// session of h.
func dataHeader(h wire.Hello, msg, total, offset uint64, n int) []byte {
	b := make([]byte, wire.DataHeaderSize)
	wire.PutData(b, wire.Data{Session: sessionID(h.Session), Message: msg, Total: total, Offset: offset, Len: uint32(n)})
	return b
}

// smallFrame is a whole SMALL frame: message id, tag, payload p and, when
// a is not nil, the ACK a inside.
func smallFrame(flags uint8, id uint64, tag uint32, p []byte, a *wire.Ack) []byte {
	h := make([]byte, wire.SmallHeaderSize)
	wire.PutSmall(h, flags, id, tag, len(p))
	if a == nil {
		return append(h, p...)
	}
	b := wire.AppendSmallAck(nil, h, *a)
	return append(append(b, h[wire.HeaderSize:]...), p...)
}

// trickle writes p to c one byte every interval, starting at once, until p
// is written, a write fails or stop is closed.
func trickle(c net.Conn, p []byte, every time.Duration, stop <-chan struct{}) {
	tk := time.NewTicker(every)
	defer tk.Stop()
	for i := range p {
		if _, err := c.Write(p[i : i+1]); err != nil {
			return
		}
		select {
		case <-tk.C:
		case <-stop:
			return
		}
	}
}

// trickled runs trickle in the background; the returned function stops it
// and waits for it.
func trickled(c net.Conn, p []byte, every time.Duration) (stop func()) {
	ch := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); trickle(c, p, every, ch) }()
	return func() { close(ch); <-done }
}

// ensureFDs makes sure the process may open need file descriptors, raising
// RLIMIT_NOFILE if needed (restored when the test ends), or skips the test.
func ensureFDs(t *testing.T, need uint64) {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skipf("cannot read RLIMIT_NOFILE: %v", err)
	}
	if rl.Cur >= need {
		return
	}
	raised := rl
	raised.Cur = need
	raised.Max = max(rl.Max, need)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
		t.Skipf("needs %d file descriptors; RLIMIT_NOFILE is %d (hard %d) and cannot be raised: %v", need, rl.Cur, rl.Max, err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl) })
}

// attackerIP is a loopback address other than 127.0.0.1 for the flood, so
// that the legitimate peers (127.0.0.1) are a different source; nil (any
// address) if it cannot be bound.
func attackerIP(t *testing.T, addr string) net.IP {
	t.Helper()
	ip := net.IPv4(127, 0, 0, 2)
	c, err := dialFrom(addr, ip)
	if err != nil {
		t.Logf("cannot bind %v (%v); the flood comes from the legitimate address", ip, err)
		return nil
	}
	c.Close()
	return ip
}

// halfOpenFlood opens n connections to addr from local that never finish a
// handshake: even ones send nothing, odd ones half a HELLO.
func halfOpenFlood(addr string, local net.IP, n int) ([]net.Conn, error) {
	half := helloFrame(hostileHello(0xff))
	half = half[:wire.HeaderSize+wire.HelloSize/2]
	conns := make([]net.Conn, n)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	const workers = 8
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				c, err := dialFrom(addr, local)
				if err == nil && i%2 == 1 {
					_, err = c.Write(half)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("half-open connection %d: %w", i, err))
					mu.Unlock()
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		closeAll(conns)
		return nil, errors.Join(errs...)
	}
	return conns, nil
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}

// floodCutOff checks that the listener closed every connection of a flood
// by deadline and logged why: each attacker's address appears in a log line
// saying there were too many handshakes, or that its handshake failed on
// the handshake timeout.
func floodCutOff(conns []net.Conn, deadline time.Time, sink *logSink) (string, error) {
	var notClosed []error
	for i, c := range conns {
		if err := waitClosed(c, deadline); err != nil {
			notClosed = append(notClosed, fmt.Errorf("connection %d (%v): %w", i, c.LocalAddr(), err))
		}
	}
	if len(notClosed) > 0 {
		return "", fmt.Errorf("%d of %d half-open connections not closed by the listener in time; first: %w", len(notClosed), len(conns), notClosed[0])
	}
	// The listener logs before it closes, but a child's log comes through
	// a pipe: wait until every attacker has its line. Lines are parsed
	// once, as they come.
	reasons := make(map[string]string)
	parsed := 0
	timer := time.NewTimer(cutMargin)
	defer timer.Stop()
	for missing := conns; ; {
		text, changed := sink.snapshot()
		if end := strings.LastIndexByte(text, '\n'); end >= parsed {
			for k, v := range reasonsByPeer(text[parsed : end+1]) {
				reasons[k] += v
			}
			parsed = end + 1
		}
		for len(missing) > 0 && reasons[missing[0].LocalAddr().String()] != "" {
			missing = missing[1:]
		}
		if len(missing) == 0 {
			break
		}
		select {
		case <-changed:
		case <-timer.C:
			return "", fmt.Errorf("half-open connection %v closed without a logged reason", missing[0].LocalAddr())
		}
	}
	busy, timedOut := 0, 0
	for i, c := range conns {
		r := reasons[c.LocalAddr().String()]
		switch {
		case strings.Contains(r, "too many handshakes"):
			busy++
		case strings.Contains(r, "handshake failed") && strings.Contains(r, "i/o timeout"):
			timedOut++
		default:
			return "", fmt.Errorf("half-open connection %d (%v) closed with an unexpected logged reason: %q", i, c.LocalAddr(), r)
		}
	}
	return fmt.Sprintf("%d half-open connections closed: %d refused as too many handshakes, %d cut off by the handshake timeout", len(conns), busy, timedOut), nil
}

// runAll runs the functions concurrently and reports every error.
func runAll(t *testing.T, fns map[string]func() error) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
	)
	for name, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("%s: %v", name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
}

// ---------------------------------------------------------------------------
// The tests.

// TestHostileLoggedReasons: every misbehaving peer is cut off, the listener
// logs why (naming the peer's address or the session), and a legitimate
// session transferring all along completes with correct data.
func TestHostileLoggedReasons(t *testing.T) {
	const tok = "tok"
	cfg := Config{Token: tok, HandshakeTimeout: 2 * time.Second, MaxMessageSize: 1 << 20, MaxReceiveBuffer: 4 << 20}
	ln, sink := hostileListener(t, cfg)
	a, b := legitOverEmu(t, ln, cfg, 200e6, 100e6)
	legit := startLegit(t, a, b, false, 2, 256<<10)
	legit.progress(t, 4)
	addr := ln.Addr().String()

	// handshakeAttack runs attack on a fresh connection and expects the
	// listener to close it and log "handshake failed" for its address with
	// reason.
	handshakeAttack := func(t *testing.T, reason string, attack func(c net.Conn) error) {
		t.Helper()
		c, err := dialFrom(addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := attack(c); err != nil {
			t.Fatal(err)
		}
		if err := waitClosed(c, time.Now().Add(cfg.HandshakeTimeout+cutMargin)); err != nil {
			t.Fatal(err)
		}
		line, err := sink.waitLine(cutMargin, "handshake failed", peerAttr(c), reason)
		if err != nil {
			t.Fatalf("%v; log:\n%s", err, sink.tail())
		}
		t.Logf("logged: %s", line)
	}
	authAttack := func(token []byte) func(c net.Conn) error {
		return func(c net.Conn) error {
			code, err := helloUnderKey(c, hostileHello(1), hs.TokenKey(token))
			if err == nil && code != wire.RejectAuth {
				err = fmt.Errorf("REJECT code %d, want %d (RejectAuth)", code, wire.RejectAuth)
			}
			return err
		}
	}
	t.Run("no token", func(t *testing.T) {
		handshakeAttack(t, "authentication failed", authAttack(nil))
	})
	t.Run("wrong token", func(t *testing.T) {
		handshakeAttack(t, "authentication failed", authAttack([]byte("wrong")))
	})
	t.Run("garbage before the handshake", func(t *testing.T) {
		handshakeAttack(t, "malformed frame", func(c net.Conn) error {
			_, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
			return err
		})
	})
	t.Run("other protocol version", func(t *testing.T) {
		handshakeAttack(t, "unsupported protocol version", func(c net.Conn) error {
			h := hostileHello(2)
			h.Version = wire.Version + 1
			_, err := c.Write(helloFrame(h))
			return err
		})
	})

	// sessionAttack completes a handshake, runs attack on the rail and
	// expects the acceptor to close the connection as a protocol violation
	// and log it with reason for the session.
	sessionAttack := func(t *testing.T, id byte, reason string, attack func(raw net.Conn, h wire.Hello)) {
		t.Helper()
		h := hostileHello(id)
		raw, srv := rawSessionOn(t, ln, tok, h)
		attack(raw, h)
		if err := waitClosed(raw, time.Now().Add(cutMargin)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), cutMargin)
		defer cancel()
		if _, err := srv.Recv(ctx); !errors.Is(err, ErrProtocol) {
			t.Fatalf("Recv on the attacked connection: %v, want ErrProtocol", err)
		}
		line, err := sink.waitLine(cutMargin, "peer violated the protocol", logSession(h), reason)
		if err != nil {
			t.Fatalf("%v; log:\n%s", err, sink.tail())
		}
		t.Logf("logged: %s", line)
	}
	t.Run("garbage after the handshake", func(t *testing.T) {
		sessionAttack(t, 3, "malformed frame", func(raw net.Conn, _ wire.Hello) {
			raw.Write(bytes.Repeat([]byte{0xff}, 64))
		})
	})
	t.Run("1 TiB message", func(t *testing.T) {
		sessionAttack(t, 4, "exceeds the limit", func(raw net.Conn, h wire.Hello) {
			seg := int(h.SegmentSize) // a well-formed first segment
			raw.Write(append(dataHeader(h, 1, 1<<40, 0, seg), make([]byte, seg)...))
		})
	})
	t.Run("messages announced at the largest size", func(t *testing.T) {
		// Window 4 MiB, largest message 1 MiB: the fourth announcement
		// exceeds the credit granted.
		sessionAttack(t, 5, "credit", func(raw net.Conn, h wire.Hello) {
			seg := int(h.SegmentSize)
			for id := uint64(1); id <= 8; id++ {
				if _, err := raw.Write(append(dataHeader(h, id, 1<<20, 0, seg), make([]byte, seg)...)); err != nil {
					return
				}
			}
		})
	})
	t.Run("SMALL with a CRC flag", func(t *testing.T) {
		sessionAttack(t, 6, "unknown small flags", func(raw net.Conn, _ wire.Hello) {
			b := smallFrame(0, 1, 0, []byte("x"), nil)
			b[1] = wire.FlagCRC
			raw.Write(b)
		})
	})
	t.Run("SMALL acknowledging frames never sent", func(t *testing.T) {
		sessionAttack(t, 7, "acknowledgement out of range", func(raw net.Conn, _ wire.Hello) {
			raw.Write(smallFrame(wire.FlagAck, 1, 0, []byte("x"), &wire.Ack{Received: 5, Credit: 1 << 20, Arrived: 1}))
		})
	})
	t.Run("SMALL larger than its bound", func(t *testing.T) {
		sessionAttack(t, 8, "small body", func(raw net.Conn, _ wire.Hello) {
			raw.Write(smallFrame(0, 1, 0, make([]byte, wire.MaxSmallPayload+1), nil))
		})
	})
	legit.progress(t, 4)
	legit.finish(t)
}

// TestSmallFrameByHand: SMALL frames written by hand, with and without an
// ACK inside, are delivered as the messages they carry, in id order per
// tag, and a resent one (same id) is dropped as a duplicate.
func TestSmallFrameByHand(t *testing.T) {
	const tok = "tok"
	cfg := Config{Token: tok, MaxMessageSize: 1 << 20, MaxReceiveBuffer: 4 << 20}
	ln, _ := hostileListener(t, cfg)
	h := hostileHello(9)
	raw, srv := rawSessionOn(t, ln, tok, h)
	frame := func(flags uint8, id uint64, p []byte, a *wire.Ack) []byte { return smallFrame(flags, id, 3, p, a) }
	var stream []byte
	stream = append(stream, frame(wire.FlagEager, 1, []byte("one"), nil)...)
	stream = append(stream, frame(0, 2, nil, &wire.Ack{Received: 0, Credit: 1 << 20})...) // an empty message; an ACK that acknowledges nothing
	stream = append(stream, frame(wire.FlagEager, 2, nil, nil)...)                        // message 2 again: a duplicate
	stream = append(stream, frame(0, 3, bytes.Repeat([]byte{7}, wire.MaxSmallPayload), nil)...)
	stream = append(stream, frame(wire.FlagEager, 4, []byte("end"), nil)...)
	if _, err := raw.Write(stream); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A delivered duplicate would come before "end".
	for _, want := range [][]byte{[]byte("one"), {}, bytes.Repeat([]byte{7}, wire.MaxSmallPayload), []byte("end")} {
		m, err := srv.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Tag != 3 || !bytes.Equal(m.Data, want) {
			t.Fatalf("Recv = tag %d, %d bytes %.8q; want tag 3, %d bytes %.8q", m.Tag, len(m.Data), m.Data, len(want), want)
		}
	}
}

// TestHostileTrickle: a peer sending one byte per second is cut off by the
// handshake timeout during the handshake, and by the idle timeout in the
// middle of a frame after a completed handshake; a legitimate session
// transferring meanwhile completes with correct data.
func TestHostileTrickle(t *testing.T) {
	const tok = "tok"
	cfg := Config{Token: tok, HandshakeTimeout: 1500 * time.Millisecond, IdleTimeout: 2 * time.Second, MaxMessageSize: 1 << 20, SessionGrace: -1}
	ln, sink := hostileListener(t, cfg)
	a, b := legitOverEmu(t, ln, cfg, 200e6, 100e6)
	legit := startLegit(t, a, b, false, 2, 256<<10)
	legit.progress(t, 4)

	h := hostileHello(6)
	raw, srv := rawSessionOn(t, ln, tok, h)
	runAll(t, map[string]func() error{
		"during the handshake": func() error {
			c, err := dialFrom(ln.Addr().String(), nil)
			if err != nil {
				return err
			}
			defer c.Close()
			stop := trickled(c, helloFrame(hostileHello(7)), time.Second)
			defer stop()
			if err := waitClosed(c, time.Now().Add(cfg.HandshakeTimeout+cutMargin)); err != nil {
				return err
			}
			line, err := sink.waitLine(cutMargin, "handshake failed", peerAttr(c), "i/o timeout")
			if err != nil {
				return fmt.Errorf("%v; log:\n%s", err, sink.tail())
			}
			t.Logf("logged: %s", line)
			return nil
		},
		"in the middle of a frame": func() error {
			// The DATA header goes at once, the payload one byte per
			// second: the frame has begun and never ends.
			payload := bytes.Repeat([]byte{'x'}, 1000)
			if _, err := raw.Write(dataHeader(h, 1, uint64(len(payload)), 0, len(payload))); err != nil {
				return err
			}
			stop := trickled(raw, payload, time.Second)
			defer stop()
			if err := waitClosed(raw, time.Now().Add(cfg.IdleTimeout+cutMargin)); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), cutMargin)
			defer cancel()
			if _, err := srv.Recv(ctx); !errors.Is(err, ErrAllRailsDown) {
				return fmt.Errorf("Recv on the trickled connection: %v, want ErrAllRailsDown", err)
			}
			line, err := sink.waitLine(cutMargin, "rail down", logSession(h), "i/o timeout")
			if err != nil {
				return fmt.Errorf("%v; log:\n%s", err, sink.tail())
			}
			t.Logf("logged: %s", line)
			return nil
		},
	})
	legit.progress(t, 4)
	legit.finish(t)
}

// TestHostileHalfOpenFlood: 1000 connections that never finish a handshake
// (half silent, half stopping in the middle of a HELLO) are all closed by
// the listener within the handshake timeout, each with a logged reason,
// while a legitimate session completes with correct data.
func TestHostileHalfOpenFlood(t *testing.T) {
	ensureFDs(t, 2*floodConns+512)
	cfg := Config{Token: "tok", HandshakeTimeout: 2 * time.Second, MaxMessageSize: 1 << 20}
	ln, sink := hostileListener(t, cfg)
	a, b := legitOverEmu(t, ln, cfg, 200e6, 100e6)
	legit := startLegit(t, a, b, false, 2, 256<<10)
	legit.progress(t, 4)

	start := time.Now()
	conns, err := halfOpenFlood(ln.Addr().String(), attackerIP(t, ln.Addr().String()), floodConns)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(conns)
	t.Logf("%d half-open connections opened in %v", len(conns), time.Since(start).Round(time.Millisecond))
	legit.progress(t, 2) // during the flood
	// Every connection was accepted after start, so its handshake timer
	// ran out by start + HandshakeTimeout.
	summary, err := floodCutOff(conns, start.Add(cfg.HandshakeTimeout+cutMargin), sink)
	if err != nil {
		t.Fatalf("%v; log:\n%s", err, sink.tail())
	}
	t.Log(summary)
	legit.progress(t, 4)
	legit.finish(t)
}

// TestHostileHalfOpenFloodNewSession: while 1000 half-open connections from
// one address (127.0.0.2) hold the listener's handshake slots, a new
// legitimate session from another address (127.0.0.1) can still be opened
// and transfers correct data.
func TestHostileHalfOpenFloodNewSession(t *testing.T) {
	ensureFDs(t, 2*floodConns+512)
	// A long handshake timeout: the flood holds its slots for the whole
	// test, whatever the machine's speed.
	cfg := Config{Token: "tok", HandshakeTimeout: 20 * time.Second, MaxMessageSize: 1 << 20}
	ln, sink := hostileListener(t, cfg)
	ip := attackerIP(t, ln.Addr().String())
	if ip == nil {
		t.Skip("needs a second loopback address (127.0.0.2) for the attacker")
	}
	a, b := legitOverEmu(t, ln, cfg, 200e6, 100e6)
	legit := startLegit(t, a, b, false, 2, 256<<10)
	legit.progress(t, 4)

	conns, err := halfOpenFlood(ln.Addr().String(), ip, floodConns)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(conns)
	// Once the listener refuses one of them, the flood holds every slot it
	// is allowed to.
	if _, err := sink.waitLine(cutMargin, "too many handshakes"); err != nil {
		t.Fatalf("%v; log:\n%s", err, sink.tail())
	}
	dcfg := cfg
	dcfg.HandshakeTimeout = 5 * time.Second
	dcfg.Rails = []Rail{{Addr: ln.Addr().String(), Local: "127.0.0.1"}, {Addr: ln.Addr().String(), Local: "127.0.0.1"}}
	na, nb := dialAndAccept(t, ln, dcfg)
	fresh := startLegit(t, na, nb, false, 2, 256<<10)
	fresh.progress(t, 8)
	fresh.finish(t)
	legit.finish(t)
}

// poolCap is the most memory a correct library keeps for reuse, process
// wide, once every message has been released.
const poolCap = 256 << 20 // maxPooled

// poolSlack allows for unrelated heap growth while the test runs.
const poolSlack = 4 << 20

// TestHostileReleasePool: an authenticated peer cannot make a receiver
// that releases every message (Conn.Release) as soon as it has it keep
// much more memory than its window once everything is delivered. The peer
// starts as many messages of one size as the 16 MiB window allows before
// completing any (so that many receive buffers of that size class are out
// at once), then does the same with the next size class, 64 KiB to 8 MiB.
// Then nothing is held for the peer any more, and the live heap must not
// have grown by more than poolCap (buffers kept for reuse) plus slack.
func TestHostileReleasePool(t *testing.T) {
	const window = 16 << 20
	cfg := Config{Token: "tok", MaxMessageSize: 8 << 20, MaxReceiveBuffer: window}
	ln, _ := hostileListener(t, cfg)
	h := hostileHello(0x20)
	h.SegmentSize = 32 << 10
	raw, srv := rawSessionOn(t, ln, "tok", h)
	drained := make(chan struct{})
	go func() { defer close(drained); _, _ = io.Copy(io.Discard, raw) }() // ACKs and pings

	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		mu      sync.Mutex
		got     int
		changed = make(chan struct{})
		recvErr error
	)
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		for {
			m, err := srv.Recv(ctx)
			mu.Lock()
			if err != nil {
				recvErr = err
			} else {
				got++
			}
			close(changed)
			changed = make(chan struct{})
			mu.Unlock()
			if err != nil {
				return
			}
			srv.Release(m.Data)
		}
	}()
	waitGot := func(n int) {
		t.Helper()
		for {
			mu.Lock()
			g, err, ch := got, recvErr, changed
			mu.Unlock()
			if g >= n {
				return
			}
			if err != nil {
				t.Fatalf("Recv after %d of %d messages: %v", g, n, err)
			}
			<-ch // Recv's context bounds the wait
		}
	}
	seg := uint64(h.SegmentSize)
	// round sends k messages of size bytes, ids first..first+k-1: the
	// first segment of each, then the rest of each.
	round := func(first, k, size uint64) error {
		var w bytes.Buffer
		for i := range k {
			w.Write(dataHeader(h, first+i, size, 0, int(seg)))
			w.Write(make([]byte, seg))
		}
		for i := range k {
			for off := seg; off < size; off += seg {
				w.Write(dataHeader(h, first+i, size, off, int(seg)))
				w.Write(make([]byte, seg))
			}
		}
		_, err := raw.Write(w.Bytes())
		return err
	}
	id, sent := uint64(1), 0
	for size := uint64(64 << 10); size <= 8<<20; size *= 2 {
		k := uint64(window) / (size + 256) // as many as the window holds
		if err := round(id, k, size); err != nil {
			t.Fatal(err)
		}
		id += k
		sent += int(k)
		waitGot(sent) // the receiver took them all: the credit is back
	}
	// Every message is delivered and released; the connection is still
	// open, its reassembler empty.
	runtime.GC()
	runtime.ReadMemStats(&ms)
	kept := int64(ms.HeapAlloc) - int64(before)
	srv.Close()
	raw.Close()
	<-recvDone
	<-drained
	t.Logf("%d messages of 64 KiB..8 MiB received and released; live heap grew by %d KiB (bound %d KiB + %d KiB slack)", sent, kept>>10, poolCap>>10, poolSlack>>10)
	if kept > poolCap+poolSlack {
		t.Fatalf("the receiver keeps %d KiB once every message is released, more than %d KiB + %d KiB", kept>>10, poolCap>>10, poolSlack>>10)
	}
}

// ---------------------------------------------------------------------------
// Memory bound, measured on a receiver in a child process.

const (
	helperEnv     = "MULTIRAIL_HOSTILE_HELPER"
	rssToken      = "rss-token"
	rssMaxMessage = 8 << 20
	rssMaxBuffer  = 16 << 20
	rssTimeout    = 2 * time.Second // handshake and idle timeouts of the receiver
	rssLegitMax   = 1 << 20         // largest legitimate message
)

func rssServerConfig(logger *slog.Logger) Config {
	return Config{Token: rssToken, MaxMessageSize: rssMaxMessage, MaxReceiveBuffer: rssMaxBuffer,
		HandshakeTimeout: rssTimeout, IdleTimeout: rssTimeout, Logger: logger, Plaintext: true}
}

// TestHelperHostileServer is the receiver of TestHostileMemoryBound, run in
// a child process (it skips otherwise). It prints "addr HOST:PORT" and
// "ready" on stdout, answers every message with its SHA-256 on the same
// tag, logs to stderr and exits cleanly when stdin is closed.
func TestHelperHostileServer(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process of TestHostileMemoryBound")
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ln, err := Listen("127.0.0.1:0", rssServerConfig(logger))
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = make(map[*Conn]bool)
	)
	serve := func(c *Conn) {
		defer wg.Done()
		defer c.Close()
		for {
			m, err := c.Recv(context.Background())
			if err != nil {
				logger.Info("helper: connection ended", "err", err)
				return
			}
			sum := sha256.Sum256(m.Data)
			c.Release(m.Data)
			if err := c.Send(context.Background(), m.Tag, sum[:]); err != nil {
				return
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go serve(c)
		}
	}()
	runtime.GC()
	fmt.Printf("addr %s\nready\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes stdin
	ln.Close()
	mu.Lock()
	for c := range conns {
		c.Close()
	}
	mu.Unlock()
	wg.Wait()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("memstats Sys=%d KiB HeapSys=%d KiB StackSys=%d KiB HeapReleased=%d KiB NumGC=%d\n",
		ms.Sys>>10, ms.HeapSys>>10, ms.StackSys>>10, ms.HeapReleased>>10, ms.NumGC)
}

// helperProc is the running child of TestHostileMemoryBound.
type helperProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	logs   *logSink
	waited bool
	err    error
}

func startHelper(t *testing.T) *helperProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("cannot re-execute the test binary: %v", err)
	}
	p := &helperProc{logs: newLogSink(), lines: make(chan string, 256)}
	p.cmd = exec.Command(exe, "-test.run=^TestHelperHostileServer$", "-test.count=1", "-test.v=false")
	p.cmd.Env = append(os.Environ(), helperEnv+"=1")
	p.cmd.Stderr = p.logs
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() { p.stop() })
	return p
}

// expect waits for a line of the child's stdout that starts with prefix and
// returns the rest of it.
func (p *helperProc) expect(t *testing.T, prefix string) string {
	t.Helper()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("helper exited before printing %q; its log:\n%s", prefix, p.logs.tail())
			}
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				return rest
			}
		case <-timer.C:
			t.Fatalf("helper did not print %q in 30s; its log:\n%s", prefix, p.logs.tail())
		}
	}
}

// stop closes the child's stdin and waits for it to exit (killing it after
// 30 s), returning how it exited.
func (p *helperProc) stop() error {
	if p.waited {
		return p.err
	}
	p.waited = true
	p.stdin.Close()
	kill := time.AfterFunc(30*time.Second, func() { _ = p.cmd.Process.Kill() })
	defer kill.Stop()
	for range p.lines { // drain stdout before Wait
	}
	p.err = p.cmd.Wait()
	return p.err
}

// startMeasuredHelper starts the receiver in a child process and returns
// it, its address and its RSS (KiB) once it is ready.
func startMeasuredHelper(t *testing.T) (*helperProc, string, int64) {
	t.Helper()
	child := startHelper(t)
	addr := child.expect(t, "addr ")
	child.expect(t, "ready")
	rss, err := procStatusKB(child.cmd.Process.Pid, "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	return child, addr, rss
}

// procStatusKB reads a "Vm...:  N kB" field of /proc/<pid>/status.
func procStatusKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// raceEnabled reports whether this binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// TestHostileMemoryBound runs a receiver (MaxMessageSize 8 MiB,
// MaxReceiveBuffer 16 MiB) in a child process and hits it with every
// attack at once while a legitimate sender transfers messages of up to
// 1 MiB: 1000 half-open handshakes, a 1 TiB message header, messages
// announced at the largest size until the window is exceeded (after
// filling it), peers trickling one byte per second in the handshake and in
// a frame, a wrong token and garbage after the handshake. Each attacker is
// cut off with a logged reason, the legitimate data arrives intact, and the
// child's peak RSS (VmHWM) stays within its baseline plus the configured
// receive buffers plus a per-connection allowance.
func TestHostileMemoryBound(t *testing.T) {
	ensureFDs(t, 2*floodConns+512)
	child, addr, baseline := startMeasuredHelper(t)
	pid := child.cmd.Process.Pid
	sink := child.logs

	// The legitimate session: two rails from 127.0.0.1.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	legitConn, err := Dial(ctx, Config{Token: rssToken, MaxMessageSize: rssMaxMessage, IdleTimeout: rssTimeout,
		Rails: []Rail{{Addr: addr, Local: "127.0.0.1"}, {Addr: addr, Local: "127.0.0.1"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer legitConn.Close()
	legit := startLegit(t, legitConn, legitConn, true, 2, rssLegitMax)
	legit.progress(t, 2)

	// Everything that needs a handshake slot gets it before the flood
	// takes them; then all attacks act at once.
	handshaken := func(id byte) (net.Conn, wire.Hello) {
		t.Helper()
		h := hostileHello(id)
		h.SegmentSize = 1 << 20
		c, err := rawHandshake(addr, rssToken, h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, h
	}
	tib, tibHello := handshaken(0x10)
	fill, fillHello := handshaken(0x11)
	slow, slowHello := handshaken(0x12)
	junk, junkHello := handshaken(0x13)
	wrong, err := dialFrom(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	wrongHello := hostileHello(0x14)
	creep, err := dialFrom(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer creep.Close()
	stopCreep := trickled(creep, helloFrame(hostileHello(0x15)), time.Second)
	defer stopCreep()
	floodIP := attackerIP(t, addr)

	protocolCut := func(c net.Conn, h wire.Hello, reason string) error {
		if err := waitClosed(c, time.Now().Add(cutMargin)); err != nil {
			return err
		}
		_, err := sink.waitLine(cutMargin, "peer violated the protocol", logSession(h), reason)
		return err
	}
	start := time.Now()
	attacks := map[string]func() error{
		"1000 half-open handshakes": func() error {
			conns, err := halfOpenFlood(addr, floodIP, floodConns)
			if err != nil {
				return err
			}
			defer closeAll(conns)
			summary, err := floodCutOff(conns, start.Add(rssTimeout+cutMargin), sink)
			if err == nil {
				t.Log(summary)
			}
			return err
		},
		"1 TiB message header": func() error {
			seg := int(tibHello.SegmentSize) // a well-formed first segment
			tib.Write(append(dataHeader(tibHello, 1, 1<<40, 0, seg), make([]byte, seg)...))
			return protocolCut(tib, tibHello, "exceeds the limit")
		},
		"messages announced at the largest size": func() error {
			// Fill the whole window with two messages that never
			// complete (every segment but the last), then announce more
			// at the largest size: the third exceeds the credit.
			seg := int(fillHello.SegmentSize)
			sizes := []uint64{rssMaxMessage, reasm.Largest(rssMaxBuffer - reasm.Cost(rssMaxMessage)), rssMaxMessage, rssMaxMessage}
			var w bytes.Buffer
			for i, total := range sizes {
				id := uint64(i + 1)
				w.Reset()
				for off := uint64(0); off+uint64(seg) < total; off += uint64(seg) {
					w.Write(dataHeader(fillHello, id, total, off, seg))
					w.Write(bytes.Repeat([]byte{byte(id)}, seg))
					if i >= 2 {
						break // beyond the window: one segment suffices
					}
				}
				if _, err := fill.Write(w.Bytes()); err != nil {
					break // cut off
				}
			}
			return protocolCut(fill, fillHello, "credit")
		},
		"garbage after the handshake": func() error {
			junk.Write(bytes.Repeat([]byte{0xff}, 64))
			return protocolCut(junk, junkHello, "malformed frame")
		},
		"trickle in a frame": func() error {
			if _, err := slow.Write(dataHeader(slowHello, 1, 1000, 0, 1000)); err != nil {
				return err
			}
			stop := trickled(slow, bytes.Repeat([]byte{'x'}, 1000), time.Second)
			defer stop()
			if err := waitClosed(slow, time.Now().Add(rssTimeout+cutMargin)); err != nil {
				return err
			}
			_, err := sink.waitLine(cutMargin, "rail down", logSession(slowHello), "i/o timeout")
			return err
		},
		"trickle in the handshake": func() error {
			if err := waitClosed(creep, time.Now().Add(rssTimeout+cutMargin)); err != nil {
				return err
			}
			_, err := sink.waitLine(cutMargin, "handshake failed", peerAttr(creep), "i/o timeout")
			return err
		},
		"wrong token": func() error {
			code, err := helloUnderKey(wrong, wrongHello, hs.TokenKey([]byte("wrong")))
			if err != nil {
				return err
			}
			if code != wire.RejectAuth {
				return fmt.Errorf("REJECT code %d, want %d", code, wire.RejectAuth)
			}
			if err := waitClosed(wrong, time.Now().Add(cutMargin)); err != nil {
				return err
			}
			_, err = sink.waitLine(cutMargin, "handshake failed", peerAttr(wrong), "authentication failed")
			return err
		},
	}
	runAll(t, attacks)
	if t.Failed() {
		t.Fatalf("receiver log of the attackers' sessions:\n%s\nreceiver log:\n%s", sink.grep("session=bad"), sink.tail())
	}
	legit.progress(t, 2)
	legit.finish(t)

	peak, err := procStatusKB(pid, "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	now, err := procStatusKB(pid, "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	legitConn.Close()
	child.stdin.Close()
	if ms := child.expect(t, "memstats "); ms != "" {
		t.Logf("receiver's Go runtime at exit: %s", ms)
	}
	if err := child.stop(); err != nil {
		t.Fatalf("helper exited with %v; its log:\n%s", err, sink.tail())
	}

	// The bound. The library bounds what it holds per connection to
	// MaxReceiveBuffer. Here one connection can fill it (the attacker
	// announcing messages at the largest size; the other attackers are cut
	// off before they hold anything), and the legitimate one holds at most
	// two messages per tag (one being reassembled, one being hashed and
	// released): 4 x 1 MiB. Go's heap may grow to (1+GOGC/100) = 2 times
	// the live data before it collects, which also covers the buffers the
	// receiver released for reuse. Each connection costs some more
	// (goroutine stack, poller state, handshake buffers; read-ahead and
	// write buffers for an authenticated rail): 64 KiB for each of the at
	// most MaxHandshakes handshakes in progress, 512 KiB for each of the 7
	// authenticated rails. Under the race detector, ThreadSanitizer keeps
	// 2 bytes of shadow for every byte of application memory it tracks, so
	// the allowance triples.
	const kib = 1 << 10
	data := int64(2 * (rssMaxBuffer + 4*rssLegitMax) / kib)
	conns := int64((DefaultMaxHandshakes*64*kib + 7*512*kib) / kib)
	factor, why := int64(1), ""
	if raceEnabled() {
		factor, why = 3, " (x3: race detector shadow)"
	}
	bound := baseline + factor*(data+conns)
	t.Logf("receiver RSS: baseline %d KiB, peak (VmHWM) %d KiB, at the end %d KiB; bound %d KiB = baseline + (%d KiB data + %d KiB connections)%s",
		baseline, peak, now, bound, data, conns, why)
	if peak > bound {
		t.Fatalf("receiver peak RSS %d KiB exceeds the bound %d KiB", peak, bound)
	}
}

// TestHostileTinyMessages: an authenticated peer fills its whole credit
// window with 1-byte messages that can never be delivered (message 1 never
// comes, so nothing is handed to Recv and no credit comes back). The
// receiver (in a child process) must hold no more than the window
// promises: each message costs reasm.Cost(1) = 257 bytes of credit, and
// receive buffers once had a 4 KiB floor (16 times that; the security
// review's F2).
func TestHostileTinyMessages(t *testing.T) {
	child, addr, baseline := startMeasuredHelper(t)
	pid := child.cmd.Process.Pid
	h := hostileHello(0x20)
	c, err := rawHandshake(addr, rssToken, h)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := uint64(rssMaxBuffer / reasm.Cost(1)) // what the credit allows
	go func() {
		var w bytes.Buffer
		for id := uint64(2); id < n+2; id++ {
			w.Write(dataHeader(h, id, 1, 0, 1))
			w.WriteByte(byte(id))
			if w.Len() >= 256<<10 || id == n+1 {
				if _, err := c.Write(w.Bytes()); err != nil {
					return
				}
				w.Reset()
			}
		}
	}()
	// The receiver holds them all once it has acknowledged them all.
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	var received uint64
	for received < n {
		var hb [wire.HeaderSize]byte
		if _, err := io.ReadFull(c, hb[:]); err != nil {
			t.Fatalf("after %d of %d messages acknowledged: %v; receiver log:\n%s", received, n, err, child.logs.tail())
		}
		fh, err := wire.ParseHeader(hb[:], wire.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		body := make([]byte, fh.Len)
		if _, err := io.ReadFull(c, body); err != nil {
			t.Fatal(err)
		}
		if fh.Type == wire.TypeAck {
			a, err := wire.ParseAck(body)
			if err != nil {
				t.Fatal(err)
			}
			received = a.Received
		}
	}
	peak, err := procStatusKB(pid, "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	child.stdin.Close()
	if err := child.stop(); err != nil {
		t.Fatalf("helper exited with %v; its log:\n%s", err, child.logs.tail())
	}
	// The bound: the window (MaxReceiveBuffer), twice for Go's heap growth
	// before a collection (GOGC=100), plus 1 MiB for the rail (read-ahead,
	// write buffers, goroutines); three times that under the race
	// detector's shadow memory.
	const kib = 1 << 10
	factor := int64(1)
	if raceEnabled() {
		factor = 3
	}
	bound := baseline + factor*(2*rssMaxBuffer+(1<<20))/kib
	t.Logf("%d messages of 1 byte held; receiver RSS: baseline %d KiB, peak %d KiB, bound %d KiB", n, baseline, peak, bound)
	if peak > bound {
		t.Fatalf("receiver peak RSS %d KiB exceeds the bound %d KiB for %d held 1-byte messages", peak, bound, n)
	}
}

// TestHostileDuplicatesReadThroughSmallBuffer: a peer resending a large
// segment that was delivered already makes the receiver read it through a
// small fixed buffer (discardChunk), not allocate a buffer of the
// segment's size per rail (the security review's F3), and the message is
// delivered once.
func TestHostileDuplicatesReadThroughSmallBuffer(t *testing.T) {
	const seg = 1 << 20
	ln, _ := hostileListener(t, Config{Token: "tok", MaxMessageSize: 8 << 20})
	h := hostileHello(0x21)
	h.SegmentSize = seg
	h.MaxMessage = 8 << 20
	raw, c := rawSessionOn(t, ln, "tok", h)
	payload := bytes.Repeat([]byte{0x5a}, seg)
	var w bytes.Buffer
	for i := 0; i < 20; i++ { // the original, then 19 duplicates
		w.Write(dataHeader(h, 1, seg, 0, seg))
		w.Write(payload)
	}
	w.Write(dataHeader(h, 2, 1, 0, 1)) // then a 1-byte message
	w.WriteByte(7)
	go raw.Write(w.Bytes())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, want := range [][]byte{payload, {7}} {
		m, err := c.Recv(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", i+1, err)
		}
		if !bytes.Equal(m.Data, want) {
			t.Fatalf("message %d: %d bytes, want %d", i+1, len(m.Data), len(want))
		}
		c.Release(m.Data)
	}
	r := c.rails[0]
	r.rdMu.Lock()
	scratch, discard := cap(r.rs.scratch), cap(r.rs.discard)
	r.rdMu.Unlock()
	if scratch != 0 || discard != discardChunk {
		t.Fatalf("after 19 duplicates of a %d-byte segment: scratch %d bytes, discard buffer %d bytes; want 0 and %d", seg, scratch, discard, discardChunk)
	}
}

// TestHostileSessionIDInUse: a token holder announcing a new session with
// the id of an open one (ids travel in the clear) is refused; the open
// session keeps its place at the listener (its rails could still rejoin)
// and carries on.
func TestHostileSessionIDInUse(t *testing.T) {
	ln, sink := hostileListener(t, Config{Token: "tok"})
	addr := ln.Addr().String()
	a, b := dialAndAccept(t, ln, Config{Token: "tok", Rails: []Rail{{Addr: addr}, {Addr: addr}}})
	h := hostileHello(0x22)
	h.Session = b.session
	if c, err := rawHandshake(addr, "tok", h); err == nil {
		c.Close()
		t.Fatal("a new session with an open session's id was accepted")
	}
	if _, err := sink.waitLine(cutMargin, "new session with the id of an open one"); err != nil {
		t.Fatal(err)
	}
	ln.mu.Lock()
	still := ln.live[b.session] == b
	ln.mu.Unlock()
	if !still {
		t.Fatal("the listener no longer maps the open session's id to it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range [][2]*Conn{{a, b}, {b, a}} {
		if err := p[0].Send(ctx, 3, []byte("still here")); err != nil {
			t.Fatal(err)
		}
		m, err := p[1].Recv(ctx)
		if err != nil || string(m.Data) != "still here" {
			t.Fatalf("after the attempt: %q, %v", m.Data, err)
		}
	}
}

// TestHostileSessionLimits: a listener holds at most MaxSessions
// sessions, and only as many as whose receive windows fit
// MaxListenerBuffer together; one more is refused (REJECT busy) with a
// message naming the limit, and logged; open sessions keep working, and a
// session that closes makes room.
func TestHostileSessionLimits(t *testing.T) {
	const window = 2 << 20
	for _, c := range []struct {
		name       string
		cfg        Config
		limit, log string
	}{
		{"MaxSessions", Config{Token: "tok", MaxSessions: 2}, "MaxSessions", "session limit reached"},
		{"MaxListenerBuffer", Config{Token: "tok", MaxMessageSize: 1 << 20, MaxReceiveBuffer: window, MaxListenerBuffer: 2*window + window/2},
			"MaxListenerBuffer", "memory budget reached"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ln, sink := hostileListener(t, c.cfg)
			addr := ln.Addr().String()
			cfg := Config{Token: "tok", Rails: []Rail{{Addr: addr}, {Addr: addr}}}
			a1, b1 := dialAndAccept(t, ln, cfg)
			a2, b2 := dialAndAccept(t, ln, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := Dial(ctx, cfg)
			var rj *hs.RejectedError
			if !errors.As(err, &rj) || rj.Code != wire.RejectBusy || !strings.Contains(rj.Reason, c.limit) {
				t.Fatalf("third session: %v; want REJECT busy naming %s", err, c.limit)
			}
			if _, err := sink.waitLine(cutMargin, c.log); err != nil {
				t.Fatal(err)
			}
			transfer(t, a2, b2, 4, 1, 64<<10, nil) // an open session after the refusal
			a1.Close()
			b1.Close()
			a3, b3 := dialAndAccept(t, ln, cfg)
			transfer(t, a3, b3, 4, 1, 64<<10, nil) // a session after one closed
		})
	}
}
