package coll

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// call runs collective c with algo on transport t with small buffers of
// count elements per the spec convention, root 0.
func call(ctx context.Context, t Transport, c Collective, algo Algo, count int) error {
	n := t.Size()
	v := make([]float64, count)
	all := make([]float64, n*count)
	b := evenBounds(count, n)
	switch c {
	case CollBarrier:
		return Barrier(ctx, t, algo)
	case CollBcast:
		return Bcast(ctx, t, v, 0, algo)
	case CollReduce:
		return Reduce(ctx, t, v, make([]float64, count), Sum, 0, algo)
	case CollAllreduce:
		return Allreduce(ctx, t, v, Max, algo)
	case CollAllgather:
		return Allgather(ctx, t, v, all, algo)
	case CollReduceScatter:
		return ReduceScatter(ctx, t, v, make([]float64, b[t.Rank()+1]-b[t.Rank()]), Min, algo)
	case CollAlltoall:
		return Alltoall(ctx, t, all, make([]float64, n*count), algo)
	case CollGather:
		return Gather(ctx, t, v, all, 0, algo)
	case CollScatter:
		return Scatter(ctx, t, all, v, 0, algo)
	}
	return fmt.Errorf("unknown collective %v", c)
}

// TestFailingRank injects a transport failure at one rank, at its first,
// second or fourth operation, and checks that it surfaces as that error
// and that the others, cancelled as a communicator would cancel them,
// return (with the cancellation or nil) instead of hanging.
func TestFailingRank(t *testing.T) {
	t.Parallel()
	for _, c := range collectives {
		for _, algo := range Algorithms(c) {
			t.Run(fmt.Sprintf("%s/%s", c, algo), func(t *testing.T) {
				t.Parallel()
				for _, n := range []int{2, 3, 5, 8} {
					for fail := range n {
						for _, at := range []int{0, 1, 3} {
							m := newMesh(n, meshOpts{failRank: fail, failAt: at, rendezvous: at == 1, try: at == 3})
							errs := runRanks(context.Background(), m, -1, true, func(ctx context.Context, tr Transport) error {
								return call(ctx, tr, c, algo, 2*n+1)
							})
							where := fmt.Sprintf("n=%d fail=%d at=%d", n, fail, at)
							if at == 0 && !errors.Is(errs[fail], errInjected) {
								t.Fatalf("%s: failing rank returned %v, want %v", where, errs[fail], errInjected)
							}
							injected := false
							for r, err := range errs {
								switch {
								case err == nil:
								case errors.Is(err, errInjected):
									injected = true
									if r != fail {
										t.Fatalf("%s: rank %d returned the injected error", where, r)
									}
								case !errors.Is(err, context.Canceled):
									t.Fatalf("%s: rank %d: unexpected error %v", where, r, err)
								}
								if err != nil && !strings.HasPrefix(err.Error(), "coll: "+c.String()+" "+algo.String()+": ") {
									t.Fatalf("%s: rank %d: error %q lacks the collective and algorithm", where, r, err)
								}
							}
							if errs[fail] != nil && !injected {
								t.Fatalf("%s: failure not reported: %v", where, errs)
							}
						}
					}
				}
			})
		}
	}
}

// TestAbsentPeer runs every collective with one rank that never calls:
// the ranks that depend on it return the context's error. Sends
// rendezvous, so that a root that only sends also notices.
func TestAbsentPeer(t *testing.T) {
	t.Parallel()
	for _, c := range collectives {
		for _, algo := range Algorithms(c) {
			t.Run(fmt.Sprintf("%s/%s", c, algo), func(t *testing.T) {
				t.Parallel()
				for _, n := range []int{2, 5} {
					for _, absent := range []int{0, n - 1} {
						ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
						m := newMesh(n, meshOpts{failRank: -1, rendezvous: true})
						errs := runRanks(ctx, m, absent, false, func(ctx context.Context, tr Transport) error {
							return call(ctx, tr, c, algo, 3)
						})
						cancel()
						failed := 0
						for r, err := range errs {
							if err == nil {
								continue
							}
							failed++
							if !errors.Is(err, context.DeadlineExceeded) {
								t.Fatalf("n=%d absent=%d: rank %d: %v, want the deadline", n, absent, r, err)
							}
						}
						if failed == 0 {
							t.Fatalf("n=%d absent=%d: nobody noticed the absent rank", n, absent)
						}
					}
				}
			})
		}
	}
}

