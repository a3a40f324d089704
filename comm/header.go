package comm

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The header every communicator message carries in front of its payload,
// inside one multirail message (docs/comm.md, "Wire format"). Pure code:
// encoding and decoding only.

// headerSize is the length of the encoded header in bytes.
const headerSize = 40

// Message kinds.
const (
	kindP2P    uint8 = 1 // a point-to-point message of the application
	kindColl   uint8 = 2 // one step of a collective call
	kindNotice uint8 = 3 // a collective failed or a rank aborted: every rank must fail
	kindHello  uint8 = 4 // the dialing rank's identity, first message of a connection
)

// errHeader is wrapped by every header decoding error.
var errHeader = errors.New("comm: bad message header")

// header is the decoded header of a communicator message.
type header struct {
	kind  uint8
	coll  uint8 // collective (kindColl, kindNotice): coll.Collective
	dtype uint8 // element type of a collective: dtype*
	op    uint8 // reduction of a collective: Op
	algo  uint8 // algorithm of a collective: coll.Algo
	ctx   uint64
	seq   uint64 // collective call number in its communicator (kindColl, kindNotice)
	tag   int32  // p2p tag (kindP2P), step (kindColl), rank that failed (kindNotice, -1: none)
	root  int32  // root of a rooted collective, -1 otherwise
	count uint64 // element count of a collective, as the caller gave it
}

// appendHeader appends h's encoding to b.
func appendHeader(b []byte, h header) []byte {
	b = append(b, h.kind, h.coll, h.dtype, h.op, h.algo, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, h.ctx)
	b = binary.BigEndian.AppendUint64(b, h.seq)
	b = binary.BigEndian.AppendUint32(b, uint32(h.tag))
	b = binary.BigEndian.AppendUint32(b, uint32(h.root))
	return binary.BigEndian.AppendUint64(b, h.count)
}

// parseHeader decodes the header at the front of b and returns it with the
// payload that follows (a subslice of b).
func parseHeader(b []byte) (header, []byte, error) {
	if len(b) < headerSize {
		return header{}, nil, fmt.Errorf("%w: %d bytes, want at least %d", errHeader, len(b), headerSize)
	}
	h := header{
		kind: b[0], coll: b[1], dtype: b[2], op: b[3], algo: b[4],
		ctx:   binary.BigEndian.Uint64(b[8:]),
		seq:   binary.BigEndian.Uint64(b[16:]),
		tag:   int32(binary.BigEndian.Uint32(b[24:])),
		root:  int32(binary.BigEndian.Uint32(b[28:])),
		count: binary.BigEndian.Uint64(b[32:]),
	}
	if b[5] != 0 || b[6] != 0 || b[7] != 0 {
		return header{}, nil, fmt.Errorf("%w: reserved bytes %x, want zeros", errHeader, b[5:8])
	}
	switch h.kind {
	case kindP2P:
		if h.tag < 0 {
			return header{}, nil, fmt.Errorf("%w: point-to-point tag %d, want >= 0", errHeader, h.tag)
		}
	case kindColl:
		if h.tag < 0 {
			return header{}, nil, fmt.Errorf("%w: collective step %d, want >= 0", errHeader, h.tag)
		}
	case kindNotice, kindHello:
	default:
		return header{}, nil, fmt.Errorf("%w: kind %d, want 1..4", errHeader, h.kind)
	}
	return h, b[headerSize:], nil
}
