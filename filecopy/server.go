package filecopy

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"

	"github.com/multirail/multirail"
)

// writeBehind is how much of a file is written before its writeback is
// started.
const writeBehind = 8 << 20

// server is the receiving end of one copy.
type server struct {
	root   *os.Root
	m      *Manifest
	log    *slog.Logger
	st     state
	hashes map[int]hash.Hash // hashes of the parts found, for resuming
	done   []bool
	r      Result

	cur     int // the file being received, -1 for none
	f       *os.File
	h       hash.Hash
	written int64
	flushed int64 // written back up to here (startWriteback)
	bad     error // the current file failed; its data is skipped
}

// scanParts finds the part files of earlier runs and hashes them.
func (s *server) scanParts() {
	for i, e := range s.m.Files {
		f, err := s.root.Open(partName(e.Path))
		if err != nil {
			continue
		}
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() || st.Size() == 0 || st.Size() > e.Size {
			f.Close()
			continue
		}
		h := sha256.New()
		n, err := io.Copy(h, f)
		f.Close()
		if err != nil || n != st.Size() {
			continue
		}
		s.st.Have[i], s.st.Sum[i], s.hashes[i] = n, hex.EncodeToString(h.Sum(nil)), h
	}
}

func (s *server) fail(i int, err error) {
	s.done[i] = true
	s.r.Failures = append(s.r.Failures, Failure{Path: s.m.Files[i].Path, Error: err.Error()})
	s.log.Warn("file not copied", "path", s.m.Files[i].Path, "err", err)
}

// index reads a file index and checks it names a file not yet done.
func (s *server) index(b []byte) (int, error) {
	if len(b) < 4 {
		return 0, fmt.Errorf("%w: short message", ErrProtocol)
	}
	i := int(binary.BigEndian.Uint32(b))
	if i >= len(s.m.Files) || s.done[i] || i == s.cur {
		return 0, fmt.Errorf("%w: file index %d out of turn", ErrProtocol, i)
	}
	return i, nil
}

// handle processes one data message; fin is set by the last.
func (s *server) handle(msg multirail.Message) (fin bool, err error) {
	d := msg.Data
	if msg.Tag != tagData || len(d) == 0 {
		return false, fmt.Errorf("%w: unexpected message on tag %d", ErrProtocol, msg.Tag)
	}
	if s.cur >= 0 && d[0] != kData && d[0] != kEnd {
		return false, fmt.Errorf("%w: message kind %q inside file %d", ErrProtocol, d[0], s.cur)
	}
	switch d[0] {
	case kWhole:
		i, err := s.index(d[1:])
		if err != nil {
			return false, err
		}
		if len(d) < 5+sha256.Size {
			return false, fmt.Errorf("%w: short message", ErrProtocol)
		}
		sum, data := d[5:5+sha256.Size], d[5+sha256.Size:]
		if int64(len(data)) != s.m.Files[i].Size {
			return false, fmt.Errorf("%w: file %d: %d bytes, the manifest says %d", ErrProtocol, i, len(data), s.m.Files[i].Size)
		}
		s.r.Bytes += int64(len(data))
		got := sha256.Sum256(data)
		if !bytes.Equal(got[:], sum) {
			s.fail(i, errors.New("SHA-256 mismatch"))
			return false, nil
		}
		e := s.m.Files[i]
		part := partName(e.Path)
		err = s.root.WriteFile(part, data, 0o600)
		if err == nil {
			err = s.root.Chmod(part, os.FileMode(e.Mode))
		}
		if err != nil {
			s.fail(i, err)
			return false, nil
		}
		s.finish(i, part)
	case kFrom:
		i, err := s.index(d[1:])
		if err != nil {
			return false, err
		}
		if len(d) != 13 {
			return false, fmt.Errorf("%w: FROM of %d bytes", ErrProtocol, len(d))
		}
		off := int64(binary.BigEndian.Uint64(d[5:]))
		if off != 0 && off != s.st.Have[i] {
			return false, fmt.Errorf("%w: file %d resumed at %d, this end has %d", ErrProtocol, i, off, s.st.Have[i])
		}
		s.cur, s.written, s.flushed, s.bad = i, off, off, nil
		s.h = s.hashes[i]
		if off == 0 || s.h == nil {
			s.h = sha256.New()
		}
		delete(s.hashes, i)
		s.r.Resumed += off
		s.f, err = s.root.OpenFile(partName(s.m.Files[i].Path), os.O_WRONLY|os.O_CREATE, 0o600)
		if err == nil {
			err = s.f.Truncate(off)
		}
		if err == nil {
			_, err = s.f.Seek(off, io.SeekStart)
		}
		if err != nil {
			s.bad = err
		}
	case kData:
		if s.cur < 0 {
			return false, fmt.Errorf("%w: data outside a file", ErrProtocol)
		}
		data := d[1:]
		if s.written+int64(len(data)) > s.m.Files[s.cur].Size {
			return false, fmt.Errorf("%w: file %d: more bytes than the manifest's %d", ErrProtocol, s.cur, s.m.Files[s.cur].Size)
		}
		s.written += int64(len(data))
		s.r.Bytes += int64(len(data))
		if s.bad != nil {
			return false, nil
		}
		s.h.Write(data)
		if _, err := s.f.Write(data); err != nil {
			s.bad = err
		}
		if s.written-s.flushed >= writeBehind {
			// Start writing back what arrived, without waiting: the one
			// sync at the end then finds little left to write.
			startWriteback(s.f, s.flushed, s.written-s.flushed)
			s.flushed = s.written
		}
	case kEnd:
		if s.cur < 0 || len(d) != 5+sha256.Size || int(binary.BigEndian.Uint32(d[1:])) != s.cur {
			return false, fmt.Errorf("%w: END out of turn", ErrProtocol)
		}
		i, e := s.cur, s.m.Files[s.cur]
		if s.written != e.Size {
			return false, fmt.Errorf("%w: file %d ended at %d bytes, the manifest says %d", ErrProtocol, i, s.written, e.Size)
		}
		err := s.bad
		if err == nil && !bytes.Equal(s.h.Sum(nil), d[5:]) {
			err = errors.New("SHA-256 mismatch")
		}
		if cerr := s.closeCur(); err == nil {
			err = cerr
		}
		part := partName(e.Path)
		if err == nil {
			err = s.root.Chmod(part, os.FileMode(e.Mode))
		}
		if err != nil {
			_ = s.root.Remove(part)
			s.fail(i, err)
			return false, nil
		}
		s.finish(i, part)
	case kFinish:
		if len(d) != 1 {
			return false, fmt.Errorf("%w: FINISH with a payload", ErrProtocol)
		}
		return true, nil
	default:
		return false, fmt.Errorf("%w: message kind %q", ErrProtocol, d[0])
	}
	return false, nil
}

// finish renames file i's verified part into place.
func (s *server) finish(i int, part string) {
	if err := s.root.Rename(part, s.m.Files[i].Path); err != nil {
		s.fail(i, err)
		return
	}
	s.done[i] = true
	s.r.Files++
}

// closeCur closes the file being received, if any.
func (s *server) closeCur() error {
	if s.cur < 0 {
		return nil
	}
	s.cur = -1
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}
