package multirail

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	hs "github.com/multirail/multirail/internal/handshake"
	"github.com/multirail/multirail/internal/wire"
)

// ErrRailStalled is the error a rail is taken down with when segments sent
// on it went unacknowledged for longer than Config.RailTimeout allows, or
// when a frame arriving on it stopped halfway for twice RailTimeout.
var ErrRailStalled = errors.New("multirail: rail stalled: no acknowledgement")

// Rejoin attempts of a failed rail back off from minBackoff to maxBackoff;
// a TCP connect of an attempt gives up after rejoinConnectTimeout (a link
// that is down drops the SYN silently).
const (
	minBackoff           = 50 * time.Millisecond
	maxBackoff           = time.Second
	rejoinConnectTimeout = time.Second
)

// superviseTick is how often a connection checks its rails for stalls
// and starts rejoin attempts.
func superviseTick(railTimeout time.Duration) time.Duration {
	return min(max(railTimeout/4, 10*time.Millisecond), 100*time.Millisecond)
}

// supervise runs on connections of two or more rails: it takes stalled rails down while another rail works, on
// the dialing side starts rejoin attempts for rails that are down, and
// fails the session when an outage outlasts its grace.
func (c *Conn) supervise() {
	defer c.wg.Done()
	t := time.NewTicker(superviseTick(c.cfg.RailTimeout))
	defer t.Stop()
	type stall struct {
		r   *rail
		gen uint64
		err error
	}
	var stalled []stall
	for {
		select {
		case <-t.C:
		case <-c.closed:
			return
		}
		if c.goingAway.Load() != 0 {
			continue
		}
		stalled = stalled[:0]
		healthy := 0
		c.mu.Lock()
		if c.shutting {
			c.mu.Unlock()
			return
		}
		now := c.now()
		for _, r := range c.rails {
			if !r.life.up() {
				continue
			}
			if n := r.br.Reads(); n != r.quietReads || !r.midFrame.Load() {
				r.quietReads, r.quietSince = n, now
			}
			// Slow is not dead: while the rail's TCP acknowledges more of
			// our bytes, its segments are crossing, however slowly.
			if n, ok := hs.Acked(r.c); ok && n != r.tcpAcked {
				r.tcpAcked = n
				r.core.Alive(now)
			}
			acksLate, quiet := r.core.Stalled(now, c.cfg.RailTimeout)
			switch {
			case acksLate:
				// Sending side: what we sent is not acknowledged.
				err := fmt.Errorf("%w for %v with %d segments in flight", ErrRailStalled,
					quiet.Round(time.Millisecond), r.core.InFlight())
				stalled = append(stalled, stall{r, r.gen, err})
			case now-r.quietSince > 2*int64(c.cfg.RailTimeout):
				// Receiving side: a frame stopped halfway. Its segment may
				// have been resent on another rail already, and is held
				// there until this read fails.
				err := fmt.Errorf("%w: a frame stopped arriving halfway %v ago", ErrRailStalled,
					time.Duration(now-r.quietSince).Round(time.Millisecond))
				stalled = append(stalled, stall{r, r.gen, err})
			default:
				healthy++
			}
		}
		if healthy == 0 {
			// Nowhere to move the traffic: a peer that stopped reading
			// altogether is the idle timeout's business.
			stalled = stalled[:0]
		}
		over := c.outageOverLocked(now)
		if c.hooks.redial != nil && over == nil {
			for _, r := range c.rails {
				if now >= r.nextTry && r.life.startRejoin() {
					c.wg.Add(1) // c.wg counts this goroutine: no race with Close's Wait
					go c.rejoin(r)
				}
			}
		}
		c.mu.Unlock()
		if over != nil {
			c.log.Warn("no rail came back; the session fails", "err", over)
			c.shutdown(over, false)
			return
		}
		for _, s := range stalled {
			c.railDown(s.r, s.gen, s.err)
		}
	}
}

// rejoin makes one attempt to reconnect the failed rail r (dialing side).
func (c *Conn) rejoin(r *rail) {
	defer c.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(doneCtx{c.closed}, cancel)
	nc, keys, err := c.hooks.redial(ctx, r.idx)
	stop()
	cancel()
	if err == nil {
		if err = c.attach(r, nc, keys); err != nil {
			_ = nc.Close()
		}
	}
	var rj *hs.RejectedError
	refused := err != nil && errors.As(err, &rj) && rj.Code == wire.RejectSession // the peer no longer has the session
	c.mu.Lock()
	r.life.endRejoin(refused)
	if err == nil {
		r.backoff = 0
		c.mu.Unlock()
		c.log.Info("rail rejoined", "rail", r.name)
		return
	}
	if refused && c.inOutage() && c.allRefusedLocked() {
		last := c.out.err
		c.mu.Unlock()
		c.shutdown(fmt.Errorf("%w: the peer no longer has the session (rejoin refused: %v); last: %v", ErrAllRailsDown, err, last), false)
		return
	}
	r.backoff = min(max(2*r.backoff, minBackoff), maxBackoff)
	r.nextTry = c.now() + int64(r.backoff)
	give, backoff := r.life.refused, r.backoff
	c.mu.Unlock()
	if give {
		c.log.Warn("rail rejoin refused; not retrying", "rail", r.name, "err", err)
	} else {
		c.log.Debug("rail rejoin failed; will retry", "rail", r.name, "err", err, "retry_in", backoff)
	}
}

