package rdzv

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/multirail/multirail"
	hs "github.com/multirail/multirail/internal/handshake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// syncBuffer is a bytes.Buffer safe for the server's logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type testServer struct {
	*Server
	url  string
	log  *syncBuffer
	done chan error // Serve's result
}

// startServer serves cfg on a loopback port until the test ends (or
// ctx, when given, is done).
func startServer(t *testing.T, ctx context.Context, cfg ServerConfig) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{log: &syncBuffer{}, done: make(chan error, 1), url: "tcp://" + ln.Addr().String()}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(ts.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ts.Server, err = NewServer(ln, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ctx == nil {
		ctx = t.Context()
	}
	go func() { ts.done <- ts.Serve(ctx) }()
	t.Cleanup(func() {
		ts.Close()
		select {
		case err := <-ts.done:
			ts.done <- err
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after Close")
		}
	})
	return ts
}

// serveResult waits for Serve's result.
func (ts *testServer) serveResult(t *testing.T) error {
	t.Helper()
	select {
	case err := <-ts.done:
		ts.done <- err
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
		return nil
	}
}

// waitFor polls cond (a condition, not a guess at timing) for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func cardData(r int) []byte {
	if r%3 == 2 {
		return nil // empty cards are cards too
	}
	return []byte(fmt.Sprintf(`{"rank":%d,"host":"h%d"}`, r, r%2))
}

func wantTable(n int) [][]byte {
	out := make([][]byte, n)
	for r := range n {
		out[r] = cardData(r)
	}
	return out
}

func sameTable(a, b [][]byte) bool {
	return slices.EqualFunc(a, b, func(x, y []byte) bool { return bytes.Equal(x, y) })
}

type result struct {
	rank  int
	table [][]byte
	err   error
}

// runRanks runs Exchange for the given ranks of a job, in a random order;
// the ranks in gated wait until gate is closed. It returns the results in
// the order the ranks finished.
func runRanks(ctx context.Context, url, token, job string, size int, ranks []int, gated map[int]bool, gate <-chan struct{}) <-chan result {
	out := make(chan result, len(ranks))
	order := slices.Clone(ranks)
	rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for _, r := range order {
		go func() {
			if gated[r] {
				select {
				case <-gate:
				case <-ctx.Done():
				}
			}
			tb, err := Exchange(ctx, url, token, Card{JobID: job, Rank: r, Size: size, Data: cardData(r)})
			out <- result{r, tb, err}
		}()
	}
	return out
}

func allRanks(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func TestRdzvTCPRandomOrder(t *testing.T) {
	for _, n := range []int{1, 2, 7} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			ts := startServer(t, nil, ServerConfig{Size: n, JobID: "job-1", Token: "secret"})
			gate := make(chan struct{})
			gated := map[int]bool{}
			for r := range n {
				gated[r] = r%2 == 1
			}
			results := runRanks(ctx, ts.url, "secret", "job-1", n, allRanks(n), gated, gate)
			// The ungated half registers first; then the rest.
			waitFor(t, "the ungated ranks to register", func() bool { return len(ts.Missing()) == n/2 })
			close(gate)
			for range n {
				res := <-results
				if res.err != nil || !sameTable(res.table, wantTable(n)) {
					t.Fatalf("rank %d: %q, %v", res.rank, res.table, res.err)
				}
			}
			if err := ts.serveResult(t); err != nil {
				t.Fatalf("Serve: %v", err)
			}
		})
	}
}

