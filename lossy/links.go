package lossy

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/lossy/discard"
)

// StageLink is a loss-tolerant RingTransport: stages go out on Next and come
// in on Prev, two StageConns (one per neighbour).
type StageLink struct {
	Next, Prev *StageConn
}

// Send implements RingTransport.
func (l StageLink) Send(ctx context.Context, packets [][]byte, part, parts int, whole bool) ([]bool, error) {
	if whole {
		_, err := l.Next.SendPartWhole(ctx, packets, part, parts)
		return nil, err
	}
	s, err := l.Next.SendPart(ctx, packets, part, parts)
	return s.Discarded, err
}

// Recv implements RingTransport.
func (l StageLink) Recv(ctx context.Context) (Received, error) {
	s, err := l.Prev.Recv(ctx)
	return Received{Number: s.Number, Packets: s.Packets}, err
}

// ReportQuality implements RingTransport.
func (l StageLink) ReportQuality(ctx context.Context, stage uint64, q float64) error {
	return l.Prev.ReportQuality(ctx, stage, q)
}

// connTag is the message tag ConnLink uses.
const connTag = 0x636f6d6d // "comm"

// ConnLink is a reliable RingTransport over two multirail.Conns: a stage is
// one message, nothing is discarded, and quality reports are dropped.
type ConnLink struct {
	Next, Prev *multirail.Conn
	buf        []byte
}

// Send implements RingTransport.
func (l *ConnLink) Send(ctx context.Context, packets [][]byte, _, _ int, _ bool) ([]bool, error) {
	l.buf = appendPackets(l.buf[:0], packets)
	return nil, l.Next.Send(ctx, connTag, l.buf)
}

// appendPackets encodes ConnLink's message: count, lengths, payloads.
func appendPackets(b []byte, packets [][]byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(packets)))
	for _, p := range packets {
		b = binary.BigEndian.AppendUint32(b, uint32(len(p)))
	}
	for _, p := range packets {
		b = append(b, p...)
	}
	return b
}

// Recv implements RingTransport.
func (l *ConnLink) Recv(ctx context.Context) (Received, error) {
	m, err := l.Prev.Recv(ctx)
	if err != nil {
		return Received{}, err
	}
	ps, err := splitPackets(m.Data)
	if err == nil && m.Tag != connTag {
		err = fmt.Errorf("%w: message with tag %#x", ErrPeer, m.Tag)
	}
	return Received{Packets: ps}, err
}

// ReportQuality implements RingTransport; a reliable link has no controller.
func (l *ConnLink) ReportQuality(context.Context, uint64, float64) error { return nil }

// splitPackets decodes ConnLink's message: count, lengths, payloads.
func splitPackets(b []byte) ([][]byte, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: message of %d bytes", ErrPeer, len(b))
	}
	n := int(binary.BigEndian.Uint32(b))
	if n == 0 || n > (len(b)-4)/4 {
		return nil, fmt.Errorf("%w: message claims %d packets in %d bytes", ErrPeer, n, len(b))
	}
	lens, body := b[4:4+4*n], b[4+4*n:]
	ps := make([][]byte, n)
	for i := range n {
		k := int(binary.BigEndian.Uint32(lens[4*i:]))
		if k > len(body) {
			return nil, fmt.Errorf("%w: packet %d of %d bytes, %d left", ErrPeer, i, k, len(body))
		}
		ps[i], body = body[:k:k], body[k:]
	}
	if len(body) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last packet", ErrPeer, len(body))
	}
	return ps, nil
}

// MemRing returns in-process transports for a ring of n ranks, for tests
// and examples: every hop discards a fixed fraction rate of its packets
// with discard.Select, seeded by (seed, rank, stage number, part).
func MemRing(n int, rate float64, seed uint64) []RingTransport {
	chans := make([]chan Received, n) // chans[i] carries stages into rank i
	for i := range chans {
		chans[i] = make(chan Received, 4)
	}
	ts := make([]RingTransport, n)
	for i := range n {
		ts[i] = &memLink{rank: i, rate: rate, seed: seed, out: chans[(i+1)%n], in: chans[i]}
	}
	return ts
}

