package lab

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func needLab(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err.Error())
	}
}

// testConfig is a lab of rates with a prefix of its own; offloads stay on
// where ethtool is missing (the checks here are loose enough for that).
func testConfig(t *testing.T, rates ...float64) Config {
	t.Helper()
	_, err := exec.LookPath("ethtool")
	if err != nil {
		t.Log("ethtool not found: offloads stay on")
	}
	return Config{Rates: rates, Prefix: testPrefix(), Offloads: err != nil}
}

// othersUp reports whether any lab is up, such as one of another test
// package running at the same time (go test runs packages in parallel).
func othersUp() bool { return len(Prefixes()) > 0 }

// checkCCRestored checks that the init namespace's allowed congestion
// controls are what they were before the test's labs came up. Labs of
// other tests running meanwhile change that list too, so then it only
// says so.
func checkCCRestored(t *testing.T, before []string, othersBefore bool) {
	t.Helper()
	if othersBefore || othersUp() {
		t.Log("other labs were up during the test (another test package?): the allowed congestion controls are not compared")
		return
	}
	if got := allowedCC(t); !slices.Equal(got, before) {
		t.Errorf("allowed congestion controls after Down: %v, before Up: %v", got, before)
	}
}

// testPrefix is a prefix no other test run uses at the same time.
func testPrefix() string { return fmt.Sprintf("mrt%05x", rand.IntN(1<<20)) }

