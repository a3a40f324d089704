package labbench

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrRsh is wrapped by an RshError.
var ErrRsh = errors.New("labbench: rsh")

// RshError is bad arguments to the rsh agent; Msg says what, starting
// with "lab rsh".
type RshError struct{ Msg string }

// Error implements error.
func (e *RshError) Error() string { return "labbench: " + e.Msg }

// Unwrap makes errors.Is find the sentinel (and the cause, if any).
func (e *RshError) Unwrap() error { return ErrRsh }

// sshValueOpts are the ssh options that take a value.
const sshValueOpts = "BbcDEeFIiJLlmOoPpQRSWw"

var hostRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,31}$`)

// ParseRsh splits ssh-like arguments, "[options] HOST COMMAND...", as Open
// MPI's rsh launcher passes them to its plm_rsh_agent.
func ParseRsh(args []string) (host string, command []string, err error) {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") && len(args[i]) > 1 {
		opt := args[i]
		i++
		if opt == "--" {
			break
		}
		// -p 22 takes the next word; -p22 and flag clusters like -xT do not.
		if len(opt) == 2 && strings.ContainsRune(sshValueOpts, rune(opt[1])) {
			i++
		}
	}
	if i >= len(args) {
		return "", nil, &RshError{"lab rsh: no host: want [options] HOST COMMAND..."}
	}
	host, command = args[i], args[i+1:]
	if !hostRE.MatchString(host) {
		return "", nil, &RshError{fmt.Sprintf("lab rsh: host %q: want a lab namespace name (a letter, then letters, digits or '-')", host)}
	}
	if len(command) == 0 {
		return "", nil, &RshError{fmt.Sprintf("lab rsh %s: no command (an interactive login is not supported)", host)}
	}
	return host, command, nil
}

// RshArgv is what the rsh agent executes: the command, joined with spaces
// into one shell command as ssh does, run by sh in namespace host inside a
// UTS namespace whose host name is host (so that every ORTE daemon has a
// node name of its own). ip is the path of iproute2's ip.
func RshArgv(ip, host string, command []string) []string {
	return []string{ip, "netns", "exec", host, "unshare", "--uts", "sh", "-c", `hostname "$0" && exec sh -c "$1"`, host, strings.Join(command, " ")}
}
