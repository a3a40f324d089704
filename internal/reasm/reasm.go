package reasm

import (
	"errors"
	"fmt"

	"github.com/multirail/multirail/internal/fifo"
	"github.com/multirail/multirail/internal/wire"
)

// ErrCredit is returned (wrapped) when a peer starts a message beyond the
// credit it was granted: a protocol violation.
var ErrCredit = errors.New("reasm: flow-control credit exceeded")

// ErrInconsistent is returned (wrapped) when a segment contradicts what is
// known of its message (another total length or tag).
var ErrInconsistent = errors.New("reasm: segment inconsistent with its message")

// Config bounds a Reassembler. Unlike other configurations its zero value
// is not a default: the fields are the session's limits, which the
// transport settles (segment size from the handshake, the rest from its
// own Config), so SegmentSize, MaxMessage and Window are all required.
type Config struct {
	// SegmentSize is the peer's segment size (from the handshake).
	SegmentSize int
	// MaxMessage is the largest message accepted.
	MaxMessage int64
	// Window is the initial credit granted to the peer, in bytes of Cost.
	// It bounds the bytes held (messages being assembled plus messages
	// complete but not yet taken by Next).
	Window uint64
	// MaxCopies bounds the bytes of segment copies kept at once: a segment
	// offered (Offer) while the same segment is being read on another rail
	// is kept, in case that read fails, only while the copies stay within
	// it; otherwise it is dropped (if the read then fails, the sender
	// resends the segment). 0 keeps none. The transport allows one maximal
	// frame payload per rail.
	MaxCopies int64
	// Alloc, if set, returns a buffer of exactly n bytes for a new message
	// (for example from a pool). Its contents need not be zero: every byte
	// is written before the message is released. nil means make.
	Alloc func(n int) []byte
}

// Verdict says what the caller must do with a segment's payload.
type Verdict int

const (
	// Write: read the payload into dst, then call Commit (or Abort if the
	// read failed).
	Write Verdict = iota
	// Discard: the segment is a duplicate of one already received; read the
	// payload and drop it.
	Discard
	// Hold: the same segment is being read on another rail right now; read
	// the payload into a scratch buffer and pass it to Offer.
	Hold
)

// Message is a complete message in delivery order.
type Message struct {
	ID   uint64
	Tag  uint32
	Data []byte
}

const (
	slotMissing uint8 = iota
	slotBusy
	slotDone
)

type msg struct {
	id      uint64
	tag     uint32
	data    []byte
	slots   []uint8
	missing int
	held    map[int][]byte // copies offered for busy slots (rare)
	queued  bool           // in its tag queue
	inline  [4]uint8       // slots of small messages, without an allocation
}

// tagQueue holds the known, undelivered messages of one tag, oldest first.
type tagQueue = fifo.Queue[*msg]

// Reassembler rebuilds messages from segments that arrive on any rail in any
// order, drops duplicates, enforces the credit window and releases messages
// in an order that keeps messages of one tag in the order they were sent.
//
// It is pure and not safe for concurrent use: the caller holds a lock
// around every call. Payload bytes may be read into the slice returned by
// Begin without the lock, because no other call touches that slice until
// Commit or Abort.
type Reassembler struct {
	cfg      Config
	lim      wire.Limits
	msgs     map[uint64]*msg
	unknown  uint64 // smallest id not yet seen; every id below it is known or delivered
	tags     map[uint32]*tagQueue
	ready    fifo.Queue[*msg]
	freeMsgs []*msg
	freeTags []*tagQueue
	used     uint64 // cost of every message the peer has started
	granted  uint64 // credit granted, cumulative
	held     int64  // bytes of messages in memory
	copies   int64  // bytes of segment copies kept (msg.held), at most cfg.MaxCopies
}

// validate checks c; the error names the field, its value and what is
// allowed.
func (c Config) validate() error {
	if c.SegmentSize < wire.MinSegmentSize || c.SegmentSize > wire.MaxSegmentSize {
		return fmt.Errorf("reasm: SegmentSize = %d, allowed %d..%d", c.SegmentSize, wire.MinSegmentSize, wire.MaxSegmentSize)
	}
	if c.MaxMessage < 0 {
		return fmt.Errorf("reasm: MaxMessage = %d, allowed >= 0", c.MaxMessage)
	}
	if c.Window < Cost(uint64(c.MaxMessage)) {
		return fmt.Errorf("reasm: Window = %d, allowed >= MaxMessage + %d = %d", c.Window, Overhead, Cost(uint64(c.MaxMessage)))
	}
	return nil
}

// New returns a Reassembler for cfg.
func New(cfg Config) (*Reassembler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Reassembler{
		cfg:     cfg,
		lim:     wire.Limits{SegmentSize: cfg.SegmentSize, MaxMessage: cfg.MaxMessage},
		msgs:    make(map[uint64]*msg),
		unknown: 1,
		tags:    make(map[uint32]*tagQueue),
		granted: cfg.Window,
	}, nil
}

