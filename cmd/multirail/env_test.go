package main

import (
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/multirail/multirail/comm/netif"
)

// envIfaces is a host with two rails, loopback, a docker bridge, a down NIC
// and a NIC with a link-local address only.
func envIfaces() []netif.Iface {
	pfx := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	return []netif.Iface{
		{Name: "lo", Up: true, Loopback: true, Addrs: pfx("127.0.0.1/8")},
		{Name: "eth0", Up: true, Addrs: pfx("10.0.1.2/24"), SpeedMbps: 10000},
		{Name: "eth1", Up: true, Addrs: pfx("10.0.2.2/24", "fe80::1/64"), SpeedMbps: 25000},
		{Name: "docker0", Up: true, Addrs: pfx("172.17.0.1/16")},
		{Name: "eth2", Up: false, Addrs: pfx("10.0.3.2/24")},
		{Name: "eth3", Up: true, Addrs: pfx("169.254.9.9/16")},
	}
}

func TestBuildEnvReport(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     []string
		check   func(t *testing.T, r envReport)
		nErrors int
	}{
		{
			name: "multirail by hand",
			env: []string{"MULTIRAIL_RANK=1", "MULTIRAIL_SIZE=4", "MULTIRAIL_LOCAL_RANK=1", "MULTIRAIL_LOCAL_SIZE=2",
				"MULTIRAIL_JOB_ID=j7", "MULTIRAIL_RDZV=tcp://node0:29600", "MULTIRAIL_SCHED=roundrobin", "PATH=/bin"},
			check: func(t *testing.T, r envReport) {
				if !r.Detected || r.Launcher != "multirail" || r.Rank != 1 || r.Size != 4 || r.LocalRank != 1 || r.LocalSize != 2 ||
					r.JobID != "j7" || r.Rdzv != "tcp://node0:29600" || r.Serve || r.Host != "hostA" {
					t.Errorf("%+v", r)
				}
				if len(r.Sources) == 0 || r.Sources[0] != (envVar{"MULTIRAIL_RANK", "1"}) {
					t.Errorf("sources %v", r.Sources)
				}
				if !slices.Contains(r.Settings, envVar{"MULTIRAIL_SCHED", "roundrobin"}) {
					t.Errorf("settings %v", r.Settings)
				}
			},
		},
		{
			name: "torchrun, rank 0 serves",
			env: []string{"TORCHELASTIC_RUN_ID=abc", "RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=2",
				"MASTER_ADDR=localhost", "MASTER_PORT=29500", "TORCHELASTIC_USE_AGENT_STORE=True"},
			check: func(t *testing.T, r envReport) {
				if r.Launcher != "torchrun" || !r.Serve || r.Rdzv != "tcp://localhost:29501" || r.JobID == "" {
					t.Errorf("%+v", r)
				}
			},
		},
		{
			name: "Open MPI on one host",
			env:  []string{"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=3", "OMPI_COMM_WORLD_LOCAL_RANK=2", "OMPI_COMM_WORLD_LOCAL_SIZE=3", "PMIX_NAMESPACE=ns1"},
			check: func(t *testing.T, r envReport) {
				if r.Launcher != "ompi" || !strings.HasPrefix(r.Rdzv, "file:///") || r.Serve {
					t.Errorf("%+v", r)
				}
			},
		},
		{
			name:    "nothing detected",
			env:     []string{"PATH=/bin"},
			nErrors: 1,
			check: func(t *testing.T, r envReport) {
				if r.Detected || r.Launcher != "" || !strings.Contains(r.Errors[0], "no launcher detected") {
					t.Errorf("%+v", r)
				}
				// The interfaces are listed all the same.
				if len(r.Candidates) != 2 {
					t.Errorf("candidates %v", r.Candidates)
				}
			},
		},
		{
			name:    "bad settings",
			env:     []string{"MULTIRAIL_RANK=0", "MULTIRAIL_SIZE=1", "MULTIRAIL_IFNAME=eth*", "MULTIRAIL_SCHED=fastest", "MULTIRAIL_EMU=emu:0mbit", "MULTIRAIL_TIMEOUT=soon", "MULTIRAIL_TOKEN=s3cret"},
			nErrors: 4,
			check: func(t *testing.T, r envReport) {
				all := strings.Join(r.Errors, "\n")
				for _, want := range []string{"MULTIRAIL_IFNAME", "MULTIRAIL_SCHED", "MULTIRAIL_EMU", "MULTIRAIL_TIMEOUT"} {
					if !strings.Contains(all, want) {
						t.Errorf("no error about %s in %q", want, all)
					}
				}
				for _, v := range r.Settings {
					if strings.Contains(v.Value, "s3cret") {
						t.Errorf("the token is shown: %v", v)
					}
				}
				if !r.Detected || r.Rdzv != "" {
					t.Errorf("%+v", r)
				}
			},
		},
		{
			name: "interface filter and emulated rails",
			env:  []string{"MULTIRAIL_RANK=0", "MULTIRAIL_SIZE=2", "MULTIRAIL_RDZV=file:///tmp/r", "MULTIRAIL_IFNAME=^eth1", "MULTIRAIL_EMU=emu:200mbit,emu:100mbit/2ms"},
			check: func(t *testing.T, r envReport) {
				if r.IfName != "^eth1" || len(r.Candidates) != 1 || r.Candidates[0].Name != "eth0" {
					t.Errorf("ifname %q, candidates %v", r.IfName, r.Candidates)
				}
				if !slices.Contains(r.Skipped, envSkip{"eth1", "excluded by MULTIRAIL_IFNAME=^eth1"}) {
					t.Errorf("skipped %v", r.Skipped)
				}
				if len(r.Notes) == 0 || !strings.Contains(r.Notes[0], "emulated rails") {
					t.Errorf("notes %v", r.Notes)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := buildEnvReport(tc.env, "hostA", envIfaces(), nil)
			if len(r.Errors) != tc.nErrors {
				t.Fatalf("%d errors, want %d: %q", len(r.Errors), tc.nErrors, r.Errors)
			}
			tc.check(t, r)
		})
	}
}

