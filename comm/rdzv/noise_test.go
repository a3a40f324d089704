package rdzv

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hs "github.com/multirail/multirail/internal/handshake"
)

// relay is an on-path TCP proxy between ranks and a server: it forwards
// each connection's frames both ways, records them, and lets a test alter
// them on the way.
type relay struct {
	url string
	ln  net.Listener
	// alter, if set, may change a frame (length, type and body) in place
	// before it goes on; conn counts the relay's connections from 0, n
	// the frames of the direction from 0.
	alter func(conn int, toServer bool, n int, frame []byte)
	wg    sync.WaitGroup

	mu    sync.Mutex
	conns []*relayed
	open  []net.Conn
}

// relayed is what went through one connection of the relay.
type relayed struct {
	up, down [][]byte // frames rank → server, server → rank
}

// startRelay relays to the server at url until the test ends.
func startRelay(t *testing.T, url string, alter func(conn int, toServer bool, n int, frame []byte)) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{url: "tcp://" + ln.Addr().String(), ln: ln, alter: alter}
	target := strings.TrimPrefix(url, "tcp://")
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			rec := &relayed{}
			r.mu.Lock()
			id := len(r.conns)
			r.conns = append(r.conns, rec)
			r.open = append(r.open, c, s)
			r.mu.Unlock()
			r.wg.Add(2)
			go r.pump(id, true, c, s, &rec.up)
			go r.pump(id, false, s, c, &rec.down)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		r.mu.Lock()
		for _, c := range r.open {
			c.Close()
		}
		r.mu.Unlock()
		r.wg.Wait()
	})
	return r
}

// pump forwards the frames from src to dst until either breaks, then
// closes both.
func (r *relay) pump(id int, toServer bool, src, dst net.Conn, rec *[][]byte) {
	defer r.wg.Done()
	defer src.Close()
	defer dst.Close()
	for n := 0; ; n++ {
		var h [4]byte
		if _, err := io.ReadFull(src, h[:]); err != nil {
			return
		}
		l := binary.BigEndian.Uint32(h[:])
		if l > 1<<24 {
			return
		}
		frame := make([]byte, 4+l)
		copy(frame, h[:])
		if _, err := io.ReadFull(src, frame[4:]); err != nil {
			return
		}
		if r.alter != nil {
			r.alter(id, toServer, n, frame)
		}
		r.mu.Lock()
		*rec = append(*rec, frame)
		r.mu.Unlock()
		if _, err := dst.Write(frame); err != nil {
			return
		}
	}
}

// recorded returns the frames of every connection so far.
func (r *relay) recorded() []relayed {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]relayed, len(r.conns))
	for i, c := range r.conns {
		out[i] = relayed{up: slices.Clone(c.up), down: slices.Clone(c.down)}
	}
	return out
}