type memLink struct {
	rank    int
	rate    float64
	seed    uint64
	out, in chan Received
	next    uint64
	mu      sync.Mutex
	quality map[uint64]float64
}

func (l *memLink) Send(ctx context.Context, packets [][]byte, part, parts int, whole bool) ([]bool, error) {
	rng := rand.New(rand.NewPCG(l.seed^uint64(l.rank)<<32, l.next<<16|uint64(part)))
	drop := make([]bool, len(packets))
	rate := l.rate
	if whole {
		rate = 0
	}
	d := discard.Select(rng, len(packets), rate, drop)
	st := Received{Number: l.next, Packets: make([][]byte, len(packets))}
	if part+1 == parts {
		l.next++
	}
	for i, p := range packets {
		if !drop[i] {
			st.Packets[i] = append([]byte(nil), p...)
		}
	}
	select {
	case l.out <- st:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if d == 0 {
		return nil, nil
	}
	return drop, nil
}

func (l *memLink) Recv(ctx context.Context) (Received, error) {
	select {
	case st := <-l.in:
		return st, nil
	case <-ctx.Done():
		return Received{}, ctx.Err()
	}
}

func (l *memLink) ReportQuality(_ context.Context, stage uint64, q float64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.quality == nil {
		l.quality = map[uint64]float64{}
	}
	l.quality[stage] = q
	return nil
}

// StageMesh is a MeshTransport over one StageConn per peer,
// indexed by rank (the entry of the rank itself is unused).
type StageMesh []*StageConn

// Send implements MeshTransport.
func (m StageMesh) Send(ctx context.Context, to int, packets [][]byte, part, parts int, whole bool) ([]bool, error) {
	if whole {
		_, err := m[to].SendPartWhole(ctx, packets, part, parts)
		return nil, err
	}
	s, err := m[to].SendPart(ctx, packets, part, parts)
	return s.Discarded, err
}

// Recv implements MeshTransport.
func (m StageMesh) Recv(ctx context.Context, from int) (Received, error) {
	s, err := m[from].Recv(ctx)
	return Received{Number: s.Number, Packets: s.Packets}, err
}

// ReportQuality implements MeshTransport.
func (m StageMesh) ReportQuality(ctx context.Context, from int, stage uint64, q float64) error {
	return m[from].ReportQuality(ctx, stage, q)
}

// MemMesh returns n MeshTransports joined in memory, every pair both
// ways, that discard packets at a fixed rate with discard.Select (seeded
// by seed, sender, receiver and stage). For tests and examples.
func MemMesh(n int, rate float64, seed uint64) []MeshTransport {
	ch := make([][]chan Received, n) // ch[from][to]
	for i := range ch {
		ch[i] = make([]chan Received, n)
		for j := range ch[i] {
			ch[i][j] = make(chan Received, 4)
		}
	}
	ts := make([]MeshTransport, n)
	for i := range n {
		ts[i] = &memMesh{rank: i, rate: rate, seed: seed, ch: ch, next: make([]uint64, n)}
	}
	return ts
}

type memMesh struct {
	rank int
	rate float64
	seed uint64
	ch   [][]chan Received
	next []uint64 // per destination: its stage number
}

func (m *memMesh) Send(ctx context.Context, to int, packets [][]byte, part, parts int, whole bool) ([]bool, error) {
	link := &memLink{rank: m.rank*65536 + to, rate: m.rate, seed: m.seed, out: m.ch[m.rank][to], next: m.next[to]}
	disc, err := link.Send(ctx, packets, part, parts, whole)
	m.next[to] = link.next
	return disc, err
}

func (m *memMesh) Recv(ctx context.Context, from int) (Received, error) {
	select {
	case st := <-m.ch[from][m.rank]:
		return st, nil
	case <-ctx.Done():
		return Received{}, ctx.Err()
	}
}

func (m *memMesh) ReportQuality(context.Context, int, uint64, float64) error { return nil }
