package handshake

import (
	"net"

	"golang.org/x/sys/unix"
)

// Tune bounds the bytes the kernel holds unsent on a rail's socket
// (TCP_NOTSENT_LOWAT) without limiting what is in flight, so that the
// backlog stays in the rail's own send queue where the scheduler sees it,
// and disables Nagle's algorithm. Errors are ignored: tuning is best effort.
func Tune(c net.Conn, notSent int) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	_ = tc.SetNoDelay(true)
	SetNotSent(c, notSent)
}

// SetNotSent changes the socket's TCP_NOTSENT_LOWAT (best effort).
func SetNotSent(c net.Conn, notSent int) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	control(tc, func(fd int) {
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, notSent)
	})
}

// control runs fn on tc's file descriptor and reports whether it ran.
func control(tc *net.TCPConn, fn func(fd int)) bool {
	raw, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	return raw.Control(func(fd uintptr) { fn(int(fd)) }) == nil
}

// Acked returns how many bytes of ours the peer's TCP has acknowledged on
// c (TCP_INFO's bytes_acked), and false when c is not a TCP socket or the
// kernel does not say: a rail whose count grows is alive, however slow.
func Acked(c net.Conn) (uint64, bool) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0, false
	}
	var info *unix.TCPInfo
	if !control(tc, func(fd int) { info, _ = unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO) }) || info == nil {
		return 0, false
	}
	return info.Bytes_acked, true
}
