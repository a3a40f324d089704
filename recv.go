// Receiving: Recv, the direct-Recv path of single-rail connections, and credit returned to the peer.

package multirail

import (
	"context"
	"errors"
	"io"

	"github.com/multirail/multirail/internal/reasm"
)

// Recv returns the next message. Messages of one tag come in the order they
// were sent; messages of different tags may overtake each other. After the
// peer closed the connection, Recv returns the messages already received and
// then io.EOF.
func (c *Conn) Recv(ctx context.Context) (Message, error) {
	// With one rail, Recv reads the rail itself instead of waiting to be
	// handed each message by the rail's reader goroutine: that saves a
	// goroutine wake-up per message. Cancelling ctx interrupts the read at
	// the next frame boundary.
	direct := len(c.rails) == 1
	if direct {
		c.recvWants.Add(1)
		defer c.recvExit()
		if ctx.Done() != nil {
			if stop := c.watchCtx(ctx); stop != nil {
				defer stop()
			}
		}
	}
	for {
		c.rmu.Lock()
		m, ok := c.re.Next()
		ch := c.recvReady
		gone := c.peerGone
		free := c.railFreed
		c.rmu.Unlock()
		if ok {
			c.recvMsgs.Add(1)
			c.creditChanged(reasm.Cost(uint64(len(m.Data))))
			return Message{Tag: m.Tag, Data: m.Data}, nil
		}
		if gone {
			return Message{}, io.EOF
		}
		if direct && c.goingAway.Load() == 0 {
			if err := ctx.Err(); err != nil {
				return Message{}, err
			}
			if r := c.rails[0]; r.rdMu.TryLock() {
				err := c.readFrame(r)
				r.rdMu.Unlock()
				if err == nil {
					c.path.directReads.Add(1)
				}
				if err == errPoked {
					if ctx.Err() != nil {
						return Message{}, ctx.Err()
					}
					continue
				}
				if err != nil {
					direct = false // the rail is finished; wait below
				}
				continue
			}
		}
		c.rmu.Lock()
		if c.re.Ready() || c.peerGone || ch != c.recvReady || (direct && free != c.railFreed) {
			c.rmu.Unlock()
			continue // something happened meanwhile
		}
		c.recvWaiters++
		c.rmu.Unlock()
		c.path.recvWaits.Add(1)
		select {
		case <-ch:
		case <-ctx.Done():
			return Message{}, ctx.Err()
		case <-c.closed:
			c.rmu.Lock()
			ready := c.re.Ready()
			c.rmu.Unlock()
			if !ready {
				if err := c.closedErr(); errors.Is(err, ErrPeerClosed) {
					return Message{}, io.EOF
				}
				return Message{}, c.closedErr()
			}
		}
	}
}

// watchCtx makes cancelling ctx interrupt a Recv reading the rail itself.
// A lone Recv keeps the registration for the next call with the same
// context (a long-lived context then costs nothing per message); with
// concurrent Recvs each registers its own and gets a stop function.
func (c *Conn) watchCtx(ctx context.Context) (stop func() bool) {
	r := c.rails[0]
	if c.recvWants.Load() > 1 {
		return context.AfterFunc(ctx, r.poke)
	}
	c.pokeMu.Lock()
	defer c.pokeMu.Unlock()
	if c.pokeDone != ctx.Done() {
		if c.pokeStop != nil {
			c.pokeStop()
		}
		c.pokeStop = context.AfterFunc(ctx, r.poke)
		c.pokeDone = ctx.Done()
	}
	return nil
}

// recvMayRead reports whether a Recv reads the rail itself (or did so a
// moment ago and probably will again), so the reader goroutine stays away.
func (c *Conn) recvMayRead() bool {
	return len(c.rails) == 1 && (c.recvWants.Load() > 0 || c.recvGrace.Load())
}

// recvExit ends a Recv that could read the rail itself: the reader
// goroutine takes over if no Recv comes back within AckDelay.
func (c *Conn) recvExit() {
	if c.recvWants.Add(-1) == 0 {
		c.recvExits.Add(1)
		if !c.recvGrace.Swap(true) {
			c.graceTimer.Reset(AckDelay)
		}
	}
}

// graceOver hands the rail back to its reader goroutine once no Recv has
// been in for an AckDelay (one to two AckDelays after the last one left:
// counting exits spares a clock reading per Recv).
func (c *Conn) graceOver() {
	exits := c.recvExits.Load()
	if c.recvWants.Load() != 0 || exits != c.exitsSeen.Load() {
		c.exitsSeen.Store(exits)
		c.graceTimer.Reset(AckDelay) // still busy: look again later
		return
	}
	c.recvGrace.Store(false)
	for _, r := range c.rails {
		select {
		case r.bgResume <- struct{}{}:
		default:
		}
	}
}

// wakeRecv wakes every waiting Recv, so that one of them takes over
// reading the rail.
func (c *Conn) wakeRecv() {
	c.rmu.Lock()
	c.railFreed++ // a Recv that has not started waiting yet sees this
	if c.recvWaiters > 0 {
		close(c.recvReady)
		c.recvReady = make(chan struct{})
		c.recvWaiters = 0
	}
	c.rmu.Unlock()
}

// creditChanged returns cost bytes of credit to the peer: at once when
// much has accumulated (the peer may be waiting), otherwise within
// AckDelay or piggybacked on the next frame.
func (c *Conn) creditChanged(cost uint64) {
	r := c.rails[0]
	for _, x := range c.rails {
		if x.isUp() {
			r = x
			break
		}
	}
	if c.creditUnsent.Add(cost) >= c.cfg.creditBatch() {
		c.creditUnsent.Store(0)
		r.signal()
		return
	}
	r.creditDue.Store(true)
	r.delayAck()
}

// notifyRecvLocked wakes Recv when a message is ready. Caller holds c.rmu.
func (c *Conn) notifyRecvLocked() {
	if c.recvWaiters > 0 && (c.re.Ready() || c.peerGone) {
		c.recvWaiters = 0
		close(c.recvReady)
		c.recvReady = make(chan struct{})
	}
}
