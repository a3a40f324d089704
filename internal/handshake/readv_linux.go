package handshake

import (
	"io"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

func readvFor(c net.Conn) (readvFunc, func()) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, nil
	}
	v := &readv{iov: make([][]byte, 2), low: 1}
	v.fn = v.read // one method value, not a closure per call
	v.resetFn = v.reset
	reset := func() {
		if v.low != 1 {
			_ = raw.Control(v.resetFn)
		}
	}
	return func(p, q []byte) (int, int, error) {
		v.iov[0], v.iov[1] = p, q
		v.cur = v.iov[:2]
		if len(q) == 0 {
			v.cur = v.iov[:1]
		}
		v.n, v.err = 0, nil // Read may fail (deadline) without calling fn
		err := raw.Read(v.fn)
		n, rerr := v.n, v.err
		v.iov[0], v.iov[1], v.cur, v.err = nil, nil, nil, nil
		if err == nil {
			err = rerr
		}
		if n < 0 {
			n = 0
		}
		if err == nil && n == 0 {
			err = io.EOF
		}
		m := min(n, len(p))
		return m, n - m, err
	}, reset
}

// readv holds one Reader's readv(2) call state, so that a read allocates
// nothing.
type readv struct {
	iov, cur [][]byte
	n        int
	err      error
	fn       func(fd uintptr) bool
	resetFn  func(fd uintptr)
	low      int // the socket's SO_RCVLOWAT as last set
}

// maxLowat bounds the receive low-water mark a payload read sets.
const maxLowat = 1 << 20

func (v *readv) read(fd uintptr) bool {
	v.n, v.err = unix.Readv(int(fd), v.cur)
	if v.err != unix.EAGAIN {
		return true
	}
	// Nothing there yet: wait until the rest of the payload is (the
	// sender is in the middle of the frame, so it comes), not for every
	// packet. On a slow rail a 64 KiB segment otherwise costs a wake-up
	// and a readv per few packets. EOF and errors wake the reader anyway.
	if want := min(len(v.cur[0]), maxLowat); want != v.low && unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, want) == nil {
		v.low = want
	}
	return false
}

// reset puts the low-water mark back to one byte, before reads of unknown
// length (a header).
func (v *readv) reset(fd uintptr) {
	if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, 1) == nil {
		v.low = 1
	}
}
