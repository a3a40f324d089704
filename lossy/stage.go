package lossy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/internal/wire"
	"github.com/multirail/multirail/lossy/discard"
)

// Default message tags of a StageConn's packets and feedback on its Conn
// (StageConfig.PacketTag and FeedbackTag).
const (
	DefaultStagePacketTag   uint32 = 1
	DefaultStageFeedbackTag uint32 = 2
)

// Defaults for the zero values of StageConfig.
const (
	DefaultMaxStagePackets = 1 << 16
	DefaultMaxStageBytes   = 64 << 20
	DefaultStageQueue      = 4
)

// packetSlot is what a received part holds per packet it announces
// before any arrives: a slice header.
const packetSlot = 24

// ErrStageProtocol is wrapped by the error a StageConn fails with when the
// peer breaks the stage protocol (docs/wire.md, "Loss-tolerant stages");
// the connection is closed then.
var ErrStageProtocol = errors.New("lossy: stage protocol violation")

// ErrEmptyStage is returned by StageConn.Send for a stage of no packets.
var ErrEmptyStage = errors.New("lossy: a stage needs at least one packet")

// StageConfig configures a StageConn. The zero value of every field means
// its default.
type StageConfig struct {
	// Discard holds the discard-rate controller's constants (see package
	// discard); they are validated by NewStageConn.
	Discard discard.Config
	// Seed makes the choice of discarded packets deterministic: stage s's
	// choice depends only on (Seed, s, its packet count, its rate).
	Seed uint64
	// MaxPackets bounds the packets of one stage, sent or received.
	// 1..1<<24; 0 means DefaultMaxStagePackets.
	MaxPackets int
	// MaxStageBytes bounds the memory one received part (a whole stage
	// unless it is sent in parts) holds until it is complete, counted as
	// allocated: each packet's receive buffer (header included) and 24
	// bytes per packet the part announces; a peer that sends more loses
	// the connection. At most Queue complete parts wait for Recv besides.
	// >= 1; 0 means DefaultMaxStageBytes.
	MaxStageBytes int64
	// Queue is how many complete received stages wait for Recv before the
	// StageConn stops reading (flow control then holds the peer back).
	// 1..1024; 0 means DefaultStageQueue.
	Queue int
	// Reliable sends every packet: the rate stays 0 whatever the
	// feedback says (the controller still runs, so Stats shows what it
	// would have done). For a baseline on the same transport.
	Reliable bool
	// FixedRate, when > 0, sends every stage at this discard rate whatever
	// the feedback says (the controller still runs, so Stats shows what it
	// would have done): to compare the controller with fixed rates on the
	// same transport. [0, 1); not with Reliable.
	FixedRate float64
	// PacketTag and FeedbackTag are the message tags of the stage packets
	// and of the feedback on the Conn; they must differ. 0 means
	// DefaultStagePacketTag and DefaultStageFeedbackTag.
	PacketTag, FeedbackTag uint32
	// Shared makes the StageConn a guest on a Conn that another reader
	// owns: it never calls Conn.Recv; the owner hands it every message
	// with PacketTag or FeedbackTag through Deliver, and tells it with
	// Fail when the Conn ends. Close then leaves the Conn open. Without
	// Shared, the StageConn owns its Conn and reads every message of it.
	Shared bool
	// Logger receives protocol errors; nil discards.
	Logger *slog.Logger
}

// cfgErr is a configuration error naming the field, its value and what
// is allowed.
func cfgErr(field string, value any, allowed string) error {
	return fmt.Errorf("%w: %s = %v, allowed %s", ErrConfig, field, value, allowed)
}

