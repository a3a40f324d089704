package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/comm"
	"github.com/multirail/multirail/comm/launch"
	"github.com/multirail/multirail/comm/netif"
	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/sched"
	"github.com/spf13/cobra"
)

// envReport is what `multirail env` shows: what comm.Init would detect,
// without connecting to anything.
type envReport struct {
	// Detected is false when the launcher detection failed (Errors says
	// why); the fields up to Sources are then empty.
	Detected  bool   `json:"detected"`
	Launcher  string `json:"launcher"`
	Rank      int    `json:"rank"`
	Size      int    `json:"size"`
	LocalRank int    `json:"local_rank"` // -1: the launcher does not say
	LocalSize int    `json:"local_size"` // -1: the launcher does not say
	JobID     string `json:"job_id"`
	Rdzv      string `json:"rdzv"`
	// Serve is true when this process (rank 0) would serve the tcp
	// rendezvous itself.
	Serve bool   `json:"serve"`
	Host  string `json:"host"`
	// Sources are the launcher's variables detection read, in order.
	Sources []envVar `json:"sources"`
	// Settings are the MULTIRAIL_* variables comm.Init reads besides the
	// launcher's, where set (MULTIRAIL_TOKEN's value is never shown).
	Settings []envVar `json:"settings"`
	// IfName is the interface filter in effect (MULTIRAIL_IFNAME,
	// normalised); "" is the default policy.
	IfName     string     `json:"ifname"`
	Candidates []envIface `json:"candidates"`
	Skipped    []envSkip  `json:"skipped"`
	// Notes say how the rails will be made (emulated, loopback).
	Notes []string `json:"notes"`
	// Errors are what would make comm.Init fail before connecting.
	Errors []string `json:"errors"`
}

type envVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type envIface struct {
	Name      string   `json:"name"`
	Addrs     []string `json:"addrs"`
	SpeedMbps int      `json:"speed_mbps"`
	Loopback  bool     `json:"loopback,omitempty"`
}

type envSkip struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// envSettings are the variables comm.Init reads besides the launcher's.
var envSettings = []string{comm.EnvIfName, comm.EnvEmu, comm.EnvEmuLoad, comm.EnvAlgo, comm.EnvSched, comm.EnvTimeout, comm.EnvBusyPoll, MetricsAddrEnv, multirail.TokenEnv}

// secretVar reports whether a variable's value must not be printed.
func secretVar(name string) bool {
	u := strings.ToUpper(name)
	return strings.Contains(u, "TOKEN") || strings.Contains(u, "SECRET") || strings.Contains(u, "PASSWORD")
}

func shownValue(name, v string) string {
	if secretVar(name) {
		return "(set, not shown)"
	}
	return v
}

