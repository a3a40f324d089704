package qlearn_test

import (
	"fmt"

	"github.com/multirail/multirail/sched"
	"github.com/multirail/multirail/sched/qlearn"
)

// Two rails, rail 1 four times slower: after a few segments the improved
// preset has learned that a segment waits longer on rail 1 and prefers
// rail 0 while both queues are equally full.
func Example() {
	s, err := qlearn.New(qlearn.Improved, sched.Config{Rails: 2, Seed: 1},
		qlearn.Config{Epsilon: qlearn.F(0), EpsilonMin: qlearn.F(0)})
	if err != nil {
		fmt.Println(err)
		return
	}
	rails := []sched.RailState{
		{Up: true, QueueCap: 8, RateBps: 400e6},
		{Up: true, QueueCap: 8, RateBps: 100e6},
	}
	for range 4 {
		a := s.Pick(0, 65536, rails)
		s.Departed(0, a, 65536, 0, rails)
	}
	fmt.Println("next segment goes to rail", s.Pick(0, 65536, rails))

	var x sched.Explanation
	s.(sched.Explainer).Explain(&x)
	fmt.Printf("levels %v, expected delay rail 0 %.2f ms, rail 1 %.2f ms\n",
		x.Levels, -x.Values[0]*1e3, -x.Values[1]*1e3)
	// Output:
	// next segment goes to rail 0
	// levels [0 0], expected delay rail 0 1.31 ms, rail 1 5.24 ms
}

// Custom constants for the patent preset, parsed from a command-line
// option string; ranges are checked when the scheduler is built.
func ExampleParseOptions() {
	qc, err := qlearn.ParseOptions("k=40,beta=0.2")
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = qlearn.New(qlearn.Patent, sched.Config{Rails: 3}, qc)
	fmt.Println(err)
	// Output:
	// sched: invalid config: qlearn-patent: K = 40, need 8..32
}
