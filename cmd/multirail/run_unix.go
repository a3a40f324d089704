//go:build unix

package main

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// setProcessGroup starts cmd in a process group of its own, so that a
// signal reaches the rank's children too.
func setProcessGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup sends s to p's process group.
func killGroup(p *os.Process, s syscall.Signal) { _ = syscall.Kill(-p.Pid, s) }

func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}
