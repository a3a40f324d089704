package sim_test

import (
	"fmt"
	"time"

	"github.com/multirail/multirail/sim"
)

// ExampleRun compares striping with shortest-queue scheduling on two rails
// of different rates, one of which loses half its capacity halfway.
func ExampleRun() {
	sc := &sim.Scenario{
		Duration: 4 * time.Second,
		Rails: []sim.Rail{
			{Name: "fast", RateBps: 100e6, Delay: time.Millisecond,
				Load: []sim.Load{{Kind: sim.LoadStep, At: 2 * time.Second, Fraction: 0.5}}},
			{Name: "slow", RateBps: 50e6, Delay: time.Millisecond},
		},
		Traffic: sim.Traffic{Kind: sim.KindBulk, Size: 1 << 20},
	}
	for _, name := range []string{"roundrobin", "shortestqueue"} {
		r, err := sim.Run(sc, name)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%-13s %5.1f of %5.1f Mbit/s, fast rail's share %.2f\n",
			name, r.GoodputBps/1e6, r.CapacityBps/1e6, r.Rails[0].Share)
	}
	// Output:
	// roundrobin    102.1 of 125.0 Mbit/s, fast rail's share 0.51
	// shortestqueue 124.8 of 125.0 Mbit/s, fast rail's share 0.60
}
