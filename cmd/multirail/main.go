// Command multirail moves messages between hosts over every network path
// they share at once, and measures it.
//
//	multirail demo                       compare every scheduler on emulated rails
//	multirail bench --rails ... --sched  measure one or all schedulers
//	multirail serve / multirail send     run between two real hosts
//	multirail sim --scenario NAME|FILE   compare schedulers in the simulator
//	multirail lab up|down|status|load|bench  network-namespace lab (root)
package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/multirail/multirail"
	"github.com/spf13/cobra"
)

// usageError marks bad input: the CLI exits with status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "multirail: ") {
		msg = "multirail: " + msg
	}
	fmt.Fprintln(stderr, msg)
	// Bad input, on the command line or in the environment the library
	// reads (MULTIRAIL_TOKEN, MULTIRAIL_PLAINTEXT, ...), exits with 2.
	var ue usageError
	if errors.As(err, &ue) || errors.Is(err, multirail.ErrConfig) {
		return 2
	}
	return 1
}

type globals struct {
	verbose   bool
	plaintext bool
	insecure  bool
	stdout    io.Writer
	stderr    io.Writer
}

func (g *globals) logger() *slog.Logger {
	level := slog.LevelWarn
	if g.verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: level}))
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "multirail",
		Short:         "Move messages over every network path at once, and measure it",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentFlags().BoolVarP(&g.verbose, "verbose", "v", false, "log debug messages to stderr")
	root.PersistentFlags().BoolVar(&g.plaintext, "plaintext", false,
		"send frames in clear after the (still authenticated) handshake, on fabrics the job trusts: faster, but anyone on the path can read and alter the data; both ends must ask (sets "+multirail.PlaintextEnv+"=1 for this process and what it starts)")
	root.PersistentFlags().BoolVar(&g.insecure, "insecure", false,
		"accept a token shorter than 32 characters, or none, on a trusted network (logs a warning; sets "+multirail.InsecureEnv+"=1 for this process and what it starts)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if g.plaintext {
			if err := os.Setenv(multirail.PlaintextEnv, "1"); err != nil {
				return err
			}
		}
		if g.insecure {
			return os.Setenv(multirail.InsecureEnv, "1")
		}
		return nil
	}
	root.AddCommand(newBench(g), newServe(g), newSend(g), newDemo(g), newSim(g), newLab(g), newTrain(g), newRun(g), newOSU(g), newEnv(g), newToken(g), newTunnel(g), newCp(g))
	// Unknown subcommands and stray arguments are usage errors too.
	root.Args = func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usagef("unknown command %q (see multirail --help)", args[0])
		}
		return nil
	}
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	return root
}

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", cmd.Name(), args[0])
	}
	return nil
}
