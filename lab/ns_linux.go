//go:build linux

package lab

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Run runs fn on a fresh OS thread that has joined side's network
// namespace (0 = A, 1 = B) and returns fn's error. Sockets that fn
// creates belong to that namespace for good and may be used from any
// goroutine afterwards; goroutines that fn starts do not run in the
// namespace. The thread is not switched back: it ends with fn.
func (l *Lab) Run(side int, fn func() error) error {
	return runIn(filepath.Join(netnsDir, l.NS(side)), fn)
}

func runIn(path string, fn func() error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	defer f.Close()
	errc := make(chan error, 1)
	go func() {
		// Locked and never unlocked: when this goroutine returns, the
		// runtime ends the thread instead of reusing it elsewhere.
		runtime.LockOSThread()
		if _, _, e := syscall.RawSyscall(unix.SYS_SETNS, f.Fd(), unix.CLONE_NEWNET, 0); e != 0 {
			errc <- fmt.Errorf("lab: setns %s: %w", path, e)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// netnsCheck creates a network namespace on a thread of its own, which
// then ends: nothing is left behind.
func netnsCheck() error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // the thread dies with this goroutine
		errc <- unix.Unshare(unix.CLONE_NEWNET)
	}()
	return <-errc
}

// lockFile takes an exclusive lock on path (created if needed), without
// waiting when wait is false. On success it writes this process's pid
// into the file.
func lockFile(path string, wait bool) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	how := unix.LOCK_EX
	if !wait {
		how |= unix.LOCK_NB
	}
	if err := unix.Flock(int(f.Fd()), how); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: held by pid %s", errPrefixBusy, strings.TrimSpace(string(b)))
		}
		return nil, fmt.Errorf("lab: lock %s: %w", path, err)
	}
	// The holder before us may have removed the file (unlockFile) after
	// we opened it: then our lock is on a file nobody else will see.
	var held, now unix.Stat_t
	if unix.Fstat(int(f.Fd()), &held) != nil || unix.Stat(path, &now) != nil || held.Ino != now.Ino || held.Dev != now.Dev {
		f.Close()
		return lockFile(path, wait)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

// lockPrefix holds prefix for this process until the file is closed: a
// second Up or a Teardown of the same prefix elsewhere fails instead of
// pulling the namespaces from under a running lab.
func lockPrefix(prefix string) (*os.File, error) {
	f, err := lockFile(filepath.Join(StateDir, prefix+".lock"), false)
	if errors.Is(err, errPrefixBusy) {
		return nil, fmt.Errorf("lab: a lab with prefix %q is in use by a running process (%v); stop it or use another prefix", prefix, err)
	}
	return f, err
}

// lockGlobal serialises changes to the init namespace's allowed
// congestion controls among labs.
func lockGlobal() (unlock func(), err error) {
	f, err := lockFile(filepath.Join(StateDir, ".global.lock"), true)
	if err != nil {
		return nil, err
	}
	return func() { f.Close() }, nil
}

// unlockFile removes a lock file taken with lockFile and releases it.
func unlockFile(f *os.File) error {
	_ = os.Remove(f.Name())
	return f.Close()
}

// killProcesses ends every process in ns (but this one): SIGTERM, then
// SIGKILL for those still there after a second.
func killProcesses(ns string, log *slog.Logger) error {
	pids, err := NSPids(ns)
	if err != nil || len(pids) == 0 {
		return err
	}
	log.Debug("lab: killing processes left in the namespace", "ns", ns, "pids", pids)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGTERM)
	}
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		left, err := NSPids(ns)
		if err != nil || len(left) == 0 {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	left, _ := NSPids(ns)
	for _, p := range left {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	return nil
}
