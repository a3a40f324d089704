package capi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/comm"
	"github.com/multirail/multirail/lossy/discard"
)

func TestBadArguments(t *testing.T) {
	hs := world(t, 3)
	b := make([]byte, 64)
	for _, tc := range []struct {
		name string
		f    func(h int64) (int32, string)
		code int32
	}{
		{"handle 0", func(int64) (int32, string) { return Allreduce(0, b, b, 1, 4, 0) }, ErrInvalid},
		{"unknown handle", func(int64) (int32, string) { return Barrier(1 << 50) }, ErrInvalid},
		{"dtype 9", func(h int64) (int32, string) { return Allreduce(h, b, b, 1, 9, 0) }, ErrInvalid},
		{"dtype -1", func(h int64) (int32, string) { return Bcast(h, b, 1, -1, 0) }, ErrInvalid},
		{"op 8", func(h int64) (int32, string) { return Allreduce(h, b, b, 1, 4, 8) }, ErrInvalid},
		{"negative count", func(h int64) (int32, string) { return Allreduce(h, b, b, -1, 4, 0) }, ErrInvalid},
		{"huge count", func(h int64) (int32, string) { return Allreduce(h, b, b, 1<<62, 4, 0) }, ErrInvalid},
		{"NULL recvbuf", func(h int64) (int32, string) { return Allreduce(h, b, nil, 1, 4, 0) }, ErrInvalid},
		{"short recvbuf", func(h int64) (int32, string) { return Allgather(h, b[:8], b[:16], 1, 4) }, ErrInvalid},
		{"root 3", func(h int64) (int32, string) { return Bcast(h, b, 1, 4, 3) }, ErrInvalid},
		{"bxor on float32", func(h int64) (int32, string) { return Allreduce(h, b, b, 1, 7, 7) }, ErrInvalid},
		{"avg on bool", func(h int64) (int32, string) { return Allreduce(h, b, b, 1, 2, 4) }, ErrInvalid},
		{"alltoallv NULL counts", func(h int64) (int32, string) { return Alltoallv(h, b, nil, nil, b, nil, nil, 0) }, ErrInvalid},
		{"alltoallv negative count", func(h int64) (int32, string) {
			return Alltoallv(h, b, []int64{1, -1, 1}, []int64{0, 1, 2}, b, []int64{1, 1, 1}, []int64{0, 1, 2}, 0)
		}, ErrInvalid},
		{"lossy prod", func(h int64) (int32, string) { return LossyAllreduce(h, b, 4, 1, 0, "") }, ErrInvalid},
		{"lossy opts unknown key", func(h int64) (int32, string) { return LossyAllreduce(h, b, 4, 0, 0, `{"ef":true}`) }, ErrInvalid},
		{"send to rank 3", func(h int64) (int32, string) { return Send(h, b, 3, 0) }, ErrInvalid},
		{"send tag -1", func(h int64) (int32, string) { return Send(h, b, 1, -1) }, ErrInvalid},
		{"send tag > MR_MAX_TAG", func(h int64) (int32, string) { return Send(h, b, 1, MaxTag+1) }, ErrInvalid},
		{"recv from rank -2", func(h int64) (int32, string) { _, c, m := Recv(h, b, -2, 0); return c, m }, ErrInvalid},
		{"irecv tag -2", func(h int64) (int32, string) { _, c, m := Irecv(h, b, 0, -2); return c, m }, ErrInvalid},
		{"test of no request", func(int64) (int32, string) { _, _, c, m := Test(12345678); return c, m }, ErrInvalid},
		{"wait of no request", func(int64) (int32, string) { _, c, m := Wait(0, 0); return c, m }, ErrInvalid},
		{"free of no request", func(int64) (int32, string) { return RequestFree(-5) }, ErrInvalid},
		{"poll max 0", func(h int64) (int32, string) { _, c, m := Poll(h, nil, 0); return c, m }, ErrInvalid},
		{"group of nobody", func(h int64) (int32, string) { _, c, m := Group(h, nil, "k"); return c, m }, ErrInvalid},
		{"group without me", func(h int64) (int32, string) { _, c, m := Group(h, []int32{7}, "k"); return c, m }, ErrInvalid},
		{"pending card of no pending", func(int64) (int32, string) { _, c, m := PendingCard(99999999, nil); return c, m }, ErrInvalid},
		{"prepare rank 2 of 2", func(int64) (int32, string) { _, c, m := Prepare("", 2, 2, ""); return c, m }, ErrInvalid},
		{"new token into 64 bytes", func(int64) (int32, string) { return NewToken(make([]byte, 64)) }, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, m := tc.f(hs[0])
			want(t, tc.name, tc.code, c, m)
			if m == "" || strings.Contains(m, "\n") || len(m) > MaxMsg {
				t.Errorf("message %q: want one non-empty line of at most %d bytes", m, MaxMsg)
			}
			t.Log(m)
		})
	}
	if r := CommRank(0); r != ErrInvalid {
		t.Errorf("CommRank(0) = %d, want %d", r, ErrInvalid)
	}
	// After all of that, the communicator still works: every refusal
	// came before the collective started.
	onAll(t, hs, func(r int, h int64) {
		buf := i64s(int64(r))
		if c, m := Allreduce(h, nil, buf, 1, 4, 0); true {
			ok(t, "allreduce after the refusals", c, m)
		}
		if v := fromI64s(buf)[0]; v != 3 {
			t.Errorf("rank %d: allreduce after the refusals = %d, want 3", r, v)
		}
	})
}