// buildEnvReport works out the report from an os.Environ()-style
// environment, the host name and the host's interfaces (ifsErr: why they
// could not be listed). It does no I/O.
func buildEnvReport(environ []string, host string, ifs []netif.Iface, ifsErr error) envReport {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	rep := envReport{Host: host, LocalRank: launch.Unknown, LocalSize: launch.Unknown,
		Sources: []envVar{}, Settings: []envVar{}, Candidates: []envIface{}, Skipped: []envSkip{}, Notes: []string{}, Errors: []string{}}
	info, err := launch.DetectEnv(environ, host)
	if err != nil {
		rep.Errors = append(rep.Errors, err.Error())
	} else {
		rep.Detected = true
		rep.Launcher, rep.Rank, rep.Size = info.Launcher, info.Rank, info.Size
		rep.LocalRank, rep.LocalSize = info.LocalRank, info.LocalSize
		rep.JobID, rep.Rdzv, rep.Serve = info.JobID, info.Rdzv, info.Serve
		for _, k := range info.Sources {
			rep.Sources = append(rep.Sources, envVar{k, shownValue(k, env[k])})
		}
	}
	for _, k := range envSettings {
		if v, ok := getenv(k); ok {
			rep.Settings = append(rep.Settings, envVar{k, shownValue(k, v)})
		}
	}
	// The settings as comm.Init parses them.
	if _, err := comm.ConfigFromEnv(comm.Config{}, getenv); err != nil {
		rep.Errors = append(rep.Errors, err.Error())
	}
	if v, ok := getenv(comm.EnvSched); ok && v != "" && !slices.Contains(sched.Names(), v) {
		rep.Errors = append(rep.Errors, fmt.Sprintf("%s=%q: unknown scheduler; allowed: %s", comm.EnvSched, v, strings.Join(sched.Names(), ", ")))
	}
	emulated := false
	if v, ok := getenv(comm.EnvEmu); ok && v != "" {
		if msg := checkEmu(v); msg != "" {
			rep.Errors = append(rep.Errors, msg)
		} else {
			emulated = true
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s is set: every pair of ranks gets these emulated rails (all ranks on one host); the interfaces below are not used", comm.EnvEmu))
		}
	}
	spec := env[comm.EnvIfName]
	filter, err := netif.ParseFilter(spec)
	if err != nil {
		rep.Errors = append(rep.Errors, err.Error())
		rep.Notes = append(rep.Notes, "the interfaces below are selected by the default policy, since "+comm.EnvIfName+" does not parse")
	}
	rep.IfName = filter.String()
	if !emulated {
		rep.Notes = append(rep.Notes, "ranks on one host connect over loopback; ranks on different hosts pair the candidates below that share a subnet (one routed rail if none do)")
	}
	if ifsErr != nil {
		rep.Errors = append(rep.Errors, ifsErr.Error())
		return rep
	}
	cands, skipped := netif.Candidates(ifs, filter)
	for _, c := range cands {
		e := envIface{Name: c.Name, Addrs: []string{}, SpeedMbps: c.SpeedMbps, Loopback: c.Loopback}
		for _, a := range c.Addrs {
			e.Addrs = append(e.Addrs, a.String())
		}
		rep.Candidates = append(rep.Candidates, e)
	}
	for _, s := range skipped {
		rep.Skipped = append(rep.Skipped, envSkip{s.Name, s.Reason})
	}
	if len(cands) == 0 && !emulated {
		rep.Notes = append(rep.Notes, "no candidate interface: ranks on different hosts would get one routed rail to the address of the peer's host name")
	}
	return rep
}

// checkEmu checks MULTIRAIL_EMU as comm.Init would; "" if it is fine.
func checkEmu(v string) string {
	specs, err := emu.ParseSpecs(v)
	if err != nil {
		return fmt.Sprintf("%s=%q: %v", comm.EnvEmu, v, err)
	}
	for _, s := range specs {
		if s.Kind != emu.KindEmu {
			return fmt.Sprintf("%s=%q: rail %q is not emulated; allowed: emu:RATE[/DELAY] specs only", comm.EnvEmu, v, s.String())
		}
	}
	if len(specs) > multirail.MaxRails {
		return fmt.Sprintf("%s=%q has %d rails; allowed: 1..%d", comm.EnvEmu, v, len(specs), multirail.MaxRails)
	}
	return ""
}

