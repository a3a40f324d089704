package handshake

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/flynn/noise"

	"github.com/multirail/multirail/internal/wire"
)

// ErrAuth means the peer does not know the shared token or the session's
// key (or we don't know the peer's), or a sealed frame failed its check.
var ErrAuth = errors.New("handshake: authentication failed")

// RejectedError is returned to the dialing side when the acceptor refused a
// rail; it names the acceptor's reason.
type RejectedError struct {
	Code   uint16
	Reason string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("handshake: peer rejected the rail (code %d): %s", e.Code, e.Reason)
}

// Is lets errors.Is(err, ErrAuth) and errors.Is(err, wire.ErrVersion) see
// through a rejection.
func (e *RejectedError) Is(target error) bool {
	switch target {
	case ErrAuth:
		return e.Code == wire.RejectAuth
	case wire.ErrVersion:
		return e.Code == wire.RejectVersion
	}
	return false
}

// Protocol is the Noise protocol every rail's handshake runs: no static
// keys, ephemeral Curve25519 keys from both sides, and a pre-shared key
// mixed in before the first message (the token for a session's first
// rail, the session key for the others).
const Protocol = "Noise_NNpsk0_25519_AESGCM_SHA256"

// Suite is Protocol's cipher suite.
var Suite = noise.NewCipherSuite(noise.DH25519, noise.CipherAESGCM, noise.HashSHA256)

// Labels of the two keys derived with HMAC-SHA256: from the token, the
// first rail's pre-shared key; from a first rail's handshake hash, the
// session key.
const (
	tokenLabel   = "multirail/4 token"
	sessionLabel = "multirail/4 session"
)

// TokenKey is the pre-shared key of a session's first rail:
// HMAC-SHA256(key = token, "multirail/4 token").
func TokenKey(token []byte) [32]byte { return mac(token, tokenLabel) }

// SessionKey is the key of the session whose first rail's handshake had
// hash h (Noise's channel binding): HMAC-SHA256(key = h,
// "multirail/4 session"). The session's other rails, and rails that later
// rejoin it, use it as their pre-shared key.
func SessionKey(h []byte) [32]byte { return mac(h, sessionLabel) }

func mac(key []byte, label string) [32]byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	return [32]byte(m.Sum(nil))
}

// NewState returns the Noise handshake state of one rail: the initiator
// (the dialing side) or the responder, with prologue (the HELLO's clear
// prefix, so that it cannot be altered unseen) and pre-shared key psk.
// rnd supplies the ephemeral key (nil: crypto/rand).
func NewState(initiator bool, prologue []byte, psk [32]byte, rnd io.Reader) (*noise.HandshakeState, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	return noise.NewHandshakeState(noise.Config{
		CipherSuite:           Suite,
		Random:                rnd,
		Pattern:               noise.HandshakeNN,
		Initiator:             initiator,
		Prologue:              prologue,
		PresharedKey:          psk[:],
		PresharedKeyPlacement: 0,
	})
}

// Cipher seals or opens the frames of one direction of one rail: an AEAD
// (AES-256-GCM) under a key from the rail's handshake, with the count of
// frames so far as the nonce. The rail is a byte stream in order, so a
// frame that is altered, dropped, replayed or moved fails to open.
type Cipher struct {
	aead  cipher.AEAD
	n     uint64
	nonce [12]byte // Noise's AESGCM nonce: 4 zero bytes, then n big-endian
}

// NewCipher returns the Cipher of one direction from a CipherState of
// Noise's Split (what the handshake's last WriteMessage or ReadMessage
// returns: the initiator sends with the first, the responder with the
// second); the count of frames starts at the state's nonce. It lets a
// protocol other than a rail's (the rendezvous, package comm/rdzv) seal
// its frames after a handshake run with NewState. The CipherState must
// not be used after this.
//
// It seals as the state's own Cipher would (Noise's AESGCM, Protocol),
// through crypto/cipher directly so that no call allocates: a frame's
// nonce lives in the Cipher, not in a fresh slice per call.
func NewCipher(cs *noise.CipherState) *Cipher {
	k := cs.UnsafeKey()
	b, err := aes.NewCipher(k[:])
	if err != nil {
		panic("handshake: " + err.Error()) // a 32-byte key always makes a cipher
	}
	aead, err := cipher.NewGCM(b)
	if err != nil {
		panic("handshake: " + err.Error())
	}
	return &Cipher{aead: aead, n: cs.Nonce()}
}

