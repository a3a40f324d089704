// Package handshake holds the per-socket pieces of a multirail rail: the
// Noise handshake (Noise_NNpsk0_25519_AESGCM_SHA256, through
// github.com/flynn/noise) that authenticates a TCP connection, joins it to
// a session and derives its keys (Dial, then WaitWelcome, on the dialing
// side; Accept, then Welcome once every rail of the session has joined, on
// the accepting side), the sealed record layout of the frames that follow
// (Cipher, SealFrames, SealedSize), the socket tuning (TCP_NODELAY,
// TCP_NOTSENT_LOWAT), and Reader, which reads the frames with few system
// calls. NewState, Suite and Cipher (with NewCipher) also serve the job
// rendezvous (package comm/rdzv), which runs the same Noise pattern under
// a key of its own.
//
// The caller owns the connections: it closes them on any error, and reads
// each with at most one goroutine at a time.
package handshake
