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
// BusyPoll, the parked readers go back to waiting in the kernel (they
// become sleepers), and the poller ends.
//
// When activity resumes, the poller starts again and watches the
// sleepers' sockets too, and wakes only the sleeper whose socket has
// something (its read is interrupted by a read deadline in the past and
// resumes at once): waking every sleeper to park again, as an earlier
// version did, put one goroutine per rail of the process (9 with 3 peers
// over 3 rails) ahead of the message that ended the quiet, so that one
// slow exchange made the next one slow too.
var pollers struct {
	base     time.Time    // pollNow's zero
	last     atomic.Int64 // pollNow() at the last activity
	waiting  atomic.Int32 // len(sleepers)
	running  atomic.Bool  // the poller goroutine runs (changed under mu)
	mu       sync.Mutex
	conns    map[*Conn]struct{}
	window   int64         // the longest BusyPoll of conns, ns
	parked   []*rail       // readers waiting for the poller's word
	sleepers []*rail       // readers that stopped polling and wait in the kernel (rail.pollWait)
	gen      uint64        // changes of parked and sleepers
	wakes    atomic.Uint64 // readers the poller woke because their socket had something
}

func init() { pollers.base = time.Now() }

// pollNow is the polling clock: monotonic nanoseconds.
func pollNow() int64 { return int64(time.Since(pollers.base)) }

// What the poller tells a parked reader.
const (
	pollReady = iota + 1 // the socket has something (or the rail was poked): read
	pollQuiet            // nothing is active any more: wait in the kernel
)

// pollStepMax is the most a poll counts towards the quiet that ends
// polling: a longer time since the previous poll was spent waiting for a
// core (or running other goroutines of the process), not polling.
const pollStepMax = 25 * time.Microsecond

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

// pollActive records activity on c. If readers of polling connections
// wait in the kernel, the poller is started: it watches their sockets and
// wakes the one that gets something.
func (c *Conn) pollActive() {
	if c.cfg.BusyPoll <= 0 {
		return
	}
	pollers.last.Store(pollNow())
	if pollers.waiting.Load() == 0 || pollers.running.Load() {
		return
	}
	pollers.mu.Lock()
	if !pollers.running.Load() && len(pollers.sleepers) > 0 {
		pollStartLocked()
	}
	pollers.mu.Unlock()
}

// pollStartLocked starts the poller goroutine. Caller holds pollers.mu.
func pollStartLocked() {
	pollers.running.Store(true)
	go pollLoop()
}

// busyPoll waits, while a polling connection of the process was active
// within Config.BusyPoll (as the poller counts it, see pollLoop, while it
// runs), until r's socket has something to read (or the
// rail has something else to report, such as a poke's deadline), so that
// the read that follows finds its frame without waiting in the kernel.
// Other goroutines run meanwhile. If it gives up, r counts as waiting in
// the kernel (a sleeper) until pollDone. The caller holds r.rdMu.
func (c *Conn) busyPoll(r *rail) {
	if !r.br.CanPoll() || r.br.Buffered() > 0 {
		return
	}
	// No read of its own first: right after a frame the next one is
	// seldom there yet, and the poller looks at every parked socket with
	// one system call.
	for {
		if (!pollers.running.Load() && pollNow()-pollers.last.Load() > int64(c.cfg.BusyPoll)) || c.park(r) == pollQuiet {
			pollers.mu.Lock()
			if !r.pollWait.Load() {
				r.pollWait.Store(true)
				pollers.sleepers = append(pollers.sleepers, r)
				pollers.waiting.Add(1)
				pollers.gen++
				c.path.pollLapses.Add(1)
			}
			pollers.mu.Unlock()
			return
		}
		if r.br.Poll() {
			return
		}
	}
}

// pollDone ends r's wait in the kernel (see busyPoll).
func (c *Conn) pollDone(r *rail) {
	if !r.pollWait.Load() {
		return
	}
	pollers.mu.Lock()
	pollSleepDoneLocked(r)
	pollers.mu.Unlock()
}

// pollSleepDoneLocked takes r from the sleepers, if it is one. Caller
// holds pollers.mu.
func pollSleepDoneLocked(r *rail) bool {
	if !r.pollWait.Load() {
		return false
	}
	r.pollWait.Store(false)
	if i := slices.Index(pollers.sleepers, r); i >= 0 {
		pollers.sleepers = slices.Delete(pollers.sleepers, i, i+1)
	}
	pollers.waiting.Add(-1)
	pollers.gen++
	return true
}

