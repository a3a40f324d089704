package multirail

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hs "github.com/multirail/multirail/internal/handshake"
	"github.com/multirail/multirail/internal/wire"
)

// onPath is a TCP relay between a rail's two ends that can attack the
// bytes it forwards, once, when armed: flip one bit of what goes up (from
// the dialer), replay up what it saw going up earlier, or inject a forged
// ACK frame going down. It records the first bytes each of its
// connections sent up (the handshake).
type onPath struct {
	ln     net.Listener
	target string

	attack atomic.Int32 // the armed attack, 0 when none (see the constants)
	fired  chan struct{}

	mu      sync.Mutex
	records [][]byte // per connection: its first recordMax bytes up
	conns   []net.Conn
	wg      sync.WaitGroup
}

const (
	attackFlip = iota + 1
	attackReplay
	attackForgedAck
)

const recordMax = 64 << 10

func newOnPath(t *testing.T, target string) *onPath {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &onPath{ln: ln, target: target, fired: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *onPath) addr() string { return p.ln.Addr().String() }

func (p *onPath) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			down.Close()
			continue
		}
		p.mu.Lock()
		idx := len(p.records)
		p.records = append(p.records, nil)
		p.conns = append(p.conns, down, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pump(down, up, idx, true)
		go p.pump(up, down, idx, false)
	}
}

// pump copies src to dst (up: from the dialer), recording and attacking
// on the way; when either side ends, both do.
func (p *onPath) pump(src, dst net.Conn, idx int, up bool) {
	defer p.wg.Done()
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			b := buf[:n]
			if up {
				p.mu.Lock()
				if rec := p.records[idx]; len(rec) < recordMax {
					p.records[idx] = append(rec, b[:min(n, recordMax-len(rec))]...)
				}
				p.mu.Unlock()
			}
			if extra, ok := p.strike(idx, up, b); ok {
				if _, err := dst.Write(extra); err != nil {
					return
				}
			}
			if _, err := dst.Write(b); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// handshakeBytes is what a dialer sends up before its first frame: HELLO
// and AUTH.
const handshakeBytes = wire.HeaderSize + wire.HelloSize + wire.HeaderSize + wire.AuthSize

// strike runs the armed attack on b, a chunk going up or down on
// connection idx, if it applies there: it alters b in place or returns
// bytes to write before it.
func (p *onPath) strike(idx int, up bool, b []byte) ([]byte, bool) {
	a := p.attack.Load()
	switch {
	case a == 0:
		return nil, false
	case (a == attackForgedAck) == up:
		return nil, false
	}
	var extra []byte
	if a == attackReplay {
		p.mu.Lock()
		rec := p.records[idx]
		p.mu.Unlock()
		if len(rec) <= handshakeBytes {
			return nil, false // nothing past the handshake recorded yet
		}
		extra = append([]byte(nil), rec[handshakeBytes:]...)
	}
	if !p.attack.CompareAndSwap(a, 0) {
		return nil, false
	}
	switch a {
	case attackFlip:
		b[len(b)/2] ^= 0x10
	case attackForgedAck:
		// The peer "received" everything, with credit for a terabyte.
		extra = wire.AppendAck(nil, wire.Ack{Received: 1 << 40, Credit: 1 << 40})
	}
	close(p.fired)
	return extra, extra != nil
}

func (p *onPath) record(i int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]byte(nil), p.records[i]...)
}

func (p *onPath) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// sealedPair is a sealed two-rail session whose rails both pass a relay
// that can attack them.
func sealedPair(t *testing.T) (a, b *Conn, relays []*onPath) {
	return relayedPair(t, false)
}

// relayedPair is a two-rail session, in clear or sealed, whose rails both
// pass a relay that can attack them.
func relayedPair(t *testing.T, plaintext bool) (a, b *Conn, relays []*onPath) {
	t.Helper()
	cfg := Config{Token: "on-path test token", SegmentSize: 16 << 10, RailTimeout: 200 * time.Millisecond, Plaintext: plaintext}
	ln, err := Listen("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	for i := range 2 {
		relays = append(relays, newOnPath(t, ln.Addr().String()))
		cfg.Rails = append(cfg.Rails, Rail{Name: []string{"clean", "attacked"}[i], Addr: relays[i].addr()})
	}
	a, b = dialAndAccept(t, ln, cfg)
	return a, b, relays
}

