// Busy polling (Config.BusyPoll): one poller goroutine per process watches every polling rail with one poll(2).

package multirail

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// pollers are the rails of this process's busy-polling connections.
//
// They share one clock of activity: a message sent or a frame received on
// any of them keeps all of them polling. A process running a collective
// needs that (the answer often comes from another peer than the one just
// written to), and it is necessary besides: a goroutine that polls and
// yields keeps the Go scheduler from looking at its network poller (it
// does so only when nothing is runnable, or every 10 ms), so a rail whose
// reader waited in the kernel meanwhile would see its frames late. So a
// reader that finds nothing parks itself here, and one poller goroutine
// watches every parked rail with a single poll(2) (one system call for all
// rails and peers: polling each socket in turn costs one per socket, about
// 1.3 us each in a virtual machine) and wakes the readers whose sockets
// have something. Once no polling connection has been active for its
// BusyPoll, the parked readers go back to waiting in the kernel, and the
// poller ends; activity wakes them to park again.
var pollers struct {
	base    time.Time    // pollNow's zero
	last    atomic.Int64 // pollNow() at the last activity
	waiting atomic.Int32 // readers that stopped polling and wait in the kernel
	mu      sync.Mutex
	conns   map[*Conn]struct{}
	window  int64         // the longest BusyPoll of conns, ns
	parked  []*rail       // readers waiting for the poller's word
	gen     uint64        // changes of parked
	running bool          // the poller goroutine runs
	wakes   atomic.Uint64 // readers the poller woke because their socket had something
}

func init() { pollers.base = time.Now() }

// pollNow is the polling clock: monotonic nanoseconds.
func pollNow() int64 { return int64(time.Since(pollers.base)) }

// What the poller tells a parked reader.
const (
	pollReady = iota + 1 // the socket has something (or the rail was poked): read
	pollQuiet            // nothing is active any more: wait in the kernel
)

// yieldEvery is how many polls go by between two sched_yield(2)s of the
// poller: a polling thread otherwise keeps its core until the kernel's
// tick when another thread of the machine lands on it (such as the other
// end of a loopback or lab connection), which then waits hundreds of
// microseconds.
const yieldEvery = 4

// pollJoin adds c to the polling connections (if it polls).
func (c *Conn) pollJoin() {
	if c.cfg.BusyPoll <= 0 {
		return
	}
	pollers.mu.Lock()
	defer pollers.mu.Unlock()
	if pollers.conns == nil {
		pollers.conns = make(map[*Conn]struct{})
	}
	pollers.conns[c] = struct{}{}
	pollers.window = max(pollers.window, int64(c.cfg.BusyPoll))
}

// pollLeave removes c from the polling connections and lets its readers
// go.
func (c *Conn) pollLeave() {
	if c.cfg.BusyPoll <= 0 {
		return
	}
	pollers.mu.Lock()
	delete(pollers.conns, c)
	pollers.window = 0
	for x := range pollers.conns {
		pollers.window = max(pollers.window, int64(x.cfg.BusyPoll))
	}
	pollers.mu.Unlock()
	for _, r := range c.rails {
		unpark(r, pollReady) // its socket is closed: the read says so
		c.pollDone(r)
	}
}

// pollActive records activity on c: readers of every polling connection
// that wait in the kernel are woken to poll.
func (c *Conn) pollActive() {
	if c.cfg.BusyPoll <= 0 {
		return
	}
	pollers.last.Store(pollNow())
	if pollers.waiting.Load() == 0 {
		return
	}
	var wake []*rail
	pollers.mu.Lock()
	for x := range pollers.conns {
		for _, r := range x.rails {
			if r.pollWait.CompareAndSwap(true, false) {
				pollers.waiting.Add(-1)
				wake = append(wake, r)
			}
		}
	}
	pollers.mu.Unlock()
	for _, r := range wake {
		r.poke() // its read returns errPoked; the reader polls again
	}
}

// busyPoll waits, while a polling connection of the process was active
// within Config.BusyPoll, until r's socket has something to read (or the
// rail has something else to report, such as a poke's deadline), so that
// the read that follows finds its frame without waiting in the kernel.
// Other goroutines run meanwhile. If it gives up, r counts as waiting in
// the kernel until pollDone. The caller holds r.rdMu.
func (c *Conn) busyPoll(r *rail) {
	if !r.br.CanPoll() || r.br.Buffered() > 0 {
		return
	}
	// No read of its own first: right after a frame the next one is
	// seldom there yet, and the poller looks at every parked socket with
	// one system call.
	for {
		if pollNow()-pollers.last.Load() > int64(c.cfg.BusyPoll) || park(r) == pollQuiet {
			if !r.pollWait.Swap(true) {
				pollers.waiting.Add(1)
			}
			return
		}
		if r.br.Poll() {
			return
		}
	}
}

// pollDone ends r's wait in the kernel (see busyPoll).
func (c *Conn) pollDone(r *rail) {
	if r.pollWait.Load() && r.pollWait.CompareAndSwap(true, false) {
		pollers.waiting.Add(-1)
	}
}

// park hands r to the poller (starting it if need be) and waits for its
// word.
func park(r *rail) int {
	pollers.mu.Lock()
	pollers.parked = append(pollers.parked, r)
	pollers.gen++
	if !pollers.running {
		pollers.running = true
		go pollLoop()
	}
	pollers.mu.Unlock()
	return <-r.pollCh
}

// unpark takes r from the parked readers, if it is there, with word w.
func unpark(r *rail, w int) {
	pollers.mu.Lock()
	defer pollers.mu.Unlock()
	if i := slices.Index(pollers.parked, r); i >= 0 {
		pollers.parked = slices.Delete(pollers.parked, i, i+1)
		pollers.gen++
		r.pollCh <- w // cap 1, and a parked reader has nothing in it
	}
}

// pollLoop is the poller goroutine: it polls the parked readers' sockets
// with one poll(2) at a time and wakes those that have something, until
// the polling connections have been quiet for the longest BusyPoll; then
// it sends every parked reader to wait in the kernel and ends.
func pollLoop() {
	var (
		fds   []pollFD
		rails []*rail
		gen   = ^uint64(0) // park made pollers.gen at least 1 before starting the loop
	)
	for i := 1; ; i++ {
		pollers.mu.Lock()
		if pollNow()-pollers.last.Load() > pollers.window {
			for _, r := range pollers.parked {
				r.pollCh <- pollQuiet
			}
			pollers.parked = pollers.parked[:0]
			pollers.gen++
			pollers.running = false
			pollers.mu.Unlock()
			return
		}
		if gen != pollers.gen {
			gen = pollers.gen
			rails = append(rails[:0], pollers.parked...)
			fds = fds[:0]
			for _, r := range rails {
				fds = append(fds, newPollFD(r.br.FD()))
			}
		}
		pollers.mu.Unlock()
		if len(fds) > 0 && pollFDs(fds) > 0 {
			pollers.mu.Lock()
			for k := range fds {
				if fds[k].Revents == 0 {
					continue
				}
				fds[k].Revents = 0
				if j := slices.Index(pollers.parked, rails[k]); j >= 0 {
					pollers.parked = slices.Delete(pollers.parked, j, j+1)
					pollers.gen++
					pollers.wakes.Add(1)
					rails[k].pollCh <- pollReady
				}
			}
			pollers.mu.Unlock()
		}
		if i%yieldEvery == 0 {
			osYield()
		}
		runtime.Gosched()
	}
}
