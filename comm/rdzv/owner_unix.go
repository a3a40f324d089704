//go:build unix

package rdzv

import (
	"fmt"
	"os"
	"syscall"
)

// ownedByMe refuses a file that belongs to another user.
func ownedByMe(name string) error {
	fi, err := os.Lstat(name)
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s belongs to user %d, not to this process's user %d", name, st.Uid, os.Getuid())
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", name)
	}
	return nil
}
