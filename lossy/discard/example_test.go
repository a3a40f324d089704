package discard_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/multirail/multirail/lossy/discard"
)

// A sender's loop: begin a stage, drop packets at the stage's rate, and
// feed back what the receiver reported.
func Example() {
	c, err := discard.New(discard.Config{Initial: 0.1, Up: 0.1, Down: 0.05})
	if err != nil {
		panic(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	drop := make([]bool, 100)
	periods := []time.Duration{10, 10, 20, 20, 20} // ms; congestion from stage 2
	quality := []float64{1, 1, 1, 1, 0.5}          // quality drops at stage 4
	for i := range periods {
		stage, rate := c.Begin()
		dropped := discard.Select(rng, 100, rate, drop)
		_ = c.Period(stage, periods[i]*time.Millisecond, 100-dropped)
		_ = c.Quality(stage, quality[i])
		fmt.Printf("stage %d: sent at %.2f, next %.2f (%v)\n", stage, rate, c.Rate(), c.Stats().Last)
	}
	// Output:
	// stage 0: sent at 0.00, next 0.10 (started)
	// stage 1: sent at 0.10, next 0.10 (kept)
	// stage 2: sent at 0.10, next 0.20 (raised)
	// stage 3: sent at 0.20, next 0.20 (kept)
	// stage 4: sent at 0.20, next 0.15 (lowered)
}
