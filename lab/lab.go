package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// netnsDir is where `ip netns add` pins named namespaces.
const netnsDir = "/var/run/netns"

// Lab is a running topology: namespaces <prefix>A (side 0, the sender) and
// <prefix>B (side 1, the receiver) joined by one shaped veth pair per rail
// and an unshaped control link; or a cluster of hosts <prefix>h0.. with
// one switch per rail in <prefix>sw. Methods may be called from any
// goroutine.
type Lab struct {
	cfg Config
	ns  []string // one per host
	log *slog.Logger
	// lock is the prefix lock held from Up to Down; nil for a lab found
	// with Open.
	lock *os.File

	mu      sync.Mutex
	down    bool
	downErr error
}

// Available reports whether labs can be built here: nil if this process
// is root, ip and tc are on PATH and a network namespace can be created;
// otherwise an error that says what is missing (tests skip with it).
func Available() error {
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Errorf("lab: needs root (network namespaces, tc, sysctl); running as uid %d", uid)
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("lab: %s not found in PATH (%s): install iproute2", tool, os.Getenv("PATH"))
		}
	}
	if err := netnsCheck(); err != nil {
		return fmt.Errorf("lab: cannot create a network namespace: %w", err)
	}
	return nil
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Up builds the lab described by cfg. It validates cfg, removes what a
// previous run with the same prefix left behind (a crashed process), runs
// the steps of Plan, and checks that every rail carries a TCP connection.
// On any error, or when ctx ends half-way, it removes everything it built
// before returning. The caller must call Down.
func Up(ctx context.Context, cfg Config) (*Lab, error) {
	cfg, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	if err := Available(); err != nil {
		return nil, err
	}
	if !cfg.Offloads {
		if _, err := exec.LookPath("ethtool"); err != nil {
			return nil, errors.New("lab: ethtool not found in PATH: it turns offloads off on the rails; install it (apt-get install ethtool, or scripts/lab-deps.sh) or set Config.Offloads")
		}
	}
	log := cfg.Logger
	lock, err := lockPrefix(cfg.Prefix)
	if err != nil {
		return nil, err
	}
	l := &Lab{cfg: cfg, ns: hostNames(cfg.Prefix, cfg.Hosts), log: log, lock: lock}
	if err := l.build(ctx); err != nil {
		if derr := l.Down(); derr != nil {
			log.Warn("lab: teardown after a failed Up", "err", derr)
		}
		return nil, err
	}
	return l, nil
}

func (l *Lab) build(ctx context.Context) error {
	if err := teardown(l.cfg.Prefix, l.log); err != nil {
		return fmt.Errorf("lab: removing the leftovers of an earlier lab %q: %w", l.cfg.Prefix, err)
	}
	st := State{Prefix: l.cfg.Prefix, Hosts: l.cfg.Hosts, RatesBps: l.cfg.Rates, CC: l.cfg.CC, TBFLatency: l.cfg.TBFLatency.Seconds(),
		Offloads: l.cfg.Offloads, PID: os.Getpid(), Created: time.Now().UTC()}
	if err := writeState(st); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	// The global lock covers allowing CC and the namespaces choosing it,
	// so that another lab's Down cannot take it away in between.
	unlock, err := lockGlobal()
	if err != nil {
		return err
	}
	defer unlock()
	orig, added, err := allowCC(l.cfg.CC)
	if err != nil {
		return err
	}
	if added {
		st.AllowedCCOrig, st.AllowedCCAdded = orig, l.cfg.CC
		if err := writeState(st); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		l.log.Debug("lab: allowed congestion control in the init namespace", "cc", l.cfg.CC, "was", orig)
	}
	for _, s := range Plan(l.cfg) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("lab: building %s: %w", l.cfg.Prefix, err)
		}
		if err := l.do(ctx, s); err != nil {
			return err
		}
	}
	return l.probe(ctx)
}

