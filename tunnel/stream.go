package tunnel

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// stream is one TCP connection carried over the session. Its reader
// goroutine reads the connection and sends DATA within the peer's credit;
// its writer goroutine writes what the peer sent and returns credit as it
// goes.
type stream struct {
	s     *Session
	id    uint32
	ready chan struct{} // closed by attach
	done  chan struct{} // closed by end

	creditCh chan struct{} // a grant arrived (capacity 1)
	dataCh   chan struct{} // data or FIN arrived (capacity 1)

	mu          sync.Mutex
	nc          net.Conn
	credit      int64    // bytes this end may still send
	outstanding int64    // bytes received and not yet credited back
	unreturned  int64    // of those, bytes already written to nc
	rq          [][]byte // received DATA messages (kind byte first), in order
	finRecv     bool     // the peer's FIN is queued after rq
	finSent     bool
	wrDone      bool // nc's write side is shut after the peer's FIN
	ended       bool
}

func (s *Session) newStream(id uint32, credit int64) *stream {
	return &stream{s: s, id: id, credit: credit, ready: make(chan struct{}), done: make(chan struct{}),
		creditCh: make(chan struct{}, 1), dataCh: make(chan struct{}, 1)}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// attach connects the stream to nc and starts its goroutines.
func (st *stream) attach(nc net.Conn) {
	st.mu.Lock()
	if st.ended {
		st.mu.Unlock()
		abort(nc)
		return
	}
	st.nc = nc
	close(st.ready)
	st.mu.Unlock()
	st.s.wg.Add(2)
	go st.reader()
	go st.writer()
}

// abort closes nc so that its application sees a reset rather than an
// orderly end.
func abort(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = nc.Close()
}

// end ends the stream once: orderly (both directions finished) or by a
// reset, which aborts the local connection and, when rst is not empty,
// tells the peer why.
func (st *stream) end(reset bool, rst string) {
	st.mu.Lock()
	if st.ended {
		st.mu.Unlock()
		return
	}
	st.ended = true
	close(st.done)
	nc, rq := st.nc, st.rq
	st.rq = nil
	st.mu.Unlock()
	s := st.s
	s.mu.Lock()
	delete(s.streams, st.id)
	s.mu.Unlock()
	for _, d := range rq {
		s.c.Release(d)
	}
	if reset {
		s.resets.Add(1)
		if rst != "" {
			s.sendAsync(st.id, appendReset(nil, rst))
		}
	}
	if nc == nil {
		return
	}
	if reset {
		abort(nc)
	} else {
		_ = nc.Close()
	}
}

// maybeFinish ends the stream when both directions are done.
func (st *stream) maybeFinish() {
	st.mu.Lock()
	fin := st.finSent && st.wrDone
	st.mu.Unlock()
	if fin {
		st.end(false, "")
	}
}

// deliver queues a DATA message (the dispatcher's; the stream owns it now).
func (st *stream) deliver(d []byte) error {
	n := int64(len(d) - 1)
	st.mu.Lock()
	if st.ended {
		st.mu.Unlock()
		st.s.c.Release(d)
		return nil
	}
	if st.finRecv {
		st.mu.Unlock()
		st.s.c.Release(d)
		return fmt.Errorf("%w: DATA on stream %d after its FIN", ErrProtocol, st.id)
	}
	st.outstanding += n
	if st.outstanding > int64(st.s.cfg.Window) {
		st.mu.Unlock()
		st.s.c.Release(d)
		return fmt.Errorf("%w: stream %d: peer sent %d bytes beyond its credit (window %d)", ErrProtocol, st.id, st.outstanding-int64(st.s.cfg.Window), st.s.cfg.Window)
	}
	st.rq = append(st.rq, d)
	st.mu.Unlock()
	signal(st.dataCh)
	return nil
}

// peerFin records the peer's FIN.
func (st *stream) peerFin() error {
	st.mu.Lock()
	if st.finRecv {
		st.mu.Unlock()
		return fmt.Errorf("%w: second FIN on stream %d", ErrProtocol, st.id)
	}
	st.finRecv = true
	st.mu.Unlock()
	signal(st.dataCh)
	return nil
}

// grant adds credit.
func (st *stream) grant(inc int64) error {
	st.mu.Lock()
	st.credit += inc
	bad := st.credit > 2*MaxWindow
	st.mu.Unlock()
	if bad {
		return fmt.Errorf("%w: stream %d: credit beyond any window", ErrProtocol, st.id)
	}
	signal(st.creditCh)
	return nil
}

// reader sends what the local connection sends, within the peer's credit.
func (st *stream) reader() {
	s := st.s
	defer s.wg.Done()
	buf := make([]byte, 1+s.cfg.ChunkSize)
	buf[0] = KindData
	for {
		st.mu.Lock()
		for st.credit <= 0 && !st.ended {
			st.mu.Unlock()
			select {
			case <-st.creditCh:
			case <-st.done:
			}
			st.mu.Lock()
		}
		if st.ended {
			st.mu.Unlock()
			return
		}
		n := int(min(st.credit, int64(s.cfg.ChunkSize)))
		st.mu.Unlock()
		k, err := st.nc.Read(buf[1 : 1+n])
		if k > 0 {
			st.mu.Lock()
			st.credit -= int64(k)
			st.mu.Unlock()
			if s.send(st.id, buf[:1+k]) != nil {
				return // the session has ended
			}
			s.sent.Add(uint64(k))
		}
		if err == nil {
			continue
		}
		if st.isEnded() {
			return
		}
		if errors.Is(err, io.EOF) { // the application shut its sending side
			if s.send(st.id, []byte{KindFin}) != nil {
				return
			}
			st.mu.Lock()
			st.finSent = true
			st.mu.Unlock()
			st.maybeFinish()
			return
		}
		st.end(true, "read: "+err.Error())
		return
	}
}

// writer writes what the peer sent to the local connection and returns
// credit once a quarter of the window has been written.
func (st *stream) writer() {
	s := st.s
	defer s.wg.Done()
	quarter := int64(s.cfg.Window / 4)
	for {
		st.mu.Lock()
		for len(st.rq) == 0 && !st.finRecv && !st.ended {
			st.mu.Unlock()
			select {
			case <-st.dataCh:
			case <-st.done:
			}
			st.mu.Lock()
		}
		if st.ended {
			st.mu.Unlock()
			return
		}
		if len(st.rq) == 0 { // the peer's FIN, after all its data
			st.mu.Unlock()
			if cw, ok := st.nc.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			}
			st.mu.Lock()
			st.wrDone = true
			st.mu.Unlock()
			st.maybeFinish()
			return
		}
		d := st.rq[0]
		st.rq[0] = nil
		st.rq = st.rq[1:]
		st.mu.Unlock()
		_, err := st.nc.Write(d[1:])
		n := int64(len(d) - 1)
		s.c.Release(d)
		if err != nil {
			if !st.isEnded() {
				st.end(true, "write: "+err.Error())
			}
			return
		}
		st.mu.Lock()
		st.unreturned += n
		var inc int64
		if st.unreturned >= quarter {
			inc = st.unreturned
			st.unreturned = 0
			st.outstanding -= inc
		}
		st.mu.Unlock()
		if inc > 0 && s.send(0, appendWindow(nil, st.id, uint32(inc))) != nil {
			return
		}
	}
}

func (st *stream) isEnded() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.ended
}
