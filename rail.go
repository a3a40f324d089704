// A rail: its connection, its sender core and its lifecycle.

package multirail

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	hs "github.com/multirail/multirail/internal/handshake"
	"github.com/multirail/multirail/internal/sender"
)

// rail is one path of a Conn: its TCP connection and that connection's
// two goroutines. After a failure the dialing side reconnects it (attach);
// each connection is one generation (gen) of the rail.
type rail struct {
	idx     int
	name    string
	nominal float64
	// gen, c, br, readerDone and goneAway change only in attach, which
	// holds rdMu, wmu and Conn.mu; holding any of them is enough to read.
	gen  uint64
	c    net.Conn
	nic  *nic // c's local interface, whose rate the planner uses (nil: loopback)
	br   *hs.Reader
	wake chan struct{} // cap 1: work for the writer
	wmu  sync.Mutex    // held by whoever writes on c
	w    wstate        // guarded by wmu
	// ackTimer sends a delayed ACK (eager data, returned credit) unless a
	// frame of ours carries it first.
	ackTimer  *time.Timer
	ackArmed  atomic.Bool
	ackLazy   bool          // the connection polls: ACKs wait longer while the process is busy (ackDue)
	ackSince  atomic.Int64  // pollNow() when the timer was armed for what is unacknowledged now
	ackedOut  atomic.Uint64 // the Received count of the last ACK written
	creditDue atomic.Bool   // returned credit waits for an ACK

	readerDone chan struct{} // closed when the reader goroutine exits
	midFrame   atomic.Bool   // the reader has read part of a frame and waits for the rest
	quietReads uint64        // br.Reads() at the supervisor's last look (supervisor only)
	quietSince int64         // c.now() since when br.Reads() has not changed (supervisor only)
	tcpAcked   uint64        // the socket's TCP bytes_acked at the supervisor's last look (guarded by Conn.mu)
	rdMu       sync.Mutex    // held by whoever reads c
	rs         rstate        // guarded by rdMu
	bgResume   chan struct{} // cap 1: the reader goroutine may read again
	pokeMu     sync.Mutex
	poked      bool        // a read deadline was set to interrupt the read (guarded by pokeMu)
	pokedRecv  bool        // ... for a Recv whose context ended (not only for data: pokeData)
	pollWait   atomic.Bool // the reader stopped busy-polling and waits in the kernel (poll.go)
	pollCh     chan int    // cap 1: the poller's word to the parked reader (poll.go)

	// guarded by Conn.mu
	life lifecycle // see railstate.go
	// core is the rail's send queue, its unacknowledged segments, the
	// dispatch release and the estimators (drain rate, ACK delay, stall
	// test): the pure per-rail sender core the simulator drives too.
	core    *sender.Rail[*segment]
	onAck   func(entry) // c.acked for this rail, made once
	ackNow  int64       // the time of the ACK being applied
	ackArr  int64       // and the arrival time it carries (the peer's clock)
	ackFwd  int64       // the rail's smallest one-way delay then (sender.Rail.Minima)
	ackOff  int64       // the peer's clock less ours then (the rails' highest OffsetBound)
	ackOK   bool        // whether ackFwd and ackOff are known
	notSent int         // the socket's TCP_NOTSENT_LOWAT
	nextTry int64       // c.now() from which the next rejoin attempt may start
	backoff time.Duration
	rejoins uint64 // connections that replaced a failed one
	resent  uint64 // segments carried again after their first rail failed
	stolen  uint64 // planned segments moved here from the end of another rail's queue
	lastErr error  // why the rail last failed

	// receive side and counters
	received atomic.Uint64 // DATA frames received on this rail
	// arrMu makes received and arrived one pair for the ACK: the reader
	// changes both under it, the writer reads both under it (a leaf).
	arrMu    sync.Mutex
	arrived  int64 // c.now() when the received-th DATA frame had been read whole
	bytesOut atomic.Uint64
	segsOut  atomic.Uint64
	bytesIn  atomic.Uint64
	segsIn   atomic.Uint64
	errs     atomic.Uint64
	byReason [NumErrorReasons]atomic.Uint64
	down     atomic.Bool   // mirrors !life.up() for lock-free readers
	goneAway chan struct{} // closed when the writer has sent GOAWAY and exited
}

