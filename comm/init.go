package comm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	tokens "github.com/multirail/multirail/internal/token"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/comm/internal/coll"
	"github.com/multirail/multirail/comm/launch"
	"github.com/multirail/multirail/comm/netif"
	"github.com/multirail/multirail/comm/rdzv"
	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/sched"
	"github.com/multirail/multirail/units"
)

// Environment variables Init reads besides the launcher's (package
// launch) and MULTIRAIL_TOKEN.
const (
	EnvIfName = "MULTIRAIL_IFNAME" // Config.IfName
	EnvEmu    = "MULTIRAIL_EMU"    // Config.Emu
	// EnvEmuLoad sets Config.EmuLoad: a load pattern such as
	// "phases:calm=3s,congested=3s" (emu.ParsePattern).
	EnvEmuLoad = "MULTIRAIL_EMU_LOAD"
	EnvAlgo    = "MULTIRAIL_ALGO"    // Config.Algorithms: "allreduce=ring,bcast=binomial"
	EnvTimeout = "MULTIRAIL_TIMEOUT" // Config.Timeout: a Go duration
	EnvSched   = "MULTIRAIL_SCHED"   // Config.Transport.Scheduler
	// EnvBusyPoll sets Config.Transport.BusyPoll: a Go duration up to
	// 10ms, 0 to never poll.
	EnvBusyPoll = "MULTIRAIL_BUSY_POLL"
	// EnvRailRates sets Config.RailRates: "NIC=RATE,..." such as
	// "rail0=200mbit,rail1=100mbit" (rates as package units reads them).
	EnvRailRates = "MULTIRAIL_RAIL_RATES"
)

// Init starts this process's rank of the world communicator: it detects
// the launcher from the environment (package launch: multirail run,
// torchrun, env://, Open MPI, MPICH, Slurm, Kubernetes), meets the other
// ranks at the rendezvous, finds the rails to each of them and connects.
// Empty fields of cfg are taken from MULTIRAIL_IFNAME, MULTIRAIL_EMU,
// MULTIRAIL_EMU_LOAD, MULTIRAIL_ALGO, MULTIRAIL_TIMEOUT, MULTIRAIL_SCHED,
// MULTIRAIL_BUSY_POLL and MULTIRAIL_RAIL_RATES where set. It
// returns once every rank is connected to every other.
func Init(ctx context.Context, cfg Config) (*Comm, error) {
	host, _ := os.Hostname()
	info, err := launch.DetectEnv(os.Environ(), host)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBootstrap, err)
	}
	if cfg, err = ConfigFromEnv(cfg, os.LookupEnv); err != nil {
		return nil, err
	}
	return Start(ctx, info, cfg)
}

// ConfigFromEnv fills the empty fields of cfg that Init takes from the
// environment.
func ConfigFromEnv(cfg Config, getenv func(string) (string, bool)) (Config, error) {
	if v, ok := getenv(EnvIfName); ok && cfg.IfName == "" {
		cfg.IfName = v
	}
	if v, ok := getenv(EnvEmu); ok && cfg.Emu == "" {
		cfg.Emu = v
	}
	if v, ok := getenv(EnvEmuLoad); ok && cfg.EmuLoad == "" {
		if _, err := emu.ParsePattern(v); err != nil {
			return cfg, fmt.Errorf("%w: %s=%q: %v", ErrConfig, EnvEmuLoad, v, err)
		}
		cfg.EmuLoad = v
	}
	if v, ok := getenv(EnvSched); ok && v != "" && cfg.Transport.Scheduler == "" {
		cfg.Transport.Scheduler = v
	}
	if v, ok := getenv(EnvBusyPoll); ok && v != "" && cfg.Transport.BusyPoll == 0 {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > multirail.MaxBusyPoll {
			return cfg, fmt.Errorf("%w: %s=%q; allowed: a duration from 0 (never) to %v, such as 200us", ErrConfig, EnvBusyPoll, v, multirail.MaxBusyPoll)
		}
		cfg.Transport.BusyPoll = d
		if d == 0 {
			cfg.Transport.BusyPoll = -1 // never
		}
	}
	if v, ok := getenv(EnvTimeout); ok && v != "" && cfg.Timeout == 0 {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("%w: %s=%q; allowed: a positive duration such as 90s", ErrConfig, EnvTimeout, v)
		}
		cfg.Timeout = d
	}
	if v, ok := getenv(EnvRailRates); ok && v != "" && cfg.RailRates == nil {
		m, err := ParseRailRates(v)
		if err != nil {
			return cfg, fmt.Errorf("%w: %s=%q: %w", ErrConfig, EnvRailRates, v, err)
		}
		cfg.RailRates = m
	}
	if v, ok := getenv(EnvAlgo); ok && v != "" && cfg.Algorithms == nil {
		m, err := parseAlgorithms(v)
		if err != nil {
			return cfg, fmt.Errorf("%w: %s=%q: %w", ErrConfig, EnvAlgo, v, err)
		}
		cfg.Algorithms = m
	}
	return cfg, nil
}

