package tunnel_test

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/tunnel"
)

// A tunnel over a one-rail connection on loopback: a local TCP connection
// carried as a stream comes out at the target, an upper-casing server.
func Example() {
	ctx := context.Background()
	target, _ := net.Listen("tcp", "127.0.0.1:0")
	defer target.Close()
	go func() { // the target: answers with its input upper-cased
		c, _ := target.Accept()
		b, _ := io.ReadAll(c)
		for i := range b {
			if 'a' <= b[i] && b[i] <= 'z' {
				b[i] -= 'a' - 'A'
			}
		}
		c.Write(b)
		c.Close()
	}()

	cfg := tunnel.ConnConfig(multirail.Config{Token: multirail.NewToken()}, 0)
	ln, _ := multirail.Listen("127.0.0.1:0", cfg)
	defer ln.Close()
	accepted := make(chan *multirail.Conn)
	go func() { c, _ := ln.Accept(ctx); accepted <- c }()
	dcfg := cfg
	dcfg.Rails = []multirail.Rail{{Addr: ln.Addr().String()}}
	oc, err := multirail.Dial(ctx, dcfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer oc.Close()
	ac := <-accepted
	defer ac.Close()

	// The accepting end connects every stream to the target.
	serve, _ := tunnel.NewSession(ac, tunnel.Config{Dial: func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", target.Addr().String())
	}})
	defer serve.Close()
	open, _ := tunnel.NewSession(oc, tunnel.Config{})
	defer open.Close()

	// An application's connection (here one end of a loopback pair) becomes a stream.
	app, local := loopback()
	if err := open.Open(local); err != nil {
		fmt.Println(err)
		return
	}
	app.Write([]byte("hello over every rail"))
	app.CloseWrite()
	reply, _ := io.ReadAll(app)
	fmt.Println(string(reply))
	// Output: HELLO OVER EVERY RAIL
}

func loopback() (*net.TCPConn, net.Conn) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	a, _ := net.Dial("tcp", ln.Addr().String())
	b, _ := ln.Accept()
	return a.(*net.TCPConn), b
}
