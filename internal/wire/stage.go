package wire

import (
	"encoding/binary"
	"math"
)

// Stage payloads travel inside messages (DATA frames) of a session whose
// messages are all stage traffic; they are not frames. See docs/wire.md,
// "Loss-tolerant stages".
const (
	// StagePacketHeaderSize precedes the payload of every stage packet:
	// stage (8), part (4), parts (4), index (4), total (4), sent (4).
	StagePacketHeaderSize = 8 + 4 + 4 + 4 + 4 + 4
	// MaxStageParts bounds the parts of one stage.
	MaxStageParts = 1 << 16
	// StageFeedbackSize is the size of a feedback payload: kind (1),
	// reserved (3), received (4), stage (8), period in ns (8), quality as
	// IEEE-754 bits (8).
	StageFeedbackSize = 1 + 3 + 4 + 8 + 8 + 8
)

// Feedback kinds.
const (
	FeedbackPeriod  uint8 = 1 // reception period and packets received
	FeedbackQuality uint8 = 2 // the receiving application's quality value
)

// StagePacket is the header of one packet of a stage. A stage is sent in
// one or more parts (Parts), one after the other; Index, Total and Sent
// count packets within the part.
type StagePacket struct {
	Stage uint64 // the sender's stage number
	Part  uint32 // this packet's part, < Parts
	Parts uint32 // parts of the stage, 1..MaxStageParts
	Index uint32 // position of this packet in the part, < Total
	Total uint32 // packets the part had before discard, >= 1
	Sent  uint32 // packets the sender sends of the part, 1..Total
}

// AppendStagePacket appends the header of p and then payload to b.
func AppendStagePacket(b []byte, p StagePacket, payload []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, p.Stage)
	b = binary.BigEndian.AppendUint32(b, p.Part)
	b = binary.BigEndian.AppendUint32(b, p.Parts)
	b = binary.BigEndian.AppendUint32(b, p.Index)
	b = binary.BigEndian.AppendUint32(b, p.Total)
	b = binary.BigEndian.AppendUint32(b, p.Sent)
	return append(b, payload...)
}

// ParseStagePacket decodes a stage packet; the payload aliases b. Total
// (per part) must not exceed maxTotal.
func ParseStagePacket(b []byte, maxTotal uint32) (StagePacket, []byte, error) {
	if len(b) < StagePacketHeaderSize {
		return StagePacket{}, nil, malformed("stage packet of %d bytes, shorter than its %d-byte header", len(b), StagePacketHeaderSize)
	}
	p := StagePacket{
		Stage: binary.BigEndian.Uint64(b[0:8]),
		Part:  binary.BigEndian.Uint32(b[8:12]),
		Parts: binary.BigEndian.Uint32(b[12:16]),
		Index: binary.BigEndian.Uint32(b[16:20]),
		Total: binary.BigEndian.Uint32(b[20:24]),
		Sent:  binary.BigEndian.Uint32(b[24:28]),
	}
	switch {
	case p.Parts == 0 || p.Parts > MaxStageParts || p.Part >= p.Parts:
		return p, nil, malformed("stage %d: part %d of %d; allowed parts 1..%d", p.Stage, p.Part, p.Parts, MaxStageParts)
	case p.Total == 0 || p.Total > maxTotal:
		return p, nil, malformed("stage %d: total of %d packets; allowed 1..%d", p.Stage, p.Total, maxTotal)
	case p.Sent == 0 || p.Sent > p.Total:
		return p, nil, malformed("stage %d: %d packets sent of %d", p.Stage, p.Sent, p.Total)
	case p.Index >= p.Total:
		return p, nil, malformed("stage %d: packet index %d of %d", p.Stage, p.Index, p.Total)
	}
	return p, b[StagePacketHeaderSize:], nil
}

// StageFeedback is what a stage's receiver reports back.
type StageFeedback struct {
	Kind     uint8  // FeedbackPeriod or FeedbackQuality
	Stage    uint64 // the sender's stage number
	Received uint32 // FeedbackPeriod: packets received
	Period   int64  // FeedbackPeriod: first to last packet, ns, >= 0
	Quality  float64
}

// AppendStageFeedback appends f's encoding to b.
func AppendStageFeedback(b []byte, f StageFeedback) []byte {
	b = append(b, f.Kind, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, f.Received)
	b = binary.BigEndian.AppendUint64(b, f.Stage)
	b = binary.BigEndian.AppendUint64(b, uint64(f.Period))
	return binary.BigEndian.AppendUint64(b, math.Float64bits(f.Quality))
}

// ParseStageFeedback decodes a feedback payload. Fields the kind does not
// use must be zero.
func ParseStageFeedback(b []byte) (StageFeedback, error) {
	if len(b) != StageFeedbackSize {
		return StageFeedback{}, malformed("stage feedback of %d bytes (want %d)", len(b), StageFeedbackSize)
	}
	f := StageFeedback{
		Kind:     b[0],
		Received: binary.BigEndian.Uint32(b[4:8]),
		Stage:    binary.BigEndian.Uint64(b[8:16]),
		Period:   int64(binary.BigEndian.Uint64(b[16:24])),
		Quality:  math.Float64frombits(binary.BigEndian.Uint64(b[24:32])),
	}
	if b[1] != 0 || b[2] != 0 || b[3] != 0 {
		return f, malformed("stage feedback with non-zero reserved bytes")
	}
	switch f.Kind {
	case FeedbackPeriod:
		if f.Period < 0 || f.Quality != 0 || math.Signbit(f.Quality) {
			return f, malformed("period feedback for stage %d: period %d ns, quality bits %#x", f.Stage, f.Period, math.Float64bits(f.Quality))
		}
	case FeedbackQuality:
		if f.Received != 0 || f.Period != 0 || math.IsNaN(f.Quality) || math.IsInf(f.Quality, 0) {
			return f, malformed("quality feedback for stage %d: received %d, period %d, quality %v", f.Stage, f.Received, f.Period, f.Quality)
		}
	default:
		return f, malformed("stage feedback of kind %d", f.Kind)
	}
	return f, nil
}
