package handshake

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/multirail/multirail/internal/wire"
)

// ErrAuth means the peer does not know the shared token (or we don't know
// the peer's).
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

const (
	serverLabel = "multirail/1 server"
	clientLabel = "multirail/1 client"
)

func proof(token []byte, label string, session [16]byte, rail uint16, first, second [16]byte) [32]byte {
	mac := hmac.New(sha256.New, token)
	mac.Write([]byte(label))
	mac.Write(session[:])
	var r [2]byte
	binary.BigEndian.PutUint16(r[:], rail)
	mac.Write(r[:])
	mac.Write(first[:])
	mac.Write(second[:])
	var out [32]byte
	copy(out[:], mac.Sum(nil))
	return out
}

// ServerProof is what the acceptor sends to show it knows the token.
func ServerProof(token []byte, h wire.Hello, acceptorNonce [16]byte) [32]byte {
	return proof(token, serverLabel, h.Session, h.Rail, h.Nonce, acceptorNonce)
}

// ClientProof is what the dialer sends to show it knows the token.
func ClientProof(token []byte, h wire.Hello, acceptorNonce [16]byte) [32]byte {
	return proof(token, clientLabel, h.Session, h.Rail, acceptorNonce, h.Nonce)
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
	if h.Type == wire.TypeData || h.Len > wire.MaxControlBody+wire.HelloSize {
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

// Dial runs the dialing side of the handshake on c: HELLO, check the
// acceptor's proof, AUTH, then wait for WELCOME (which the acceptor sends
// once every rail of the session has joined). The deadline bounds the whole
// exchange. It returns the acceptor's parameters.
func Dial(c net.Conn, hello wire.Hello, token []byte, deadline time.Time) (wire.Challenge, error) {
	var ch wire.Challenge
	if err := c.SetDeadline(deadline); err != nil {
		return ch, err
	}
	if _, err := c.Write(wire.AppendHello(nil, hello)); err != nil {
		return ch, err
	}
	h, body, err := readControl(c)
	if err != nil {
		return ch, err
	}
	switch h.Type {
	case wire.TypeReject:
		return ch, rejectErr(body)
	case wire.TypeChallenge:
	default:
		return ch, fmt.Errorf("%w: expected challenge, got frame type %#x", wire.ErrMalformed, h.Type)
	}
	if ch, err = wire.ParseChallenge(body); err != nil {
		return ch, err
	}
	want := ServerProof(token, hello, ch.Nonce)
	if !hmac.Equal(want[:], ch.Proof[:]) {
		return ch, fmt.Errorf("%w: the acceptor does not know the token", ErrAuth)
	}
	auth := wire.Auth{Proof: ClientProof(token, hello, ch.Nonce), Window: hello.Window}
	if _, err := c.Write(wire.AppendAuth(nil, auth)); err != nil {
		return ch, err
	}
	h, body, err = readControl(c)
	if err != nil {
		return ch, err
	}
	switch h.Type {
	case wire.TypeWelcome:
	case wire.TypeReject:
		return ch, rejectErr(body)
	default:
		return ch, fmt.Errorf("%w: expected welcome, got frame type %#x", wire.ErrMalformed, h.Type)
	}
	return ch, c.SetDeadline(time.Time{})
}

// Accept runs the accepting side of the handshake on c up to the check of
// the dialer's proof: read HELLO, answer CHALLENGE, read and verify AUTH.
// Nothing is allocated for a session before it returns successfully. On
// failure it sends a REJECT (best effort) and returns why; the caller
// closes c. The caller sends WELCOME once the session is complete. ch
// carries the acceptor's nonce and parameters; Accept fills in the proof.
func Accept(c net.Conn, token []byte, ch wire.Challenge, deadline time.Time) (wire.Hello, error) {
	var hello wire.Hello
	if err := c.SetDeadline(deadline); err != nil {
		return hello, err
	}
	h, body, err := readControl(c)
	if err != nil {
		return hello, err
	}
	if h.Type != wire.TypeHello {
		err := fmt.Errorf("%w: expected hello, got frame type %#x", wire.ErrMalformed, h.Type)
		Reject(c, wire.RejectProtocol, err.Error())
		return hello, err
	}
	hello, err = wire.ParseHello(body)
	if errors.Is(err, wire.ErrVersion) {
		Reject(c, wire.RejectVersion, fmt.Sprintf("unsupported protocol version %d (this side speaks %d)", hello.Version, wire.Version))
		return hello, err
	}
	if err != nil {
		Reject(c, wire.RejectProtocol, err.Error())
		return hello, err
	}
	nonce := ch.Nonce
	ch.Version = wire.Version
	ch.Proof = ServerProof(token, hello, nonce)
	if _, err := c.Write(wire.AppendChallenge(nil, ch)); err != nil {
		return hello, err
	}
	h, body, err = readControl(c)
	if err != nil {
		return hello, err
	}
	if h.Type != wire.TypeAuth {
		err := fmt.Errorf("%w: expected auth, got frame type %#x", wire.ErrMalformed, h.Type)
		Reject(c, wire.RejectProtocol, err.Error())
		return hello, err
	}
	auth, err := wire.ParseAuth(body)
	if err != nil {
		return hello, err
	}
	want := ClientProof(token, hello, nonce)
	if !hmac.Equal(want[:], auth.Proof[:]) {
		Reject(c, wire.RejectAuth, "wrong token")
		return hello, fmt.Errorf("%w: the dialer does not know the token", ErrAuth)
	}
	if auth.Window != hello.Window {
		Reject(c, wire.RejectProtocol, "window changed during the handshake")
		return hello, fmt.Errorf("%w: window %d in auth, %d in hello", wire.ErrMalformed, auth.Window, hello.Window)
	}
	return hello, nil
}

// Reject sends a REJECT frame, best effort, with a short deadline.
func Reject(c net.Conn, code uint16, reason string) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write(wire.AppendReject(nil, wire.Reject{Code: code, Reason: reason}))
}

// Welcome sends the WELCOME frame that completes a rail's handshake.
func Welcome(c net.Conn, deadline time.Time) error {
	if err := c.SetWriteDeadline(deadline); err != nil {
		return err
	}
	if _, err := c.Write(wire.AppendWelcome(nil)); err != nil {
		return err
	}
	return c.SetDeadline(time.Time{})
}
