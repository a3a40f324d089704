package lossy

import (
	"encoding/binary"
	"math"
)

// chunks is the geometry both loss-tolerant allreduces (Ring and
// Transpose) share: a vector of n values cut into size chunks, chunk c
// being [c n/size, (c+1) n/size), each cut into packets of at most pf
// values (a chunk has at least one packet, empty when the chunk is).
type chunks struct{ n, size, pf int }

// chunk returns the range of chunk c.
func (g chunks) chunk(c int) (lo, hi int) { return c * g.n / g.size, (c + 1) * g.n / g.size }

// npk returns the number of packets of chunk c (at least one).
func (g chunks) npk(c int) int {
	lo, hi := g.chunk(c)
	return max(1, (hi-lo+g.pf-1)/g.pf)
}

// span returns the values of packet j of chunk c.
func (g chunks) span(c, j int) (lo, hi int) {
	clo, chi := g.chunk(c)
	lo = min(chi, clo+j*g.pf)
	return lo, min(chi, lo+g.pf)
}

// The float32 packet both allreduces send: a 4-byte little-endian head
// (the ring's count of contributions, the transpose's number of values)
// then the values as little-endian float32 bits.

// appendPacket appends a packet of head and vals to b.
func appendPacket(b []byte, head uint32, vals []float32) []byte {
	b = binary.LittleEndian.AppendUint32(b, head)
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// packetSize is the length of a packet of n values.
func packetSize(n int) int { return 4 + 4*n }

// packetHead returns a packet's head.
func packetHead(p []byte) uint32 { return binary.LittleEndian.Uint32(p) }

// packetValue returns value i of a packet.
func packetValue(p []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(p[4+4*i:]))
}
