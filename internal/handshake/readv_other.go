//go:build !linux

package handshake

import "net"

func readvFor(net.Conn) (readvFunc, func()) { return nil, nil }
