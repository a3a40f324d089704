package comm

import (
	"context"
	"errors"
	"fmt"
)

// Send sends data to rank dst with tag (0..MaxTag). Small messages (up to
// the transport's EagerLimit) return once queued; larger ones once the
// peer's transport has them (not necessarily received by the application).
// Messages from one rank with one tag are received in the order they were
// sent. A send to this rank itself never touches a socket. data may be
// reused when Send returns.
func (c *Comm) Send(ctx context.Context, dst, tag int, data []byte) error {
	if err := c.checkRank(dst, "send", false); err != nil {
		return err
	}
	if err := checkTag(tag, "send", false); err != nil {
		return err
	}
	h := header{kind: kindP2P, ctx: c.id, tag: int32(tag), root: -1}
	w := c.w
	wr := c.ranks[dst]
	if wr == w.rank {
		in := &inMsg{src: wr, h: h, data: append([]byte(nil), data...)}
		w.mu.Lock()
		defer w.mu.Unlock()
		if c.cs.p2pErr != nil {
			return c.cs.p2pErr
		}
		c.cs.arriveP2PLocked(in)
		return nil
	}
	return c.sendTo(ctx, wr, p2pConnTag(c.id, int32(tag)), h, data, "send")
}

// sendTo sends header h and payload to world rank wr, and returns once the
// peer's transport holds them (an eager message: once queued).
func (c *Comm) sendTo(ctx context.Context, wr int, connTag uint32, h header, data []byte, op string) error {
	_, err := c.sendVia(ctx, wr, connTag, h, data, op, sendWait)
	return err
}

// How sendVia sends.
const (
	sendWait   = iota // until the peer's transport holds the message
	sendTry           // only if that needs no wait for the peer (multirail.Conn.TrySend)
	sendHanded        // until the copy is queued (multirail.Conn.SendOwned)
)

// sendVia is sendTo, the way how says; it reports whether it sent (with
// sendTry it may decline).
func (c *Comm) sendVia(ctx context.Context, wr int, connTag uint32, h header, data []byte, op string, how int) (bool, error) {
	w := c.w
	w.mu.Lock()
	if err := w.abort; err != nil {
		w.mu.Unlock()
		return false, err
	}
	if w.closed {
		w.mu.Unlock()
		return false, ErrClosed
	}
	w.mu.Unlock()
	conn := w.peers[wr].conn
	buf := getBuf(headerSize + len(data))
	b := appendHeader((*buf)[:0], h)
	b = append(b, data...)
	sent, err := true, error(nil)
	switch how {
	case sendTry:
		sent, err = conn.TrySend(connTag, b)
	case sendHanded:
		// b is a copy: hand it over, and do not wait for the peer's
		// acknowledgement (a collective step would wait for it to come
		// back behind the peer's own data); b returns to the pool once
		// the peer holds it.
		err = conn.SendOwned(ctx, connTag, b, func() {
			*buf = b
			putBuf(buf)
		})
		if err == nil {
			return true, nil
		}
	default:
		err = conn.Send(ctx, connTag, b)
	}
	if err == nil {
		*buf = b
		putBuf(buf) // eager or complete: the transport holds b no more
		return sent, nil
	}
	// On an error the transport may still hold b: leave it to the GC.
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return false, err
	}
	w.mu.Lock()
	abort := w.abort
	w.mu.Unlock()
	if abort != nil {
		return false, abort
	}
	return false, &PeerError{Rank: c.index[wr], Op: op, Err: err}
}

// Recv receives a message from rank src (or AnySource) with tag (or
// AnyTag). Messages from one source with one tag come in send order; with
// AnyTag or AnySource, in the order they arrived. If the connection to src
// ends before a matching message arrived, Recv fails with a *PeerError.
func (c *Comm) Recv(ctx context.Context, src, tag int) (Message, error) {
	// No context hook as Irecv's: this call waits for ctx itself and
	// withdraws the receive (a hook per receive was a third of what a
	// ping-pong allocated).
	r := c.irecv(ctx, src, tag, false)
	select {
	case <-r.done:
	case <-ctx.Done():
		c.withdraw(r, ctx.Err())
		<-r.done // withdrawn, or the message that beat it
	}
	return r.msg, r.err
}

// withdraw unposts receive r, which then fails with err, unless a message
// matched it already; it reports whether it did.
func (c *Comm) withdraw(r *Request, err error) bool {
	w, cs := c.w, c.cs
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, p := range cs.posted {
		if p == r {
			cs.posted = append(cs.posted[:i], cs.posted[i+1:]...)
			r.finish(err)
			return true
		}
	}
	return false
}

// RecvInto is Recv into buf: it returns the number of bytes received and
// fails with ErrTruncated (the message is consumed) if buf is too small.
func (c *Comm) RecvInto(ctx context.Context, src, tag int, buf []byte) (Status, error) {
	m, err := c.Recv(ctx, src, tag)
	if err != nil {
		return Status{}, err
	}
	st := Status{Source: m.Source, Tag: m.Tag, Len: len(m.Data)}
	if len(m.Data) > len(buf) {
		return st, fmt.Errorf("%w: %d bytes from rank %d (tag %d) into a buffer of %d", ErrTruncated, len(m.Data), m.Source, m.Tag, len(buf))
	}
	copy(buf, m.Data)
	return st, nil
}

