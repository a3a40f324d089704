package main

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/multirail/multirail"
)

// TestTokenCommand: token prints a new 32-byte base64url token each time,
// and refuses arguments (exit status 2).
func TestTokenCommand(t *testing.T) {
	var seen []string
	for i := 0; i < 2; i++ {
		var out, errb bytes.Buffer
		if code := run([]string{"token"}, &out, &errb); code != 0 {
			t.Fatalf("token: exit %d, %s", code, errb.String())
		}
		tok := strings.TrimSuffix(out.String(), "\n")
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil || len(raw) != 32 || strings.Contains(tok, "\n") {
			t.Fatalf("token printed %q: %d bytes, %v", out.String(), len(raw), err)
		}
		seen = append(seen, tok)
	}
	if seen[0] == seen[1] {
		t.Fatal("two runs printed the same token")
	}
	var out, errb bytes.Buffer
	if code := run([]string{"token", "extra"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `"extra"`) {
		t.Fatalf("token extra: exit %d, %q; want 2 and a message naming the argument", code, errb.String())
	}
}

// TestServeNeedsAStrongToken: serve with no token, or a short one, exits
// with status 2 and one line naming Token and the way out (not a doubled
// "multirail: " prefix).
func TestServeNeedsAStrongToken(t *testing.T) {
	t.Setenv(multirail.TokenEnv, "")
	t.Setenv(multirail.TokenFileEnv, "")
	t.Setenv(multirail.InsecureEnv, "")
	for _, tok := range []string{"", "short"} {
		t.Setenv(multirail.TokenEnv, tok)
		code, _, stderr := runCLI("serve", "--listen", "127.0.0.1:0")
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "Token = ") ||
			!strings.Contains(stderr, "multirail token") || strings.Contains(stderr, "multirail: multirail:") {
			t.Errorf("serve with token %q: exit %d, %q; want 2 and one line naming Token and `multirail token`", tok, code, stderr)
		}
	}
}
