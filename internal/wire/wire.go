package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Version is the protocol version this package speaks.
const Version = 6

// Magic opens every HELLO body: it lets a server tell a multirail peer from
// anything else that connects to its port.
var Magic = [4]byte{'M', 'R', 'L', 'Y'}

// HeaderSize is the size of the frame header that precedes every frame.
const HeaderSize = 8

// Frame types.
const (
	TypeHello     uint8 = 0x01
	TypeChallenge uint8 = 0x02
	TypeAuth      uint8 = 0x03
	TypeWelcome   uint8 = 0x04
	TypeReject    uint8 = 0x05
	TypeData      uint8 = 0x10
	TypeAck       uint8 = 0x11
	TypeGoAway    uint8 = 0x12
	TypePing      uint8 = 0x13
	TypeSmall     uint8 = 0x14 // a whole small message in one frame, maybe with an ACK
	TypeFeedback  uint8 = 0x20 // reserved for loss-tolerant stages
)

// Flags of a DATA frame.
const (
	FlagCRC uint8 = 1 << 0 // the CRC field holds the CRC32C of the payload
	// FlagEager marks a segment of a message the sender does not wait
	// for: its ACK may be delayed (by up to AckDelay) and piggybacked.
	FlagEager uint8 = 1 << 1
	// DataFlags are all flags a DATA frame may carry.
	DataFlags = FlagCRC | FlagEager
	// FlagAck on a SMALL frame says that an ACK body (AckSize bytes) opens
	// its body.
	FlagAck uint8 = 1 << 2
	// SmallFlags are all flags a SMALL frame may carry.
	SmallFlags = FlagEager | FlagAck
)

// Fixed body sizes.
const (
	// HelloSize is a HELLO body: the clear prefix, then the first Noise
	// message (an ephemeral key and the sealed parameters).
	HelloSize = HelloPrefixSize + NoiseKeySize + HelloParamsSize + TagSize // 100
	// ChallengeSize is a CHALLENGE body: the second Noise message.
	ChallengeSize = NoiseKeySize + ChallengeParams + TagSize // 72
	// AuthSize and WelcomeSize: an empty payload sealed by the session's
	// keys (each side's first transport message).
	AuthSize      = TagSize
	WelcomeSize   = TagSize
	DataFixedSize = 8 + 8 + 4 + 4 + 8 + 8 // 40
	AckSize       = 8 + 8 + 8             // 24
	GoAwaySize    = 2
	MaxReason     = 256
	// MaxControlBody bounds the body of every frame that is not DATA.
	MaxControlBody = 2 + MaxReason
	// MinSegmentSize and MaxSegmentSize bound the segment size a peer may
	// announce.
	MinSegmentSize = 512
	MaxSegmentSize = 64 << 20
)

// DataHeaderSize is the number of bytes on the wire before a DATA payload.
const DataHeaderSize = HeaderSize + DataFixedSize

// SmallFixedSize is the fixed part of a SMALL body after its optional ACK:
// message id and tag.
const SmallFixedSize = 8 + 4

// SmallHeaderSize is the number of bytes on the wire before a SMALL
// payload that carries no ACK.
const SmallHeaderSize = HeaderSize + SmallFixedSize

// MaxSmallPayload bounds the payload of a SMALL frame (and the segment
// size bounds it too): a message that fits goes whole in one frame whose
// body is one sealed record.
const MaxSmallPayload = 4096

// Errors. Every decoding error wraps ErrMalformed.
var (
	ErrMalformed = errors.New("wire: malformed frame")
	ErrVersion   = errors.New("wire: unsupported protocol version")
)

// Header is the 8-byte frame header: type, flags, two reserved zero bytes and
// the big-endian body length.
type Header struct {
	Type  uint8
	Flags uint8
	Len   uint32
}

// MaxSpanBytes bounds a DATA payload that spans several slots of the
// segment size: a sender may join up to MaxSpanBytes / S consecutive
// segments of a message into one frame (fast rails take fewer, larger
// frames), never fewer than one.
const MaxSpanBytes = 1 << 20

