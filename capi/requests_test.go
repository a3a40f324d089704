package capi

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestOrdering: nonblocking collectives issued back to back run in call
// order, one at a time, with the right results; the completion poll
// reports them in that order, each once; a blocking collective issued
// after them waits behind them.
func TestOrdering(t *testing.T) {
	hs := world(t, 3)
	const calls = 12
	const n = 1000
	onAll(t, hs, func(r int, h int64) {
		bufs := make([][]byte, calls)
		reqs := make([]int64, calls)
		for k := range calls {
			v := make([]int64, n)
			for i := range v {
				v[i] = int64(k*r + i)
			}
			bufs[k] = i64s(v...)
			var c int32
			var m string
			switch k % 3 {
			case 0:
				reqs[k], c, m = Iallreduce(h, nil, bufs[k], n, 4, 0)
			case 1:
				reqs[k], c, m = Ibcast(h, bufs[k], n, 4, int32(k%3))
			case 2:
				reqs[k], c, m = Iallreduce(h, nil, bufs[k], n, 4, 3) // max
			}
			ok(t, fmt.Sprintf("rank %d: call %d", r, k), c, m)
		}
		// A blocking one behind them: it can only finish after them.
		last := i64s(int64(r))
		c, m := Allreduce(h, nil, last, 1, 4, 0)
		ok(t, "blocking allreduce behind them", c, m)
		if v := fromI64s(last)[0]; v != 3 {
			t.Errorf("rank %d: blocking allreduce = %d, want 3", r, v)
		}
		var order []int64
		out := make([]int64, 5) // fewer than calls: several polls
		for len(order) < calls {
			got, c, m := Poll(h, out, 0) // all finished already: no wait
			ok(t, "poll", c, m)
			if got == 0 {
				t.Errorf("rank %d: poll found nothing with %d of %d reported", r, len(order), calls)
				break
			}
			order = append(order, out[:got]...)
		}
		if !slices.Equal(order, reqs) {
			t.Errorf("rank %d: completion order %v, want the call order %v", r, order, reqs)
		}
		if got, c, m := Poll(h, out, 0); got != 0 || c != OK {
			t.Errorf("rank %d: a poll after all were reported: %d %d %s", r, got, c, m)
		}
		for k, req := range reqs {
			done, _, c, m := Test(req)
			if !done {
				t.Errorf("rank %d: request %d not done after the poll reported it", r, k)
			}
			ok(t, fmt.Sprintf("rank %d: result of call %d", r, k), c, m)
			got := fromI64s(bufs[k])
			for i, v := range got {
				var w int64
				switch k % 3 {
				case 0:
					w = int64(k*3 + 3*i) // sum over r of k*r+i
				case 1:
					w = int64(k*(k%3) + i) // root k%3's values
				case 2:
					w = int64(k*2 + i) // max at r = 2
				}
				if v != w {
					t.Errorf("rank %d: call %d [%d] = %d, want %d", r, k, i, v, w)
					break
				}
			}
		}
	})
	if _, _, reqs := Live(); reqs != 0 {
		t.Errorf("%d requests left in the table", reqs)
	}
}

// TestConcurrentCallers: collectives from several goroutines of one rank
// run one at a time (every rank issues them in the same order, held by a
// lock here, as a program's threads would agree on one).
func TestPollWaitTest(t *testing.T) {
	hs := world(t, 2)
	h0, h1 := hs[0], hs[1]
	buf := make([]byte, 16)
	req, c, m := Irecv(h1, buf, AnySource, AnyTag)
	ok(t, "irecv", c, m)
	done, _, c, m := Test(req)
	if done || c != OK {
		t.Fatalf("test of an unmatched receive: done %v, %d %s", done, c, m)
	}
	_, c, m = Wait(req, 20)
	want(t, "wait of an unmatched receive", ErrTimeout, c, m)
	out := make([]int64, 4)
	start := time.Now()
	got, c, m := Poll(h1, out, 30)
	if got != 0 || c != OK || time.Since(start) < 25*time.Millisecond {
		t.Errorf("poll with nothing finished: %d %d %s after %v", got, c, m, time.Since(start))
	}
	// A poll that waits forever wakes when the message arrives.
	polled := make(chan int64)
	go func() {
		n, c, m := Poll(h1, out, -1)
		ok(t, "poll forever", c, m)
		if n != 1 {
			t.Errorf("poll reported %d requests, want 1", n)
		}
		polled <- out[0]
	}()
	time.Sleep(10 * time.Millisecond)
	if c, m := Send(h0, []byte("hello"), 1, 77); true {
		ok(t, "send", c, m)
	}
	if p := <-polled; p != req {
		t.Errorf("poll reported %d, want %d", p, req)
	}
	st, c, m := Wait(req, -1)
	ok(t, "wait", c, m)
	if st != (Status{Source: 0, Tag: 77, Bytes: 5}) || string(buf[:5]) != "hello" {
		t.Errorf("status %+v, buffer %q", st, buf[:5])
	}
	_, c, m = Wait(req, 0)
	want(t, "a second wait of a released request", ErrInvalid, c, m)

	// A request collected by mr_test before any poll is never polled.
	req, c, m = Isend(h0, []byte("x"), 1, 1)
	ok(t, "isend", c, m)
	if _, c, m := Wait(req, -1); true {
		ok(t, "wait isend", c, m)
	}
	if _, c, m := Recv(h1, buf, 0, 1); true {
		ok(t, "recv", c, m)
	}
	if n, _, _ := Poll(h0, out, 0); n != 0 {
		t.Errorf("poll reported %d requests already released", n)
	}
}

