package token

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Env and FileEnv are the environment variables Resolve reads.
const (
	Env     = "MULTIRAIL_TOKEN"
	FileEnv = "MULTIRAIL_TOKEN_FILE"
)

// ErrFile is wrapped by the error for a token file that cannot be used.
var ErrFile = errors.New("token: unusable token file")

// Resolve returns the token to use: explicit if not empty, else the value
// of MULTIRAIL_TOKEN if not empty, else the contents of the file
// MULTIRAIL_TOKEN_FILE names (see FromFile), else "" (no token).
func Resolve(explicit string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if t := os.Getenv(Env); t != "" {
		return t, nil
	}
	if path := os.Getenv(FileEnv); path != "" {
		return FromFile(path)
	}
	return "", nil
}

// FromFile reads a token from path: the whole file, less one trailing
// line break. A file that others than its owner may read (any group or
// other permission bit), an empty one or one that cannot be read is
// refused with an error naming the path.
func FromFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%w: %s=%s: %v", ErrFile, FileEnv, path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("%w: %s=%s: %v", ErrFile, FileEnv, path, err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s=%s is not a regular file", ErrFile, FileEnv, path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("%w: %s=%s has mode %#o: others may read it; allowed only its owner (chmod 600)", ErrFile, FileEnv, path, perm)
	}
	const maxSize = 4096
	b := make([]byte, maxSize+1)
	n, _ := f.Read(b)
	if n > maxSize {
		return "", fmt.Errorf("%w: %s=%s is over %d bytes; a token is one line", ErrFile, FileEnv, path, maxSize)
	}
	t := strings.TrimSuffix(strings.TrimSuffix(string(b[:n]), "\n"), "\r")
	if t == "" {
		return "", fmt.Errorf("%w: %s=%s is empty", ErrFile, FileEnv, path)
	}
	return t, nil
}

// Size is the number of random bytes in a generated token.
const Size = 32

// MinLength is the shortest token accepted without an explicit opt-out
// (multirail's Config.Insecure): a token is the key of everything, and one
// that can be guessed is no key.
const MinLength = 32

// Generate returns a new token: Size random bytes, base64url without
// padding (43 characters).
func Generate() string {
	var b [Size]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}
