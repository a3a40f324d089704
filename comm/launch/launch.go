package launch

import (
	"errors"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"strconv"
	"strings"
)

// Launcher names, as Info.Launcher holds them.
const (
	Multirail = "multirail" // multirail run, or MULTIRAIL_* set by hand
	Torchrun  = "torchrun"  // torchrun / torch.distributed.run (TorchElastic)
	Env       = "env"       // plain env:// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
	OpenMPI   = "ompi"      // Open MPI mpirun / mpiexec
	MPICH     = "mpich"     // MPICH Hydra mpiexec (and other PMI launchers)
	Slurm     = "slurm"     // Slurm srun
	K8s       = "k8s"       // Kubernetes Indexed Job
)

// Unknown is the value of Info.LocalRank and Info.LocalSize when the
// launcher does not give them (plain env://, MPICH without
// MPI_LOCALNRANKS, MULTIRAIL_* by hand without the local pair): the
// rendezvous can derive them from the table of host identities.
const Unknown = -1

// DefaultPort is the tcp rendezvous port of a Kubernetes Indexed Job when
// MULTIRAIL_RDZV_PORT does not give one. Each pod has its own network
// namespace, so a fixed port cannot collide with another job; 29600 stays
// clear of torch's 29400 (c10d) and 29500/29501 (MASTER_PORT, +1), and
// below Linux's ephemeral range (32768-60999).
const DefaultPort = 29600

// The tcp rendezvous port of a multi-node Slurm step, when neither
// MULTIRAIL_RDZV_PORT nor SLURM_STEP_RESV_PORTS gives one, is
//
//	SlurmPortBase + FNV-1a-32("<SLURM_JOB_ID>.<SLURM_STEP_ID>") % SlurmPortCount
//
// that is 20100..23999: every rank computes the same port without talking
// to anyone, and two steps sharing a first node get different ports unless
// their hashes collide (1 in 3900). The range is far from the well-known
// (0-1023) ports and the usual HPC daemons (Slurm 6817-6819, PBS
// 15001-15004, Ray workers 10002-19999, torch 29400/29500/29501), below
// Kubernetes NodePorts (30000-32767) and below Linux's default ephemeral
// range (32768-60999, net.ipv4.ip_local_port_range), so an outgoing
// connection on the node cannot already hold it.
const (
	SlurmPortBase  = 20100
	SlurmPortCount = 3900
)

// Info is what a process learns from its launcher.
type Info struct {
	// Launcher is one of Multirail, Torchrun, Env, OpenMPI, MPICH, Slurm,
	// K8s.
	Launcher string
	// Rank is in [0, Size); Size >= 1.
	Rank, Size int
	// LocalRank is in [0, LocalSize) and LocalSize <= Size, or either is
	// Unknown when the launcher does not say.
	LocalRank, LocalSize int
	// JobID identifies the job (the same on every rank); empty when the
	// launcher gives none (plain env://, MULTIRAIL_* by hand without
	// MULTIRAIL_JOB_ID). MULTIRAIL_JOB_ID overrides it for every launcher.
	JobID string
	// Rdzv is the rendezvous URL: "tcp://host:port" or "file:///abs/dir"
	// (see ParseRdzv). It is empty only when Size is 1 and nothing gave
	// one: a lone rank needs no rendezvous.
	Rdzv string
	// Serve is true when this process (rank 0) must itself serve the tcp
	// rendezvous on Rdzv's port. It is false for every other rank, for
	// file:// and when MULTIRAIL_RDZV_SERVE=0 says an external server
	// (multirail run) serves it.
	Serve bool
	// Host is the host name Detect was given.
	Host string
	// Sources names the environment variables used, in the order they
	// were read, for `multirail env` to print.
	Sources []string
}

// ErrNoLauncher is returned (wrapped, test with errors.Is) when no
// launcher's variables are present. The error's message names every
// variable looked for and which of them were set. A caller may treat it as
// a singleton run (rank 0 of 1), as MPI does without mpirun.
var ErrNoLauncher = errors.New("launch: no launcher detected")