// park hands r to the poller (starting it if need be) and waits for its
// word.
func (c *Conn) park(r *rail) int {
	c.path.pollParks.Add(1)
	pollers.mu.Lock()
	pollers.parked = append(pollers.parked, r)
	pollers.gen++
	if !pollers.running.Load() {
		pollStartLocked()
	}
	pollers.mu.Unlock()
	w := <-r.pollCh
	if w == pollReady {
		c.path.pollWakes.Add(1)
	}
	return w
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

// pollLoop is the poller goroutine: it polls the parked readers' and the
// sleepers' sockets with one poll(2) at a time and wakes those that have
// something, until the polling connections have been quiet for the
// longest BusyPoll; then it sends every parked reader to wait in the
// kernel and ends.
func pollLoop() {
	var (
		fds    []pollFD
		rails  []*rail
		parked int          // rails[:parked] were parked, the rest sleepers
		gen    = ^uint64(0) // a start made pollers.gen at least 1 before
		seen   int64        // pollers.last at the previous poll
		prev   int64        // pollNow() at the previous poll
		polled int64        // polling time since the last activity
	)
	for {
		// The quiet is the time spent polling since the last activity,
		// not the time on the clock: while this thread waits for a core
		// (ranks outnumber cores, or other work of the machine holds
		// them) nothing can arrive that it would miss, and counting that
		// wait sent the readers to the kernel after most slow exchanges,
		// so that the next one paid a wake-up from the kernel too and was
		// slow in turn (Stats.Path.PollLapses).
		now, last := pollNow(), pollers.last.Load()
		if last != seen {
			seen, polled = last, min(max(now-last, 0), int64(pollStepMax))
		} else {
			polled += min(now-prev, int64(pollStepMax))
		}
		prev = now
		pollers.mu.Lock()
		if polled > pollers.window {
			for _, r := range pollers.parked {
				r.pollCh <- pollQuiet
			}
			pollers.parked = pollers.parked[:0]
			pollers.gen++
			pollers.running.Store(false)
			pollers.mu.Unlock()
			return
		}
		if gen != pollers.gen {
			gen = pollers.gen
			rails = append(append(rails[:0], pollers.parked...), pollers.sleepers...)
			parked = len(pollers.parked)
			fds = fds[:0]
			for _, r := range rails {
				fds = append(fds, newPollFD(r.br.FD()))
			}
		}
		pollers.mu.Unlock()
		woke := false
		if len(fds) > 0 && pollFDs(fds) > 0 {
			var wake []*rail
			pollers.mu.Lock()
			for k := range fds {
				if fds[k].Revents == 0 {
					continue
				}
				fds[k].Revents = 0
				r := rails[k]
				if k >= parked {
					// A sleeper: its read is interrupted and resumes,
					// now that there is something to read.
					if pollSleepDoneLocked(r) {
						wake = append(wake, r)
					}
					continue
				}
				if j := slices.Index(pollers.parked, r); j >= 0 {
					pollers.parked = slices.Delete(pollers.parked, j, j+1)
					pollers.gen++
					pollers.wakes.Add(1)
					r.pollCh <- pollReady
					woke = true
				}
			}
			pollers.mu.Unlock()
			for _, r := range wake {
				pollers.wakes.Add(1)
				r.pokeData()
				woke = true
			}
		}
		// The poller gives up its core (sched_yield(2)) after every poll that
		// found nothing, and never after one that woke a reader: a polling thread
		// otherwise keeps its core until the kernel's tick when another thread of
		// the machine lands on it (such as the other end of a loopback or lab
		// connection), which then waits hundreds of microseconds; and a yield
		// right after a wake puts the reader it woke, and the message it is to
		// read, behind every other process waiting for that core. Open MPI's
		// ranks yield the same way (mpi_yield_when_idle). Measured in the 4-host
		// lab on 2 cores, 8-byte allreduce (issue 27, BENCHMARKS.md): 74.8 us
		// against 81.4 with a yield every fourth poll whatever it found (the rule
		// before), 1.24x Open MPI's time against 1.35x; yielding after every poll,
		// wakes included, was slower than both.
		if !woke {
			osYield()
		}
		runtime.Gosched()
	}
}