// ParseRailRates parses "NIC=RATE,..." (for example
// "rail0=200mbit,rail1=100mbit") into Config.RailRates: every rate > 0 as
// package units reads it, every NIC once.
func ParseRailRates(s string) (map[string]float64, error) {
	m := make(map[string]float64)
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, rate, ok := strings.Cut(item, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("%q; allowed: NIC=RATE, e.g. rail0=200mbit", item)
		}
		r, err := units.ParseRate(rate)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if r <= 0 {
			return nil, fmt.Errorf("%s=%s; allowed: a rate > 0, e.g. 200mbit", name, strings.TrimSpace(rate))
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("%s is given twice; allowed: every NIC once", name)
		}
		m[name] = r
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("no NIC=RATE item; allowed: NIC=RATE,..., e.g. rail0=200mbit")
	}
	return m, nil
}

// ParseAlgorithms parses "collective=algorithm,..." (for example
// "allreduce=ring,bcast=binomial") into Config.Algorithms.
// The error wraps ErrConfig.
func ParseAlgorithms(s string) (map[Collective]Algo, error) {
	m, err := parseAlgorithms(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return m, nil
}

// parseAlgorithms is ParseAlgorithms with errors that its callers wrap.
func parseAlgorithms(s string) (map[Collective]Algo, error) {
	m := make(map[Collective]Algo)
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, algo, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%q; allowed: collective=algorithm, e.g. allreduce=ring", item)
		}
		cl, err := coll.ParseCollective(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		a, err := coll.ParseAlgo(strings.TrimSpace(algo))
		if err != nil {
			return nil, err
		}
		if !slices.Contains(Algorithms(cl), a) && a != AlgoAuto {
			return nil, fmt.Errorf("%s has no algorithm %s; allowed: %v", cl, a, Algorithms(cl))
		}
		m[cl] = a
	}
	return m, nil
}

// card is what every rank publishes at the rendezvous.
type card struct {
	Host      string        `json:"host"`
	HostID    string        `json:"host_id"`
	Port      int           `json:"port"`
	LocalRank int           `json:"local_rank"`
	Ifaces    []netif.Iface `json:"ifaces,omitempty"`
	Emu       []string      `json:"emu,omitempty"`
	// Proc identifies the process: kernel boot id, PID namespace and PID
	// (procID). Ranks whose boot ids match share this machine's CPUs.
	Proc string `json:"proc,omitempty"`
	// Err, when set, is why this rank could not start (its configuration,
	// its listener, its NICs): it publishes the card anyway, so that every
	// other rank fails at once with this error instead of waiting for a
	// connection that never comes. The other fields may then be empty.
	Err string `json:"error,omitempty"`
}

// StartError is the error of a rank whose peer could not start: another
// rank published why at the rendezvous (its configuration, its listener,
// its NICs).
type StartError struct {
	Rank int
	Host string
	Err  string
}

// Error implements error.
func (e *StartError) Error() string {
	return fmt.Sprintf("rank %d (%s) could not start: %s", e.Rank, e.Host, e.Err)
}

// hello is the first message on a connection, from the dialing rank.
type hello struct {
	Job  string `json:"job"`
	Rank int    `json:"rank"`
}

