package capi

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/multirail/multirail/comm"
)

// Handles are int64s drawn from one counter (never pointers, never
// reused; 0 is never one), looked up in these tables under one mutex.
var (
	lastHandle atomic.Int64

	tab = struct {
		sync.Mutex
		comms    map[int64]*commEntry
		freed    map[int64]bool // communicators freed by mr_comm_free: their calls fail with ErrClosed
		pendings map[int64]*pendingEntry
		reqs     map[int64]*request
	}{
		comms:    map[int64]*commEntry{},
		freed:    map[int64]bool{},
		pendings: map[int64]*pendingEntry{},
		reqs:     map[int64]*request{},
	}
)

func newHandle() int64 { return lastHandle.Add(1) }

// Register makes c a communicator of the C ABI and returns its handle
// (mr_init_env, mr_connect and mr_comm_group do; Go programs and tests
// may too). It starts c's executor; Free stops it and closes c.
func Register(c *comm.Comm) int64 {
	ce := &commEntry{
		id:      newHandle(),
		c:       c,
		wake:    make(chan struct{}, 1),
		exited:  make(chan struct{}),
		changed: make(chan struct{}),
		reqs:    map[int64]*request{},
	}
	ce.ctx, ce.cancel = context.WithCancel(context.Background())
	go ce.run()
	tab.Lock()
	tab.comms[ce.id] = ce
	tab.Unlock()
	return ce.id
}

// lookup returns the communicator of handle h, or the code and message
// of a bad handle (ErrClosed for a freed one, ErrInvalid otherwise).
func lookup(h int64, what string) (*commEntry, int32, string) {
	tab.Lock()
	ce, freed := tab.comms[h], tab.freed[h]
	tab.Unlock()
	if ce != nil {
		return ce, OK, ""
	}
	if freed {
		c, m := fail(ErrClosed, "multirail: %s: communicator %d was freed (mr_comm_free)", what, h)
		return nil, c, m
	}
	c, m := fail(ErrInvalid, "multirail: %s: %d is not a communicator handle", what, h)
	return nil, c, m
}

// lookupReq returns the request of handle r.
func lookupReq(r int64, what string) (*request, int32, string) {
	tab.Lock()
	rq := tab.reqs[r]
	tab.Unlock()
	if rq == nil {
		c, m := fail(ErrInvalid, "multirail: %s: %d is not a request handle (released already by mr_test, mr_wait, mr_request_free or mr_comm_free?)", what, r)
		return nil, c, m
	}
	return rq, OK, ""
}

// Live counts the handles in the tables (tests: nothing left behind).
func Live() (comms, pendings, reqs int) {
	tab.Lock()
	defer tab.Unlock()
	return len(tab.comms), len(tab.pendings), len(tab.reqs)
}