// MaxPayload is the largest DATA payload a peer with segment size seg may
// send: the largest multiple of seg up to MaxSpanBytes, at least seg.
func MaxPayload(seg int) int {
	if seg <= 0 {
		return 0
	}
	return max(1, MaxSpanBytes/seg) * seg
}

// Limits are what a receiver accepts from its peer; they come from the
// handshake and the local configuration.
type Limits struct {
	SegmentSize int   // the peer's announced segment size
	MaxMessage  int64 // largest message accepted
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

// PutHeader encodes h into b[:HeaderSize].
func PutHeader(b []byte, h Header) {
	_ = b[HeaderSize-1]
	b[0] = h.Type
	b[1] = h.Flags
	b[2], b[3] = 0, 0
	binary.BigEndian.PutUint32(b[4:8], h.Len)
}

// ParseHeader decodes and checks a frame header. lim bounds DATA frames;
// every other frame type has a small fixed bound. It rejects unknown types,
// non-zero reserved bytes, unknown flags and lengths that do not fit.
func ParseHeader(b []byte, lim Limits) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, malformed("short header: %d bytes", len(b))
	}
	h := Header{Type: b[0], Flags: b[1], Len: binary.BigEndian.Uint32(b[4:8])}
	if b[2] != 0 || b[3] != 0 {
		return h, malformed("reserved header bytes %#x %#x", b[2], b[3])
	}
	if h.Type != TypeData && h.Type != TypeSmall && h.Flags != 0 {
		return h, malformed("flags %#x on frame type %#x", h.Flags, h.Type)
	}
	var want uint32
	switch h.Type {
	case TypeHello:
		// Any length up to the bound: ParseHelloPrefix then tells a peer
		// of another version from a malformed hello.
		if h.Len > MaxControlBody {
			return h, malformed("hello body of %d bytes (at most %d)", h.Len, MaxControlBody)
		}
		return h, nil
	case TypeChallenge:
		want = ChallengeSize
	case TypeAuth:
		want = AuthSize
	case TypeWelcome:
		want = WelcomeSize
	case TypePing:
		want = 0
	case TypeAck:
		want = AckSize
	case TypeGoAway:
		want = GoAwaySize
	case TypeReject:
		if h.Len < 2 || h.Len > 2+MaxReason {
			return h, malformed("reject body of %d bytes (allowed 2..%d)", h.Len, 2+MaxReason)
		}
		return h, nil
	case TypeData:
		if h.Flags&^DataFlags != 0 {
			return h, malformed("unknown data flags %#x", h.Flags)
		}
		if lim.SegmentSize <= 0 {
			return h, malformed("no segment size negotiated")
		}
		max := DataFixedSize + uint64(MaxPayload(lim.SegmentSize))
		if h.Len < DataFixedSize || uint64(h.Len) > max {
			return h, malformed("data body of %d bytes (allowed %d..%d)", h.Len, DataFixedSize, max)
		}
		return h, nil
	case TypeSmall:
		if h.Flags&^SmallFlags != 0 {
			return h, malformed("unknown small flags %#x", h.Flags)
		}
		if lim.SegmentSize <= 0 {
			return h, malformed("no segment size negotiated")
		}
		lo := uint32(SmallFixedSize)
		if h.Flags&FlagAck != 0 {
			lo += AckSize
		}
		hi := lo + uint32(min(MaxSmallPayload, lim.SegmentSize))
		if h.Len < lo || h.Len > hi {
			return h, malformed("small body of %d bytes (allowed %d..%d)", h.Len, lo, hi)
		}
		return h, nil
	default:
		return h, malformed("unknown frame type %#x", h.Type)
	}
	if h.Len != want {
		return h, malformed("frame type %#x with body of %d bytes (want %d)", h.Type, h.Len, want)
	}
	return h, nil
}

