package rdzv

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/flynn/noise"

	hs "github.com/multirail/multirail/internal/handshake"
)

// Limits of the protocol. They bound every allocation a peer can cause.
const (
	// MaxSize is the largest job size (number of ranks).
	MaxSize = 1 << 20
	// MaxJobID is the longest job id, in bytes.
	MaxJobID = 1024
	// DefaultMaxCard is the default of ServerConfig.MaxCard.
	DefaultMaxCard = 64 << 10
	// MaxCardLimit is the largest card (Card.Data) anything accepts: the
	// upper bound of ServerConfig.MaxCard and the limit of a file:// card.
	MaxCardLimit = 16 << 20
	// MaxTable is the largest table frame a rank accepts (and a server
	// builds): the cards of all ranks with 4 bytes of length each.
	MaxTable = 256 << 20
)

const (
	version   = 2
	magic     = "MRDZ"      // first bytes of the server's hello frame
	fileMagic = "MRDZF\x01" // first bytes of a file:// card

	macSize = 32 // HMAC-SHA256, of a file:// card
	// noiseMsgLen is the size of either Noise message: an ephemeral
	// Curve25519 key and the AEAD tag of an empty payload.
	noiseMsgLen = 32 + hs.Overhead

	// Frame types. The first three and an error before the handshake
	// completes go in clear; the others only inside a sealed frame.
	tHello  = 1 // server → rank: magic[4] version[1]
	tNoise1 = 2 // rank → server: version[1] Noise message 1 (psk, e)[48]
	tNoise2 = 3 // server → rank: Noise message 2 (e, ee)[48]
	tCard   = 4 // rank → server: card body
	tStatus = 5 // server → rank: registered u32, size u32, missing u32, n u16, n × (lo u32, hi u32)
	tTable  = 6 // server → rank: count u32, count × (len u32, data)
	tAck    = 7 // rank → server: empty
	tError  = 8 // server → rank: code u8, text
	tSealed = 9 // both ways after the handshake: AEAD(inner type || inner body)

	// Error codes (tError).
	codeAuth     = 1 // the rank does not know the server's token, or its frame does not open
	codeRefused  = 2 // the card disagrees with the job (size, job id, rank, duplicate)
	codeProtocol = 3 // the peer broke the protocol (or speaks another version)

	helloLen  = 1 + len(magic) + 1
	noise1Len = 1 + 1 + noiseMsgLen
	noise2Len = 1 + noiseMsgLen
	// sealedOverhead is what sealing adds to an inner frame (type byte
	// included): the outer type byte and the AEAD tag.
	sealedOverhead = 1 + hs.Overhead
	// cardHeader is the fixed part of a card body: job length, rank, size.
	cardHeader = 2 + 4 + 4
	// maxStatusRanges bounds the missing-rank ranges a status frame lists.
	maxStatusRanges = 32
	maxStatusLen    = 1 + 4 + 4 + 4 + 2 + 8*maxStatusRanges
	maxErrorText    = 1024
	maxErrorLen     = 1 + 1 + maxErrorText

	labelPSK  = "multirail/rdzv 2 token"
	labelFile = "multirail-rdzv-file"
)

// errFrame is wrapped by every malformed-frame error.
var errFrame = errors.New("rdzv: malformed frame")

// errAfterHandshake (which wraps errFrame) is wrapped by the errors of a
// frame, after the handshake, that is not sealed or holds no inner type.
var errAfterHandshake = fmt.Errorf("%w after the handshake", errFrame)

// cardFrameMax is the largest card frame (inner type byte included) for
// cards of at most maxCard bytes.
func cardFrameMax(maxCard int) int { return 1 + cardHeader + MaxJobID + maxCard }

// pskOf is the pre-shared key of the tcp:// handshake:
// HMAC-SHA256(key = token, "multirail/rdzv 2 token"). It is not the
// transport's (handshake.TokenKey): one token never gives the same key to
// both protocols. An empty token gives the HMAC of the empty key.
func pskOf(token []byte) [32]byte { return [32]byte(mac(token, labelPSK)) }