func TestP2P(t *testing.T) {
	hs := world(t, 3)
	onAll(t, hs, func(r int, h int64) {
		if r != 0 {
			// Everyone sends rank 0 its rank, ranks 1 and 2 also to each other.
			if c, m := Send(h, i32s(int32(r*10)), 0, int32(r)); true {
				ok(t, "send", c, m)
			}
			req, c, m := Isend(h, bytes.Repeat([]byte{byte(r)}, 100000), int32(3-r), 9)
			ok(t, "isend", c, m)
			buf := make([]byte, 100000)
			st, c, m := Recv(h, buf, int32(3-r), 9)
			ok(t, "recv", c, m)
			if st.Source != int32(3-r) || st.Bytes != 100000 || buf[99999] != byte(3-r) {
				t.Errorf("rank %d: recv status %+v, last byte %d", r, st, buf[99999])
			}
			_, c, m = Wait(req, -1)
			ok(t, "wait isend", c, m)
			return
		}
		// Rank 0: both messages with MR_ANY_SOURCE, through irecv and recv.
		b1, b2 := make([]byte, 4), make([]byte, 4)
		req, c, m := Irecv(h, b1, AnySource, AnyTag)
		ok(t, "irecv", c, m)
		st2, c, m := Recv(h, b2, AnySource, AnyTag)
		ok(t, "recv", c, m)
		st1, c, m := Wait(req, -1)
		ok(t, "wait irecv", c, m)
		got := []int32{fromI32s(b1)[0], fromI32s(b2)[0]}
		srcs := []int32{st1.Source, st2.Source}
		slices.Sort(got)
		slices.Sort(srcs)
		if !slices.Equal(got, []int32{10, 20}) || !slices.Equal(srcs, []int32{1, 2}) || st1.Tag != st1.Source {
			t.Errorf("rank 0: got %v from %v (statuses %+v %+v)", got, srcs, st1, st2)
		}
	})
	// Truncation: a message larger than the buffer.
	h0, h1 := hs[0], hs[1]
	if c, m := Send(h0, make([]byte, 10), 1, 3); true {
		ok(t, "send", c, m)
	}
	st, c, m := Recv(h1, make([]byte, 4), 0, 3)
	want(t, "recv into a short buffer", ErrTrunc, c, m)
	if st.Bytes != 10 {
		t.Errorf("truncated recv: status %+v, want bytes 10", st)
	}
	req, c, m := Irecv(h1, make([]byte, 4), 0, 4)
	ok(t, "irecv", c, m)
	if c, m := Send(h0, make([]byte, 10), 1, 4); true {
		ok(t, "send", c, m)
	}
	st, c, m = Wait(req, -1)
	want(t, "irecv into a short buffer", ErrTrunc, c, m)
	if st.Bytes != 10 {
		t.Errorf("truncated irecv: status %+v", st)
	}
	// mr_request_free withdraws an unmatched receive: the next message
	// goes to the next receive.
	req, c, m = Irecv(h1, make([]byte, 4), 0, 5)
	ok(t, "irecv", c, m)
	if c, m := RequestFree(req); true {
		ok(t, "request free", c, m)
	}
	if c, m := Send(h0, []byte("abc"), 1, 5); true {
		ok(t, "send", c, m)
	}
	b := make([]byte, 4)
	st, c, m = Recv(h1, b, 0, 5)
	ok(t, "recv after the free", c, m)
	if st.Bytes != 3 || string(b[:3]) != "abc" {
		t.Errorf("recv after the free: %+v %q", st, b)
	}
}