// Hello opens every rail: the dialing side names the session and the rail,
// and states its parameters. On the wire a HELLO body is a clear prefix
// (magic, version, flags, session id: HelloPrefixSize bytes, which is also
// the Noise prologue) followed by the first Noise handshake message, whose
// payload holds the rest (HelloParamsSize bytes, see AppendHelloParams).
type Hello struct {
	Version     uint8
	Flags       uint8    // HelloRejoin, HelloJoin, HelloPlaintext
	Session     [16]byte // random; names the session
	Rail        uint16   // index of this rail, < Rails
	Rails       uint16   // number of rails in the session, >= 1
	SegmentSize uint32   // segment size the dialer sends with
	Window      uint64   // bytes the dialer will hold for the peer (initial credit)
	MaxMessage  uint64   // largest message the dialer accepts
}

// Hello flags.
const (
	// HelloRejoin asks to replace a failed rail of a session that is
	// already open; the handshake's pre-shared key is the session key.
	HelloRejoin uint8 = 0x01
	// HelloJoin adds a rail to a session whose first rail is in its
	// handshake; the pre-shared key is the session key.
	HelloJoin uint8 = 0x02
	// HelloPlaintext asks for frames in clear after the handshake (both
	// sides must agree; see Challenge.Flags).
	HelloPlaintext uint8 = 0x04
	helloFlags           = HelloRejoin | HelloJoin | HelloPlaintext
)

// Sizes of the handshake's pieces. NoiseKeySize is a Curve25519 public
// key, TagSize an AEAD tag.
const (
	NoiseKeySize    = 32
	TagSize         = 16
	HelloPrefixSize = 4 + 1 + 1 + 2 + 16    // 24
	HelloParamsSize = 2 + 2 + 4 + 4 + 8 + 8 // 28
	ChallengeParams = 1 + 3 + 4 + 8 + 8     // 24
)

// AppendHelloPrefix appends the clear part of a HELLO body: magic,
// version, flags, two zero bytes, session id.
func AppendHelloPrefix(b []byte, m Hello) []byte {
	b = append(b, Magic[:]...)
	b = append(b, m.Version, m.Flags, 0, 0)
	return append(b, m.Session[:]...)
}

// ParseHelloPrefix decodes the clear part of a HELLO body into m's
// Version, Flags and Session and returns the rest (the Noise message). A
// body with the right magic but another version yields an error wrapping
// ErrVersion and m with its Version set, so the caller can say which
// version the peer spoke.
func ParseHelloPrefix(body []byte) (m Hello, rest []byte, err error) {
	if len(body) < 5 || [4]byte(body[0:4]) != Magic {
		return m, nil, malformed("not a multirail hello (%d bytes)", len(body))
	}
	m.Version = body[4]
	if m.Version != Version {
		return m, nil, fmt.Errorf("%w: peer speaks version %d, this side speaks %d", ErrVersion, m.Version, Version)
	}
	if len(body) != HelloSize {
		return m, nil, malformed("hello of %d bytes", len(body))
	}
	m.Flags = body[5]
	if m.Flags&^helloFlags != 0 {
		return m, nil, malformed("unknown hello flags %#x", m.Flags)
	}
	if m.Flags&HelloRejoin != 0 && m.Flags&HelloJoin != 0 {
		return m, nil, malformed("hello flags %#x: join and rejoin at once", m.Flags)
	}
	if body[6] != 0 || body[7] != 0 {
		return m, nil, malformed("reserved hello bytes not zero")
	}
	copy(m.Session[:], body[8:24])
	return m, body[HelloPrefixSize:], nil
}

// AppendHelloParams appends the sealed part of a HELLO (the payload of
// the first Noise message): rail, rails, four zero bytes, segment size,
// window, largest message.
func AppendHelloParams(b []byte, m Hello) []byte {
	b = binary.BigEndian.AppendUint16(b, m.Rail)
	b = binary.BigEndian.AppendUint16(b, m.Rails)
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, m.SegmentSize)
	b = binary.BigEndian.AppendUint64(b, m.Window)
	return binary.BigEndian.AppendUint64(b, m.MaxMessage)
}