func newEnv(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Show what the communicator's start-up detects here: launcher, rank, rendezvous, interfaces",
		Long: `env shows what comm.Init (and so "multirail osu" and every comm program) would
detect in this process, without connecting to anything: the launcher (multirail
run, torchrun, env://, Open MPI, MPICH, Slurm, Kubernetes), rank and size,
local rank and size (-1 when the launcher does not say), job id, the
rendezvous URL and whether this rank would serve it, the environment
variables the detection used, the MULTIRAIL_* settings (IFNAME, EMU, ALGO,
SCHED, TIMEOUT; MULTIRAIL_TOKEN only as "set"), and the candidate network
interfaces under MULTIRAIL_IFNAME with the reason every other interface is
skipped. Run it under the launcher, as the program would be, when start-up
hangs or picks the wrong interfaces, e.g. "srun -n 2 multirail env" or
"mpirun -n 2 multirail env".

A detection failure is not fatal here: env prints it and still lists the
interfaces. --json prints one object: {"detected", "launcher", "rank",
"size", "local_rank", "local_size", "job_id", "rdzv", "serve", "host",
"sources": [{"name", "value"}], "settings": [{"name", "value"}], "ifname",
"candidates": [{"name", "addrs", "speed_mbps"}], "skipped": [{"name",
"reason"}], "notes", "errors"}.

Exit status: 0 when comm.Init would get past detection; 1 when it would fail
before connecting (no launcher detected, a bad variable, a bad
MULTIRAIL_IFNAME/EMU/ALGO/SCHED/TIMEOUT), after printing everything; 2 for
bad input.`,
		Args: noArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			host, _ := os.Hostname()
			ifs, ifsErr := netif.Local()
			rep := buildEnvReport(os.Environ(), host, ifs, ifsErr)
			if asJSON {
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				printEnvReport(g.stdout, rep)
			}
			switch len(rep.Errors) {
			case 0:
				return nil
			case 1:
				return fmt.Errorf("env: comm.Init would fail here: %s", rep.Errors[0])
			}
			return fmt.Errorf("env: comm.Init would fail here: %d problems (listed above)", len(rep.Errors))
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func printEnvReport(w io.Writer, rep envReport) {
	row := func(k, format string, args ...any) {
		fmt.Fprintf(w, "%-12s %s\n", k, fmt.Sprintf(format, args...))
	}
	if rep.Detected {
		row("launcher", "%s", rep.Launcher)
		row("rank", "%d of %d", rep.Rank, rep.Size)
		if rep.LocalRank == launch.Unknown && rep.LocalSize == launch.Unknown {
			row("local rank", "unknown (the launcher does not say; the rendezvous works it out)")
		} else {
			row("local rank", "%s of %s", knownInt(rep.LocalRank), knownInt(rep.LocalSize))
		}
		row("job id", "%s", orDash(rep.JobID))
		row("rendezvous", "%s", describeRdzv(rep))
	} else {
		row("launcher", "none detected (see the errors below)")
	}
	row("host", "%s", rep.Host)
	if len(rep.Sources) > 0 {
		fmt.Fprintln(w, "variables used:")
		for _, v := range rep.Sources {
			fmt.Fprintf(w, "  %s=%s\n", v.Name, v.Value)
		}
	}
	if len(rep.Settings) > 0 {
		fmt.Fprintln(w, "settings:")
		for _, v := range rep.Settings {
			fmt.Fprintf(w, "  %s=%s\n", v.Name, v.Value)
		}
	}
	filter := comm.EnvIfName + " unset, default policy: no loopback, no virtual bridges, no link-local addresses"
	if rep.IfName != "" {
		filter = comm.EnvIfName + "=" + rep.IfName
	}
	fmt.Fprintf(w, "interfaces (%s):\n", filter)
	for _, c := range rep.Candidates {
		speed := ""
		if c.SpeedMbps > 0 {
			speed = fmt.Sprintf(" (%d Mbit/s)", c.SpeedMbps)
		}
		fmt.Fprintf(w, "  candidate  %-12s %s%s\n", c.Name, strings.Join(c.Addrs, " "), speed)
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(w, "  skipped    %-12s %s\n", s.Name, s.Reason)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, e := range rep.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
}

func knownInt(v int) string {
	if v == launch.Unknown {
		return "unknown"
	}
	return fmt.Sprint(v)
}

func orDash(s string) string {
	if s == "" {
		return "- (none given)"
	}
	return s
}

func describeRdzv(rep envReport) string {
	switch {
	case rep.Rdzv == "":
		return "none (a lone rank needs no rendezvous)"
	case strings.HasPrefix(rep.Rdzv, "file://"):
		return rep.Rdzv + " (a directory every rank writes its card to; no server)"
	case rep.Serve:
		return rep.Rdzv + " (this rank serves it)"
	case rep.Rank == 0:
		return rep.Rdzv + " (served by another process, e.g. multirail run: MULTIRAIL_RDZV_SERVE=0)"
	}
	return rep.Rdzv + " (served by rank 0)"
}
