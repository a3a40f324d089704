package emu

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is a test target: it accepts connections and runs handle on each
// in its own goroutine. Close waits for all of them.
type server struct {
	ln net.Listener
	wg sync.WaitGroup
}

func newServer(t *testing.T, handle func(*net.TCPConn)) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				handle(c.(*net.TCPConn))
			}()
		}
	}()
	t.Cleanup(s.Close)
	return s
}

func (s *server) Addr() string { return s.ln.Addr().String() }
func (s *server) Close()       { s.ln.Close(); s.wg.Wait() }

func newLink(t *testing.T, target string, cfg LinkConfig) *Link {
	t.Helper()
	l, err := NewLink(target, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func dial(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n+8)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
	}
	return b[:n]
}

// exchange writes out to c in odd-sized pieces and half-closes, while
// reading c to its end; it returns the checksum of what was read and the
// first error.
func exchange(c *net.TCPConn, out []byte) (sum [32]byte, n int64, err error) {
	werr := make(chan error, 1)
	go func() {
		var err error
		for rest := out; len(rest) > 0 && err == nil; {
			k := min(len(rest), 1+len(rest)%7919)
			_, err = c.Write(rest[:k])
			rest = rest[k:]
		}
		if err == nil {
			err = c.CloseWrite()
		}
		werr <- err
	}()
	h := sha256.New()
	n, err = io.Copy(h, c)
	if e := <-werr; err == nil {
		err = e
	}
	copy(sum[:], h.Sum(nil))
	return sum, n, err
}

// TestLinkDuplexIntegrity sends different data both ways at once over
// several connections through one link and checks every byte arrives, in
// order, on the other side.
func TestLinkDuplexIntegrity(t *testing.T) {
	const size = 1 << 20
	type result struct {
		id  byte
		sum [32]byte
		n   int64
		err error
	}
	results := make(chan result, 3)
	srv := newServer(t, func(c *net.TCPConn) {
		// The first byte tells which client this is and so which data to
		// send back.
		var id [1]byte
		if _, err := io.ReadFull(c, id[:]); err != nil {
			t.Error(err)
			results <- result{err: err}
			return
		}
		sum, n, err := exchange(c, randomBytes(100+uint64(id[0]), size))
		results <- result{id[0], sum, n, err}
	})
	for _, cfg := range []LinkConfig{
		{RateBps: 2e9},
		{RateBps: 1e9, Delay: time.Millisecond, Burst: 1500},
		{RateBps: 1e9, Loads: []Load{{Fraction: 0.5, At: 0}, {Fraction: 0, At: 5 * time.Millisecond}}},
	} {
		link := newLink(t, srv.Addr(), cfg)
		var wg sync.WaitGroup
		for id := byte(0); id < 3; id++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.Dial("tcp", link.Addr())
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				out := append([]byte{id}, randomBytes(uint64(id), size)...)
				sum, n, err := exchange(c.(*net.TCPConn), out)
				if err != nil {
					t.Errorf("client %d: %v", id, err)
				}
				if want := sha256.Sum256(randomBytes(100+uint64(id), size)); n != size || sum != want {
					t.Errorf("client %d received %d bytes (want %d), checksum ok: %v", id, n, size, sum == want)
				}
			}()
		}
		wg.Wait()
		// The server side of each connection finishes once it has read the
		// client's end of stream.
		for range 3 {
			r := <-results
			want := sha256.Sum256(randomBytes(uint64(r.id), size))
			if r.err != nil || r.n != size || r.sum != want {
				t.Errorf("%+v: server from client %d: %d bytes (want %d), checksum ok %v, err %v", cfg, r.id, r.n, size, r.sum == want, r.err)
			}
		}
		if err := link.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestLinkHalfClose: the client half-closes, the server sees the end of
// stream, answers and closes, and the client reads the answer and then
// the end of stream.
func TestLinkHalfClose(t *testing.T) {
	srv := newServer(t, func(c *net.TCPConn) {
		req, err := io.ReadAll(c)
		if err != nil {
			t.Error(err)
			return
		}
		c.Write([]byte("got " + string(req)))
	})
	link := newLink(t, srv.Addr(), LinkConfig{RateBps: 10e6, Delay: time.Millisecond})
	c := dial(t, link.Addr())
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resp, err := io.ReadAll(c)
	if err != nil || string(resp) != "got hello" {
		t.Fatalf("response %q, %v", resp, err)
	}
}