// TestSealedOnPathAttacks: a byte flipped in transit, a recorded frame
// replayed, a forged ACK injected: the data still arrives whole and in
// order (and Send never returns for data that did not arrive), the
// attacked rail goes down on the side that read the attack, naming the
// failed authentication, and the session carries on and gets the rail
// back.
func TestSealedOnPathAttacks(t *testing.T) {
	for _, c := range []struct {
		name   string
		attack int32
		victim string // the side whose reader meets the attack
	}{
		{"flipped byte", attackFlip, "acceptor"},
		{"replayed frames", attackReplay, "acceptor"},
		{"forged ACK", attackForgedAck, "dialer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b, relays := sealedPair(t)
			if a.plaintext || b.plaintext {
				t.Fatal("the session is not sealed")
			}
			victim := b
			if c.victim == "dialer" {
				victim = a
			}
			transfer(t, a, b, 80, 4, 256<<10, func() { relays[1].attack.Store(c.attack) })
			select {
			case <-relays[1].fired:
			case <-time.After(10 * time.Second):
				t.Fatal("the attack never fired: no traffic on the attacked rail after it was armed")
			}
			waitLong(t, "the attacked rail down on the "+c.victim+"'s side for a frame that does not open", func() bool {
				st := victim.Stats().Rails[1]
				return st.Errors > 0 && strings.Contains(st.LastError, "does not open")
			})
			if st := victim.Stats().Rails[0]; st.Errors != 0 {
				t.Errorf("the clean rail failed too: %+v", st)
			}
			checkRejoined(t, a, b, 1, false)
		})
	}
}

// TestSealedHandshakeReplay: the recorded handshakes of both rails of a
// live session, replayed to the listener from new connections, open
// nothing: the first rail's is refused (its session id is in use), the
// second's too (no session is joining under that id), and the session
// carries on.
func TestSealedHandshakeReplay(t *testing.T) {
	a, b, relays := sealedPair(t)
	transfer(t, a, b, 8, 2, 64<<10, nil)
	target := relays[0].target
	for i, r := range relays {
		rec := r.record(0)
		if len(rec) < handshakeBytes {
			t.Fatalf("rail %d: only %d bytes recorded", i, len(rec))
		}
		c, err := net.Dial("tcp", target)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(rec[:handshakeBytes]); err != nil {
			t.Fatal(err)
		}
		h, body, err := readHsFrame(c)
		c.Close()
		if err != nil {
			t.Fatalf("rail %d: replayed handshake: %v, want a REJECT", i, err)
		}
		if h.Type != wire.TypeReject {
			t.Fatalf("rail %d: replayed handshake answered with frame type %#x, want REJECT", i, h.Type)
		}
		rj, _ := wire.ParseReject(body)
		if rj.Code != wire.RejectSession {
			t.Errorf("rail %d: REJECT %d %q, want code %d (session)", i, rj.Code, rj.Reason, wire.RejectSession)
		}
	}
	transfer(t, a, b, 8, 2, 64<<10, nil)
}