// DetectEnv is Detect over an os.Environ()-style list of "KEY=VALUE"
// entries; when a key repeats, the last entry wins. Entries without '='
// are ignored.
func DetectEnv(env []string, host string) (Info, error) {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return Detect(func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}, host)
}

// Detect works out which launcher started this process and what it says:
// rank, size, local rank and size, job id and where the rendezvous is.
// getenv is os.LookupEnv or a stand-in; host is this process's host name
// (os.Hostname()). Detect does no I/O: the result depends on its arguments
// only. A variable set to the empty string counts as unset.
//
// The first launcher whose variables are present wins, in this order
// (the package documentation says why):
//
//	MULTIRAIL_RANK          multirail run, or by hand
//	TORCHELASTIC_RUN_ID     torchrun
//	RANK+WORLD_SIZE+MASTER_ADDR  plain env://
//	OMPI_COMM_WORLD_RANK    Open MPI
//	PMI_RANK                MPICH/Hydra, unless Slurm set it (PMI_JOBID=<job>.<step>)
//	SLURM_PROCID            Slurm srun
//	JOB_COMPLETION_INDEX    Kubernetes Indexed Job
//
// Whatever the launcher, MULTIRAIL_RDZV replaces the rendezvous it implies,
// MULTIRAIL_RDZV_PORT replaces the port of a tcp rendezvous it implies,
// MULTIRAIL_JOB_ID replaces its job id and MULTIRAIL_RDZV_SERVE=0 stops
// rank 0 from serving a tcp rendezvous.
//
// Every error is one line naming the variable, its value and what is
// allowed; ErrNoLauncher when nothing fits.
func Detect(getenv func(string) (string, bool), host string) (Info, error) {
	l := &lookup{getenv: getenv}
	var (
		p   plan
		err error
	)
	switch {
	case l.has("MULTIRAIL_RANK"):
		p, err = detectMultirail(l)
	case l.has("TORCHELASTIC_RUN_ID"):
		p, err = detectTorchrun(l)
	case l.has("RANK") && l.has("WORLD_SIZE") && l.has("MASTER_ADDR"):
		p, err = detectEnv(l)
	case l.has("OMPI_COMM_WORLD_RANK"):
		p, err = detectOMPI(l)
	case l.has("PMI_RANK") && !slurmOwnsPMI(l):
		p, err = detectMPICH(l)
	case l.has("SLURM_PROCID"):
		p, err = detectSlurm(l, host)
	case l.has("JOB_COMPLETION_INDEX"):
		p, err = detectK8s(l, host)
	default:
		return Info{}, noLauncher(l)
	}
	if err != nil {
		return Info{}, err
	}
	info := p.info
	info.Host = host
	if info.Launcher != Multirail {
		if v, ok := l.get("MULTIRAIL_JOB_ID"); ok {
			info.JobID = v
		}
	}
	var r Rdzv
	switch v, ok := l.get("MULTIRAIL_RDZV"); {
	case ok:
		if r, err = parseRdzv(v); err != nil {
			return Info{}, fmt.Errorf("launch: MULTIRAIL_RDZV=%v", err)
		}
	case p.needRdzv != "":
		return Info{}, errors.New(p.needRdzv)
	case p.oneHost:
		if info.JobID == "" {
			return Info{}, errors.New(p.noJobID)
		}
		dir, err := tmpDir(l)
		if err != nil {
			return Info{}, err
		}
		r = Rdzv{Scheme: "file", Dir: filepath.Join(dir, "multirail-rdzv-"+sanitize(info.JobID))}
	case p.host != "":
		if !validHost(p.host) {
			return Info{}, fmt.Errorf("launch: %s=%q: want a host name or an IP address (rank 0's host)", p.hostVar, clip(p.hostVal))
		}
		r = Rdzv{Scheme: "tcp", Host: p.host, Port: p.port}
		if v, ok := l.get("MULTIRAIL_RDZV_PORT"); ok {
			if r.Port, err = portValue("MULTIRAIL_RDZV_PORT", v, 0); err != nil {
				return Info{}, err
			}
		}
	}
	if r.Scheme != "" {
		info.Rdzv = r.String()
	}
	// MULTIRAIL_RDZV_SERVE is checked on every rank, so that a bad value
	// stops the whole job rather than rank 0 alone.
	serve := true
	if v, ok := l.get("MULTIRAIL_RDZV_SERVE"); ok {
		switch v {
		case "0", "false", "False", "FALSE":
			serve = false
		case "1", "true", "True", "TRUE":
		default:
			return Info{}, fmt.Errorf("launch: MULTIRAIL_RDZV_SERVE=%q: want 0 (an external server such as multirail run serves the rendezvous) or 1 (rank 0 serves it, the default)", clip(v))
		}
	}
	info.Serve = serve && r.Scheme == "tcp" && info.Rank == 0
	info.Sources = l.used
	return info, nil
}