// TestRdzvWrongTokenKeepsServing: a rank with another token (or none) is
// refused with ErrAuth at once, after one error frame in clear and nothing
// else (no noise2: the server proves nothing to it); the server logs it
// and completes the job of the ranks that have the token.
func TestRdzvWrongTokenKeepsServing(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ts := startServer(t, nil, ServerConfig{Size: 2, JobID: "j", Token: "right"})
	first := runRanks(ctx, ts.url, "right", "j", 2, []int{0}, nil, nil)
	waitFor(t, "rank 0", func() bool { return slices.Equal(ts.Missing(), []int{1}) })
	for _, tok := range []string{"wrong", ""} {
		tb, err := Exchange(ctx, ts.url, tok, Card{JobID: "j", Rank: 1, Size: 2, Data: cardData(1)})
		var re *RefusedError
		if !errors.As(err, &re) || !errors.Is(err, ErrAuth) || tb != nil ||
			!strings.Contains(err.Error(), "authentication failed: the rank at 127.0.0.1:") || !strings.Contains(err.Error(), TokenEnv) {
			t.Fatalf("token %q: %q, %v", tok, tb, err)
		}
	}
	// By hand: the answer to a noise1 under another token is one clear
	// error frame, code auth, then the end of the connection.
	c, hello := dialHello(t, ts.url)
	st, err := newState(true, hello, []byte("wrong"))
	if err != nil {
		t.Fatal(err)
	}
	msg1, _, _, _ := st.WriteMessage([]byte{version}, nil)
	writeFrame(c, tNoise1, msg1)
	typ, body, err := readFrame(c, maxErrorLen)
	if err != nil || typ != tError || len(body) < 1 || body[0] != codeAuth {
		t.Fatalf("answer to a wrong token: type %d %q, %v", typ, body, err)
	}
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("more after the error frame: %d bytes, %v", n, err)
	}
	if got := strings.Count(ts.log.String(), "does not have the server's token"); got != 3 {
		t.Errorf("%d refusals logged, want 3:\n%s", got, ts.log)
	}
	tb, err := Exchange(ctx, ts.url, "right", Card{JobID: "j", Rank: 1, Size: 2, Data: cardData(1)})
	if err != nil || !sameTable(tb, wantTable(2)) {
		t.Fatalf("rank 1: %q, %v", tb, err)
	}
	if res := <-first; res.err != nil || !sameTable(res.table, wantTable(2)) {
		t.Fatalf("rank 0: %q, %v", res.table, res.err)
	}
	if err := ts.serveResult(t); err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// impostor serves one connection on a loopback port with script, then
// reads until the rank closes it; it returns the url.
func impostor(t *testing.T, script func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(15 * time.Second))
		script(c)
		io.Copy(io.Discard, c)
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return "tcp://" + ln.Addr().String()
}

