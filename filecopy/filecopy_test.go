package filecopy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// connPair is two ends of a two-rail connection on loopback.
func connPair(t *testing.T) (client, server *multirail.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := ConnConfig(multirail.Config{Token: multirail.NewToken()})
	ln, err := multirail.Listen("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan *multirail.Conn, 1)
	go func() { c, _ := ln.Accept(ctx); acc <- c }()
	dcfg := cfg
	dcfg.Rails = []multirail.Rail{{Name: "a", Addr: ln.Addr().String()}, {Name: "b", Addr: ln.Addr().String()}}
	client, err = multirail.Dial(ctx, dcfg)
	if err != nil {
		t.Fatal(err)
	}
	if server = <-acc; server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	return client, server
}

// copyOnce runs Send of srcs and Serve into dst over a fresh connection.
func copyOnce(t *testing.T, dst string, srcs ...string) (sent, served Result, sendErr, serveErr error) {
	t.Helper()
	m, locals, _, err := Plan(srcs)
	if err != nil {
		t.Fatal(err)
	}
	return copyManifest(t, dst, m, locals)
}

func copyManifest(t *testing.T, dst string, m *Manifest, locals []string) (sent, served Result, sendErr, serveErr error) {
	t.Helper()
	cc, sc := connPair(t)
	root, err := os.OpenRoot(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		served, serveErr = Serve(ctx, sc, root, ServeConfig{})
	}()
	sent, sendErr = Send(ctx, cc, m, locals, SendConfig{})
	if sendErr != nil {
		_ = cc.Close()
	}
	<-done
	return
}

func writeFile(t *testing.T, p string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 3))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestCopyTree: a tree with empty, small and multi-chunk files, an empty
// directory and a symlink (skipped), copied whole, bytes and modes.
func TestCopyTree(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	files := map[string]int{"tree/a": 0, "tree/b": 1, "tree/sub/c": wholeMax, "tree/sub/d": wholeMax + 1, "tree/sub/deep/e": 3*ChunkSize + 17, "single": 5000}
	var i uint64
	for name, size := range files {
		i++
		writeFile(t, filepath.Join(src, name), randBytes(i, size), os.FileMode(0o600|i%2*0o044))
	}
	if err := os.MkdirAll(filepath.Join(src, "tree/empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "tree/link")); err != nil {
		t.Fatal(err)
	}
	m, _, skipped, err := Plan([]string{filepath.Join(src, "tree"), filepath.Join(src, "single")})
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 1 || !strings.HasSuffix(skipped[0], "tree/link") || len(m.Files) != len(files) {
		t.Fatalf("plan: %d files, skipped %v", len(m.Files), skipped)
	}
	_, r, err1, err2 := copyOnce(t, dst, filepath.Join(src, "tree"), filepath.Join(src, "single"))
	if err1 != nil || err2 != nil {
		t.Fatalf("send: %v, serve: %v", err1, err2)
	}
	if r.Files != len(files) || len(r.Failures) != 0 || !r.Synced {
		t.Fatalf("result %+v", r)
	}
	for name := range files {
		want, _ := os.ReadFile(filepath.Join(src, name))
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes (want %d), err %v", name, len(got), len(want), err)
		}
		ws, _ := os.Stat(filepath.Join(src, name))
		gs, _ := os.Stat(filepath.Join(dst, name))
		if gs != nil && gs.Mode() != ws.Mode() {
			t.Errorf("%s: mode %v, want %v", name, gs.Mode(), ws.Mode())
		}
	}
	if st, err := os.Stat(filepath.Join(dst, "tree/empty")); err != nil || !st.IsDir() {
		t.Errorf("empty directory not made: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "tree/link")); err == nil {
		t.Error("the symlink was copied")
	}
	leftovers, _ := filepath.Glob(filepath.Join(dst, "*", "*"+PartSuffix))
	if len(leftovers) != 0 {
		t.Errorf("part files left: %v", leftovers)
	}
}

// TestResume: a part file that matches the source's first bytes is kept
// and only the rest is sent; one that does not is sent again whole.
func TestResume(t *testing.T) {
	const size, have = 5 << 20, 2<<20 + 123
	for _, tc := range []struct {
		name    string
		corrupt bool
	}{{"matching part", false}, {"corrupt part", true}} {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := t.TempDir(), t.TempDir()
			data := randBytes(9, size)
			writeFile(t, filepath.Join(src, "f"), data, 0o644)
			part := append([]byte(nil), data[:have]...)
			if tc.corrupt {
				part[have/2] ^= 1
			}
			writeFile(t, filepath.Join(dst, partName("f")), part, 0o600)
			_, r, err1, err2 := copyOnce(t, dst, filepath.Join(src, "f"))
			if err1 != nil || err2 != nil {
				t.Fatalf("send: %v, serve: %v", err1, err2)
			}
			wantBytes, wantResumed := int64(size-have), int64(have)
			if tc.corrupt {
				wantBytes, wantResumed = size, 0
			}
			if r.Files != 1 || r.Bytes != wantBytes || r.Resumed != wantResumed {
				t.Fatalf("result %+v; want %d bytes sent, %d resumed", r, wantBytes, wantResumed)
			}
			got, _ := os.ReadFile(filepath.Join(dst, "f"))
			if !bytes.Equal(got, data) {
				t.Fatal("copy differs from the source")
			}
		})
	}
}

