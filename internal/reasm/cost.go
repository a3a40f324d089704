package reasm

import "math/bits"

// Overhead is the fixed cost, in bytes, charged against the credit window
// for every message on top of its buffer: it bounds the bookkeeping a peer
// can make a receiver hold with empty messages.
const Overhead = 256

// ExactBelow is the message size below which a receive buffer has exactly
// the message's size; from it on, buffers come in size classes.
const ExactBelow = 2 << 10

// classSteps is the number of size classes per doubling: a class buffer
// exceeds its message by less than 1/classSteps (12.5 %).
const classSteps = 8

// Capacity is the capacity of the buffer a receiver holds a message of n
// bytes in: n below ExactBelow, else n rounded up to the next size class
// (eight classes per doubling: 2048, 2304, ..., 3840, 4096, 4608, ...).
// Buffers of a class can be reused for any message of that class, and the
// credit window charges the capacity, so that what a peer can make a
// receiver hold is the window, not up to twice it.
func Capacity(n uint64) uint64 {
	if n < ExactBelow {
		return n
	}
	step := uint64(1) << (bits.Len64(n) - 1 - 3) // 1/8 of n's power of two
	return (n + step - 1) &^ (step - 1)
}

// Cost is what a message of n bytes costs against the credit window: the
// capacity of its buffer plus Overhead. Both ends compute it (docs/wire.md,
// "Flow control").
func Cost(n uint64) uint64 { return Capacity(n) + Overhead }

// Largest is the largest message whose Cost fits in window (0 when none
// does).
func Largest(window uint64) uint64 {
	if window < Overhead {
		return 0
	}
	w := window - Overhead
	if w < ExactBelow {
		return w
	}
	step := uint64(1) << (bits.Len64(w) - 1 - 3)
	return w &^ (step - 1) // the largest class size <= w
}
