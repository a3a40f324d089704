package launch

import (
	"fmt"
	"net"
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
	const want = `want tcp://host:port or file:///absolute/dir`
	if rest, ok := strings.CutPrefix(s, "tcp://"); ok {
		host, portS, err := net.SplitHostPort(rest)
		if err != nil || host == "" || strings.ContainsAny(host, "/?#@ \t") {
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
