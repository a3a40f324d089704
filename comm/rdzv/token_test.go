package rdzv

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestFileToken: ranks that ask a file:// store for its token at once all
// get the same one, of full length, from a file only its owner may read;
// a token file others may read is refused (someone else prepared it).
func TestFileToken(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	url := "file://" + dir
	const ranks = 16
	got := make([]string, ranks)
	errs := make([]error, ranks)
	var wg sync.WaitGroup
	for r := range ranks {
		wg.Go(func() { got[r], errs[r] = FileToken(url) })
	}
	wg.Wait()
	for r := range ranks {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if got[r] != got[0] {
			t.Fatalf("rank %d got another token than rank 0", r)
		}
	}
	if len(got[0]) < 32 {
		t.Fatalf("token of %d characters", len(got[0]))
	}
	fi, err := os.Stat(filepath.Join(dir, tokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %#o, want 0600", fi.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".token.tmp*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}

	if err := os.Chmod(filepath.Join(dir, tokenFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FileToken(url); err == nil || !strings.Contains(err.Error(), "others may read it") {
		t.Fatalf("a token file others may read: %v, want it refused", err)
	}
	if _, err := FileToken("tcp://127.0.0.1:1"); err == nil {
		t.Fatal("FileToken of a tcp:// rendezvous did not fail")
	}
}