// plan is what a launcher's detection yields: the Info so far and how to
// find the rendezvous when MULTIRAIL_RDZV does not say.
type plan struct {
	info Info
	// needRdzv, when set, is the error to return without MULTIRAIL_RDZV.
	needRdzv string
	// oneHost: all ranks share this host; the rendezvous is a file://
	// store under the temp dir keyed by the job id, or the error noJobID
	// when there is no job id.
	oneHost bool
	noJobID string
	// host and port of a tcp rendezvous (when host != ""); hostVar and
	// hostVal name the variable the host came from, for errors.
	host             string
	port             int
	hostVar, hostVal string
}

// lookup reads the environment and records what was used.
type lookup struct {
	getenv func(string) (string, bool)
	used   []string
}

// has reports whether k is set and non-empty, without recording it.
func (l *lookup) has(k string) bool {
	v, ok := l.getenv(k)
	return ok && v != ""
}

// get returns k's value when set and non-empty, and records it as used.
func (l *lookup) get(k string) (string, bool) {
	v, ok := l.getenv(k)
	if !ok || v == "" {
		return "", false
	}
	for _, u := range l.used {
		if u == k {
			return v, true
		}
	}
	l.used = append(l.used, k)
	return v, true
}

// first returns the first of names that is set, its value and whether any
// was.
func (l *lookup) first(names ...string) (name, value string, ok bool) {
	for _, n := range names {
		if v, ok := l.get(n); ok {
			return n, v, true
		}
	}
	return "", "", false
}

// need returns k's value, or an error saying which launcher wanted it.
func (l *lookup) need(who, k string) (string, error) {
	if v, ok := l.get(k); ok {
		return v, nil
	}
	return "", fmt.Errorf("launch: %s, but %s is not set", who, k)
}

// rankSize reads a rank and a size variable, both required: size >= 1,
// rank in [0, size).
func (l *lookup) rankSize(who, rankVar, sizeVar string) (rank, size int, err error) {
	rs, err := l.need(who, rankVar)
	if err != nil {
		return 0, 0, err
	}
	ss, err := l.need(who, sizeVar)
	if err != nil {
		return 0, 0, err
	}
	size, ok := smallUint(ss)
	if !ok || size < 1 {
		return 0, 0, fmt.Errorf("launch: %s=%q: want an integer >= 1", sizeVar, clip(ss))
	}
	rank, ok = smallUint(rs)
	if !ok || rank >= size {
		return 0, 0, fmt.Errorf("launch: %s=%q: want an integer in [0, %d) (%s=%d)", rankVar, clip(rs), size, sizeVar, size)
	}
	return rank, size, nil
}

