package tunnel

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/emu"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pair is a tunnel over a real multirail connection: local connections
// made with dialLocal come out at the target listener.
type pair struct {
	t              *testing.T
	opener, accept *Session
	oc, ac         *multirail.Conn
	target         net.Listener
	links          []*emu.Link
}

type pairOpts struct {
	rails  []emu.LinkConfig // emulated rails; nil = two loopback rails
	window int
	dial   func(ctx context.Context) (net.Conn, error) // default: the target listener
}

func newPair(t *testing.T, o pairOpts) *pair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tok := multirail.NewToken()
	base := ConnConfig(multirail.Config{Token: tok, RailTimeout: 100 * time.Millisecond}, 0)
	ln, err := multirail.Listen("127.0.0.1:0", base)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := &pair{t: t}
	dcfg := base
	if o.rails == nil {
		for i := range 2 {
			dcfg.Rails = append(dcfg.Rails, multirail.Rail{Name: fmt.Sprintf("lo%d", i), Addr: ln.Addr().String()})
		}
	}
	for i, lc := range o.rails {
		l, err := emu.NewLink(ln.Addr().String(), lc)
		if err != nil {
			t.Fatal(err)
		}
		p.links = append(p.links, l)
		dcfg.Rails = append(dcfg.Rails, multirail.Rail{Name: fmt.Sprintf("emu%d", i), Addr: l.Addr()})
	}
	acc := make(chan *multirail.Conn, 1)
	go func() {
		c, err := ln.Accept(ctx)
		if err != nil {
			t.Error(err)
		}
		acc <- c
	}()
	p.oc, err = multirail.Dial(ctx, dcfg)
	if err != nil {
		t.Fatal(err)
	}
	p.ac = <-acc
	if p.ac == nil {
		t.FailNow()
	}
	p.target, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dial := o.dial
	if dial == nil {
		dial = func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", p.target.Addr().String())
		}
	}
	if p.accept, err = NewSession(p.ac, Config{Dial: dial, Window: o.window}); err != nil {
		t.Fatal(err)
	}
	if p.opener, err = NewSession(p.oc, Config{Window: o.window}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	return p
}

func (p *pair) close() {
	_ = p.opener.Close()
	_ = p.accept.Close()
	_ = p.oc.Close()
	_ = p.ac.Close()
	_ = p.target.Close()
	for _, l := range p.links {
		_ = l.Close()
	}
}

// dialLocal returns the application's end of a new stream and the target's
// end of it.
func (p *pair) dialLocal() (app, target *net.TCPConn) {
	p.t.Helper()
	a, b := tcpPair(p.t)
	if err := p.opener.Open(b); err != nil {
		p.t.Fatal(err)
	}
	c, err := p.target.Accept()
	if err != nil {
		p.t.Fatal(err)
	}
	return a, c.(*net.TCPConn)
}

// tcpPair is two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestManyStreamsBothWays: streams at once, each carrying different data
// each way, arrive intact, and the session counts them.
func TestManyStreamsBothWays(t *testing.T) {
	p := newPair(t, pairOpts{window: MinWindow})
	const streams, size = 16, 1 << 20
	var wg sync.WaitGroup
	for i := range streams {
		app, tgt := p.dialLocal()
		up, down := randBytes(uint64(2*i), size+i), randBytes(uint64(2*i+1), size-i)
		wg.Add(4)
		go func() { defer wg.Done(); _, _ = app.Write(up); _ = app.CloseWrite() }()
		go func() { defer wg.Done(); _, _ = tgt.Write(down); _ = tgt.CloseWrite() }()
		go func() {
			defer wg.Done()
			defer tgt.Close()
			got, err := io.ReadAll(tgt)
			if err != nil || !bytes.Equal(got, up) {
				t.Errorf("stream %d upstream: %d bytes (want %d), err %v, equal %v", i, len(got), len(up), err, bytes.Equal(got, up))
			}
		}()
		go func() {
			defer wg.Done()
			defer app.Close()
			got, err := io.ReadAll(app)
			if err != nil || !bytes.Equal(got, down) {
				t.Errorf("stream %d downstream: %d bytes (want %d), err %v", i, len(got), len(down), err)
			}
		}()
	}
	wg.Wait()
	waitFor(t, func() bool { return p.opener.Stats().StreamsOpen == 0 && p.accept.Stats().StreamsOpen == 0 })
	os, as := p.opener.Stats(), p.accept.Stats()
	if os.StreamsOpened != streams || as.StreamsOpened != streams || os.StreamsReset != 0 || as.StreamsReset != 0 {
		t.Errorf("stats: opener %+v, acceptor %+v", os, as)
	}
	if os.BytesSent != as.BytesReceived || as.BytesSent != os.BytesReceived || os.BytesSent != streams*size+streams*(streams-1)/2 {
		t.Errorf("byte counts: opener %+v, acceptor %+v", os, as)
	}
}

