package capi

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/multirail/multirail/comm"
)

// commEntry is a communicator of the C ABI: the comm.Comm, the executor
// that runs its collectives one at a time in call order, and the
// completion queue of its requests.
type commEntry struct {
	id     int64
	c      *comm.Comm
	ctx    context.Context // ends at Free: every call of the communicator stops
	cancel context.CancelFunc

	mu      sync.Mutex
	queue   []*job // collectives not started yet, in call order
	closed  bool   // Free was called: no new calls
	wake    chan struct{}
	exited  chan struct{}  // the executor ended
	p2p     sync.WaitGroup // watchers of nonblocking point-to-point calls
	cq      []int64        // finished requests not yet reported by Poll
	changed chan struct{}  // closed (and replaced) when cq grows or the communicator is freed
	reqs    map[int64]*request
}

// job is a collective waiting for the executor.
type job struct {
	fn  func(ctx context.Context) error
	req *request
}

// Status describes a finished receive (mr_status).
type Status struct {
	Source, Tag int32
	Bytes       int64
}

// request is a call in progress: a nonblocking call's (id != 0, in the
// request table until released) or a blocking collective's (id 0).
type request struct {
	id   int64
	ce   *commEntry
	done chan struct{}
	// set before done is closed
	code int32
	msg  string
	st   Status
	stop func() // withdraws a receive (mr_request_free)
}

// run is the executor: it runs the queued collectives one at a time in
// call order until the communicator is freed and the queue is empty.
func (ce *commEntry) run() {
	defer close(ce.exited)
	for {
		ce.mu.Lock()
		for len(ce.queue) == 0 && !ce.closed {
			ce.mu.Unlock()
			<-ce.wake
			ce.mu.Lock()
		}
		if len(ce.queue) == 0 {
			ce.mu.Unlock()
			return
		}
		j := ce.queue[0]
		ce.queue[0] = nil
		ce.queue = ce.queue[1:]
		closed := ce.closed
		ce.mu.Unlock()
		if closed {
			c, m := ce.closedCode()
			j.req.finish(c, m, Status{})
			continue
		}
		c, m := ce.runJob(j)
		j.req.finish(c, m, Status{})
	}
}

func (ce *commEntry) runJob(j *job) (c int32, m string) {
	defer recovered(&c, &m)
	return ce.code(j.fn(ce.ctx))
}

// code is Code, but ErrClosed for any error once the communicator is
// being freed (Free cancels its context first: a call it interrupts fails
// with the context's error, or comm.ErrClosed, or whatever the closing
// connections cause).
func (ce *commEntry) code(err error) (int32, string) {
	if err != nil && ce.ctx.Err() != nil {
		return fail(ErrClosed, "multirail: communicator %d was freed (mr_comm_free) during the call: %v", ce.id, err)
	}
	return Code(err)
}

func (ce *commEntry) closedCode() (int32, string) {
	return fail(ErrClosed, "multirail: communicator %d was freed (mr_comm_free) before the call ran", ce.id)
}

// start makes the request of a call on ce: with handle a nonblocking
// call's, in the request table, counted in p2p when watch. It fails with
// ErrClosed once the communicator is being freed.
func (ce *commEntry) start(handle, watch bool) (*request, int32, string) {
	rq := &request{ce: ce, done: make(chan struct{})}
	if handle {
		rq.id = newHandle()
		tab.Lock()
		tab.reqs[rq.id] = rq
		tab.Unlock()
	}
	ce.mu.Lock()
	if ce.closed {
		ce.mu.Unlock()
		if handle {
			tab.Lock()
			delete(tab.reqs, rq.id)
			tab.Unlock()
		}
		c, m := fail(ErrClosed, "multirail: communicator %d was freed (mr_comm_free)", ce.id)
		return nil, c, m
	}
	if handle {
		ce.reqs[rq.id] = rq
	}
	if watch {
		ce.p2p.Add(1)
	}
	ce.mu.Unlock()
	return rq, OK, ""
}