// TestRdzvServerLate: ranks dial before the server listens and retry.
func TestRdzvServerLate(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const n = 4
	results := runRanks(ctx, "tcp://"+addr, "", "late", n, allRanks(n), nil, nil)
	// A first rank fails to connect before the server exists: it retries.
	probe, perr := Exchange(mustTimeout(t, 30*time.Millisecond), "tcp://"+addr, "", Card{JobID: "late", Rank: 0, Size: n})
	var we *WaitError
	if !errors.As(perr, &we) || we.Reached || probe != nil {
		t.Fatalf("probe: %v", perr)
	}
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s taken meanwhile: %v", addr, err)
	}
	srv, err := NewServer(ln, ServerConfig{Size: n})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	for range n {
		if res := <-results; res.err != nil || !sameTable(res.table, wantTable(n)) {
			t.Fatalf("rank %d: %v", res.rank, res.err)
		}
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

func mustTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestRdzvWrongToken(t *testing.T) {
	ts := startServer(t, nil, ServerConfig{Size: 2, Token: "right"})
	start := time.Now()
	_, err := Exchange(mustTimeout(t, 10*time.Second), ts.url, "wrong", Card{Rank: 0, Size: 2})
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "authentication failed") || !strings.Contains(err.Error(), TokenEnv) {
		t.Fatalf("client: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("a refusal was retried (%v)", time.Since(start))
	}
	// No token at all against a server with one: refused too.
	if _, err := Exchange(mustTimeout(t, 10*time.Second), ts.url, "", Card{Rank: 0, Size: 2}); !errors.Is(err, ErrAuth) {
		t.Fatalf("client without token: %v", err)
	}
	waitFor(t, "the server's log", func() bool { return strings.Contains(ts.log.String(), "authentication failed") })
	if got := ts.Missing(); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("missing %v after refusals", got)
	}
	ts.Close()
	var ie *IncompleteError
	if err := ts.serveResult(t); !errors.As(err, &ie) || !errors.Is(err, ErrServerClosed) || len(ie.Refusals) != 2 ||
		!strings.Contains(err.Error(), "authentication failed") || !strings.Contains(err.Error(), "rank(s) 0-1 of 2 never registered;") {
		t.Fatalf("Serve: %v", err)
	}
}

// TestRdzvTokenEnv: an empty token means MULTIRAIL_TOKEN, on both sides.
func TestRdzvTokenEnv(t *testing.T) {
	if TokenEnv != multirail.TokenEnv {
		t.Fatalf("TokenEnv %q, multirail.TokenEnv %q", TokenEnv, multirail.TokenEnv)
	}
	t.Setenv(TokenEnv, "from-env")
	ts := startServer(t, nil, ServerConfig{Size: 1})
	if tb, err := Exchange(mustTimeout(t, 10*time.Second), ts.url, "", Card{Rank: 0, Size: 1, Data: []byte("x")}); err != nil || string(tb[0]) != "x" {
		t.Fatalf("%q, %v", tb, err)
	}
	ts2 := startServer(t, nil, ServerConfig{Size: 1, Token: "other"})
	if _, err := Exchange(mustTimeout(t, 10*time.Second), ts2.url, "", Card{Rank: 0, Size: 1}); !errors.Is(err, ErrAuth) {
		t.Fatalf("env token against another: %v", err)
	}
}

func TestRdzvNotAServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			c.Close()
		}
	}()
	_, err = Exchange(mustTimeout(t, 10*time.Second), "tcp://"+ln.Addr().String(), "", Card{Rank: 0, Size: 1})
	var re *RefusedError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "not a multirail rendezvous server") {
		t.Fatalf("%v", err)
	}
	<-done
}

func TestRdzvMismatch(t *testing.T) {
	ts := startServer(t, nil, ServerConfig{Size: 4, JobID: "job-a"})
	cases := []struct {
		card Card
		want string
	}{
		{Card{JobID: "job-a", Rank: 3, Size: 5}, "rank 3 says size 5, the server's job has size 4"},
		{Card{JobID: "job-b", Rank: 1, Size: 4}, `rank 1 says job id "job-b", the server's job id is "job-a"`},
		{Card{JobID: "job-a", Rank: 0, Size: 4, Data: make([]byte, DefaultMaxCard+1)}, "MaxCard is 65536"},
	}
	for _, c := range cases {
		_, err := Exchange(mustTimeout(t, 10*time.Second), ts.url, "", c.card)
		var re *RefusedError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want a refusal with %q", c.card.Rank, err, c.want)
		}
	}
	if got := ts.Missing(); len(got) != 4 {
		t.Errorf("missing %v", got)
	}
}

// TestRdzvJobIDAgree: a server without a job id takes the first rank's and
// refuses another.
func TestRdzvJobIDAgree(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ts := startServer(t, nil, ServerConfig{Size: 2})
	first := runRanks(ctx, ts.url, "", "x", 2, []int{0}, nil, nil)
	waitFor(t, "rank 0", func() bool { return slices.Equal(ts.Missing(), []int{1}) })
	_, err := Exchange(ctx, ts.url, "", Card{JobID: "y", Rank: 1, Size: 2})
	if err == nil || !strings.Contains(err.Error(), `rank 1 says job id "y", the server's job id is "x"`) {
		t.Fatalf("%v", err)
	}
	if _, err := Exchange(ctx, ts.url, "", Card{JobID: "x", Rank: 1, Size: 2, Data: cardData(1)}); err != nil {
		t.Fatal(err)
	}
	if res := <-first; res.err != nil {
		t.Fatal(res.err)
	}
}

