package capi

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// need skips the test when tool is missing, except under CI (CI=true),
// where that fails it.
func need(t *testing.T, tool string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found (%v): CI must run the C ABI's test", tool, err)
		}
		t.Skipf("%s not found (%v): the C ABI's test needs it (it fails instead of skipping when CI=true)", tool, err)
	}
}

// repoRoot is the root of the repository (one level up).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "scripts", "build-capi.sh")); err != nil {
		t.Fatal(err)
	}
	return root
}

// run runs name with args in dir, with the Go toolchain of this test on
// PATH, and fails the test with its output if it fails.
func run(t *testing.T, ctx context.Context, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(runtime.GOROOT(), "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v after %v\n%s", name, strings.Join(args, " "), err, time.Since(start).Round(time.Millisecond), out.String())
	}
	return out.String()
}

// TestCProgram: the C ABI from C (capi/ctest/mrtest.c, also run by CI)
// under multirail run -n 3, on loopback and on emulated rails: the
// library built by scripts/build-capi.sh, which checks that it exports
// only the header's mr_* functions. The library is
// built into a temporary directory (not the checkout's build/, which
// other tools may be using).
func TestCProgram(t *testing.T) {
	for _, tool := range []string{"gcc", "nm", "sh"} {
		need(t, tool)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root := repoRoot(t)
	dir := t.TempDir()
	lib := filepath.Join(dir, "lib")
	t.Log(strings.TrimSpace(run(t, ctx, root, "sh", "scripts/build-capi.sh", lib)))
	for _, f := range []string{"libmultirail.so", "multirail.h"} {
		if _, err := os.Stat(filepath.Join(lib, f)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(lib, "libmultirail.h")); err == nil {
		t.Error("the build left cgo's generated libmultirail.h beside the library")
	}
	mr := filepath.Join(dir, "multirail")
	run(t, ctx, root, filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", mr, "./cmd/multirail")
	prog := filepath.Join(dir, "mrtest")
	run(t, ctx, root, "gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", lib, "capi/ctest/mrtest.c",
		"-L", lib, "-lmultirail", "-Wl,-rpath,"+lib, "-o", prog)
	// A C++ compiler takes the header too.
	if _, err := exec.LookPath("g++"); err == nil {
		src := filepath.Join(dir, "h.cc")
		if err := os.WriteFile(src, []byte("#include \"multirail.h\"\nint main() { mr_error e = {}; return mr_comm_free(0, &e) == MR_ERR_INVALID && e.code == MR_ERR_INVALID ? 0 : 1; }\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, ctx, dir, "g++", "-Wall", "-Werror", "-I", lib, src, "-L", lib, "-lmultirail", "-Wl,-rpath,"+lib, "-o", filepath.Join(dir, "hcc"))
		run(t, ctx, dir, filepath.Join(dir, "hcc"))
	}
	for _, emu := range []string{"", "emu:200mbit,emu:100mbit"} {
		t.Run(fmt.Sprintf("emu=%q", emu), func(t *testing.T) {
			args := []string{"run", "-n", "3", "--timeout", "3m"}
			if emu != "" {
				args = append(args, "--emu", emu)
			}
			out := run(t, ctx, dir, mr, append(args, "--", prog)...)
			passed := 0
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "FAIL") {
					t.Error(l)
				}
				if strings.HasPrefix(l, "PASS  rank ") {
					passed++
					t.Log(l)
				}
			}
			if passed != 3 || t.Failed() {
				t.Errorf("want PASS from 3 ranks, got %d; output:\n%s", passed, out)
			}
		})
	}
}