// waitFor polls cond (a state the code under test reaches on its own) for
// up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHalfClose: either end may shut its sending side and keep receiving:
// the other end reads EOF while its own direction stays open.
func TestHalfClose(t *testing.T) {
	for _, first := range []string{"application", "target"} {
		t.Run(first+" first", func(t *testing.T) {
			p := newPair(t, pairOpts{})
			app, tgt := p.dialLocal()
			defer app.Close()
			defer tgt.Close()
			closer, other := app, tgt
			if first == "target" {
				closer, other = tgt, app
			}
			// closer says hello and shuts its side.
			if _, err := closer.Write([]byte("request")); err != nil {
				t.Fatal(err)
			}
			if err := closer.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(other)
			if err != nil || string(got) != "request" {
				t.Fatalf("other end read %q, %v; want the request then EOF", got, err)
			}
			// The other direction still works, after the EOF.
			resp := randBytes(7, 3<<20)
			go func() { _, _ = other.Write(resp); _ = other.CloseWrite() }()
			back, err := io.ReadAll(closer)
			if err != nil || !bytes.Equal(back, resp) {
				t.Fatalf("closing end read %d bytes (want %d) after its half-close, err %v", len(back), len(resp), err)
			}
			waitFor(t, func() bool { return p.opener.Stats().StreamsOpen == 0 && p.accept.Stats().StreamsOpen == 0 })
			if r := p.opener.Stats().StreamsReset + p.accept.Stats().StreamsReset; r != 0 {
				t.Fatalf("%d resets on an orderly end", r)
			}
		})
	}
}

// TestNoStarvation: a stream whose target never reads holds at most its
// window on the accepting end, and other streams run at full speed beside
// it (without per-stream credit its data would fill the connection's
// receive window and stall them all).
func TestNoStarvation(t *testing.T) {
	p := newPair(t, pairOpts{window: MinWindow})
	stuckApp, stuckTgt := p.dialLocal()
	defer stuckApp.Close()
	defer stuckTgt.Close()
	_ = stuckTgt.SetReadBuffer(4 << 10) // the target keeps as little as the kernel lets it
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var pushed int64
	var pw sync.WaitGroup
	pw.Add(1)
	go func() { // fill the stuck stream until the tunnel stops taking data
		defer pw.Done()
		buf := make([]byte, 64<<10)
		for ctx.Err() == nil {
			n, err := stuckApp.Write(buf)
			pushed += int64(n)
			if err != nil {
				return
			}
		}
	}()
	// Wait until the stuck stream is really stuck: its credit is spent.
	st := p.openerStream(t, 1)
	waitFor(t, func() bool { st.mu.Lock(); defer st.mu.Unlock(); return st.credit == 0 })

	for i := range 4 {
		app, tgt := p.dialLocal()
		data := randBytes(uint64(100+i), 8<<20)
		go func() { _, _ = app.Write(data); _ = app.CloseWrite() }()
		h := sha256.New()
		n, err := io.Copy(h, tgt)
		if err != nil || n != int64(len(data)) || !bytes.Equal(h.Sum(nil), sum(data)) {
			t.Fatalf("stream beside the stuck one: %d of %d bytes, err %v", n, len(data), err)
		}
		app.Close()
		tgt.Close()
	}
	acc := p.acceptStream(t, 1)
	acc.mu.Lock()
	held := acc.outstanding
	acc.mu.Unlock()
	if held > MinWindow {
		t.Fatalf("the stuck stream holds %d bytes on the accepting end, beyond its window %d", held, MinWindow)
	}
	if held < MinWindow/2 {
		t.Fatalf("the stuck stream holds only %d bytes: the test did not fill it", held)
	}
	cancel()
	stuckApp.Close()
	pw.Wait()
}

func sum(b []byte) []byte { h := sha256.Sum256(b); return h[:] }

func (p *pair) openerStream(t *testing.T, id uint32) *stream { return sessionStream(t, p.opener, id) }
func (p *pair) acceptStream(t *testing.T, id uint32) *stream {
	var st *stream
	waitFor(t, func() bool { st = lookup(p.accept, id); return st != nil })
	return st
}

func lookup(s *Session, id uint32) *stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams[id]
}