// Start is Init with the launcher's information given (for tests, and for
// programs that know their rank otherwise): it does not read the
// environment for it, nor cfg's fields.
func Start(ctx context.Context, info launch.Info, cfg Config) (*Comm, error) {
	c, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if info.Size < 1 || info.Rank < 0 || info.Rank >= info.Size {
		return nil, fmt.Errorf("%w: rank %d of size %d; allowed: size >= 1, 0 <= rank < size", ErrConfig, info.Rank, info.Size)
	}
	bctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	b := &boot{info: info, cfg: c, log: c.Logger.With("rank", info.Rank)}
	world, err := b.run(bctx)
	if err != nil {
		b.cleanup()
		if ctx.Err() == nil && bctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (after the %v timeout)", err, c.Timeout)
		}
		return nil, fmt.Errorf("%w: rank %d: %w", ErrBootstrap, info.Rank, err)
	}
	return world, nil
}

func identity(n int) []int {
	r := make([]int, n)
	for i := range r {
		r[i] = i
	}
	return r
}

// boot holds what Start builds until the world is up.
type boot struct {
	info     launch.Info
	cfg      config
	log      *slog.Logger
	ln       *multirail.Listener
	closers  []io.Closer
	emuLinks []*emu.Link
	conns    []*multirail.Conn
	srvDone  chan struct{}

	tcfg        multirail.Config // the transport's, token resolved (prepare)
	tokenReady  bool             // tcfg.Token is the job's (prepare got that far)
	lnRails     []string         // the NICs whose rates the listener has, in order
	skippedHere []netif.Skip     // this host's NICs that are no rails
}

func (b *boot) cleanup() {
	if b.ln != nil {
		_ = b.ln.Close()
	}
	for _, c := range b.conns {
		if c != nil {
			_ = c.Close()
		}
	}
	for _, c := range b.closers {
		_ = c.Close()
	}
	if b.srvDone != nil {
		<-b.srvDone
	}
}

// run builds the world and returns its communicator, whose first
// collective call (the barrier that ends the start) is behind it.
func (b *boot) run(ctx context.Context) (*Comm, error) {
	info := b.info
	data, perr := b.prepare()
	if perr != nil {
		if !b.tokenReady {
			return nil, perr // no token: the others cannot be told
		}
		// Tell the others why, at the rendezvous (rank 0 still serves
		// it): every rank then fails with this error at once.
		host := info.Host
		if host == "" {
			host, _ = os.Hostname()
		}
		data, _ = json.Marshal(card{Host: host, Err: perr.Error()})
	}
	if info.Serve && info.Rank == 0 && strings.HasPrefix(info.Rdzv, "tcp://") {
		if err := b.serve(ctx, b.tcfg.Token); err != nil {
			if perr != nil {
				return nil, perr
			}
			return nil, err
		}
	}
	raw, err := rdzv.Exchange(ctx, info.Rdzv, b.tcfg.Token, rdzv.Card{JobID: info.JobID, Rank: info.Rank, Size: info.Size, Data: data})
	if perr != nil {
		// Told (or not, if the exchange failed): this rank's own error
		// is what it reports. A serving rank 0 keeps serving until every
		// rank has the table (cleanup waits for it).
		return nil, perr
	}
	if err != nil {
		return nil, err // rdzv's errors name the rendezvous
	}
	return b.finish(ctx, raw)
}

