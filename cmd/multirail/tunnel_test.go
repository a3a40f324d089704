package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/multirail/multirail"
)

func TestTunnelFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tunnel", "serve"}, "--to is required"},
		{[]string{"tunnel", "serve", "--to", "nowhere"}, "--to \"nowhere\""},
		{[]string{"tunnel", "serve", "--to", "h:1", "--window", "1KiB"}, "--window"},
		{[]string{"tunnel", "serve", "--to", "h:1", "--chunk", "100MiB"}, "--chunk"},
		{[]string{"tunnel", "serve", "--to", "h:1", "--max-streams", "0"}, "--max-streams 0"},
		{[]string{"tunnel", "serve", "--to", "h:1", "--metrics", "9100"}, "--metrics"},
		{[]string{"tunnel", "connect"}, "--rails is required"},
		{[]string{"tunnel", "connect", "--rails", "emu:100mbit"}, "need --peer"},
		{[]string{"tunnel", "connect", "--rails", "tcp:10.0.0.1>1.2.3.4", "--local", "x"}, "--local \"x\""},
		{[]string{"tunnel", "connect", "--rails", "tcp:10.0.0.1>1.2.3.4", "--sched", "weighted"}, "--sched \"weighted\""},
		{[]string{"tunnel", "bench", "--rails", "loop"}, "emu:RATE"},
		{[]string{"tunnel", "bench", "--duration", "1ms"}, "--duration 1ms"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line containing %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// startCmd starts the binary with args and returns it and the first
// stderr line containing each of marks (the rest of each line after it).
func startCmd(t *testing.T, env []string, args []string, marks ...string) (*exec.Cmd, []string) {
	t.Helper()
	cmd := exec.Command(multirailBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	pr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	found := make([]string, len(marks))
	sc := bufio.NewScanner(pr)
	left := len(marks)
	for left > 0 && sc.Scan() {
		for i, m := range marks {
			if j := strings.Index(sc.Text(), m); j >= 0 && found[i] == "" {
				found[i] = strings.Fields(sc.Text()[j+len(m):])[0]
				left--
			}
		}
	}
	if left > 0 {
		t.Fatalf("%v: stderr ended before %q", args, marks)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	return cmd, found
}

// TestTunnelCommands: `tunnel serve` and `tunnel connect` as processes, two
// loopback rails between them: a connection to --local reaches --to with
// its bytes intact both ways, serve's /metrics counts the stream, and both
// exit 0 on SIGTERM.
func TestTunnelCommands(t *testing.T) {
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	go func() { // echo
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	env := []string{"MULTIRAIL_TOKEN=" + multirail.NewToken()}
	serve, got := startCmd(t, env, []string{"tunnel", "serve", "--listen", "127.0.0.1:0", "--to", target.Addr().String(), "--metrics", "127.0.0.1:0"},
		"metrics on http://", "tunnel listening on ")
	metricsURL, peer := "http://"+got[0], strings.TrimSuffix(got[1], ",")
	conn, got := startCmd(t, env, []string{"tunnel", "connect", "--rails", "loop,loop", "--peer", peer, "--local", "127.0.0.1:0"}, "tunnel from ")

	c, err := net.Dial("tcp", got[0])
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 3<<20)
	_, _ = rand.Read(data)
	go func() { _, _ = c.Write(data); _ = c.(*net.TCPConn).CloseWrite() }()
	back, err := io.ReadAll(c)
	c.Close()
	if err != nil || !bytes.Equal(back, data) {
		t.Fatalf("echo through the tunnel: %d of %d bytes, err %v", len(back), len(data), err)
	}
	var opened, received float64
	rails := map[string]bool{}
	for _, s := range scrape(t, metricsURL) {
		switch s.name {
		case "multirail_tunnel_streams_opened_total":
			opened = s.value
		case "multirail_tunnel_received_bytes_total":
			received = s.value
		case "multirail_rail_up":
			rails[s.labels["rail"]] = s.value == 1
		}
	}
	if opened != 1 || received != float64(len(data)) || len(rails) != 2 {
		t.Fatalf("serve's metrics: streams opened %v (want 1), bytes received %v (want %d), rails %v (want 2 up)", opened, received, len(data), rails)
	}
	for _, p := range []*exec.Cmd{conn, serve} {
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- p.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%v after SIGTERM: %v", p.Args[1:3], err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%v did not exit on SIGTERM", p.Args[1:3])
		}
	}
}
