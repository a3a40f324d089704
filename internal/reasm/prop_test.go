package reasm

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/multirail/multirail/internal/wire"
	"pgregory.net/rapid"
)

// The properties below drive a Reassembler the way the receiving shell
// does, with a sender, rails and failures simulated around it, and check
// every answer against a plain reference model of the contract:
//
//   - every message comes out of Next exactly once, with its bytes;
//   - messages of one tag come out in increasing id order;
//   - a message never comes out before every smaller id was seen;
//   - a message that may come out does (checked whenever Next was drained);
//   - Begin's verdicts follow the slot states (missing: Write, being read:
//     Hold, received or delivered: Discard);
//   - Held, Pending and Granted match the model, and the cost of the
//     messages held never exceeds the window;
//   - at the end everything is delivered, Held() == 0, Pending() == 0 and
//     Granted() == Window + the sum of the costs.

const maxSegs = 5 // largest message: maxSegs segments

type propMsg struct {
	id   uint64
	tag  uint32
	data []byte
}

func (m *propMsg) segs(seg int) int { return max(1, (len(m.data)+seg-1)/seg) }

// genMessages draws n messages of 0..maxSegs segments (exact multiples, odd
// tails, empty ones) with tags from a small set and random content.
func genMessages(t *rapid.T, seg int) []propMsg {
	n := rapid.IntRange(1, 40).Draw(t, "messages")
	tags := rapid.SliceOfN(rapid.Uint32(), 1, 4).Draw(t, "tags")
	seed := rapid.Uint64().Draw(t, "contentSeed")
	msgs := make([]propMsg, n)
	for i := range msgs {
		k := rapid.IntRange(0, maxSegs).Draw(t, "fullSegs")
		tail := 0
		if k < maxSegs {
			switch rapid.IntRange(0, 3).Draw(t, "tailKind") {
			case 1:
				tail = 1
			case 2:
				tail = seg - 1
			case 3:
				tail = rapid.IntRange(1, seg-1).Draw(t, "tail")
			}
		}
		data := make([]byte, k*seg+tail)
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		msgs[i] = propMsg{id: uint64(i + 1), tag: rapid.SampledFrom(tags).Draw(t, "tag"), data: data}
	}
	return msgs
}

type inflight struct {
	d   wire.Data
	v   Verdict
	dst []byte
}

type sentSeg struct {
	d    wire.Data
	rail int
}

// Slot states of the model.
const (
	mMissing = iota
	mBusy
	mDone
)

type modelMsg struct {
	known     bool
	delivered bool
	slots     []uint8
	held      []bool // a Hold copy was offered while the slot was busy
	done      int
}

type driver struct {
	t     *rapid.T
	r     *Reassembler
	cfg   Config
	msgs  []propMsg
	rails int
	lazy  bool // drain Next only now and then instead of after every step
	tight bool // the sender only starts a message that fits its credit

	// sender
	started  int   // messages whose first segment was sent
	nextSeg  []int // per message: next segment to send
	active   []int // started messages with segments left to send
	sent     []sentSeg
	sentCost uint64
	credit   uint64   // credit the sender knows of
	acks     []uint64 // Granted values on their way back to the sender

	// rails
	fifo [][]wire.Data
	busy []*inflight

	dups, fails int // budgets of resends and failed reads

	// model
	model     []modelMsg
	seen      int // ids 1..seen have all been seen
	lastOfTag map[uint32]uint64
	costOut   uint64 // cost of every message delivered
	heldBytes int64
	heldCost  uint64
	pending   int
	scratch   []byte
}

func newDriver(t *rapid.T, tight bool) *driver {
	seg := rapid.IntRange(512, 8192).Draw(t, "segmentSize")
	msgs := genMessages(t, seg)
	maxMsg := int64(maxSegs * seg)
	var window uint64
	if tight {
		window = Cost(uint64(maxMsg)) + uint64(rapid.IntRange(0, seg).Draw(t, "windowExtra"))
	} else {
		window = Cost(uint64(maxMsg))
		for i := range msgs {
			window += Cost(uint64(len(msgs[i].data)))
		}
	}
	cfg := Config{SegmentSize: seg, MaxMessage: maxMsg, Window: window, MaxCopies: 1 << 40}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rails := rapid.IntRange(1, 4).Draw(t, "rails")
	d := &driver{
		t: t, r: r, cfg: cfg, msgs: msgs, rails: rails, tight: tight,
		lazy:      rapid.Bool().Draw(t, "lazy"),
		nextSeg:   make([]int, len(msgs)),
		credit:    window,
		fifo:      make([][]wire.Data, rails),
		busy:      make([]*inflight, rails),
		dups:      rapid.IntRange(0, 2*len(msgs)).Draw(t, "resends"),
		fails:     rapid.IntRange(0, len(msgs)).Draw(t, "failedReads"),
		model:     make([]modelMsg, len(msgs)),
		lastOfTag: map[uint32]uint64{},
		scratch:   make([]byte, seg),
	}
	return d
}