// ParseHelloParams decodes the sealed part of a HELLO into m; on an error
// m is left as it was.
func ParseHelloParams(p []byte, m *Hello) error {
	if len(p) != HelloParamsSize {
		return malformed("hello parameters of %d bytes", len(p))
	}
	if [4]byte(p[4:8]) != [4]byte{} {
		return malformed("reserved hello bytes not zero")
	}
	rail, rails := binary.BigEndian.Uint16(p[0:2]), binary.BigEndian.Uint16(p[2:4])
	seg := binary.BigEndian.Uint32(p[8:12])
	if rails == 0 || rail >= rails {
		return malformed("rail %d of %d", rail, rails)
	}
	if seg < MinSegmentSize || seg > MaxSegmentSize {
		return malformed("segment size %d (allowed %d..%d)", seg, MinSegmentSize, MaxSegmentSize)
	}
	m.Rail, m.Rails, m.SegmentSize = rail, rails, seg
	m.Window = binary.BigEndian.Uint64(p[12:20])
	m.MaxMessage = binary.BigEndian.Uint64(p[20:28])
	return nil
}

// AppendHello appends a whole HELLO frame to b: the clear prefix of m and
// msg1, the first Noise message (which must be HelloSize-HelloPrefixSize
// bytes).
func AppendHello(b []byte, m Hello, msg1 []byte) []byte {
	b = appendHeader(b, TypeHello, 0, uint32(HelloPrefixSize+len(msg1)))
	b = AppendHelloPrefix(b, m)
	return append(b, msg1...)
}

// Challenge is the accepting side's answer to a Hello: its parameters,
// sealed in the second Noise message (the CHALLENGE body).
type Challenge struct {
	Flags       uint8 // ChallengePlaintext or 0
	SegmentSize uint32
	Window      uint64
	MaxMessage  uint64
}

// ChallengePlaintext: the acceptor agrees to frames in clear (the dialer
// asked with HelloPlaintext and the acceptor allows it).
const ChallengePlaintext uint8 = 0x01

// AppendChallengeParams appends the sealed part of a CHALLENGE: flags,
// three zero bytes, segment size, window, largest message.
func AppendChallengeParams(b []byte, m Challenge) []byte {
	b = append(b, m.Flags, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, m.SegmentSize)
	b = binary.BigEndian.AppendUint64(b, m.Window)
	return binary.BigEndian.AppendUint64(b, m.MaxMessage)
}

// ParseChallengeParams decodes the sealed part of a CHALLENGE.
func ParseChallengeParams(p []byte) (Challenge, error) {
	var m Challenge
	if len(p) != ChallengeParams {
		return m, malformed("challenge parameters of %d bytes", len(p))
	}
	m.Flags = p[0]
	if m.Flags&^ChallengePlaintext != 0 {
		return m, malformed("unknown challenge flags %#x", m.Flags)
	}
	if p[1] != 0 || p[2] != 0 || p[3] != 0 {
		return m, malformed("reserved challenge bytes not zero")
	}
	m.SegmentSize = binary.BigEndian.Uint32(p[4:8])
	m.Window = binary.BigEndian.Uint64(p[8:16])
	m.MaxMessage = binary.BigEndian.Uint64(p[16:24])
	if m.SegmentSize < MinSegmentSize || m.SegmentSize > MaxSegmentSize {
		return m, malformed("segment size %d (allowed %d..%d)", m.SegmentSize, MinSegmentSize, MaxSegmentSize)
	}
	return m, nil
}

// AppendSealed appends a handshake frame of type typ (CHALLENGE, AUTH or
// WELCOME) whose body is the opaque, sealed body.
func AppendSealed(b []byte, typ uint8, body []byte) []byte {
	b = appendHeader(b, typ, 0, uint32(len(body)))
	return append(b, body...)
}

// Reject codes.
const (
	RejectVersion  uint16 = 1
	RejectAuth     uint16 = 2
	RejectProtocol uint16 = 3
	RejectBusy     uint16 = 4
	RejectSession  uint16 = 5
)

// Reject tells the peer why it is being disconnected during the handshake.
type Reject struct {
	Code   uint16
	Reason string // at most MaxReason bytes
}

// AppendReject appends a whole REJECT frame; the reason is cut to MaxReason
// bytes.
func AppendReject(b []byte, m Reject) []byte {
	r := m.Reason
	if len(r) > MaxReason {
		r = r[:MaxReason]
	}
	b = appendHeader(b, TypeReject, 0, uint32(2+len(r)))
	b = binary.BigEndian.AppendUint16(b, m.Code)
	return append(b, r...)
}

