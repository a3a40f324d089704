//go:build !unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup does nothing where there are no process groups: a
// signal reaches the rank itself only.
func setProcessGroup(*exec.Cmd) {}

// killGroup sends s to p (killing it for SIGKILL or where signals other
// than a kill cannot be sent).
func killGroup(p *os.Process, s syscall.Signal) {
	if s == syscall.SIGKILL || p.Signal(s) != nil {
		_ = p.Kill()
	}
}

func signalName(s syscall.Signal) string { return s.String() }
