package tunnel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Version is the tunnel protocol version an OPEN carries.
const Version = 1

// Frame kinds. Every frame is one multirail message whose first byte is its
// kind. Frames of a stream travel under the stream's id as the message tag,
// so the transport keeps them in order; WINDOW travels under tag 0 so that
// credit is never held behind a stream's data.
const (
	KindOpen   byte = 1 // tag id: kind, version, the opener's window (u32)
	KindData   byte = 2 // tag id: kind, payload (at least one byte)
	KindFin    byte = 3 // tag id: kind: no more data in this direction
	KindReset  byte = 4 // tag id: kind, reason (UTF-8, at most MaxReason bytes)
	KindWindow byte = 5 // tag 0: kind, stream id (u32), increment (u32)
)

// MaxReason is the longest reason a RESET carries, in bytes.
const MaxReason = 256

// maxIncrement bounds a WINDOW increment (and an OPEN's window): 1 GiB.
const maxIncrement = MaxWindow

// ErrProtocol is wrapped by every error about what the peer sent; the
// session ends on it.
var ErrProtocol = errors.New("tunnel: protocol violation")

// Frame is a decoded frame.
type Frame struct {
	Kind   byte
	Stream uint32 // the stream the frame is about
	// Window is the opener's receive window (OPEN) or the credit granted
	// (WINDOW).
	Window uint32
	// Data is DATA's payload, aliasing the decoded message.
	Data []byte
	// Reason is RESET's reason.
	Reason string
}

// Decode parses the message m received under tag. It never panics; any
// malformed message yields an error wrapping ErrProtocol.
func Decode(tag uint32, m []byte) (Frame, error) {
	if len(m) == 0 {
		return Frame{}, fmt.Errorf("%w: empty message on tag %d", ErrProtocol, tag)
	}
	f := Frame{Kind: m[0], Stream: tag}
	b := m[1:]
	if tag == 0 {
		if f.Kind != KindWindow {
			return Frame{}, fmt.Errorf("%w: frame kind %d on tag 0 (only WINDOW)", ErrProtocol, f.Kind)
		}
		if len(b) != 8 {
			return Frame{}, fmt.Errorf("%w: WINDOW of %d bytes (want 8)", ErrProtocol, len(b))
		}
		f.Stream = binary.BigEndian.Uint32(b)
		f.Window = binary.BigEndian.Uint32(b[4:])
		if f.Stream == 0 {
			return Frame{}, fmt.Errorf("%w: WINDOW for stream 0", ErrProtocol)
		}
		if f.Window == 0 || f.Window > maxIncrement {
			return Frame{}, fmt.Errorf("%w: WINDOW increment %d (allowed 1..%d)", ErrProtocol, f.Window, maxIncrement)
		}
		return f, nil
	}
	switch f.Kind {
	case KindOpen:
		if len(b) != 5 {
			return Frame{}, fmt.Errorf("%w: OPEN of %d bytes (want 5)", ErrProtocol, len(b))
		}
		if b[0] != Version {
			return Frame{}, fmt.Errorf("%w: peer speaks tunnel version %d, this side %d", ErrProtocol, b[0], Version)
		}
		f.Window = binary.BigEndian.Uint32(b[1:])
		if f.Window < MinWindow || f.Window > MaxWindow {
			return Frame{}, fmt.Errorf("%w: OPEN window %d (allowed %d..%d)", ErrProtocol, f.Window, MinWindow, MaxWindow)
		}
	case KindData:
		if len(b) == 0 {
			return Frame{}, fmt.Errorf("%w: empty DATA on stream %d", ErrProtocol, tag)
		}
		f.Data = b
	case KindFin:
		if len(b) != 0 {
			return Frame{}, fmt.Errorf("%w: FIN with %d bytes", ErrProtocol, len(b))
		}
	case KindReset:
		if len(b) > MaxReason || !utf8.Valid(b) {
			return Frame{}, fmt.Errorf("%w: RESET reason of %d bytes (want UTF-8, at most %d)", ErrProtocol, len(b), MaxReason)
		}
		f.Reason = string(b)
	default:
		return Frame{}, fmt.Errorf("%w: frame kind %d on stream %d", ErrProtocol, f.Kind, tag)
	}
	return f, nil
}

// appendOpen appends an OPEN announcing window.
func appendOpen(b []byte, window uint32) []byte {
	b = append(b, KindOpen, Version)
	return binary.BigEndian.AppendUint32(b, window)
}

// appendWindow appends a WINDOW granting inc more bytes on stream id.
func appendWindow(b []byte, id, inc uint32) []byte {
	b = append(b, KindWindow)
	b = binary.BigEndian.AppendUint32(b, id)
	return binary.BigEndian.AppendUint32(b, inc)
}

// appendReset appends a RESET, the reason cut to MaxReason bytes on a rune
// boundary.
func appendReset(b []byte, reason string) []byte {
	if len(reason) > MaxReason {
		cut := MaxReason
		for cut > 0 && !utf8.RuneStart(reason[cut]) {
			cut--
		}
		reason = reason[:cut]
	}
	if !utf8.ValidString(reason) {
		reason = "invalid reason"
	}
	return append(append(b, KindReset), reason...)
}