// rawRank is a rank's connection driven by hand, past the handshake.
type rawRank struct {
	net.Conn
	send, recv *hs.Cipher
}

// rawHandshake runs the rank's side of the handshake on c by hand, as
// doc.go describes it (not through the client's code): read the hello,
// send noise1 under HMAC-SHA256(token, "multirail/rdzv 2 token") with the
// hello body as prologue, read noise2.
func rawHandshake(t *testing.T, c net.Conn, token string) *rawRank {
	t.Helper()
	typ, hello, err := readFrame(c, 64)
	if err != nil || typ != 1 || string(hello) != "MRDZ\x02" {
		t.Fatalf("hello: type %d %q, %v", typ, hello, err)
	}
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("multirail/rdzv 2 token"))
	st, err := hs.NewState(true, hello, [32]byte(m.Sum(nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	msg1, _, _, err := st.WriteMessage([]byte{2}, nil)
	if err != nil || len(msg1) != 1+48 {
		t.Fatalf("noise1 of %d bytes: %v", len(msg1), err)
	}
	if err := writeFrame(c, 2, msg1); err != nil {
		t.Fatal(err)
	}
	typ, msg2, err := readFrame(c, 1+maxErrorLen)
	if err != nil || typ != 3 || len(msg2) != 48 {
		t.Fatalf("noise2: type %d of %d bytes %q, %v", typ, len(msg2), msg2, err)
	}
	_, cs1, cs2, err := st.ReadMessage(nil, msg2)
	if err != nil {
		t.Fatalf("noise2: %v", err)
	}
	return &rawRank{Conn: c, send: hs.NewCipher(cs1), recv: hs.NewCipher(cs2)}
}

// rawRegister registers card by hand and leaves the connection open, as
// a rank that stopped reading would.
func rawRegister(t *testing.T, url, token string, card Card) *rawRank {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	rc := rawHandshake(t, c, token)
	if err := writeSealed(rc, rc.send, tCard, appendCardBody(nil, card)); err != nil {
		t.Fatal(err)
	}
	return rc
}

func TestRdzvDuplicateRank(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ts := startServer(t, nil, ServerConfig{Size: 3, JobID: "j"})
	first := runRanks(ctx, ts.url, "", "j", 3, []int{1}, nil, nil)
	waitFor(t, "rank 1", func() bool { return slices.Equal(ts.Missing(), []int{0, 2}) })
	_, err := Exchange(ctx, ts.url, "", Card{JobID: "j", Rank: 1, Size: 3, Data: []byte("other")})
	if err == nil || !strings.Contains(err.Error(), "rank 1 is already registered from 127.0.0.1:") || !strings.Contains(err.Error(), "with different data") {
		t.Fatalf("duplicate: %v", err)
	}
	// The same card from a new connection is a retry: it replaces the old
	// connection, which the server closes.
	stale := rawRegister(t, ts.url, "", Card{JobID: "j", Rank: 0, Size: 3, Data: cardData(0)})
	defer stale.Close()
	waitFor(t, "rank 0", func() bool { return slices.Equal(ts.Missing(), []int{2}) })
	gate := make(chan struct{})
	rest := runRanks(ctx, ts.url, "", "j", 3, []int{0, 2}, map[int]bool{2: true}, gate)
	stale.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		typ, _, err := readSealed(stale, stale.recv, maxStatusLen)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the replaced connection is still open")
			}
			break
		}
		if typ != tStatus {
			t.Fatalf("replaced connection got frame type %d", typ)
		}
	}
	close(gate)
	for range 2 {
		if res := <-rest; res.err != nil || !sameTable(res.table, wantTable(3)) {
			t.Fatalf("rank %d: %v", res.rank, res.err)
		}
	}
	if res := <-first; res.err != nil || !sameTable(res.table, wantTable(3)) {
		t.Fatalf("first rank 1: %v", res.err)
	}
	if err := ts.serveResult(t); err != nil {
		t.Fatal(err)
	}
}

