package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/multirail/multirail/lab"
	"github.com/multirail/multirail/units"
	"github.com/spf13/cobra"
)

// geteuid is os.Geteuid, replaceable in tests.
var geteuid = os.Geteuid

// needRoot fails unless the process is root: the lab makes namespaces,
// qdiscs and sysctls.
func needRoot(cmd string) error {
	if uid := geteuid(); uid != 0 {
		return fmt.Errorf("lab %s needs root (it creates network namespaces, tc qdiscs and sysctls); running as uid %d: try sudo", cmd, uid)
	}
	return nil
}

// parseRates parses --rates: comma-separated rates such as 200mbit, and
// checks them against the lab's limits.
func parseRates(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		allowed := fmt.Sprintf("allowed a rate like 200mbit or 1.5gbit (units bit, kbit, mbit, gbit; decimal, bits per second), %s..%s per rail",
			units.FormatRate(lab.MinRateBps), units.FormatRate(lab.MaxRateBps))
		r, err := units.ParseRate(f)
		var ue *units.Error
		if errors.As(err, &ue) {
			return nil, usagef("--rates: %q is not a rate (%s): %s", f, ue.Reason, allowed)
		}
		if r < lab.MinRateBps || r > lab.MaxRateBps {
			return nil, usagef("--rates: %q is out of range: %s", f, allowed)
		}
		out = append(out, r)
	}
	if len(out) > lab.MaxRails {
		return nil, usagef("--rates %q has %d rails: allowed 1..%d", s, len(out), lab.MaxRails)
	}
	return out, nil
}

// labSignals returns a context that ends on SIGINT or SIGTERM.
func labSignals(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx == nil {
		ctx = context.Background()
	}
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

func newLab(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Build a multi-rail network lab out of Linux network namespaces and measure in it (root)",
		Long: `lab builds two network namespaces joined by several veth "rails", each shaped
by tbf to a rate, and measures multirail against one TCP stream per rail,
Linux MPTCP and Open MPI on them. It needs root. See docs/lab.md.

  multirail lab up [--rates 200mbit,100mbit,50mbit]   build and leave up
  multirail lab status                                 what is up, counters
  multirail lab load --rail 0 --duration 10s           a competing TCP stream
  multirail lab down                                   remove it
  multirail lab bench                                  the whole comparison`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q for lab (see multirail lab --help)", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newLabUp(g), newLabDown(g), newLabStatus(g), newLabLoad(g), newLabBench(g),
		newLabAgent(g), newLabRsh(g))
	return cmd
}

type labUpFlags struct {
	rates, cc, prefix string
	hosts             int
	tbfLatency        time.Duration
	offloads, dryRun  bool
}

func (f *labUpFlags) config(g *globals) (lab.Config, error) {
	rates, err := parseRates(f.rates)
	if err != nil {
		return lab.Config{}, err
	}
	cfg := lab.Config{Rates: rates, Hosts: f.hosts, Prefix: f.prefix, CC: f.cc, TBFLatency: f.tbfLatency, Offloads: f.offloads, Logger: g.logger()}
	if _, err := cfg.Normalized(); err != nil {
		return cfg, usageError{labFlagError(err)}
	}
	return cfg, nil
}

// labFlagError names the flag of a lab.Config error.
func labFlagError(err error) error {
	msg := strings.TrimPrefix(err.Error(), lab.ErrConfig.Error()+": ")
	for field, flag := range map[string]string{"Config.Prefix": "--prefix", "Config.CC": "--cc", "Config.TBFLatency": "--tbf-latency", "Config.Rates": "--rates", "Config.Hosts": "--hosts"} {
		msg = strings.Replace(msg, field, flag, 1)
	}
	return errors.New(msg)
}