// ParseReject decodes a REJECT body.
func ParseReject(body []byte) (Reject, error) {
	if len(body) < 2 || len(body) > 2+MaxReason {
		return Reject{}, malformed("reject of %d bytes", len(body))
	}
	return Reject{Code: binary.BigEndian.Uint16(body[:2]), Reason: string(body[2:])}, nil
}

// AppendPing appends a PING frame (keeps an idle rail alive).
func AppendPing(b []byte) []byte { return appendHeader(b, TypePing, 0, 0) }

// Data is the fixed part of a DATA frame: one segment of one message.
type Data struct {
	Flags   uint8
	Session uint64 // first 8 bytes of the session id (big-endian), checked by the receiver
	Message uint64 // message id, 1, 2, 3, ... in the order the sender's Sends started
	Tag     uint32
	CRC     uint32 // CRC32C (Castagnoli) of the payload when Flags&FlagCRC
	Total   uint64 // length of the whole message
	Offset  uint64 // where this segment's payload starts in the message
	Len     uint32 // payload length (from the frame header)
}

// PutData encodes the whole DATA header (frame header plus fixed part) into
// b[:DataHeaderSize]. d.Len is the payload length that follows.
func PutData(b []byte, d Data) {
	_ = b[DataHeaderSize-1]
	PutHeader(b, Header{Type: TypeData, Flags: d.Flags, Len: DataFixedSize + d.Len})
	p := b[HeaderSize:]
	binary.BigEndian.PutUint64(p[0:8], d.Session)
	binary.BigEndian.PutUint64(p[8:16], d.Message)
	binary.BigEndian.PutUint32(p[16:20], d.Tag)
	binary.BigEndian.PutUint32(p[20:24], d.CRC)
	binary.BigEndian.PutUint64(p[24:32], d.Total)
	binary.BigEndian.PutUint64(p[32:40], d.Offset)
}

// ParseData decodes the fixed part of a DATA body whose frame header h was
// already accepted by ParseHeader, and checks the segment against lim:
// message id > 0, total <= MaxMessage, offset a multiple of the segment
// size, and the payload length either all the rest of the message or a
// multiple of the segment size, at most MaxPayload (one empty segment for
// an empty message).
func ParseData(h Header, fixed []byte, lim Limits) (Data, error) {
	var d Data
	if len(fixed) != DataFixedSize {
		return d, malformed("data fixed part of %d bytes", len(fixed))
	}
	if h.Len < DataFixedSize {
		return d, malformed("data body of %d bytes", h.Len)
	}
	d.Flags = h.Flags
	d.Len = h.Len - DataFixedSize
	d.Session = binary.BigEndian.Uint64(fixed[0:8])
	d.Message = binary.BigEndian.Uint64(fixed[8:16])
	d.Tag = binary.BigEndian.Uint32(fixed[16:20])
	d.CRC = binary.BigEndian.Uint32(fixed[20:24])
	d.Total = binary.BigEndian.Uint64(fixed[24:32])
	d.Offset = binary.BigEndian.Uint64(fixed[32:40])
	if d.Flags&FlagCRC == 0 && d.CRC != 0 {
		return d, malformed("crc field %#x without crc flag", d.CRC)
	}
	if d.Message == 0 {
		return d, malformed("message id 0")
	}
	if lim.SegmentSize <= 0 {
		return d, malformed("no segment size negotiated")
	}
	if lim.MaxMessage >= 0 && d.Total > uint64(lim.MaxMessage) {
		return d, malformed("message of %d bytes exceeds the limit of %d", d.Total, lim.MaxMessage)
	}
	seg := uint64(lim.SegmentSize)
	if d.Offset%seg != 0 {
		return d, malformed("offset %d not a multiple of the segment size %d", d.Offset, seg)
	}
	if d.Total == 0 {
		if d.Offset != 0 || d.Len != 0 {
			return d, malformed("segment %d+%d of an empty message", d.Offset, d.Len)
		}
		return d, nil
	}
	if d.Offset >= d.Total {
		return d, malformed("offset %d beyond message length %d", d.Offset, d.Total)
	}
	rest := d.Total - d.Offset
	if n := uint64(d.Len); n == 0 || n > rest || n > uint64(MaxPayload(lim.SegmentSize)) || (n != rest && n%seg != 0) {
		return d, malformed("segment at %d of %d carries %d bytes (want the rest, %d, or a multiple of %d, at most %d)",
			d.Offset, d.Total, d.Len, rest, seg, MaxPayload(lim.SegmentSize))
	}
	return d, nil
}

