package filecopy

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/tunnel"
)

// Version is the protocol version a manifest carries.
const Version = 1

// ChunkSize is the most file data one message carries: with its kind byte,
// one default segment, sent eagerly (ConnConfig).
const ChunkSize = 64<<10 - 1

// Tags: control messages (manifest, state, result) and the data stream,
// which the transport keeps in order.
const (
	tagControl uint32 = 1
	tagData    uint32 = 2
)

// Message kinds.
const (
	kManifest = 'M' // client: JSON Manifest
	kState    = 'S' // server: JSON state (what it already has of each file)
	kRefuse   = 'X' // server: why the copy is refused (text)
	kResult   = 'R' // server: JSON Result
	kWhole    = 'W' // data: index u32, SHA-256, the whole file
	kFrom     = 'F' // data: index u32, offset u64: the file's data from offset follows
	kData     = 'D' // data: bytes of the current file
	kEnd      = 'E' // data: index u32, SHA-256 of the whole file
	kFinish   = 'Z' // data: nothing more
)

const wholeMax = ChunkSize - 1 - 4 - sha256.Size

// ConnConfig returns base with what a copy needs of its connection (both
// ends): eager sends of a chunk, so that many are in flight.
func ConnConfig(base multirail.Config) multirail.Config {
	return tunnel.ConnConfig(base, ChunkSize)
}

// state is the server's answer to a manifest: for each file the length of
// the part already received (Have) and its SHA-256 (hex), which the client
// checks against its own file before resuming after it.
type state struct {
	Have []int64  `json:"have"`
	Sum  []string `json:"sha256"`
}

// Failure is a file that was not copied.
type Failure struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

// Result is what a copy did, as the serving end saw it.
type Result struct {
	Files    int       `json:"files"`   // files copied and verified
	Bytes    int64     `json:"bytes"`   // file bytes received in this run
	Resumed  int64     `json:"resumed"` // bytes of earlier runs kept (verified by SHA-256)
	Synced   bool      `json:"synced"`  // the file system was synced after the last file
	Failures []Failure `json:"failures,omitempty"`
}

// ErrRefused is wrapped by Send's error when the serving end refused the
// manifest (a path outside its directory, say).
var ErrRefused = errors.New("filecopy: refused by the serving end")

// Plan lists what copying srcs sends: a regular file as its base name, a
// directory as its base name and everything under it. Symlinks and other
// non-regular files are skipped and listed in skipped. locals[i] is the
// local path of m.Files[i].
func Plan(srcs []string) (m *Manifest, locals []string, skipped []string, err error) {
	m = &Manifest{Version: Version}
	for _, src := range srcs {
		st, err := os.Lstat(src)
		if err != nil {
			return nil, nil, nil, err
		}
		base := filepath.Base(filepath.Clean(src))
		if base == "/" || base == "." || base == ".." {
			return nil, nil, nil, fmt.Errorf("%w: %q has no name to copy it under (name a file or a directory)", ErrPath, src)
		}
		switch {
		case st.Mode().IsRegular():
			m.Files = append(m.Files, Entry{Path: base, Size: st.Size(), Mode: uint32(st.Mode().Perm())})
			locals = append(locals, src)
		case st.IsDir():
			err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				rel, err := filepath.Rel(src, p)
				if err != nil {
					return err
				}
				name := path.Join(base, filepath.ToSlash(rel))
				switch {
				case d.IsDir():
					m.Dirs = append(m.Dirs, name)
				case d.Type().IsRegular():
					info, err := d.Info()
					if err != nil {
						return err
					}
					m.Files = append(m.Files, Entry{Path: name, Size: info.Size(), Mode: uint32(info.Mode().Perm())})
					locals = append(locals, p)
				default:
					skipped = append(skipped, p)
				}
				return nil
			})
			if err != nil {
				return nil, nil, nil, err
			}
		default:
			skipped = append(skipped, src)
		}
	}
	if err := m.Check(); err != nil {
		return nil, nil, nil, err
	}
	return m, locals, skipped, nil
}

