package filecopy

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// Limits of a manifest.
const (
	MaxFiles    = 1 << 20 // files in one copy
	MaxPathLen  = 4096    // bytes of a path
	MaxNameLen  = 255     // bytes of one path component
	MaxFileSize = 1 << 50 // bytes of one file
	// PartSuffix ends the name of a file being received; names that end
	// with it are refused.
	PartSuffix = ".multirail-part"
)

// ErrPath is wrapped by every error about a path that is not a plain
// relative path inside the served directory.
var ErrPath = errors.New("filecopy: path not allowed")

// ErrProtocol is wrapped by every error about what the peer sent.
var ErrProtocol = errors.New("filecopy: protocol violation")

// Entry is one file of a copy.
type Entry struct {
	// Path is slash-separated and relative to the served directory.
	Path string `json:"path"`
	Size int64  `json:"size"`
	// Mode holds the permission bits (0o777) the file gets.
	Mode uint32 `json:"mode"`
}

// Manifest lists what a copy sends: its directories (created first, even
// when empty) and its files.
type Manifest struct {
	Version int      `json:"version"`
	Dirs    []string `json:"dirs,omitempty"`
	Files   []Entry  `json:"files"`
}

// CheckPath reports whether p is a plain relative path: not empty, valid
// UTF-8 without NUL, not absolute, no "", "." or ".." component, no
// component ending in PartSuffix, within the length limits.
func CheckPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%w: empty path", ErrPath)
	case len(p) > MaxPathLen:
		return fmt.Errorf("%w: %q is %d bytes long (at most %d)", ErrPath, p[:64]+"...", len(p), MaxPathLen)
	case !utf8.ValidString(p) || strings.ContainsRune(p, 0):
		return fmt.Errorf("%w: %q is not valid UTF-8 without NUL", ErrPath, p)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("%w: %q is absolute (paths are relative to the served directory)", ErrPath, p)
	}
	for _, c := range strings.Split(p, "/") {
		switch {
		case c == "":
			return fmt.Errorf("%w: %q has an empty component", ErrPath, p)
		case c == "." || c == "..":
			return fmt.Errorf("%w: %q has a %q component (it would leave the served directory or name it twice)", ErrPath, p, c)
		case len(c) > MaxNameLen:
			return fmt.Errorf("%w: %q has a component of %d bytes (at most %d)", ErrPath, p, len(c), MaxNameLen)
		case strings.HasSuffix(c, PartSuffix):
			return fmt.Errorf("%w: %q ends in %s, which names files being received", ErrPath, p, PartSuffix)
		}
	}
	return nil
}

// Check validates a manifest: every path plain (CheckPath), no path twice,
// no file where another entry needs a directory, sizes and modes in range.
func (m *Manifest) Check() error {
	if m.Version != Version {
		return fmt.Errorf("%w: manifest version %d, this side speaks %d", ErrProtocol, m.Version, Version)
	}
	if len(m.Files) > MaxFiles || len(m.Dirs) > MaxFiles {
		return fmt.Errorf("%w: %d files and %d directories (at most %d each)", ErrProtocol, len(m.Files), len(m.Dirs), MaxFiles)
	}
	isDir := make(map[string]bool, len(m.Dirs))
	isFile := make(map[string]bool, len(m.Files))
	for _, d := range m.Dirs {
		if err := CheckPath(d); err != nil {
			return err
		}
		if isDir[d] {
			return fmt.Errorf("%w: directory %q listed twice", ErrProtocol, d)
		}
		isDir[d] = true
	}
	for _, f := range m.Files {
		if err := CheckPath(f.Path); err != nil {
			return err
		}
		if f.Size < 0 || f.Size > MaxFileSize {
			return fmt.Errorf("%w: %q has size %d (allowed 0..%d)", ErrProtocol, f.Path, f.Size, int64(MaxFileSize))
		}
		if f.Mode&^0o777 != 0 {
			return fmt.Errorf("%w: %q has mode %o (only permission bits 0777)", ErrProtocol, f.Path, f.Mode)
		}
		if isFile[f.Path] || isDir[f.Path] {
			return fmt.Errorf("%w: %q listed twice", ErrProtocol, f.Path)
		}
		isFile[f.Path] = true
	}
	// A file's parents must not be files.
	check := func(p string) error {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if isFile[d] {
				return fmt.Errorf("%w: %q is a file and also the directory of %q", ErrProtocol, d, p)
			}
		}
		return nil
	}
	for _, f := range m.Files {
		if err := check(f.Path); err != nil {
			return err
		}
	}
	for _, d := range m.Dirs {
		if err := check(d); err != nil {
			return err
		}
	}
	return nil
}

// DecodeManifest parses and checks a manifest.
func DecodeManifest(b []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", ErrProtocol, err)
	}
	if err := m.Check(); err != nil {
		return nil, err
	}
	return &m, nil
}
