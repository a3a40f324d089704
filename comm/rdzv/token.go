package rdzv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	tokens "github.com/multirail/multirail/internal/token"
)

// tokenFile is the name of a file:// store's token (see FileToken).
const tokenFile = "token"

// FileToken returns the token of the ranks that meet in the file://
// store url: the contents of the store's file "token", which the first
// rank to ask creates with a fresh random token (32 bytes, base64url),
// readable by its owner only. It lets ranks on one host (or on hosts that
// share the store's directory) authenticate each other with no token
// given. The directory is created 0700; a token file that others may read,
// or that belongs to another user, is refused (someone else prepared it).
// The store's files are removed after the exchange, the token with them.
func FileToken(url string) (string, error) {
	kind, dir, err := parseURL(url)
	if err != nil {
		return "", err
	}
	if kind != "file" {
		return "", fmt.Errorf("rdzv: FileToken: %s is not a file:// store", url)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("rdzv: rendezvous %s: %w", url, err)
	}
	name := filepath.Join(dir, tokenFile)
	f, err := os.CreateTemp(dir, ".token.tmp*") // mode 0600
	if err != nil {
		return "", fmt.Errorf("rdzv: rendezvous %s: %w", url, err)
	}
	_, err = f.WriteString(tokens.Generate() + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// A hard link makes the whole file appear at once, and fails if
		// another rank's is there already: the first rank's wins.
		err = os.Link(f.Name(), name)
		if errors.Is(err, fs.ErrExist) {
			err = nil
		}
	}
	os.Remove(f.Name())
	if err != nil {
		return "", fmt.Errorf("rdzv: rendezvous %s: writing the token: %w", url, err)
	}
	if err := ownedByMe(name); err != nil {
		return "", fmt.Errorf("rdzv: rendezvous %s: %w", url, err)
	}
	t, err := tokens.FromFile(name)
	if err != nil {
		return "", fmt.Errorf("rdzv: rendezvous %s: %w", url, err)
	}
	return t, nil
}
