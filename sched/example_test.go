package sched_test

import (
	"errors"
	"fmt"

	"github.com/multirail/multirail/sched"
)

func ExampleNew() {
	// Three rails of 200, 100 and 50 Mb/s, split statically by bandwidth.
	s, err := sched.New("weighted", sched.Config{
		Rails:      3,
		Bandwidths: []float64{200e6, 100e6, 50e6},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	rails := []sched.RailState{
		{Up: true, QueueCap: 8, NominalBps: 200e6},
		{Up: true, QueueCap: 8, NominalBps: 100e6},
		{Up: true, QueueCap: 8, NominalBps: 50e6},
	}
	var picks []int
	for i := range 7 {
		picks = append(picks, s.Pick(int64(i), 64<<10, rails))
	}
	fmt.Println("weighted:", picks)

	// Rail 1 goes down: it is never picked while it is down.
	rails[1].Up = false
	fmt.Println("rail 1 down:", s.Pick(7, 64<<10, rails), s.Pick(8, 64<<10, rails), s.Pick(9, 64<<10, rails))

	// No rail up: -1, the caller waits for a rail to change and asks again.
	rails[0].Up, rails[2].Up = false, false
	fmt.Println("all down:", s.Pick(10, 64<<10, rails))

	// An unknown name is an error that lists the registered names.
	_, err = sched.New("fastest", sched.Config{Rails: 3})
	fmt.Println(errors.Is(err, sched.ErrUnknown))
	// Output:
	// weighted: [0 1 0 2 0 1 0]
	// rail 1 down: 0 0 2
	// all down: -1
	// true
}
