package comm

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// inMsg is a message that arrived from a peer (or from this rank).
type inMsg struct {
	src  int // world rank
	h    header
	data []byte
	cost int64 // charged to from.held while it is held
	from *peer // nil for a send to self
}

// ctxState is what arrived for one communicator context and who waits for
// it. Everything is guarded by world.mu.
type ctxState struct {
	w    *world
	id   uint64
	comm *Comm // set when this rank created the communicator

	posted     []*Request // point-to-point receives waiting, in posting order
	unexpected []*inMsg   // point-to-point messages not yet received, in arrival order
	probes     []*probe
	p2pErr     error // set: every receive fails with it

	coll     map[collKey]*collSlot
	cur      *collCall     // the collective call in progress here, if any
	collErr  error         // set: every collective fails with it
	collFail chan struct{} // closed when collErr is set
	relayed  bool          // this rank passed a failure report on
}

type collKey struct {
	seq  uint64
	src  int // world rank
	step int32
}

type collSlot struct {
	in    *inMsg
	ready chan struct{} // gets a token when in arrives (a receiver waits)
}

// Small messages are many: the collective receiver's wake-up channels
// and the messages received are reused (most of what a small allreduce
// allocated per message, and fresh memory costs a page fault here until
// the heap is warm).
var (
	readyPool = sync.Pool{New: func() any { return make(chan struct{}, 1) }}
	inPool    = sync.Pool{New: func() any { return new(inMsg) }}
)

// newInMsg returns a zeroed inMsg, reused once a collective's step or a
// point-to-point message was received (putInMsg).
func newInMsg() *inMsg { return inPool.Get().(*inMsg) }

func putInMsg(in *inMsg) {
	*in = inMsg{}
	inPool.Put(in)
}

type probe struct {
	src, tag int // world source or AnySource, tag or AnyTag
	found    chan Status
}

func newCtxState(w *world, id uint64) *ctxState {
	return &ctxState{w: w, id: id, coll: make(map[collKey]*collSlot), collFail: make(chan struct{})}
}

func matches(src, tag int, in *inMsg) bool {
	return (src == AnySource || src == in.src) && (tag == AnyTag || tag == int(in.h.tag))
}

// arriveP2PLocked hands an arrived message to the first matching posted
// receive, or queues it (and tells waiting probes).
func (cs *ctxState) arriveP2PLocked(in *inMsg) {
	if cs.p2pErr != nil {
		cs.w.releaseLocked(in)
		return
	}
	for i, r := range cs.posted {
		if matches(r.src, r.tag, in) {
			cs.posted = append(cs.posted[:i], cs.posted[i+1:]...)
			cs.completeLocked(r, in)
			return
		}
	}
	cs.unexpected = append(cs.unexpected, in)
	kept := cs.probes[:0]
	for _, p := range cs.probes {
		if matches(p.src, p.tag, in) {
			p.found <- cs.status(in)
			continue
		}
		kept = append(kept, p)
	}
	clear(cs.probes[len(kept):])
	cs.probes = kept
}

func (cs *ctxState) status(in *inMsg) Status {
	return Status{Source: cs.comm.index[in.src], Tag: int(in.h.tag), Len: len(in.data)}
}

// completeLocked finishes receive r with message in.
func (cs *ctxState) completeLocked(r *Request, in *inMsg) {
	cs.w.releaseLocked(in)
	r.msg = Message{Source: cs.comm.index[in.src], Tag: int(in.h.tag), Data: in.data}
	r.finish(nil)
	putInMsg(in) // out of every queue: nothing refers to it any more
}

// takeLocked removes and returns the first unexpected message matching
// (src, tag), or nil.
func (cs *ctxState) takeLocked(src, tag int) *inMsg {
	for i, in := range cs.unexpected {
		if matches(src, tag, in) {
			cs.unexpected = append(cs.unexpected[:i], cs.unexpected[i+1:]...)
			return in
		}
	}
	return nil
}