// prepare resolves the token, listens, starts this rank's emulated rails
// and returns its card.
func (b *boot) prepare() ([]byte, error) {
	info, cfg := b.info, b.cfg
	tcfg := cfg.Transport
	tcfg.Rails, tcfg.DialRail = nil, nil
	tcfg.Logger = cfg.Logger
	var err error
	if tcfg.Token, err = jobToken(tcfg.Token, info); err != nil {
		return nil, err
	}
	b.tcfg, b.tokenReady = tcfg, true
	if tcfg.MaxListenerBuffer == 0 {
		// Every other rank may connect: room for each one's window.
		window := tcfg.MaxReceiveBuffer
		if window == 0 {
			window = tcfg.MaxMessageSize + 64<<20 // multirail's default window
		}
		tcfg.MaxListenerBuffer = max(multirail.DefaultMaxListenerBuffer, int64(info.Size)*window)
	}
	b.tcfg = tcfg
	me := card{Host: info.Host, HostID: hostID(info.Host), LocalRank: info.LocalRank, Proc: procID()}
	if me.Host == "" {
		me.Host, _ = os.Hostname()
	}
	filter, err := netif.ParseFilter(cfg.IfName)
	if err != nil {
		return nil, err
	}
	if cfg.emu == nil {
		ifs, err := netif.Local()
		if err != nil {
			return nil, fmt.Errorf("network interfaces: %w", err)
		}
		me.Ifaces, b.skippedHere = netif.Candidates(ifs, filter)
	}
	if err := b.checkScheduler(me.Ifaces); err != nil {
		return nil, err
	}
	lcfg := tcfg
	if len(cfg.emu) > 0 {
		// Accepted emulated rails: rail k is the peer's k-th spec, the
		// same as this rank's (every rank runs the same specs).
		for k, e := range cfg.emu {
			lcfg.Rails = append(lcfg.Rails, multirail.Rail{Name: fmt.Sprintf("emu%d", k), Bandwidth: e.RateBps})
		}
	}
	if cfg.emu == nil && len(cfg.RailRates) > 0 {
		// The reverse direction of accepted connections: rail i is the
		// peer's i-th NIC, taken to end at this host's i-th NIC.
		for _, ifc := range me.Ifaces {
			if r, ok := cfg.RailRates[ifc.Name]; ok {
				lcfg.Rails = append(lcfg.Rails, multirail.Rail{Name: ifc.Name, Bandwidth: r})
				b.lnRails = append(b.lnRails, ifc.Name)
			}
		}
	}
	if b.ln, err = multirail.Listen(":0", lcfg); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	port := b.ln.Addr().(*net.TCPAddr).Port
	me.Port = port
	for j, s := range cfg.emu {
		var loads []emu.Load
		if cfg.emuLoad.Kind != emu.PatternOff && cfg.emuLoad.Kind != "" {
			rng := rand.New(rand.NewPCG(cfg.emuLoad.Seed, uint64(info.Rank)<<8|uint64(j)))
			loads = cfg.emuLoad.Loads(rng, j, emuLoadHorizon)
		}
		l, err := emu.NewLink(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), s.LinkConfig(loads))
		if err != nil {
			return nil, fmt.Errorf("emulated rail %s: %w", s, err)
		}
		b.closers = append(b.closers, l)
		b.emuLinks = append(b.emuLinks, l)
		me.Emu = append(me.Emu, l.Addr())
	}
	return json.Marshal(me)
}

// checkScheduler fails, before the rendezvous, when the transport's
// scheduler cannot run on the rails this rank will have: NIC rails
// (ifaces) with the rates of Config.RailRates (0 where none is given),
// or the emulated rails with theirs. The weighted scheduler needs a rate
// for every rail; found only when connecting, after the rendezvous, the
// others would wait for a connection that never comes.
func (b *boot) checkScheduler(ifaces []netif.Iface) error {
	name := b.tcfg.Scheduler
	if name == "" {
		return nil
	}
	var (
		bw      []float64
		missing []string
	)
	if len(b.cfg.emu) > 0 {
		for _, s := range b.cfg.emu {
			bw = append(bw, s.RateBps)
		}
	} else {
		for _, ifc := range ifaces {
			r := b.cfg.RailRates[ifc.Name]
			if r == 0 {
				missing = append(missing, ifc.Name)
			}
			bw = append(bw, r)
		}
	}
	if len(bw) == 0 {
		return nil
	}
	if _, err := sched.New(name, sched.Config{Rails: len(bw), Bandwidths: bw, Options: b.tcfg.SchedulerOptions}); err != nil {
		msg := fmt.Sprintf("%v: scheduler %q cannot run on this rank's %d rails: %v", ErrConfig, name, len(bw), err)
		ones := make([]float64, len(bw))
		for i := range ones {
			ones[i] = 1
		}
		_, errRates := sched.New(name, sched.Config{Rails: len(bw), Bandwidths: ones, Options: b.tcfg.SchedulerOptions})
		if len(missing) > 0 && errRates == nil { // it is the rates it lacks
			msg += fmt.Sprintf("; NICs without a rate: %s (give every NIC's rate in %s, e.g. %s=200mbit)", strings.Join(missing, ", "), EnvRailRates, missing[0])
		}
		return &configError{msg}
	}
	return nil
}

// configError is a configuration error with a message of its own; it
// wraps ErrConfig.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }
func (e *configError) Unwrap() error { return ErrConfig }

