//go:build !linux

package handshake

import "net"

// Tune disables Nagle's algorithm; the unsent-bytes bound is Linux only.
func Tune(c net.Conn, notSent int) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
}

// SetNotSent does nothing here: the bound is Linux only.
func SetNotSent(net.Conn, int) {}

// Acked is Linux only (TCP_INFO): it reports false here.
func Acked(net.Conn) (uint64, bool) { return 0, false }
