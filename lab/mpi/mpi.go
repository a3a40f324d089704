package mpi

import (
	"bufio"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Source is src/mrbw.c.
//
//go:embed src/mrbw.c
var Source []byte

// Available reports whether mpicc and mpirun are on PATH.
func Available() error {
	var missing []string
	for _, tool := range []string{"mpicc", "mpirun"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("mpi: %s not found in PATH: install openmpi-bin and libopenmpi-dev (scripts/lab-deps.sh)", strings.Join(missing, " and "))
	}
	return nil
}

// CacheDir is where Build puts the program by default:
// $XDG_CACHE_HOME/multirail/lab, or ~/.cache/multirail/lab.
func CacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "multirail", "lab"), nil
}

// Build compiles Source with mpicc into dir, unless a binary of the same
// source is there already, and returns its path.
func Build(ctx context.Context, dir string) (string, error) {
	return build(ctx, dir, "mrbw", Source)
}

// build compiles source with mpicc into dir as name-HASH, HASH the start of
// the source's SHA-256, unless a binary of that name is there already, and
// returns its path.
func build(ctx context.Context, dir, name string, source []byte) (string, error) {
	sum := sha256.Sum256(source)
	bin := filepath.Join(dir, name+"-"+hex.EncodeToString(sum[:6]))
	if st, err := os.Stat(bin); err == nil && st.Mode()&0o111 != 0 {
		return bin, nil
	}
	if err := Available(); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("mpi: %w", err)
	}
	src := bin + ".c"
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return "", fmt.Errorf("mpi: %w", err)
	}
	tmp := bin + ".tmp"
	out, err := exec.CommandContext(ctx, "mpicc", "-O2", "-o", tmp, src).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("mpi: mpicc -O2 -o %s %s: %v: %s", tmp, src, err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("mpi: %w", err)
	}
	return bin, nil
}

// Job is one mrbw run between the two namespaces of a lab.
type Job struct {
	// Hosts are the namespace names of rank 0 (the sender) and rank 1;
	// they double as host names.
	Hosts [2]string
	// RshAgent is Open MPI's plm_rsh_agent: a command (words separated by
	// spaces, so no spaces inside them) that takes ssh-like arguments,
	// "[options] HOST COMMAND...", and runs COMMAND in namespace HOST.
	RshAgent string
	// OOBNet is the subnet of Open MPI's out-of-band traffic (the lab's
	// control link).
	OOBNet string
	// RailNets are the subnets the TCP BTL may use, one per rail.
	RailNets []string
	// RailDevs and BandwidthMbps, when BandwidthMbps is not nil, set
	// btl_tcp_bandwidth_<dev> per rail: Open MPI's hand-set striping
	// weights. nil keeps Open MPI's default weights.
	RailDevs      []string
	BandwidthMbps []int
	// Program is mrbw's path; Size, Seconds and Window its arguments.
	Program string
	Size    int
	Seconds float64
	Window  int
}

// Args is the mpirun command line of j (argv, "mpirun" first): two ranks,
// one per host, ob1 with the TCP BTL on the rails only, out-of-band
// traffic on OOBNet, no binding to cores.
func Args(j Job) []string {
	args := launch(j.Hosts[:], j.RshAgent, j.OOBNet, j.RailNets, j.RailDevs, j.BandwidthMbps)
	return append(args, j.Program, strconv.Itoa(j.Size), strconv.FormatFloat(j.Seconds, 'f', -1, 64), strconv.Itoa(j.Window))
}

// launch is the start of an mpirun command line, up to the program: one
// rank on each host, in order, and the MCA parameters of Job's fields of
// the same names.
func launch(hosts []string, rshAgent, oobNet string, railNets, railDevs []string, bandwidthMbps []int) []string {
	args := LaunchArgs(CollJob{Hosts: hosts, RshAgent: rshAgent, OOBNet: oobNet})
	args = append(args, mca("pml", "ob1")...)
	args = append(args, mca("btl", "tcp,self")...)
	args = append(args, mca("btl_tcp_if_include", strings.Join(railNets, ","))...)
	for i, bw := range bandwidthMbps {
		if i < len(railDevs) {
			args = append(args, mca("btl_tcp_bandwidth_"+railDevs[i], strconv.Itoa(bw))...)
		}
	}
	return args
}

// mca is the mpirun arguments that set MCA parameter k to v.
func mca(k, v string) []string { return []string{"--mca", k, v} }

// Env is what mpirun needs in its environment on top of the caller's:
// permission to run as root.
func Env() []string {
	return []string{"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"}
}

// Event is one line of mrbw's output.
type Event struct {
	Kind string    // "start", "win" or "done"
	Time time.Time // start, win: when it happened
	// Bytes is a window's payload (win) or the total (done).
	Bytes int64
	// Windows and Seconds are set for done.
	Windows int64
	Seconds float64
}

// ErrNoEvent is returned by ParseLine for lines that are not mrbw's.
var ErrNoEvent = errors.New("mpi: not an mrbw line")

// ParseLine parses one line of mrbw's output. Lines that are not mrbw's
// (Open MPI's own messages) give ErrNoEvent.
func ParseLine(line string) (Event, error) {
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "MRBW" {
		return Event{}, ErrNoEvent
	}
	bad := func() (Event, error) { return Event{}, fmt.Errorf("mpi: malformed mrbw line %q", line) }
	ev := Event{Kind: f[1]}
	switch ev.Kind {
	case "start", "win":
		t, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return bad()
		}
		sec := int64(t)
		ev.Time = time.Unix(sec, int64((t-float64(sec))*1e9))
		if ev.Kind == "win" {
			if len(f) != 4 {
				return bad()
			}
			if ev.Bytes, err = strconv.ParseInt(f[3], 10, 64); err != nil {
				return bad()
			}
		}
	case "done":
		if len(f) != 5 {
			return bad()
		}
		var err1, err2, err3 error
		ev.Windows, err1 = strconv.ParseInt(f[2], 10, 64)
		var b float64
		b, err2 = strconv.ParseFloat(f[3], 64)
		ev.Bytes = int64(b)
		ev.Seconds, err3 = strconv.ParseFloat(f[4], 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return bad()
		}
	default:
		return bad()
	}
	return ev, nil
}

// Scan reads mrbw's output from r and sends each event to fn; other lines
// go to other (may be nil). It returns at EOF.
func Scan(r io.Reader, fn func(Event), other func(string)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		ev, err := ParseLine(sc.Text())
		switch {
		case err == nil:
			fn(ev)
		case other != nil:
			other(sc.Text())
		}
	}
	return sc.Err()
}

// Spread turns the window completions of one run into bytes per bucket
// since epoch: each window's bytes are spread evenly over the time since
// the previous window completed (since epoch for the first), so that
// windows longer than a bucket do not make spikes. Buckets past n are
// dropped.
func Spread(epoch time.Time, wins []Event, width time.Duration, n int) []int64 {
	out := make([]int64, n)
	prev := epoch
	for _, w := range wins {
		lo, hi := prev.Sub(epoch), w.Time.Sub(epoch)
		prev = w.Time
		if hi <= lo {
			if i := int(hi / width); hi >= 0 && i < n {
				out[i] += w.Bytes
			}
			continue
		}
		span := float64(hi - lo)
		for i := max(int(lo/width), 0); i < n && time.Duration(i)*width < hi; i++ {
			a, b := max(lo, time.Duration(i)*width), min(hi, time.Duration(i+1)*width)
			if b > a {
				out[i] += int64(float64(w.Bytes) * float64(b-a) / span)
			}
		}
	}
	return out
}