// TestRdzvImpostor: a server that does not know the token cannot make a
// rank accept a table, whatever it sends after the rank's noise1: a noise2
// of a handshake under a guessed token (or none) followed by a sealed
// table, random bytes, a table in clear or sealed in place of noise2, or
// the server's side of a real exchange replayed. The rank refuses at once
// (no retry), and says that the server does not prove it knows the token
// when the noise2 does not decrypt.
func TestRdzvImpostor(t *testing.T) {
	card := Card{JobID: "j", Rank: 0, Size: 1, Data: []byte("mine")}
	table := encodeTable([][]byte{card.Data})

	// The server's side of a real exchange of this very card, recorded.
	ts := startServer(t, nil, ServerConfig{Size: 1, JobID: "j", Token: "tok"})
	rl := startRelay(t, ts.url, nil)
	if tb, err := Exchange(mustTimeout(t, 10*time.Second), rl.url, "tok", card); err != nil || !sameTable(tb, [][]byte{card.Data}) {
		t.Fatalf("recording: %q, %v", tb, err)
	}
	if err := ts.serveResult(t); err != nil {
		t.Fatal(err)
	}
	rec := rl.recorded()
	if len(rec) != 1 || len(rec[0].down) < 4 {
		t.Fatalf("recorded %d connections", len(rec))
	}
	replay := rec[0].down

	// guessed is the noise2 of a handshake the impostor runs with itself
	// under token guess, and the server's cipher of that handshake.
	guessed := func(t *testing.T, hello []byte, guess string) ([]byte, func(typ byte, body []byte) []byte) {
		ini, err := newState(true, hello, []byte(guess))
		if err != nil {
			t.Error(err)
		}
		resp, _ := newState(false, hello, []byte(guess))
		msg1, _, _, _ := ini.WriteMessage(nil, nil)
		if _, _, _, err := resp.ReadMessage(nil, msg1); err != nil {
			t.Error(err)
		}
		msg2, _, cs2, err := resp.WriteMessage(nil, nil)
		if err != nil {
			t.Error(err)
		}
		send := hs.NewCipher(cs2)
		return msg2, func(typ byte, body []byte) []byte {
			var b bytes.Buffer
			writeSealed(&b, send, typ, body)
			return b.Bytes()
		}
	}
	// start sends the hello and reads the rank's noise1.
	start := func(c net.Conn) []byte {
		hello := helloBody()
		writeFrame(c, tHello, hello)
		readFrame(c, noise1Len)
		return hello
	}
	cases := []struct {
		name   string
		script func(t *testing.T, c net.Conn)
		want   string
		auth   bool
	}{
		{"noise2 under another token", func(t *testing.T, c net.Conn) {
			msg2, seal := guessed(t, start(c), "guess")
			writeFrame(c, tNoise2, msg2)
			c.Write(seal(tStatus, status{registered: 1, size: 1}.encode()))
			c.Write(seal(tTable, table))
		}, "does not prove it knows this rank's token", true},
		{"noise2 under no token", func(t *testing.T, c net.Conn) {
			msg2, seal := guessed(t, start(c), "")
			writeFrame(c, tNoise2, msg2)
			c.Write(seal(tTable, table))
		}, "does not prove it knows this rank's token", true},
		{"random noise2", func(t *testing.T, c net.Conn) {
			start(c)
			msg2 := make([]byte, noiseMsgLen)
			for i := range msg2 {
				msg2[i] = byte(i*37 + 11)
			}
			writeFrame(c, tNoise2, msg2)
			writeFrame(c, tTable, table)
		}, "does not prove it knows this rank's token", true},
		{"table in clear", func(t *testing.T, c net.Conn) {
			start(c)
			writeFrame(c, tTable, table)
		}, "protocol error: frame type 6", false},
		{"sealed table in place of noise2", func(t *testing.T, c net.Conn) {
			_, seal := guessed(t, start(c), "guess")
			c.Write(seal(tTable, table))
		}, "protocol error: frame type 9", false},
		{"replayed server", func(t *testing.T, c net.Conn) {
			c.Write(replay[0])
			readFrame(c, noise1Len)
			for _, f := range replay[1:] {
				c.Write(f)
			}
		}, "does not prove it knows this rank's token", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := impostor(t, func(c net.Conn) { tc.script(t, c) })
			start := time.Now()
			tb, err := Exchange(mustTimeout(t, 10*time.Second), url, "tok", card)
			var re *RefusedError
			if tb != nil || !errors.As(err, &re) || errors.Is(err, ErrAuth) != tc.auth || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%q, %v; want a refusal with %q (auth %v)", tb, err, tc.want, tc.auth)
			}
			if tc.auth && !strings.Contains(err.Error(), TokenEnv) {
				t.Errorf("%v does not name %s", err, TokenEnv)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("a refusal was retried (%v)", d)
			}
		})
	}
}