// segment returns the header of segment i of message m, checked by
// wire.ParseData, and its payload.
func (d *driver) segment(m *propMsg, i int) wire.Data {
	lim := d.r.Limits()
	off := i * lim.SegmentSize
	n := min(lim.SegmentSize, len(m.data)-off)
	var b [wire.DataHeaderSize]byte
	wire.PutData(b[:], wire.Data{Message: m.id, Tag: m.tag, Total: uint64(len(m.data)), Offset: uint64(off), Len: uint32(n)})
	h, err := wire.ParseHeader(b[:], lim)
	if err != nil {
		d.t.Fatal(err)
	}
	w, err := wire.ParseData(h, b[wire.HeaderSize:], lim)
	if err != nil {
		d.t.Fatal(err)
	}
	return w
}

func (d *driver) payload(w wire.Data) []byte {
	return d.msgs[w.Message-1].data[w.Offset : w.Offset+uint64(w.Len)]
}

// push puts a segment on a rail other than avoid, if there is one.
func (d *driver) push(w wire.Data, avoid int) int {
	rail := 0
	if d.rails > 1 {
		if avoid >= 0 {
			rail = rapid.IntRange(0, d.rails-2).Draw(d.t, "otherRail")
			if rail >= avoid {
				rail++
			}
		} else {
			rail = rapid.IntRange(0, d.rails-1).Draw(d.t, "rail")
		}
	}
	d.fifo[rail] = append(d.fifo[rail], w)
	return rail
}

func (d *driver) send(mi int) {
	m := &d.msgs[mi]
	w := d.segment(m, d.nextSeg[mi])
	d.nextSeg[mi]++
	d.sent = append(d.sent, sentSeg{w, d.push(w, -1)})
}

// Actions.
const (
	actStart = iota
	actSend
	actRail
	actResend
	actAck
	actDrain
)

type action struct{ kind, arg int }

func (d *driver) actions(buf []action) []action {
	buf = buf[:0]
	if d.started < len(d.msgs) {
		c := Cost(uint64(len(d.msgs[d.started].data)))
		if !d.tight || d.sentCost+c <= d.credit {
			buf = append(buf, action{actStart, 0})
		}
	}
	if len(d.active) > 0 {
		buf = append(buf, action{actSend, 0})
	}
	for i := range d.rails {
		if d.busy[i] != nil || len(d.fifo[i]) > 0 {
			buf = append(buf, action{actRail, i})
		}
	}
	if d.dups > 0 && len(d.sent) > 0 {
		buf = append(buf, action{actResend, 0})
	}
	if len(d.acks) > 0 {
		buf = append(buf, action{actAck, 0})
	}
	if d.lazy && d.r.Ready() {
		buf = append(buf, action{actDrain, 0})
	}
	return buf
}