// TestLinkDelay: a round trip takes at least twice the one-way delay.
func TestLinkDelay(t *testing.T) {
	const delay = 20 * time.Millisecond
	srv := newServer(t, func(c *net.TCPConn) { io.Copy(c, c) })
	link := newLink(t, srv.Addr(), LinkConfig{RateBps: 100e6, Delay: delay})
	c := dial(t, link.Addr())
	buf := make([]byte, 4)
	for i := 0; i < 3; i++ {
		start := time.Now()
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		if rtt := time.Since(start); rtt < 2*delay {
			t.Errorf("round trip %v < 2 x delay %v", rtt, delay)
		}
	}
}

// TestLinkBreakAll: both endpoints of a broken connection see an error,
// and the link still accepts new connections.
func TestLinkBreakAll(t *testing.T) {
	serverErr := make(chan error, 4)
	srv := newServer(t, func(c *net.TCPConn) {
		var b [1]byte
		if _, err := io.ReadFull(c, b[:]); err != nil {
			serverErr <- err
			return
		}
		if _, err := c.Write(b[:]); err != nil {
			serverErr <- err
			return
		}
		_, err := io.Copy(io.Discard, c) // until the link breaks
		if err == nil {
			err = errors.New("clean end of stream")
		}
		serverErr <- err
	})
	link := newLink(t, srv.Addr(), LinkConfig{RateBps: 100e6})
	c := dial(t, link.Addr())
	var b [1]byte
	if _, err := c.Write([]byte{'x'}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, b[:]); err != nil { // the pair is set up
		t.Fatal(err)
	}
	link.BreakAll()
	_, err := c.Read(b[:])
	if err == nil || errors.Is(err, io.EOF) {
		t.Errorf("client: got %v, want a connection error", err)
	}
	if err := <-serverErr; err == nil || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "clean end") {
		t.Errorf("server: got %v, want a connection error", err)
	}

	// The link keeps working.
	c2 := dial(t, link.Addr())
	if _, err := c2.Write([]byte{'y'}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c2, b[:]); err != nil || b[0] != 'y' {
		t.Fatalf("after BreakAll: %q, %v", b[:], err)
	}
	c2.Close()
	<-serverErr
}

// TestLinkCloseNoLeak closes a link with traffic in flight and checks that
// both endpoints see the connection end and no goroutine is left.
func TestLinkCloseNoLeak(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv := newServer(t, func(c *net.TCPConn) { io.Copy(c, c) })
	link, err := NewLink(srv.Addr(), LinkConfig{RateBps: 10e6, Delay: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", link.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		var b [1]byte
		if _, err := io.ReadFull(c, b[:]); err != nil { // connected through
			t.Fatal(err)
		}
		wg.Add(2)
		go func() { // keeps the link busy
			defer wg.Done()
			buf := make([]byte, 32<<10)
			for {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			io.Copy(io.Discard, c)
			c.Close() // also ends the writer
		}()
	}
	if err := link.Close(); err != nil {
		t.Fatal(err)
	}
	if err := link.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	wg.Wait()
	if _, err := net.Dial("tcp", link.Addr()); err == nil {
		t.Error("dial after Close succeeded")
	}
	srv.Close()
}

// TestLinkTargetDown: when the target refuses, the client's connection
// is closed.
func TestLinkTargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	ln.Close()
	link := newLink(t, target, LinkConfig{RateBps: 1e6})
	c, err := net.Dial("tcp", link.Addr())
	if err != nil {
		return // the reset came before the connect completed
	}
	defer c.Close()
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes from a link to nowhere", n)
	}
}

func TestLinkConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		target string
		cfg    LinkConfig
		bad    string
	}{
		{"127.0.0.1:1", LinkConfig{}, "RateBps = 0"},
		{"127.0.0.1:1", LinkConfig{RateBps: -1}, "RateBps = -1"},
		{"127.0.0.1:1", LinkConfig{RateBps: 200e9}, "RateBps = 2e+11"},
		{"127.0.0.1:1", LinkConfig{RateBps: 1e6, Delay: -time.Millisecond}, "Delay = -1ms"},
		{"127.0.0.1:1", LinkConfig{RateBps: 1e6, Delay: time.Minute}, "Delay = 1m0s"},
		{"127.0.0.1:1", LinkConfig{RateBps: 1e6, Burst: -1}, "Burst = -1"},
		{"127.0.0.1:1", LinkConfig{RateBps: 1e6, Loads: []Load{{Fraction: 1}}}, "Loads[0].Fraction = 1"},
		{"127.0.0.1:1", LinkConfig{RateBps: 1e6, Loads: []Load{{At: -1}}}, "Loads[0].At = -1ns"},
		{"nowhere", LinkConfig{RateBps: 1e6}, `"nowhere"`},
	} {
		l, err := NewLink(tc.target, tc.cfg)
		if err == nil {
			l.Close()
			t.Errorf("NewLink(%q, %+v): no error", tc.target, tc.cfg)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tc.bad) || !strings.Contains(msg, "allowed") {
			t.Errorf("NewLink(%+v): error %q should name %q and what is allowed", tc.cfg, msg, tc.bad)
		}
	}
}

