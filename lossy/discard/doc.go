// Package discard decides how many of a stage's packets a sender drops
// before sending, and which ones: the adaptive pre-discard of patent
// JP7684261B2 (see docs/discard.md).
//
// A Controller holds the discard rate R of one sender-receiver pair. The
// sender calls Begin before each stage to get the stage's number and the
// rate to send it with, and Select to mark the packets to drop. The
// receiver measures the stage's reception period L (first to last packet)
// and the receiving application evaluates the result's quality P; the
// sender hands both to the Controller (Period, Quality) as they come back.
// Once a stage has both, the Controller sets the next rate:
//
//	first stage with feedback:        R = Initial
//	P worse than before by > TH1:     R = max(0, R - Down)
//	else L grew by > TH2 (relative):  R = min(Max, R + Up)
//	else:                             R unchanged
//
// With History K >= 2, "L grew" compares L with each of the last K
// stages' periods and fires when it grew against at least one of them.
//
// Everything here is pure: no I/O, no goroutines, no clock (periods come
// in as durations measured by the caller) and no global random source
// (Select takes a *rand.Rand). Begin, Period, Quality and Select allocate
// nothing. A Controller is not safe for concurrent use; the caller locks.
package discard