// TestCancelled checks that a call under a cancelled context returns
// context.Canceled on every rank (none starts communicating, so none can
// complete with messages that happen to be there).
func TestCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range collectives {
		for _, algo := range Algorithms(c) {
			m := newMesh(4, meshOpts{failRank: -1, rendezvous: true})
			errs := runRanks(ctx, m, -1, false, func(ctx context.Context, tr Transport) error {
				return call(ctx, tr, c, algo, 5)
			})
			for r, err := range errs {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("%s/%s: rank %d: %v, want context.Canceled", c, algo, r, err)
				}
			}
		}
	}
}

// TestArgumentErrors checks that bad arguments are reported before any
// communication.
func TestArgumentErrors(t *testing.T) {
	m := newMesh(3, meshOpts{failRank: -1})
	ep := m.endpoints()[1]
	ctx := context.Background()
	v := make([]int32, 4)
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"bcast root", Bcast(ctx, ep, v, 3, Auto), "root 3 out of range"},
		{"bcast negative root", Bcast(ctx, ep, v, -1, Auto), "root -1 out of range"},
		{"bcast algo", Bcast(ctx, ep, v, 0, Ring), "bcast has no algorithm ring (want auto or one of binomial, scatter-allgather, linear)"},
		{"barrier algo", Barrier(ctx, ep, Algo(99)), "no algorithm Algo(99)"},
		{"reduce recv", Reduce(ctx, ep, v, v[:2], Sum, 1, Auto), "len(recv) = 2, want 4"},
		{"reduce op", Reduce(ctx, ep, v, v, Op(7), 1, Auto), "invalid op 7"},
		{"allreduce op", Allreduce(ctx, ep, v, Op(-1), Auto), "invalid op -1"},
		{"allgather recv", Allgather(ctx, ep, v, v, Auto), "len(recv) = 4, want 12"},
		{"reduce-scatter recv", ReduceScatter(ctx, ep, v, v, Sum, Auto), "len(recv) = 4, want 1"},
		{"alltoall send", Alltoall(ctx, ep, v, v, Auto), "not a multiple of the 3 ranks"},
		{"alltoall recv", Alltoall(ctx, ep, v[:3], v, Auto), "len(recv) = 4, want 3"},
		{"gather recv", Gather(ctx, ep, v, v, 1, Auto), "len(recv) = 4, want 12"},
		{"scatter send", Scatter(ctx, ep, v, v, 1, Auto), "len(send) = 4, want 12"},
	}
	for _, c := range cases {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, c.err, c.want)
		}
	}
	if err := m.verify(); err != nil || len(m.boxes) != 0 {
		t.Errorf("argument errors communicated: %v, %d mailboxes", err, len(m.boxes))
	}
}

// TestMismatchedLengths checks that ranks disagreeing on a length get an
// error, not a corrupt result.
func TestMismatchedLengths(t *testing.T) {
	m := newMesh(2, meshOpts{failRank: -1})
	errs := runRanks(context.Background(), m, -1, true, func(ctx context.Context, tr Transport) error {
		return Allreduce(ctx, tr, make([]float32, 3+tr.Rank()), Sum, RecursiveDoubling)
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "ranks disagree") && !errors.Is(err, context.Canceled) {
			t.Errorf("rank %d: %v, want a length mismatch", r, err)
		}
	}
}