// finish connects to every rank, given every rank's card (by rank), and
// returns the world communicator after its first barrier.
func (b *boot) finish(ctx context.Context, raw [][]byte) (*Comm, error) {
	info, cfg, tcfg := b.info, b.cfg, b.tcfg
	if len(raw) != info.Size {
		return nil, fmt.Errorf("%w: %d cards for %d ranks; want one per rank", ErrConfig, len(raw), info.Size)
	}
	cards := make([]card, info.Size)
	var failed []error
	for r, d := range raw {
		if err := json.Unmarshal(d, &cards[r]); err != nil {
			return nil, fmt.Errorf("rank %d's card: %w", r, err)
		}
		if cards[r].Err != "" {
			failed = append(failed, &StartError{Rank: r, Host: cards[r].Host, Err: cards[r].Err})
		}
	}
	if len(failed) > 0 {
		return nil, errors.Join(failed...)
	}
	for r := range cards {
		if cards[r].Port <= 0 || cards[r].Port > 65535 {
			return nil, fmt.Errorf("rank %d's card: port %d; allowed: 1..65535", r, cards[r].Port)
		}
	}
	if !cfg.KeepGOMAXPROCS {
		shareCPUs(cards, info.Rank, b.log)
	}
	w := &world{
		rank: info.Rank, size: info.Size, localRank: info.LocalRank, localSize: info.LocalSize,
		launcher: info.Launcher, cfg: cfg, log: b.log, host: cards[info.Rank].Host,
		peers: make([]*peer, info.Size), ctxs: make(map[uint64]*ctxState), stop: make(chan struct{}),
		nextID: worldID + 1,
	}
	b.conns = make([]*multirail.Conn, info.Size)
	if err := b.connect(ctx, w, tcfg, cards, b.skippedHere); err != nil {
		return nil, err
	}
	// The listener stays open: the transport's rails rejoin through it
	// after a failure. A connection of an unknown session is refused.
	ln := b.ln
	w.closers = append([]io.Closer{ln}, b.closers...)
	w.emuLinks = b.emuLinks
	b.ln, b.closers, b.conns = nil, nil, nil
	w.start()
	w.wg.Go(func() {
		ctx, cancel := w.untilClose()
		defer cancel()
		for {
			c, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			w.log.Warn("comm: refusing a connection after the start", "rails", len(c.Stats().Rails))
			_ = c.Close()
		}
	})
	c := w.newComm(worldID, identity(info.Size))
	if err := c.Barrier(ctx); err != nil {
		_ = w.close()
		return nil, fmt.Errorf("first barrier: %w", err)
	}
	if b.srvDone != nil {
		<-b.srvDone
		b.srvDone = nil
	}
	return c, nil
}

// serve runs the rendezvous server of rank 0 until every rank has its
// answer (or ctx ends).
func (b *boot) serve(ctx context.Context, token string) error {
	u, err := url.Parse(b.info.Rdzv)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("", u.Port()))
	if err != nil {
		return fmt.Errorf("rendezvous server on port %s (rank 0 serves it): %w", u.Port(), err)
	}
	srv, err := rdzv.NewServer(ln, rdzv.ServerConfig{Size: b.info.Size, JobID: b.info.JobID, Token: token, Logger: b.log})
	if err != nil {
		_ = ln.Close()
		return err
	}
	b.srvDone = make(chan struct{})
	go func() {
		defer close(b.srvDone)
		if err := srv.Serve(ctx); err != nil {
			b.log.Warn("comm: rendezvous server", "err", err)
		}
		_ = srv.Close()
	}()
	return nil
}

// hostID identifies a host and network namespace: ranks with equal ids
// can reach each other over loopback.
func hostID(host string) string {
	ns, _ := os.Readlink("/proc/self/ns/net")
	return host + "|" + bootID() + "|" + ns
}

// bootID identifies the running kernel (empty where /proc does not say).
func bootID() string {
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(boot))
}

// procID identifies this process on this machine: boot id, PID
// namespace, PID.
func procID() string {
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return bootID() + "|" + ns + "|" + strconv.Itoa(os.Getpid())
}

