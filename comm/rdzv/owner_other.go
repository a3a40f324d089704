//go:build !unix

package rdzv

// ownedByMe cannot tell owners apart here; the file's mode is still checked.
func ownedByMe(string) error { return nil }