// SendConfig configures Send.
type SendConfig struct {
	// Progress, when set, is called with the file bytes sent so far (a
	// resumed file's kept part counted as sent when it is skipped).
	Progress func(bytes int64)
	Logger   *slog.Logger
}

// Send copies the files of m (locals[i] holding m.Files[i]) to a Serve at
// the other end of c and returns the serving end's Result. A file the
// serving end already has part of, verified by SHA-256, resumes after that
// part.
func Send(ctx context.Context, c *multirail.Conn, m *Manifest, locals []string, cfg SendConfig) (Result, error) {
	if len(locals) != len(m.Files) {
		return Result{}, fmt.Errorf("filecopy: %d local files for %d entries", len(locals), len(m.Files))
	}
	mb, err := json.Marshal(m)
	if err != nil {
		return Result{}, err
	}
	if err := c.Send(ctx, tagControl, append([]byte{kManifest}, mb...)); err != nil {
		return Result{}, err
	}
	var st state
	if err := recvControl(ctx, c, kState, &st); err != nil {
		return Result{}, err
	}
	if len(st.Have) != len(m.Files) || len(st.Sum) != len(m.Files) {
		return Result{}, fmt.Errorf("%w: state for %d files, sent %d", ErrProtocol, len(st.Have), len(m.Files))
	}
	var sent int64
	report := func(n int64) {
		sent += n
		if cfg.Progress != nil {
			cfg.Progress(sent)
		}
	}
	buf := make([]byte, 1+ChunkSize)
	for i, e := range m.Files {
		if err := sendFile(ctx, c, i, e, locals[i], st.Have[i], st.Sum[i], buf, report); err != nil {
			return Result{}, fmt.Errorf("%s: %w", locals[i], err)
		}
	}
	if err := c.Send(ctx, tagData, []byte{kFinish}); err != nil {
		return Result{}, err
	}
	var r Result
	err = recvControl(ctx, c, kResult, &r)
	return r, err
}

// sendFile sends file i, after the part the serving end has when that part
// matches the local file.
func sendFile(ctx context.Context, c *multirail.Conn, i int, e Entry, local string, have int64, sum string, buf []byte, report func(int64)) error {
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	from := int64(0)
	if have > 0 && have <= e.Size {
		if _, err := io.CopyN(h, f, have); err != nil {
			return err
		}
		if hex.EncodeToString(h.Sum(nil)) == sum {
			from = have
			report(have)
		} else {
			h.Reset()
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return err
			}
		}
	}
	idx := binary.BigEndian.AppendUint32(nil, uint32(i))
	if from == 0 && e.Size <= wholeMax {
		data := make([]byte, e.Size)
		if _, err := io.ReadFull(f, data); err != nil {
			return fmt.Errorf("changed while copying: %w", err)
		}
		h.Write(data)
		msg := append(append(append(buf[:0:0], kWhole), idx...), h.Sum(nil)...)
		if err := c.Send(ctx, tagData, append(msg, data...)); err != nil {
			return err
		}
		report(e.Size)
		return nil
	}
	hdr := binary.BigEndian.AppendUint64(append([]byte{kFrom}, idx...), uint64(from))
	if err := c.Send(ctx, tagData, hdr); err != nil {
		return err
	}
	buf[0] = kData
	for left := e.Size - from; left > 0; {
		n, err := io.ReadFull(f, buf[1:1+min(int64(ChunkSize), left)])
		if err != nil {
			return fmt.Errorf("changed while copying: %w", err)
		}
		h.Write(buf[1 : 1+n])
		if err := c.Send(ctx, tagData, buf[:1+n]); err != nil {
			return err
		}
		left -= int64(n)
		report(int64(n))
	}
	end := append(append([]byte{kEnd}, idx...), h.Sum(nil)...)
	return c.Send(ctx, tagData, end)
}