// TestMismatch: ranks that call one allreduce with different counts get
// MR_ERR_PEER on every rank, not a hang; so do later collectives.
func TestMismatch(t *testing.T) {
	hs := world(t, 3)
	onAll(t, hs, func(r int, h int64) {
		n := int64(4)
		if r == 1 {
			n = 5
		}
		buf := make([]byte, 8*n)
		c, m := Allreduce(h, nil, buf, n, 4, 0)
		want(t, fmt.Sprintf("rank %d: mismatched allreduce", r), ErrPeer, c, m)
		t.Logf("rank %d: %s", r, m)
		c, m = Barrier(h)
		want(t, fmt.Sprintf("rank %d: barrier after it", r), ErrPeer, c, m)
	})
}

// TestFreed: a freed communicator's calls fail with MR_ERR_CLOSED, also
// the ones queued or waiting when it was freed.
func TestFreed(t *testing.T) {
	hs := world(t, 3)
	h := hs[0]
	// Rank 0 alone queues a collective (the others never come) and posts
	// a receive nobody matches; freeing rank 0 ends both.
	b := make([]byte, 8)
	req1, c, m := Iallreduce(h, nil, b, 1, 4, 0)
	ok(t, "iallreduce", c, m)
	req2, c, m := Ibcast(h, b, 1, 4, 0)
	ok(t, "ibcast", c, m)
	req3, c, m := Irecv(h, b, 1, 5)
	ok(t, "irecv", c, m)
	done := make(chan [2]any)
	go func() {
		_, c, m := Wait(req2, -1)
		done <- [2]any{c, m}
	}()
	// On rank 1 of another world: a blocking recv and a blocking
	// collective (started: the others never join it) in other threads;
	// freeing rank 1 ends both with MR_ERR_CLOSED.
	hs2 := world(t, 3)
	blocked := make(chan [2]any, 2)
	go func() {
		_, c, m := Recv(hs2[1], make([]byte, 8), 2, 9)
		blocked <- [2]any{c, m}
	}()
	go func() {
		c, m := Allgather(hs2[1], b, make([]byte, 24), 1, 4)
		blocked <- [2]any{c, m}
	}()
	time.Sleep(50 * time.Millisecond)
	if c, m := Free(hs2[1]); true {
		ok(t, "free rank 1", c, m)
	}
	for range 2 {
		r := <-blocked
		want(t, "a blocking call when its communicator is freed", ErrClosed, r[0].(int32), r[1].(string))
		t.Log(r[1])
	}
	if c, m := Free(h); true {
		ok(t, "free", c, m)
	}
	r := <-done
	want(t, "wait of a queued call when freed", ErrClosed, r[0].(int32), r[1].(string))
	for _, req := range []int64{req1, req3} {
		_, c, m := Wait(req, 0)
		want(t, "wait of a request of a freed communicator", ErrInvalid, c, m)
	}
	if c, m := Allreduce(h, nil, b, 1, 4, 0); true {
		want(t, "allreduce after free", ErrClosed, c, m)
	}
	if c, m := Free(h); true {
		want(t, "free after free", ErrClosed, c, m)
	}
	_, c, m = Poll(h, make([]int64, 1), 0)
	want(t, "poll after free", ErrClosed, c, m)
	if r := CommRank(h); r != ErrClosed {
		t.Errorf("CommRank after free = %d, want %d", r, ErrClosed)
	}
}