func (c StageConfig) validate() (StageConfig, error) {
	var err error
	if c.Discard, err = c.Discard.Validate(); err != nil {
		return c, fmt.Errorf("%w: StageConfig.Discard: %w", ErrConfig, err)
	}
	if c.MaxPackets == 0 {
		c.MaxPackets = DefaultMaxStagePackets
	}
	if c.MaxPackets < 1 || c.MaxPackets > 1<<24 {
		return c, cfgErr("StageConfig.MaxPackets", c.MaxPackets, "1..16777216; 0 = default 65536")
	}
	if c.MaxStageBytes == 0 {
		c.MaxStageBytes = DefaultMaxStageBytes
	}
	if c.MaxStageBytes < 1 {
		return c, cfgErr("StageConfig.MaxStageBytes", c.MaxStageBytes, ">= 1; 0 = default 64 MiB")
	}
	if c.Queue == 0 {
		c.Queue = DefaultStageQueue
	}
	if c.Queue < 1 || c.Queue > 1024 {
		return c, cfgErr("StageConfig.Queue", c.Queue, "1..1024; 0 = default 4")
	}
	if !(c.FixedRate >= 0 && c.FixedRate < 1) || (c.FixedRate > 0 && c.Reliable) {
		return c, cfgErr("StageConfig.FixedRate", c.FixedRate, "[0, 1), 0 = the controller's rate; not with Reliable")
	}
	if c.PacketTag == 0 {
		c.PacketTag = DefaultStagePacketTag
	}
	if c.FeedbackTag == 0 {
		c.FeedbackTag = DefaultStageFeedbackTag
	}
	if c.PacketTag == c.FeedbackTag {
		return c, cfgErr("StageConfig.FeedbackTag", c.FeedbackTag, "a tag other than PacketTag")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Stage is one received stage, or one part of a stage sent in parts.
type Stage struct {
	// Number is the sender's stage number (0, 1, 2, ... for each
	// StageConn); report the stage's quality under it.
	Number uint64
	// Part and Parts place this part in its stage (0 and 1 for a stage
	// sent whole).
	Part, Parts int
	// Packets has one entry per packet of the part as the sender cut it;
	// nil where the sender discarded the packet.
	Packets [][]byte
	// Received is how many packets of the part arrived.
	Received int
	// Period is the stage's reception period so far: for each of its
	// parts up to this one, first packet to last, added up (the time the
	// sender spent between parts does not count). For the last part it is
	// the stage's period, the one reported back to the sender.
	Period time.Duration
}

// SentStage says how a stage (or a part of one) was sent.
type SentStage struct {
	Number  uint64
	Part    int
	Rate    float64 // the discard rate the stage was sent with
	Packets int     // packets of the stage
	Dropped int     // packets discarded before sending
	// Discarded marks the discarded packets (index as in the part); nil
	// when none was.
	Discarded []bool
}

// StageStats is a StageConn's telemetry (the type Conn.Stats reports as
// Stages for the StageConn running over the connection).
type StageStats = multirail.StageStats

// ctrlStage maps a stage number on the wire to the controller's stage.
type ctrlStage struct {
	number, stage uint64
	controlled    bool
}

// inStage is a stage being received.
type inStage struct {
	number      uint64
	part, parts int  // the part being received (or the last one completed)
	open        bool // a stage is in progress: more parts follow
	inPart      bool // a part is in progress
	total       int
	sent        int
	got         int
	received    int           // packets of the stage so far
	active      time.Duration // reception time of the stage's completed parts
	bytes       int64
	first       time.Time // first packet of the part
	packets     [][]byte
	lastNumber  uint64 // number of the last completed stage
	any         bool   // a stage was completed before
}

// StageConn runs loss-tolerant stages (JP7684261B2) over a Conn, in both
// directions: Send sends a stage's packets minus a discarded fraction set
// by a discard.Controller, the peer's StageConn measures the stage's
// reception period and reports it back, the peer's application reports
// the stage's quality with ReportQuality, and the controller sets the rate
// of the next stage from both. By default a StageConn owns its Conn (it
// reads every message of it) and closing one closes the other; with
// StageConfig.Shared it is a guest on a Conn read by someone else (see
// Deliver).
type StageConn struct {
	c   *multirail.Conn
	cfg StageConfig

	sendMu sync.Mutex // one Send at a time: stages are sequential
	out    struct {
		number      uint64 // the open stage's number on the wire
		next        uint64 // the next stage's number
		rate        float64
		part, parts int       // last part sent, of parts; part+1 == parts: none open
		began       time.Time // when the last controlled stage began
	}
	pcg  *rand.PCG
	rng  *rand.Rand
	drop []bool
	buf  []byte

	mu      sync.Mutex // guards everything below
	ctrl    *discard.Controller
	ctrlOf  []ctrlStage // recent stages sent, by number % len
	st      StageStats
	rates   [multirail.RecentChoices]float64
	nrates  uint64
	recvErr error
	fixed   float64 // FixedRate, changed by SetFixedRate

	in     inStage
	inMu   sync.Mutex // serialises Deliver calls (Shared)
	queue  chan Stage
	stop   chan struct{}
	done   chan struct{}
	closer sync.Once
	failer sync.Once
}

// NewStageConn starts running stages over c. Without StageConfig.Shared
// it takes over c: do not call c.Send or c.Recv afterwards, and close the
// StageConn (not c) when done. With Shared, the caller keeps reading c and
// hands the StageConn its messages with Deliver.
func NewStageConn(c *multirail.Conn, cfg StageConfig) (*StageConn, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	ctrl, err := discard.New(cfg.Discard)
	if err != nil {
		return nil, err
	}
	pcg := rand.NewPCG(cfg.Seed, 0)
	s := &StageConn{
		c: c, cfg: cfg, pcg: pcg, rng: rand.New(pcg), ctrl: ctrl, fixed: cfg.FixedRate, ctrlOf: make([]ctrlStage, ctrl.Config().Pending),
		queue: make(chan Stage, cfg.Queue), stop: make(chan struct{}), done: make(chan struct{}),
	}
	c.SetStageStats(s.Stats)
	if cfg.Shared {
		go func() {
			select {
			case <-s.stop:
				s.fail(multirail.ErrClosed)
			case <-s.done:
			}
		}()
		return s, nil
	}
	go s.loop()
	return s, nil
}

// Tags returns the message tags of the StageConn's packets and feedback.
func (s *StageConn) Tags() (packet, feedback uint32) {
	return s.cfg.PacketTag, s.cfg.FeedbackTag
}

// Deliver hands a Shared StageConn one message its owner received on the
// Conn with the packet or feedback tag. It may block while Queue complete
// stages wait for Recv (until ctx is done). A message that breaks the
// stage protocol returns an error wrapping ErrStageProtocol; the owner
// should then close the Conn. Deliver calls must not overlap.
func (s *StageConn) Deliver(ctx context.Context, m multirail.Message) error {
	if !s.cfg.Shared {
		return fmt.Errorf("lossy: Deliver on a StageConn that reads its own Conn (StageConfig.Shared is false)")
	}
	s.inMu.Lock()
	defer s.inMu.Unlock()
	var err error
	switch m.Tag {
	case s.cfg.PacketTag:
		err = s.packet(ctx, m.Data, time.Now())
	case s.cfg.FeedbackTag:
		err = s.feedback(m.Data)
	default:
		err = fmt.Errorf("%w: message with tag %d on a stage connection", ErrStageProtocol, m.Tag)
	}
	if errors.Is(err, ErrStageProtocol) {
		s.cfg.Logger.Warn("lossy: stage protocol error", "err", err)
	}
	return err
}

// Fail ends a Shared StageConn's receiving side: Recv returns the stages
// already complete, then err. The owner calls it when the Conn ended.
func (s *StageConn) Fail(err error) { s.fail(err) }

func (s *StageConn) fail(err error) {
	s.failer.Do(func() {
		s.mu.Lock()
		s.recvErr = err
		s.mu.Unlock()
		close(s.done)
	})
}

// Conn returns the underlying connection (for Stats and Close).
func (s *StageConn) Conn() *multirail.Conn { return s.c }

// Send sends one stage: packets minus the fraction the controller's
// current rate discards, chosen by discard.Select from (Seed, stage
// number). The packets are copied; the caller may reuse them when Send
// returns. Every packet should be smaller than the Conn's EagerLimit minus
// wire.StagePacketHeaderSize bytes, or each costs a round trip.
func (s *StageConn) Send(ctx context.Context, packets [][]byte) (SentStage, error) {
	return s.SendPart(ctx, packets, 0, 1)
}

// ErrStageOrder is returned by SendPart for a part out of order.
var ErrStageOrder = errors.New("lossy: stage part out of order")

// SendPart sends part of a stage of parts parts, which are sent in order
// 0, 1, ..., parts-1, each with at least one packet. Part 0 begins the
// stage and fixes its rate; every part is sent at that rate, its discarded
// packets spread over the part (seeded by Seed, stage number and part).
// The receiver's reception period adds up each part's, first packet to
// last: the time between parts does not count. Otherwise
// as Send.
func (s *StageConn) SendPart(ctx context.Context, packets [][]byte, part, parts int) (SentStage, error) {
	return s.sendPart(ctx, packets, part, parts, false)
}

// SendPartWhole is SendPart for a stage that must arrive whole: its parts
// are sent without discard and the stage is not one of the controller's
// (the peer's feedback on it is ignored). Part 0 decides for the stage.
func (s *StageConn) SendPartWhole(ctx context.Context, packets [][]byte, part, parts int) (SentStage, error) {
	return s.sendPart(ctx, packets, part, parts, true)
}

func (s *StageConn) sendPart(ctx context.Context, packets [][]byte, part, parts int, whole bool) (SentStage, error) {
	n := len(packets)
	if n == 0 {
		return SentStage{}, ErrEmptyStage
	}
	if n > s.cfg.MaxPackets {
		return SentStage{}, fmt.Errorf("lossy: stage part of %d packets; allowed 1..%d (StageConfig.MaxPackets)", n, s.cfg.MaxPackets)
	}
	if parts < 1 || parts > wire.MaxStageParts || part < 0 || part >= parts {
		return SentStage{}, fmt.Errorf("%w: part %d of %d; allowed parts 1..%d", ErrStageOrder, part, parts, wire.MaxStageParts)
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	o := &s.out
	open := o.parts > 0 && o.part+1 < o.parts
	switch {
	case part == 0 && open:
		return SentStage{}, fmt.Errorf("%w: part 0 of a new stage while stage %d has sent %d of %d parts", ErrStageOrder, o.number, o.part+1, o.parts)
	case part > 0 && (!open || part != o.part+1 || parts != o.parts):
		return SentStage{}, fmt.Errorf("%w: part %d of %d after part %d of %d", ErrStageOrder, part, parts, o.part, o.parts)
	}
	if part == 0 {
		o.number, o.rate = o.next, 0
		o.next++
		m := ctrlStage{number: o.number}
		s.mu.Lock()
		if !whole {
			if bps := s.c.NominalBps(); bps > 0 {
				s.ctrl.SetWire(packetWire(packets, bps))
			}
			// The cycle: how long ago the previous controlled stage
			// began (the application's step, when it computes between
			// stages).
			now := time.Now()
			if !o.began.IsZero() {
				s.ctrl.SetCycle(now.Sub(o.began))
			}
			o.began = now
			m.stage, o.rate = s.ctrl.Begin()
			m.controlled = true
		}
		s.ctrlOf[o.number%uint64(len(s.ctrlOf))] = m
		fixed := s.fixed
		s.mu.Unlock()
		switch {
		case s.cfg.Reliable:
			o.rate = 0
		case fixed > 0 && !whole:
			o.rate = fixed
		}
	}
	o.part, o.parts = part, parts
	stage, rate := o.number, o.rate
	if cap(s.drop) < n {
		s.drop = make([]bool, n)
	}
	s.pcg.Seed(s.cfg.Seed, stage<<16|uint64(part))
	dropped := discard.Select(s.rng, n, rate, s.drop[:n])
	h := wire.StagePacket{Stage: stage, Part: uint32(part), Parts: uint32(parts), Total: uint32(n), Sent: uint32(n - dropped)}
	sent := 0
	var err error
	for i, p := range packets {
		if s.drop[i] {
			continue
		}
		h.Index = uint32(i)
		s.buf = wire.AppendStagePacket(s.buf[:0], h, p)
		if err = s.c.Send(ctx, s.cfg.PacketTag, s.buf); err != nil {
			break
		}
		sent++
	}
	s.mu.Lock()
	if part == 0 {
		s.st.StagesSent++
		s.rates[s.nrates%multirail.RecentChoices] = rate
		s.nrates++
	}
	s.st.PacketsSent += uint64(sent)
	s.st.PacketsDropped += uint64(dropped)
	s.mu.Unlock()
	out := SentStage{Number: stage, Part: part, Rate: rate, Packets: n, Dropped: dropped}
	if dropped > 0 {
		out.Discarded = append([]bool(nil), s.drop[:n]...)
	}
	return out, err
}

// Recv returns the next complete received stage, or part of a stage sent
// in parts. After the connection ends it returns the reason (io.EOF when
// the peer closed it cleanly).
func (s *StageConn) Recv(ctx context.Context) (Stage, error) {
	select {
	case st := <-s.queue:
		return st, nil
	default:
	}
	select {
	case st := <-s.queue:
		return st, nil
	case <-s.done:
		select {
		case st := <-s.queue:
			return st, nil
		default:
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return Stage{}, s.recvErr
	case <-ctx.Done():
		return Stage{}, ctx.Err()
	}
}

// ReportQuality tells the peer's controller the quality of the received
// stage number (higher is better; for training, how much the loss went
// down). q must be a finite number.
func (s *StageConn) ReportQuality(ctx context.Context, stage uint64, q float64) error {
	if math.IsNaN(q) || math.IsInf(q, 0) {
		return fmt.Errorf("lossy: quality %v for stage %d; allowed: a finite number", q, stage)
	}
	b := wire.AppendStageFeedback(make([]byte, 0, wire.StageFeedbackSize), wire.StageFeedback{Kind: wire.FeedbackQuality, Stage: stage, Quality: q})
	if err := s.c.Send(ctx, s.cfg.FeedbackTag, b); err != nil {
		return err
	}
	s.mu.Lock()
	s.st.QualitiesReported++
	s.mu.Unlock()
	return nil
}

// SetFixedRate changes StageConfig.FixedRate from the next stage on: r in
// [0, 1), 0 hands the rate back to the controller (which ran all along).
// For experiments that know more than the controller, such as the
// schedule of an emulated load; not with Reliable.
func (s *StageConn) SetFixedRate(r float64) error {
	if !(r >= 0 && r < 1) || (r > 0 && s.cfg.Reliable) {
		return cfgErr("FixedRate", r, "[0, 1), 0 = the controller's rate; not with Reliable")
	}
	s.mu.Lock()
	s.fixed = r
	s.mu.Unlock()
	return nil
}

// Stats returns a snapshot of the StageConn's telemetry.
func (s *StageConn) Stats() StageStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.Controller = s.ctrl.Stats()
	st.Rate = st.Controller.Rate
	switch {
	case s.cfg.Reliable:
		st.Rate = 0
	case s.fixed > 0:
		st.Rate = s.fixed
	}
	n := min(s.nrates, multirail.RecentChoices)
	st.RecentRates = make([]float64, 0, n)
	for i := s.nrates - n; i < s.nrates; i++ {
		st.RecentRates = append(st.RecentRates, s.rates[i%multirail.RecentChoices])
	}
	return st
}

// Close closes the StageConn and, unless it is Shared, its Conn, and
// waits for its reader.
func (s *StageConn) Close() error {
	var err error
	if !s.cfg.Shared {
		err = s.c.Close()
	}
	s.closer.Do(func() { close(s.stop) })
	<-s.done
	return err
}

// loop reads every message of the Conn: packets of the peer's stages and
// feedback on ours.
func (s *StageConn) loop() {
	var err error
	defer func() { s.fail(err) }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		var m multirail.Message
		m, err = s.c.Recv(ctx)
		now := time.Now()
		if err == nil {
			switch m.Tag {
			case s.cfg.PacketTag:
				err = s.packet(ctx, m.Data, now)
			case s.cfg.FeedbackTag:
				err = s.feedback(m.Data)
			default:
				err = fmt.Errorf("%w: message with tag %d on a stage connection", ErrStageProtocol, m.Tag)
			}
			if errors.Is(err, ErrStageProtocol) {
				s.cfg.Logger.Warn("lossy: closing a stage connection", "err", err)
				s.c.Close()
			}
		}
		if err != nil {
			if errors.Is(err, context.Canceled) {
				err = multirail.ErrClosed
			}
			return
		}
	}
}

func (s *StageConn) packet(ctx context.Context, data []byte, now time.Time) error {
	h, payload, err := wire.ParseStagePacket(data, uint32(s.cfg.MaxPackets))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStageProtocol, err)
	}
	in := &s.in
	if !in.inPart {
		// The first packet of a part: a new stage's part 0, or the next
		// part of the open stage.
		switch {
		case !in.open && h.Part != 0:
			return fmt.Errorf("%w: stage %d begins with part %d", ErrStageProtocol, h.Stage, h.Part)
		case !in.open && in.any && h.Stage <= in.lastNumber:
			return fmt.Errorf("%w: stage %d after stage %d", ErrStageProtocol, h.Stage, in.lastNumber)
		case in.open && (h.Stage != in.number || int(h.Part) != in.part+1 || int(h.Parts) != in.parts):
			return fmt.Errorf("%w: part %d of %d of stage %d while stage %d waits for part %d of %d", ErrStageProtocol, h.Part, h.Parts, h.Stage, in.number, in.part+1, in.parts)
		}
		if !in.open {
			in.number, in.parts, in.received, in.active, in.open = h.Stage, int(h.Parts), 0, 0, true
		}
		in.part, in.inPart, in.first = int(h.Part), true, now
		// What the part holds counts as allocated: a slot per announced
		// packet now, each packet's whole buffer as it arrives.
		in.total, in.sent, in.got = int(h.Total), int(h.Sent), 0
		in.bytes = int64(h.Total) * packetSlot
		if in.bytes > s.cfg.MaxStageBytes {
			return fmt.Errorf("%w: stage %d part %d announces %d packets: %d bytes of slots, more than %d (StageConfig.MaxStageBytes)", ErrStageProtocol, h.Stage, h.Part, h.Total, in.bytes, s.cfg.MaxStageBytes)
		}
		in.packets = make([][]byte, h.Total)
	}
	switch {
	case h.Stage != in.number || int(h.Part) != in.part || int(h.Parts) != in.parts || int(h.Total) != in.total || int(h.Sent) != in.sent:
		return fmt.Errorf("%w: packet of stage %d part %d (%d of %d) while part %d of stage %d (%d of %d) is incomplete", ErrStageProtocol, h.Stage, h.Part, h.Sent, h.Total, in.part, in.number, in.sent, in.total)
	case in.packets[h.Index] != nil:
		return fmt.Errorf("%w: packet %d of stage %d part %d twice", ErrStageProtocol, h.Index, h.Stage, h.Part)
	}
	in.bytes += int64(cap(payload)) + wire.StagePacketHeaderSize // the packet's buffer stays alive
	if in.bytes > s.cfg.MaxStageBytes {
		return fmt.Errorf("%w: stage %d part %d holds more than %d bytes (StageConfig.MaxStageBytes)", ErrStageProtocol, h.Stage, h.Part, s.cfg.MaxStageBytes)
	}
	if payload == nil {
		payload = []byte{}
	}
	in.packets[h.Index] = payload
	in.got++
	if in.got < in.sent {
		return nil
	}
	in.received += in.got
	in.active += now.Sub(in.first)
	st := Stage{Number: in.number, Part: in.part, Parts: in.parts, Packets: in.packets, Received: in.got, Period: in.active}
	in.packets, in.inPart = nil, false
	last := in.part+1 == in.parts
	s.mu.Lock()
	s.st.PacketsReceived += uint64(st.Received)
	if last {
		s.st.StagesReceived++
		s.st.LastPeriod = st.Period
	}
	s.mu.Unlock()
	if last {
		in.open, in.any, in.lastNumber = false, true, in.number
		fb := wire.AppendStageFeedback(make([]byte, 0, wire.StageFeedbackSize), wire.StageFeedback{
			Kind: wire.FeedbackPeriod, Stage: st.Number, Received: uint32(in.received), Period: int64(st.Period),
		})
		if err := s.c.Send(ctx, s.cfg.FeedbackTag, fb); err != nil {
			return err
		}
	}
	select {
	case s.queue <- st:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// packetWire is the wire time of the part's mean packet, stage header
// included, at bps bits per second.
func packetWire(packets [][]byte, bps float64) time.Duration {
	var n int
	for _, p := range packets {
		n += len(p) + wire.StagePacketHeaderSize
	}
	return time.Duration(float64(n) / float64(len(packets)) * 8 / bps * 1e9)
}

// feedback hands the peer's report on one of our stages to the controller,
// which ignores (and counts) reports for stale or unknown stages.
func (s *StageConn) feedback(data []byte) error {
	f, err := wire.ParseStageFeedback(data)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStageProtocol, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.ctrlOf[f.Stage%uint64(len(s.ctrlOf))]
	if m.number != f.Stage || !m.controlled {
		// Never sent, sent whole, or too old to remember.
		s.st.FeedbackIgnored++
		return nil
	}
	if f.Kind == wire.FeedbackPeriod {
		_ = s.ctrl.Period(m.stage, time.Duration(f.Period), int(f.Received))
		if s.cfg.Logger.Enabled(context.Background(), slog.LevelDebug) {
			cs := s.ctrl.Stats()
			s.cfg.Logger.Debug("lossy: stage period", "stage", f.Stage, "period", time.Duration(f.Period),
				"received", f.Received, "rate", cs.Rate, "baseline", cs.Baseline, "wire", cs.Wire, "cycle", cs.Cycle, "share", cs.Share)
		}
	} else {
		_ = s.ctrl.Quality(m.stage, f.Quality)
	}
	return nil
}
