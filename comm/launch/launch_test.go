package launch

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// loadEnv reads a dump under testdata/env: one K=V a line, '#' lines are
// comments.
func loadEnv(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var env []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !strings.Contains(line, "=") {
			t.Fatalf("%s: line %q is not K=V", path, line)
		}
		env = append(env, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return env
}

type envCase struct {
	host    string
	want    Info   // Host and Sources are not compared
	wantErr string // substring of the error; want is ignored
	noLaunc bool   // the error is ErrNoLauncher
}

// envCases: one entry per dump under testdata/env. Files without "-doc"
// are real dumps taken on this machine; "-doc" ones are written from the
// launchers' documentation.
var envCases = map[string]envCase{
	// Open MPI 4.1.4, one host: a file:// store under /tmp keyed by PMIX_NAMESPACE.
	"ompi-1host-rank0.env":     {host: "vm", want: Info{Launcher: OpenMPI, Rank: 0, Size: 4, LocalRank: 0, LocalSize: 4, JobID: "559611905", Rdzv: "file:///tmp/multirail-rdzv-559611905"}},
	"ompi-1host-rank3.env":     {host: "vm", want: Info{Launcher: OpenMPI, Rank: 3, Size: 4, LocalRank: 3, LocalSize: 4, JobID: "559611905", Rdzv: "file:///tmp/multirail-rdzv-559611905"}},
	"ompi-1host-np2-rank0.env": {host: "vm", want: Info{Launcher: OpenMPI, Rank: 0, Size: 2, LocalRank: 0, LocalSize: 2, JobID: "1628176385", Rdzv: "file:///tmp/multirail-rdzv-1628176385"}},
	"ompi-1host-np2-rank1.env": {host: "vm", want: Info{Launcher: OpenMPI, Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, JobID: "1628176385", Rdzv: "file:///tmp/multirail-rdzv-1628176385"}},
	// Open MPI across two hosts: an error saying to pass -x MULTIRAIL_RDZV ...
	"ompi-2host-rank0.env": {host: "vm", wantErr: "pass -x MULTIRAIL_RDZV=tcp://<host of rank 0>:<port> to mpirun"},
	"ompi-2host-rank1.env": {host: "nodeb", wantErr: "Open MPI ranks span hosts (OMPI_COMM_WORLD_LOCAL_SIZE=1, OMPI_COMM_WORLD_SIZE=2)"},
	// ... and with it, rank 0 serves.
	"ompi-2host-rdzv-rank0.env": {host: "vm", want: Info{Launcher: OpenMPI, Rank: 0, Size: 2, LocalRank: 0, LocalSize: 1, JobID: "2084634625", Rdzv: "tcp://vm:29400", Serve: true}},
	"ompi-2host-rdzv-rank1.env": {host: "nodeb", want: Info{Launcher: OpenMPI, Rank: 1, Size: 2, LocalRank: 0, LocalSize: 1, JobID: "2084634625", Rdzv: "tcp://vm:29400"}},
	// mpirun inside an sbatch allocation: Open MPI's variables win over the batch step's SLURM_*.
	"ompi-in-sbatch-rank0.env": {host: "vm", want: Info{Launcher: OpenMPI, Rank: 0, Size: 2, LocalRank: 0, LocalSize: 2, JobID: "225574913", Rdzv: "file:///tmp/multirail-rdzv-225574913"}},
	"ompi-in-sbatch-rank1.env": {host: "vm", want: Info{Launcher: OpenMPI, Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, JobID: "225574913", Rdzv: "file:///tmp/multirail-rdzv-225574913"}},

	// MPICH 4.0.2 Hydra sets no PMI_JOBID: one host still needs a job id.
	"mpich-hydra-1host-rank0.env": {host: "vm", wantErr: "PMI_JOBID is not set (Hydra does not export a job id)"},
	"mpich-hydra-1host-rank1.env": {host: "vm", wantErr: "-genv MULTIRAIL_JOB_ID <unique id>"},
	// Hydra inside sbatch: MPICH is the innermost launcher (on rank 0 too, whose PMI_RANK equals the proxy's SLURM_PROCID).
	"mpich-hydra-in-sbatch-rank0.env": {host: "vm", wantErr: "MPICH/Hydra on one host, but PMI_JOBID is not set"},
	"mpich-hydra-in-sbatch-rank1.env": {host: "vm", wantErr: "MPICH/Hydra on one host, but PMI_JOBID is not set"},
	"mpich-hydra-2host-doc.env":       {host: "n2", wantErr: "MPICH ranks span hosts (MPI_LOCALNRANKS=2, PMI_SIZE=4)"},

	// Slurm 22.05 srun on one node: a file:// store keyed by job.step.
	"slurm-1node-rank0.env":        {host: "vm", want: Info{Launcher: Slurm, Rank: 0, Size: 4, LocalRank: 0, LocalSize: 4, JobID: "1.0", Rdzv: "file:///tmp/multirail-rdzv-1.0"}},
	"slurm-1node-rank2.env":        {host: "vm", want: Info{Launcher: Slurm, Rank: 2, Size: 4, LocalRank: 2, LocalSize: 4, JobID: "1.0", Rdzv: "file:///tmp/multirail-rdzv-1.0"}},
	"slurm-1node-sbatch-rank0.env": {host: "vm", want: Info{Launcher: Slurm, Rank: 0, Size: 4, LocalRank: 0, LocalSize: 4, JobID: "2.0", Rdzv: "file:///tmp/multirail-rdzv-2.0"}},
	"slurm-1node-sbatch-rank3.env": {host: "vm", want: Info{Launcher: Slurm, Rank: 3, Size: 4, LocalRank: 3, LocalSize: 4, JobID: "2.0", Rdzv: "file:///tmp/multirail-rdzv-2.0"}},
	// srun --mpi=pmi2 sets PMI_RANK too, with PMI_JOBID=<job>.<step>: Slurm's own PMI, Slurm wins.
	"slurm-pmi2-rank0.env": {host: "vm", want: Info{Launcher: Slurm, Rank: 0, Size: 2, LocalRank: 0, LocalSize: 2, JobID: "4.0", Rdzv: "file:///tmp/multirail-rdzv-4.0"}},
	"slurm-pmi2-rank1.env": {host: "vm", want: Info{Launcher: Slurm, Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, JobID: "4.0", Rdzv: "file:///tmp/multirail-rdzv-4.0"}},
	"slurm-pmix-rank0.env": {host: "vm", want: Info{Launcher: Slurm, Rank: 0, Size: 2, LocalRank: 0, LocalSize: 2, JobID: "5.0", Rdzv: "file:///tmp/multirail-rdzv-5.0"}},
	"slurm-pmix-rank1.env": {host: "vm", want: Info{Launcher: Slurm, Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, JobID: "5.0", Rdzv: "file:///tmp/multirail-rdzv-5.0"}},
	// Two host namespaces (real slurmds): tcp on clh0 at the port derived from job 1 step 0 (pinned here).
	"slurm-2node-rank0.env": {host: "clh0", want: Info{Launcher: Slurm, Rank: 0, Size: 4, LocalRank: 0, LocalSize: 2, JobID: "1.0", Rdzv: "tcp://clh0:22890", Serve: true}},
	"slurm-2node-rank3.env": {host: "clh1", want: Info{Launcher: Slurm, Rank: 3, Size: 4, LocalRank: 1, LocalSize: 2, JobID: "1.0", Rdzv: "tcp://clh0:22890"}},
	// torch 1.13 torchrun --standalone: MASTER_PORT is free (TORCHELASTIC_USE_AGENT_STORE=False).
	"torchrun-standalone-rank0.env": {host: "vm", want: Info{Launcher: Torchrun, Rank: 0, Size: 2, LocalRank: 0, LocalSize: 2, JobID: "3b5bd730-fe03-44e0-9951-a56dd246c70e.0", Rdzv: "tcp://localhost:52961", Serve: true}},
	"torchrun-standalone-rank1.env": {host: "vm", want: Info{Launcher: Torchrun, Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, JobID: "3b5bd730-fe03-44e0-9951-a56dd246c70e.0", Rdzv: "tcp://localhost:52961"}},
	// A program run by the batch script itself: SLURM_PROCID=0 but no step.
	"slurm-batchscript-nosrun.env": {host: "vm", wantErr: "SLURM_STEP_ID is not set: this is a batch script"},
	// Multi-node: tcp on the first host of the step's node list, port derived from job.step (pinned here) or reserved.
	"slurm-4node-doc.env":         {host: "clh2", want: Info{Launcher: Slurm, Rank: 5, Size: 8, LocalRank: 1, LocalSize: 2, JobID: "57.2", Rdzv: "tcp://clh0:20785"}},
	"slurm-6node-uneven-doc.env":  {host: "gnode7", want: Info{Launcher: Slurm, Rank: 7, Size: 9, LocalRank: 0, LocalSize: 1, JobID: "123456.0", Rdzv: "tcp://gnode01:12040"}},
	"torchrun-in-slurm-doc.env":   {host: "gpu018", want: Info{Launcher: Torchrun, Rank: 3, Size: 4, LocalRank: 1, LocalSize: 2, JobID: "812.0", Rdzv: "tcp://gpu017:29501"}},
	"env-in-slurm-doc.env":        {host: "gpu018", want: Info{Launcher: Env, Rank: 3, Size: 4, LocalRank: 1, LocalSize: Unknown, Rdzv: "tcp://gpu017:29500"}},
	"env-pytorchjob-doc.env":      {host: "pytorch-dist-mnist-worker-0", want: Info{Launcher: Env, Rank: 1, Size: 3, LocalRank: Unknown, LocalSize: Unknown, Rdzv: "tcp://pytorch-dist-mnist-master-0:23456"}},
	"torchrun-standalone-doc.env": {host: "vm", want: Info{Launcher: Torchrun, Rank: 0, Size: 3, LocalRank: 0, LocalSize: 3, JobID: "none.0", Rdzv: "tcp://localhost:41873", Serve: true}},
	// The agent's store owns MASTER_PORT: the rendezvous is MASTER_PORT+1.
	"torchrun-2node-agentstore-doc.env": {host: "node1", want: Info{Launcher: Torchrun, Rank: 6, Size: 8, LocalRank: 2, LocalSize: 4, JobID: "job42.1", Rdzv: "tcp://node0:29501"}},
	"k8s-indexed-doc.env":               {host: "mr-train-2", want: Info{Launcher: K8s, Rank: 2, Size: 4, LocalRank: 0, LocalSize: 1, JobID: "mr-train", Rdzv: "tcp://mr-train-0.mr-svc:29600"}},
	"k8s-indexed-nosize-doc.env":        {host: "mr-train-0", wantErr: "MULTIRAIL_SIZE is not set: Kubernetes does not pass the Job's size"},
	"multirail-run-doc.env":             {host: "vm", want: Info{Launcher: Multirail, Rank: 0, Size: 3, LocalRank: 0, LocalSize: 3, JobID: "run-4f2a9c", Rdzv: "tcp://127.0.0.1:41234"}},
	"multirail-byhand-doc.env":          {host: "hostB", want: Info{Launcher: Multirail, Rank: 1, Size: 2, LocalRank: Unknown, LocalSize: Unknown, Rdzv: "tcp://hostA:29555"}},
	"none.env":                          {host: "vm", noLaunc: true},
}

// launcherWords maps a dump's file name prefix to its launcher and to a
// word its errors contain, for dumps added without an envCases entry.
var launcherWords = map[string][2]string{
	"multirail": {Multirail, "MULTIRAIL"},
	"torchrun":  {Torchrun, "torchrun"},
	"env":       {Env, "env://"},
	"ompi":      {OpenMPI, "Open MPI"},
	"mpich":     {MPICH, "MPICH"},
	"slurm":     {Slurm, "Slurm"},
	"k8s":       {K8s, "Kubernetes"},
}

func TestDetectEnvDumps(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "env", "*.env"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < len(envCases) {
		t.Errorf("%d dumps under testdata/env, %d cases", len(files), len(envCases))
	}
	seen := map[string]bool{}
	for _, path := range files {
		name := filepath.Base(path)
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			env := loadEnv(t, path)
			c, ok := envCases[name]
			if !ok {
				// A dump added by someone else: it must be detected as the
				// launcher its name says, or fail with an error about it.
				prefix, _, _ := strings.Cut(name, "-")
				lw, known := launcherWords[prefix]
				if !known {
					t.Fatalf("no case for %s and no launcher named by its prefix %q", name, prefix)
				}
				info, err := DetectEnv(env, hostOf(env))
				if err != nil {
					if errors.Is(err, ErrNoLauncher) || !strings.Contains(err.Error(), lw[1]) {
						t.Fatalf("DetectEnv: %v (want launcher %s)", err, lw[0])
					}
					t.Logf("no case; error as expected for %s: %v", lw[0], err)
					return
				}
				if info.Launcher != lw[0] {
					t.Fatalf("no case; launcher %q, want %q (%+v)", info.Launcher, lw[0], info)
				}
				t.Logf("no case; detected %+v", info)
				return
			}
			info, err := DetectEnv(env, c.host)
			checkCase(t, c, info, err)
		})
	}
	for name := range envCases {
		if !seen[name] {
			t.Errorf("case %s has no dump under testdata/env", name)
		}
	}
}