func TestCode(t *testing.T) {
	for _, tc := range []struct {
		err   error
		ph    phase
		code  int32
		short string
	}{
		{nil, phaseCall, OK, ""},
		{fmt.Errorf("x: %w", comm.ErrClosed), phaseCall, ErrClosed, ""},
		{&comm.PeerError{Rank: 1, Op: "allreduce", Err: comm.ErrAborted}, phaseCall, ErrAborted, ""},
		{&comm.PeerError{Rank: 1, Op: "allreduce", Err: errors.New("gone")}, phaseCall, ErrPeer, ""},
		{fmt.Errorf("%w: count", comm.ErrMismatch), phaseCall, ErrPeer, ""},
		{fmt.Errorf("%w", comm.ErrTruncated), phaseCall, ErrTrunc, ""},
		{fmt.Errorf("%w", comm.ErrRank), phaseCall, ErrInvalid, ""},
		{fmt.Errorf("%w", comm.ErrTag), phaseCall, ErrInvalid, ""},
		{fmt.Errorf("%w: x", comm.ErrConfig), phaseCall, ErrInvalid, ""},
		{fmt.Errorf("%w: x", comm.ErrConfig), phaseStart, ErrConfig, ""},
		{fmt.Errorf("%w: %w", comm.ErrBootstrap, multirail.ErrConfig), phaseStart, ErrConfig, ""},
		{fmt.Errorf("%w: rank 2 never came", comm.ErrBootstrap), phaseStart, ErrBoot, ""},
		{fmt.Errorf("%w: %w", comm.ErrBootstrap, &comm.PeerError{Rank: 1, Err: errors.New("gone")}), phaseStart, ErrBoot, ""},
		{errors.New("something"), phaseCall, ErrInternal, ""},
		{errors.New("line one\nline two\ttab"), phaseCall, ErrInternal, "line one line two tab"},
		{errors.New(strings.Repeat("é", 600)), phaseCall, ErrInternal, strings.Repeat("é", 511)},
	} {
		c, m := codeAt(tc.err, tc.ph)
		if c != tc.code {
			t.Errorf("%v (phase %d): code %d, want %d", tc.err, tc.ph, c, tc.code)
		}
		if tc.short != "" && m != tc.short {
			t.Errorf("%q: message %q, want %q", tc.err, m, tc.short)
		}
		if len(m) > MaxMsg || strings.ContainsAny(m, "\n\r\t") {
			t.Errorf("message %q: not one line of <= %d bytes", m, MaxMsg)
		}
	}
	for c := int32(-12); c <= 1; c++ {
		if s := Strerror(c); s == "" {
			t.Errorf("Strerror(%d) is empty", c)
		}
	}
}

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig(`{"ifname": "eth0,eth1", "emu": "emu:200mbit,emu:100mbit", "scheduler": "qlearn", "timeout": "90s",
		"algorithms": "allreduce=ring", "token": "tok", "insecure": true, "loopback_rails": 2, "busy_poll": "0"}`)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.IfName != "eth0,eth1" || cfg.Emu != "emu:200mbit,emu:100mbit" || cfg.Transport.Scheduler != "qlearn" ||
		cfg.Timeout.Seconds() != 90 || len(cfg.Algorithms) != 1 || cfg.Transport.Token != "tok" || !cfg.Transport.Insecure ||
		cfg.LoopbackRails != 2 || cfg.Transport.BusyPoll != -1 {
		t.Errorf("parsed %+v", cfg)
	}
	if cfg, err := ParseConfig(""); err != nil || cfg.IfName != "" || cfg.Stage.Discard.Rule != discard.RuleMatch || cfg.Stage.Discard.Initial != discard.Recommended.Initial {
		t.Errorf("empty: %v %+v (want the recommended controller, the match rule)", err, cfg)
	}
	if cfg, err := ParseConfig(`{"lossy_controller": "rule=patent,up=0.1"}`); err != nil || cfg.Stage.Discard.Rule != discard.RulePatent || cfg.Stage.Discard.Up != 0.1 {
		t.Errorf("lossy_controller: %v %+v", err, cfg.Stage.Discard)
	}
	for _, bad := range []struct{ json, want string }{
		{`{"lossy_controller": "rule=oracle"}`, `"lossy_controller"`},
		{`{"ifnmae": "eth0"}`, `unknown key "ifnmae"`},
		{`{"timeout": 90}`, `"timeout"`},
		{`{"timeout": "-1s"}`, `"timeout"`},
		{`{"insecure": "yes"}`, `"insecure"`},
		{`{"loopback_rails": 1000}`, `"loopback_rails"`},
		{`{"busy_poll": "1s"}`, `"busy_poll"`},
		{`{"algorithms": "allreduce=nope"}`, `"algorithms"`},
		{`[1]`, `not a JSON object`},
		{`{} {}`, `more than one`},
	} {
		_, err := ParseConfig(bad.json)
		if err == nil || !strings.Contains(err.Error(), bad.want) || !errors.Is(err, comm.ErrConfig) {
			t.Errorf("%s: error %v; want one naming %s that wraps comm.ErrConfig", bad.json, err, bad.want)
		}
	}
	// mr_init_env refuses an unknown key with MR_ERR_CONFIG before it
	// looks for a launcher.
	_, c, m := InitEnv(`{"bogus": 1}`)
	want(t, "InitEnv with an unknown key", ErrConfig, c, m)
	if !strings.Contains(m, `"bogus"`) {
		t.Errorf("message %q does not name the key", m)
	}
	rc, err := ParseLossyOpts(`{"error_feedback": true, "packet_floats": 256}`)
	if err != nil || !rc.ErrorFeedback || rc.PacketFloats != 256 {
		t.Errorf("lossy opts: %v %+v", err, rc)
	}
}

// TestInitEnvNoLauncher: without a launcher's variables mr_init_env fails
// with MR_ERR_BOOTSTRAP (and a message), not a hang.
func TestInitEnvNoLauncher(t *testing.T) {
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		for _, p := range []string{"MULTIRAIL_", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_", "OMPI_", "PMI_", "SLURM_", "TORCHELASTIC", "PMIX"} {
			if strings.HasPrefix(k, p) {
				t.Setenv(k, "")
				os.Unsetenv(k)
			}
		}
	}
	_, c, m := InitEnv("")
	want(t, "InitEnv without a launcher", ErrBoot, c, m)
	t.Log(m)
}

func TestPanicRecovered(t *testing.T) {
	hs := world(t, 1)
	ce, _, _ := lookup(hs[0], "test")
	_, c, m := ce.submit(true, func(context.Context) error { panic("boom") })
	want(t, "a panicking job", ErrPanic, c, m)
	if !strings.Contains(m, "boom") {
		t.Errorf("message %q does not carry the panic", m)
	}
	t.Log(m)
	// The executor survives it.
	if c, m := Barrier(hs[0]); true {
		ok(t, "barrier after the panic", c, m)
	}
}
