//go:build !linux

package handshake

import "net"

func readvFor(net.Conn) (readvFunc, func()) { return nil, nil }

func pollFor(net.Conn) (pollFunc, int) { return nil, -1 }

// QuickWriter writes small batches to a socket without waiting; on this
// platform there is none (NewQuickWriter returns nil).
type QuickWriter struct{}

// NewQuickWriter returns nil on this platform.
func NewQuickWriter(net.Conn) *QuickWriter { return nil }

// QuickMax is the most a QuickWriter writes in one call.
const QuickMax = 64 << 10

// Write writes nothing.
func (q *QuickWriter) Write([][]byte) (int, error) { return 0, nil }