// Overhead is what sealing adds to a frame.
const Overhead = wire.TagSize

// Seal appends the sealed plaintext to dst.
func (c *Cipher) Seal(dst, plaintext []byte) []byte {
	binary.BigEndian.PutUint64(c.nonce[4:], c.n)
	out := c.aead.Seal(dst, c.nonce[:], plaintext, nil)
	c.n++
	return out
}

// Open appends the plaintext of sealed to dst; it fails with an error
// wrapping ErrAuth when sealed is not the next frame of this direction.
// Opening in place (dst = sealed[:0]) is allowed.
func (c *Cipher) Open(dst, sealed []byte) ([]byte, error) {
	binary.BigEndian.PutUint64(c.nonce[4:], c.n)
	out, err := c.aead.Open(dst, c.nonce[:], sealed, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: frame %d does not open", ErrAuth, c.n)
	}
	c.n++
	return out, nil
}

// Keys are what a rail's handshake yields.
type Keys struct {
	Send, Recv *Cipher
	// Session is the session key: derived from this handshake on a
	// session's first rail, the pre-shared key on the others.
	Session [32]byte
	// Plaintext: both sides asked for frames in clear; Send and Recv then
	// seal only the handshake's last two frames (AUTH and WELCOME).
	Plaintext bool
}

// readControl reads one handshake frame with a body of at most
// wire.MaxControlBody bytes.
func readControl(r io.Reader) (wire.Header, []byte, error) {
	var hb [wire.HeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return wire.Header{}, nil, err
	}
	h, err := wire.ParseHeader(hb[:], wire.Limits{})
	if err != nil {
		return h, nil, err
	}
	if h.Type == wire.TypeData || h.Len > wire.MaxControlBody {
		return h, nil, fmt.Errorf("%w: frame type %#x during the handshake", wire.ErrMalformed, h.Type)
	}
	body := make([]byte, h.Len)
	if _, err := io.ReadFull(r, body); err != nil {
		return h, nil, err
	}
	return h, body, nil
}

func rejectErr(body []byte) error {
	rj, err := wire.ParseReject(body)
	if err != nil {
		return err
	}
	return &RejectedError{Code: rj.Code, Reason: rj.Reason}
}

// expect reads the next handshake frame and checks that it has type typ
// (a REJECT becomes a RejectedError).
func expect(c io.Reader, typ uint8, what string) ([]byte, error) {
	h, body, err := readControl(c)
	if err != nil {
		return nil, err
	}
	switch h.Type {
	case typ:
		return body, nil
	case wire.TypeReject:
		return nil, rejectErr(body)
	}
	return nil, fmt.Errorf("%w: expected %s, got frame type %#x", wire.ErrMalformed, what, h.Type)
}

// Dial runs the dialing side of a rail's handshake on c up to its AUTH:
// HELLO (the first Noise message, under psk: TokenKey for a session's
// first rail, the session key for rails with HelloJoin or HelloRejoin),
// the acceptor's CHALLENGE (the second, which proves that it knows psk
// and carries its parameters), then AUTH, the first frame sealed by the
// rail's keys. The acceptor answers with WELCOME once every rail of the
// session has joined (see WaitWelcome). The deadline bounds the exchange.
func Dial(c net.Conn, hello wire.Hello, psk [32]byte, deadline time.Time) (wire.Challenge, *Keys, error) {
	return dial(c, hello, psk, deadline, nil)
}

