//go:build !race

package handshake

// ioRelease and ioAcquire annotate raw I/O for the race detector (see
// race_on.go); without it they do nothing.
func ioRelease() {}

func ioAcquire() {}
