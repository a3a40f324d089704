package labbench

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseRsh(t *testing.T) {
	for _, tc := range []struct {
		args []string
		host string
		cmd  []string
		err  string
	}{
		{[]string{"mrB", "orted", "-mca", "ess", "env"}, "mrB", []string{"orted", "-mca", "ess", "env"}, ""},
		{[]string{"-x", "-T", "mrbB", "PATH=/usr/bin", ";", "orted"}, "mrbB", []string{"PATH=/usr/bin", ";", "orted"}, ""},
		{[]string{"-p", "22", "-o", "BatchMode=yes", "-l", "root", "mrB", "echo", "hi"}, "mrB", []string{"echo", "hi"}, ""},
		{[]string{"--", "mrB", "true"}, "mrB", []string{"true"}, ""},
		{[]string{"mrB"}, "", nil, "lab rsh mrB: no command"},
		{[]string{}, "", nil, "lab rsh: no host"},
		{[]string{"-x"}, "", nil, "lab rsh: no host"},
		{[]string{"mr;B", "true"}, "", nil, "namespace name"},
	} {
		host, cmd, err := ParseRsh(tc.args)
		if tc.err != "" {
			var re *RshError
			if !errors.As(err, &re) || !errors.Is(err, ErrRsh) || !strings.Contains(re.Msg, tc.err) || !strings.HasPrefix(err.Error(), "labbench: lab rsh") {
				t.Errorf("%q: err %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || host != tc.host || !slices.Equal(cmd, tc.cmd) {
			t.Errorf("%q: %q %q %v; want %q %q", tc.args, host, cmd, err, tc.host, tc.cmd)
		}
	}
	argv := RshArgv("/sbin/ip", "mrB", []string{"orted", "-mca", "x", `"y z"`})
	want := []string{"/sbin/ip", "netns", "exec", "mrB", "unshare", "--uts", "sh", "-c", `hostname "$0" && exec sh -c "$1"`, "mrB", `orted -mca x "y z"`}
	if !slices.Equal(argv, want) {
		t.Errorf("RshArgv: %q", argv)
	}
}