func sessionStream(t *testing.T, s *Session, id uint32) *stream {
	t.Helper()
	st := lookup(s, id)
	if st == nil {
		t.Fatalf("no stream %d", id)
	}
	return st
}

// TestRailDownUnderStreams: a rail's link goes down while streams carry
// data; the streams finish intact on the rail left, none reset.
func TestRailDownUnderStreams(t *testing.T) {
	p := newPair(t, pairOpts{rails: []emu.LinkConfig{{RateBps: 400e6, Delay: time.Millisecond}, {RateBps: 400e6, Delay: time.Millisecond}}})
	const size = 24 << 20
	app, tgt := p.dialLocal()
	data := randBytes(3, size)
	go func() { _, _ = app.Write(data); _ = app.CloseWrite() }()
	h := sha256.New()
	first := make([]byte, size/4)
	if _, err := io.ReadFull(tgt, first); err != nil {
		t.Fatal(err)
	}
	h.Write(first)
	p.links[1].SetDown(true) // packets vanish silently, as when a cable is pulled
	n, err := io.Copy(h, tgt)
	if err != nil || int(n)+len(first) != size || !bytes.Equal(h.Sum(nil), sum(data)) {
		t.Fatalf("after the rail went down: %d of %d bytes, err %v", int(n)+len(first), size, err)
	}
	app.Close()
	tgt.Close()
	st := p.oc.Stats()
	if st.Rails[1].Up {
		t.Fatalf("rail 1 still up after its link went down: %+v", st.Rails[1])
	}
	if r := p.opener.Stats().StreamsReset + p.accept.Stats().StreamsReset; r != 0 {
		t.Fatalf("%d streams reset by a rail failure", r)
	}
}

// TestResets: a target that resets, and a target that cannot be reached,
// reset the application's connection; the session carries on.
func TestResets(t *testing.T) {
	var refuse sync.Mutex
	refusing := false
	var p *pair
	p = newPair(t, pairOpts{dial: func(ctx context.Context) (net.Conn, error) {
		refuse.Lock()
		r := refusing
		refuse.Unlock()
		if r {
			return nil, errors.New("connection refused (test)")
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", p.target.Addr().String())
	}})
	app, tgt := p.dialLocal()
	abort(tgt)
	if _, err := io.ReadAll(app); err == nil {
		t.Fatal("the application read a clean EOF from a stream its target reset")
	}
	app.Close()

	refuse.Lock()
	refusing = true
	refuse.Unlock()
	a, b := tcpPair(t)
	if err := p.opener.Open(b); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(a); err == nil {
		t.Fatal("the application read a clean EOF from a stream whose target could not be dialed")
	}
	a.Close()
	waitFor(t, func() bool { return p.opener.Stats().StreamsOpen == 0 && p.accept.Stats().StreamsOpen == 0 })
	if r := p.opener.Stats().StreamsReset; r != 2 {
		t.Fatalf("opener counted %d resets, want 2", r)
	}
	// The session still carries streams.
	refuse.Lock()
	refusing = false
	refuse.Unlock()
	app, tgt = p.dialLocal()
	go func() { _, _ = app.Write([]byte("still here")); _ = app.CloseWrite() }()
	got, err := io.ReadAll(tgt)
	if err != nil || string(got) != "still here" {
		t.Fatalf("after the resets: %q, %v", got, err)
	}
	app.Close()
	tgt.Close()
	select {
	case <-p.opener.Done():
		t.Fatalf("session ended: %v", p.opener.Err())
	default:
	}
}

// TestConcurrentOpens: streams opened at once from many goroutines, whose
// OPENs may reach the accepting end in any order (each travels under its
// own stream's tag), all carry their bytes.
func TestConcurrentOpens(t *testing.T) {
	p := newPair(t, pairOpts{})
	go func() { // the target echoes every connection
		for {
			c, err := p.target.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	const n = 64
	errs := make(chan error, n)
	for i := range n {
		go func() {
			a, b := tcpPair(t)
			defer a.Close()
			if err := p.opener.Open(b); err != nil {
				errs <- err
				return
			}
			msg := fmt.Appendf(nil, "stream %d", i)
			if _, err := a.Write(msg); err != nil {
				errs <- err
				return
			}
			_ = a.CloseWrite()
			got, err := io.ReadAll(a)
			if err == nil && !bytes.Equal(got, msg) {
				err = fmt.Errorf("stream %d: echoed %q", i, got)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := p.accept.Err(); err != nil {
		t.Fatalf("accepting session ended: %v", err)
	}
}
