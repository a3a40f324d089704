package multirail_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/multirail/multirail"
)

// token is the secret both ends share. In practice it comes from
// `multirail token`, handed to both hosts in MULTIRAIL_TOKEN or in a file
// named by MULTIRAIL_TOKEN_FILE (then Config.Token stays empty); a program
// that starts both ends itself, as these examples do, makes a fresh one.
var token = multirail.NewToken()

// connect listens on loopback and dials it over two rails. Both rails go to
// the listener's address; on real hosts each rail would name another remote
// address (and Rail.Local a local one) to use another NIC.
func connect(ctx context.Context, dialCfg multirail.Config) (client, server *multirail.Conn, err error) {
	ln, err := multirail.Listen("127.0.0.1:0", multirail.Config{Token: token})
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close() // accepted connections stay open

	type accepted struct {
		c   *multirail.Conn
		err error
	}
	acc := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept(ctx)
		acc <- accepted{c, err}
	}()

	addr := ln.Addr().String()
	dialCfg.Rails = []multirail.Rail{
		{Name: "rail0", Addr: addr},
		{Name: "rail1", Addr: addr},
	}
	client, err = multirail.Dial(ctx, dialCfg)
	a := <-acc
	if err != nil || a.err != nil {
		if client != nil {
			client.Close()
		}
		if a.c != nil {
			a.c.Close()
		}
		return nil, nil, errors.Join(err, a.err)
	}
	return client, a.c, nil
}

func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// The receiving side.
	ln, err := multirail.Listen("127.0.0.1:0", multirail.Config{Token: token})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	received := make(chan string, 1)
	go func() {
		c, err := ln.Accept(ctx)
		if err != nil {
			received <- err.Error()
			return
		}
		defer c.Close()
		m, err := c.Recv(ctx)
		if err != nil {
			received <- err.Error()
			return
		}
		received <- fmt.Sprintf("tag %d: %s", m.Tag, m.Data)
		c.Release(m.Data)
	}()

	// The sending side: two rails, both to the listener here.
	addr := ln.Addr().String()
	c, err := multirail.Dial(ctx, multirail.Config{
		Token: token,
		Rails: []multirail.Rail{
			{Name: "rail0", Addr: addr},
			{Name: "rail1", Addr: addr},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.Send(ctx, 7, []byte("hello over two rails")); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-received)
	// Output: tag 7: hello over two rails
}

func ExampleConn_Stats() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, server, err := connect(ctx, multirail.Config{Token: token, Scheduler: "roundrobin"})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	defer server.Close()

	// Each side has its own scheduler for its own direction: the dialer
	// asked for roundrobin, the listener uses the default.
	for _, side := range []struct {
		name string
		c    *multirail.Conn
	}{{"dialer", client}, {"listener", server}} {
		st := side.c.Stats()
		fmt.Printf("%s: scheduler %s, %d rails\n", side.name, st.Scheduler.Name, len(st.Rails))
	}
	for _, r := range client.Stats().Rails {
		fmt.Printf("%s up=%v\n", r.Name, r.Up)
	}
	// Output:
	// dialer: scheduler roundrobin, 2 rails
	// listener: scheduler qlearn, 2 rails
	// rail0 up=true
	// rail1 up=true
}

// TrySend sends a small message at once if the peer's flow-control
// credit covers it, and otherwise sends nothing: a goroutine that must
// also receive (an exchange between two ranks) can try first and hand the
// send to another goroutine only when the try declines.
func ExampleConn_TrySend() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, server, err := connect(ctx, multirail.Config{Token: token})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	defer server.Close()

	msg := []byte("ping")
	sent, err := client.TrySend(1, msg)
	if err != nil {
		log.Fatal(err)
	}
	if !sent {
		// No credit now: send concurrently with whatever this goroutine
		// must receive, as Send may wait for the peer.
		done := make(chan error, 1)
		go func() { done <- client.Send(ctx, 1, msg) }()
		defer func() { <-done }()
	}
	m, err := server.Recv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("tag %d: %s\n", m.Tag, m.Data)

	// Above Config.EagerLimit TrySend always declines: Send waits for
	// the peer to hold a large message.
	big := make([]byte, multirail.DefaultEagerLimit+1)
	sent, err = client.TrySend(2, big)
	fmt.Println("large message sent by TrySend:", sent, err)
	// Output:
	// tag 1: ping
	// large message sent by TrySend: false <nil>
}

func ExampleConn_SendOwned() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, server, err := connect(ctx, multirail.Config{Token: token})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	defer server.Close()

	// A buffer this side filled for the purpose (a copy) is handed over:
	// SendOwned returns once it is queued, and done says when it may be
	// reused (here it just reports it).
	buf := make([]byte, 1<<20)
	released := make(chan struct{})
	if err := client.SendOwned(ctx, 7, buf, func() { close(released) }); err != nil {
		log.Fatal(err)
	}
	m, err := server.Recv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	<-released
	fmt.Printf("tag %d: %d bytes; the buffer is free again\n", m.Tag, len(m.Data))
	// Output:
	// tag 7: 1048576 bytes; the buffer is free again
}