// Isend starts sending data to dst with tag and returns at once. data must
// not be modified until the request completes. Cancelling ctx abandons the
// send (the request fails with ctx's error).
func (c *Comm) Isend(ctx context.Context, dst, tag int, data []byte) *Request {
	r := newRequest()
	if err := c.checkRank(dst, "isend", false); err != nil {
		r.finish(err)
		return r
	}
	if err := checkTag(tag, "isend", false); err != nil {
		r.finish(err)
		return r
	}
	if c.ranks[dst] == c.w.rank {
		r.finish(c.Send(ctx, dst, tag, data))
		return r
	}
	go func() { r.finish(c.Send(ctx, dst, tag, data)) }()
	return r
}

// Irecv posts a receive from src (or AnySource) with tag (or AnyTag) and
// returns at once. Receives are matched in the order they were posted.
// Cancelling ctx withdraws the receive if no message matched it yet (the
// request then fails with ctx's error).
func (c *Comm) Irecv(ctx context.Context, src, tag int) *Request {
	return c.irecv(ctx, src, tag, true)
}

// irecv is Irecv; without hook nothing watches ctx once the receive is
// posted (the caller withdraws it).
func (c *Comm) irecv(ctx context.Context, src, tag int, hook bool) *Request {
	r := newRequest()
	if err := c.checkRank(src, "irecv", true); err != nil {
		r.finish(err)
		return r
	}
	if err := checkTag(tag, "irecv", true); err != nil {
		r.finish(err)
		return r
	}
	r.src, r.tag = src, tag
	if src != AnySource {
		r.src = c.ranks[src]
	}
	w, cs := c.w, c.cs
	w.mu.Lock()
	defer w.mu.Unlock()
	if cs.p2pErr != nil {
		r.finish(cs.p2pErr)
		return r
	}
	if in := cs.takeLocked(r.src, tag); in != nil {
		cs.completeLocked(r, in)
		return r
	}
	if r.src != AnySource && r.src != w.rank {
		if p := w.peers[r.src]; p.err != nil {
			r.finish(&PeerError{Rank: src, Op: "recv", Err: p.err})
			return r
		}
	}
	if err := ctx.Err(); err != nil {
		r.finish(err)
		return r
	}
	cs.posted = append(cs.posted, r)
	r.postedIn = c
	if hook {
		r.stop = context.AfterFunc(ctx, func() { c.withdraw(r, ctx.Err()) })
	}
	return r
}

// Probe waits until a message from src (or AnySource) with tag (or AnyTag)
// can be received and describes it without receiving it.
func (c *Comm) Probe(ctx context.Context, src, tag int) (Status, error) {
	if err := c.checkRank(src, "probe", true); err != nil {
		return Status{}, err
	}
	if err := checkTag(tag, "probe", true); err != nil {
		return Status{}, err
	}
	ws := src
	if src != AnySource {
		ws = c.ranks[src]
	}
	w, cs := c.w, c.cs
	w.mu.Lock()
	for _, in := range cs.unexpected {
		if matches(ws, tag, in) {
			st := cs.status(in)
			w.mu.Unlock()
			return st, nil
		}
	}
	if cs.p2pErr != nil {
		w.mu.Unlock()
		return Status{}, cs.p2pErr
	}
	if ws != AnySource && ws != w.rank && w.peers[ws].err != nil {
		err := w.peers[ws].err
		w.mu.Unlock()
		return Status{}, &PeerError{Rank: src, Op: "probe", Err: err}
	}
	p := &probe{src: ws, tag: tag, found: make(chan Status, 1)}
	cs.probes = append(cs.probes, p)
	w.mu.Unlock()
	select {
	case st, ok := <-p.found:
		if ok {
			return st, nil
		}
	case <-ctx.Done():
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, q := range cs.probes {
		if q == p {
			cs.probes = append(cs.probes[:i], cs.probes[i+1:]...)
			break
		}
	}
	select {
	case st, ok := <-p.found:
		if ok {
			return st, nil
		}
	default:
	}
	switch {
	case ctx.Err() != nil:
		return Status{}, ctx.Err()
	case cs.p2pErr != nil:
		return Status{}, cs.p2pErr
	case ws != AnySource && ws != w.rank && w.peers[ws].err != nil:
		return Status{}, &PeerError{Rank: src, Op: "probe", Err: w.peers[ws].err}
	}
	return Status{}, fmt.Errorf("comm: probe ended without a message")
}

// Sendrecv sends data to dst with sendTag and receives from src (or
// AnySource) with recvTag, both at once, so that ranks exchanging with
// each other cannot deadlock.
func (c *Comm) Sendrecv(ctx context.Context, data []byte, dst, sendTag, src, recvTag int) (Message, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rr := c.Irecv(rctx, src, recvTag)
	if err := c.Send(ctx, dst, sendTag, data); err != nil {
		cancel()
		<-rr.done
		return Message{}, err
	}
	return rr.Wait(ctx)
}
