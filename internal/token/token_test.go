package token

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // umask may have cleared bits
		t.Fatal(err)
	}
	return p
}

func TestResolve(t *testing.T) {
	good := writeFile(t, "from-file\n", 0o600)
	for _, tc := range []struct {
		name, explicit, env, file, want string
	}{
		{"explicit wins", "given", "env", good, "given"},
		{"environment next", "", "env", good, "env"},
		{"file last", "", "", good, "from-file"},
		{"none", "", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(Env, tc.env)
			t.Setenv(FileEnv, tc.file)
			got, err := Resolve(tc.explicit)
			if err != nil || got != tc.want {
				t.Fatalf("Resolve(%q) = %q, %v; want %q", tc.explicit, got, err, tc.want)
			}
		})
	}
}

func TestFromFile(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		mode       os.FileMode
		want       string // token, or a part of the error
		bad        bool
	}{
		{"owner only, line break trimmed", "s3cret\n", 0o600, "s3cret", false},
		{"CRLF trimmed", "s3cret\r\n", 0o400, "s3cret", false},
		{"no line break", "s3cret", 0o600, "s3cret", false},
		{"readable by the group", "s3cret\n", 0o640, "mode 0640: others may read it", true},
		{"readable by all", "s3cret\n", 0o644, "mode 0644", true},
		{"empty", "\n", 0o600, "is empty", true},
		{"too long", strings.Repeat("x", 5000), 0o600, "over 4096 bytes", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, tc.body, tc.mode)
			got, err := FromFile(p)
			if tc.bad {
				if !errors.Is(err, ErrFile) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
					t.Fatalf("FromFile = %q, %v; want ErrFile naming %s and %q", got, err, p, tc.want)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("FromFile = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := FromFile(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, ErrFile) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := FromFile(t.TempDir()); !errors.Is(err, ErrFile) {
		t.Fatalf("a directory: %v", err)
	}
}

func TestGenerate(t *testing.T) {
	a, b := Generate(), Generate()
	if a == b {
		t.Fatal("two tokens alike")
	}
	raw, err := base64.RawURLEncoding.DecodeString(a)
	if err != nil || len(raw) != Size || len(a) != 43 {
		t.Fatalf("token %q: %d bytes, %v", a, len(raw), err)
	}
}
