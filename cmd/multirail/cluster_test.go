package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/multirail/multirail/internal/launchertest"
	"github.com/multirail/multirail/lab"
)

// clusterLab brings up a lab cluster of hosts hosts and rails of rates for
// t, or skips (fails under CI as root, where the lab must work).
func clusterLab(t *testing.T, prefix string, hosts int, rates ...float64) *lab.Lab {
	t.Helper()
	if err := lab.Available(); err != nil {
		if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
			t.Fatalf("CI=true as root, but: %v", err)
		}
		t.Skip(err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := lab.Up(ctx, lab.Config{Hosts: hosts, Rates: rates, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Down(); err != nil {
			t.Error(err)
		}
	})
	return l
}

// checkClusterRails checks that rank 0 found exactly the lab's rails,
// rail0..rail<k-1>, to every other rank (and not the control network).
func checkClusterRails(t *testing.T, l *lab.Lab, res osuLaunchResult) {
	t.Helper()
	var want []string
	for k := 0; k < l.Rails(); k++ {
		want = append(want, lab.RailDev(k))
	}
	if len(res.RailNames) != l.Hosts() {
		t.Fatalf("rail_names has %d entries, want one per rank (%d): %v", len(res.RailNames), l.Hosts(), res.RailNames)
	}
	for r := 1; r < l.Hosts(); r++ {
		if !slices.Equal(res.RailNames[r], want) {
			t.Errorf("rails from rank 0 to rank %d: %v, want %v", r, res.RailNames[r], want)
		}
	}
}

// TestClusterLaunchers: on a lab cluster of four hosts (one namespace
// each, a switch per rail), `multirail osu allreduce --validate` runs one
// rank per host under Open MPI's mpirun (started on host 0, with `lab rsh`
// as its rsh agent) and under a multi-node Slurm (a slurmd per host), and
// every rank finds the three rails to every other from the hosts' NICs
// (MULTIRAIL_IFNAME=rail keeps the control network out).
func TestClusterLaunchers(t *testing.T) {
	bin := multirailBinary(t)
	l := clusterLab(t, fmt.Sprintf("mrc%04x", os.Getpid()&0xffff), 4, 20e6, 10e6, 5e6)
	hosts := l.HostNames()
	const token = "cluster-test-token-0123456789abcdef"
	osuArgs := []string{"osu", "allreduce", "--validate", "--json", "--sizes", "4,4096,262144", "--iters", "3", "--warmup", "1"}

	t.Run("mpirun", func(t *testing.T) {
		mpirun, mpiPrefix := launchertest.MPIRun(t)
		hostList := ""
		for i, h := range hosts {
			if i > 0 {
				hostList += ","
			}
			hostList += h + ":1"
		}
		argv := []string{"ip", "netns", "exec", hosts[0], "unshare", "--uts", "sh", "-c", `hostname "$0" && exec "$@"`, hosts[0], mpirun}
		argv = append(argv, mpiPrefix...)
		argv = append(argv, "-np", "4", "--host", hostList,
			"--mca", "plm_rsh_agent", bin+" lab rsh", "--mca", "oob_tcp_if_include", lab.CtlNet(),
			"-x", "MULTIRAIL_IFNAME=rail", "-x", "MULTIRAIL_RDZV=tcp://"+hosts[0]+":29555", "-x", "MULTIRAIL_TOKEN="+token, bin)
		env := append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
		checkClusterRails(t, l, checkOSU(t, "ompi", env, append(argv, osuArgs...)...))
	})

	t.Run("srun", func(t *testing.T) {
		var nodes []launchertest.Node
		for i, h := range hosts {
			nodes = append(nodes, launchertest.Node{NS: h, Addr: l.CtlIP(i), Hosts: lab.HostsPath(h)})
		}
		prefix := launchertest.SlurmCluster(t, nodes)
		argv := append(append([]string(nil), prefix...), "srun", "-N", "4", "-n", "4", "-O", bin)
		env := append(os.Environ(), "MULTIRAIL_IFNAME=rail", "MULTIRAIL_TOKEN="+token)
		checkClusterRails(t, l, checkOSU(t, "slurm", env, append(argv, osuArgs...)...))
	})
}