func (d *driver) run() {
	var buf []action
	for {
		buf = d.actions(buf)
		if len(buf) == 0 {
			break
		}
		a := buf[rapid.IntRange(0, len(buf)-1).Draw(d.t, "action")]
		switch a.kind {
		case actStart:
			mi := d.started
			d.started++
			d.sentCost += Cost(uint64(len(d.msgs[mi].data)))
			d.send(mi)
			if d.nextSeg[mi] < d.msgs[mi].segs(d.cfg.SegmentSize) {
				d.active = append(d.active, mi)
			}
		case actSend:
			k := rapid.IntRange(0, len(d.active)-1).Draw(d.t, "sendOf")
			mi := d.active[k]
			d.send(mi)
			if d.nextSeg[mi] == d.msgs[mi].segs(d.cfg.SegmentSize) {
				d.active = append(d.active[:k], d.active[k+1:]...)
			}
		case actRail:
			if d.busy[a.arg] != nil {
				d.finish(a.arg)
			} else {
				d.begin(a.arg)
			}
		case actResend:
			d.dups--
			s := d.sent[rapid.IntRange(0, len(d.sent)-1).Draw(d.t, "resendOf")]
			d.push(s.d, s.rail)
		case actAck:
			if d.acks[0] > d.credit {
				d.credit = d.acks[0]
			}
			d.acks = d.acks[1:]
		case actDrain:
			d.drain(rapid.IntRange(1, 4).Draw(d.t, "drainCount"))
		}
		if !d.lazy {
			d.drainAll()
		}
		d.checkState()
	}
	d.drainAll()
	d.checkEnd()
}

// begin takes the segment at the head of a rail and starts reading it.
func (d *driver) begin(rail int) {
	w := d.fifo[rail][0]
	d.fifo[rail] = d.fifo[rail][1:]
	m := &d.model[w.Message-1]
	slot := int(w.Offset / uint64(d.cfg.SegmentSize))
	want := Write
	switch {
	case m.delivered:
		want = Discard
	case !m.known:
	case m.slots[slot] == mBusy:
		want = Hold
	case m.slots[slot] == mDone:
		want = Discard
	}
	dst, v, err := d.r.Begin(w)
	if err != nil {
		d.t.Fatalf("Begin(msg %d at %d) on rail %d: %v", w.Message, w.Offset, rail, err)
	}
	if v != want {
		d.t.Fatalf("Begin(msg %d at %d) = %v, want %v", w.Message, w.Offset, v, want)
	}
	if !m.known {
		n := d.msgs[w.Message-1].segs(d.cfg.SegmentSize)
		m.known = true
		m.slots = make([]uint8, n)
		m.held = make([]bool, n)
		d.pending++
		d.heldBytes += int64(w.Total)
		d.heldCost += Cost(w.Total)
		for d.seen < len(d.model) && d.model[d.seen].known {
			d.seen++
		}
	}
	if v == Write {
		if len(dst) != int(w.Len) {
			d.t.Fatalf("Begin(msg %d at %d) gave %d bytes, want %d", w.Message, w.Offset, len(dst), w.Len)
		}
		m.slots[slot] = mBusy
	}
	d.busy[rail] = &inflight{d: w, v: v, dst: dst}
}

// finish completes the read in progress on a rail.
func (d *driver) finish(rail int) {
	f := d.busy[rail]
	d.busy[rail] = nil
	w := f.d
	m := &d.model[w.Message-1]
	slot := int(w.Offset / uint64(d.cfg.SegmentSize))
	p := d.payload(w)
	switch f.v {
	case Write:
		if d.fails > 0 && rapid.Bool().Draw(d.t, "readFails") {
			// The read broke off half-way and left garbage; the sender
			// resends the segment on a rail.
			d.fails--
			for i := range f.dst[:len(f.dst)/2] {
				f.dst[i] = ^p[i]
			}
			d.r.Abort(w)
			if m.held[slot] {
				m.held[slot] = false
				m.slots[slot] = mDone
				m.done++
			} else {
				m.slots[slot] = mMissing
			}
			d.push(w, rail)
			return
		}
		copy(f.dst, p)
		d.r.Commit(w)
		m.held[slot] = false
		m.slots[slot] = mDone
		m.done++
	case Hold:
		buf := d.scratch[:len(p)]
		copy(buf, p)
		d.r.Offer(w, buf)
		for i := range buf { // the caller reuses its scratch buffer
			buf[i] = ^buf[i]
		}
		switch {
		case m.delivered:
		case m.slots[slot] == mMissing:
			m.slots[slot] = mDone
			m.done++
		case m.slots[slot] == mBusy:
			m.held[slot] = true
		}
	}
}

func (d *driver) drain(n int) {
	for ; n > 0; n-- {
		msg, ok := d.r.Next()
		if !ok {
			return
		}
		d.delivered(msg)
	}
}

func (d *driver) drainAll() {
	d.drain(len(d.msgs) + 1)
	if d.r.Ready() {
		d.t.Fatalf("Ready() after Next reported none")
	}
	d.checkLive()
}