// helloBody is the body of the server's hello frame, which both sides
// take as the Noise prologue.
func helloBody() []byte { return append([]byte(magic), version) }

// parseHello checks a hello body's magic and returns its version; the
// body of this version's hello is exactly helloBody.
func parseHello(b []byte) (byte, error) {
	if len(b) < len(magic)+1 || string(b[:len(magic)]) != magic {
		return 0, fmt.Errorf("%w: hello of %d bytes without the magic %q", errFrame, len(b), magic)
	}
	v := b[len(magic)]
	if v == version && len(b) != helloLen-1 {
		return v, fmt.Errorf("%w: version %d hello of %d bytes, want %d", errFrame, v, len(b), helloLen-1)
	}
	return v, nil
}

// newState is the Noise handshake state of the rank (initiator) or the
// server: Noise_NNpsk0_25519_AESGCM_SHA256 with the hello body as
// prologue and pskOf(token) as pre-shared key.
func newState(initiator bool, prologue, token []byte) (*noise.HandshakeState, error) {
	return hs.NewState(initiator, prologue, pskOf(token), nil)
}

// writeSealed writes one sealed frame: the frame header (length, type
// tSealed), then typ and body sealed by c, in one Write.
func writeSealed(w io.Writer, c *hs.Cipher, typ byte, body []byte) error {
	n := 1 + len(body) + sealedOverhead
	b := make([]byte, 4, 4+n)
	binary.BigEndian.PutUint32(b, uint32(n))
	b = append(b, tSealed, typ)
	b = append(b, body...)
	// Seal in place: the plaintext (typ, body) becomes the ciphertext
	// and its tag.
	b = c.Seal(b[:5], b[5:])
	_, err := w.Write(b)
	return err
}

// readSealed reads one sealed frame whose inner frame (type byte
// included) has at most max bytes, opens it with c and returns the inner
// type and body. A frame too long is an error wrapping errFrame (returned
// before anything is allocated), one of another type or with no inner
// type an error wrapping errAfterHandshake, and one that does not open
// (altered, replayed, dropped, moved, or sealed under another key) an
// error wrapping handshake.ErrAuth.
func readSealed(r io.Reader, c *hs.Cipher, max int) (byte, []byte, error) {
	typ, body, err := readFrame(r, max+sealedOverhead)
	if err != nil {
		return 0, nil, err
	}
	if typ != tSealed {
		return 0, nil, fmt.Errorf("%w: frame type %d of %d bytes, want a sealed frame (type %d)", errAfterHandshake, typ, len(body), tSealed)
	}
	p, err := c.Open(body[:0], body)
	if err != nil {
		return 0, nil, err
	}
	if len(p) == 0 {
		return 0, nil, fmt.Errorf("%w: sealed frame without an inner type", errAfterHandshake)
	}
	return p[0], p[1:], nil
}

// writeFrame writes one frame: a 4-byte big-endian length n (type byte
// and body), the type byte, the body; in one Write.
func writeFrame(w io.Writer, typ byte, body []byte) error {
	b := make([]byte, 5+len(body))
	binary.BigEndian.PutUint32(b, uint32(1+len(body)))
	b[4] = typ
	copy(b[5:], body)
	_, err := w.Write(b)
	return err
}

// readFrame reads one frame of at most max bytes (type byte included) and
// returns its type and body. A length of 0 or above max is an error
// wrapping errFrame, returned before anything is allocated.
func readFrame(r io.Reader, max int) (byte, []byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n == 0 || uint64(n) > uint64(max) {
		return 0, nil, fmt.Errorf("%w: length %d, allowed 1..%d", errFrame, n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return b[0], b[1:], nil
}

// mac is HMAC-SHA256(token, label || parts...).
func mac(token []byte, label string, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, token)
	m.Write([]byte(label))
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// appendCardBody appends the card's body: job length u16, job id, rank
// u32, size u32, data (the rest).
func appendCardBody(b []byte, c Card) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(c.JobID)))
	b = append(b, c.JobID...)
	b = binary.BigEndian.AppendUint32(b, uint32(c.Rank))
	b = binary.BigEndian.AppendUint32(b, uint32(c.Size))
	return append(b, c.Data...)
}

