package comm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/multirail/multirail/lossy"
	"github.com/multirail/multirail/lossy/discard"
)

func TestSplit(t *testing.T) {
	cs := local(t, 5, Config{})
	each(t, cs, func(ctx context.Context, c *Comm) error {
		color := c.Rank() % 2
		if c.Rank() == 4 {
			color = Undefined
		}
		sub, err := c.Split(ctx, color, -c.Rank()) // reverse order by key
		if err != nil {
			return err
		}
		if c.Rank() == 4 {
			if sub != nil {
				return fmt.Errorf("Undefined got a communicator")
			}
			return c.Barrier(ctx)
		}
		defer sub.Close()
		// Evens {0, 2} and odds {1, 3}, ranked by descending world rank.
		if sub.Size() != 2 || sub.Rank() != 1-c.Rank()/2 {
			return fmt.Errorf("rank %d: sub rank %d of %d", c.Rank(), sub.Rank(), sub.Size())
		}
		x := []int64{int64(c.Rank())}
		if err := Allreduce(ctx, sub, x, Sum); err != nil {
			return err
		}
		if want := int64(2*color + 2); x[0] != want {
			return fmt.Errorf("sub allreduce %d, want %d", x[0], want)
		}
		// Point-to-point on the sub communicator does not mix with the world's.
		peer := 1 - sub.Rank()
		if err := c.Send(ctx, sub.WorldRank(peer), 1, []byte("world")); err != nil {
			return err
		}
		if err := sub.Send(ctx, peer, 1, []byte("sub")); err != nil {
			return err
		}
		m, err := sub.Recv(ctx, peer, 1)
		if err != nil || string(m.Data) != "sub" {
			return fmt.Errorf("sub recv %q %v", m.Data, err)
		}
		m, err = c.Recv(ctx, sub.WorldRank(peer), 1)
		if err != nil || string(m.Data) != "world" {
			return fmt.Errorf("world recv %q %v", m.Data, err)
		}
		return c.Barrier(ctx)
	})
}

// TestLossTolerantOption: the loss-tolerant allreduce (the transpose, or
// the ring on request) as an option of Allreduce, over stage connections
// that share the peer connections with everything else: with nothing
// discarded (StageConfig.Reliable) it equals the exact mean. (Discarding
// and bias are tested on Transpose and Ring themselves, over lossy.MemMesh and
// lossy.MemRing, and below.)
func TestLossTolerantOption(t *testing.T) {
	for _, ring := range []bool{false, true} {
		t.Run(fmt.Sprintf("ring=%v", ring), func(t *testing.T) { lossTolerantExact(t, ring) })
	}
}

func lossTolerantExact(t *testing.T, ring bool) {
	cs := local(t, 3, Config{Stage: lossy.StageConfig{Reliable: true}})
	each(t, cs, func(ctx context.Context, c *Comm) error {
		for call := range 3 {
			x := make([]float32, 5000)
			want := make([]float32, len(x))
			for i := range x {
				x[i] = float32(c.Rank()*i%13 + call)
				for r := range c.Size() {
					want[i] += float32(r*i%13 + call)
				}
				want[i] /= float32(c.Size())
			}
			if err := Allreduce(ctx, c, x, Mean, LossTolerant(lossy.Config{PacketFloats: 256, Ring: ring})); err != nil {
				return err
			}
			for i := range x {
				if math.Abs(float64(x[i]-want[i])) > 1e-4 {
					return fmt.Errorf("call %d: x[%d] = %v, want %v", call, i, x[i], want[i])
				}
			}
			if err := c.ReportQuality(ctx, 1); err != nil {
				return err
			}
			// Ordinary traffic between the loss-tolerant calls.
			y := []int32{1}
			if err := Allreduce(ctx, c, y, Sum); err != nil || y[0] != int32(c.Size()) {
				return fmt.Errorf("allreduce between: %v %v", y, err)
			}
		}
		return nil
	})
}

// TestLossTolerantDiscards: over the communicator's own stage connections,
// with the discard controller starting at rate 0.5, ranks holding 1..4
// get results that differ from the exact mean call by call (packets were
// discarded) but average to it: the transpose's estimator is unbiased on
// data whose ranks differ. (The ring's results average about 40 % off on
// such data: TestRingBiasedOnNonIID.)
func TestLossTolerantDiscards(t *testing.T) {
	const calls, n = 40, 4096
	cs := local(t, 4, Config{Stage: lossy.StageConfig{Discard: discard.Config{Initial: 0.5, Max: 0.6}}})
	each(t, cs, func(ctx context.Context, c *Comm) error {
		sum, differ := 0.0, 0
		for range calls {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(c.Rank() + 1)
			}
			if err := Allreduce(ctx, c, x, Mean, LossTolerant(lossy.Config{PacketFloats: 64})); err != nil {
				return err
			}
			for _, v := range x {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					return fmt.Errorf("result %v", v)
				}
				if v != 2.5 {
					differ++
				}
				sum += float64(v) / (n * calls)
			}
			if err := c.ReportQuality(ctx, 1); err != nil {
				return err
			}
		}
		if differ == 0 {
			return fmt.Errorf("every result was exact: nothing was discarded")
		}
		if math.Abs(sum-2.5) > 0.25 {
			return fmt.Errorf("results average %.3f over %d calls, want 2.5 within 0.25", sum, calls)
		}
		return nil
	})
}

// TestSetFixedRate: Comm.SetFixedRate pins the loss-tolerant sends' rate
// on stage connections already open and on those opened later, and
// refuses a rate outside [0, 1).
func TestSetFixedRate(t *testing.T) {
	cs := local(t, 3, Config{Stage: lossy.StageConfig{Discard: discard.Config{Initial: 0.05}}})
	each(t, cs, func(ctx context.Context, c *Comm) error {
		x := make([]float32, 3*64*20)
		rate := func() (float64, error) {
			before := c.LossyStats()
			if err := Allreduce(ctx, c, x, Mean, LossTolerant(lossy.Config{PacketFloats: 64})); err != nil {
				return 0, err
			}
			st := c.LossyStats()
			return float64(st.PacketsDropped-before.PacketsDropped) / float64(st.PacketsSent-before.PacketsSent), nil
		}
		for _, want := range []float64{0.5, 0.25} {
			if err := c.SetFixedRate(want); err != nil {
				return err
			}
			got, err := rate()
			if err != nil {
				return err
			}
			if math.Abs(got-want) > 0.05 {
				return fmt.Errorf("SetFixedRate(%v): %.3f of the packets dropped", want, got)
			}
		}
		for _, bad := range []float64{-0.5, 1, math.NaN()} {
			if err := c.SetFixedRate(bad); !errors.Is(err, ErrConfig) {
				return fmt.Errorf("SetFixedRate(%v) = %v, want ErrConfig", bad, err)
			}
		}
		return nil
	})
}