// TestRefusedPaths: a manifest naming a path outside the served directory
// is refused whole, and nothing is written outside.
func TestRefusedPaths(t *testing.T) {
	outside := t.TempDir()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "x"), []byte("payload"), 0o644)
	for _, p := range []string{"../escape", "/etc/escape", "a/../../escape", "link/escape", "link"} {
		t.Run(p, func(t *testing.T) {
			dst := t.TempDir()
			if err := os.Symlink(outside, filepath.Join(dst, "link")); err != nil {
				t.Fatal(err)
			}
			m := &Manifest{Version: Version, Files: []Entry{{Path: p, Size: 7, Mode: 0o644}}}
			_, _, sendErr, serveErr := copyManifest(t, dst, m, []string{filepath.Join(src, "x")})
			if p == "link" {
				// Renaming over a symlink replaces the link, not its target.
				if sendErr != nil || serveErr != nil {
					t.Fatalf("send %v, serve %v", sendErr, serveErr)
				}
				if st, err := os.Lstat(filepath.Join(dst, "link")); err != nil || !st.Mode().IsRegular() {
					t.Fatalf("link not replaced by the file: %v %v", st, err)
				}
			} else if !errors.Is(sendErr, ErrRefused) || !errors.Is(serveErr, ErrPath) {
				t.Fatalf("send %v, serve %v; want a refusal for a path outside", sendErr, serveErr)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Fatalf("written outside the served directory: %v", ents)
			}
		})
	}
}

func TestCheckPath(t *testing.T) {
	for _, tc := range []struct {
		p  string
		ok bool
	}{
		{"a", true}, {"a/b/c.txt", true}, {".hidden", true}, {"a/..b", true},
		{"", false}, {"/a", false}, {"..", false}, {"a/..", false}, {"a//b", false}, {"a/./b", false}, {"a/", false},
		{"a\x00b", false}, {"\xff", false}, {strings.Repeat("a", 256), false}, {strings.Repeat("a/", 2049) + "a", false},
		{"x" + PartSuffix, false}, {"d/.f" + PartSuffix + "/g", false},
	} {
		err := CheckPath(tc.p)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrPath)) {
			t.Errorf("CheckPath(%q) = %v, want ok=%v", tc.p, err, tc.ok)
		}
	}
}

func TestManifestCheck(t *testing.T) {
	e := func(p string) Entry { return Entry{Path: p, Size: 1, Mode: 0o644} }
	for _, tc := range []struct {
		name string
		m    Manifest
		want string // "" = valid
	}{
		{"valid", Manifest{Version: Version, Dirs: []string{"d", "d/e"}, Files: []Entry{e("d/f"), e("g")}}, ""},
		{"version", Manifest{Version: 2}, "version 2"},
		{"twice", Manifest{Version: Version, Files: []Entry{e("a"), e("a")}}, "listed twice"},
		{"file and dir", Manifest{Version: Version, Dirs: []string{"a"}, Files: []Entry{e("a")}}, "listed twice"},
		{"file as parent", Manifest{Version: Version, Files: []Entry{e("a"), e("a/b")}}, "also the directory"},
		{"negative size", Manifest{Version: Version, Files: []Entry{{Path: "a", Size: -1}}}, "size -1"},
		{"mode bits", Manifest{Version: Version, Files: []Entry{{Path: "a", Mode: 0o4755}}}, "mode 4755"},
		{"bad path", Manifest{Version: Version, Files: []Entry{e("../a")}}, "\"..\" component"},
	} {
		err := tc.m.Check()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// FuzzDecodeManifest: never panics; what it accepts has only plain paths.
func FuzzDecodeManifest(f *testing.F) {
	f.Add([]byte(`{"version":1,"dirs":["d"],"files":[{"path":"d/f","size":3,"mode":420}]}`))
	f.Add([]byte(`{"version":1,"files":[{"path":"../x","size":3,"mode":420}]}`))
	f.Add([]byte(`{"version":1,"files":[{"path":"a","size":1},{"path":"a/b","size":1}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeManifest(b)
		if err != nil {
			return
		}
		for _, e := range m.Files {
			if CheckPath(e.Path) != nil || strings.Contains(e.Path, "..") && strings.Contains("/"+e.Path+"/", "/../") {
				t.Fatalf("accepted %q", e.Path)
			}
		}
	})
}

// TestChecksumMismatch: a file whose data does not match the SHA-256 the
// sender computed is reported and not put in place; the others are.
func TestChecksumMismatch(t *testing.T) {
	dst := t.TempDir()
	cc, sc := connPair(t)
	root, _ := os.OpenRoot(dst)
	defer root.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan Result, 1)
	go func() { r, _ := Serve(ctx, sc, root, ServeConfig{}); done <- r }()
	mb := []byte(`{"version":1,"files":[{"path":"good","size":3,"mode":420},{"path":"bad","size":3,"mode":420}]}`)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(cc.Send(ctx, tagControl, append([]byte{kManifest}, mb...)))
	var st state
	must(recvControl(ctx, cc, kState, &st))
	good := sha256.Sum256([]byte("abc"))
	must(cc.Send(ctx, tagData, append(append([]byte{kWhole, 0, 0, 0, 0}, good[:]...), "abc"...)))
	must(cc.Send(ctx, tagData, append(append([]byte{kWhole, 0, 0, 0, 1}, good[:]...), "abd"...)))
	must(cc.Send(ctx, tagData, []byte{kFinish}))
	r := <-done
	if r.Files != 1 || len(r.Failures) != 1 || r.Failures[0].Path != "bad" {
		t.Fatalf("result %+v", r)
	}
	if _, err := os.Stat(filepath.Join(dst, "bad")); err == nil {
		t.Fatal("the file that failed its checksum was put in place")
	}
}