func dial(c net.Conn, hello wire.Hello, psk [32]byte, deadline time.Time, rnd io.Reader) (wire.Challenge, *Keys, error) {
	var ch wire.Challenge
	if err := c.SetDeadline(deadline); err != nil {
		return ch, nil, err
	}
	prefix := wire.AppendHelloPrefix(nil, hello)
	st, err := NewState(true, prefix, psk, rnd)
	if err != nil {
		return ch, nil, err
	}
	msg1, _, _, err := st.WriteMessage(nil, wire.AppendHelloParams(nil, hello))
	if err != nil {
		return ch, nil, err
	}
	if _, err := c.Write(wire.AppendHello(nil, hello, msg1)); err != nil {
		return ch, nil, err
	}
	body, err := expect(c, wire.TypeChallenge, "challenge")
	if err != nil {
		return ch, nil, err
	}
	params, send, recv, err := st.ReadMessage(nil, body)
	if err != nil {
		return ch, nil, fmt.Errorf("%w: the acceptor does not know the key (%s)", ErrAuth, keyName(hello.Flags))
	}
	if ch, err = wire.ParseChallengeParams(params); err != nil {
		return ch, nil, err
	}
	if ch.Flags&wire.ChallengePlaintext != 0 && hello.Flags&wire.HelloPlaintext == 0 {
		return ch, nil, fmt.Errorf("%w: the acceptor chose plaintext, which this side did not ask for", wire.ErrMalformed)
	}
	k := &Keys{Send: NewCipher(send), Recv: NewCipher(recv), Session: psk, Plaintext: ch.Flags&wire.ChallengePlaintext != 0}
	if hello.Flags&(wire.HelloJoin|wire.HelloRejoin) == 0 {
		k.Session = SessionKey(st.ChannelBinding())
	}
	if _, err := c.Write(wire.AppendSealed(nil, wire.TypeAuth, k.Send.Seal(nil, nil))); err != nil {
		return ch, nil, err
	}
	return ch, k, nil
}

func keyName(flags uint8) string {
	if flags&(wire.HelloJoin|wire.HelloRejoin) != 0 {
		return "session key"
	}
	return "token"
}

// WaitWelcome waits (until deadline) for the acceptor's WELCOME, sealed by
// the rail's keys, which says that the session is complete.
func WaitWelcome(c net.Conn, k *Keys, deadline time.Time) error {
	if err := c.SetDeadline(deadline); err != nil {
		return err
	}
	body, err := expect(c, wire.TypeWelcome, "welcome")
	if err != nil {
		return err
	}
	if _, err := k.Recv.Open(nil, body); err != nil {
		return err
	}
	return c.SetDeadline(time.Time{})
}

// Acceptor is what the accepting side needs from its caller.
type Acceptor struct {
	// Key returns the pre-shared key for a HELLO's clear part (version,
	// flags, session): the token's key for a new session, the session
	// key for a join or rejoin. An error (a *RejectedError to say why)
	// ends the handshake before anything is sent.
	Key func(h wire.Hello) ([32]byte, error)
	// Plaintext: agree when the dialer asks for frames in clear.
	Plaintext bool
	// Keyed, if set, is called once the rail's keys exist (before the
	// CHALLENGE goes out and the dialer's AUTH is read): a first
	// rail's caller registers the session key there so that the session's
	// other rails, which the dialer opens as soon as it has read the
	// CHALLENGE, find it. An error ends the handshake.
	Keyed func(h wire.Hello, k *Keys) error
}

// Accept runs the accepting side of the handshake on c up to the check of
// the dialer's AUTH: read HELLO (whose first Noise message proves that the
// dialer knows the key: nothing is sent to a dialer that does not),
// answer CHALLENGE, read and open AUTH (which proves that the dialer is
// live, not replaying a recorded HELLO). ch carries this side's
// parameters. On failure it sends a REJECT (best effort) and returns why;
// the caller closes c. The caller sends WELCOME once the session is
// complete.
func Accept(c net.Conn, a Acceptor, ch wire.Challenge, deadline time.Time) (wire.Hello, *Keys, error) {
	return accept(c, a, ch, deadline, nil)
}

