//go:build !linux

package rail

import "net"

func readvFor(net.Conn) readvFunc { return nil }