// TestRejoinNeedsSessionKey: a token holder who is not the session's
// dialer cannot rejoin (take over) a rail of it: the rejoin's handshake
// runs under the session key, which the token does not give. The
// session carries on.
func TestRejoinNeedsSessionKey(t *testing.T) {
	const tok = "shared by many"
	ln, err := Listen("127.0.0.1:0", Config{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, b := dialAndAccept(t, ln, Config{Token: tok, Rails: []Rail{{Addr: ln.Addr().String()}, {Addr: ln.Addr().String()}}})
	h := wire.Hello{Version: wire.Version, Flags: wire.HelloRejoin, Rail: 1, Rails: 2, Session: a.session,
		SegmentSize: uint32(a.cfg.SegmentSize), Window: uint64(a.cfg.MaxReceiveBuffer), MaxMessage: uint64(a.cfg.MaxMessageSize)}
	for _, k := range []struct {
		name string
		psk  [32]byte
	}{{"token's key", hs.TokenKey([]byte(tok))}, {"another session's key", hs.SessionKey([]byte("not this one"))}} {
		code, err := helloUnderKey(rawDial(t, ln), h, k.psk)
		if err != nil {
			t.Fatalf("rejoin under the %s: %v", k.name, err)
		}
		if code != wire.RejectAuth {
			t.Errorf("rejoin under the %s: REJECT code %d, want %d (authentication)", k.name, code, wire.RejectAuth)
		}
	}
	if st := b.Stats().Rails[1]; st.Rejoins != 0 || !st.Up {
		t.Fatalf("the refused rejoins touched the rail: %+v", st)
	}
	transfer(t, a, b, 8, 2, 64<<10, nil)
}

// TestAcceptorSilentToWrongKey: a HELLO under a key the acceptor does not
// share gets a REJECT and nothing else: no CHALLENGE to test guesses of
// the token against.
func TestAcceptorSilentToWrongKey(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", Config{Token: "the right one"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := rawDial(t, ln)
	h := hostileHello(0x30)
	h.Flags = 0
	code, err := helloUnderKey(c, h, hs.TokenKey([]byte("a guess")))
	if err != nil {
		t.Fatal(err)
	}
	if code != wire.RejectAuth {
		t.Fatalf("REJECT code %d, want %d", code, wire.RejectAuth)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	rest, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		t.Fatalf("after the REJECT: %v", err)
	}
	if len(rest) != 0 {
		t.Fatalf("the acceptor sent %d more bytes after its REJECT: %x", len(rest), rest[:min(len(rest), 32)])
	}
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "reset by peer") || errors.Is(err, io.ErrUnexpectedEOF))
}

// TestSealedNothingInClear: with sealing on, a message's bytes never
// appear on the wire as they are; with Plaintext on both sides they do
// (which shows that the relay sees the data at all).
func TestSealedNothingInClear(t *testing.T) {
	for _, plaintext := range []bool{false, true} {
		a, b, relays := relayedPair(t, plaintext)
		if a.plaintext != plaintext || b.plaintext != plaintext {
			t.Fatalf("Plaintext %v on both sides, but the session says %v and %v", plaintext, a.plaintext, b.plaintext)
		}
		secret := bytes.Repeat([]byte("attack at dawn; "), 64)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for range 8 {
			if err := a.Send(ctx, 5, secret); err != nil {
				t.Fatal(err)
			}
			m, err := b.Recv(ctx)
			if err != nil || !bytes.Equal(m.Data, secret) {
				t.Fatalf("Recv = %d bytes, %v", len(m.Data), err)
			}
		}
		cancel()
		seen, carried := false, 0
		for _, r := range relays {
			rec := r.record(0)
			carried += max(0, len(rec)-handshakeBytes)
			seen = seen || bytes.Contains(rec, []byte("attack at dawn"))
		}
		if carried < 8*len(secret) {
			t.Fatalf("plaintext %v: the relays saw %d bytes past the handshakes, want at least %d", plaintext, carried, 8*len(secret))
		}
		if seen != plaintext {
			t.Fatalf("plaintext %v: message seen in clear on the wire: %v", plaintext, seen)
		}
	}
}

// TestPlaintextNeedsBothSides: frames go in clear only when both sides ask
// (Config.Plaintext); one side alone gets a sealed session, and the two
// sides agree on it.
func TestPlaintextNeedsBothSides(t *testing.T) {
	for _, c := range []struct{ listener, dialer, want bool }{
		{false, false, false}, {true, false, false}, {false, true, false}, {true, true, true},
	} {
		ln, err := Listen("127.0.0.1:0", Config{Plaintext: c.listener})
		if err != nil {
			t.Fatal(err)
		}
		a, b := dialAndAccept(t, ln, Config{Plaintext: c.dialer, Rails: []Rail{{Addr: ln.Addr().String()}, {Addr: ln.Addr().String()}}})
		ln.Close()
		if a.plaintext != c.want || b.plaintext != c.want {
			t.Errorf("listener %v, dialer %v: plaintext %v and %v, want %v on both", c.listener, c.dialer, a.plaintext, b.plaintext, c.want)
		}
		for i, r := range a.rails {
			if sealed := r.w.seal != nil && r.rs.open != nil; sealed == c.want {
				t.Errorf("listener %v, dialer %v: rail %d sealed %v", c.listener, c.dialer, i, sealed)
			}
		}
		transfer(t, a, b, 8, 2, 64<<10, nil)
	}
}

