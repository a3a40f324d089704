// Package multirail moves messages between two hosts over several network
// paths ("rails") at once: several NICs, several subnets, an Ethernet and an
// IP-over-InfiniBand path, or any mix of TCP paths the two hosts share.
//
// # Model
//
// A Conn spans several rails; each rail is one TCP connection. Dial opens
// every rail listed in Config.Rails and joins them into one session;
// Listen and Listener.Accept take the other end, where all rails of a
// peer's connection connect to the same listening address. Every rail is
// authenticated on its own (see Token below).
//
// Send cuts a message into segments of at most Config.SegmentSize bytes. A
// scheduler (Config.Scheduler; see package sched) picks the rail for each
// segment, and each rail has a bounded send queue (Config.QueueDepth
// frames) drained by its own writer. On rails measured at 1 Gbit/s or more
// one frame carries a span of consecutive segments,
// up to 1 MiB, so that fewer frames, writes and reads move the bytes. The receiver reassembles the
// segments, arriving on any rail in any order, and Recv returns whole
// messages only. Messages with the same tag are received in the order
// their Sends started; messages with different tags may overtake each
// other. The schedulers are "qlearn" (the default: it learns each rail's
// delay from every segment's own measured delay and needs no
// configuration), "qlearn-patent" (CN101833479A as reconstructed),
// "shortestqueue", "roundrobin" and "weighted" (static shares from
// Rail.Bandwidth, which must then be set on every rail); docs/scheduler.md
// describes them and BENCHMARKS.md compares them.
//
// Small messages, up to Config.EagerLimit bytes, are sent eagerly: Send
// copies the message and returns as soon as the copy is queued on a rail,
// without waiting for the peer. Larger messages are written from the
// caller's buffer, and Send returns once the peer has acknowledged every
// segment. A nil error from an eager Send therefore does not prove
// delivery: if the connection fails while the copy is still queued, the
// message is lost (Close, by contrast, writes what is queued first, and
// returns ErrUndelivered naming the eager messages the peer did not
// acknowledge). Across a failure, eager messages are delivered at most
// once.
//
// Flow control bounds the receiver's memory: each side grants the other a
// window of Config.MaxReceiveBuffer bytes, which covers messages being
// reassembled plus complete messages not yet taken by Recv (each counted
// with a small fixed overhead). A Send waits until its message fits in the
// peer's window; Recv returns the credit. Messages larger than
// Config.MaxMessageSize, or larger than the peer accepts, fail with
// ErrTooLarge.
//
// When a rail breaks, it is taken out of service and its queued and
// unacknowledged segments are resent on the rails still up; the connection
// carries on as long as one rail is left. A rail also counts as broken when
// it stalls while another rail works: segments sent on it go
// unacknowledged for Config.RailTimeout (plus four times its usual
// acknowledgement delay), or a frame arriving on it stops halfway for twice
// that; a link that went down loses packets without any error, and TCP
// alone would retry for minutes. The dialing side then reconnects the rail
// in the background (backoff 50 ms to 1 s) and, once the new connection
// has passed the handshake, the rail carries traffic again
// (RailStats.Rejoins, RailStats.LastError). Idle rails are kept alive with
// pings, and a rail on which nothing arrives for Config.IdleTimeout is
// dropped. When no rail is left, a connection of two or more rails waits
// Config.SessionGrace for one to rejoin before it fails (not when the
// peer's end closed its last rail: its process ended).
//
// On a connection with a single rail, Recv reads the rail itself rather
// than being handed each message by the rail's reader goroutine, which
// saves a goroutine wake-up per message; cancelling its context interrupts
// it at the next frame boundary. A program that hands each message on to
// another goroutine (a demultiplexer, as the communicator has) can take
// them earlier with Conn.OnMessage: a handler that the goroutine reading a
// rail offers every complete message to, which saves the wake-up of the
// goroutine waiting in Recv; what it declines goes to Recv, in order.
//
// Recv allocates the buffer of each message from size-classed pools. A
// caller that is done with Message.Data may hand it back with Conn.Release,
// so later receives reuse it instead of allocating; releasing is optional.
//
// By default each rail's writer takes segments from its queue as soon as
// they are queued. With Config.DispatchInterval set (10ms..1s) the queues
// are drained on a timer instead, as in the patent the scheduler follows:
// at every tick everything queued is released, and nothing else leaves a
// queue; control frames (acknowledgements, pings) are never delayed.
//
// Conn.Stats returns a snapshot of the connection's telemetry: per rail
// the bytes and segments sent and received, the send-queue length, the
// segments in flight (written, not yet acknowledged), the last queueing
// delay and a drain-rate estimate; and the scheduler's name, its latest
// rail choices (recorded by the transport for every scheduler) and, for a
// scheduler that implements sched.Explainer, each rail's state level and
// value and the counts of decisions and explorations.
//
// # What the caller must do
//
//   - Close every Conn and Listener. Close first writes what is still
//     queued on the rails (eager messages whose Send returned included),
//     for at most two seconds, then tells the peer on every rail (whose
//     Recv then returns the messages already received, then io.EOF), reads
//     the peer's last acknowledgements until it has closed its ends, closes
//     every rail and waits for the connection's goroutines; it returns
//     ErrUndelivered if eager messages went unacknowledged. Closing a Listener does not close
//     connections it has already handed out.
//   - Not modify msg while Send runs. Segments of a large message are
//     written straight from msg; if ctx is cancelled after the message was
//     handed to the rails, Send returns but the message stays in flight, and
//     msg must then not be modified before Close.
//   - Give both sides the same token: Config.Token or, when it is empty,
//     the MULTIRAIL_TOKEN environment variable (TokenEnv). It is the
//     pre-shared key of the Noise handshake (Noise_NNpsk0_25519_AESGCM_SHA256)
//     that opens a session and derives its keys; every frame after it is
//     sealed (AES-256-GCM) unless both sides set Config.Plaintext. An empty
//     token on both sides means a key everyone knows; use that on trusted
//     networks only.
//   - Not touch Message.Data after passing it to Release.
//
// All methods of Conn and Listener are safe for concurrent use; concurrent
// Sends pipeline over the rails.
//
// # Errors
//
//   - ErrConfig is wrapped by every configuration error of Dial and Listen;
//     the message names the field, its value and the allowed range.
//   - *RailError is returned by Dial when a rail cannot be opened or
//     authenticated within Config.HandshakeTimeout; it names the rail and
//     wraps the cause (a network error, or ctx's error).
//   - ErrClosed is returned by calls on a connection (or Listener) closed by
//     this side; it wraps net.ErrClosed, so errors.Is(err, net.ErrClosed)
//     holds too. When the peer closed the connection first, Recv returns
//     the messages already received and then io.EOF, and Send fails with
//     ErrPeerClosed, which wraps net.ErrClosed too.
//   - ErrAuth (inside a *RailError from Dial) means the two sides do not
//     share the token; ErrVersion means the peer speaks another protocol
//     version.
//   - ErrAllRailsDown means every rail of the connection broke and none
//     came back within Config.SessionGrace; the connection is closed.
//   - ErrTooLarge means a message exceeds MaxMessageSize or what the peer
//     accepts; nothing was sent and the connection stays usable.
//   - ErrProtocol means the peer violated the protocol (see docs/wire.md);
//     the connection was closed.
//
// Calls that can block take a context.Context and return its error when it
// is done first.
//
// The byte-level protocol is specified in docs/wire.md.
package multirail