// errReplaced is the LastError of a rail whose connection the peer replaced
// before this side noticed it had failed.
var errReplaced = errors.New("multirail: the peer reconnected the rail")

// attach makes nc, a connection whose handshake for rail r of this session
// has completed, r's connection. If r is still up (the accepting side had
// not noticed the failure the dialer reconnects for), the old connection is
// closed and its unacknowledged segments are sent again on the new one.
func (c *Conn) attach(r *rail, nc net.Conn, keys *hs.Keys) error {
	c.mu.Lock()
	if c.shutting || c.goingAway.Load() != 0 {
		c.mu.Unlock()
		return c.closedErr()
	}
	if err := r.life.attachable(); err != nil {
		c.mu.Unlock()
		return err
	}
	if r.life.up() {
		// Everything not acknowledged goes out again on the new
		// connection, first; the receiver drops what it already has.
		segs := r.takeDownLocked(errReplaced)
		now := c.now()
		for _, e := range segs {
			r.core.Requeue(now, e)
		}
		c.log.Warn("rail replaced by the peer's reconnection", "rail", r.name, "segments", len(segs))
	}
	r.life.beginAttach()
	oldW, oldR := r.goneAway, r.readerDone
	c.mu.Unlock()

	// The old connection's goroutines end once they see it closed.
	wait := time.NewTimer(c.cfg.HandshakeTimeout)
	defer wait.Stop()
	for _, ch := range []chan struct{}{oldW, oldR} {
		select {
		case <-ch:
		case <-c.closed:
		case <-wait.C:
		}
	}

	var err error
	select {
	case <-oldW:
		select {
		case <-oldR:
		default:
			err = errors.New("multirail: the old connection's reader did not stop")
		}
	default:
		err = errors.New("multirail: the old connection's writer did not stop")
	}
	locked := err == nil
	if locked {
		// Both are gone, so nothing holds rdMu or wmu for long.
		r.rdMu.Lock()
		r.wmu.Lock()
	}
	c.mu.Lock()
	if err == nil && (c.shutting || c.goingAway.Load() != 0) {
		err = c.closedErr()
	}
	if err != nil {
		r.life.attachFailed()
		// What waits in r's queue must not wait for a rail that is not
		// coming back.
		segs := r.core.Drain(nil)
		anyUp, waiting := c.anyUp(), c.inOutage()
		switch {
		case anyUp:
			c.resendLocked(segs)
		case waiting:
			c.out.held = append(c.out.held, segs...)
		}
		c.mu.Unlock()
		if locked {
			r.wmu.Unlock()
			r.rdMu.Unlock()
		}
		if !anyUp && !waiting {
			c.shutdown(fmt.Errorf("%w (rail %s could not be reconnected: %v)", ErrAllRailsDown, r.name, err), false)
		}
		return err
	}
	now := c.now()
	r.gen++
	r.c = nc
	r.nic = nicOf(nc)
	r.tcpAcked = 0
	r.br = hs.NewReader(nc, 64<<10)
	r.w = wstate{qw: hs.NewQuickWriter(nc)}
	r.rs = rstate{}
	r.setKeys(keys)
	r.ackArmed.Store(false)
	r.ackedOut.Store(0)
	r.creditDue.Store(true) // the first ACK repeats the current credit
	r.received.Store(0)
	r.notSent = notSentFor(0, c.cfg.FrameSize)
	hs.Tune(nc, r.notSent)
	r.core.Restart(now, int64(r.notSent))
	r.goneAway = make(chan struct{})
	r.readerDone = make(chan struct{})
	select {
	case <-r.bgResume:
	default:
	}
	r.life.attached()
	r.down.Store(false)
	r.rejoins++
	c.resumeLocked(r)
	c.wg.Add(2) // under c.mu with shutting false: Close has not begun waiting
	go c.writer(r, r.gen)
	go c.reader(r)
	c.broadcast()
	c.mu.Unlock()
	r.wmu.Unlock()
	r.rdMu.Unlock()
	r.signal()
	return nil
}