// TestRdzvTamperedFrame: a relay on the way that flips one byte of a
// sealed frame after the handshake (the card, a status, the table, or the
// acknowledgement) never makes a rank take altered data: the rank is
// refused at once with ErrAuth (the server tells it, or it finds it
// itself), or, when only its acknowledgement was altered, has the right
// table. The server logs the frames that do not open, survives, and
// completes the job when the rank tries again.
func TestRdzvTamperedFrame(t *testing.T) {
	for _, tc := range []struct {
		name     string
		toServer bool
		n        int                    // the frame of that direction: 0 noise1 or hello, then 1 card or noise2...
		at       func(frame []byte) int // the byte to flip
		refused  bool
	}{
		{"card", true, 1, func(f []byte) int { return len(f) / 2 }, true},
		{"status", false, 2, func(f []byte) int { return 5 }, true},         // the inner type, sealed
		{"table", false, 3, func(f []byte) int { return len(f) - 1 }, true}, // the tag
		{"ack", true, 2, func(f []byte) int { return 6 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			ts := startServer(t, nil, ServerConfig{Size: 3, JobID: "tamper", Token: "tok"})
			var flipped atomic.Int32
			rl := startRelay(t, ts.url, func(conn int, toServer bool, n int, frame []byte) {
				if conn == 0 && toServer == tc.toServer && n == tc.n {
					if frame[4] != tSealed {
						t.Errorf("frame %d is of type %d, not sealed", n, frame[4])
						return
					}
					frame[tc.at(frame)] ^= 0x20
					flipped.Add(1)
				}
			})
			others := runRanks(ctx, ts.url, "tok", "tamper", 3, []int{0, 1}, nil, nil)
			waitFor(t, "ranks 0 and 1", func() bool { return slices.Equal(ts.Missing(), []int{2}) })
			// Rank 2 registers last: its frames from the server are a
			// status, then the table.
			card := Card{JobID: "tamper", Rank: 2, Size: 3, Data: []byte("rank two's card")}
			want := wantTable(3)
			want[2] = card.Data
			start := time.Now()
			tb, err := Exchange(ctx, rl.url, "tok", card)
			// The rank may be done before its acknowledgement has gone
			// through the relay.
			waitFor(t, "the relay to flip a byte", func() bool { return flipped.Load() > 0 })
			if n := flipped.Load(); n != 1 {
				t.Fatalf("the relay flipped %d frames", n)
			}
			if tc.refused {
				var re *RefusedError
				if tb != nil || !errors.As(err, &re) || !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "does not open") {
					t.Fatalf("through the relay: %q, %v; want a refusal with ErrAuth", tb, err)
				}
				if d := time.Since(start); d > 5*time.Second {
					t.Errorf("a refusal was retried (%v)", d)
				}
			} else if err != nil || !sameTable(tb, want) {
				t.Fatalf("through the relay: %q, %v", tb, err)
			}
			if tc.toServer {
				waitFor(t, "the server's log", func() bool {
					return strings.Contains(ts.log.String(), "refused a rank") && strings.Contains(ts.log.String(), "does not open")
				})
			}
			// The rank again, not through the relay: the job completes.
			if tb, err := Exchange(ctx, ts.url, "tok", card); err != nil || !sameTable(tb, want) {
				t.Fatalf("rank 2 again: %q, %v", tb, err)
			}
			for range 2 {
				if res := <-others; res.err != nil || !sameTable(res.table, want) {
					t.Fatalf("rank %d: %q, %v", res.rank, res.table, res.err)
				}
			}
			if err := ts.serveResult(t); err != nil {
				t.Fatalf("Serve: %v", err)
			}
		})
	}
}

