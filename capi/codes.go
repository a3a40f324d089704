package capi

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"unicode/utf8"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/comm"
	"github.com/multirail/multirail/lossy"
)

// The codes of enum mr_code (0 or negative).
const (
	OK          int32 = 0
	ErrInvalid  int32 = -1  // a bad argument: handle, dtype, op, count, rank, tag, NULL buffer
	ErrConfig   int32 = -2  // bad config_json or environment
	ErrBoot     int32 = -3  // the ranks could not meet or connect
	ErrPeer     int32 = -4  // a peer failed, or the ranks disagree
	ErrClosed   int32 = -5  // the communicator was freed
	ErrAborted  int32 = -6  // a rank called mr_abort
	ErrTimeout  int32 = -7  // mr_wait's timeout passed
	ErrTrunc    int32 = -8  // a received message was larger than the buffer
	ErrFork     int32 = -9  // called in a forked child
	ErrPanic    int32 = -10 // a bug in the library (recovered)
	ErrInternal int32 = -11 // anything else
)

// MaxMsg is the longest message written into an mr_error (its msg holds
// 1024 bytes with the NUL).
const MaxMsg = 1023

var codeText = map[int32]string{
	OK:          "success",
	ErrInvalid:  "invalid argument",
	ErrConfig:   "invalid configuration",
	ErrBoot:     "bootstrap failed",
	ErrPeer:     "peer failed or ranks disagree",
	ErrClosed:   "communicator freed",
	ErrAborted:  "job aborted",
	ErrTimeout:  "timed out",
	ErrTrunc:    "message truncated",
	ErrFork:     "called in a forked child",
	ErrPanic:    "internal panic",
	ErrInternal: "internal error",
}

// Strerror is mr_strerror's text for code ("unknown error code" for
// another value). The C library has its own copy of this table (it must
// work without entering Go); a test compares the two.
func Strerror(code int32) string {
	if s, ok := codeText[code]; ok {
		return s
	}
	return "unknown error code"
}

// phase tells Code how to read comm.ErrConfig: at start (init, prepare,
// connect) it is a configuration error, in later calls a bad argument.
type phase int

const (
	phaseCall phase = iota
	phaseStart
)

// Code maps an error of package comm (or multirail) onto an mr_code and a
// one-line message of at most MaxMsg bytes. nil is OK and "".
func Code(err error) (int32, string) { return codeAt(err, phaseCall) }

func codeAt(err error, ph phase) (int32, string) {
	if err == nil {
		return OK, ""
	}
	return classify(err, ph), Message(err.Error())
}

func classify(err error, ph phase) int32 {
	isConfig := errors.Is(err, comm.ErrConfig) || errors.Is(err, multirail.ErrConfig) || errors.Is(err, lossy.ErrConfig)
	if ph == phaseStart {
		switch {
		case isConfig:
			return ErrConfig // a bad token, interface selection, ...
		case errors.Is(err, comm.ErrBootstrap):
			return ErrBoot
		}
	}
	var pe *comm.PeerError
	switch {
	case errors.Is(err, comm.ErrAborted):
		return ErrAborted
	case errors.Is(err, comm.ErrClosed):
		return ErrClosed
	case errors.Is(err, comm.ErrTruncated):
		return ErrTrunc
	case errors.Is(err, comm.ErrMismatch), errors.As(err, &pe):
		return ErrPeer
	case errors.Is(err, errArg), errors.Is(err, comm.ErrRank), errors.Is(err, comm.ErrTag), isConfig:
		return ErrInvalid
	case errors.Is(err, comm.ErrBootstrap):
		return ErrBoot
	case errors.Is(err, context.DeadlineExceeded):
		return ErrTimeout
	}
	return ErrInternal
}

// Message makes s one line (newlines and tabs become spaces, runs of
// spaces one) of at most MaxMsg bytes, cut at a rune boundary.
func Message(s string) string {
	if strings.ContainsAny(s, "\r\n\t\x00") {
		s = strings.Join(strings.FieldsFunc(s, func(r rune) bool {
			return r == '\r' || r == '\n' || r == '\t' || r == 0
		}), " ")
	}
	if len(s) <= MaxMsg {
		return s
	}
	cut := MaxMsg
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// fail is a code with a formatted message.
func fail(c int32, format string, args ...any) (int32, string) {
	return c, Message(fmt.Sprintf(format, args...))
}

// recovered turns a panic into ErrPanic (use as `defer recovered(&code,
// &msg)`), with the panic value and the innermost frames in the message.
func recovered(c *int32, msg *string) {
	if r := recover(); r != nil {
		*c, *msg = panicCode(r)
	}
}

func panicCode(r any) (int32, string) {
	return fail(ErrPanic, "multirail: panic (a bug in the library, please report it): %v; %s", r, stackLine())
}

// stackLine is the goroutine's stack as one line ("file.go:12 < ..."),
// from the frame that panicked outwards, without the runtime's frames and
// this file's.
func stackLine() string {
	var out []string
	for _, l := range strings.Split(string(debug.Stack()), "\n") {
		l = strings.TrimSpace(l)
		if !strings.Contains(l, ".go:") || strings.Contains(l, "/src/runtime/") || strings.Contains(l, "capi/codes.go") {
			continue
		}
		if j := strings.Index(l, " +0x"); j >= 0 {
			l = l[:j]
		}
		if i := strings.LastIndex(l, "/"); i >= 0 {
			l = l[i+1:]
		}
		out = append(out, l)
		if len(out) == 6 {
			break
		}
	}
	return "at " + strings.Join(out, " < ")
}