// submit queues collective fn on ce's executor. block: wait for it and
// return its result; otherwise return its request's handle at once.
func (ce *commEntry) submit(block bool, fn func(ctx context.Context) error) (int64, int32, string) {
	rq, c, m := ce.start(!block, false)
	if rq == nil {
		return 0, c, m
	}
	ce.mu.Lock()
	if ce.closed { // freed between start and here: the executor may be gone
		ce.mu.Unlock()
		c, m := ce.closedCode()
		rq.finish(c, m, Status{})
	} else {
		ce.queue = append(ce.queue, &job{fn: fn, req: rq})
		ce.mu.Unlock()
		select {
		case ce.wake <- struct{}{}:
		default:
		}
	}
	if !block {
		return rq.id, OK, ""
	}
	<-rq.done
	return 0, rq.code, rq.msg
}

// finish completes rq (once) and, for a nonblocking call still held by
// the program, queues it for Poll.
func (rq *request) finish(c int32, m string, st Status) {
	rq.code, rq.msg, rq.st = c, m, st
	close(rq.done)
	if rq.id == 0 {
		return
	}
	ce := rq.ce
	ce.mu.Lock()
	if ce.reqs[rq.id] == rq {
		ce.cq = append(ce.cq, rq.id)
		close(ce.changed)
		ce.changed = make(chan struct{})
	}
	ce.mu.Unlock()
}

// release removes rq from the tables; false if another call did first.
func (rq *request) release() bool {
	tab.Lock()
	mine := tab.reqs[rq.id] == rq
	delete(tab.reqs, rq.id)
	tab.Unlock()
	if !mine {
		return false
	}
	ce := rq.ce
	ce.mu.Lock()
	delete(ce.reqs, rq.id)
	if i := slices.Index(ce.cq, rq.id); i >= 0 {
		ce.cq = slices.Delete(ce.cq, i, i+1)
	}
	ce.mu.Unlock()
	return true
}

// Test is mr_test: done reports whether request r has finished; if so it
// is released and its result returned (code, message, status).
func Test(r int64) (done bool, st Status, code int32, msg string) {
	defer recovered(&code, &msg)
	if c, m, bad := forked(); bad {
		return false, st, c, m
	}
	rq, c, m := lookupReq(r, "mr_test")
	if rq == nil {
		return false, st, c, m
	}
	select {
	case <-rq.done:
	default:
		return false, st, OK, ""
	}
	if !rq.release() {
		c, m := fail(ErrInvalid, "multirail: mr_test: request %d was released by another call meanwhile", r)
		return false, st, c, m
	}
	return true, rq.st, rq.code, rq.msg
}

// Wait is mr_wait: it waits up to timeoutMs (< 0: forever) for request r,
// then releases it and returns its result, or returns ErrTimeout with the
// request still running.
func Wait(r int64, timeoutMs int64) (st Status, code int32, msg string) {
	defer recovered(&code, &msg)
	if c, m, bad := forked(); bad {
		return st, c, m
	}
	rq, c, m := lookupReq(r, "mr_wait")
	if rq == nil {
		return st, c, m
	}
	if !waitDone(rq.done, timeoutMs) {
		c, m := fail(ErrTimeout, "multirail: mr_wait: request %d still running after %d ms", r, timeoutMs)
		return st, c, m
	}
	if !rq.release() {
		c, m := fail(ErrInvalid, "multirail: mr_wait: request %d was released by another call meanwhile", r)
		return st, c, m
	}
	return rq.st, rq.code, rq.msg
}

// maxTimeoutMs is the longest timeout taken as such (about 35 years);
// longer ones, which would overflow a time.Duration, mean forever.
const maxTimeoutMs = 1 << 40