// TestRdzvConfidential: on the wire, a tcp:// exchange shows the hello,
// noise1 and noise2 in clear, then only sealed frames of the sizes
// doc.go gives; no card's data, no job id and no token appear.
func TestRdzvConfidential(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	const (
		n     = 3
		job   = "job-id-3f9c2e71-confidential"
		token = "token-8d41b0aa-confidential"
	)
	ts := startServer(t, nil, ServerConfig{Size: n, JobID: job, Token: token})
	rl := startRelay(t, ts.url, nil)
	data := func(r int) []byte { return fmt.Appendf(nil, "CARD-PAYLOAD-rank-%d-a7e19b04c5", r) }
	want := make([][]byte, n)
	done := make(chan error, n)
	for r := range n {
		want[r] = data(r)
		go func() {
			tb, err := Exchange(ctx, rl.url, token, Card{JobID: job, Rank: r, Size: n, Data: data(r)})
			if err == nil && !sameTable(tb, want) {
				err = fmt.Errorf("rank %d: table %q", r, tb)
			}
			done <- err
		}()
	}
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := ts.serveResult(t); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	secrets := [][]byte{[]byte(job), []byte(token), []byte("CARD-PAYLOAD")}
	for r := range n {
		secrets = append(secrets, data(r))
	}
	tableLen := len(encodeTable(want))
	rec := rl.recorded()
	if len(rec) != n {
		t.Fatalf("%d connections through the relay, want %d", len(rec), n)
	}
	for i, c := range rec {
		wire := bytes.Join(append(slices.Clone(c.up), c.down...), nil)
		if !bytes.Contains(wire, []byte("MRDZ\x02")) {
			t.Fatalf("connection %d: no hello recorded", i)
		}
		for _, s := range secrets {
			if bytes.Contains(wire, s) {
				t.Errorf("connection %d: %q in clear on the wire", i, s)
			}
		}
		// rank → server: noise1, the card, the acknowledgement.
		if len(c.up) != 3 {
			t.Fatalf("connection %d: %d frames from the rank, want 3", i, len(c.up))
		}
		if f := c.up[0]; len(f) != 4+noise1Len || binary.BigEndian.Uint32(f) != 50 || f[4] != 2 || f[5] != 2 {
			t.Errorf("connection %d: noise1 % x", i, f[:min(len(f), 8)])
		}
		cardLen := len(appendCardBody(nil, Card{JobID: job, Rank: 0, Size: n, Data: data(0)}))
		if f := c.up[1]; f[4] != tSealed || len(f) != 4+1+1+cardLen+16 {
			t.Errorf("connection %d: card frame of type %d, %d bytes", i, f[4], len(f))
		}
		if f := c.up[2]; f[4] != tSealed || len(f) != 4+1+1+16 {
			t.Errorf("connection %d: ack frame of type %d, %d bytes", i, f[4], len(f))
		}
		// server → rank: hello, noise2, status frames, the table.
		if len(c.down) < 4 {
			t.Fatalf("connection %d: %d frames from the server", i, len(c.down))
		}
		if f := c.down[0]; !bytes.Equal(f, []byte("\x00\x00\x00\x06\x01MRDZ\x02")) {
			t.Errorf("connection %d: hello % x", i, f)
		}
		if f := c.down[1]; len(f) != 4+noise2Len || binary.BigEndian.Uint32(f) != 49 || f[4] != 3 {
			t.Errorf("connection %d: noise2 % x", i, f[:min(len(f), 8)])
		}
		for j, f := range c.down[2:] {
			if f[4] != tSealed {
				t.Errorf("connection %d: frame %d of type %d after the handshake", i, j+2, f[4])
			}
		}
		if f := c.down[len(c.down)-1]; len(f) != 4+1+1+tableLen+16 {
			t.Errorf("connection %d: table frame of %d bytes, want %d", i, len(f), 4+1+1+tableLen+16)
		}
	}
}

// TestRdzvVersion: a server of version 1 (its hello has a nonce) and a
// rank of another version are told which versions meet.
func TestRdzvVersion(t *testing.T) {
	url := impostor(t, func(c net.Conn) {
		writeFrame(c, tHello, append([]byte("MRDZ\x01"), make([]byte, 32)...))
	})
	_, err := Exchange(mustTimeout(t, 10*time.Second), url, "tok", Card{Rank: 0, Size: 1})
	var re *RefusedError
	if !errors.As(err, &re) || errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "the server speaks rendezvous protocol version 1, this rank version 2") {
		t.Fatalf("version 1 server: %v", err)
	}

	ts := startServer(t, nil, ServerConfig{Size: 1, Token: "tok"})
	c, hello := dialHello(t, ts.url)
	st, _ := newState(true, hello, []byte("tok"))
	msg1, _, _, _ := st.WriteMessage([]byte{3}, nil)
	writeFrame(c, tNoise1, msg1)
	typ, body, err := readFrame(c, maxErrorLen)
	if err != nil || typ != tError || body[0] != codeProtocol || !strings.Contains(string(body), "speaks rendezvous protocol version 3, this server version 2") {
		t.Fatalf("version 3 rank: type %d %q, %v", typ, body, err)
	}
}

// dialHello connects to the server at url as a rank would (closed when
// the test ends, a 10 s deadline) and returns the connection and the body
// of the server's hello.
func dialHello(t *testing.T, url string) (net.Conn, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	_, hello, err := readFrame(c, helloLen)
	if err != nil {
		t.Fatal(err)
	}
	return c, hello
}
