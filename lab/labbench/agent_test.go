package labbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail"
)

func TestSpecValidate(t *testing.T) {
	ok := Spec{Role: RoleRecv, Kind: KindTCP, Listen: []string{"10.10.1.2:0"}, NRails: 1, EpochNs: 1, Duration: time.Second, Bucket: Bucket}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mod := range []func(*Spec){
		func(s *Spec) { s.Role = "relay" },
		func(s *Spec) { s.Kind = "udp" },
		func(s *Spec) { s.Duration = 0 },
		func(s *Spec) { s.Listen = nil },
		func(s *Spec) { s.Role = RoleSend }, // no rails, no size
	} {
		s := ok
		mod(&s)
		if err := s.Validate(); !errors.Is(err, ErrSpec) {
			t.Errorf("%+v: %v, want ErrSpec", s, err)
		}
	}
}

func TestRailOf(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want int
	}{{"10.10.1.2", 0}, {"10.10.3.1", 2}, {"10.10.4.2", -1}, {"10.10.99.2", -1}, {"192.168.1.1", -1}, {"::ffff:10.10.2.2", 1}, {"fe80::1", -1}} {
		if got := railOf(netip.MustParseAddr(tc.addr), 3); got != tc.want {
			t.Errorf("railOf(%s) = %d, want %d", tc.addr, got, tc.want)
		}
	}
}

// TestAgentsOverLoopback runs a receiving and a sending agent of the tcp
// and multirail kinds over loopback (no namespaces): the protocol's lines
// and the result.
func TestAgentsOverLoopback(t *testing.T) {
	t.Setenv(multirail.TokenEnv, multirail.NewToken()) // as the bench gives its agents
	for _, kind := range []string{KindTCP, KindMultirail} {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			const nrails, buckets = 2, 4
			epoch := time.Now().Add(500 * time.Millisecond)
			spec := Spec{Role: RoleRecv, Kind: kind, NRails: nrails, EpochNs: epoch.UnixNano(), Duration: buckets * Bucket, Bucket: Bucket, Size: 64 << 10}
			spec.Listen = []string{"127.0.0.1:0"}
			if kind == KindTCP {
				spec.Listen = []string{"127.0.0.1:0", "127.0.0.1:0"}
			} else {
				spec.Sched, spec.Window = "roundrobin", 4
			}
			pr, pw := io.Pipe()
			recvErr := make(chan error, 1)
			go func() { err := RunAgent(ctx, spec, pw, nil); pw.Close(); recvErr <- err }()
			sc := bufio.NewScanner(pr)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			if !sc.Scan() {
				t.Fatalf("no line from the receiver: %v", <-recvErr)
			}
			f := strings.Fields(sc.Text())
			if len(f) != 2 || f[0] != Ready {
				t.Fatalf("first line %q, want %s ADDRS", sc.Text(), Ready)
			}
			addrs := strings.Split(f[1], ",")
			if len(addrs) != len(spec.Listen) {
				t.Fatalf("listening on %v", addrs)
			}
			spec.Role = RoleSend
			for i := range nrails {
				spec.Rails = append(spec.Rails, Rail{Name: "r", Local: "127.0.0.1", Remote: addrs[min(i, len(addrs)-1)]})
			}
			sendErr := make(chan error, 1)
			go func() { sendErr <- RunAgent(ctx, spec, io.Discard, nil) }()
			var progress int
			var res *AgentResult
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				switch {
				case len(f) == 2+nrails && f[0] == Progress:
					progress++
				case len(f) > 1 && f[0] == ResultLine:
					res = &AgentResult{}
					if err := json.Unmarshal([]byte(strings.TrimPrefix(sc.Text(), ResultLine+" ")), res); err != nil {
						t.Fatal(err)
					}
				default:
					t.Errorf("unexpected line %q", sc.Text())
				}
			}
			if err := <-sendErr; err != nil {
				t.Fatalf("sender: %v", err)
			}
			if err := <-recvErr; err != nil {
				t.Fatalf("receiver: %v", err)
			}
			if progress != buckets || res == nil || len(res.Total) != buckets || len(res.Rails) != nrails || res.Note != "" {
				t.Fatalf("%d progress lines, result %+v", progress, res)
			}
			var total, rails int64
			for k := range buckets {
				total += res.Total[k]
				for i := range nrails {
					rails += res.Rails[i][k]
					if kind == KindTCP && res.Rails[i][k] == 0 {
						t.Errorf("rail %d carried nothing in bucket %d", i, k)
					}
				}
			}
			if total == 0 || rails != total {
				t.Errorf("total %d bytes, rails %d", total, rails)
			}
		})
	}
}