// waitDone waits for done up to timeoutMs (< 0: forever, 0: no wait).
func waitDone(done <-chan struct{}, timeoutMs int64) bool {
	select {
	case <-done:
		return true
	default:
	}
	if timeoutMs == 0 {
		return false
	}
	if timeoutMs < 0 || timeoutMs > maxTimeoutMs {
		<-done
		return true
	}
	t := time.NewTimer(time.Duration(timeoutMs) * time.Millisecond)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// RequestFree is mr_request_free: it abandons request r (a receive not
// matched yet is withdrawn; anything else runs to its end, its buffers in
// use until then).
func RequestFree(r int64) (code int32, msg string) {
	defer recovered(&code, &msg)
	if c, m, bad := forked(); bad {
		return c, m
	}
	rq, c, m := lookupReq(r, "mr_request_free")
	if rq == nil {
		return c, m
	}
	if !rq.release() {
		return fail(ErrInvalid, "multirail: mr_request_free: request %d was released by another call meanwhile", r)
	}
	if rq.stop != nil {
		rq.stop()
	}
	return OK, ""
}

// Poll is mr_poll: it waits up to timeoutMs (< 0: forever, 0: no wait)
// until at least one of h's requests has finished, and writes up to
// len(out) finished ones' handles into out, each reported once, oldest
// first. n is how many (0 on timeout).
func Poll(h int64, out []int64, timeoutMs int64) (n int, code int32, msg string) {
	defer recovered(&code, &msg)
	if c, m, bad := forked(); bad {
		return 0, c, m
	}
	ce, c, m := lookup(h, "mr_poll")
	if ce == nil {
		return 0, c, m
	}
	if len(out) == 0 {
		return 0, ErrInvalid, "multirail: mr_poll: max must be at least 1"
	}
	var timer <-chan time.Time
	if timeoutMs > 0 && timeoutMs <= maxTimeoutMs {
		t := time.NewTimer(time.Duration(timeoutMs) * time.Millisecond)
		defer t.Stop()
		timer = t.C
	}
	for {
		ce.mu.Lock()
		if ce.closed {
			ce.mu.Unlock()
			return 0, ErrClosed, fmt.Sprintf("multirail: mr_poll: communicator %d was freed (mr_comm_free)", h)
		}
		if len(ce.cq) > 0 {
			n = copy(out, ce.cq)
			ce.cq = slices.Delete(ce.cq, 0, n)
			ce.mu.Unlock()
			return n, OK, ""
		}
		ch := ce.changed
		ce.mu.Unlock()
		if timeoutMs == 0 {
			return 0, OK, ""
		}
		select {
		case <-ch:
		case <-timer: // nil (never) when waiting forever
			return 0, OK, ""
		}
	}
}

// Free is mr_comm_free: it closes communicator h (calls in progress fail
// with ErrClosed, queued ones too), waits until nothing of it runs any
// more (so the program may then free every buffer it gave it), and
// releases its requests. Later calls with h fail with ErrClosed.
func Free(h int64) (code int32, msg string) {
	defer recovered(&code, &msg)
	if c, m, bad := forked(); bad {
		return c, m
	}
	tab.Lock()
	ce := tab.comms[h]
	if ce != nil {
		delete(tab.comms, h)
		tab.freed[h] = true
	}
	tab.Unlock()
	if ce == nil {
		_, c, m := lookup(h, "mr_comm_free")
		return c, m
	}
	ce.mu.Lock()
	ce.closed = true
	close(ce.changed) // pollers see closed
	ce.changed = make(chan struct{})
	ce.mu.Unlock()
	select {
	case ce.wake <- struct{}{}:
	default:
	}
	ce.cancel()
	err := ce.c.Close()
	<-ce.exited
	ce.p2p.Wait()
	ce.mu.Lock()
	reqs := ce.reqs
	ce.reqs = map[int64]*request{}
	ce.cq = nil
	ce.mu.Unlock()
	tab.Lock()
	for id := range reqs {
		delete(tab.reqs, id)
	}
	tab.Unlock()
	if err != nil {
		c, m := Code(err)
		return c, "multirail: mr_comm_free: the communicator is freed, but closing it failed: " + m
	}
	return OK, ""
}
