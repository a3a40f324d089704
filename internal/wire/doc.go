// Package wire is the pure codec of the multirail wire format: the 8-byte
// frame header, the handshake frames (HELLO, CHALLENGE, AUTH, WELCOME,
// REJECT), DATA segments, SMALL messages, ACK, GOAWAY and PING. The format is specified in
// docs/wire.md; this package is its reference implementation.
//
// It does no I/O, holds no state, starts no goroutines and does no
// cryptography: the Noise messages inside HELLO and CHALLENGE, the sealed
// AUTH and WELCOME bodies and the sealed records of the session phase are
// internal/handshake's. It checks each frame on its own; everything that
// needs more context is the caller's: keys, the session id, segments
// consistent with their message, duplicates, credit.
//
// What the caller must do:
//
//   - Pass the Limits that come from the handshake: SegmentSize is the
//     segment size the peer announced (Hello.SegmentSize on the accepting
//     side, Challenge.SegmentSize on the dialing side), MaxMessage the
//     locally configured largest message. A Limits with SegmentSize <= 0
//     accepts no DATA frame; a negative MaxMessage disables the message
//     size check, so do not pass one.
//   - Read a stream frame by frame: read HeaderSize bytes and call
//     ParseHeader, which bounds h.Len (MaxControlBody for control frames,
//     DataFixedSize+SegmentSize for DATA) before anything is allocated for
//     the body. Then read the body and call the Parse function of h.Type.
//     For DATA, call ParseData on the DataFixedSize fixed part, read d.Len
//     payload bytes and, when d.Flags&FlagCRC != 0, compare Checksum of the
//     payload with d.CRC. For SMALL, read the whole body (ParseHeader
//     bounds it by MaxSmallPayload) and call ParseSmall, which returns the
//     ACK inside it, if any, and the message as the DATA segment it stands
//     for. DecodeFrame does all of this on a buffer and
//     returns ErrShort while the buffer holds only part of a frame.
//   - Write control frames with the Append functions, SMALL frames with
//     PutSmall into b[:SmallHeaderSize] followed by the payload (or, with
//     an ACK inside, AppendSmallAck, then the id and tag, then the
//     payload), and DATA frames with
//     PutData into b[:DataHeaderSize] followed by the payload; set CRC to
//     Checksum(payload) together with FlagCRC, or leave both zero.
//
// Decoders never panic, whatever bytes they are given. Every error they
// return wraps ErrMalformed, except two: a HELLO with the right magic but
// another protocol version (at any length) yields an error wrapping ErrVersion
// (and not ErrMalformed), to be answered with REJECT RejectVersion; and
// DecodeFrame returns ErrShort, which means "read more", not a bad frame.
// PutData, ParseHeader and ParseData allocate nothing unless they return an
// error.
package wire
