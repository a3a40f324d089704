package comm_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/multirail/multirail/comm"
)

// A program started by any launcher (multirail run, mpirun, srun,
// torchrun, a Kubernetes Indexed Job) joins the job with Init, which finds
// its rank, the other ranks and the rails to each of them.
func ExampleInit() {
	ctx := context.Background()
	c, err := comm.Init(ctx, comm.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	x := []float64{float64(c.Rank())}
	if err := comm.Allreduce(ctx, c, x, comm.Sum); err != nil {
		log.Fatal(err)
	}
	if c.Rank() == 0 {
		fmt.Printf("%d ranks, sum of ranks %v\n", c.Size(), x[0])
	}
}

// Four ranks in one process (NewLocal; a job uses Init) sum their
// vectors; every rank gets the result.
func ExampleAllreduce() {
	ctx := context.Background()
	cs, err := comm.NewLocal(ctx, 4, comm.Config{})
	if err != nil {
		log.Fatal(err)
	}
	results := make([][]int64, len(cs))
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			x := []int64{int64(c.Rank()), 10}
			if err := comm.Allreduce(ctx, c, x, comm.Sum); err != nil {
				log.Fatal(err)
			}
			results[c.Rank()] = x
		})
	}
	wg.Wait()
	closeAll(cs)
	fmt.Println(results[0], results[3])
	// Output: [6 40] [6 40]
}

// Every rank posts a receive from its left neighbour and sends to its
// right one without blocking, then waits for both.
func ExampleComm_Isend() {
	ctx := context.Background()
	cs, err := comm.NewLocal(ctx, 3, comm.Config{})
	if err != nil {
		log.Fatal(err)
	}
	got := make([]string, len(cs))
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			n, r := c.Size(), c.Rank()
			recv := c.Irecv(ctx, (r+n-1)%n, 5)
			send := c.Isend(ctx, (r+1)%n, 5, []byte(fmt.Sprintf("from %d", r)))
			if err := comm.WaitAll(ctx, recv, send); err != nil {
				log.Fatal(err)
			}
			m, _ := recv.Wait(ctx)
			got[r] = string(m.Data)
		})
	}
	wg.Wait()
	closeAll(cs)
	fmt.Println(got)
	// Output: [from 2 from 0 from 1]
}

func closeAll(cs []*comm.Comm) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() { _ = c.Close() })
	}
	wg.Wait()
}
