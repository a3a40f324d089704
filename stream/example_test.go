package stream_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/lossy"
	"github.com/multirail/multirail/stream"
)

// Stream a text over a connection of two loopback rails, each block
// allowed to lose up to 10 % of its packets.
func Example() {
	ctx := context.Background()
	token := multirail.NewToken() // both ends are this program's
	ln, err := multirail.Listen("127.0.0.1:0", multirail.Config{Token: token})
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	accepted := make(chan *multirail.Conn)
	go func() { c, _ := ln.Accept(ctx); accepted <- c }()
	addr := ln.Addr().String()
	c, err := multirail.Dial(ctx, multirail.Config{Token: token, Rails: []multirail.Rail{{Addr: addr}, {Addr: addr}}})
	if err != nil {
		panic(err)
	}
	cfg := lossy.StageConfig{}
	cfg.Discard.Max = 0.1 // the bound on each block's loss
	snd, _ := lossy.NewStageConn(c, cfg)
	rcv, _ := lossy.NewStageConn(<-accepted, cfg)
	defer snd.Close()
	defer rcv.Close()

	text := strings.Repeat("multirail ", 100_000)
	go stream.Send(ctx, snd, strings.NewReader(text), stream.Config{})
	var out bytes.Buffer
	st, err := stream.Receive(ctx, rcv, &out, stream.Config{})
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Len() == len(text), st.Blocks, st.WorstBlockShare >= 0.9)
	// Output: true 4 true
}
