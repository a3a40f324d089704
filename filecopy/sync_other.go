//go:build !linux

package filecopy

import "os"

// syncFS syncs d's directory only where syncfs(2) is missing.
func syncFS(d *os.File) error { return d.Sync() }
