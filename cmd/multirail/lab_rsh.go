package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// sshValueOpts are the ssh options that take a value.
const sshValueOpts = "BbcDEeFIiJLlmOoPpQRSWw"

var hostRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,31}$`)

// parseRsh splits ssh-like arguments, "[options] HOST COMMAND...", as Open
// MPI's rsh launcher passes them to its plm_rsh_agent.
func parseRsh(args []string) (host string, command []string, err error) {
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
		return "", nil, usagef("lab rsh: no host: want [options] HOST COMMAND...")
	}
	host, command = args[i], args[i+1:]
	if !hostRE.MatchString(host) {
		return "", nil, usagef("lab rsh: host %q: want a lab namespace name (a letter, then letters, digits or '-')", host)
	}
	if len(command) == 0 {
		return "", nil, usagef("lab rsh %s: no command (an interactive login is not supported)", host)
	}
	return host, command, nil
}

// rshArgv is what lab rsh executes: the command, joined with spaces into
// one shell command as ssh does, run by sh in namespace host inside a UTS
// namespace whose host name is host (so that every ORTE daemon has a node
// name of its own).
func rshArgv(ip, host string, command []string) []string {
	return []string{ip, "netns", "exec", host, "unshare", "--uts", "sh", "-c", `hostname "$0" && exec sh -c "$1"`, host, strings.Join(command, " ")}
}

func newLabRsh(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rsh [options] HOST COMMAND...",
		Short: "Open MPI's plm_rsh_agent for the lab: run COMMAND in namespace HOST (as ssh would on a host)",
		Long: `rsh takes ssh-like arguments and runs COMMAND in network namespace HOST,
in a private UTS namespace whose host name is HOST:
  ip netns exec HOST unshare --uts sh -c 'hostname HOST && exec sh -c "COMMAND"'
Use it as mpirun --mca plm_rsh_agent "multirail lab rsh".`,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			host, command, err := parseRsh(args)
			if err != nil {
				return err
			}
			ip, err := exec.LookPath("ip")
			if err != nil {
				return fmt.Errorf("lab rsh: %w (install iproute2)", err)
			}
			argv := rshArgv(ip, host, command)
			return syscall.Exec(ip, argv, os.Environ())
		},
	}
}
