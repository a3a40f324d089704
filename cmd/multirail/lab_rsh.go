package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/multirail/multirail/lab/labbench"
	"github.com/spf13/cobra"
)

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
			host, command, err := labbench.ParseRsh(args)
			var re *labbench.RshError
			if errors.As(err, &re) {
				return usageError{errors.New(re.Msg)}
			}
			ip, err := exec.LookPath("ip")
			if err != nil {
				return fmt.Errorf("lab rsh: %w (install iproute2)", err)
			}
			return syscall.Exec(ip, labbench.RshArgv(ip, host, command), os.Environ())
		},
	}
}