// cpuSharers is the number of processes among cards that run on the
// kernel of cards[me] (the same boot id), counting its own: they share
// its CPUs, whatever host names and network namespaces they have. Ranks
// of one process count once; a card without Proc counts for nobody.
func cpuSharers(cards []card, me int) int {
	boot, _, _ := strings.Cut(cards[me].Proc, "|")
	if boot == "" {
		return 1
	}
	procs := map[string]bool{}
	for _, c := range cards {
		if b, _, _ := strings.Cut(c.Proc, "|"); b == boot {
			procs[c.Proc] = true
		}
	}
	return max(1, len(procs))
}

// procsFor is the GOMAXPROCS of a process that shares procs (its
// GOMAXPROCS) with sharers processes like it: an equal share, at least 1,
// never more than procs.
func procsFor(procs, sharers int) int {
	return max(1, min(procs, procs/max(sharers, 1)))
}

// shareCPUs lowers GOMAXPROCS to this process's share of the machine's
// CPUs when other ranks' processes run on them too, unless the
// GOMAXPROCS environment variable chose it or a CPU limit (a container's
// quota, which Go's default GOMAXPROCS follows) already gave this
// process fewer than the machine's CPUs. Each rank busy-polls and
// hands messages between goroutines; with more runnable threads than
// CPUs those hand-offs wait for the kernel's scheduler (4 ranks on 2
// CPUs: an 8-byte allreduce took 780 us with GOMAXPROCS 2 against 336
// with 1, a 2-rank ping-pong 75 us against 19; docs/comm.md).
func shareCPUs(cards []card, me int, log *slog.Logger) {
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return
	}
	n := cpuSharers(cards, me)
	cur := runtime.GOMAXPROCS(0)
	if cur < runtime.NumCPU() {
		return
	}
	if p := procsFor(cur, n); p < cur {
		runtime.GOMAXPROCS(p)
		log.Info("comm: ranks share this machine's CPUs: GOMAXPROCS lowered", "processes", n, "from", cur, "to", p)
	}
}

