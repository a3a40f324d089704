// Failover: a rail that fails hands its segments to the others; the peer's orderly close.

package multirail

import (
	"errors"
	"fmt"

	"github.com/multirail/multirail/internal/reasm"
	"github.com/multirail/multirail/internal/wire"
)

func (c *Conn) anyUp() bool {
	for _, r := range c.rails {
		if r.life.up() {
			return true
		}
	}
	return false
}

// railDown takes r out of service after err on its connection of
// generation gen (nothing happens if that connection was replaced since):
// its queued and unacknowledged segments go to the other rails. With no
// rail left the connection fails.
func (c *Conn) railDown(r *rail, gen uint64, err error) {
	c.mu.Lock()
	if !r.life.up() || r.gen != gen {
		c.mu.Unlock()
		return
	}
	select {
	case <-c.closed:
		c.mu.Unlock()
		return
	default:
	}
	if c.goingAway.Load() != 0 {
		// Closing: the peer may close its ends before we close ours.
		c.mu.Unlock()
		return
	}
	segs := r.takeDownLocked(err)
	r.nextTry = c.now() // a reset connection may come back at once
	if c.peerGoneLocked() && c.anyPeerDone() {
		c.mu.Unlock()
		c.peerClosed() // the other rails had said goodbye already
		return
	}
	if !c.anyUp() {
		if c.holdLocked(r, err, segs) {
			c.broadcast()
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		c.log.Warn("rail down; no rail left", "rail", r.name, "err", err)
		c.shutdown(fmt.Errorf("%w (last: %s: %v)", ErrAllRailsDown, r.name, err), false)
		return
	}
	c.log.Warn("rail down; resending its segments on the others", "rail", r.name, "err", err, "segments", len(segs))
	c.resendLocked(segs)
	c.broadcast()
	c.mu.Unlock()
}

// resendLocked queues segments taken off a failed rail on the rails that
// are up, as the scheduler chooses. Caller holds c.mu; at least one rail is
// up.
func (c *Conn) resendLocked(segs []entry) {
	now := c.now()
	for _, e := range segs {
		s := e.Seg
		i := c.pickLocked(now, s.wireSize())
		if i < 0 {
			i = c.firstUp()
		}
		c.push(now, c.rails[i], s) // may exceed QueueDepth: resends are not held back
		c.rails[i].resent++
		if !c.dispatched() {
			c.rails[i].signal() // on the dispatch timer the next tick does it
		}
	}
}

// peerGoneLocked reports whether every rail is down or was closed by the
// peer's GOAWAY. Caller holds c.mu.
func (c *Conn) peerGoneLocked() bool {
	for _, r := range c.rails {
		if r.life.up() && !r.life.peerDone {
			return false
		}
	}
	return true
}

func (c *Conn) anyPeerDone() bool {
	for _, r := range c.rails {
		if r.life.peerDone {
			return true
		}
	}
	return false
}

// peerClosed ends the connection after the peer's orderly close: Recv
// returns what arrived, then io.EOF.
func (c *Conn) peerClosed() {
	c.rmu.Lock()
	c.peerGone = true
	c.notifyRecvLocked()
	c.rmu.Unlock()
	// When this side is closing too, its shutdown may wait for this
	// reader: waiting for that shutdown here would wait for ourselves
	// (until closeLinger), when both sides close at once.
	c.shutdownOnce(ErrPeerClosed, false, false)
}

func (c *Conn) firstUp() int {
	for i, r := range c.rails {
		if r.life.up() {
			return i
		}
	}
	return -1
}

// protocolError closes the whole connection: the peer is broken or hostile.
func (c *Conn) protocolError(r *rail, err error) {
	r.countErr(fmt.Errorf("%w: %v", ErrProtocol, err))
	c.log.Warn("peer violated the protocol; closing the connection", "rail", r.name, "err", err)
	c.shutdown(fmt.Errorf("%w: %v", ErrProtocol, err), true)
}

// isProtocol tells decoding errors from network errors.
func isProtocol(err error) bool {
	return errors.Is(err, wire.ErrMalformed) || errors.Is(err, reasm.ErrCredit) || errors.Is(err, reasm.ErrInconsistent) || errors.Is(err, ErrProtocol)
}