// hostOf guesses the host name a dump was taken on.
func hostOf(env []string) string {
	for _, k := range []string{"SLURMD_NODENAME", "PMIX_HOSTNAME", "MPIR_CVAR_CH3_INTERFACE_HOSTNAME", "HOSTNAME"} {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
	}
	return "vm"
}

func checkCase(t *testing.T, c envCase, info Info, err error) {
	t.Helper()
	switch {
	case c.noLaunc:
		if !errors.Is(err, ErrNoLauncher) {
			t.Fatalf("err = %v, want ErrNoLauncher", err)
		}
		checkOneLine(t, err)
		return
	case c.wantErr != "":
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Fatalf("err = %v, want one containing %q", err, c.wantErr)
		}
		if errors.Is(err, ErrNoLauncher) {
			t.Fatalf("err = %v is ErrNoLauncher", err)
		}
		checkOneLine(t, err)
		return
	case err != nil:
		t.Fatalf("DetectEnv: %v", err)
	}
	if info.Host != c.host {
		t.Errorf("Host = %q, want %q", info.Host, c.host)
	}
	if len(info.Sources) == 0 {
		t.Errorf("no Sources")
	}
	got := info
	got.Host, got.Sources = "", nil
	if !reflect.DeepEqual(got, c.want) {
		t.Errorf("got  %+v\nwant %+v", got, c.want)
	}
	if info.Rdzv != "" {
		r, err := ParseRdzv(info.Rdzv)
		if err != nil {
			t.Errorf("Rdzv %q does not parse: %v", info.Rdzv, err)
		} else if r.String() != info.Rdzv {
			t.Errorf("Rdzv %q round-trips to %q", info.Rdzv, r.String())
		}
	}
}