func ExampleConn_OnMessage() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, server, err := connect(ctx, multirail.Config{Token: token})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	defer server.Close()

	// A demultiplexer: each tag's messages go to a channel of their own.
	// The handler hands a message on where that needs no wait and declines
	// it otherwise; the Recv loop takes what it declines, waiting for room.
	inbox := map[uint32]chan []byte{1: make(chan []byte, 1), 2: make(chan []byte, 1)}
	route := func(m multirail.Message, wait bool) bool {
		ch := inbox[m.Tag]
		if wait {
			select {
			case ch <- m.Data:
			case <-ctx.Done():
			}
			return true
		}
		select {
		case ch <- m.Data:
			return true
		default:
			return false // full: the Recv loop waits for room instead
		}
	}
	server.OnMessage(func(m multirail.Message) bool { return route(m, false) })
	go func() {
		for {
			m, err := server.Recv(ctx)
			if err != nil {
				return // closed
			}
			route(m, true)
		}
	}()

	for i, tag := range []uint32{1, 1, 2, 1} {
		if err := client.Send(ctx, tag, fmt.Appendf(nil, "message %d", i)); err != nil {
			log.Fatal(err)
		}
	}
	// Each tag's messages come in the order they were sent, whichever
	// way they came (the handler declined some: tag 1's channel holds
	// one). A tag's channel that nobody empties holds up the Recv loop,
	// and the tags behind it: this program reads them all.
	for _, tag := range []uint32{1, 1, 2, 1} {
		fmt.Printf("tag %d: %s\n", tag, <-inbox[tag])
	}
	// Output:
	// tag 1: message 0
	// tag 1: message 1
	// tag 2: message 2
	// tag 1: message 3
}

func ExampleConfig() {
	cfg := multirail.Config{
		Rails: []multirail.Rail{
			// Bind each rail to a local address (a NIC) and name the peer's
			// address on the same network. Bandwidth (bits/s) is only
			// needed by the weighted scheduler.
			{Name: "eth0", Local: "10.0.0.1", Addr: "10.0.0.2:7000", Bandwidth: 25e9},
			{Name: "eth1", Local: "10.0.1.1", Addr: "10.0.1.2:7000", Bandwidth: 10e9},
		},
		Scheduler:        "weighted",
		SegmentSize:      256 << 10, // bytes per segment
		QueueDepth:       32,        // segments per rail queue
		MaxMessageSize:   64 << 20,
		MaxReceiveBuffer: 256 << 20, // flow-control window
		Checksum:         true,
		// Token is left empty: MULTIRAIL_TOKEN is used.
	}
	fmt.Println("rails:", len(cfg.Rails), "scheduler:", cfg.Scheduler)

	// Dial validates the configuration before it touches the network.
	cfg.Scheduler = "fastest"
	_, err := multirail.Dial(context.Background(), cfg)
	fmt.Println("unknown scheduler is a config error:", errors.Is(err, multirail.ErrConfig))

	cfg.Scheduler = ""    // the default
	cfg.SegmentSize = 100 // below the 512-byte minimum
	_, err = multirail.Dial(context.Background(), cfg)
	fmt.Println("tiny segments are a config error:", errors.Is(err, multirail.ErrConfig))
	// Output:
	// rails: 2 scheduler: weighted
	// unknown scheduler is a config error: true
	// tiny segments are a config error: true
}

// NewListener serves a listener the caller made: here a TCP socket opened
// with options of one's own (net.ListenConfig); an inherited socket or an
// in-memory listener for tests works the same way. Dialing through
// Config.DialRail lets rails be something other than plain TCP dials.
func ExampleNewListener() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var lc net.ListenConfig
	sock, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	ln, err := multirail.NewListener(sock, multirail.Config{Token: token})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close() // closes sock too

	addr := sock.Addr().String()
	var dialer net.Dialer
	cfg := multirail.Config{
		Token: token,
		Rails: []multirail.Rail{{Name: "a", Addr: addr}, {Name: "b", Addr: addr}},
		DialRail: func(ctx context.Context, r multirail.Rail) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", r.Addr)
		},
	}
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept(ctx)
		if err == nil {
			var m multirail.Message
			if m, err = c.Recv(ctx); err == nil {
				fmt.Printf("got %q\n", m.Data)
			}
			c.Close()
		}
		done <- err
	}()
	c, err := multirail.Dial(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Send(ctx, 0, []byte("over two rails")); err != nil {
		log.Fatal(err)
	}
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	c.Close()
	// Output: got "over two rails"
}