// Limits returns the wire limits to decode the peer's DATA frames with.
func (r *Reassembler) Limits() wire.Limits { return r.lim }

// Granted is the cumulative credit granted to the peer (what ACK frames
// carry).
func (r *Reassembler) Granted() uint64 { return r.granted }

// Held is the number of message bytes currently held in memory.
func (r *Reassembler) Held() int64 { return r.held }

// Pending is the number of messages known and not yet taken by Next.
func (r *Reassembler) Pending() int { return len(r.msgs) }

// span is the first slot of segment d and how many slots it covers (a
// frame may carry a span of consecutive segments; an empty message has
// one slot).
func (r *Reassembler) span(d *wire.Data) (int, int) {
	seg := uint64(r.cfg.SegmentSize)
	return int(d.Offset / seg), max(1, int((uint64(d.Len)+seg-1)/seg))
}

// spanState is the state of slots i..i+k-1 of m, and false if they differ
// or run past the message (a frame that overlaps an earlier one without
// matching it: the sender resends spans whole, so only a broken or
// hostile peer does that).
func spanState(m *msg, i, k int) (uint8, bool) {
	if i+k > len(m.slots) {
		return 0, false
	}
	st := m.slots[i]
	for _, x := range m.slots[i+1 : i+k] {
		if x != st {
			return 0, false
		}
	}
	return st, true
}

// setSpan sets slots i..i+k-1 of m to st.
func setSpan(m *msg, i, k int, st uint8) {
	for j := i; j < i+k; j++ {
		m.slots[j] = st
	}
}

// Begin accepts the header of a segment that passed wire.ParseData with
// r.Limits(). It returns where to read the payload and what to do with it.
// An error means the peer violated the protocol; the connection must go.
func (r *Reassembler) Begin(d wire.Data) ([]byte, Verdict, error) {
	m, ok := r.msgs[d.Message]
	if !ok {
		if d.Message < r.unknown {
			return nil, Discard, nil // delivered already: a resent duplicate
		}
		c := Cost(d.Total)
		if r.used+c > r.granted {
			return nil, 0, fmt.Errorf("%w: message %d costs %d, %d of %d credit used", ErrCredit, d.Message, c, r.used, r.granted)
		}
		r.used += c
		n := 1
		if d.Total > 0 {
			n = int((d.Total + uint64(r.cfg.SegmentSize) - 1) / uint64(r.cfg.SegmentSize))
		}
		var data []byte
		if r.cfg.Alloc != nil {
			data = r.cfg.Alloc(int(d.Total))
		} else {
			data = make([]byte, d.Total)
		}
		m = r.newMsg(n)
		m.id, m.tag, m.data, m.missing = d.Message, d.Tag, data, n
		r.msgs[d.Message] = m
		r.held += int64(d.Total)
		r.advance()
	}
	if uint64(len(m.data)) != d.Total || m.tag != d.Tag {
		return nil, 0, fmt.Errorf("%w: message %d has %d bytes tag %d, segment says %d bytes tag %d",
			ErrInconsistent, d.Message, len(m.data), m.tag, d.Total, d.Tag)
	}
	i, k := r.span(&d)
	st, ok := spanState(m, i, k)
	if !ok {
		return nil, 0, fmt.Errorf("%w: message %d: segment %d+%d overlaps others it does not match", ErrInconsistent, d.Message, d.Offset, d.Len)
	}
	switch st {
	case slotDone:
		return nil, Discard, nil
	case slotBusy:
		return nil, Hold, nil
	}
	setSpan(m, i, k, slotBusy)
	return m.data[d.Offset : d.Offset+uint64(d.Len)], Write, nil
}

// Commit records that the payload of a segment Begin answered with Write
// is in place. It reports whether that completed the segment's message.
func (r *Reassembler) Commit(d wire.Data) bool {
	m := r.msgs[d.Message]
	if m == nil {
		return false
	}
	i, k := r.span(&d)
	if st, ok := spanState(m, i, k); !ok || st != slotBusy {
		return false
	}
	setSpan(m, i, k, slotDone)
	r.dropCopies(m, i, k)
	r.done(m, k)
	return m.missing == 0
}

// Abort records that reading the payload of a segment Begin answered with
// Write failed. If another rail offered the same segment meanwhile, that
// copy is used.
func (r *Reassembler) Abort(d wire.Data) {
	m := r.msgs[d.Message]
	if m == nil {
		return
	}
	i, k := r.span(&d)
	if st, ok := spanState(m, i, k); !ok || st != slotBusy {
		return
	}
	setSpan(m, i, k, slotMissing)
	// Copies offered meanwhile fill what they cover.
	seg := r.cfg.SegmentSize
	for j, p := range m.held {
		if j < i || j >= i+k {
			continue
		}
		kk := max(1, (len(p)+seg-1)/seg)
		if st, ok := spanState(m, j, kk); ok && st == slotMissing {
			copy(m.data[j*seg:], p)
			setSpan(m, j, kk, slotDone)
			r.done(m, kk)
		}
	}
	r.dropCopies(m, i, k)
}

