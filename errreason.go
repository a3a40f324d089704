package multirail

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// Reasons a rail fails, for RailStats.ErrorsByReason and metrics.
const (
	ReasonStalled  = iota // no acknowledgement within Config.RailTimeout (a link that went down), or a frame stopped halfway
	ReasonReset           // the peer's end or the path reset the connection (ECONNRESET, EPIPE)
	ReasonClosed          // the peer's end closed the connection (EOF)
	ReasonTimeout         // a socket deadline passed (idle rail, handshake)
	ReasonProtocol        // the peer broke the protocol
	ReasonOther           // anything else (a refused dial, an unreachable network, ...)
	NumErrorReasons
)

// ErrorReasons names the reasons, indexed by the Reason constants: the
// values of the reason label of multirail_rail_errors_total.
var ErrorReasons = [NumErrorReasons]string{"stalled", "reset", "closed", "timeout", "protocol", "other"}

// ErrorReason classifies a rail's failure.
func ErrorReason(err error) int {
	var ne net.Error
	switch {
	case errors.Is(err, ErrRailStalled):
		return ReasonStalled
	case errors.Is(err, ErrProtocol) || isProtocol(err):
		return ReasonProtocol
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return ReasonReset
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return ReasonClosed
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return ReasonTimeout
	}
	return ReasonOther
}
