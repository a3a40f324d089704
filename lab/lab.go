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
// and an unshaped control link. Methods may be called from any goroutine.
type Lab struct {
	cfg Config
	ns  [2]string
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
	l := &Lab{cfg: cfg, ns: [2]string{NSName(cfg.Prefix, 0), NSName(cfg.Prefix, 1)}, log: log, lock: lock}
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
	st := State{Prefix: l.cfg.Prefix, RatesBps: l.cfg.Rates, CC: l.cfg.CC, TBFLatency: l.cfg.TBFLatency.Seconds(),
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
		err := l.Run(s.Side, func() error { return os.WriteFile(path, []byte(s.Value), 0o644) })
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

// probe checks that a TCP connection opens over every rail and the
// control link, from A's address to B's.
func (l *Lab) probe(ctx context.Context) error {
	for i := 0; i <= len(l.cfg.Rates); i++ {
		from, to, what := RailIP(0, i), RailIP(1, i), RailDev(i)
		if i == len(l.cfg.Rates) {
			from, to, what = CtlIP(0), CtlIP(1), CtlDev
		}
		var err error
		for try := 0; try < 20; try++ {
			if err = l.probeOne(from, to); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("lab: probing %s: %w", what, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
		if err != nil {
			return fmt.Errorf("lab: %s does not carry TCP from %s to %s: %w", what, from, to, err)
		}
	}
	return nil
}

func (l *Lab) probeOne(from, to string) error {
	var ln net.Listener
	if err := l.Run(1, func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(to, "0"))
		return err
	}); err != nil {
		return err
	}
	defer ln.Close()
	return l.Run(0, func() error {
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
		return cfgErr("prefix", strconv.Quote(prefix), "a letter then up to 14 letters, digits or '-'")
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
	return nsExists(NSName(prefix, 0)) || nsExists(NSName(prefix, 1))
}

func nsExists(ns string) bool {
	_, err := os.Stat(filepath.Join(netnsDir, ns))
	return err == nil
}

// teardown removes whatever exists of the lab with prefix; the caller
// holds the prefix lock.
func teardown(prefix string, log *slog.Logger) error {
	var errs []error
	for side := 0; side < 2; side++ {
		ns := NSName(prefix, side)
		if nsExists(ns) {
			if err := killProcesses(ns, log); err != nil {
				errs = append(errs, err)
			}
			log.Debug("lab: ip netns del " + ns)
			if err := runCmd(context.Background(), "ip", "netns", "del", ns); err != nil && nsExists(ns) {
				errs = append(errs, err)
			}
		}
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

// KillProcesses ends every process left in the lab's namespaces (agents,
// mpirun, orted), but not this process.
func (l *Lab) KillProcesses() error {
	return errors.Join(killProcesses(l.ns[0], l.log), killProcesses(l.ns[1], l.log))
}

// Open returns the lab with prefix that is up (built by Up in this or
// another process), to run commands or load in it. Down on it removes the
// lab like Teardown.
func Open(prefix string, logger *slog.Logger) (*Lab, error) {
	if !prefixRE.MatchString(prefix) {
		return nil, cfgErr("prefix", strconv.Quote(prefix), "a letter then up to 14 letters, digits or '-'")
	}
	st, err := ReadState(prefix)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("lab: no lab with prefix %q is up (multirail lab up --prefix %s builds one)", prefix, prefix)
		}
		return nil, err
	}
	for side := 0; side < 2; side++ {
		if !nsExists(NSName(prefix, side)) {
			return nil, fmt.Errorf("lab: lab %q is recorded but namespace %s is missing (multirail lab down --prefix %s cleans up)", prefix, NSName(prefix, side), prefix)
		}
	}
	if logger == nil {
		logger = discard()
	}
	cfg := Config{Rates: st.RatesBps, Prefix: prefix, CC: st.CC, TBFLatency: time.Duration(st.TBFLatency * float64(time.Second)), Offloads: st.Offloads, Logger: logger}
	return &Lab{cfg: cfg, ns: [2]string{NSName(prefix, 0), NSName(prefix, 1)}, log: logger}, nil
}

// Config returns the lab's configuration, defaults filled in.
func (l *Lab) Config() Config {
	c := l.cfg
	c.Rates = append([]float64(nil), c.Rates...)
	return c
}

// NS is the namespace name of side: 0 = A (sender), 1 = B (receiver).
func (l *Lab) NS(side int) string { return l.ns[side&1] }

// RailIP is rail's address on side: 10.10.<rail+1>.<side+1>.
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
	for _, n := range l.ns {
		err := runCmd(context.Background(), "tc", "-n", n, "qdisc", "change", "dev", RailDev(rail), "root", "tbf",
			"rate", tcRate(rateBps), "burst", strconv.FormatInt(Burst(rateBps), 10),
			"latency", strconv.FormatInt(l.cfg.TBFLatency.Microseconds(), 10)+"us")
		if err != nil {
			return err
		}
	}
	return nil
}

// Command returns `ip netns exec <ns of side> name args...`.
func (l *Lab) Command(ctx context.Context, side int, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", l.NS(side), name}, args...)...)
}