func newLabUp(g *globals) *cobra.Command {
	f := &labUpFlags{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Build the lab and leave it up",
		Long: `up builds namespaces <prefix>A (sender) and <prefix>B (receiver) joined by one
veth pair per rate in --rates (rail0, rail1, ... with 10.10.<i+1>.1 and .2),
each shaped by tbf on both ends, plus an unshaped control link (10.10.99.1/.2).

--hosts N (3..8) builds a cluster instead: hosts <prefix>h0..h<N-1>, each
with one NIC per rail (rail0, rail1, ... at 10.10.<i+1>.<host+1>) plugged
into that rail's switch (bridge br<i> in namespace <prefix>sw), shaped by tbf
on the host's end and on the switch's end, and a control NIC (ctl,
10.10.99.<host+1>) on an unshaped switch. Every host resolves every host's
name to its control address, so Open MPI runs across them with
  --mca plm_rsh_agent "multirail lab rsh" --host <prefix>h0:1,<prefix>h1:1,...

A lab with the same prefix that is up already is replaced. --dry-run prints
the commands instead.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config(g)
			if err != nil {
				return err
			}
			if f.dryRun {
				norm, _ := cfg.Normalized()
				for _, s := range lab.Plan(norm) {
					fmt.Fprintln(g.stdout, s.String())
				}
				return nil
			}
			if err := needRoot("up"); err != nil {
				return err
			}
			ctx, stop := labSignals(cmd.Context())
			defer stop()
			if lab.Exists(cfg.Prefix) {
				fmt.Fprintf(g.stderr, "multirail: replacing the lab %q that is up\n", cfg.Prefix)
			}
			l, err := lab.Up(ctx, cfg)
			if err != nil {
				return err
			}
			printLab(g.stdout, l)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.rates, "rates", "200mbit,100mbit,50mbit", "rail rates, comma-separated (1..8 rails, 1mbit..10gbit each)")
	fl.IntVar(&f.hosts, "hosts", lab.MinHosts, fmt.Sprintf("number of hosts, %d..%d: 2 joins two namespaces directly, more build a switch per rail", lab.MinHosts, lab.MaxHosts))
	fl.StringVar(&f.cc, "cc", lab.DefaultCC, "TCP congestion control in every host's namespace")
	fl.StringVar(&f.prefix, "prefix", lab.DefaultPrefix, "namespace prefix: namespaces <prefix>A and <prefix>B (a cluster: <prefix>h0.. and <prefix>sw)")
	fl.DurationVar(&f.tbfLatency, "tbf-latency", lab.DefaultTBFLatency, "tbf queue bound (1ms..1s)")
	fl.BoolVar(&f.offloads, "offloads", false, "keep TSO/GSO/GRO on the rails (default: off, so tbf shapes MTU-sized frames)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the commands up would run, and do nothing")
	return cmd
}

// printLab describes a lab that is up.
func printLab(w io.Writer, l *lab.Lab) {
	if l.Hosts() > lab.MinHosts {
		printCluster(w, l)
		return
	}
	cfg := l.Config()
	fmt.Fprintf(w, "lab %q is up: namespaces %s (sender) and %s (receiver), cc %s, tbf latency %v, offloads %s\n",
		cfg.Prefix, l.NS(0), l.NS(1), cfg.CC, cfg.TBFLatency, map[bool]string{true: "on", false: "off"}[cfg.Offloads])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "link\trate\ttbf burst\tTCP ceiling\t"+l.NS(0)+"\t"+l.NS(1))
	var sum float64
	for i, r := range cfg.Rates {
		sum += r
		fmt.Fprintf(tw, "%s\t%s\t%d B\t%s Mbit/s\t%s\t%s\n", lab.RailDev(i), units.FormatRate(r), lab.Burst(r), mbit(lab.GoodputCeiling(r)), l.RailIP(0, i), l.RailIP(1, i))
	}
	fmt.Fprintf(tw, "%s\tunshaped\t-\t-\t%s\t%s\n", lab.CtlDev, l.CtlIP(0), l.CtlIP(1))
	tw.Flush()
	fmt.Fprintf(w, "sum of rates %s Mbit/s, TCP goodput ceiling %s Mbit/s\n", mbit(sum), mbit(lab.GoodputCeiling(sum)))
	if l.Rails() > 1 {
		fmt.Fprintf(w, "MPTCP: %s announces rails 1..%d; connect to %s to get one subflow per rail\n", l.NS(1), l.Rails()-1, l.RailIP(1, 0))
	}
	fmt.Fprintf(w, "run commands with: ip netns exec %s CMD; remove with: multirail lab down --prefix %s\n", l.NS(0), cfg.Prefix)
}

// printCluster describes a cluster that is up.
func printCluster(w io.Writer, l *lab.Lab) {
	cfg := l.Config()
	hosts := l.HostNames()
	fmt.Fprintf(w, "lab %q is up: %d hosts %s, switches in %s, cc %s, tbf latency %v, offloads %s\n",
		cfg.Prefix, len(hosts), strings.Join(hosts, " "), l.SwitchNS(), cfg.CC, cfg.TBFLatency, map[bool]string{true: "on", false: "off"}[cfg.Offloads])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "link\tswitch\trate\ttbf burst\tTCP ceiling\t"+strings.Join(hosts, "\t"))
	addrs := func(ip func(h int) string) string {
		var a []string
		for h := range hosts {
			a = append(a, ip(h))
		}
		return strings.Join(a, "\t")
	}
	var sum float64
	for i, r := range cfg.Rates {
		sum += r
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d B\t%s Mbit/s\t%s\n", lab.RailDev(i), lab.Bridge(i), units.FormatRate(r), lab.Burst(r),
			mbit(lab.GoodputCeiling(r)), addrs(func(h int) string { return l.RailIP(h, i) }))
	}
	fmt.Fprintf(tw, "%s\t%s\tunshaped\t-\t-\t%s\n", lab.CtlDev, lab.Bridge(-1), addrs(l.CtlIP))
	tw.Flush()
	fmt.Fprintf(w, "per host, each direction: sum of rates %s Mbit/s, TCP goodput ceiling %s Mbit/s\n", mbit(sum), mbit(lab.GoodputCeiling(sum)))
	fmt.Fprintf(w, "run commands with: ip netns exec %s CMD; Open MPI: mpirun --mca plm_rsh_agent \"multirail lab rsh\" --host %s:1,...; remove with: multirail lab down --prefix %s\n",
		hosts[0], hosts[0], cfg.Prefix)
}

func newLabDown(g *globals) *cobra.Command {
	var prefix string
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Remove the lab (namespaces, links, hosts files, sysctl changes)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needRoot("down"); err != nil {
				return err
			}
			if !lab.Exists(prefix) {
				fmt.Fprintf(g.stdout, "no lab with prefix %q is up\n", prefix)
				return nil
			}
			if err := lab.Teardown(prefix, g.logger()); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "lab %q removed\n", prefix)
			return nil
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", lab.DefaultPrefix, "namespace prefix of the lab")
	return cmd
}

func newLabLoad(g *globals) *cobra.Command {
	var (
		prefix   string
		rail     int
		duration time.Duration
		jsonOut  bool
		tool     string
	)
	cmd := &cobra.Command{
		Use:   "load",
		Short: "Run one competing TCP stream over a rail of the lab that is up",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if duration < 100*time.Millisecond || duration > 24*time.Hour {
				return usagef("--duration %v is out of range: allowed 100ms..24h", duration)
			}
			if tool != "" && tool != lab.ToolIperf3 && tool != lab.ToolGo {
				return usagef("--tool %q: unknown tool (allowed: %s)", tool, strings.Join(lab.Tools(), ", "))
			}
			if err := needRoot("load"); err != nil {
				return err
			}
			l, err := lab.Open(prefix, g.logger())
			if err != nil {
				return err
			}
			if rail < 0 || rail >= l.Rails() {
				return usagef("--rail %d is out of range: the lab has rails 0..%d", rail, l.Rails()-1)
			}
			ctx, stop := labSignals(cmd.Context())
			defer stop()
			tool, note, err := lab.ChooseTool(tool, lab.Iperf3Available())
			if err != nil {
				return fmt.Errorf("--tool iperf3 cannot run here: %v", err)
			} else if note != "" {
				fmt.Fprintf(g.stderr, "multirail: %s\n", note)
			}
			s, err := l.LoadWith(ctx, tool, rail, 0, duration)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stderr, "multirail: TCP stream (%s) %s -> %s on %s for %v\n", tool, l.RailIP(0, rail), l.RailIP(1, rail), lab.RailDev(rail), duration)
			res, err := s.Wait() // Ctrl-C ends it early through ctx
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSON(g.stdout, map[string]any{
					"rail": rail, "rate_bps": l.Rate(rail), "duration_s": res.Duration.Seconds(), "bytes": res.Bytes,
					"goodput_bps": res.GoodputBps, "ceiling_bps": lab.GoodputCeiling(l.Rate(rail)), "tool": tool,
				})
			}
			fmt.Fprintf(g.stdout, "%s: %s Mbit/s over %v (%d bytes; rail rate %s, TCP ceiling %s Mbit/s)\n",
				lab.RailDev(rail), mbit(res.GoodputBps), res.Duration.Round(time.Millisecond), res.Bytes,
				units.FormatRate(l.Rate(rail)), mbit(lab.GoodputCeiling(l.Rate(rail))))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&prefix, "prefix", lab.DefaultPrefix, "namespace prefix of the lab")
	fl.IntVar(&rail, "rail", 0, "rail to load")
	fl.DurationVar(&duration, "duration", 10*time.Second, "how long the stream sends")
	fl.BoolVar(&jsonOut, "json", false, "print one JSON object on stdout")
	fl.StringVar(&tool, "tool", "", "what makes the stream: iperf3 or go (default: iperf3 when it is on PATH, else go)")
	return cmd
}

// labStatus is `lab status --json`.
type labStatus struct {
	Labs []labStatusLab `json:"labs"`
}

type labStatusLab struct {
	Prefix     string          `json:"prefix"`
	Hosts      int             `json:"hosts"`
	Namespaces []string        `json:"namespaces"`
	Switch     string          `json:"switch,omitempty"`
	CC         string          `json:"cc"`
	Processes  map[string]int  `json:"processes"`
	Rails      []labStatusRail `json:"rails"`
	MPTCP      map[string]any  `json:"mptcp"`
	Error      string          `json:"error,omitempty"`
}

// labStatusRail is one rail: per host (in Namespaces' order) its address
// and whether its NIC is up, and the counters of the tbf that shapes what
// each host sends (Qdisc, by namespace) and, in a cluster, of the switch
// port's tbf that shapes what it receives (SwitchQdisc, by namespace).
type labStatusRail struct {
	Dev         string               `json:"dev"`
	RateBps     float64              `json:"rate_bps"`
	Addrs       []string             `json:"addrs"`
	Up          []bool               `json:"up"`
	Qdisc       map[string]lab.Qdisc `json:"qdisc"`
	SwitchQdisc map[string]lab.Qdisc `json:"switch_qdisc,omitempty"`
}

func newLabStatus(g *globals) *cobra.Command {
	var (
		prefix  string
		jsonOut bool
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the labs that are up: namespaces, rails, qdisc counters, MPTCP endpoints",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needRoot("status"); err != nil {
				return err
			}
			prefixes := lab.Prefixes()
			if prefix != "" {
				prefixes = []string{prefix}
			}
			var st labStatus
			for _, p := range prefixes {
				st.Labs = append(st.Labs, statusOf(p, g))
			}
			if jsonOut {
				if st.Labs == nil {
					st.Labs = []labStatusLab{}
				}
				return writeJSON(g.stdout, st)
			}
			if len(st.Labs) == 0 {
				fmt.Fprintln(g.stdout, "no lab is up")
				return nil
			}
			for _, s := range st.Labs {
				printStatus(g.stdout, s)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "only the lab with this prefix (default: every lab that is up)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object on stdout")
	return cmd
}

func statusOf(prefix string, g *globals) labStatusLab {
	s := labStatusLab{Prefix: prefix, Processes: map[string]int{}, MPTCP: map[string]any{}}
	l, err := lab.Open(prefix, g.logger())
	if err != nil {
		s.Error = err.Error()
		return s
	}
	cfg := l.Config()
	s.CC, s.Hosts, s.Namespaces, s.Switch = cfg.CC, l.Hosts(), l.HostNames(), l.SwitchNS()
	n := l.Hosts()
	up := make([]map[string]bool, n)
	qd := make([]map[string]lab.Qdisc, n)
	for h := 0; h < n; h++ {
		pids, _ := lab.NSPids(l.NS(h))
		s.Processes[l.NS(h)] = len(pids)
		up[h] = linkStates(l, h)
		qd[h] = readQdiscs(l, h)
	}
	var swq map[string]lab.Qdisc
	if s.Switch != "" {
		swq = readQdiscs(l, lab.Switch)
	}
	for i, rate := range cfg.Rates {
		dev := lab.RailDev(i)
		r := labStatusRail{Dev: dev, RateBps: rate, Qdisc: map[string]lab.Qdisc{}}
		for h := 0; h < n; h++ {
			r.Addrs = append(r.Addrs, l.RailIP(h, i))
			r.Up = append(r.Up, up[h][dev])
			r.Qdisc[l.NS(h)] = qd[h][dev]
			if swq != nil {
				if r.SwitchQdisc == nil {
					r.SwitchQdisc = map[string]lab.Qdisc{}
				}
				r.SwitchQdisc[l.NS(h)] = swq[lab.SwitchPort(h, i)]
			}
		}
		s.Rails = append(s.Rails, r)
	}
	for h := 0; h < n; h++ {
		var out bytes.Buffer
		for _, what := range [][]string{{"limits", "show"}, {"endpoint", "show"}} {
			b, err := exec.Command("ip", append([]string{"-n", l.NS(h), "mptcp"}, what...)...).CombinedOutput()
			if err != nil {
				b = []byte(err.Error())
			}
			out.WriteString(strings.TrimSpace(string(b)) + "\n")
		}
		s.MPTCP[l.NS(h)] = strings.Split(strings.TrimSpace(out.String()), "\n")
	}
	return s
}

// readQdiscs reads side's root qdiscs by interface; nil when it cannot.
func readQdiscs(l *lab.Lab, side int) map[string]lab.Qdisc {
	r, err := l.Qdiscs(side)
	if err != nil {
		return nil
	}
	defer r.Close()
	q, _ := r.Read()
	return q
}

// linkStates reports which interfaces of side are up with carrier.
func linkStates(l *lab.Lab, side int) map[string]bool {
	out := map[string]bool{}
	b, err := exec.Command("ip", "-n", l.NS(side), "-o", "link", "show").Output()
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		out[name] = strings.Contains(f[2], "LOWER_UP") && strings.Contains(f[2], ",UP")
	}
	return out
}

func printStatus(w io.Writer, s labStatusLab) {
	if s.Error != "" {
		fmt.Fprintf(w, "lab %q: %s\n", s.Prefix, s.Error)
		return
	}
	var procs []string
	for _, ns := range s.Namespaces {
		procs = append(procs, strconv.Itoa(s.Processes[ns]))
	}
	sw := ""
	if s.Switch != "" {
		sw = ", switches in " + s.Switch
	}
	fmt.Fprintf(w, "lab %q: %d hosts %s%s, cc %s, processes inside: %s\n", s.Prefix, len(s.Namespaces), strings.Join(s.Namespaces, " "), sw, s.CC,
		strings.Join(procs, "/"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	updown := map[bool]string{true: "up", false: "DOWN"}
	if s.Switch == "" {
		fmt.Fprintln(tw, "rail\trate\taddresses\tlink A/B\tA sent\tA drops\tA backlog\tB sent\tB drops")
		for _, r := range s.Rails {
			qa, qb := r.Qdisc[s.Namespaces[0]], r.Qdisc[s.Namespaces[1]]
			fmt.Fprintf(tw, "%s\t%s\t%s > %s\t%s/%s\t%d B\t%d\t%d B\t%d B\t%d\n", r.Dev, units.FormatRate(r.RateBps), r.Addrs[0], r.Addrs[1],
				updown[r.Up[0]], updown[r.Up[1]], qa.Bytes, qa.Drops, qa.Backlog, qb.Bytes, qb.Drops)
		}
	} else {
		fmt.Fprintln(tw, "rail\trate\thost\taddress\tlink\tsent\tdrops\tbacklog\treceived (switch port)\tdrops")
		for _, r := range s.Rails {
			for h, ns := range s.Namespaces {
				q, sq := r.Qdisc[ns], r.SwitchQdisc[ns]
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d B\t%d\t%d B\t%d B\t%d\n", r.Dev, units.FormatRate(r.RateBps), ns, r.Addrs[h],
					updown[r.Up[h]], q.Bytes, q.Drops, q.Backlog, sq.Bytes, sq.Drops)
			}
		}
	}
	tw.Flush()
	for _, ns := range s.Namespaces {
		if lines, ok := s.MPTCP[ns].([]string); ok {
			fmt.Fprintf(w, "MPTCP in %s: %s\n", ns, strings.Join(lines, "; "))
		}
	}
}