func TestBuildEnvReportDefaultPolicy(t *testing.T) {
	r := buildEnvReport([]string{"MULTIRAIL_RANK=0", "MULTIRAIL_SIZE=1"}, "h", envIfaces(), nil)
	want := []envIface{
		{Name: "eth0", Addrs: []string{"10.0.1.2/24"}, SpeedMbps: 10000},
		{Name: "eth1", Addrs: []string{"10.0.2.2/24"}, SpeedMbps: 25000},
	}
	if len(r.Candidates) != 2 || !slices.Equal(r.Candidates[0].Addrs, want[0].Addrs) || !slices.Equal(r.Candidates[1].Addrs, want[1].Addrs) || r.Candidates[1].SpeedMbps != 25000 {
		t.Errorf("candidates %+v, want %+v", r.Candidates, want)
	}
	reasons := map[string]string{}
	for _, s := range r.Skipped {
		reasons[s.Name] = s.Reason
	}
	for name, want := range map[string]string{"lo": "loopback", "docker0": "virtual bridge", "eth2": "down", "eth3": "link-local"} {
		if !strings.Contains(reasons[name], want) {
			t.Errorf("%s skipped for %q, want %q", name, reasons[name], want)
		}
	}
	r = buildEnvReport(nil, "h", nil, errors.New("netif: listing interfaces: boom"))
	if !slices.Contains(r.Errors, "netif: listing interfaces: boom") {
		t.Errorf("errors %q", r.Errors)
	}
}

func setLauncherEnv(t *testing.T, kv ...string) {
	t.Helper()
	for _, e := range os.Environ() {
		for _, p := range launcherPrefixes {
			if strings.HasPrefix(e, p) {
				k, _, _ := strings.Cut(e, "=")
				t.Setenv(k, "")
			}
		}
	}
	for i := 0; i < len(kv); i += 2 {
		t.Setenv(kv[i], kv[i+1])
	}
}

func TestEnvCommand(t *testing.T) {
	setLauncherEnv(t, "MULTIRAIL_RANK", "0", "MULTIRAIL_SIZE", "2", "MULTIRAIL_RDZV", "tcp://127.0.0.1:29777", "MULTIRAIL_JOB_ID", "job9")
	code, stdout, stderr := runCLI("env", "--json")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &obj); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	var keys []string
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"candidates", "detected", "errors", "host", "ifname", "job_id", "launcher", "local_rank", "local_size", "notes", "rank", "rdzv", "serve", "settings", "size", "skipped", "sources"}
	if !slices.Equal(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
	var rep envReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.Launcher != "multirail" || !rep.Serve || rep.JobID != "job9" || rep.LocalRank != -1 {
		t.Errorf("%+v, %v", rep, err)
	}

	code, stdout, _ = runCLI("env")
	for _, want := range []string{"launcher     multirail\n", "rank         0 of 2\n", "rendezvous   tcp://127.0.0.1:29777 (this rank serves it)\n", "  MULTIRAIL_JOB_ID=job9\n", "interfaces ("} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("exit %d; stdout lacks %q:\n%s", code, want, stdout)
		}
	}

	setLauncherEnv(t)
	code, stdout, stderr = runCLI("env")
	if code != 1 || !strings.Contains(stdout, "launcher     none detected") || !strings.Contains(stdout, "interfaces (") ||
		!strings.HasPrefix(stderr, "multirail: env: comm.Init would fail here: launch: no launcher detected") {
		t.Errorf("exit %d, stdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
	if code, _, stderr := runCLI("env", "extra"); code != 2 || !strings.Contains(stderr, "env takes no arguments") {
		t.Errorf("env extra: exit %d, %q", code, stderr)
	}
}
