package comm_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"sync"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/comm"
	"github.com/multirail/multirail/comm/launch"
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

// Two steps, for programs that already exchange small blobs between ranks
// (MPI_Allgather, torch's store, a shared file): every rank prepares and
// publishes its card, then connects with every rank's card.
func ExamplePrepare() {
	ctx := context.Background()
	const n = 3
	token := multirail.NewToken() // drawn by one rank, shared with all
	pending := make([]*comm.Pending, n)
	cards := make([][]byte, n)
	for r := range n { // each rank, in its own process
		p, err := comm.Prepare(ctx, launch.Info{Rank: r, Size: n}, comm.Config{Transport: multirail.Config{Token: token}})
		if err != nil {
			log.Fatal(err)
		}
		pending[r], cards[r] = p, p.Card()
	}
	cs := make([]*comm.Comm, n)
	var wg sync.WaitGroup
	for r, p := range pending {
		wg.Go(func() {
			c, err := p.Connect(ctx, cards)
			if err != nil {
				log.Fatal(err)
			}
			cs[r] = c
		})
	}
	wg.Wait()
	for _, c := range cs {
		wg.Go(func() {
			x := []int32{int32(c.Rank())}
			if err := comm.Allreduce(ctx, c, x, comm.Sum); err != nil {
				log.Fatal(err)
			}
			if c.Rank() == 0 {
				fmt.Println("sum of ranks:", x[0])
			}
		})
	}
	wg.Wait()
	closeAll(cs)
	// Output: sum of ranks: 3
}

// Raw memory of any element type, here bfloat16 (the upper halves of
// float32 values), reduced through float32.
func ExampleAllreduceBytes() {
	ctx := context.Background()
	cs, err := comm.NewLocal(ctx, 2, comm.Config{})
	if err != nil {
		log.Fatal(err)
	}
	out := make([]float32, 2)
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			buf := make([]byte, 4)
			for i, v := range []float32{1.5, float32(c.Rank())} {
				binary.LittleEndian.PutUint16(buf[2*i:], comm.Float32ToBFloat16(v))
			}
			if err := comm.AllreduceBytes(ctx, c, comm.BFloat16, buf, comm.Sum); err != nil {
				log.Fatal(err)
			}
			if c.Rank() == 0 {
				for i := range out {
					out[i] = comm.BFloat16ToFloat32(binary.LittleEndian.Uint16(buf[2*i:]))
				}
			}
		})
	}
	wg.Wait()
	closeAll(cs)
	fmt.Println(out)
	// Output: [3 1]
}

// Only the members of a group create it (as torch.distributed.new_group
// asks the backend), and need no communication to do so.
func ExampleComm_Group() {
	ctx := context.Background()
	cs, err := comm.NewLocal(ctx, 3, comm.Config{})
	if err != nil {
		log.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, c := range cs {
		if c.Rank() == 1 {
			continue // not a member: never called
		}
		wg.Go(func() {
			g, err := c.Group([]int{0, 2}, "evens")
			if err != nil {
				log.Fatal(err)
			}
			defer g.Close()
			x := []int64{int64(c.Rank())}
			if err := comm.Allreduce(ctx, g, x, comm.Sum); err != nil {
				log.Fatal(err)
			}
			if g.Rank() == 0 {
				fmt.Println("group of", g.Size(), "sum", x[0])
			}
		})
	}
	wg.Wait()
	closeAll(cs)
	// Output: group of 2 sum 2
}