// recvControl waits for the control message of kind want and decodes it
// into v; a refusal becomes an ErrRefused error.
func recvControl(ctx context.Context, c *multirail.Conn, want byte, v any) error {
	for {
		m, err := c.Recv(ctx)
		if err != nil {
			return err
		}
		if m.Tag != tagControl || len(m.Data) == 0 {
			return fmt.Errorf("%w: unexpected message on tag %d", ErrProtocol, m.Tag)
		}
		switch m.Data[0] {
		case want:
			if err := json.Unmarshal(m.Data[1:], v); err != nil {
				return fmt.Errorf("%w: %v", ErrProtocol, err)
			}
			return nil
		case kRefuse:
			return fmt.Errorf("%w: %s", ErrRefused, m.Data[1:])
		default:
			return fmt.Errorf("%w: message kind %q on the control tag", ErrProtocol, m.Data[0])
		}
	}
}

// partName is where file p is received until it is verified.
func partName(p string) string {
	dir, base := path.Split(p)
	return dir + "." + base + PartSuffix
}

// ServeConfig configures Serve.
type ServeConfig struct {
	Logger *slog.Logger
}

// Serve receives one copy from a Send at the other end of c into root:
// each file is written to a part file next to it, checked against the
// sender's SHA-256 and renamed into place; after the last file the file
// system is synced once. A path that would leave root (through "..", an
// absolute path or a symlink) refuses the whole copy. Files that fail
// (a checksum mismatch, a write error) are listed in the Result; the
// others are kept.
func Serve(ctx context.Context, c *multirail.Conn, root *os.Root, cfg ServeConfig) (Result, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	first, err := c.Recv(ctx)
	if err != nil {
		return Result{}, err
	}
	if first.Tag != tagControl || len(first.Data) == 0 || first.Data[0] != kManifest {
		return Result{}, fmt.Errorf("%w: the first message is not a manifest", ErrProtocol)
	}
	m, err := DecodeManifest(first.Data[1:])
	if err == nil {
		err = prepare(root, m)
	}
	if err != nil {
		_ = c.Send(ctx, tagControl, append([]byte{kRefuse}, err.Error()...))
		return Result{}, err
	}
	s := &server{root: root, m: m, log: log, cur: -1, done: make([]bool, len(m.Files)),
		st: state{Have: make([]int64, len(m.Files)), Sum: make([]string, len(m.Files))}, hashes: map[int]hash.Hash{}}
	s.scanParts()
	sb, _ := json.Marshal(s.st)
	if err := c.Send(ctx, tagControl, append([]byte{kState}, sb...)); err != nil {
		return Result{}, err
	}
	defer s.closeCur()
	for {
		msg, err := c.Recv(ctx)
		if err != nil {
			return s.r, err
		}
		fin, err := s.handle(msg)
		c.Release(msg.Data)
		if err != nil {
			return s.r, err
		}
		if fin {
			break
		}
	}
	for i, d := range s.done {
		if !d {
			s.fail(i, errors.New("not sent"))
		}
	}
	if err := syncRoot(root); err != nil {
		log.Warn("sync failed", "err", err)
	} else {
		s.r.Synced = true
	}
	rb, _ := json.Marshal(s.r)
	return s.r, c.Send(ctx, tagControl, append([]byte{kResult}, rb...))
}

// prepare creates the manifest's directories and every file's parent,
// which also finds paths that would leave root through a symlink.
func prepare(root *os.Root, m *Manifest) error {
	dirs := append([]string(nil), m.Dirs...)
	for _, f := range m.Files {
		if d := path.Dir(f.Path); d != "." {
			dirs = append(dirs, d)
		}
	}
	sort.Strings(dirs)
	for i, d := range dirs {
		if i > 0 && dirs[i-1] == d {
			continue
		}
		if err := root.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("%w: directory %q: %v", ErrPath, d, err)
		}
	}
	for _, f := range m.Files {
		if st, err := root.Lstat(f.Path); err == nil && st.IsDir() {
			return fmt.Errorf("%w: %q is a directory here", ErrPath, f.Path)
		}
	}
	return nil
}

func syncRoot(root *os.Root) error {
	d, err := root.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	return syncFS(d)
}