func allowedCC(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(allowedCCPath)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// gone checks that nothing of the lab with prefix is left.
func gone(t *testing.T, prefix string) {
	t.Helper()
	if left := labNamespaces(prefix); len(left) > 0 {
		t.Errorf("namespaces %v still exist", left)
	}
	for i := 0; i < MaxHosts; i++ {
		for _, ns := range []string{HostNS(prefix, 2, i%2), HostNS(prefix, MaxHosts, i)} {
			if _, err := os.Stat(HostsPath(ns)); err == nil {
				t.Errorf("%s still exists", HostsPath(ns))
			}
		}
	}
	if _, err := os.Stat(stateDir(prefix)); err == nil {
		t.Errorf("%s still exists", stateDir(prefix))
	}
	if Exists(prefix) {
		t.Errorf("Exists(%q) after Down", prefix)
	}
}

func TestLabIntegration(t *testing.T) {
	needLab(t)
	before, othersBefore := allowedCC(t), othersUp()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rates := []float64{50e6, 20e6}
	cfg := testConfig(t, rates...)
	prefix := cfg.Prefix
	l, err := Up(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Down()
	if l.NS(0) != prefix+"A" || l.NS(1) != prefix+"B" || l.Rails() != 2 || l.RailIP(1, 1) != "10.10.2.2" || l.CtlIP(0) != "10.10.99.1" {
		t.Fatalf("names: %s %s %d %s %s", l.NS(0), l.NS(1), l.Rails(), l.RailIP(1, 1), l.CtlIP(0))
	}
	if !slices.Contains(allowedCC(t), "cubic") {
		t.Errorf("cubic not allowed in the init namespace while the lab is up: %v", allowedCC(t))
	}

	// Run joins the namespace: B's rail address exists there.
	var names []string
	if err := l.Run(1, func() error {
		ifs, err := net.Interfaces()
		for _, i := range ifs {
			names = append(names, i.Name)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if want := []string{"ctl", "lo", "rail0", "rail1"}; !slices.Equal(names, want) {
		t.Errorf("interfaces in B: %v, want %v", names, want)
	}
	// The CC chosen is the namespaces' default.
	var cc []byte
	if err := l.Run(0, func() (err error) {
		cc, err = os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
		return err
	}); err != nil || strings.TrimSpace(string(cc)) != "cubic" {
		t.Errorf("congestion control in A: %q, %v", cc, err)
	}
	out, err := l.Command(ctx, 1, "cat", "/etc/hosts").Output()
	if err != nil || !strings.Contains(string(out), "10.10.99.1 "+prefix+"A") {
		t.Errorf("/etc/hosts in B: %q, %v", out, err)
	}

	// A TCP stream over each rail runs at about the rail's rate (a loose
	// range: this is a sanity check, not a measurement).
	for rail, rate := range rates {
		s, err := l.Load(ctx, rail, 0, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Wait()
		if err != nil {
			t.Fatalf("rail %d: %v", rail, err)
		}
		if res.GoodputBps < 0.3*rate || res.GoodputBps > 1.3*rate {
			t.Errorf("rail %d (%g bit/s): goodput %.1f Mbit/s, want 30..130 %% of the rate", rail, rate, res.GoodputBps/1e6)
		}
		t.Logf("rail %d: %.1f Mbit/s of %.0f", rail, res.GoodputBps/1e6, rate/1e6)
	}

	// The tbf counters saw the traffic.
	qr, err := l.Qdiscs(0)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := qr.Read()
	qr.Close()
	if err != nil {
		t.Fatal(err)
	}
	for rail := range rates {
		q := qs[RailDev(rail)]
		if q.Kind != "tbf" || q.Bytes < 1e6 {
			t.Errorf("qdisc of rail%d: %+v", rail, q)
		}
	}

	// A rail that is down does not connect; up again, it does.
	if err := l.SetLink(1, false); err != nil {
		t.Fatal(err)
	}
	if s, err := l.Load(ctx, 1, 0, 100*time.Millisecond); err == nil {
		s.Stop()
		t.Error("connected over rail1 while it is down")
	}
	if err := l.SetLink(1, true); err != nil {
		t.Fatal(err)
	}
	var s *LoadStream
	for try := 0; try < 50; try++ {
		if s, err = l.Load(ctx, 1, 0, 100*time.Millisecond); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("rail1 up again: %v", err)
	}
	s.Wait()

	// Processes left in the namespaces are killed by Down.
	sleeper := l.Command(context.Background(), 1, "sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	if err := l.Down(); err != nil {
		t.Fatal(err)
	}
	if err := l.Down(); err != nil {
		t.Fatalf("second Down: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- sleeper.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		sleeper.Process.Kill()
		<-done
		t.Error("a process in the namespace survived Down")
	}
	gone(t, prefix)
	checkCCRestored(t, before, othersBefore)
}

func TestUpAfterCrash(t *testing.T) {
	needLab(t)
	before, othersBefore := allowedCC(t), othersUp()
	ctx := context.Background()
	cfg := testConfig(t, 20e6)
	prefix := cfg.Prefix
	l, err := Up(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A crash: the process holding the lab goes away without Down.
	l.lock.Close()
	l2, err := Up(ctx, cfg)
	if err != nil {
		t.Fatalf("Up after a crash: %v", err)
	}
	defer l2.Down()
	s, err := l2.Load(ctx, 0, 0, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.Wait(); err != nil || res.Bytes == 0 {
		t.Errorf("load after the crash: %+v, %v", res, err)
	}
	// While a live lab holds the prefix, neither Up nor Teardown touches it.
	if l3, err := Up(ctx, cfg); err == nil || !strings.Contains(err.Error(), "in use") {
		if l3 != nil {
			l3.Down()
		}
		t.Errorf("Up while the prefix is held: %v, want an error saying it is in use", err)
	}
	if err := Teardown(prefix, nil); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("Teardown while the prefix is held: %v", err)
	}
	if _, err := Open(prefix, nil); err != nil {
		t.Errorf("Open: %v", err)
	}
	if err := l2.Down(); err != nil {
		t.Fatal(err)
	}
	gone(t, prefix)
	checkCCRestored(t, before, othersBefore)
}

func TestTwoLabsSideBySide(t *testing.T) {
	needLab(t)
	before, othersBefore := allowedCC(t), othersUp()
	ctx := context.Background()
	var labs [2]*Lab
	var errs [2]error
	var wg sync.WaitGroup
	for i := range labs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			labs[i], errs[i] = Up(ctx, testConfig(t, 20e6))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
		defer labs[i].Down()
	}
	for _, l := range labs {
		s, err := l.Load(ctx, 0, 0, 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := s.Wait(); err != nil || res.Bytes == 0 {
			t.Errorf("%s: %+v, %v", l.NS(0), res, err)
		}
	}
	// Down in the order of Up: the first lab may have added cubic to the
	// allowed list; the second keeps working after it is taken out again.
	if err := labs[0].Down(); err != nil {
		t.Fatal(err)
	}
	s, err := labs[1].Load(ctx, 0, 0, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	s.Wait()
	if err := labs[1].Down(); err != nil {
		t.Fatal(err)
	}
	for _, l := range labs {
		gone(t, l.cfg.Prefix)
	}
	checkCCRestored(t, before, othersBefore)
}
