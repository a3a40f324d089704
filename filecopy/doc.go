// Package filecopy copies files and directory trees over a
// multirail.Conn to a serving end that writes them under one directory:
// `multirail cp` is its command.
//
// Send (the client) sends a Manifest: the directories and files, with
// slash-separated paths relative to the served directory, sizes and
// permission bits. Serve (the server) checks every path (CheckPath: no
// absolute path, no "." or ".." component) and opens them all through an
// os.Root, so that no path, even through a symlink in the served
// directory, leaves it; one bad path refuses the whole copy before
// anything is written. It answers with what it already has of each file:
// the part files an interrupted copy left, with their SHA-256.
//
// The data then flows on one tag, in order: a file that fits one message
// whole, or a file's data from an offset in chunks of ChunkSize and its
// SHA-256 at the end. Where the serving end's part matches the start of the
// source (the client hashes the same prefix), the copy resumes after it;
// otherwise the file is sent again from the start. Each file is written
// to a part file next to its name (".NAME.multirail-part"), checked against
// the sender's SHA-256 while it arrives and renamed into place; a file
// that fails is removed and listed in the Result, and the copy goes on.
// After the last file the serving end syncs the file system once
// (syncfs(2)) and reports: when Send returns, what it copied is durable.
//
// Symlinks and other non-regular files in the sources are skipped (Plan
// lists them).
package filecopy
