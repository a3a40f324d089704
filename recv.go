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
		m, ok := c.nextLocked()
		ch := c.recvReady
		gone := c.peerGone
		free := c.railFreed
		if !ok && c.handler != nil {
			// Nothing waits: the messages that follow may go to the
			// handler (this Recv's caller has dealt with every earlier one).
			c.offerOK = true
		}
		c.rmu.Unlock()
		if ok {
			c.recvMsgs.Add(1)
			c.creditChanged(reasm.Cost(uint64(len(m.Data))))
			return m, nil
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
		if c.readyLocked() || c.peerGone || ch != c.recvReady || (direct && free != c.railFreed) {
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
			ready := c.readyLocked()
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

// nextLocked takes the next message for Recv: the one the handler
// declined, else the reassembler's next. Caller holds c.rmu.
func (c *Conn) nextLocked() (Message, bool) {
	if c.hasDeclined {
		m := c.declined
		c.declined, c.hasDeclined = Message{}, false
		return m, true
	}
	m, ok := c.re.Next()
	return Message{Tag: m.Tag, Data: m.Data}, ok
}

// readyLocked reports whether Recv has a message to take. Caller holds
// c.rmu.
func (c *Conn) readyLocked() bool { return c.hasDeclined || c.re.Ready() }

// OnMessage makes h the first taker of every message: as soon as a
// message is complete, the goroutine that read its last segment (a rail's
// reader, or a Recv reading the rail itself) offers it to h, and if h takes
// it (returns true) Recv never sees it. This spares the wake-up of a
// goroutine waiting in Recv per message; a program that demultiplexes
// messages to other goroutines (the communicator does) hands each one on
// directly. If h declines a message (returns false), that message and
// every later one go to Recv, until a Recv finds none waiting; from then
// on h is offered the new ones again. So messages of one tag reach h and
// Recv together in the order they were sent, provided the program handles
// what Recv returns before calling Recv again.
//
// h must not block, nor call the Conn's methods other than Release: it
// runs while the rail's frames wait to be read, acknowledgements
// included. A message that would make it wait (for room, say) is one to
// decline and take through Recv. Offering starts once a Recv has found
// nothing waiting (call Recv from the goroutine that handles what h
// declines); a nil h stops it. Messages h takes count in
// Stats.MessagesReceived and return their credit to the peer like those
// Recv returns.
func (c *Conn) OnMessage(h func(Message) bool) {
	c.offerMu.Lock()
	defer c.offerMu.Unlock()
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.handler, c.offerOK = h, false
	c.hasHandler.Store(h != nil)
	c.notifyRecvLocked()
}

// offer hands the messages ready to the handler while it takes them
// (see OnMessage).
func (c *Conn) offer() {
	if !c.hasHandler.Load() {
		return
	}
	c.rmu.Lock()
	want := c.offerOK && c.re.Ready()
	c.rmu.Unlock()
	if !want {
		return
	}
	c.offerMu.Lock()
	defer c.offerMu.Unlock()
	for {
		c.rmu.Lock()
		if !c.offerOK || c.hasDeclined {
			c.rmu.Unlock()
			return
		}
		h := c.handler
		m, ok := c.re.Next()
		c.rmu.Unlock()
		if !ok {
			return
		}
		msg := Message{Tag: m.Tag, Data: m.Data}
		if !h(msg) {
			c.rmu.Lock()
			c.declined, c.hasDeclined, c.offerOK = msg, true, false
			c.notifyRecvLocked()
			c.rmu.Unlock()
			c.path.declined.Add(1)
			return
		}
		c.path.handed.Add(1)
		c.recvMsgs.Add(1)
		c.creditChanged(reasm.Cost(uint64(len(m.Data))))
	}
}

// notifyRecvLocked wakes Recv when a message is ready for it (not one
// that is about to be offered to the OnMessage handler). Caller holds
// c.rmu.
func (c *Conn) notifyRecvLocked() {
	if c.recvWaiters > 0 && (c.hasDeclined || (c.re.Ready() && !c.offerOK) || c.peerGone) {
		c.recvWaiters = 0
		close(c.recvReady)
		c.recvReady = make(chan struct{})
	}
}