// dropCopies forgets the copies kept for spans starting in slots i..i+k-1
// of m, which are settled.
func (r *Reassembler) dropCopies(m *msg, i, k int) {
	for j, p := range m.held {
		if j >= i && j < i+k {
			delete(m.held, j)
			r.copies -= int64(len(p))
		}
	}
}

// Copies is the number of bytes of segment copies now kept (see
// Config.MaxCopies).
func (r *Reassembler) Copies() int64 { return r.copies }

// Offer hands in the payload of a segment Begin answered with Hold. If the
// segment is still being read elsewhere a copy is kept for the case that
// read fails; if it went missing meanwhile the payload fills it.
func (r *Reassembler) Offer(d wire.Data, payload []byte) {
	m := r.msgs[d.Message]
	if m == nil || uint32(len(payload)) != d.Len {
		return
	}
	i, k := r.span(&d)
	st, ok := spanState(m, i, k)
	if !ok {
		return
	}
	switch st {
	case slotMissing:
		copy(m.data[d.Offset:], payload)
		setSpan(m, i, k, slotDone)
		r.done(m, k)
	case slotBusy:
		if _, ok := m.held[i]; ok || r.copies+int64(len(payload)) > r.cfg.MaxCopies {
			return // one copy is enough; beyond MaxCopies the sender resends if need be
		}
		if m.held == nil {
			m.held = make(map[int][]byte)
		}
		m.held[i] = append([]byte(nil), payload...)
		r.copies += int64(len(payload))
	}
}

func (r *Reassembler) done(m *msg, k int) {
	m.missing -= k
	if m.missing == 0 && m.queued {
		// Only the head of its tag's FIFO may become ready here: a later
		// message waits for Next to take the ones before it, and a head that
		// completed earlier is in ready already.
		if q := r.tags[m.tag]; q.Front() == m {
			r.ready.Push(m)
		}
	}
}

// advance moves the unknown mark over ids that are now known, queueing each
// in its tag's FIFO: ids enter in increasing order, so every FIFO is sorted.
func (r *Reassembler) advance() {
	for {
		m, ok := r.msgs[r.unknown]
		if !ok {
			return
		}
		r.unknown++
		q := r.tags[m.tag]
		if q == nil {
			if k := len(r.freeTags); k > 0 {
				q = r.freeTags[k-1]
				r.freeTags = r.freeTags[:k-1]
			} else {
				q = &tagQueue{}
			}
			r.tags[m.tag] = q
		}
		q.Push(m)
		m.queued = true
		if q.Len() == 1 && m.missing == 0 {
			r.ready.Push(m)
		}
	}
}

// promote makes the head of tag's FIFO ready if it is complete.
func (r *Reassembler) promote(tag uint32) {
	q := r.tags[tag]
	if q == nil || q.Len() == 0 {
		return
	}
	if h := q.Front(); h.missing == 0 {
		r.ready.Push(h)
	}
}

// newMsg returns a cleared msg with n missing slots, reusing a delivered
// one when it can.
func (r *Reassembler) newMsg(n int) *msg {
	var m *msg
	if k := len(r.freeMsgs); k > 0 {
		m = r.freeMsgs[k-1]
		r.freeMsgs = r.freeMsgs[:k-1]
	} else {
		m = new(msg)
	}
	if n <= len(m.inline) {
		m.slots = m.inline[:n]
	} else {
		m.slots = make([]uint8, n)
	}
	clear(m.slots)
	return m
}

// freeMsg keeps m for reuse (a bounded number of them).
func (r *Reassembler) freeMsg(m *msg) {
	for _, p := range m.held {
		r.copies -= int64(len(p))
	}
	*m = msg{} // drop the data even if m is not kept: something may still point at m
	if len(r.freeMsgs) < 64 {
		r.freeMsgs = append(r.freeMsgs, m)
	}
}

// Next pops the next message that may be delivered: complete, with every
// earlier message known, and with every earlier message of its tag
// delivered. Taking it grants its cost back to the peer as credit.
func (r *Reassembler) Next() (Message, bool) {
	if r.ready.Len() == 0 {
		return Message{}, false
	}
	m := r.ready.Pop()
	delete(r.msgs, m.id)
	q := r.tags[m.tag]
	q.Pop() // m: the head of its tag (Pop leaves no stale pointer)
	if q.Len() == 0 {
		delete(r.tags, m.tag)
		if len(r.freeTags) < 64 {
			r.freeTags = append(r.freeTags, q)
		}
	} else {
		r.promote(m.tag)
	}
	r.held -= int64(len(m.data))
	c := Cost(uint64(len(m.data)))
	r.granted += c
	out := Message{ID: m.id, Tag: m.tag, Data: m.data}
	r.freeMsg(m)
	return out, true
}

// Ready reports whether Next has a message.
func (r *Reassembler) Ready() bool { return r.ready.Len() > 0 }
