package filecopy

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncFS flushes the whole file system d is on: one call for every file
// of a copy, instead of a sync per file.
func syncFS(d *os.File) error { return unix.Syncfs(int(d.Fd())) }

// startWriteback starts writing n bytes of f from off back to disk and
// returns without waiting (sync_file_range(2), SYNC_FILE_RANGE_WRITE).
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