// TestFork: with another pid than the loader's, every call fails at once
// with MR_ERR_FORK and touches nothing; with the pid back, all works.
func TestFork(t *testing.T) {
	hs := world(t, 2)
	restore := SetPidSource(func() int { return os.Getpid() + 1 })
	b := make([]byte, 8)
	calls := map[string]func() int32{
		"rank":      func() int32 { return CommRank(hs[0]) },
		"size":      func() int32 { return CommSize(hs[0]) },
		"allreduce": func() int32 { c, _ := Allreduce(hs[0], nil, b, 1, 4, 0); return c },
		"barrier":   func() int32 { c, _ := Barrier(hs[0]); return c },
		"isend":     func() int32 { _, c, _ := Isend(hs[0], b, 1, 0); return c },
		"recv":      func() int32 { _, c, _ := Recv(hs[0], b, 1, 0); return c },
		"poll":      func() int32 { _, c, _ := Poll(hs[0], make([]int64, 1), -1); return c },
		"wait":      func() int32 { _, c, _ := Wait(1, -1); return c },
		"free":      func() int32 { c, _ := Free(hs[0]); return c },
		"init":      func() int32 { _, c, _ := InitEnv(""); return c },
		"prepare":   func() int32 { _, c, _ := Prepare("", 0, 2, ""); return c },
		"token":     func() int32 { c, _ := NewToken(make([]byte, 100)); return c },
	}
	for name, f := range calls {
		done := make(chan int32)
		go func() { done <- f() }()
		select {
		case c := <-done:
			if c != ErrFork {
				t.Errorf("%s in a 'child': code %d, want %d", name, c, ErrFork)
			}
		case <-time.After(time.Second):
			t.Fatalf("%s in a 'child' did not return at once", name)
		}
	}
	_, _, _, m := Test(1)
	if m != ForkMessage(int64(os.Getpid()+1), int64(os.Getpid())) {
		t.Errorf("message %q", m)
	}
	restore()
	if r := CommRank(hs[1]); r != 1 {
		t.Errorf("rank after the check = %d", r)
	}
	onAll(t, hs, func(r int, h int64) {
		if c, m := Barrier(h); true {
			ok(t, "barrier after the fork check", c, m)
		}
	})
}

// TestPrepareConnect: the two-step start through cards, as an MPI program
// would drive it, then a group of two of the ranks and abort.
func TestPrepareConnect(t *testing.T) {
	const n = 3
	tok := make([]byte, TokenLen)
	if c, m := NewToken(tok); true {
		ok(t, "new token", c, m)
	}
	token := string(tok[:bytes.IndexByte(tok, 0)])
	if len(token) < 32 {
		t.Fatalf("token %q", token)
	}
	pends := make([]int64, n)
	cards := make([][]byte, n)
	for r := range n {
		p, c, m := Prepare(`{"timeout": "20s"}`, int32(r), n, token)
		ok(t, "prepare", c, m)
		if c != OK {
			t.FailNow()
		}
		pends[r] = p
		ln, c, m := PendingCard(p, nil)
		ok(t, "card length", c, m)
		cards[r] = make([]byte, ln)
		if ln2, c, m := PendingCard(p, cards[r]); ln2 != ln || c != OK {
			t.Fatalf("card: %d %d %s", ln2, c, m)
		}
		if PendingSize(p) != n {
			t.Errorf("PendingSize = %d", PendingSize(p))
		}
	}
	hs := make([]int64, n)
	onAll(t, pends, func(r int, p int64) {
		var c int32
		var m string
		hs[r], c, m = Connect(p, cards)
		ok(t, fmt.Sprintf("rank %d: connect", r), c, m)
	})
	if t.Failed() {
		return
	}
	defer func() {
		for _, h := range hs {
			Free(h)
		}
	}()
	if _, c, m := Connect(pends[0], cards); true {
		want(t, "a second connect", ErrInvalid, c, m)
	}
	onAll(t, hs, func(r int, h int64) {
		if CommRank(h) != int32(r) || CommSize(h) != n {
			t.Errorf("rank %d: rank %d size %d", r, CommRank(h), CommSize(h))
		}
		b := i32s(int32(r + 1))
		if c, m := Allreduce(h, nil, b, 1, 3, 0); true {
			ok(t, "allreduce", c, m)
		}
		if v := fromI32s(b)[0]; v != 6 {
			t.Errorf("rank %d: allreduce = %d", r, v)
		}
	})
	// A group of ranks 2 and 0 (new ranks 0 and 1), made by them alone.
	gs := map[int]int64{}
	var mu sync.Mutex
	onAll(t, []int64{hs[0], hs[2]}, func(i int, h int64) {
		g, c, m := Group(h, []int32{2, 0}, "pair")
		ok(t, "group", c, m)
		mu.Lock()
		gs[i] = g
		mu.Unlock()
		if want := int32(1 - i); CommRank(g) != want || CommSize(g) != 2 {
			t.Errorf("group: rank %d (want %d), size %d", CommRank(g), want, CommSize(g))
		}
		b := i64s(int64(10 * (i + 1)))
		if c, m := Allreduce(g, nil, b, 1, 4, 0); true {
			ok(t, "group allreduce", c, m)
		}
		if v := fromI64s(b)[0]; v != 30 {
			t.Errorf("group allreduce = %d", v)
		}
	})
	for _, g := range gs {
		if c, m := Free(g); true {
			ok(t, "group free", c, m)
		}
	}
	// Abort: rank 1 gives up; the others' calls fail with MR_ERR_ABORTED.
	if c, m := Abort(hs[1], "test abort"); true {
		ok(t, "abort", c, m)
	}
	onAll(t, []int64{hs[0], hs[2]}, func(i int, h int64) {
		_, c, m := Recv(h, make([]byte, 1), 1, 0)
		want(t, "recv from an aborted rank", ErrAborted, c, m)
		t.Log(m)
	})
	// A pending rank that never connects is freed.
	p, c, m := Prepare("", 0, 2, token)
	ok(t, "prepare", c, m)
	if c, m := PendingFree(p); true {
		ok(t, "pending free", c, m)
	}
	if c, m := PendingFree(p); true {
		want(t, "pending free twice", ErrInvalid, c, m)
	}
	if _, c, m := Prepare("", 0, 2, ""); os.Getenv("MULTIRAIL_TOKEN") == "" {
		want(t, "prepare without a token", ErrConfig, c, m)
	}
	if cs, ps, _ := Live(); ps != 0 {
		t.Errorf("%d pending handles left (%d comms)", ps, cs)
	}
}