// TestSealedHostilePeer: in a sealed session, a frame the peer sealed
// properly is checked exactly as in clear (a DATA frame announcing a
// 1 TiB message ends the session as a protocol violation), while bytes
// that do not open, whoever wrote them, only take the rail down.
func TestSealedHostilePeer(t *testing.T) {
	const tok = "sealed hostile peer test token"
	// No SessionGrace: the session ends with its only rail.
	ln, err := Listen("127.0.0.1:0", Config{Token: tok, MaxMessageSize: 1 << 20, SessionGrace: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		name  string
		write func(keys *hs.Keys, h wire.Hello) []byte
		want  error
	}{
		{"sealed 1 TiB announcement", func(keys *hs.Keys, h wire.Hello) []byte {
			frame := append(dataHeader(h, 1, 1<<40, 0, 4096), make([]byte, 4096)...)
			return hs.SealFrames(keys.Send, nil, frame)
		}, ErrProtocol},
		{"garbage that does not open", func(*hs.Keys, wire.Hello) []byte {
			return bytes.Repeat([]byte{0xff}, 64)
		}, ErrAllRailsDown},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := hostileHello(0x40)
			h.Flags = 0 // sealed
			h.Session[4] = byte(len(c.name))
			type res struct {
				c   *Conn
				err error
			}
			acc := make(chan res, 1)
			go func() { sc, err := ln.Accept(ctx); acc <- res{sc, err} }()
			raw := rawDial(t, ln)
			deadline := time.Now().Add(5 * time.Second)
			_, keys, err := hs.Dial(raw, h, hs.TokenKey([]byte(tok)), deadline)
			if err == nil {
				err = hs.WaitWelcome(raw, keys, deadline)
			}
			if err != nil || keys.Plaintext {
				t.Fatalf("handshake: %v (plaintext %v)", err, keys != nil && keys.Plaintext)
			}
			r := <-acc
			if r.err != nil {
				t.Fatal(r.err)
			}
			defer r.c.Close()
			if _, err := raw.Write(c.write(keys, h)); err != nil {
				t.Fatal(err)
			}
			_, err = r.c.Recv(ctx)
			if !errors.Is(err, c.want) {
				t.Fatalf("Recv after the attack: %v, want %v", err, c.want)
			}
			if c.want == ErrAllRailsDown && !strings.Contains(err.Error(), "does not open") {
				t.Fatalf("rail down with %v, want a record that does not open", err)
			}
		})
	}
}

// TestSmallMessagesTwoRecords: a small message travels sealed as one SMALL
// frame, its header and its body (two records), with the ACK that is due
// inside it: in a ping-pong over three rails, every record a side sealed
// belongs to a SMALL frame or to a bare ACK (an ACK frame: two records)
// (docs/wire.md, "SMALL"). A DATA frame takes three records, and an ACK
// frame beside it two more.
func TestSmallMessagesTwoRecords(t *testing.T) {
	a, b := pair(t, 3, Config{Token: NewToken()})
	t.Cleanup(func() { a.Close(); b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const rounds = 200
	for i := range rounds {
		if err := a.Send(ctx, 1, []byte{byte(i), 1, 2, 3, 4, 5, 6, 7}); err != nil {
			t.Fatal(err)
		}
		m, err := b.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Send(ctx, 2, m.Data); err != nil {
			t.Fatal(err)
		}
		if m, err = a.Recv(ctx); err != nil || m.Data[0] != byte(i) {
			t.Fatalf("round %d: %v, %v", i, m.Data, err)
		}
	}
	// Closed, nothing writes any more: the counters agree with each other.
	a.Close()
	b.Close()
	for _, c := range []*Conn{a, b} {
		p := c.Stats().Path
		if frames := rounds + p.BareAcks; p.Seals != 2*frames {
			t.Errorf("%d records sealed for %d small messages and %d bare ACKs; want 2 per frame (%d)", p.Seals, rounds, p.BareAcks, 2*frames)
		}
	}
}
