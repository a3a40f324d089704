package labbench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/internal/bench"
	"github.com/multirail/multirail/lab"
	"github.com/multirail/multirail/lab/mpi"
)

// agentSystem is tcp-per-rail, mptcp or multirail-<sched>: a receiving
// agent in B, then a sending agent in A.
type agentSystem struct {
	name, kind, sched string
}

func (s agentSystem) Name() string { return s.name }

func (s agentSystem) Note() string {
	if s.kind == KindMultirail && bench.NeedsNominal(s.sched) {
		return "given the true rail rates"
	}
	return ""
}

func (s agentSystem) Measure(ctx context.Context, env *Env, size int, progress func(time.Duration, []uint64)) (Run, error) {
	run := Run{System: s.name, Size: size}
	m := len(env.Rates)
	epoch := time.Now().Add(startMargin)
	run.Epoch = epoch
	spec := Spec{Role: RoleRecv, Kind: s.kind, NRails: m, EpochNs: epoch.UnixNano(), Duration: env.Duration, Bucket: Bucket, Size: size}
	switch s.kind {
	case KindTCP:
		for i := 0; i < m; i++ {
			spec.Listen = append(spec.Listen, net.JoinHostPort(env.Lab.RailIP(1, i), "0"))
		}
	case KindMPTCP:
		// Every address: the subflows that join over rails 1.. arrive at
		// the addresses B announced, on the same port.
		spec.Listen = []string{"0.0.0.0:0"}
	default:
		spec.Sched = s.sched
		spec.Listen = []string{":0"}
		spec.Window = bench.AutoWindow(size)
		run.Window = spec.Window
	}
	run.RailsSource = "receiver"
	// On every return: stop what still runs (cancel), then reap it.
	var reap []func()
	defer func() {
		for i := len(reap) - 1; i >= 0; i-- {
			reap[i]()
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	js, _ := json.Marshal(spec)
	recv, rerr := command(ctx, env, 1, env.Exe, "lab", "agent", "--spec", string(js))
	// The two agents of a run share a fresh token (multirail's only).
	agentEnv := append(os.Environ(), multirail.TokenEnv+"="+multirail.NewToken())
	recv.Env = agentEnv
	stdout, err := recv.StdoutPipe()
	if err != nil {
		cancel()
		return run, err
	}
	if err := recv.Start(); err != nil {
		cancel()
		return run, fmt.Errorf("starting the receiver: %w", err)
	}
	waitRecv := sync.OnceValue(recv.Wait)
	reap = append(reap, func() { waitRecv() }, cancel)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var addrs []string
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == Ready {
			addrs = strings.Split(f[1], ",")
			break
		}
	}
	if addrs == nil {
		return run, fmt.Errorf("the receiver did not start: %v: %s", waitRecv(), lastLines(rerr.String(), 3))
	}
	spec.Role = RoleSend
	for i := 0; i < m; i++ {
		// The receiver listens once per rail (tcp) or once for all.
		_, port, _ := net.SplitHostPort(addrs[min(i, len(addrs)-1)])
		r := Rail{Name: lab.RailDev(i), Local: env.Lab.RailIP(0, i), Remote: net.JoinHostPort(env.Lab.RailIP(1, i), port)}
		if s.kind == KindMultirail && bench.NeedsNominal(s.sched) {
			r.Bandwidth = env.Rates[i]
		}
		spec.Rails = append(spec.Rails, r)
	}
	js, _ = json.Marshal(spec)
	send, serr := command(ctx, env, 0, env.Exe, "lab", "agent", "--spec", string(js))
	send.Env = agentEnv
	send.Stdout = serr
	if err := send.Start(); err != nil {
		return run, fmt.Errorf("starting the sender: %w", err)
	}
	waitSend := sync.OnceValue(send.Wait)
	reap = append(reap, func() { waitSend() }, cancel)
	load, lerr := startLoad(ctx, env, epoch)
	if lerr != nil {
		run.LoadErr = lerr
	}
	var res *AgentResult
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		switch {
		case len(f) > 2 && f[0] == Progress:
			k, _ := strconv.Atoi(f[1])
			per := make([]uint64, 0, len(f)-2)
			for _, v := range f[2:] {
				n, _ := strconv.ParseUint(v, 10, 64)
				per = append(per, n)
			}
			progress(time.Duration(k)*Bucket, per)
		case len(f) > 1 && f[0] == ResultLine:
			res = &AgentResult{}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, ResultLine+" ")), res); err != nil {
				return run, fmt.Errorf("receiver result: %w", err)
			}
		}
	}
	if load != nil {
		run.Load, run.LoadErr = load.Wait()
	}
	werr := waitRecv()
	sendErr := waitSend()
	switch {
	case sendErr != nil && ctx.Err() == nil:
		return run, fmt.Errorf("sender: %v: %s", sendErr, lastLines(serr.String(), 3))
	case res == nil:
		return run, fmt.Errorf("receiver: %v: %s", werr, lastLines(rerr.String(), 3))
	}
	run.Total, run.Rails, run.Note = res.Total, res.Rails, res.Note
	if s.kind == KindMPTCP {
		mp := res.MPTCP
		run.MPTCP, run.Subflows = &mp, res.Subflows
	}
	if run.LoadErr != nil {
		run.Note = join(run.Note, "competing stream: "+run.LoadErr.Error())
	}
	return run, nil
}

