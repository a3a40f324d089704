package handshake

import (
	"encoding/binary"

	"github.com/multirail/multirail/internal/wire"
)

// After the handshake, unless both sides chose plaintext, every frame goes
// on the wire as sealed records, each its plaintext followed by an
// Overhead-byte tag, under its rail's and direction's Cipher (the nonce is
// the count of records before it in that direction, from 1: record 0 is
// the AUTH or WELCOME body):
//
//   - the 8-byte frame header;
//   - for DATA, the fixed part (wire.DataFixedSize bytes), then the
//     payload in records of MaxRecord bytes, the last one shorter (one
//     empty record for an empty payload);
//   - for every other frame (a SMALL frame included: its body is at most
//     a few KiB), its body when it has one.
//
// A receiver thus opens the header before it trusts the length, opens a
// DATA frame's fixed part before it decides where the payload goes, and
// needs a buffer of MaxRecord + Overhead bytes per rail, whatever segment
// size the peer chose.

// MaxRecord is the largest payload record.
const MaxRecord = 64 << 10

// PayloadRecords is the number of records a payload of n bytes takes.
func PayloadRecords(n int) int { return max(1, (n+MaxRecord-1)/MaxRecord) }

// SealedSize is the bytes on the wire of a frame with header h, sealed.
func SealedSize(h wire.Header) int {
	n := wire.HeaderSize + Overhead
	switch {
	case h.Type == wire.TypeData:
		n += int(h.Len) + Overhead + PayloadRecords(int(h.Len)-wire.DataFixedSize)*Overhead
	case h.Len > 0:
		n += int(h.Len) + Overhead
	}
	return n
}

// SealFrames appends the sealed records of frames (whole frames, back to
// back, as the wire package encodes them) to dst.
func SealFrames(c *Cipher, dst, frames []byte) []byte {
	for len(frames) >= wire.HeaderSize {
		typ := frames[0]
		n := wire.HeaderSize + int(binary.BigEndian.Uint32(frames[4:8]))
		f := frames[:n]
		frames = frames[n:]
		dst = c.Seal(dst, f[:wire.HeaderSize])
		switch {
		case typ == wire.TypeData:
			dst = c.Seal(dst, f[wire.HeaderSize:wire.DataHeaderSize])
			dst = SealPayload(c, dst, f[wire.DataHeaderSize:])
		case n > wire.HeaderSize:
			dst = c.Seal(dst, f[wire.HeaderSize:])
		}
	}
	return dst
}

// SealPayload appends the records of a DATA payload p to dst.
func SealPayload(c *Cipher, dst, p []byte) []byte {
	for {
		n := min(len(p), MaxRecord)
		dst = c.Seal(dst, p[:n])
		if p = p[n:]; len(p) == 0 {
			return dst
		}
	}
}
