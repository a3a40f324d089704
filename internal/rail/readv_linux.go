package rail

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
	iov := make([][]byte, 2)
	return func(p, q []byte) (int, int, error) {
		var (
			n    int
			rerr error
		)
		iov[0], iov[1] = p, q
		if len(q) == 0 {
			iov = iov[:1]
		} else {
			iov = iov[:2]
		}
		err := raw.Read(func(fd uintptr) bool {
			n, rerr = unix.Readv(int(fd), iov)
			return rerr != unix.EAGAIN
		})
		iov[0], iov[1] = nil, nil
		iov = iov[:2]
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
