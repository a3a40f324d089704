package rdzv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Timing of the file:// store.
const (
	filePollMin = 5 * time.Millisecond
	filePollMax = 100 * time.Millisecond
	// FileAckWait bounds how long rank 0 waits for the other ranks'
	// acknowledgements before it removes the store's files.
	FileAckWait = 5 * time.Second
)

func cardPath(dir string, r int) string { return filepath.Join(dir, "rank-"+strconv.Itoa(r)+".card") }
func ackPath(dir string, r int) string  { return filepath.Join(dir, "ack-"+strconv.Itoa(r)) }

// writeAtomic writes b to name through a temporary file in the same
// directory and a rename: readers see the whole file or none.
func writeAtomic(name string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// readLimited reads a file of at most max bytes.
func readLimited(name string, max int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		return nil, fmt.Errorf("%w: %s is %d bytes, larger than any card (%d)", errFrame, name, fi.Size(), max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = fmt.Errorf("%w: %s is larger than any card (%d bytes)", errFrame, name, max)
	}
	return b, err
}

var maxFileCard = int64(len(fileMagic) + cardHeader + MaxJobID + MaxCardLimit + macSize)

// fileStore is one rank's view of a file:// store.
type fileStore struct {
	url, dir string
	token    []byte
	card     Card
}

func (s *fileStore) refused(format string, args ...any) error {
	return &RefusedError{URL: s.url, Reason: fmt.Sprintf(format, args...)}
}

// check parses the card file of rank r and checks it against this rank's
// job.
func (s *fileStore) check(name string, r int, b []byte) (Card, error) {
	c, macOK, err := decodeFileCard(b, s.token)
	switch {
	case err != nil:
		return Card{}, s.refused("%s: %v", name, err)
	case c.Rank != r:
		return Card{}, s.refused("%s holds the card of rank %d", name, c.Rank)
	case c.JobID != s.card.JobID:
		return Card{}, s.refused("%s is stale: it belongs to job %q, this job is %q (remove it, or give each job its own directory)", name, c.JobID, s.card.JobID)
	case !macOK:
		return Card{}, &RefusedError{URL: s.url, auth: true, Reason: fmt.Sprintf("authentication failed: %s was written with another token (%s) or altered", name, TokenEnv)}
	case c.Size != s.card.Size:
		return Card{}, s.refused("rank %d says size %d (%s), rank %d's job has size %d", r, c.Size, name, s.card.Rank, s.card.Size)
	}
	return c, nil
}

// exchangeFile runs the file:// store: write rank-R.card, wait for every
// rank's card, write ack-R; rank 0 then waits for the acknowledgements
// (at most FileAckWait) and removes the files.
func exchangeFile(ctx context.Context, u, dir string, token []byte, card Card) ([][]byte, error) {
	s := &fileStore{url: u, dir: dir, token: token, card: card}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("rdzv: rendezvous %s: %w", u, err)
	}
	own := encodeFileCard(token, card)
	ownName := cardPath(dir, card.Rank)
	if b, err := readLimited(ownName, maxFileCard); err == nil && !bytes.Equal(b, own) {
		if _, err := s.check(ownName, card.Rank, b); err != nil {
			return nil, err
		}
		return nil, s.refused("rank %d is already registered in %s with different data (a second process with rank %d?)", card.Rank, ownName, card.Rank)
	}
	if err := writeAtomic(ownName, own); err != nil {
		return nil, fmt.Errorf("rdzv: rendezvous %s: writing this rank's card: %w", u, err)
	}

	table := make([][]byte, card.Size)
	loaded := make([]bool, card.Size)
	have := 0
	for wait := filePollMin; ; wait = min(2*wait, filePollMax) {
		for r := range card.Size {
			if loaded[r] {
				continue
			}
			name := cardPath(dir, r)
			b, err := readLimited(name, maxFileCard)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if errors.Is(err, errFrame) {
				return nil, s.refused("%v", err)
			}
			if err != nil {
				return nil, fmt.Errorf("rdzv: rendezvous %s: %w", u, err)
			}
			c, err := s.check(name, r, b)
			if err != nil {
				return nil, err
			}
			table[r], loaded[r] = c.Data, true
			have++
		}
		if have == card.Size {
			break
		}
		if !sleepCtx(ctx, wait) {
			we := &WaitError{URL: u, Rank: card.Rank, Size: card.Size, Reached: true, Err: ctx.Err()}
			for r, ok := range loaded {
				if !ok {
					we.Missing = append(we.Missing, r)
				}
			}
			we.MissingCount = len(we.Missing)
			return nil, we
		}
	}
	// A second process writing this rank's card replaced ours.
	if b, err := readLimited(ownName, maxFileCard); err != nil || !bytes.Equal(b, own) {
		return nil, s.refused("rank %d's card %s was replaced by another process with different data (two processes with rank %d?)", card.Rank, ownName, card.Rank)
	}
	if err := writeAtomic(ackPath(dir, card.Rank), []byte(card.JobID)); err != nil {
		return nil, fmt.Errorf("rdzv: rendezvous %s: writing this rank's acknowledgement: %w", u, err)
	}
	if card.Rank == 0 {
		s.cleanup(ctx)
	}
	return table, nil
}

// cleanup waits (at most FileAckWait, or until ctx is done) until every
// rank has acknowledged, then removes the job's files and the directory
// if that leaves it empty. A rank that has not read the cards by then
// fails (its wait times out naming the ranks whose cards are gone): the
// trade-off between leaving stale files behind and waiting on a stalled
// rank.
func (s *fileStore) cleanup(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, FileAckWait)
	defer cancel()
	acked := make([]bool, s.card.Size)
	left := s.card.Size
	for wait := filePollMin; left > 0; wait = min(2*wait, filePollMax) {
		for r := range s.card.Size {
			if !acked[r] {
				if b, err := os.ReadFile(ackPath(s.dir, r)); err == nil && string(b) == s.card.JobID {
					acked[r] = true
					left--
				}
			}
		}
		if left > 0 && !sleepCtx(ctx, wait) {
			break
		}
	}
	for r := range s.card.Size {
		os.Remove(cardPath(s.dir, r))
		os.Remove(ackPath(s.dir, r))
	}
	os.Remove(filepath.Join(s.dir, tokenFile)) // every rank read it before it wrote its card
	os.Remove(s.dir)                           // fails, harmlessly, when other files are there
}