// arriveCollLocked files a collective step for the call that waits (or
// will wait) for it.
func (cs *ctxState) arriveCollLocked(in *inMsg) {
	if cs.collErr != nil {
		cs.w.releaseLocked(in)
		return
	}
	if cs.cur != nil && in.h.seq == cs.cur.h.seq && cs.comm != nil {
		// Any step of the call in progress shows what its sender called:
		// a mismatch fails the call now, not when (if ever) the step is
		// received.
		if err := cs.cur.check(cs.comm.index[in.src], in.h); err != nil {
			cs.w.releaseLocked(in)
			cs.mismatchLocked(cs.cur, in.src, err)
			return
		}
	}
	k := collKey{seq: in.h.seq, src: in.src, step: in.h.tag}
	s := cs.coll[k]
	switch {
	case s == nil:
		cs.coll[k] = &collSlot{in: in}
	case s.in != nil:
		// The same step twice: the peer breaks the protocol. Keep the
		// first; the call will fail on the mismatch of what follows.
		cs.w.releaseLocked(in)
	default:
		s.in = in
		s.ready <- struct{}{} // capacity 1, and only the arrival sends
	}
}

// mismatchLocked fails call, which rank src (world) called otherwise, and
// tells the other ranks.
func (cs *ctxState) mismatchLocked(call *collCall, src int, err error) {
	if cs.collErr != nil {
		return
	}
	cs.failCollLocked(err, true)
	w, c := cs.w, cs.comm
	msg := fmt.Sprintf("%s (call %d) failed on rank %d: %v", call.name(), call.h.seq, c.rank, err)
	if w.closed {
		return
	}
	w.wg.Go(func() {
		w.sendNoticeReason(c.ranks, c.id, call.h.seq, src, call.h.coll, reasonMismatch, msg)
	})
}

// startLocked makes call the one in progress and checks the steps of it
// that arrived before it started.
func (cs *ctxState) startLocked(call *collCall) {
	cs.cur = call
	for k, s := range cs.coll {
		if k.seq == call.h.seq && s.in != nil {
			if err := call.check(cs.comm.index[k.src], s.in.h); err != nil {
				cs.mismatchLocked(call, k.src, err)
				return
			}
		}
	}
}

// failLocked fails every receive, probe and collective of the context.
func (cs *ctxState) failLocked(err error, p2p bool) {
	if p2p && cs.p2pErr == nil {
		cs.p2pErr = err
		for _, r := range cs.posted {
			r.finish(err)
		}
		cs.posted = nil
		for _, in := range cs.unexpected {
			cs.w.releaseLocked(in)
		}
		cs.unexpected = nil
		for _, p := range cs.probes {
			close(p.found)
		}
		cs.probes = nil
	}
	cs.failCollLocked(err, true)
}

// failCollLocked poisons the context's collectives: the call in progress
// and every later one fail with err.
func (cs *ctxState) failCollLocked(err error, _ bool) {
	if cs.collErr != nil {
		return
	}
	cs.collErr = err
	close(cs.collFail)
	for k, s := range cs.coll {
		if s.in != nil {
			cs.w.releaseLocked(s.in)
		}
		delete(cs.coll, k)
	}
}

// peerDoneLocked fails the receives and probes that wait for p alone.
func (cs *ctxState) peerDoneLocked(p *peer) {
	if cs.comm == nil {
		return
	}
	kept := cs.posted[:0]
	for _, r := range cs.posted {
		if r.src == p.rank {
			r.finish(&PeerError{Rank: cs.comm.index[p.rank], Op: "recv", Err: p.err})
			continue
		}
		kept = append(kept, r)
	}
	clear(cs.posted[len(kept):])
	cs.posted = kept
	keptP := cs.probes[:0]
	for _, pr := range cs.probes {
		if pr.src == p.rank {
			close(pr.found)
			continue
		}
		keptP = append(keptP, pr)
	}
	clear(cs.probes[len(keptP):])
	cs.probes = keptP
}

