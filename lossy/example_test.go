package lossy_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/lossy"
)

// Three ranks average their vectors with a Ring. MemRing joins them
// in-process; over a network, each rank's RingTransport is a StageLink
// (loss-tolerant) or a ConnLink (reliable) over multirail connections to
// its neighbours. A Transpose over a MeshTransport (StageMesh, MemMesh) is
// used the same way.
func Example() {
	ts := lossy.MemRing(3, 0, 1)
	xs := [][]float32{{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}}
	var wg sync.WaitGroup
	for rank := range 3 {
		ring, err := lossy.NewRing(rank, 3, ts[rank], lossy.Config{Mean: true, PacketFloats: 2})
		if err != nil {
			panic(err)
		}
		wg.Go(func() {
			if err := ring.Allreduce(context.Background(), xs[rank]); err != nil {
				panic(err)
			}
		})
	}
	wg.Wait()
	fmt.Println(xs[0], xs[2])
	// Output: [5 6 7 8] [5 6 7 8]
}

// Loss-tolerant stages over a connection: the sender's discard rate starts
// at 0 and follows the receiver's feedback (here a fixed 30 % from the
// first feedback on, for a deterministic output).
func ExampleStageConn() {
	ctx := context.Background()
	ln, err := multirail.Listen("127.0.0.1:0", multirail.Config{Token: exampleToken})
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	accepted := make(chan *multirail.Conn)
	go func() { c, _ := ln.Accept(ctx); accepted <- c }()
	c, err := multirail.Dial(ctx, multirail.Config{Token: exampleToken, Rails: []multirail.Rail{{Addr: ln.Addr().String()}}})
	if err != nil {
		panic(err)
	}
	cfg := lossy.StageConfig{Seed: 7}
	cfg.Discard.Initial, cfg.Discard.DelayThreshold = 0.3, 1000
	snd, _ := lossy.NewStageConn(c, cfg)
	rcv, _ := lossy.NewStageConn(<-accepted, cfg)
	defer snd.Close()
	defer rcv.Close()

	packets := make([][]byte, 20)
	for i := range packets {
		packets[i] = []byte{byte(i)}
	}
	for range 2 {
		sent, _ := snd.Send(ctx, packets)
		st, _ := rcv.Recv(ctx)
		_ = rcv.ReportQuality(ctx, st.Number, 1)
		fmt.Printf("stage %d: rate %.1f, %d of %d packets arrived\n", st.Number, sent.Rate, st.Received, len(st.Packets))
		for snd.Stats().Controller.Applied <= st.Number {
			time.Sleep(time.Millisecond) // wait for the feedback
		}
	}
	// Output:
	// stage 0: rate 0.0, 20 of 20 packets arrived
	// stage 1: rate 0.3, 14 of 20 packets arrived
}

// exampleToken authenticates the examples' connections.
var exampleToken = multirail.NewToken()
