package lab

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// CPUSample is the machine's busy CPU time (all CPUs together) at a
// moment: kernel work counts too, for whichever process caused it.
type CPUSample struct {
	At   time.Time
	Busy time.Duration
}

// userHZ is the unit of /proc/stat's counters (USER_HZ, 100 on Linux).
const userHZ = 100

// ErrProcStat means /proc/stat's text is not as expected.
var ErrProcStat = errors.New("lab: unexpected /proc/stat")

// ParseProcStat returns the busy time of all CPUs from the text of
// /proc/stat: user + nice + system + irq + softirq of its "cpu" line (guest
// time is inside user already; idle, iowait and the time a hypervisor
// stole are not busy).
func ParseProcStat(b []byte) (time.Duration, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 8 || string(f[0]) != "cpu" {
		return 0, fmt.Errorf("%w: first line %.60q", ErrProcStat, line)
	}
	var busy uint64
	for _, i := range []int{1, 2, 3, 6, 7} { // user nice system (idle iowait) irq softirq
		v, err := strconv.ParseUint(string(f[i]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: field %d of the cpu line: %q", ErrProcStat, i, f[i])
		}
		busy += v
	}
	return time.Duration(busy) * (time.Second / userHZ), nil
}

// ReadCPU samples the machine's busy CPU time now.
func ReadCPU() (CPUSample, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUSample{}, err
	}
	busy, err := ParseProcStat(b)
	return CPUSample{At: time.Now(), Busy: busy}, err
}

// CPUBetween is the busy CPU time between t0 and t1 (t0 < t1), linearly
// interpolated from samples in time order; false when the samples do not
// cover [t0, t1].
func CPUBetween(s []CPUSample, t0, t1 time.Time) (time.Duration, bool) {
	b0, ok0 := busyAt(s, t0)
	b1, ok1 := busyAt(s, t1)
	if !ok0 || !ok1 || !t0.Before(t1) {
		return 0, false
	}
	return b1 - b0, true
}

func busyAt(s []CPUSample, t time.Time) (time.Duration, bool) {
	for i := 1; i < len(s); i++ {
		a, b := s[i-1], s[i]
		if t.Before(a.At) || t.After(b.At) {
			continue
		}
		span := b.At.Sub(a.At)
		if span <= 0 {
			return a.Busy, true
		}
		frac := float64(t.Sub(a.At)) / float64(span)
		return a.Busy + time.Duration(frac*float64(b.Busy-a.Busy)), true
	}
	return 0, false
}
