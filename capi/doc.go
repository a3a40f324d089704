// Package capi holds the logic of multirail's C ABI (capi/multirail.h,
// built into libmultirail.so from capi/lib): handle tables, the mapping of
// the header's element types, reductions and error codes onto package
// comm's, the parsing of config_json, a per-communicator executor that
// runs collectives in call order, requests with test, wait and a
// completion poll, and the fork check.
//
// It is an ordinary Go package (no cgo): every function takes and returns
// plain Go values ([]byte views of the caller's memory, int64 handles,
// int32 codes and message strings), so that `go test -race` covers it.
// The cgo shims in capi/lib turn C pointers into slices (unsafe.Slice, no
// copy), call these functions and write the code and message into the
// caller's mr_error. docs/capi.md states the rules of the ABI.
//
// Every function recovers panics into ErrPanic and, in a process forked
// from the one that loaded the package, returns ErrFork at once (the C
// side checks that before entering Go at all: a forked child that calls
// into the Go runtime hangs, golang/go#15538).
package capi