// mpiSystem is openmpi-default or openmpi-weighted: mpirun in A, rank 0
// there and rank 1 in B (through lab rsh).
type mpiSystem struct {
	name     string
	weighted bool
}

func (s mpiSystem) Name() string { return s.name }

func (s mpiSystem) Note() string {
	if s.weighted {
		return "btl_tcp_bandwidth_railN = rates"
	}
	return ""
}

func (s mpiSystem) Measure(ctx context.Context, env *Env, size int, progress func(time.Duration, []uint64)) (Run, error) {
	run := Run{System: s.name, Size: size}
	m := len(env.Rates)
	run.Window = bench.AutoWindow(size)
	job := mpi.Job{
		Hosts: [2]string{env.Lab.NS(0), env.Lab.NS(1)}, RshAgent: env.Exe + " lab rsh", OOBNet: lab.CtlNet(),
		Program: env.MPIProgram, Size: size, Seconds: env.Duration.Seconds(), Window: run.Window,
	}
	for i := 0; i < m; i++ {
		job.RailNets = append(job.RailNets, lab.RailNet(i))
		job.RailDevs = append(job.RailDevs, lab.RailDev(i))
		if s.weighted {
			job.BandwidthMbps = append(job.BandwidthMbps, max(1, int(math.Round(env.Rates[i]/1e6))))
		}
	}
	args := append([]string{"--uts", "sh", "-c", `hostname "$0" && exec "$@"`, env.Lab.NS(0)}, mpi.Args(job)...)
	cmd, errTail := command(ctx, env, 0, "unshare", args...)
	cmd.Env = append(append(os.Environ(), mpi.Env()...), "SHELL=/bin/sh")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return run, err
	}
	qr, err := env.Lab.Qdiscs(0)
	if err != nil {
		return run, err
	}
	defer qr.Close()
	if err := cmd.Start(); err != nil {
		return run, fmt.Errorf("starting mpirun: %w", err)
	}
	var (
		epoch    time.Time
		wins     []mpi.Event
		done     bool
		load     *lab.LoadStream
		wire     [][]uint64 // wire[k][rail]: tbf bytes sent at epoch + k buckets
		wg       sync.WaitGroup
		stopSamp = make(chan struct{})
	)
	n := int(env.Duration / Bucket)
	sample := func() {
		defer wg.Done()
		for k := 0; k <= n; k++ {
			select {
			case <-time.After(time.Until(epoch.Add(time.Duration(k) * Bucket))):
			case <-stopSamp:
				return
			}
			qs, err := qr.Read()
			if err != nil {
				return
			}
			row := make([]uint64, m)
			cum := make([]uint64, m)
			for i := range row {
				row[i] = qs[lab.RailDev(i)].Bytes
			}
			wire = append(wire, row)
			for i := range row {
				cum[i] = (row[i] - wire[0][i]) * 1448 / 1514
			}
			if k > 0 {
				progress(time.Duration(k)*Bucket, cum)
			}
		}
	}
	var other []string
	scanErr := mpi.Scan(stdout, func(ev mpi.Event) {
		switch ev.Kind {
		case "start":
			epoch = ev.Time
			run.Epoch = epoch
			var lerr error
			if load, lerr = startLoad(ctx, env, epoch); lerr != nil {
				run.LoadErr = lerr
			}
			wg.Add(1)
			go sample()
		case "win":
			wins = append(wins, ev)
		case "done":
			done = true
		}
	}, func(line string) { other = append(other, line) })
	werr := cmd.Wait()
	close(stopSamp)
	wg.Wait()
	if load != nil {
		run.Load, run.LoadErr = load.Wait()
	}
	if epoch.IsZero() || !done || werr != nil {
		msg := errTail.String()
		if len(other) > 0 {
			msg = strings.Join(other, "\n") + "\n" + msg
		}
		return run, fmt.Errorf("mpirun: exit %v, scan %v, started %v, finished %v: %s", werr, scanErr, !epoch.IsZero(), done, lastLines(msg, 4))
	}
	run.Total = mpi.Spread(epoch, wins, Bucket, n)
	if len(wire) == n+1 {
		run.Rails = WireRails(wire, run.Load)
		run.RailsSource = "tbf"
	}
	if run.LoadErr != nil {
		run.Note = join(run.Note, "competing stream: "+run.LoadErr.Error())
	}
	return run, nil
}
