// Package tunnel carries TCP connections as streams over one
// multirail.Conn, so that programs that do not link multirail (iperf3,
// rsync, a database's replication) use every rail: `multirail tunnel`
// is its command.
//
// One end of a session opens streams (Session.Open, one per local TCP
// connection); the other end, whose Config.Dial is set, connects each
// stream to a new connection to its target. Bytes flow both ways; either
// side may shut its sending side (TCP half-close) and keep receiving; a
// connection that fails or is reset on one end resets the stream's other
// end too.
//
// # Wire
//
// Every frame is one multirail message, its first byte the frame kind.
// A stream's frames (OPEN, DATA, FIN, RESET) travel under the stream's id
// as the message tag, so the transport delivers them in order; WINDOW
// frames travel under tag 0. Stream ids are chosen by the opening end,
// from 1 upwards, never reused in a session.
//
// # Flow control
//
// Each end grants the other Config.Window bytes per stream: a stream's
// sender sends only within the credit it holds, and the receiver returns
// credit (WINDOW) as it writes the data to the stream's TCP connection,
// a quarter of the window at a time. A stream whose application reads
// slowly therefore holds at most its window at the receiving end, and the
// session's dispatcher, which reads every message of the connection,
// never waits for it: other streams go on at full speed. An opener starts
// with MinWindow of credit and the accepting end grants the rest of its
// window at once. The connection's own receive window stays a bound on
// what is in flight; data received by the session is bounded by
// MaxStreams x Window.
//
// A DATA frame is sent eagerly (multirail.Config.EagerLimit, set by
// ConnConfig): Send returns once the frame is queued on a rail, so a
// stream has many frames in flight and the transport spreads them over
// the rails. Rails may fail and rejoin underneath; the transport resends
// what a failed rail carried, and streams do not notice. When the whole
// connection fails, every stream is reset.
//
// A peer that breaks the protocol (data beyond its credit, frames for
// streams never opened, malformed frames) ends the session with an error
// wrapping ErrProtocol, and the session closes the connection: the peer
// learns at once that its streams are gone. Any other end of a session
// (Close, the connection failing) leaves the connection to the caller.
package tunnel
