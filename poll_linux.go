package multirail

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// pollFD is one socket the poller watches.
type pollFD = unix.PollFd

func newPollFD(fd int) pollFD { return pollFD{Fd: int32(fd), Events: unix.POLLIN} }

// zeroTimeout makes ppoll(2) return at once.
var zeroTimeout unix.Timespec

// pollFDs polls fds without waiting and returns how many have something
// (data, end of stream, an error). Like the reader's polling read it goes
// through RawSyscall: it cannot block, and the runtime need not know.
func pollFDs(fds []pollFD) int {
	n, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)),
		uintptr(unsafe.Pointer(&zeroTimeout)), 0, 0, 0)
	if e != 0 {
		return 0
	}
	return int(n)
}

// osYield lets another thread of the machine have this core.
func osYield() { _, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