// collRecv waits for step of collective call seq from world rank src and
// checks that src called the same collective with the same arguments.
func (cs *ctxState) collRecv(ctx context.Context, call *collCall, src int, step int32) ([]byte, error) {
	w := cs.w
	k := collKey{seq: call.h.seq, src: src, step: step}
	w.mu.Lock()
	if cs.collErr != nil {
		w.mu.Unlock()
		return nil, cs.collErr
	}
	s := cs.coll[k]
	if s == nil || s.in == nil {
		p := w.peers[src]
		if p.err != nil {
			err := p.err
			w.mu.Unlock()
			return nil, &PeerError{Rank: cs.comm.index[src], Op: call.name(), Err: err}
		}
		if s == nil {
			s = &collSlot{ready: readyPool.Get().(chan struct{})}
			cs.coll[k] = s
		}
		w.mu.Unlock()
		select {
		case <-s.ready:
		case <-cs.collFail:
		case <-p.done:
		case <-ctx.Done():
		}
		w.mu.Lock()
		switch {
		case s.in != nil:
		case cs.collErr != nil:
			w.mu.Unlock()
			return nil, cs.collErr
		case p.err != nil:
			err := p.err
			w.mu.Unlock()
			return nil, &PeerError{Rank: cs.comm.index[src], Op: call.name(), Err: err}
		default:
			delete(cs.coll, k)
			w.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	in := s.in
	delete(cs.coll, k)
	w.releaseLocked(in)
	w.mu.Unlock()
	if s.ready != nil {
		// The arrival's token, unless the select took it: once in is
		// set nobody sends on ready again, so it can serve another wait.
		select {
		case <-s.ready:
		default:
		}
		readyPool.Put(s.ready)
	}
	err := call.check(cs.comm.index[src], in.h)
	data := in.data
	putInMsg(in)
	if err != nil {
		return nil, err
	}
	return data, nil
}

// Request is a nonblocking operation in progress (Isend, Irecv).
type Request struct {
	done chan struct{}
	msg  Message
	err  error

	// Receives: what they match (world source or AnySource, tag or
	// AnyTag), the cancellation hook, and the communicator a posted
	// receive waits in (Cancel).
	src, tag int
	stop     func() bool
	postedIn *Comm
}

func newRequest() *Request { return &Request{done: make(chan struct{})} }

// finish completes r (once; under world.mu for receives).
func (r *Request) finish(err error) {
	select {
	case <-r.done:
		return
	default:
	}
	r.err = err
	close(r.done)
	if r.stop != nil {
		r.stop() // the receive's context no longer needs watching
	}
}

// Done returns a channel closed when the operation has completed
// (successfully or not).
func (r *Request) Done() <-chan struct{} { return r.done }

// Wait waits until the operation completes, or ctx is done, and returns
// its result: for a receive the message, for a send an empty Message. A
// Wait that returns ctx's error leaves the operation pending.
func (r *Request) Wait(ctx context.Context) (Message, error) {
	select {
	case <-r.done:
		return r.msg, r.err
	default:
	}
	select {
	case <-r.done:
		return r.msg, r.err
	case <-ctx.Done():
		return Message{}, ctx.Err()
	}
}

// Cancel withdraws a receive that no message has matched yet, before it
// returns: the request finishes with context.Canceled and the next
// matching message goes to another receive. It reports whether it did;
// false when the request had finished already (a message matched it, or
// it failed) and for sends. Cancelling the receive's context withdraws it
// too, but from another goroutine, a moment later: a message that arrives
// meanwhile is the cancelled request's.
func (r *Request) Cancel() bool {
	if r.postedIn == nil {
		return false
	}
	return r.postedIn.withdraw(r, context.Canceled)
}

// Test reports whether the operation has completed and, if so, its
// result.
func (r *Request) Test() (msg Message, done bool, err error) {
	select {
	case <-r.done:
		return r.msg, true, r.err
	default:
		return Message{}, false, nil
	}
}

// WaitAll waits for every request, or until ctx is done. It returns the
// errors of the failed ones joined (nil if all succeeded).
func WaitAll(ctx context.Context, reqs ...*Request) error {
	var errs []error
	for i, r := range reqs {
		if _, err := r.Wait(ctx); err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return fmt.Errorf("comm: WaitAll: request %d: %w", i, err)
			}
			errs = append(errs, fmt.Errorf("comm: WaitAll: request %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// WaitAny waits until one of reqs completes and returns its index and
// result; with several complete, the lowest index. It returns -1 and ctx's
// error if ctx is done first, and -1 and nil for no requests.
func WaitAny(ctx context.Context, reqs ...*Request) (int, Message, error) {
	if len(reqs) == 0 {
		return -1, Message{}, nil
	}
	for {
		for i, r := range reqs {
			if msg, done, err := r.Test(); done {
				return i, msg, err
			}
		}
		// One watcher per request; all end when the first completes.
		ch := make(chan int, len(reqs))
		wctx, cancel := context.WithCancel(ctx)
		for i, r := range reqs {
			go func() {
				select {
				case <-r.done:
					ch <- i
				case <-wctx.Done():
				}
			}()
		}
		select {
		case <-ch:
		case <-ctx.Done():
		}
		cancel()
		if ctx.Err() != nil {
			return -1, Message{}, ctx.Err()
		}
	}
}
