package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// StateDir holds one directory per lab prefix with the lab's state, so
// that `multirail lab status|load|down` in another process, and the next
// Up after a crash, find what a lab built and changed.
const StateDir = "/run/multirail-lab"

// allowedCCPath is the init namespace's list of congestion controls other
// namespaces may choose as their default.
const allowedCCPath = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"

// State is what a lab records under StateDir/<prefix>/state.json.
type State struct {
	Prefix string `json:"prefix"`
	// Hosts is the number of hosts; 0 in states written before clusters
	// (two hosts).
	Hosts      int       `json:"hosts,omitempty"`
	RatesBps   []float64 `json:"rates_bps"`
	CC         string    `json:"cc"`
	TBFLatency float64   `json:"tbf_latency_s"`
	Offloads   bool      `json:"offloads"`
	PID        int       `json:"pid"`
	Created    time.Time `json:"created"`
	// AllowedCCOrig is the init namespace's
	// net.ipv4.tcp_allowed_congestion_control before Up added CC to it;
	// empty when Up did not change it (CC was allowed already).
	AllowedCCOrig string `json:"allowed_cc_orig,omitempty"`
	// AllowedCCAdded is the name Up added to that list ("" if none).
	AllowedCCAdded string `json:"allowed_cc_added,omitempty"`
}

func stateDir(prefix string) string  { return filepath.Join(StateDir, prefix) }
func statePath(prefix string) string { return filepath.Join(stateDir(prefix), "state.json") }

// ReadState reads the state of the lab with prefix; an error wrapping
// os.ErrNotExist when no such lab was built.
func ReadState(prefix string) (State, error) {
	var st State
	b, err := os.ReadFile(statePath(prefix))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("lab: %s: %w", statePath(prefix), err)
	}
	return st, nil
}

func writeState(st State) error {
	if err := os.MkdirAll(stateDir(st.Prefix), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(st.Prefix) + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, statePath(st.Prefix))
}

// Prefixes lists the prefixes of the labs recorded under StateDir.
func Prefixes() []string {
	ents, err := os.ReadDir(StateDir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			if _, err := os.Stat(statePath(e.Name())); err == nil {
				out = append(out, e.Name())
			}
		}
	}
	return out
}

// ccList splits a congestion-control list as the kernel prints it.
func ccList(s string) []string { return strings.Fields(s) }

// withCC returns list with cc appended, and whether it was missing.
func withCC(list, cc string) (string, bool) {
	l := ccList(list)
	if slices.Contains(l, cc) {
		return strings.Join(l, " "), false
	}
	return strings.Join(append(l, cc), " "), true
}

// withoutCC returns list without cc.
func withoutCC(list, cc string) string {
	return strings.Join(slices.DeleteFunc(ccList(list), func(s string) bool { return s == cc }), " ")
}

// allowCC adds cc to the init namespace's allowed list when missing and
// returns the list as it was and whether it changed it. The caller holds
// the global lock.
func allowCC(cc string) (orig string, added bool, err error) {
	b, err := os.ReadFile(allowedCCPath)
	if err != nil {
		return "", false, fmt.Errorf("lab: reading %s: %w", allowedCCPath, err)
	}
	orig = strings.TrimSpace(string(b))
	next, missing := withCC(orig, cc)
	if !missing {
		return orig, false, nil
	}
	if err := os.WriteFile(allowedCCPath, []byte(next), 0o644); err != nil {
		avail, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
		return orig, false, fmt.Errorf("lab: congestion control %q cannot be allowed (%w); available: %s", cc, err, strings.TrimSpace(string(avail)))
	}
	return orig, true, nil
}

// disallowCC removes cc from the init namespace's allowed list again. Only
// the name this lab added is removed, whatever else changed meanwhile;
// namespaces that already chose cc as their default keep it. The caller
// holds the global lock.
func disallowCC(cc string) error {
	b, err := os.ReadFile(allowedCCPath)
	if err != nil {
		return err
	}
	cur := strings.TrimSpace(string(b))
	next := withoutCC(cur, cc)
	if next == cur {
		return nil
	}
	return os.WriteFile(allowedCCPath, []byte(next), 0o644)
}

// errPrefixBusy is returned when another live process holds a prefix.
var errPrefixBusy = errors.New("lab: prefix in use")
