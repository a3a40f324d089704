package comm_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/multirail/multirail/comm"
)

// Three ranks average their vectors. MemRing joins them in-process; over a
// network, each rank's RingTransport is a comm.StageLink (loss-tolerant) or a
// comm.ConnLink (reliable) over multirail connections to its neighbours.
func Example() {
	ts := comm.MemRing(3, 0, 1)
	xs := [][]float32{{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}}
	var wg sync.WaitGroup
	for rank := range 3 {
		ring, err := comm.NewRing(rank, 3, ts[rank], comm.RingConfig{Op: comm.Mean, PacketFloats: 2})
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