// local reads an optional local rank and local size (each Unknown when
// unset) and checks them against each other and size: local size in
// [1, size], local rank in [0, local size) (or [0, size) when the local
// size is unknown).
func (l *lookup) local(lrVar, lsVar string, size int, sizeVar string) (lrank, lsize int, err error) {
	lrank, lsize = Unknown, Unknown
	if v, ok := l.get(lsVar); ok {
		n, ok := smallUint(v)
		if !ok || n < 1 || n > size {
			return 0, 0, fmt.Errorf("launch: %s=%q: want an integer in [1, %d] (%s=%d)", lsVar, clip(v), size, sizeVar, size)
		}
		lsize = n
	}
	if v, ok := l.get(lrVar); ok {
		limit, limitVar := size, sizeVar
		if lsize != Unknown {
			limit, limitVar = lsize, lsVar
		}
		n, ok := smallUint(v)
		if !ok || n >= limit {
			return 0, 0, fmt.Errorf("launch: %s=%q: want an integer in [0, %d) (%s=%d)", lrVar, clip(v), limit, limitVar, limit)
		}
		lrank = n
	}
	return lrank, lsize, nil
}

// portValue parses a port; add is added first (torchrun's MASTER_PORT+1).
func portValue(name, v string, add int) (int, error) {
	n, ok := smallUint(v)
	if !ok || n < 1 || n+add > 65535 {
		if add > 0 {
			return 0, fmt.Errorf("launch: %s=%q: want an integer in 1..%d (the rendezvous uses %s+%d)", name, clip(v), 65535-add, name, add)
		}
		return 0, fmt.Errorf("launch: %s=%q: want a port in 1..65535", name, clip(v))
	}
	return n + add, nil
}

// tmpDir is TMPDIR from the environment, or /tmp.
func tmpDir(l *lookup) (string, error) {
	v, ok := l.get("TMPDIR")
	if !ok {
		return "/tmp", nil
	}
	if !filepath.IsAbs(v) || strings.ContainsRune(v, 0) {
		return "", fmt.Errorf("launch: TMPDIR=%q: want an absolute path (the one-host file:// rendezvous lives there), or unset it for /tmp", clip(v))
	}
	return filepath.Clean(v), nil
}

// sanitize turns a job id into a file name component: letters, digits,
// '.', '_' and '-' stay, anything else becomes '_'; a long id is cut and
// suffixed with a hash of the whole so that distinct ids stay distinct.
func sanitize(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	const max = 100
	if len(b) > max {
		h := fnv.New64a()
		h.Write([]byte(id))
		return string(b[:max-17]) + "-" + strconv.FormatUint(h.Sum64(), 16)
	}
	return string(b)
}

// noLauncher builds the ErrNoLauncher error: every variable looked for,
// and those of them that are set (a launcher half there).
func noLauncher(l *lookup) error {
	looked := []string{
		"MULTIRAIL_RANK", "MULTIRAIL_SIZE", "MULTIRAIL_RDZV", "TORCHELASTIC_RUN_ID",
		"RANK", "WORLD_SIZE", "MASTER_ADDR", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
		"SLURM_PROCID", "JOB_COMPLETION_INDEX",
	}
	var set []string
	for _, k := range looked {
		if l.has(k) {
			set = append(set, k)
		}
	}
	what := "none of them is set"
	if len(set) > 0 {
		what = "set: " + strings.Join(set, ", ")
	}
	return fmt.Errorf("%w: looked for MULTIRAIL_RANK (multirail run, or by hand with MULTIRAIL_SIZE and MULTIRAIL_RDZV), "+
		"TORCHELASTIC_RUN_ID (torchrun), RANK+WORLD_SIZE+MASTER_ADDR (env://), OMPI_COMM_WORLD_RANK (Open MPI), "+
		"PMI_RANK (MPICH/Hydra), SLURM_PROCID (Slurm srun), JOB_COMPLETION_INDEX (Kubernetes Indexed Job); %s",
		ErrNoLauncher, what)
}
