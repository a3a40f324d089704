package capi

import (
	"fmt"
	"os"
	"sync/atomic"
)

// The fork check. A process forked from the one that loaded the library
// must not run the Go runtime (golang/go#15538: the child has one thread,
// the runtime's other threads are gone, and the first call that needs
// them hangs). The C functions of capi/lib compare getpid() with the pid
// their constructor recorded before they enter Go; this is the same check
// on the Go side (a second line of defence, and the logic the tests can
// reach, with an injected pid source).

var (
	loadPid   = int64(os.Getpid()) // the pid of the process that loaded the package
	pidSource atomic.Pointer[func() int]
)

func init() {
	f := os.Getpid
	pidSource.Store(&f)
}

// SetPidSource replaces os.Getpid in the fork check and returns a function
// that restores the previous source (tests).
func SetPidSource(f func() int) (restore func()) {
	old := pidSource.Swap(&f)
	return func() { pidSource.Store(old) }
}

// ForkMessage is the message of ErrFork (the C side writes the same).
func ForkMessage(pid, loaded int64) string {
	return fmt.Sprintf("multirail: called in a forked child (pid %d; the library was loaded by pid %d): the Go runtime does not survive fork(), so the library refuses every call in a child; use it in the parent only, or exec a new program in the child", pid, loaded)
}

// forked reports ErrFork when the current pid is not the loader's.
func forked() (int32, string, bool) {
	if pid := int64((*pidSource.Load())()); pid != loadPid {
		return ErrFork, ForkMessage(pid, loadPid), true
	}
	return OK, "", false
}