func accept(c net.Conn, a Acceptor, ch wire.Challenge, deadline time.Time, rnd io.Reader) (wire.Hello, *Keys, error) {
	var hello wire.Hello
	if err := c.SetDeadline(deadline); err != nil {
		return hello, nil, err
	}
	h, body, err := readControl(c)
	if err != nil {
		return hello, nil, err
	}
	if h.Type != wire.TypeHello {
		err := fmt.Errorf("%w: expected hello, got frame type %#x", wire.ErrMalformed, h.Type)
		Reject(c, wire.RejectProtocol, err.Error())
		return hello, nil, err
	}
	hello, msg1, err := wire.ParseHelloPrefix(body)
	if errors.Is(err, wire.ErrVersion) {
		Reject(c, wire.RejectVersion, fmt.Sprintf("unsupported protocol version %d (this side speaks %d)", hello.Version, wire.Version))
		return hello, nil, err
	}
	if err != nil {
		Reject(c, wire.RejectProtocol, err.Error())
		return hello, nil, err
	}
	psk, err := a.Key(hello)
	if err != nil {
		var rj *RejectedError
		if errors.As(err, &rj) {
			Reject(c, rj.Code, rj.Reason)
		}
		return hello, nil, err
	}
	st, err := NewState(false, body[:wire.HelloPrefixSize], psk, rnd)
	if err != nil {
		return hello, nil, err
	}
	params, _, _, err := st.ReadMessage(nil, msg1)
	if err != nil {
		Reject(c, wire.RejectAuth, "authentication failed")
		return hello, nil, fmt.Errorf("%w: the dialer does not know the key (%s)", ErrAuth, keyName(hello.Flags))
	}
	if err := wire.ParseHelloParams(params, &hello); err != nil {
		Reject(c, wire.RejectProtocol, err.Error())
		return hello, nil, err
	}
	ch.Flags = 0
	if a.Plaintext && hello.Flags&wire.HelloPlaintext != 0 {
		ch.Flags = wire.ChallengePlaintext
	}
	msg2, recv, send, err := st.WriteMessage(nil, wire.AppendChallengeParams(nil, ch))
	if err != nil {
		return hello, nil, err
	}
	k := &Keys{Send: NewCipher(send), Recv: NewCipher(recv), Session: psk, Plaintext: ch.Flags != 0}
	if hello.Flags&(wire.HelloJoin|wire.HelloRejoin) == 0 {
		k.Session = SessionKey(st.ChannelBinding())
	}
	if a.Keyed != nil {
		if err := a.Keyed(hello, k); err != nil {
			var rj *RejectedError
			if errors.As(err, &rj) {
				Reject(c, rj.Code, rj.Reason)
			}
			return hello, nil, err
		}
	}
	if _, err := c.Write(wire.AppendSealed(nil, wire.TypeChallenge, msg2)); err != nil {
		return hello, nil, err
	}
	body, err = expect(c, wire.TypeAuth, "auth")
	if err != nil {
		return hello, nil, err
	}
	if _, err := k.Recv.Open(nil, body); err != nil {
		return hello, nil, fmt.Errorf("%w: the dialer's auth does not open", ErrAuth)
	}
	return hello, k, nil
}

// Reject sends a REJECT frame, best effort, with a short deadline.
func Reject(c net.Conn, code uint16, reason string) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write(wire.AppendReject(nil, wire.Reject{Code: code, Reason: reason}))
}

// Welcome sends the WELCOME frame, sealed by the rail's keys, that
// completes a rail's handshake.
func Welcome(c net.Conn, k *Keys, deadline time.Time) error {
	if err := c.SetWriteDeadline(deadline); err != nil {
		return err
	}
	if _, err := c.Write(wire.AppendSealed(nil, wire.TypeWelcome, k.Send.Seal(nil, nil))); err != nil {
		return err
	}
	return c.SetDeadline(time.Time{})
}
