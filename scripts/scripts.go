// Package scripts holds the project's scripts; programs that run one of
// them at run time take it from here, so that the binary carries the same
// file as the repository.
package scripts

import _ "embed"

// TorchrunWrapper is torchrun-wrapper.py: Debian's torchrun (torch 1.13 on
// Python 3.11) made to start workers; run it with /usr/bin/python3 and
// torchrun's arguments.
//
//go:embed torchrun-wrapper.py
var TorchrunWrapper []byte
