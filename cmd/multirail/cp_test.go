package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/multirail/multirail"
)

func TestCpFlags(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cp"}, "needs SRC"},
		{[]string{"cp", "x"}, "--rails is required"},
		{[]string{"cp", "--serve", "/tmp", "x"}, "takes no SRC"},
		{[]string{"cp", "--serve", missing}, "not a directory"},
		{[]string{"cp", "--serve", "/tmp", "--listen", "nowhere"}, "--listen \"nowhere\""},
		{[]string{"cp", "--rails", "tcp:10.0.0.1>10.0.0.2", missing}, "no such file"},
		{[]string{"cp", "--rails", "emu:100mbit", "/etc/hostname"}, "need --peer"},
		{[]string{"cp", "--rails", "tcp:10.0.0.1>10.0.0.2", "--metrics", "x", "/etc/hostname"}, "--metrics"},
		{[]string{"cp", "--rails", "tcp:10.0.0.1>10.0.0.2", "--metrics", ":9300", "/etc/hostname"}, "only the serving end"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line containing %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// TestCpCommand: `cp --serve` as a process, `cp` in this one over two
// loopback rails: a tree arrives whole (its symlink skipped), and a copy
// whose destination is a symlink out of the served directory is refused
// with exit 1 and nothing written outside.
func TestCpCommand(t *testing.T) {
	tok := multirail.NewToken()
	t.Setenv("MULTIRAIL_TOKEN", tok)
	src, dst, outside := t.TempDir(), t.TempDir(), t.TempDir()
	files := map[string]string{"tree/a.txt": "alpha", "tree/sub/b.bin": strings.Repeat("b", 200000), "one": "1"}
	for name, data := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc", filepath.Join(src, "tree/etc")); err != nil {
		t.Fatal(err)
	}
	_, got := startCmd(t, []string{"MULTIRAIL_TOKEN=" + tok}, []string{"cp", "--serve", dst, "--listen", "127.0.0.1:0"}, "cp listening on ")
	addr := strings.TrimSuffix(got[0], ",")

	var stdout, stderr bytes.Buffer
	code := run([]string{"cp", "-q", "--json", "--rails", "loop,loop", "--peer", addr, filepath.Join(src, "tree"), filepath.Join(src, "one")}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("cp: exit %d, stderr %s", code, stderr.String())
	}
	var rep cpReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Files != 3 || rep.Planned != 3 || !rep.Synced || len(rep.Skipped) != 1 || !strings.Contains(stderr.String(), "skipping") {
		t.Fatalf("report %+v, stderr %q", rep, stderr.String())
	}
	for name, data := range files {
		b, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(b) != data {
			t.Errorf("%s: %d bytes, %v", name, len(b), err)
		}
	}

	// The served directory's "tree" now leads outside: a copy of a tree
	// by that name is refused.
	if err := os.RemoveAll(filepath.Join(dst, "tree")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dst, "tree")); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	code = run([]string{"cp", "-q", "--rails", "loop", "--peer", addr, filepath.Join(src, "tree")}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "refused") {
		t.Fatalf("copy through a symlink out of the served directory: exit %d, stderr %q; want exit 1 and a refusal", code, stderr.String())
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("written outside the served directory: %v", ents)
	}
}
