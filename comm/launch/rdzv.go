package launch

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
)

// Rdzv is a parsed rendezvous URL: "tcp://host:port" or "file:///abs/dir".
type Rdzv struct {
	Scheme string // "tcp" or "file"
	Host   string // tcp: a host name or IP address (no brackets)
	Port   int    // tcp: 1..65535
	Dir    string // file: an absolute, cleaned directory path
}

// String formats r back into a URL: tcp://host:port (IPv6 literals in
// brackets) or file:///dir (the path as is, not percent-encoded).
func (r Rdzv) String() string {
	if r.Scheme == "file" {
		return "file://" + r.Dir
	}
	return "tcp://" + net.JoinHostPort(r.Host, strconv.Itoa(r.Port))
}

// ParseRdzv parses a rendezvous URL as MULTIRAIL_RDZV holds it:
// "tcp://host:port" (port 1..65535, IPv6 literals in brackets) or
// "file:///abs/dir" (an absolute path after "file://", taken literally:
// no host, no percent-decoding). Anything else is an error saying what is
// allowed.
func ParseRdzv(s string) (Rdzv, error) {
	r, err := parseRdzv(s)
	if err != nil {
		return r, fmt.Errorf("launch: rendezvous URL %w", err)
	}
	return r, nil
}

// parseRdzv is ParseRdzv with errors that start with the quoted URL, for
// callers that say where it came from.
func parseRdzv(s string) (Rdzv, error) {
	const want = `want tcp://host:port or file:///absolute/dir`
	if rest, ok := strings.CutPrefix(s, "tcp://"); ok {
		host, portS, err := net.SplitHostPort(rest)
		if err != nil || !validHost(host) {
			return Rdzv{}, fmt.Errorf("%q: bad host:port after tcp:// (%s)", clip(s), want)
		}
		port, ok := smallUint(portS)
		if !ok || port < 1 || port > 65535 {
			return Rdzv{}, fmt.Errorf("%q: port %q is not in 1..65535", clip(s), clip(portS))
		}
		return Rdzv{Scheme: "tcp", Host: host, Port: port}, nil
	}
	if rest, ok := strings.CutPrefix(s, "file://"); ok {
		if !strings.HasPrefix(rest, "/") || strings.ContainsRune(rest, 0) {
			return Rdzv{}, fmt.Errorf("%q: the path after file:// must be absolute (%s)", clip(s), want)
		}
		return Rdzv{Scheme: "file", Dir: filepath.Clean(rest)}, nil
	}
	return Rdzv{}, fmt.Errorf("%q: unknown scheme (%s)", clip(s), want)
}

// validHost reports whether h can be a rendezvous host: a host name or an
// IP address (IPv6 without brackets, zone allowed). Nothing else has to
// resolve here; that is the dialler's job.
func validHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	if strings.Contains(h, ":") {
		if _, zone, ok := strings.Cut(h, "%"); ok && !nameChars(zone) {
			return false
		}
		_, err := netip.ParseAddr(h)
		return err == nil
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("/?#@[]%\\", c) >= 0 {
			return false
		}
	}
	return true
}

// nameChars reports whether s is non-empty and only letters, digits, '-',
// '_' and '.' (an interface name as an IPv6 zone).
func nameChars(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