// decodeCardBody is the inverse of appendCardBody; data holds at most
// maxCard bytes. The card's Data aliases b.
func decodeCardBody(b []byte, maxCard int) (Card, error) {
	if len(b) < cardHeader {
		return Card{}, fmt.Errorf("%w: card of %d bytes, shorter than its %d-byte header", errFrame, len(b), cardHeader)
	}
	jl := int(binary.BigEndian.Uint16(b))
	if jl > MaxJobID {
		return Card{}, fmt.Errorf("%w: job id of %d bytes, allowed 0..%d", errFrame, jl, MaxJobID)
	}
	if len(b) < cardHeader+jl {
		return Card{}, fmt.Errorf("%w: card of %d bytes cut inside its job id of %d bytes", errFrame, len(b), jl)
	}
	c := Card{JobID: string(b[2 : 2+jl])}
	p := b[2+jl:]
	rank, size := binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:])
	if size < 1 || size > MaxSize {
		return Card{}, fmt.Errorf("%w: size %d, allowed 1..%d", errFrame, size, MaxSize)
	}
	if rank >= size {
		return Card{}, fmt.Errorf("%w: rank %d is out of range for size %d (ranks 0..%d)", errFrame, rank, size, size-1)
	}
	c.Rank, c.Size = int(rank), int(size)
	if d := p[8:]; len(d) > 0 {
		if len(d) > maxCard {
			return Card{}, fmt.Errorf("%w: card data of %d bytes, allowed at most %d", errFrame, len(d), maxCard)
		}
		c.Data = d
	}
	return c, nil
}

// splitMAC cuts the trailing MAC off a body.
func splitMAC(b []byte) (body, sum []byte, err error) {
	if len(b) < macSize {
		return nil, nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte MAC", errFrame, len(b), macSize)
	}
	return b[:len(b)-macSize], b[len(b)-macSize:], nil
}

// status is what a status frame says: how many ranks of the job are
// registered and which are missing (the first ranges of them).
type status struct {
	registered, size, missing int
	ranges                    [][2]int // inclusive, ascending; at most maxStatusRanges
}

func (s status) encode() []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(s.registered))
	b = binary.BigEndian.AppendUint32(b, uint32(s.size))
	b = binary.BigEndian.AppendUint32(b, uint32(s.missing))
	n := min(len(s.ranges), maxStatusRanges)
	b = binary.BigEndian.AppendUint16(b, uint16(n))
	for _, r := range s.ranges[:n] {
		b = binary.BigEndian.AppendUint32(b, uint32(r[0]))
		b = binary.BigEndian.AppendUint32(b, uint32(r[1]))
	}
	return b
}

func decodeStatus(b []byte) (status, error) {
	if len(b) < 14 {
		return status{}, fmt.Errorf("%w: status of %d bytes, want at least 14", errFrame, len(b))
	}
	s := status{
		registered: int(binary.BigEndian.Uint32(b)),
		size:       int(binary.BigEndian.Uint32(b[4:])),
		missing:    int(binary.BigEndian.Uint32(b[8:])),
	}
	n := int(binary.BigEndian.Uint16(b[12:]))
	if n > maxStatusRanges || len(b) != 14+8*n {
		return status{}, fmt.Errorf("%w: status with %d ranges in %d bytes", errFrame, n, len(b))
	}
	if s.size < 1 || s.size > MaxSize || s.registered > s.size || s.missing > s.size {
		return status{}, fmt.Errorf("%w: status %d registered, %d missing of %d", errFrame, s.registered, s.missing, s.size)
	}
	prev := -1
	for i := range n {
		lo, hi := int(binary.BigEndian.Uint32(b[14+8*i:])), int(binary.BigEndian.Uint32(b[18+8*i:]))
		if lo <= prev || hi < lo || hi >= s.size {
			return status{}, fmt.Errorf("%w: status range %d-%d out of order or range", errFrame, lo, hi)
		}
		s.ranges = append(s.ranges, [2]int{lo, hi})
		prev = hi
	}
	return s, nil
}