// connect opens the connection to every other rank: this rank dials every
// higher rank and accepts every lower one.
func (b *boot) connect(ctx context.Context, w *world, tcfg multirail.Config, cards []card, skippedHere []netif.Skip) error {
	me := cards[w.rank]
	var (
		mu    sync.Mutex
		errs  []error
		lines = make([]string, w.size)
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for j := w.rank + 1; j < w.size; j++ {
		wg.Go(func() {
			p, line, err := b.dial(ctx, w, tcfg, me, cards[j], j, skippedHere)
			if err != nil {
				fail(fmt.Errorf("connect to rank %d (%s): %w", j, cards[j].Host, err))
				return
			}
			mu.Lock()
			w.peers[j], lines[j] = p, line
			b.conns[j] = p.conn
			mu.Unlock()
		})
	}
	if w.rank > 0 {
		wg.Go(func() {
			if err := b.accept(ctx, w, cards, &mu, lines); err != nil {
				fail(err)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for j, line := range lines {
		if j != w.rank {
			b.log.Info("comm: " + line)
		}
	}
	return nil
}

// railsTo returns the rails from this rank to peer j.
func (b *boot) railsTo(w *world, me, pc card, j int, skippedHere []netif.Skip) ([]multirail.Rail, []RailInfo, string, error) {
	var rails []multirail.Rail
	var infos []RailInfo
	switch {
	case len(b.cfg.emu) > 0:
		if pc.HostID != me.HostID || len(pc.Emu) != len(b.cfg.emu) {
			return nil, nil, "", fmt.Errorf("emulated rails (%s) need every rank on one host with the same specs; rank %d is on %s with %d emulated rails", EnvEmu, j, pc.Host, len(pc.Emu))
		}
		parts := make([]string, len(pc.Emu))
		for k, addr := range pc.Emu {
			name := fmt.Sprintf("emu%d", k)
			rails = append(rails, multirail.Rail{Name: name, Addr: addr, Bandwidth: b.cfg.emu[k].RateBps})
			infos = append(infos, RailInfo{Name: name, Remote: addr})
			parts[k] = fmt.Sprintf("%s %s>%s", name, b.cfg.emu[k], addr)
		}
		return rails, infos, fmt.Sprintf("rank %d -> rank %d (%s): %s", w.rank, j, pc.Host, strings.Join(parts, ", ")), nil
	case pc.HostID == me.HostID:
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(pc.Port))
		for k := range b.cfg.LoopbackRails {
			name := fmt.Sprintf("lo%d", k)
			rails = append(rails, multirail.Rail{Name: name, Addr: addr})
			infos = append(infos, RailInfo{Name: name, Local: "127.0.0.1", Remote: addr})
		}
		return rails, infos, netif.Describe(w.rank, j, pc.Host, nil, nil), nil
	}
	pairs, skipped := netif.Pair(netif.Host{ID: me.HostID, Ifaces: me.Ifaces}, netif.Host{ID: pc.HostID, Ifaces: pc.Ifaces})
	for _, p := range pairs {
		addr := netip.AddrPortFrom(p.Remote, uint16(pc.Port)).String()
		rails = append(rails, multirail.Rail{Name: p.LocalIface, Addr: addr, Local: p.Local.String(), Bandwidth: b.cfg.RailRates[p.LocalIface]})
		infos = append(infos, RailInfo{Name: p.LocalIface, Local: p.Local.String(), Remote: addr})
	}
	if len(rails) == 0 {
		addr := net.JoinHostPort(pc.Host, strconv.Itoa(pc.Port))
		rails = append(rails, multirail.Rail{Name: "routed", Addr: addr})
		infos = append(infos, RailInfo{Name: "routed", Remote: addr})
	}
	line := netif.Describe(w.rank, j, pc.Host, pairs, append(slices.Clone(skippedHere), skipped...))
	if len(pairs) == 0 {
		line += fmt.Sprintf("; one routed rail to %s", rails[0].Addr)
	}
	return rails, infos, line, nil
}

// dial connects to peer j, dropping (with a warning) rails that fail
// their handshake while at least one works.
func (b *boot) dial(ctx context.Context, w *world, tcfg multirail.Config, me, pc card, j int, skippedHere []netif.Skip) (*peer, string, error) {
	rails, infos, line, err := b.railsTo(w, me, pc, j, skippedHere)
	if err != nil {
		return nil, "", err
	}
	var conn *multirail.Conn
	for {
		cfg := tcfg
		cfg.Rails = rails
		conn, err = multirail.Dial(ctx, cfg)
		if err == nil {
			break
		}
		var re *multirail.RailError
		if !errors.As(err, &re) || len(rails) == 1 || errors.Is(err, multirail.ErrAuth) || ctx.Err() != nil {
			return nil, "", err
		}
		k := slices.IndexFunc(rails, func(r multirail.Rail) bool { return r.Name == re.Rail })
		if k < 0 {
			return nil, "", err
		}
		b.log.Warn("comm: dropping a rail that failed its handshake", "peer", j, "rail", re.Rail, "err", re.Err)
		line += fmt.Sprintf("; dropped %s (%v)", re.Rail, re.Err)
		rails = slices.Delete(rails, k, k+1)
		infos = slices.Delete(infos, k, k+1)
	}
	hb, _ := json.Marshal(hello{Job: b.info.JobID, Rank: w.rank})
	msg := append(appendHeader(nil, header{kind: kindHello, ctx: worldID, root: -1}), hb...)
	if err := conn.Send(ctx, connTagNotice, msg); err != nil {
		_ = conn.Close()
		return nil, "", err
	}
	return &peer{rank: j, host: pc.Host, conn: conn, rails: infos, room: make(chan struct{}, 1), done: make(chan struct{})}, line, nil
}

// accept takes the connections of every lower rank. Each announces
// itself with a hello; messages that overtook it are kept for the
// demultiplexer.
func (b *boot) accept(ctx context.Context, w *world, cards []card, mu *sync.Mutex, lines []string) error {
	want := w.rank
	got := 0
	for got < want {
		conn, err := b.ln.Accept(ctx)
		if err != nil {
			mu.Lock()
			var missing []string
			for r := range w.rank {
				if w.peers[r] == nil {
					missing = append(missing, strconv.Itoa(r))
				}
			}
			mu.Unlock()
			return fmt.Errorf("waiting for ranks %s to connect: %w", strings.Join(missing, ", "), err)
		}
		var early []multirail.Message
		var h hello
		for {
			m, err := conn.Recv(ctx)
			if err != nil {
				_ = conn.Close()
				return fmt.Errorf("reading a new connection's hello: %w", err)
			}
			if m.Tag == connTagNotice {
				if hh, payload, err := parseHeader(m.Data); err == nil && hh.kind == kindHello {
					if err := json.Unmarshal(payload, &h); err != nil {
						_ = conn.Close()
						return fmt.Errorf("bad hello: %w", err)
					}
					break
				}
			}
			early = append(early, m)
		}
		mu.Lock()
		switch {
		case h.Job != b.info.JobID:
			err = fmt.Errorf("a connection from job %q, this is job %q", h.Job, b.info.JobID)
		case h.Rank < 0 || h.Rank >= w.rank:
			err = fmt.Errorf("a connection from rank %d; only ranks 0..%d dial rank %d", h.Rank, w.rank-1, w.rank)
		case w.peers[h.Rank] != nil:
			err = fmt.Errorf("rank %d connected twice", h.Rank)
		}
		if err != nil {
			mu.Unlock()
			b.log.Warn("comm: refusing a connection", "err", err)
			_ = conn.Close()
			continue
		}
		pc := cards[h.Rank]
		if len(b.lnRails) > 0 {
			// The peer's rails, in its order, end at these NICs here.
			me := cards[w.rank]
			pairs, _ := netif.Pair(netif.Host{ID: pc.HostID, Ifaces: pc.Ifaces}, netif.Host{ID: me.HostID, Ifaces: me.Ifaces})
			var ends []string
			for _, p := range pairs {
				ends = append(ends, p.RemoteIface)
			}
			if !slices.Equal(ends, b.lnRails) {
				b.log.Warn("comm: the rails from a peer end at other NICs than the rates this rank's listener assumed; the reverse direction's rates may be misplaced", "peer", h.Rank, "ends", ends, "assumed", b.lnRails)
			}
		}
		var infos []RailInfo
		for _, rs := range conn.Stats().Rails {
			infos = append(infos, RailInfo{Name: rs.Name, Remote: rs.Name})
		}
		p := &peer{rank: h.Rank, host: pc.Host, conn: conn, rails: infos, room: make(chan struct{}, 1), done: make(chan struct{}), early: early}
		w.peers[h.Rank] = p
		b.conns[h.Rank] = conn
		lines[h.Rank] = fmt.Sprintf("rank %d <- rank %d (%s): %d rails, dialled by rank %d", w.rank, h.Rank, pc.Host, len(infos), h.Rank)
		mu.Unlock()
		got++
	}
	return nil
}

// NewLocal starts a world of n ranks inside this process, joined over
// loopback (or cfg.Emu's emulated rails) by the same bootstrap as Init,
// with a file:// rendezvous in a fresh temporary directory: for tests and
// examples. Close every returned communicator.
func NewLocal(ctx context.Context, n int, cfg Config) ([]*Comm, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: NewLocal: n = %d; allowed: >= 1", ErrConfig, n)
	}
	dir, err := os.MkdirTemp("", "multirail-local-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	host, _ := os.Hostname()
	job := fmt.Sprintf("local-%d-%d", os.Getpid(), time.Now().UnixNano())
	comms := make([]*Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			info := launch.Info{Launcher: "local", Rank: r, Size: n, LocalRank: r, LocalSize: n, JobID: job, Rdzv: "file://" + dir + "/rdzv", Host: host}
			comms[r], errs[r] = Start(ctx, info, cfg)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range comms {
			if c != nil {
				_ = c.Close()
			}
		}
		return nil, err
	}
	return comms, nil
}

// jobToken is the token of the job's connections and rendezvous: the one
// given (Config.Transport.Token, MULTIRAIL_TOKEN or MULTIRAIL_TOKEN_FILE);
// with none, for a file:// rendezvous the store's own (rdzv.FileToken: the
// first rank creates it, readable by its user only, so that ranks on one
// host need no variable), and for a job of one rank a random one (nobody
// connects). Anything else without a token is left to the transport's
// check, which refuses it unless Insecure.
func jobToken(given string, info launch.Info) (string, error) {
	tok, err := tokens.Resolve(given)
	if err != nil || tok != "" {
		return tok, err
	}
	switch {
	case strings.HasPrefix(info.Rdzv, "file://"):
		return rdzv.FileToken(info.Rdzv)
	case info.Size == 1:
		return multirail.NewToken(), nil
	}
	return "", nil
}
