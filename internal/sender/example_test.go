package sender_test

import (
	"fmt"
	"time"

	"github.com/multirail/multirail/internal/sender"
	"github.com/multirail/multirail/sched"
)

// A rail that always has a backlog and delivers a 64 KiB segment every
// millisecond: after a few rate windows the estimate is its rate.
func Example() {
	r, err := sender.New[int](sender.Config{})
	if err != nil {
		panic(err)
	}
	var now int64
	for i := range 200 {
		r.Push(now, i, 64<<10)
		r.Push(now, i, 64<<10)
		r.Take(now)
		now += int64(time.Millisecond)
		if _, err := r.AckTo(now, r.Acked()+1, nil); err != nil {
			panic(err)
		}
	}
	var st sched.RailState
	r.Fill(&st)
	fmt.Printf("%.0f Mbit/s, %d queued, segment time %v\n", st.RateBps/1e6, st.Queued, time.Duration(st.SegmentTime))
	// Output: 524 Mbit/s, 200 queued, segment time 1ms
}