func (d *driver) delivered(msg Message) {
	if msg.ID == 0 || msg.ID > uint64(len(d.msgs)) {
		d.t.Fatalf("Next() = unknown message %d", msg.ID)
	}
	want := &d.msgs[msg.ID-1]
	m := &d.model[msg.ID-1]
	if m.delivered {
		d.t.Fatalf("message %d delivered twice", msg.ID)
	}
	if !m.known || m.done != len(m.slots) {
		d.t.Fatalf("message %d delivered with %d of %d segments received", msg.ID, m.done, len(m.slots))
	}
	if msg.Tag != want.tag {
		d.t.Fatalf("message %d delivered with tag %d, want %d", msg.ID, msg.Tag, want.tag)
	}
	if !bytes.Equal(msg.Data, want.data) {
		d.t.Fatalf("message %d delivered with wrong bytes (%d bytes, want %d)", msg.ID, len(msg.Data), len(want.data))
	}
	if last := d.lastOfTag[msg.Tag]; last >= msg.ID {
		d.t.Fatalf("message %d of tag %d delivered after message %d", msg.ID, msg.Tag, last)
	}
	if uint64(d.seen) < msg.ID-1 {
		d.t.Fatalf("message %d delivered before message %d was seen", msg.ID, d.seen+1)
	}
	d.lastOfTag[msg.Tag] = msg.ID
	m.delivered = true
	d.pending--
	d.heldBytes -= int64(len(msg.Data))
	d.heldCost -= Cost(uint64(len(msg.Data)))
	d.costOut += Cost(uint64(len(msg.Data)))
	if got := d.r.Granted(); got != d.cfg.Window+d.costOut {
		d.t.Fatalf("Granted() = %d after Next, want %d", got, d.cfg.Window+d.costOut)
	}
	if d.tight {
		d.acks = append(d.acks, d.r.Granted())
	}
}

// checkLive checks, after Next was drained, that no message that may be
// delivered is left behind.
func (d *driver) checkLive() {
	blocked := map[uint32]bool{}
	for i := range d.model {
		m := &d.model[i]
		if m.delivered {
			continue
		}
		tag := d.msgs[i].tag
		if m.known && m.done == len(m.slots) && d.seen >= i && !blocked[tag] {
			d.t.Fatalf("message %d is complete, ids 1..%d were seen and its tag is clear, but Next has nothing", i+1, d.seen)
		}
		blocked[tag] = true
	}
}

func (d *driver) checkState() {
	if got := d.r.Held(); got != d.heldBytes {
		d.t.Fatalf("Held() = %d, want %d", got, d.heldBytes)
	}
	if got := d.r.Pending(); got != d.pending {
		d.t.Fatalf("Pending() = %d, want %d", got, d.pending)
	}
	if d.heldCost > d.cfg.Window {
		d.t.Fatalf("messages held cost %d, beyond the window %d", d.heldCost, d.cfg.Window)
	}
}

func (d *driver) checkEnd() {
	if d.started != len(d.msgs) {
		d.t.Fatalf("stuck: the sender started %d of %d messages (cost sent %d, credit %d)", d.started, len(d.msgs), d.sentCost, d.credit)
	}
	for i := range d.model {
		if !d.model[i].delivered {
			d.t.Fatalf("message %d never delivered", i+1)
		}
	}
	var sum uint64
	for i := range d.msgs {
		sum += Cost(uint64(len(d.msgs[i].data)))
	}
	if d.r.Held() != 0 || d.r.Pending() != 0 || d.r.Ready() {
		d.t.Fatalf("at the end: Held() = %d, Pending() = %d, Ready() = %v", d.r.Held(), d.r.Pending(), d.r.Ready())
	}
	if got := d.r.Granted(); got != d.cfg.Window+sum {
		d.t.Fatalf("at the end: Granted() = %d, want Window %d + costs %d", got, d.cfg.Window, sum)
	}
}

// TestPropertySession: random sessions over 1..4 rails with resends,
// failed reads and a window that never limits.
func TestPropertySession(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		newDriver(t, false).run()
	})
}

// TestPropertyTightWindow: the window only just holds the largest message
// and the sender starts a message only when its cost fits the credit it was
// told of; no ErrCredit may happen and everything must arrive.
func TestPropertyTightWindow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		newDriver(t, true).run()
	})
}
