package multirail

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/multirail/multirail/internal/wire"
)

func TestErrorReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("%w: no acknowledgement for 800ms", ErrRailStalled), ReasonStalled},
		{&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, ReasonReset},
		{&net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)}, ReasonReset},
		{fmt.Errorf("rail read: %w", io.EOF), ReasonClosed},
		{io.ErrUnexpectedEOF, ReasonClosed},
		{&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, ReasonTimeout},
		{fmt.Errorf("%w: bad frame", wire.ErrMalformed), ReasonProtocol},
		{fmt.Errorf("%w: x", ErrProtocol), ReasonProtocol},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, ReasonOther},
		{errors.New("something"), ReasonOther},
	} {
		if got := ErrorReason(tc.err); got != tc.want {
			t.Errorf("ErrorReason(%v) = %s, want %s", tc.err, ErrorReasons[got], ErrorReasons[tc.want])
		}
	}
}
