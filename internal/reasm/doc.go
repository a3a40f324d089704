// Package reasm rebuilds messages from the segments of DATA frames that
// arrive on any rail in any order, and decides when each message may be
// handed to the application.
//
// A Reassembler is pure: no I/O, no goroutines, no clock. It guarantees:
//
//   - every message is delivered whole and exactly once; duplicate segments
//     (a segment resent on another rail, or arriving after its message was
//     delivered) are recognised and dropped;
//   - messages with the same tag leave Next in increasing id order (MPI
//     non-overtaking); messages of different tags may overtake each other;
//   - a message is released only when it is complete and every smaller id
//     has been seen at least once, so the receiver knows it holds no gap;
//   - memory is bounded by a credit window: a new message whose Cost would
//     push the cost of started messages beyond Granted is a protocol error
//     (ErrCredit), and Next grants the Cost of the message it returns back
//     to the peer. Held reports the message bytes held.
//
// What the caller must do:
//
//   - Decode DATA frames with wire.ParseData and Limits, and pass only
//     segments that passed it.
//   - Serialise calls: a Reassembler is not safe for concurrent use; hold
//     one lock around every call.
//   - Read the payload of a segment outside the lock: Begin returns the
//     slice to read it into (verdict Write), and no other call touches that
//     slice until Commit or Abort for that segment. For Hold, read the
//     payload into a scratch buffer and pass it to Offer; for Discard, read
//     it and drop it.
//   - Verify the payload's checksum (FlagCRC) before Commit. Report a read
//     that failed with Abort, which returns the slot to missing (or fills
//     it from a copy another rail offered meanwhile) so the segment can be
//     taken again when it is resent.
//   - Close the whole connection on any error: an error from Begin
//     (ErrCredit, ErrInconsistent) or a checksum mismatch means the peer
//     violated the protocol.
//   - Call Next until it reports false whenever Ready, and send Granted to
//     the peer (ACK frames) as it grows.
package reasm