func checkOneLine(t *testing.T, err error) {
	t.Helper()
	if strings.ContainsAny(err.Error(), "\n\r") {
		t.Errorf("error spans lines: %q", err)
	}
	if !strings.HasPrefix(err.Error(), "launch: ") {
		t.Errorf("error %q lacks the launch: prefix", err)
	}
}

// envMap builds a getenv over a map.
func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestDetectCases(t *testing.T) {
	torch := map[string]string{
		"TORCHELASTIC_RUN_ID": "r1", "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0",
		"LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "h0", "MASTER_PORT": "29500",
	}
	slurm2 := map[string]string{
		"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
		"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "3", "SLURM_STEP_NODELIST": "n[1-2]",
		"SLURM_STEP_TASKS_PER_NODE": "2(x2)",
	}
	ompi1 := map[string]string{
		"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
		"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "PMIX_NAMESPACE": "prterun-vm-77@1",
	}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "<unset>" {
				delete(m, kv[i])
			} else {
				m[kv[i]] = kv[i+1]
			}
		}
		return m
	}
	cases := []struct {
		name string
		env  map[string]string
		host string
		c    envCase
	}{
		{"torchrun", torch, "h0", envCase{want: Info{Launcher: Torchrun, Size: 2, LocalSize: 2, JobID: "r1", Rdzv: "tcp://h0:29500", Serve: true}}},
		{"torchrun agent store", with(torch, "TORCHELASTIC_USE_AGENT_STORE", "True"), "h0",
			envCase{want: Info{Launcher: Torchrun, Size: 2, LocalSize: 2, JobID: "r1", Rdzv: "tcp://h0:29501", Serve: true}}},
		{"torchrun ipv6", with(torch, "MASTER_ADDR", "fd00::1"), "h0",
			envCase{want: Info{Launcher: Torchrun, Size: 2, LocalSize: 2, JobID: "r1", Rdzv: "tcp://[fd00::1]:29500", Serve: true}}},
		{"torchrun agent store port 65535", with(torch, "TORCHELASTIC_USE_AGENT_STORE", "True", "MASTER_PORT", "65535"), "h0",
			envCase{wantErr: `MASTER_PORT="65535": want an integer in 1..65534 (the rendezvous uses MASTER_PORT+1)`}},
		{"torchrun bad agent store", with(torch, "TORCHELASTIC_USE_AGENT_STORE", "yes"), "h0",
			envCase{wantErr: `TORCHELASTIC_USE_AGENT_STORE="yes": want True or False`}},
		{"torchrun missing LOCAL_WORLD_SIZE", with(torch, "LOCAL_WORLD_SIZE", "<unset>"), "h0",
			envCase{wantErr: "torchrun (TORCHELASTIC_RUN_ID is set), but LOCAL_WORLD_SIZE is not set"}},
		{"torchrun rank out of range", with(torch, "RANK", "2"), "h0",
			envCase{wantErr: `RANK="2": want an integer in [0, 2) (WORLD_SIZE=2)`}},
		{"torchrun negative rank", with(torch, "RANK", "-1"), "h0",
			envCase{wantErr: `RANK="-1": want an integer in [0, 2)`}},
		{"torchrun size 0", with(torch, "WORLD_SIZE", "0"), "h0",
			envCase{wantErr: `WORLD_SIZE="0": want an integer >= 1`}},
		{"torchrun local size > size", with(torch, "LOCAL_WORLD_SIZE", "3"), "h0",
			envCase{wantErr: `LOCAL_WORLD_SIZE="3": want an integer in [1, 2] (WORLD_SIZE=2)`}},
		{"torchrun local rank >= local size", with(torch, "LOCAL_WORLD_SIZE", "1", "LOCAL_RANK", "1"), "h0",
			envCase{wantErr: `LOCAL_RANK="1": want an integer in [0, 1) (LOCAL_WORLD_SIZE=1)`}},
		{"torchrun blank MASTER_ADDR", with(torch, "MASTER_ADDR", " "), "h0",
			envCase{wantErr: `MASTER_ADDR=" ": want a host name or an IP address`}},
		{"torchrun bracketed MASTER_ADDR", with(torch, "MASTER_ADDR", "[::1]"), "h0",
			envCase{wantErr: `MASTER_ADDR="[::1]": want a host name or an IP address`}},
		{"torchrun port 0", with(torch, "MASTER_PORT", "0"), "h0",
			envCase{wantErr: `MASTER_PORT="0": want a port in 1..65535`}},
		{"torchrun port 70000", with(torch, "MASTER_PORT", "70000"), "h0",
			envCase{wantErr: `MASTER_PORT="70000": want a port in 1..65535`}},
		// Precedence: torchrun inside srun inside mpirun: torchrun wins.
		{"torchrun over ompi and slurm", with(torch, "OMPI_COMM_WORLD_RANK", "0", "SLURM_PROCID", "1"), "h0",
			envCase{want: Info{Launcher: Torchrun, Size: 2, LocalSize: 2, JobID: "r1", Rdzv: "tcp://h0:29500", Serve: true}}},
		// Explicit MULTIRAIL_* wins over everything.
		{"multirail over torchrun", with(torch, "MULTIRAIL_RANK", "1", "MULTIRAIL_SIZE", "3", "MULTIRAIL_RDZV", "file:///scratch/j"), "h0",
			envCase{want: Info{Launcher: Multirail, Rank: 1, Size: 3, LocalRank: Unknown, LocalSize: Unknown, Rdzv: "file:///scratch/j"}}},
		{"multirail needs size", map[string]string{"MULTIRAIL_RANK": "0"}, "h",
			envCase{wantErr: "MULTIRAIL_RANK is set, but MULTIRAIL_SIZE is not set"}},
		{"multirail needs rdzv", map[string]string{"MULTIRAIL_RANK": "0", "MULTIRAIL_SIZE": "2"}, "h",
			envCase{wantErr: "but MULTIRAIL_RDZV is not: set it to tcp://<host of rank 0>:<port>"}},
		{"multirail alone", map[string]string{"MULTIRAIL_RANK": "0", "MULTIRAIL_SIZE": "1"}, "h",
			envCase{want: Info{Launcher: Multirail, Size: 1, LocalRank: Unknown, LocalSize: Unknown}}},
		{"multirail one host by job id", map[string]string{"MULTIRAIL_RANK": "1", "MULTIRAIL_SIZE": "2", "MULTIRAIL_LOCAL_RANK": "1", "MULTIRAIL_LOCAL_SIZE": "2", "MULTIRAIL_JOB_ID": "my job/1", "TMPDIR": "/scratch/"}, "h",
			envCase{want: Info{Launcher: Multirail, Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, JobID: "my job/1", Rdzv: "file:///scratch/multirail-rdzv-my_job_1"}}},
		{"multirail rank 0 serves", map[string]string{"MULTIRAIL_RANK": "0", "MULTIRAIL_SIZE": "2", "MULTIRAIL_RDZV": "tcp://10.0.0.1:5000"}, "h",
			envCase{want: Info{Launcher: Multirail, Size: 2, LocalRank: Unknown, LocalSize: Unknown, Rdzv: "tcp://10.0.0.1:5000", Serve: true}}},
		{"multirail bad serve", map[string]string{"MULTIRAIL_RANK": "0", "MULTIRAIL_SIZE": "2", "MULTIRAIL_RDZV": "tcp://10.0.0.1:5000", "MULTIRAIL_RDZV_SERVE": "no"}, "h",
			envCase{wantErr: `MULTIRAIL_RDZV_SERVE="no": want 0`}},
		{"multirail bad rdzv", map[string]string{"MULTIRAIL_RANK": "0", "MULTIRAIL_SIZE": "2", "MULTIRAIL_RDZV": "http://x:1"}, "h",
			envCase{wantErr: `MULTIRAIL_RDZV="http://x:1": unknown scheme (want tcp://host:port or file:///absolute/dir)`}},
		{"multirail relative file", map[string]string{"MULTIRAIL_RANK": "0", "MULTIRAIL_SIZE": "2", "MULTIRAIL_RDZV": "file://tmp/x"}, "h",
			envCase{wantErr: `MULTIRAIL_RDZV="file://tmp/x": the path after file:// must be absolute`}},
		{"multirail rdzv port 0", map[string]string{"MULTIRAIL_RANK": "0", "MULTIRAIL_SIZE": "2", "MULTIRAIL_RDZV": "tcp://h:0"}, "h",
			envCase{wantErr: `port "0" is not in 1..65535`}},
		{"multirail only one of the local pair", map[string]string{"MULTIRAIL_RANK": "0", "MULTIRAIL_SIZE": "1", "MULTIRAIL_LOCAL_RANK": "0"}, "h",
			envCase{want: Info{Launcher: Multirail, Size: 1, LocalRank: 0, LocalSize: Unknown}}},
		// Overrides for another launcher.
		{"ompi across hosts with MULTIRAIL_RDZV, serve off", with(ompi1, "OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_LOCAL_RANK", "0", "OMPI_COMM_WORLD_SIZE", "4", "MULTIRAIL_RDZV", "tcp://a:1", "MULTIRAIL_RDZV_SERVE", "0"), "a",
			envCase{want: Info{Launcher: OpenMPI, Size: 4, LocalSize: 2, JobID: "prterun-vm-77@1", Rdzv: "tcp://a:1"}}},
		{"ompi 5 namespace sanitised", ompi1, "vm",
			envCase{want: Info{Launcher: OpenMPI, Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, JobID: "prterun-vm-77@1", Rdzv: "file:///tmp/multirail-rdzv-prterun-vm-77_1"}}},
		{"ompi hnp uri job id", with(ompi1, "PMIX_NAMESPACE", "<unset>", "OMPI_MCA_orte_hnp_uri", "1628176384.0;tcp://192.0.2.2:48169"), "vm",
			envCase{want: Info{Launcher: OpenMPI, Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, JobID: "1628176384.0", Rdzv: "file:///tmp/multirail-rdzv-1628176384.0"}}},
		{"ompi no job id", with(ompi1, "PMIX_NAMESPACE", "<unset>"), "vm",
			envCase{wantErr: "Open MPI on one host, but none of PMIX_NAMESPACE"}},
		{"ompi MULTIRAIL_JOB_ID", with(ompi1, "MULTIRAIL_JOB_ID", "mine"), "vm",
			envCase{want: Info{Launcher: OpenMPI, Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, JobID: "mine", Rdzv: "file:///tmp/multirail-rdzv-mine"}}},
		{"ompi relative TMPDIR", with(ompi1, "TMPDIR", "tmp"), "vm",
			envCase{wantErr: `TMPDIR="tmp": want an absolute path`}},
		{"ompi over slurm", with(slurm2, "OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2", "OMPI_COMM_WORLD_LOCAL_RANK", "1", "OMPI_COMM_WORLD_LOCAL_SIZE", "2", "PMIX_NAMESPACE", "9"), "n1",
			envCase{want: Info{Launcher: OpenMPI, Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, JobID: "9", Rdzv: "file:///tmp/multirail-rdzv-9"}}},
		{"mpich with job id", map[string]string{"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2", "PMI_JOBID": "kvs_1"}, "h",
			envCase{want: Info{Launcher: MPICH, Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, JobID: "kvs_1", Rdzv: "file:///tmp/multirail-rdzv-kvs_1"}}},
		{"mpich PALS local vars", map[string]string{"PMI_RANK": "1", "PMI_SIZE": "2", "PMI_LOCAL_RANK": "1", "PMI_LOCAL_SIZE": "2", "PMI_JOBID": "j"}, "h",
			envCase{want: Info{Launcher: MPICH, Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, JobID: "j", Rdzv: "file:///tmp/multirail-rdzv-j"}}},
		{"mpich no local size", map[string]string{"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1"}, "h",
			envCase{wantErr: "without MPI_LOCALNRANKS or PMI_LOCAL_SIZE: cannot tell"}},
		{"mpich over slurm when PMI_JOBID differs", with(slurm2, "PMI_RANK", "0", "PMI_SIZE", "4", "PMI_JOBID", "77.4", "MPI_LOCALRANKID", "0", "MPI_LOCALNRANKS", "2"), "n1",
			envCase{wantErr: "MPICH ranks span hosts"}},
		{"slurm's own PMI", with(slurm2, "PMI_RANK", "0", "PMI_SIZE", "4", "PMI_JOBID", "77.3"), "n1",
			envCase{want: Info{Launcher: Slurm, Size: 4, LocalSize: 2, JobID: "77.3", Rdzv: "tcp://n1:" + itoa(SlurmPort("77", "3")), Serve: true}}},
		{"slurm port override", with(slurm2, "MULTIRAIL_RDZV_PORT", "31000"), "n1",
			envCase{want: Info{Launcher: Slurm, Size: 4, LocalSize: 2, JobID: "77.3", Rdzv: "tcp://n1:31000", Serve: true}}},
		{"slurm bad port override", with(slurm2, "MULTIRAIL_RDZV_PORT", "99999"), "n1",
			envCase{wantErr: `MULTIRAIL_RDZV_PORT="99999": want a port in 1..65535`}},
		{"slurm node from host", with(slurm2, "SLURM_NODEID", "<unset>", "SLURM_PROCID", "3", "SLURM_LOCALID", "1"), "n2.cluster",
			envCase{want: Info{Launcher: Slurm, Rank: 3, Size: 4, LocalRank: 1, LocalSize: 2, JobID: "77.3", Rdzv: "tcp://n1:" + itoa(SlurmPort("77", "3"))}}},
		{"slurm host not in list", with(slurm2, "SLURM_NODEID", "<unset>"), "x9",
			envCase{wantErr: `SLURM_NODEID is not set and host "x9" is not in SLURM_STEP_NODELIST="n[1-2]"`}},
		{"slurm bad node list", with(slurm2, "SLURM_STEP_NODELIST", "n[1-"), "n1",
			envCase{wantErr: `SLURM_STEP_NODELIST: host list "n[1-": unclosed '['`}},
		{"slurm tasks per node mismatch", with(slurm2, "SLURM_STEP_TASKS_PER_NODE", "2(x3)"), "n1",
			envCase{wantErr: `SLURM_STEP_TASKS_PER_NODE="2(x3)" lists 3 nodes but SLURM_STEP_NODELIST="n[1-2]" has 2`}},
		{"slurm tasks per node sum", with(slurm2, "SLURM_STEP_TASKS_PER_NODE", "2,1"), "n1",
			envCase{wantErr: `SLURM_STEP_TASKS_PER_NODE="2,1" adds up to 3 tasks but SLURM_NTASKS=4`}},
		{"slurm bad local id", with(slurm2, "SLURM_LOCALID", "2"), "n1",
			envCase{wantErr: `SLURM_LOCALID="2": want an integer in [0, 2)`}},
		{"slurm bad tasks per node", with(slurm2, "SLURM_STEP_TASKS_PER_NODE", "2(3)"), "n1",
			envCase{wantErr: `SLURM_STEP_TASKS_PER_NODE="2(3)": "2(3)" is not N(xM)`}},
		{"slurm over env without MASTER_ADDR", with(slurm2, "RANK", "0", "WORLD_SIZE", "4"), "n1",
			envCase{want: Info{Launcher: Slurm, Size: 4, LocalSize: 2, JobID: "77.3", Rdzv: "tcp://n1:" + itoa(SlurmPort("77", "3")), Serve: true}}},
		{"env over slurm", with(slurm2, "RANK", "0", "WORLD_SIZE", "8", "MASTER_ADDR", "n1", "MASTER_PORT", "29500", "LOCAL_RANK", "0", "LOCAL_WORLD_SIZE", "4"), "n1",
			envCase{want: Info{Launcher: Env, Size: 8, LocalSize: 4, Rdzv: "tcp://n1:29500", Serve: true}}},
		{"env needs MASTER_PORT", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "a"}, "a",
			envCase{wantErr: "env:// (RANK, WORLD_SIZE and MASTER_ADDR are set), but MASTER_PORT is not set"}},
		{"k8s", map[string]string{"JOB_COMPLETION_INDEX": "0", "MULTIRAIL_SIZE": "2", "MULTIRAIL_K8S_SERVICE": "svc.ns", "MULTIRAIL_RDZV_PORT": "7000"}, "train-0",
			envCase{want: Info{Launcher: K8s, Size: 2, LocalSize: 1, JobID: "train", Rdzv: "tcp://train-0.svc.ns:7000", Serve: true}}},
		{"k8s job name with dashes", map[string]string{"JOB_COMPLETION_INDEX": "12", "MULTIRAIL_SIZE": "16", "MULTIRAIL_K8S_SERVICE": "s"}, "my-big-job-12",
			envCase{want: Info{Launcher: K8s, Rank: 12, Size: 16, LocalSize: 1, JobID: "my-big-job", Rdzv: "tcp://my-big-job-0.s:29600"}}},
		{"k8s no service", map[string]string{"JOB_COMPLETION_INDEX": "0", "MULTIRAIL_SIZE": "2"}, "train-0",
			envCase{wantErr: `Kubernetes Indexed Job "train", but MULTIRAIL_K8S_SERVICE is not set`}},
		{"k8s no service but MULTIRAIL_RDZV", map[string]string{"JOB_COMPLETION_INDEX": "1", "MULTIRAIL_SIZE": "2", "MULTIRAIL_RDZV": "tcp://x:1"}, "train-1",
			envCase{want: Info{Launcher: K8s, Rank: 1, Size: 2, LocalSize: 1, JobID: "train", Rdzv: "tcp://x:1"}}},
		{"k8s host name without index", map[string]string{"JOB_COMPLETION_INDEX": "1", "MULTIRAIL_SIZE": "2", "MULTIRAIL_K8S_SERVICE": "s"}, "train-1-x7k2p",
			envCase{wantErr: `host name "train-1-x7k2p" is not <job>-1`}},
		{"k8s bad service", map[string]string{"JOB_COMPLETION_INDEX": "1", "MULTIRAIL_SIZE": "2", "MULTIRAIL_K8S_SERVICE": "Svc"}, "train-1",
			envCase{wantErr: `MULTIRAIL_K8S_SERVICE="Svc": want a DNS name`}},
		{"k8s index >= size", map[string]string{"JOB_COMPLETION_INDEX": "2", "MULTIRAIL_SIZE": "2", "MULTIRAIL_K8S_SERVICE": "s"}, "train-2",
			envCase{wantErr: `JOB_COMPLETION_INDEX="2": want an integer in [0, 2) (MULTIRAIL_SIZE=2)`}},
		{"empty values count as unset", map[string]string{"MULTIRAIL_RANK": "", "RANK": "", "SLURM_PROCID": ""}, "h",
			envCase{noLaunc: true}},
		{"nothing", map[string]string{}, "h", envCase{noLaunc: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.host = tc.host
			info, err := Detect(envMap(tc.env), tc.host)
			checkCase(t, tc.c, info, err)
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestErrNoLauncherNamesEverything(t *testing.T) {
	_, err := Detect(envMap(map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MULTIRAIL_SIZE": "2"}), "h")
	if !errors.Is(err, ErrNoLauncher) {
		t.Fatalf("err = %v", err)
	}
	for _, k := range []string{"MULTIRAIL_RANK", "TORCHELASTIC_RUN_ID", "RANK", "WORLD_SIZE", "MASTER_ADDR",
		"OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "JOB_COMPLETION_INDEX"} {
		if !strings.Contains(err.Error(), k) {
			t.Errorf("error does not name %s: %v", k, err)
		}
	}
	if !strings.Contains(err.Error(), "set: MULTIRAIL_SIZE, RANK, WORLD_SIZE") {
		t.Errorf("error does not say which are set: %v", err)
	}
	checkOneLine(t, err)
}

func TestSourcesAndPurity(t *testing.T) {
	env := []string{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=1", "OMPI_COMM_WORLD_LOCAL_RANK=0",
		"OMPI_COMM_WORLD_LOCAL_SIZE=1", "PMIX_NAMESPACE=5", "SLURM_PROCID=3", "NOISE"}
	a, err := DetectEnv(env, "h")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := DetectEnv(env, "h")
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two calls differ: %+v %+v", a, b)
	}
	want := []string{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
		"OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_NAMESPACE"}
	if !slices.Equal(a.Sources, want) {
		t.Errorf("Sources = %v, want %v", a.Sources, want)
	}
	// The last of repeated keys wins, as in a process environment.
	c, err := DetectEnv(append(env, "PMIX_NAMESPACE=6"), "h")
	if err != nil || c.JobID != "6" {
		t.Errorf("JobID = %q, %v; want 6", c.JobID, err)
	}
}

func TestParseRdzv(t *testing.T) {
	for _, s := range []string{"tcp://h:1", "tcp://10.0.0.1:65535", "tcp://[::1]:80", "tcp://[fe80::1%eth0]:80", "file:///", "file:///a/b c"} {
		r, err := ParseRdzv(s)
		if err != nil {
			t.Errorf("ParseRdzv(%q): %v", s, err)
			continue
		}
		if r.String() != s {
			t.Errorf("ParseRdzv(%q).String() = %q", s, r.String())
		}
	}
	if r, _ := ParseRdzv("file:///a/../b/"); r.Dir != "/b" {
		t.Errorf("Dir = %q, want /b", r.Dir)
	}
	for _, s := range []string{"", "tcp://h", "tcp://:1", "tcp://h:0", "tcp://h:65536", "tcp://h:1/x", "tcp://h:-1",
		"file://", "file://host/x", "tcp://[::%[]:1", "tcp://[::1%]:1", "tcp://a b:1", "file://a", "unix:///x", "TCP://h:1", "tcp://h:1x"} {
		if _, err := ParseRdzv(s); err == nil {
			t.Errorf("ParseRdzv(%q) accepted", s)
		} else if !strings.HasPrefix(err.Error(), "launch: ") {
			t.Errorf("ParseRdzv(%q): %v, want an error starting with launch:", s, err)
		}
	}
}

func TestSlurmPortRange(t *testing.T) {
	seen := map[int]bool{}
	for job := 0; job < 2000; job++ {
		for step := 0; step < 3; step++ {
			p := SlurmPort(itoa(job), itoa(step))
			if p < SlurmPortBase || p >= SlurmPortBase+SlurmPortCount {
				t.Fatalf("SlurmPort(%d, %d) = %d, outside [%d, %d)", job, step, p, SlurmPortBase, SlurmPortBase+SlurmPortCount)
			}
			seen[p] = true
		}
	}
	if SlurmPortBase+SlurmPortCount > 29400 {
		t.Errorf("range reaches torch's ports")
	}
	if len(seen) < SlurmPortCount/2 {
		t.Errorf("only %d distinct ports over 6000 steps", len(seen))
	}
}

func TestSanitize(t *testing.T) {
	if got := sanitize("a/b c@d..e"); got != "a_b_c_d..e" {
		t.Errorf("sanitize = %q", got)
	}
	long := strings.Repeat("x", 300)
	a, b := sanitize(long), sanitize(long+"y")
	if len(a) != 100 || a == b {
		t.Errorf("long ids: %q %q", a, b)
	}
}

// FuzzDetect feeds Detect environments of "K=V" lines (seeded with the
// dumps under testdata/env): it never panics, its errors are one line, and
// what it returns holds together.
func FuzzDetect(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "env", "*.env"))
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err == nil {
			f.Add(string(b), "vm")
		}
	}
	f.Add("SLURM_PROCID=1\nSLURM_NTASKS=2\nSLURM_LOCALID=0\nSLURM_JOB_ID=1\nSLURM_STEP_ID=0\nSLURM_STEP_NODELIST=a[1-2]\nSLURM_STEP_TASKS_PER_NODE=1(x2)", "a2")
	f.Fuzz(func(t *testing.T, text, host string) {
		info, err := DetectEnv(strings.Split(text, "\n"), host)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") || !strings.HasPrefix(err.Error(), "launch: ") {
				t.Fatalf("error %q", err)
			}
			return
		}
		if info.Size < 1 || info.Rank < 0 || info.Rank >= info.Size {
			t.Fatalf("rank %d size %d", info.Rank, info.Size)
		}
		if info.LocalSize != Unknown && (info.LocalSize < 1 || info.LocalSize > info.Size) {
			t.Fatalf("local size %d of %d", info.LocalSize, info.Size)
		}
		limit := info.Size
		if info.LocalSize != Unknown {
			limit = info.LocalSize
		}
		if info.LocalRank != Unknown && (info.LocalRank < 0 || info.LocalRank >= limit) {
			t.Fatalf("local rank %d of %d", info.LocalRank, limit)
		}
		if info.Rdzv == "" {
			if info.Size != 1 || info.Serve {
				t.Fatalf("no rendezvous: %+v", info)
			}
			return
		}
		r, err := ParseRdzv(info.Rdzv)
		if err != nil || r.String() != info.Rdzv {
			t.Fatalf("Rdzv %q: %v", info.Rdzv, err)
		}
		if info.Serve && (info.Rank != 0 || r.Scheme != "tcp") {
			t.Fatalf("serve on %+v", info)
		}
	})
}
