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
//     payload, even an empty one;
//   - for every other frame, its body when it has one.
//
// A receiver thus opens the header before it trusts the length, and opens
// a DATA frame's fixed part before it decides where the payload goes.

// SealedSize is the bytes on the wire of a frame with header h, sealed.
func SealedSize(h wire.Header) int {
	n := wire.HeaderSize + Overhead
	switch {
	case h.Type == wire.TypeData:
		n += int(h.Len) + 2*Overhead
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
			dst = c.Seal(dst, f[wire.DataHeaderSize:])
		case n > wire.HeaderSize:
			dst = c.Seal(dst, f[wire.HeaderSize:])
		}
	}
	return dst
}