// PutSmall encodes the header of a SMALL frame without an ACK (frame
// header, message id, tag) into b[:SmallHeaderSize] for a payload of n
// bytes (at most MaxSmallPayload and the peer's segment size) that
// follows. flags may hold FlagEager.
func PutSmall(b []byte, flags uint8, message uint64, tag uint32, n int) {
	_ = b[SmallHeaderSize-1]
	PutHeader(b, Header{Type: TypeSmall, Flags: flags, Len: uint32(SmallFixedSize + n)})
	binary.BigEndian.PutUint64(b[HeaderSize:], message)
	binary.BigEndian.PutUint32(b[HeaderSize+8:], tag)
}

// AppendSmallAck appends the frame header and ACK of a SMALL frame that
// carries a, for the SMALL header small (as PutSmall wrote it) whose
// message id, tag and payload the caller appends next.
func AppendSmallAck(b []byte, small []byte, a Ack) []byte {
	n := binary.BigEndian.Uint32(small[4:8])
	b = appendHeader(b, TypeSmall, small[1]|FlagAck, n+AckSize)
	b = binary.BigEndian.AppendUint64(b, a.Received)
	b = binary.BigEndian.AppendUint64(b, a.Credit)
	return binary.BigEndian.AppendUint64(b, uint64(a.Arrived))
}

// ParseSmall decodes the body of a SMALL frame whose header h was accepted
// by ParseHeader: the ACK it carries (ok reports whether it does), the
// message's segment as DATA would carry it (one segment at offset 0 of a
// message of Len bytes, session left 0: the rail's keys, or in clear the
// connection, tell the session), and its payload (a subslice of body).
func ParseSmall(h Header, body []byte, lim Limits) (a Ack, ok bool, d Data, payload []byte, err error) {
	if len(body) != int(h.Len) {
		return a, false, d, nil, malformed("small body of %d bytes, header says %d", len(body), h.Len)
	}
	if h.Flags&FlagAck != 0 {
		if len(body) < AckSize {
			return a, false, d, nil, malformed("small body of %d bytes with an ack", len(body))
		}
		if a, err = ParseAck(body[:AckSize]); err != nil {
			return a, false, d, nil, err
		}
		ok, body = true, body[AckSize:]
	}
	if len(body) < SmallFixedSize {
		return a, false, d, nil, malformed("small body of %d bytes", len(body))
	}
	d.Flags = h.Flags & FlagEager
	d.Message = binary.BigEndian.Uint64(body[0:8])
	d.Tag = binary.BigEndian.Uint32(body[8:12])
	payload = body[SmallFixedSize:]
	d.Len = uint32(len(payload))
	d.Total = uint64(d.Len)
	if d.Message == 0 {
		return a, false, d, nil, malformed("message id 0")
	}
	if lim.SegmentSize <= 0 {
		return a, false, d, nil, malformed("no segment size negotiated")
	}
	if len(payload) > min(MaxSmallPayload, lim.SegmentSize) {
		return a, false, d, nil, malformed("small payload of %d bytes (at most %d)", len(payload), min(MaxSmallPayload, lim.SegmentSize))
	}
	if lim.MaxMessage >= 0 && d.Total > uint64(lim.MaxMessage) {
		return a, false, d, nil, malformed("message of %d bytes exceeds the limit of %d", d.Total, lim.MaxMessage)
	}
	return a, ok, d, payload, nil
}

