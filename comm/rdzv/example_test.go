package rdzv_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/multirail/multirail/comm/rdzv"
)

// Three ranks meet at a server (here in the same process, as rank 0 or
// `multirail run` serves it); each gets every rank's card, by rank.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv, err := rdzv.NewServer(ln, rdzv.ServerConfig{Size: 3, JobID: "job-42", Token: "s3cret"})
	if err != nil {
		panic(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()

	url := "tcp://" + ln.Addr().String()
	tables := make([][][]byte, 3)
	done := make(chan error, 3)
	for rank := range 3 {
		go func() {
			card := rdzv.Card{JobID: "job-42", Rank: rank, Size: 3, Data: fmt.Appendf(nil, "host-%d:7000", rank)}
			var err error
			tables[rank], err = rdzv.Exchange(ctx, url, "s3cret", card)
			done <- err
		}()
	}
	for range 3 {
		if err := <-done; err != nil {
			panic(err)
		}
	}
	fmt.Println("serve:", <-served)
	for r, card := range tables[2] {
		fmt.Printf("rank 2 sees rank %d at %s\n", r, card)
	}
	// Output:
	// serve: <nil>
	// rank 2 sees rank 0 at host-0:7000
	// rank 2 sees rank 1 at host-1:7000
	// rank 2 sees rank 2 at host-2:7000
}
