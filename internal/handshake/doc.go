// Package handshake holds the per-socket pieces of a multirail rail: the
// handshake that authenticates a TCP connection and joins it to a session
// (Dial on the dialing side; Accept, then Welcome once every rail of the
// session has joined, on the accepting side), the socket tuning
// (TCP_NODELAY, TCP_NOTSENT_LOWAT), and Reader, which reads the frames
// that follow the handshake with few system calls.
//
// The caller owns the connections: it closes them on any error, and reads
// each with at most one goroutine at a time.
package handshake