// TestRdzvAfterTable: once the table is complete, a rank that retries with
// its card gets it again; another card for that rank is refused.
func TestRdzvAfterTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ts := startServer(t, nil, ServerConfig{Size: 2})
	// Rank 0 registers and never acknowledges: the server keeps serving.
	lost := rawRegister(t, ts.url, "", Card{Rank: 0, Size: 2, Data: cardData(0)})
	defer lost.Close()
	if tb, err := Exchange(ctx, ts.url, "", Card{Rank: 1, Size: 2, Data: cardData(1)}); err != nil || !sameTable(tb, wantTable(2)) {
		t.Fatal(err)
	}
	waitFor(t, "rank 1's ack", func() bool { return slices.Equal(ts.Missing(), []int{0}) })
	_, err := Exchange(ctx, ts.url, "", Card{Rank: 0, Size: 2, Data: []byte("other")})
	if err == nil || !strings.Contains(err.Error(), "rank 0 is registered twice with different data") {
		t.Fatalf("%v", err)
	}
	if tb, err := Exchange(ctx, ts.url, "", Card{Rank: 0, Size: 2, Data: cardData(0)}); err != nil || !sameTable(tb, wantTable(2)) {
		t.Fatal(err)
	}
	if err := ts.serveResult(t); err != nil {
		t.Fatal(err)
	}
}

func TestRdzvMissingRanksNamed(t *testing.T) {
	srvCtx, srvCancel := context.WithCancel(t.Context())
	defer srvCancel()
	ts := startServer(t, srvCtx, ServerConfig{Size: 4, JobID: "m"})
	ctx, cancel := context.WithCancel(t.Context())
	results := runRanks(ctx, ts.url, "", "m", 4, []int{0, 2}, nil, nil)
	waitFor(t, "ranks 0 and 2", func() bool { return slices.Equal(ts.Missing(), []int{1, 3}) })
	// Let the status frames say so (at most every statusInterval).
	time.Sleep(2 * statusInterval)
	cancel()
	for range 2 {
		res := <-results
		var we *WaitError
		if !errors.As(res.err, &we) || !errors.Is(res.err, context.Canceled) || !slices.Equal(we.Missing, []int{1, 3}) ||
			!strings.Contains(res.err.Error(), "gave up waiting for rank(s) 1, 3 (2 of 4 registered)") {
			t.Fatalf("rank %d: %v", res.rank, res.err)
		}
	}
	// The ranks' connections are gone: the server forgets them.
	waitFor(t, "the server to forget", func() bool { return len(ts.Missing()) == 4 })
	srvCancel()
	var ie *IncompleteError
	if err := ts.serveResult(t); !errors.As(err, &ie) || !errors.Is(err, context.Canceled) || ie.Connections != 2 || ie.Complete ||
		!slices.Equal(ie.Missing, []int{1, 3}) || !slices.Equal(ie.Left, []int{0, 2}) ||
		!strings.Contains(err.Error(), `rendezvous of job "m": rank(s) 1, 3 of 4 never registered, rank(s) 0, 2 registered but left: context canceled`) {
		t.Fatalf("Serve: %v", err)
	}
}

func TestRdzvNotReachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "tcp://" + ln.Addr().String()
	ln.Close()
	_, err = Exchange(mustTimeout(t, 100*time.Millisecond), url, "", Card{Rank: 1, Size: 2})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "rdzv: rendezvous server "+url+" not reachable: ") ||
		!strings.Contains(err.Error(), "refused") {
		t.Fatalf("%v", err)
	}
}

