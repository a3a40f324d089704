package handshake

import (
	"io"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

func readvFor(c net.Conn) readvFunc {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	v := &readv{iov: make([][]byte, 2)}
	v.fn = v.read // one method value, not a closure per call
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
	}
}

// readv holds one Reader's readv(2) call state, so that a read allocates
// nothing.
type readv struct {
	iov, cur [][]byte
	n        int
	err      error
	fn       func(fd uintptr) bool
}

func (v *readv) read(fd uintptr) bool {
	v.n, v.err = unix.Readv(int(fd), v.cur)
	return v.err != unix.EAGAIN
}
