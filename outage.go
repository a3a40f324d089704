// Outage: a session whose every rail is down waits Config.SessionGrace for
// one to come back before it fails.

package multirail

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"
)

// outage is the state of a session with no rail up. Guarded by Conn.mu.
type outage struct {
	end  int64   // c.now() when the grace runs out; 0: no outage
	err  error   // why the last rail went down
	held []entry // segments waiting for a rail to come back
}

// peerEnded reports whether err says the peer's end of a rail was closed
// or reset (EOF, ECONNRESET, EPIPE): its process ended or dropped the
// session. A network outage shows as silence instead (timeouts).
func peerEnded(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// inOutage reports whether the session is waiting for a rail to come
// back. Caller holds c.mu.
func (c *Conn) inOutage() bool { return c.out.end != 0 }

// holdLocked starts, or continues, an outage after the last rail, r, went
// down with err, and keeps segs for the rail that comes back first. It
// reports false, holding nothing, when the session must fail at once
// instead: no grace configured, a single rail (which is never rejoined),
// the peer's end closed, or the peer refused every rejoin. Caller holds
// c.mu.
func (c *Conn) holdLocked(r *rail, err error, segs []entry) bool {
	if c.cfg.SessionGrace <= 0 || len(c.rails) < 2 || peerEnded(err) || c.allRefusedLocked() {
		return false
	}
	if !c.inOutage() {
		c.out.end = c.now() + int64(c.cfg.SessionGrace)
		c.log.Warn("rail down; no rail left: waiting for one to come back", "rail", r.name, "err", err, "grace", c.cfg.SessionGrace)
	}
	c.out.err = fmt.Errorf("%s: %w", r.name, err)
	c.out.held = append(c.out.held, segs...)
	return true
}

// holdSegLocked keeps a segment queued during an outage. Caller holds c.mu.
func (c *Conn) holdSegLocked(now int64, s *segment) {
	c.out.held = append(c.out.held, entry{Seg: s, Size: s.wireSize(), Enq: now})
}

// resumeLocked ends an outage once r is up again: the held segments go
// out on the rails that are up. Caller holds c.mu.
func (c *Conn) resumeLocked(r *rail) {
	if !c.inOutage() {
		return
	}
	held := c.out.held
	c.log.Info("a rail came back; the session goes on", "rail", r.name, "segments", len(held),
		"after", time.Duration(c.now()-(c.out.end-int64(c.cfg.SessionGrace))).Round(time.Millisecond))
	c.out = outage{}
	c.resendLocked(held)
}

// outageOverLocked returns the error to fail the session with when its
// outage outlasted the grace, else nil. Caller holds c.mu.
func (c *Conn) outageOverLocked(now int64) error {
	if !c.inOutage() || now < c.out.end || c.anyUp() {
		return nil
	}
	return fmt.Errorf("%w: no rail came back within SessionGrace (%v); last: %v", ErrAllRailsDown, c.cfg.SessionGrace, c.out.err)
}

// allRefusedLocked reports whether the peer refused a rejoin of every rail
// (it no longer has the session). Caller holds c.mu.
func (c *Conn) allRefusedLocked() bool {
	for _, r := range c.rails {
		if !r.life.refused {
			return false
		}
	}
	return true
}
