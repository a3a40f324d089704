package rdzv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func fileURL(dir string) string { return "file://" + dir }

func TestRdzvFileRandomOrder(t *testing.T) {
	for _, n := range []int{1, 3, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			dir := filepath.Join(t.TempDir(), "store")
			gate := make(chan struct{})
			gated := map[int]bool{}
			for r := range n {
				gated[r] = r%2 == 0 // rank 0 among the late ones
			}
			results := runRanks(ctx, fileURL(dir), "tok", "job-7", n, allRanks(n), gated, gate)
			// The ungated ranks' cards are written before the others start.
			waitFor(t, "the ungated cards", func() bool {
				m, _ := filepath.Glob(filepath.Join(dir, "rank-*.card"))
				return len(m) == n/2
			})
			close(gate)
			for range n {
				if res := <-results; res.err != nil || !sameTable(res.table, wantTable(n)) {
					t.Fatalf("rank %d: %q %v", res.rank, res.table, res.err)
				}
			}
			// Rank 0 removed the store once every rank had acknowledged.
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				ls, _ := os.ReadDir(dir)
				t.Fatalf("store still there: %v %v", err, ls)
			}
		})
	}
}

func TestRdzvFileMode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	ctx, cancel := context.WithCancel(t.Context())
	results := runRanks(ctx, fileURL(dir), "", "j", 2, []int{1}, nil, nil)
	waitFor(t, "rank 1's card", func() bool { _, err := os.Stat(cardPath(dir, 1)); return err == nil })
	for _, name := range []string{dir, cardPath(dir, 1)} {
		fi, err := os.Stat(name)
		if err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: %v %v: readable by others", name, fi.Mode(), err)
		}
	}
	cancel()
	<-results
}

func TestRdzvFileWrongToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	dir := t.TempDir()
	out := make(chan error, 2)
	for r, tok := range []string{"a", "b"} {
		go func() {
			_, err := Exchange(ctx, fileURL(dir), tok, Card{JobID: "j", Rank: r, Size: 2})
			out <- err
		}()
	}
	for range 2 {
		err := <-out
		if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "was written with another token (MULTIRAIL_TOKEN)") {
			t.Errorf("%v", err)
		}
	}
}

func TestRdzvFileMismatchSize(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	dir := t.TempDir()
	out := make(chan error, 2)
	for r, size := range []int{2, 3} {
		go func() {
			_, err := Exchange(ctx, fileURL(dir), "", Card{JobID: "j", Rank: r, Size: size})
			out <- err
		}()
	}
	want := []string{"rank 1 says size 3 (" + cardPath(dir, 1) + "), rank 0's job has size 2", "rank 0 says size 2 (" + cardPath(dir, 0) + "), rank 1's job has size 3"}
	var got []string
	for range 2 {
		err := <-out
		var re *RefusedError
		if !errors.As(err, &re) {
			t.Fatalf("%v", err)
		}
		got = append(got, re.Reason)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestRdzvFileStaleAndBadFiles(t *testing.T) {
	for _, c := range []struct {
		name  string
		write func(dir string)
		want  string
	}{
		{"stale job", func(dir string) {
			os.WriteFile(cardPath(dir, 1), encodeFileCard(nil, Card{JobID: "old", Rank: 1, Size: 2}), 0o600)
		}, `rank-1.card is stale: it belongs to job "old", this job is "new"`},
		{"garbage", func(dir string) {
			os.WriteFile(cardPath(dir, 1), []byte("hello\n"), 0o600)
		}, "rank-1.card: rdzv: malformed frame: not a multirail rendezvous card"},
		{"wrong rank inside", func(dir string) {
			os.WriteFile(cardPath(dir, 1), encodeFileCard(nil, Card{JobID: "new", Rank: 0, Size: 2}), 0o600)
		}, "rank-1.card holds the card of rank 0"},
		{"huge", func(dir string) {
			f, _ := os.Create(cardPath(dir, 1))
			f.Truncate(maxFileCard + 1)
			f.Close()
		}, "larger than any card"},
		{"duplicate", func(dir string) {
			os.WriteFile(cardPath(dir, 0), encodeFileCard(nil, Card{JobID: "new", Rank: 0, Size: 2, Data: []byte("x")}), 0o600)
		}, "rank 0 is already registered in " + "DIR/rank-0.card with different data"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.write(dir)
			_, err := Exchange(mustTimeout(t, 10*time.Second), fileURL(dir), "", Card{JobID: "new", Rank: 0, Size: 2, Data: []byte("y")})
			var re *RefusedError
			if want := strings.ReplaceAll(c.want, "DIR", dir); !errors.As(err, &re) || !strings.Contains(err.Error(), want) {
				t.Fatalf("%v; want %q", err, want)
			}
		})
	}
}

// TestRdzvFileRetry: the same card again (a restarted rank) is accepted.
func TestRdzvFileRetry(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	dir := t.TempDir()
	os.WriteFile(cardPath(dir, 1), encodeFileCard(nil, Card{JobID: "j", Rank: 1, Size: 2, Data: cardData(1)}), 0o600)
	results := runRanks(ctx, fileURL(dir), "", "j", 2, allRanks(2), nil, nil)
	for range 2 {
		if res := <-results; res.err != nil || !sameTable(res.table, wantTable(2)) {
			t.Fatalf("rank %d: %v", res.rank, res.err)
		}
	}
}

func TestRdzvFileMissingRanksNamed(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	results := runRanks(ctx, fileURL(dir), "", "j", 5, []int{0, 2, 3}, nil, nil)
	for range 3 {
		res := <-results
		var we *WaitError
		if !errors.As(res.err, &we) || !errors.Is(res.err, context.DeadlineExceeded) || !slices.Equal(we.Missing, []int{1, 4}) ||
			!strings.Contains(res.err.Error(), "gave up waiting for rank(s) 1, 4 (3 of 5 registered)") {
			t.Fatalf("rank %d: %v", res.rank, res.err)
		}
	}
}

// TestRdzvFileAckWait: rank 0 does not wait for ever for a rank that
// never acknowledges; it removes the files when its context ends.
func TestRdzvFileAckWait(t *testing.T) {
	dir := t.TempDir()
	// Rank 1's card is there (a rank that will never acknowledge).
	os.WriteFile(cardPath(dir, 1), encodeFileCard(nil, Card{JobID: "j", Rank: 1, Size: 2}), 0o600)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := Exchange(ctx, fileURL(dir), "", Card{JobID: "j", Rank: 0, Size: 2})
		done <- err
	}()
	waitFor(t, "rank 0's ack", func() bool { _, err := os.Stat(ackPath(dir, 0)); return err == nil })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cardPath(dir, 1)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("files left: %v", err)
	}
}