// rangesOf groups ascending ranks into inclusive ranges.
func rangesOf(ranks []int) [][2]int {
	var out [][2]int
	for _, r := range ranks {
		if n := len(out); n > 0 && out[n-1][1] == r-1 {
			out[n-1][1] = r
			continue
		}
		out = append(out, [2]int{r, r})
	}
	return out
}

// formatRanges writes ranges as "1, 3-5, 9"; when total exceeds what the
// ranges cover, it says how many there are in all.
func formatRanges(ranges [][2]int, total int) string {
	var sb strings.Builder
	covered := 0
	for i, r := range ranges {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.Itoa(r[0]))
		if r[1] != r[0] {
			sb.WriteString("-" + strconv.Itoa(r[1]))
		}
		covered += r[1] - r[0] + 1
	}
	if total > covered {
		fmt.Fprintf(&sb, ", ... (%d in all)", total)
	}
	return sb.String()
}

// encodeTable encodes the table body: count u32, then per rank len u32
// and data.
func encodeTable(cards [][]byte) []byte {
	n := 4
	for _, c := range cards {
		n += 4 + len(c)
	}
	b := make([]byte, 0, n)
	b = binary.BigEndian.AppendUint32(b, uint32(len(cards)))
	for _, c := range cards {
		b = binary.BigEndian.AppendUint32(b, uint32(len(c)))
		b = append(b, c...)
	}
	return b
}

// decodeTable is the inverse of encodeTable; the table must have size
// entries. Entries alias b (nil for empty cards).
func decodeTable(b []byte, size int) ([][]byte, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: table of %d bytes", errFrame, len(b))
	}
	n := int(binary.BigEndian.Uint32(b))
	if n != size {
		return nil, fmt.Errorf("%w: table of %d ranks, this job has size %d", errFrame, n, size)
	}
	// Every entry takes at least 4 bytes: a count larger than that is a
	// lie, caught before allocating the index.
	if n > (len(b)-4)/4 {
		return nil, fmt.Errorf("%w: table says %d ranks in %d bytes", errFrame, n, len(b))
	}
	out := make([][]byte, n)
	p := b[4:]
	for i := range n {
		if len(p) < 4 {
			return nil, fmt.Errorf("%w: table cut at rank %d", errFrame, i)
		}
		l := binary.BigEndian.Uint32(p)
		p = p[4:]
		if uint64(l) > uint64(len(p)) {
			return nil, fmt.Errorf("%w: table entry %d of %d bytes, %d left", errFrame, i, l, len(p))
		}
		if l > 0 {
			out[i] = p[:l:l]
		}
		p = p[l:]
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the table", errFrame, len(p))
	}
	return out, nil
}

// encodeFileCard is the content of a file:// card: fileMagic, the card
// body with its data length, and HMAC(token, labelFile || everything
// before it).
func encodeFileCard(token []byte, c Card) []byte {
	b := append([]byte(fileMagic), appendCardBody(nil, c)...)
	return append(b, mac(token, labelFile, b)...)
}

// decodeFileCard parses a file:// card without checking its MAC; ok
// reports whether the MAC matches token. Knowing the job id before the MAC
// lets a reader say "stale file of job X" rather than "wrong token".
func decodeFileCard(b []byte, token []byte) (c Card, macOK bool, err error) {
	if len(b) < len(fileMagic) || string(b[:len(fileMagic)]) != fileMagic {
		return Card{}, false, fmt.Errorf("%w: not a multirail rendezvous card (bad magic)", errFrame)
	}
	body, sum, err := splitMAC(b)
	if err != nil {
		return Card{}, false, err
	}
	if len(body) < len(fileMagic) {
		return Card{}, false, fmt.Errorf("%w: card file of %d bytes", errFrame, len(b))
	}
	c, err = decodeCardBody(body[len(fileMagic):], MaxCardLimit)
	if err != nil {
		return Card{}, false, err
	}
	return c, hmac.Equal(sum, mac(token, labelFile, body)), nil
}