func TestLinkCapacity(t *testing.T) {
	epoch := time.Now()
	link := newLink(t, "127.0.0.1:1", LinkConfig{
		RateBps: 100e6,
		Loads:   []Load{{Rail: 3, Fraction: 0.5, At: 4 * sec}, {Rail: 3, Fraction: 0, At: 8 * sec}},
		Epoch:   epoch,
	})
	if got := link.Capacity(epoch, epoch.Add(8*sec)); !near(got, 75e6) {
		t.Errorf("Capacity over [0,8s) = %v, want 75e6", got)
	}
	if got := link.Capacity(epoch.Add(4*sec), epoch.Add(6*sec)); !near(got, 50e6) {
		t.Errorf("Capacity over [4s,6s) = %v, want 50e6", got)
	}
	link.SetEpoch(epoch.Add(2 * sec))
	if got := link.Epoch(); !got.Equal(epoch.Add(2 * sec)) {
		t.Errorf("Epoch = %v", got)
	}
	if got := link.Capacity(epoch, epoch.Add(8*sec)); !near(got, (6*100e6+2*50e6)/8) {
		t.Errorf("after SetEpoch: Capacity over [0,8s) = %v, want %v", got, (6*100e6+2*50e6)/8)
	}
}

// TestLinkBackPressure: a receiver that does not read stops the sender
// after a bounded amount of data; nothing is lost once it reads again.
func TestLinkBackPressure(t *testing.T) {
	release := make(chan struct{})
	got := make(chan []byte, 1)
	srv := newServer(t, func(c *net.TCPConn) {
		<-release
		b, _ := io.ReadAll(c)
		got <- b
	})
	link := newLink(t, srv.Addr(), LinkConfig{RateBps: 1e9})
	c := dial(t, link.Addr())
	data := randomBytes(9, 32<<20)
	// Write until the writes block; the amount held in between must be
	// far less than the data.
	c.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
	n, err := c.Write(data)
	if err == nil {
		t.Fatalf("wrote all %d bytes to a receiver that does not read", n)
	}
	t.Logf("%d bytes went in before back-pressure", n)
	if n >= len(data)/2 {
		t.Errorf("%d bytes went in before back-pressure", n)
	}
	c.SetWriteDeadline(time.Time{})
	close(release)
	if _, err := c.Write(data[n:]); err != nil {
		t.Fatal(err)
	}
	c.CloseWrite()
	if b := <-got; !bytes.Equal(b, data) {
		t.Errorf("received %d bytes, want %d identical", len(b), len(data))
	}
}

// TestQueueBounded: a queue that is popped and pushed without ever
// draining does not grow.
func TestQueueBounded(t *testing.T) {
	q := newQueue(1 << 30)
	for i := 0; i < 10; i++ {
		q.push(chunk{buf: chunkPool.Get().(*[]byte), n: 1})
	}
	for i := 0; i < 100000; i++ {
		q.push(chunk{buf: chunkPool.Get().(*[]byte), n: 1})
		c, ok, _ := q.pop()
		if !ok {
			t.Fatal("pop failed")
		}
		q.release(c)
	}
	// The ring buffer's own bound is internal/fifo's TestBounded.
	if q.items.Len() != 10 || q.held != 10 {
		t.Errorf("queue: len %d, held %d", q.items.Len(), q.held)
	}
}

func TestSpecLinkConfig(t *testing.T) {
	sp, _ := ParseSpec("emu:200mbit/2ms")
	loads := []Load{{Fraction: 0.5, At: sec}}
	cfg := sp.LinkConfig(loads)
	if cfg.RateBps != 200e6 || cfg.Delay != 2*time.Millisecond || len(cfg.Loads) != 1 {
		t.Errorf("LinkConfig = %+v", cfg)
	}
}