// do runs one step.
func (l *Lab) do(ctx context.Context, s Step) error {
	l.log.Debug("lab: " + s.String())
	switch {
	case s.Args != nil:
		return runCmd(ctx, s.Args...)
	case s.Key != "":
		path := filepath.Join("/proc/sys", strings.ReplaceAll(s.Key, ".", "/"))
		err := l.Run(s.Side, func() error {
			if _, err := os.Stat(path); s.IfExists && errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return os.WriteFile(path, []byte(s.Value), 0o644)
		})
		if err != nil {
			return fmt.Errorf("lab: %s: %w", s, err)
		}
		return nil
	default:
		if err := os.MkdirAll(filepath.Dir(s.Path), 0o755); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		if err := os.WriteFile(s.Path, []byte(s.Data), 0o644); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		return nil
	}
}

// runCmd runs an external command and returns an error with its output.
func runCmd(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("lab: %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// hostNames are the namespaces of the hosts of a lab with prefix.
func hostNames(prefix string, hosts int) []string {
	ns := make([]string, hosts)
	for i := range ns {
		ns[i] = HostNS(prefix, hosts, i)
	}
	return ns
}

// probe checks that a TCP connection opens over every rail and the
// control network between every two hosts (from the lower-numbered one).
// A link that carries nothing yet (a bridge port still learning) gets a
// few tries, 100 ms apart.
func (l *Lab) probe(ctx context.Context) error {
	for a := 0; a < len(l.ns); a++ {
		for b := a + 1; b < len(l.ns); b++ {
			if err := l.probePair(ctx, a, b, 20); err != nil {
				return err
			}
		}
	}
	return nil
}

// Probe checks, once per link, that every host reaches every other over
// every rail and the control network with a TCP connection; the error
// names the first link that does not.
func (l *Lab) Probe(ctx context.Context) error {
	for a := 0; a < len(l.ns); a++ {
		for b := 0; b < len(l.ns); b++ {
			if a != b {
				if err := l.probePair(ctx, a, b, 1); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (l *Lab) probePair(ctx context.Context, a, b, tries int) error {
	for i := 0; i <= len(l.cfg.Rates); i++ {
		from, to, what := RailIP(a, i), RailIP(b, i), RailDev(i)
		if i == len(l.cfg.Rates) {
			from, to, what = CtlIP(a), CtlIP(b), CtlDev
		}
		var err error
		for try := 0; try < tries; try++ {
			if err = l.probeOne(a, b, from, to); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("lab: probing %s: %w", what, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
		if err != nil {
			return fmt.Errorf("lab: %s does not carry TCP from %s (%s) to %s (%s): %w", what, l.ns[a], from, l.ns[b], to, err)
		}
	}
	return nil
}

func (l *Lab) probeOne(a, b int, from, to string) error {
	var ln net.Listener
	if err := l.Run(b, func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(to, "0"))
		return err
	}); err != nil {
		return err
	}
	defer ln.Close()
	return l.Run(a, func() error {
		d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp4", ln.Addr().String())
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// Down removes everything Up created: it kills the processes left in the
// namespaces, deletes the namespaces (and with them the veths, qdiscs and
// MPTCP endpoints), the hosts files and the state, and takes the
// congestion control Up allowed out of the init namespace's list again. It
// is idempotent: later calls return the first call's result.
func (l *Lab) Down() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down {
		return l.downErr
	}
	l.down = true
	if l.lock == nil { // found with Open
		l.downErr = Teardown(l.cfg.Prefix, l.log)
		return l.downErr
	}
	l.downErr = teardown(l.cfg.Prefix, l.log)
	_ = unlockFile(l.lock) // releases the prefix lock
	return l.downErr
}

// Teardown removes the lab with prefix that another process left up (see
// Down). It refuses while a live process holds the lab (a running bench).
func Teardown(prefix string, logger *slog.Logger) error {
	if !prefixRE.MatchString(prefix) {
		return cfgErr("prefix", strconv.Quote(prefix), prefixAllowed)
	}
	if logger == nil {
		logger = discard()
	}
	lock, err := lockPrefix(prefix)
	if err != nil {
		return err
	}
	defer unlockFile(lock)
	return teardown(prefix, logger)
}

// Exists reports whether a lab with prefix is up: its state is recorded or
// one of its namespaces exists.
func Exists(prefix string) bool {
	if _, err := os.Stat(statePath(prefix)); err == nil {
		return true
	}
	return len(labNamespaces(prefix)) > 0
}

// labNamespaces lists the namespaces that exist of the lab with prefix,
// whatever its number of hosts: <prefix>A, <prefix>B, <prefix>h<i> and
// <prefix>sw, the switch last.
func labNamespaces(prefix string) []string {
	var out []string
	cands := []string{NSName(prefix, 0), NSName(prefix, 1)}
	for i := 0; i < MaxHosts; i++ {
		cands = append(cands, prefix+"h"+strconv.Itoa(i))
	}
	for _, n := range append(cands, SwitchNS(prefix)) {
		if nsExists(n) {
			out = append(out, n)
		}
	}
	return out
}

func nsExists(ns string) bool {
	_, err := os.Stat(filepath.Join(netnsDir, ns))
	return err == nil
}

// teardown removes whatever exists of the lab with prefix; the caller
// holds the prefix lock.
func teardown(prefix string, log *slog.Logger) error {
	var errs []error
	for _, ns := range labNamespaces(prefix) {
		if err := killProcesses(ns, log); err != nil {
			errs = append(errs, err)
		}
		log.Debug("lab: ip netns del " + ns)
		if err := runCmd(context.Background(), "ip", "netns", "del", ns); err != nil && nsExists(ns) {
			errs = append(errs, err)
		}
	}
	names := []string{NSName(prefix, 0), NSName(prefix, 1)}
	for i := 0; i < MaxHosts; i++ {
		names = append(names, HostNS(prefix, MaxHosts, i))
	}
	for _, ns := range names {
		hosts := HostsPath(ns)
		if err := os.Remove(hosts); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		_ = os.Remove(filepath.Dir(hosts)) // only if empty
	}
	_ = os.Remove(etcNetns) // only if empty
	if st, err := ReadState(prefix); err == nil && st.AllowedCCAdded != "" {
		unlock, err := lockGlobal()
		if err != nil {
			errs = append(errs, err)
		} else {
			log.Debug("lab: disallowing congestion control in the init namespace again", "cc", st.AllowedCCAdded)
			if err := disallowCC(st.AllowedCCAdded); err != nil {
				errs = append(errs, fmt.Errorf("lab: restoring %s: %w", allowedCCPath, err))
			}
			unlock()
		}
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(stateDir(prefix)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// NSPids lists the processes in namespace ns other than this one.
func NSPids(ns string) ([]int, error) {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return nil, fmt.Errorf("lab: ip netns pids %s: %w", ns, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil && p != os.Getpid() {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

// KillProcesses ends every process left in the lab's host namespaces
// (agents, mpirun, orted, slurmd), but not this process.
func (l *Lab) KillProcesses() error {
	var errs []error
	for _, n := range l.ns {
		errs = append(errs, killProcesses(n, l.log))
	}
	return errors.Join(errs...)
}

// Open returns the lab with prefix that is up (built by Up in this or
// another process), to run commands or load in it. Down on it removes the
// lab like Teardown.
func Open(prefix string, logger *slog.Logger) (*Lab, error) {
	if !prefixRE.MatchString(prefix) {
		return nil, cfgErr("prefix", strconv.Quote(prefix), prefixAllowed)
	}
	st, err := ReadState(prefix)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("lab: no lab with prefix %q is up (multirail lab up --prefix %s builds one)", prefix, prefix)
		}
		return nil, err
	}
	hosts := max(st.Hosts, MinHosts) // labs recorded before clusters have no hosts
	ns := hostNames(prefix, hosts)
	need := ns
	if hosts > MinHosts {
		need = append(append([]string(nil), ns...), SwitchNS(prefix))
	}
	for _, n := range need {
		if !nsExists(n) {
			return nil, fmt.Errorf("lab: lab %q is recorded but namespace %s is missing (multirail lab down --prefix %s cleans up)", prefix, n, prefix)
		}
	}
	if logger == nil {
		logger = discard()
	}
	cfg := Config{Rates: st.RatesBps, Hosts: hosts, Prefix: prefix, CC: st.CC, TBFLatency: time.Duration(st.TBFLatency * float64(time.Second)), Offloads: st.Offloads, Logger: logger}
	return &Lab{cfg: cfg, ns: ns, log: logger}, nil
}

// Config returns the lab's configuration, defaults filled in.
func (l *Lab) Config() Config {
	c := l.cfg
	c.Rates = append([]float64(nil), c.Rates...)
	return c
}

// Switch is the side of a cluster's switch namespace for NS, Run,
// Qdiscs and Command.
const Switch = -1

// NS is the namespace name of side: 0 = A (sender), 1 = B (receiver); in
// a cluster, of host side (0..Hosts()-1), or the switches' (Switch). ""
// for any other side.
func (l *Lab) NS(side int) string {
	if side == Switch {
		return l.SwitchNS()
	}
	if side < 0 || side >= len(l.ns) {
		return ""
	}
	return l.ns[side]
}

// Hosts is the number of hosts (2 for a two-host lab).
func (l *Lab) Hosts() int { return len(l.ns) }

// HostNames are the hosts' namespace names, which are also their host
// names (resolved by every host's /etc/hosts to control addresses).
func (l *Lab) HostNames() []string { return append([]string(nil), l.ns...) }

// SwitchNS is the namespace of a cluster's switches; "" for two hosts.
func (l *Lab) SwitchNS() string {
	if len(l.ns) <= MinHosts {
		return ""
	}
	return SwitchNS(l.cfg.Prefix)
}

// RailIP is rail's address on side (host): 10.10.<rail+1>.<side+1>.
func (l *Lab) RailIP(side, rail int) string { return RailIP(side, rail) }

// CtlIP is side's address on the unshaped control link: 10.10.99.<side+1>.
func (l *Lab) CtlIP(side int) string { return CtlIP(side) }

// Rails is the number of rails.
func (l *Lab) Rails() int { return len(l.cfg.Rates) }

// Rate is rail's configured rate in bits/s.
func (l *Lab) Rate(rail int) float64 { return l.cfg.Rates[rail] }

// SetLink sets rail's interface on side A down or up (`ip link set railN
// down|up`); its veth peer in B loses or regains carrier with it.
func (l *Lab) SetLink(rail int, up bool) error {
	if rail < 0 || rail >= l.Rails() {
		return fmt.Errorf("lab: rail %d: allowed 0..%d", rail, l.Rails()-1)
	}
	state := "down"
	if up {
		state = "up"
	}
	l.log.Debug("lab: link "+state, "rail", rail)
	return runCmd(context.Background(), "ip", "-n", l.ns[0], "link", "set", RailDev(rail), state)
}

// SetRate reshapes rail's tbf on both sides to rateBps (burst sized for
// it as at lab up), as cross traffic or a renegotiated link would slow it;
// SetRate(rail, l.Rate(rail)) restores it.
func (l *Lab) SetRate(rail int, rateBps float64) error {
	if rail < 0 || rail >= l.Rails() {
		return fmt.Errorf("lab: rail %d: allowed 0..%d", rail, l.Rails()-1)
	}
	if math.IsNaN(rateBps) || rateBps < MinRateBps || rateBps > MaxRateBps {
		return fmt.Errorf("lab: rate %.0f bit/s: allowed %.0f..%.0f", rateBps, float64(MinRateBps), float64(MaxRateBps))
	}
	l.log.Debug("lab: rail rate", "rail", rail, "bps", rateBps)
	for h, n := range l.ns {
		if err := runCmd(context.Background(), tbfArgs(l.cfg, n, RailDev(rail), "change", rateBps)...); err != nil {
			return err
		}
		if sw := l.SwitchNS(); sw != "" {
			if err := runCmd(context.Background(), tbfArgs(l.cfg, sw, SwitchPort(h, rail), "change", rateBps)...); err != nil {
				return err
			}
		}
	}
	return nil
}

// Command returns `ip netns exec <ns of side> name args...`.
func (l *Lab) Command(ctx context.Context, side int, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", l.NS(side), name}, args...)...)
}
