package handshake

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flynn/noise"

	"github.com/multirail/multirail/internal/wire"
)

// The inputs of the test vectors in docs/wire.md.
var (
	vecToken   = []byte("multirail test vector token")
	vecSession = [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	vecHello   = wire.Hello{Version: wire.Version, Rail: 0, Rails: 2, Session: vecSession, SegmentSize: 64 << 10, Window: 1 << 30, MaxMessage: 1 << 24}
	vecChall   = wire.Challenge{SegmentSize: 64 << 10, Window: 1 << 30, MaxMessage: 1 << 24}
	// The ephemeral private keys: 32 bytes of 0x11 (dialer), of 0x22
	// (acceptor).
	vecDialerE   = bytes.Repeat([]byte{0x11}, 32)
	vecAcceptorE = bytes.Repeat([]byte{0x22}, 32)
)

// recorder keeps what is written to a connection.
type recorder struct {
	net.Conn
	mu  sync.Mutex
	out bytes.Buffer
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.out.Write(p)
	r.mu.Unlock()
	return r.Conn.Write(p)
}

func (r *recorder) take() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := append([]byte(nil), r.out.Bytes()...)
	r.out.Reset()
	return b
}

// handshakeVectors runs this package's Dial and Accept over a pipe with
// the vectors' ephemeral keys and returns the bytes each side wrote, and
// the keys.
func handshakeVectors(t *testing.T) (hello, challenge, auth, welcome, ping []byte, dk, ak *Keys) {
	t.Helper()
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	d, a := &recorder{Conn: c1}, &recorder{Conn: c2}
	deadline := time.Now().Add(5 * time.Second)
	type res struct {
		k   *Keys
		err error
	}
	done := make(chan res, 1)
	go func() {
		acc := Acceptor{Key: func(wire.Hello) ([32]byte, error) { return TokenKey(vecToken), nil }}
		_, k, err := accept(a, acc, vecChall, deadline, bytes.NewReader(vecAcceptorE))
		if err == nil {
			err = Welcome(a, k, deadline)
		}
		done <- res{k, err}
	}()
	_, dk, err := dial(d, vecHello, TokenKey(vecToken), deadline, bytes.NewReader(vecDialerE))
	if err != nil {
		t.Fatal(err)
	}
	if err := WaitWelcome(d, dk, deadline); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	up, down := d.take(), a.take()
	hello = up[:wire.HeaderSize+wire.HelloSize]
	auth = up[len(hello):]
	challenge = down[:wire.HeaderSize+wire.ChallengeSize]
	welcome = down[len(challenge):]
	ping = SealFrames(dk.Send, nil, wire.AppendPing(nil))
	return hello, challenge, auth, welcome, ping, dk, r.k
}

// TestVectors checks the handshake of docs/wire.md's test vectors three
// ways: this package's Dial and Accept, the Noise library driven directly
// from the document's description, and the hex printed in the document.
func TestVectors(t *testing.T) {
	hello, challenge, auth, welcome, ping, dk, ak := handshakeVectors(t)
	if dk.Session != ak.Session {
		t.Fatal("the two sides derived different session keys")
	}

	// The Noise library on its own: protocol name, prologue = the HELLO's
	// clear prefix, PSK at position 0, payloads = the parameters.
	suite := noise.NewCipherSuite(noise.DH25519, noise.CipherAESGCM, noise.HashSHA256)
	if got := string(noise.HandshakeNN.Name); "Noise_"+got+"psk0_"+string(suite.Name()) != Protocol {
		t.Fatalf("Protocol = %q, the library names it Noise_%spsk0_%s", Protocol, got, suite.Name())
	}
	m := hmac.New(sha256.New, vecToken)
	m.Write([]byte("multirail/4 token"))
	psk := m.Sum(nil)
	prologue := hello[wire.HeaderSize : wire.HeaderSize+wire.HelloPrefixSize]
	ini, err := noise.NewHandshakeState(noise.Config{CipherSuite: suite, Random: bytes.NewReader(vecDialerE), Pattern: noise.HandshakeNN,
		Initiator: true, Prologue: prologue, PresharedKey: psk, PresharedKeyPlacement: 0})
	if err != nil {
		t.Fatal(err)
	}
	res, err := noise.NewHandshakeState(noise.Config{CipherSuite: suite, Random: bytes.NewReader(vecAcceptorE), Pattern: noise.HandshakeNN,
		Prologue: prologue, PresharedKey: psk, PresharedKeyPlacement: 0})
	if err != nil {
		t.Fatal(err)
	}
	msg1, _, _, err := ini.WriteMessage(nil, wire.AppendHelloParams(nil, vecHello))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := res.ReadMessage(nil, msg1); err != nil {
		t.Fatal(err)
	}
	msg2, rRecv, rSend, err := res.WriteMessage(nil, wire.AppendChallengeParams(nil, vecChall))
	if err != nil {
		t.Fatal(err)
	}
	_, iSend, iRecv, err := ini.ReadMessage(nil, msg2)
	if err != nil {
		t.Fatal(err)
	}
	m = hmac.New(sha256.New, ini.ChannelBinding())
	m.Write([]byte("multirail/4 session"))
	session := m.Sum(nil)
	lib := map[string][]byte{
		"token key":   psk,
		"HELLO":       append(append([]byte{wire.TypeHello, 0, 0, 0, 0, 0, 0, wire.HelloSize}, prologue...), msg1...),
		"CHALLENGE":   append([]byte{wire.TypeChallenge, 0, 0, 0, 0, 0, 0, wire.ChallengeSize}, msg2...),
		"session key": session,
	}
	authBody, err := iSend.Encrypt(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	lib["AUTH"] = append([]byte{wire.TypeAuth, 0, 0, 0, 0, 0, 0, wire.AuthSize}, authBody...)
	welcomeBody, err := rSend.Encrypt(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	lib["WELCOME"] = append([]byte{wire.TypeWelcome, 0, 0, 0, 0, 0, 0, wire.WelcomeSize}, welcomeBody...)
	pingRec, err := iSend.Encrypt(nil, nil, wire.AppendPing(nil))
	if err != nil {
		t.Fatal(err)
	}
	lib["first sealed frame (PING)"] = pingRec
	// The other direction opens: the library's keys are the package's.
	if _, err := rRecv.Decrypt(nil, nil, authBody); err != nil {
		t.Fatalf("the responder's receive key does not open the initiator's AUTH: %v", err)
	}
	if _, err := iRecv.Decrypt(nil, nil, welcomeBody); err != nil {
		t.Fatalf("the initiator's receive key does not open the WELCOME: %v", err)
	}

	tk := TokenKey(vecToken)
	ours := map[string][]byte{
		"token key": tk[:], "HELLO": hello, "CHALLENGE": challenge, "session key": dk.Session[:],
		"AUTH": auth, "WELCOME": welcome, "first sealed frame (PING)": ping,
	}
	doc, err := os.ReadFile("../../docs/wire.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(doc)), "")
	for name, want := range lib {
		got := ours[name]
		if !bytes.Equal(got, want) {
			t.Errorf("%s: this package %x, the Noise library %x", name, got, want)
			continue
		}
		if !strings.Contains(text, hex.EncodeToString(got)) {
			t.Errorf("%s: docs/wire.md does not print %x", name, got)
		}
	}
}