// Ack acknowledges DATA frames received on the rail it travels back on,
// says when the last of them arrived, and grants flow-control credit for
// the whole connection.
type Ack struct {
	// Received is the number of DATA frames received on this rail so far
	// (cumulative).
	Received uint64
	// Credit is the total number of bytes of message cost the receiver has
	// granted since the session began (cumulative, includes the initial
	// window).
	Credit uint64
	// Arrived is when the Received-th DATA frame had been read whole, in
	// ns on the receiver's monotonic clock (any origin, fixed for the
	// rail's connection; 0 while Received is 0). It never goes down on a
	// connection; the codec allows 0 to 2^63-1.
	Arrived int64
}

// AppendAck appends a whole ACK frame.
func AppendAck(b []byte, a Ack) []byte {
	b = appendHeader(b, TypeAck, 0, AckSize)
	b = binary.BigEndian.AppendUint64(b, a.Received)
	b = binary.BigEndian.AppendUint64(b, a.Credit)
	return binary.BigEndian.AppendUint64(b, uint64(a.Arrived))
}

// ParseAck decodes an ACK body. An arrival time of 2^63 or more is
// malformed.
func ParseAck(body []byte) (Ack, error) {
	if len(body) != AckSize {
		return Ack{}, malformed("ack of %d bytes", len(body))
	}
	a := Ack{Received: binary.BigEndian.Uint64(body[:8]), Credit: binary.BigEndian.Uint64(body[8:16])}
	arrived := binary.BigEndian.Uint64(body[16:24])
	if arrived > math.MaxInt64 {
		return Ack{}, malformed("ack arrival time %#x beyond 2^63-1", arrived)
	}
	a.Arrived = int64(arrived)
	return a, nil
}

// GoAway codes.
const (
	GoAwayClose    uint16 = 0 // orderly close of the whole connection
	GoAwayProtocol uint16 = 1 // the peer violated the protocol
)

// AppendGoAway appends a GOAWAY frame.
func AppendGoAway(b []byte, code uint16) []byte {
	b = appendHeader(b, TypeGoAway, 0, GoAwaySize)
	return binary.BigEndian.AppendUint16(b, code)
}

// ParseGoAway decodes a GOAWAY body.
func ParseGoAway(body []byte) (uint16, error) {
	if len(body) != GoAwaySize {
		return 0, malformed("goaway of %d bytes", len(body))
	}
	return binary.BigEndian.Uint16(body), nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC32C of p, as carried by DATA frames with FlagCRC.
func Checksum(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }

func appendHeader(b []byte, typ, flags uint8, n uint32) []byte {
	return append(b, typ, flags, 0, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// ErrShort is returned by DecodeFrame when b holds only part of a frame.
var ErrShort = errors.New("wire: incomplete frame")

// DecodeFrame checks the first whole frame in b: its header and its body,
// decoded by the parser of its type. It returns the header and the number
// of bytes the frame occupies. For a DATA frame with FlagCRC it also checks
// the payload's checksum. It never panics, whatever b holds.
func DecodeFrame(b []byte, lim Limits) (Header, int, error) {
	if len(b) < HeaderSize {
		return Header{}, 0, ErrShort
	}
	h, err := ParseHeader(b, lim)
	if err != nil {
		return h, 0, err
	}
	if uint64(len(b)) < HeaderSize+uint64(h.Len) {
		return h, 0, ErrShort
	}
	n := HeaderSize + int(h.Len)
	body := b[HeaderSize:n]
	switch h.Type {
	case TypeHello:
		_, _, err = ParseHelloPrefix(body)
	case TypeReject:
		_, err = ParseReject(body)
	case TypeAck:
		_, err = ParseAck(body)
	case TypeGoAway:
		_, err = ParseGoAway(body)
	case TypeSmall:
		_, _, _, _, err = ParseSmall(h, body, lim)
	case TypeData:
		var d Data
		d, err = ParseData(h, body[:DataFixedSize], lim)
		if err == nil && d.Flags&FlagCRC != 0 && Checksum(body[DataFixedSize:]) != d.CRC {
			err = malformed("payload checksum mismatch")
		}
	}
	if err != nil {
		return h, 0, err
	}
	return h, n, nil
}