// TestRdzvHostileClients: garbage, a huge length, slow-loris clients and a
// half-finished handshake each lose their connection, while a good job
// completes; the handshake slots they hold are given back.
func TestRdzvHostileClients(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ts := startServer(t, nil, ServerConfig{Size: 3, Token: "tok", HandshakeTimeout: 300 * time.Millisecond, MaxPending: 2, MaxCard: 1024})
	addr := strings.TrimPrefix(ts.url, "tcp://")
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// closed reports when the server has closed c (after reading what it
	// sent).
	closed := func(name string, c net.Conn) <-chan string {
		out := make(chan string, 1)
		go func() {
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(15 * time.Second))
			// EOF, or a reset when the server closed with our bytes unread.
			if _, err := io.Copy(io.Discard, c); errors.Is(err, os.ErrDeadlineExceeded) {
				out <- fmt.Sprintf("%s: still open: %v", name, err)
				return
			}
			out <- ""
		}()
		return out
	}
	var checks []<-chan string
	// Two slow-loris connections take both handshake slots first.
	for i := range 2 {
		c := dial()
		c.Write([]byte{0, 0}) // half a length, then nothing
		checks = append(checks, closed(fmt.Sprint("slow-loris ", i), c))
	}
	c := dial()
	c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	checks = append(checks, closed("garbage", c))
	c = dial()
	c.Write([]byte{0xff, 0xff, 0xff, 0xff, tNoise1})
	checks = append(checks, closed("huge length", c))
	// A noise1 of the right size that is not one: it does not decrypt.
	c = dial()
	if _, _, err := readFrame(c, helloLen); err != nil {
		t.Fatal(err)
	}
	writeFrame(c, tNoise1, append([]byte{version}, bytes.Repeat([]byte{7}, noiseMsgLen)...))
	checks = append(checks, closed("garbage noise1", c))
	// Authenticated, then a card frame far above MaxCard.
	rc := rawHandshake(t, dial(), "tok")
	rc.Write([]byte{0, 16, 0, 0, tSealed})
	checks = append(checks, closed("huge card", rc))
	// Authenticated, then the card in clear.
	rc = rawHandshake(t, dial(), "tok")
	writeFrame(rc, tCard, appendCardBody(nil, Card{Rank: 0, Size: 3}))
	checks = append(checks, closed("clear card", rc))
	// Authenticated, then a sealed frame that does not open.
	rc = rawHandshake(t, dial(), "tok")
	writeFrame(rc, tSealed, bytes.Repeat([]byte{7}, 64))
	checks = append(checks, closed("card that does not open", rc))
	// Authenticated, then a sealed card of two frames later (its nonce
	// is not the next): it does not open either.
	rc = rawHandshake(t, dial(), "tok")
	rc.send.Seal(nil, nil)
	writeSealed(rc, rc.send, tCard, appendCardBody(nil, Card{Rank: 0, Size: 3}))
	checks = append(checks, closed("card out of turn", rc))
	// Authenticated, then a sealed frame with nothing inside.
	rc = rawHandshake(t, dial(), "tok")
	writeFrame(rc, tSealed, rc.send.Seal(nil, nil))
	checks = append(checks, closed("empty sealed frame", rc))

	results := runRanks(ctx, ts.url, "tok", "", 3, allRanks(3), nil, nil)
	for range 3 {
		if res := <-results; res.err != nil || !sameTable(res.table, wantTable(3)) {
			t.Fatalf("rank %d: %v", res.rank, res.err)
		}
	}
	for _, ch := range checks {
		if msg := <-ch; msg != "" {
			t.Error(msg)
		}
	}
	if err := ts.serveResult(t); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"does not have the server's token", "the card from 127.0.0.1:", "does not open", "want a sealed frame", "sealed frame without an inner type"} {
		if !strings.Contains(ts.log.String(), want) {
			t.Errorf("the server's log does not say %q:\n%s", want, ts.log)
		}
	}
}

// TestRdzvReconnect: a rank whose connection breaks before the table
// registers again.
func TestRdzvReconnect(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ts := startServer(t, nil, ServerConfig{Size: 2})
	// A proxy in front of the server that cuts rank 0's first connection
	// once it is registered.
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pln.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	cut := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		first := true
		for {
			c, err := pln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "tcp://"))
			if err != nil {
				c.Close()
				return
			}
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(s, c); s.Close() }()
			go func() { defer wg.Done(); io.Copy(c, s); c.Close() }()
			if first {
				first = false
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-cut
					c.Close()
					s.Close()
				}()
			}
		}
	}()
	results := runRanks(ctx, "tcp://"+pln.Addr().String(), "", "", 2, []int{0}, nil, nil)
	waitFor(t, "rank 0", func() bool { return slices.Equal(ts.Missing(), []int{1}) })
	close(cut)
	// Rank 0 comes back by itself; then rank 1 completes the job.
	waitFor(t, "rank 0 to be forgotten or back", func() bool { return strings.Contains(ts.log.String(), "broke before the table") })
	waitFor(t, "rank 0 back", func() bool { return slices.Equal(ts.Missing(), []int{1}) })
	tb, err := Exchange(ctx, ts.url, "", Card{Rank: 1, Size: 2, Data: cardData(1)})
	if err != nil || !sameTable(tb, wantTable(2)) {
		t.Fatal(err)
	}
	if res := <-results; res.err != nil || !sameTable(res.table, wantTable(2)) {
		t.Fatal(res.err)
	}
	pln.Close()
}

func TestRdzvServeAfterClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(ln, ServerConfig{Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if err := srv.Serve(t.Context()); !errors.Is(err, ErrServerClosed) {
		t.Fatal(err)
	}
	if err := srv.Serve(t.Context()); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatal(err)
	}
}

func TestRdzvNewServerConfig(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, c := range []struct {
		cfg  ServerConfig
		want string
	}{
		{ServerConfig{Size: 0}, "Size 0 is out of range: allowed 1..1048576"},
		{ServerConfig{Size: MaxSize + 1}, "Size 1048577"},
		{ServerConfig{Size: 1, MaxCard: -1}, "MaxCard -1 is out of range"},
		{ServerConfig{Size: 1, MaxCard: MaxCardLimit + 1}, "MaxCard 16777217"},
		{ServerConfig{Size: 1, JobID: strings.Repeat("j", MaxJobID+1)}, "JobID of 1025 bytes"},
		{ServerConfig{Size: 1, HandshakeTimeout: -time.Second}, "HandshakeTimeout -1s"},
		{ServerConfig{Size: 1, MaxPending: -1}, "MaxPending -1"},
	} {
		if _, err := NewServer(ln, c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want %q", c.cfg, err, c.want)
		}
	}
}

func TestRdzvBadInput(t *testing.T) {
	for _, c := range []struct {
		url  string
		card Card
		want string
	}{
		{"http://x:1", Card{Size: 1}, `unknown scheme "http"`},
		{"tcp://hostonly", Card{Size: 1}, "want tcp://HOST:PORT"},
		{"tcp://:99", Card{Size: 1}, "want tcp://HOST:PORT"},
		{"file://relative/dir", Card{Size: 1}, "absolute directory"},
		{"file:///tmp/x", Card{Size: 0}, "size 0 is out of range"},
		{"file:///tmp/x", Card{Rank: 2, Size: 2}, "rank 2 is out of range: allowed 0..1"},
		{"file:///tmp/x", Card{Size: 1, JobID: strings.Repeat("j", MaxJobID+1)}, "job id of 1025 bytes"},
	} {
		if _, err := Exchange(t.Context(), c.url, "", c.card); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: %v; want %q", c.url, c.card, err, c.want)
		}
	}
}

func TestRdzvParseURL(t *testing.T) {
	for in, want := range map[string][2]string{
		"tcp://127.0.0.1:7000":   {"tcp", "127.0.0.1:7000"},
		"tcp://[::1]:7000":       {"tcp", "[::1]:7000"},
		"tcp://node-0.svc:29500": {"tcp", "node-0.svc:29500"},
		"file:///tmp/job/":       {"file", "/tmp/job"},
		"file://localhost/tmp/j": {"file", "/tmp/j"},
	} {
		k, w, err := parseURL(in)
		if err != nil || k != want[0] || w != want[1] {
			t.Errorf("%s: %s %s %v", in, k, w, err)
		}
	}
}

// TestRdzvDrainCountsLastAcks: a launcher whose ranks have all exited
// drains the server: the acknowledgements they wrote just before exiting
// are read, and Serve reports the rendezvous complete. (Closing at once
// instead lost some of them: "rank(s) 2 of 4 did not confirm the table".)
func TestRdzvDrainCountsLastAcks(t *testing.T) {
	const n = 6
	for i := range 25 {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		ts := startServer(t, ctx, ServerConfig{Size: n, JobID: "job-d", Token: "secret"})
		results := runRanks(ctx, ts.url, "secret", "job-d", n, allRanks(n), nil, nil)
		for range n {
			if res := <-results; res.err != nil {
				t.Fatalf("round %d: rank %d: %v", i, res.rank, res.err)
			}
		}
		// Every rank has returned (its acknowledgement written, its
		// connection closed): as a launcher does when its ranks exited.
		if err := ts.Drain(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		if err := ts.serveResult(t); err != nil {
			t.Fatalf("round %d: Serve after Drain: %v", i, err)
		}
		cancel()
	}
}
