//go:build race

package handshake

import "sync/atomic"

// ioSync stands for the race detector's model of I/O: Go's own reads and
// writes on a file descriptor make every write happen before every later
// read (internal/poll does so for the detector), which is how data sent
// to a peer and answered causally orders what a program did before the
// send with what it does after the answer. The raw reads and writes of
// this package (Poll, QuickWriter, readv) bypass that, so they annotate
// the same edges with an atomic counter; without the race detector they
// cost nothing (race_off.go).
var ioSync atomic.Uint64

// ioRelease precedes a write that may put bytes on the wire.
func ioRelease() { ioSync.Add(1) }

// ioAcquire follows a read that returned bytes.
func ioAcquire() { ioSync.Load() }