func (r *rail) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// railInit is what the handshake hands to newConn for one rail.
type railInit struct {
	c       net.Conn
	name    string
	nominal float64
	keys    *hs.Keys // from the rail's handshake
}

func (r *rail) isUp() bool { return !r.down.Load() }

// takeDownLocked takes r's connection out of service after err: it is
// reset and closed, its writer told to exit, and its unacknowledged and
// queued segments (in that order) returned. Caller holds c.mu.
func (r *rail) takeDownLocked(err error) []entry {
	r.life.fail()
	r.down.Store(true)
	r.countErr(err)
	r.lastErr = err
	if tc, ok := r.c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // reset: what the kernel still holds is sent again
	}
	_ = r.c.Close()
	unpark(r, pollReady) // a reader parked for busy polling sees the close
	r.signal()           // the writer sees the rail down and exits
	return r.core.Drain(nil)
}

// poke interrupts a Recv blocked reading r; see read.
func (r *rail) poke() {
	r.pokeMu.Lock()
	r.poked, r.pokedRecv = true, true
	_ = r.c.SetReadDeadline(time.Unix(1, 0))
	r.pokeMu.Unlock()
	unpark(r, pollReady) // a reader parked for busy polling reads, and sees the deadline
}

// pokeData interrupts a read of r that waits in the kernel while the
// poller runs (its socket has something, which the Go scheduler would
// see late): the read resumes at once and finds it; see read.
func (r *rail) pokeData() {
	r.pokeMu.Lock()
	r.poked = true
	_ = r.c.SetReadDeadline(time.Unix(1, 0))
	r.pokeMu.Unlock()
}

// ackDue runs when a delayed ACK's time is up: the writer sends it unless
// a frame of ours carried it already (then it finds nothing to do). The
// timer is not stopped when an ACK is piggybacked: one spare wake-up per
// AckDelay is cheaper than resetting a timer per message.
//
// On a polling connection (Config.BusyPoll) an ACK that returns no credit
// waits on, up to lazyAcks AckDelays, while the process exchanged
// messages within the last AckDelay and few frames are unacknowledged: a
// collective's next message to this peer, which it would ride, is then
// probably close, and a bare ACK costs a write here and a wake-up and a
// read at the peer (about a third of a bare ACK per message in the 4-host
// lab's 8-byte allreduce, more in its slow rounds).
func (r *rail) ackDue() {
	r.ackArmed.Store(false)
	got, out := r.received.Load(), r.ackedOut.Load()
	if got == out && !r.creditDue.Load() {
		return
	}
	if r.ackLazy && !r.creditDue.Load() && got-out <= lazyAckFrames {
		now := pollNow()
		if now-pollers.last.Load() < int64(AckDelay) && now-r.ackSince.Load() < lazyAcks*int64(AckDelay) &&
			r.ackArmed.CompareAndSwap(false, true) {
			r.ackTimer.Reset(AckDelay)
			return
		}
	}
	r.signal()
}

// lazyAcks is how many AckDelays an ACK may wait on a polling connection
// while the process is busy, and lazyAckFrames how many frames it may
// leave unacknowledged meanwhile (a stream needs its ACKs sooner).
const (
	lazyAcks      = 4
	lazyAckFrames = 16
)

// delayAck makes sure an ACK goes out within AckDelay unless a frame of
// ours carries one first (within lazyAcks AckDelays on a polling
// connection while the process is busy, see ackDue).
func (r *rail) delayAck() {
	if r.ackArmed.CompareAndSwap(false, true) {
		if r.ackLazy {
			r.ackSince.Store(pollNow())
		}
		r.ackTimer.Reset(AckDelay)
	}
}

// setKeys installs the ciphers of r's connection from its handshake:
// frames are sealed and opened with them unless both sides chose
// plaintext. Caller holds rdMu and wmu, or r is not running yet.
func (r *rail) setKeys(k *hs.Keys) {
	r.w.seal, r.rs.open = nil, nil
	if k != nil && !k.Plaintext {
		r.w.seal, r.rs.open = k.Send, k.Recv
	}
}

// countErr counts a failure of the rail, by reason.
func (r *rail) countErr(err error) {
	r.errs.Add(1)
	r.byReason[ErrorReason(err)].Add(1)
}

func (r *rail) errReasons() (out [NumErrorReasons]uint64) {
	for i := range out {
		out[i] = r.byReason[i].Load()
	}
	return out
}