// TestLossyStream: loss-tolerant allreduce on two streams, stats and
// quality reports.
func TestLossyStream(t *testing.T) {
	cfg, err := ParseConfig(`{"lossy_reliable": true}`)
	if err != nil {
		t.Fatal(err)
	}
	hs := worldCfg(t, 3, cfg)
	onAll(t, hs, func(r int, h int64) {
		for _, stream := range []int64{1, 2} {
			for step := range 3 {
				n := 1000 * int(stream)
				v := make([]float32, n)
				for i := range v {
					v[i] = float32(r + i%7 + step)
				}
				b := f32s(v...)
				c, m := LossyAllreduce(h, b, int64(n), 4, stream, `{"error_feedback": true, "packet_floats": 128}`)
				ok(t, "lossy avg", c, m)
				for i, x := range fromF32s(b) {
					if w := float32(1 + i%7 + step); x != w {
						t.Errorf("rank %d: stream %d [%d] = %v, want %v", r, stream, i, x, w)
						break
					}
				}
				if c, m := LossyReport(h, stream, 0.5); true {
					ok(t, "report", c, m)
				}
			}
			st, c, m := GetLossyStats(h, stream)
			ok(t, "stats", c, m)
			if st.Packets == 0 || st.Discarded != 0 {
				t.Errorf("rank %d: stream %d stats %+v", r, stream, st)
			}
		}
		if st, _, _ := GetLossyStats(h, 99); st != (LossyStats{}) {
			t.Errorf("stats of an unused stream: %+v", st)
		}
	})
}

// TestLossyDiscards: with a fixed discard rate packets are discarded and
// counted, and the results stay finite and near the exact ones.
func TestLossyDiscards(t *testing.T) {
	cfg, err := ParseConfig(`{"lossy_fixed_rate": 0.3}`)
	if err != nil {
		t.Fatal(err)
	}
	hs := worldCfg(t, 3, cfg)
	onAll(t, hs, func(r int, h int64) {
		const n = 4096
		for range 3 {
			v := make([]float32, n)
			for i := range v {
				v[i] = 1
			}
			b := f32s(v...)
			if c, m := LossyAllreduce(h, b, n, 0, 3, `{"packet_floats": 64}`); true {
				ok(t, "lossy sum", c, m)
			}
			for i, x := range fromF32s(b) {
				if !(x > 0 && x < 10) {
					t.Errorf("rank %d: [%d] = %v, want near 3", r, i, x)
					break
				}
			}
		}
		st, c, m := GetLossyStats(h, 3)
		ok(t, "stats", c, m)
		if st.Discarded == 0 || st.Packets == 0 {
			t.Errorf("rank %d: stats %+v: want discarded packets", r, st)
		}
	})
}
