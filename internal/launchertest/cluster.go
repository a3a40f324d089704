package launchertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Node is one host of a multi-node Slurm: a network namespace (whose name
// is also the node's host name) and its address on the control network.
type Node struct {
	NS, Addr string
	// Hosts is the node's hosts file (bound over /etc/hosts for its
	// daemons; `ip netns exec` does the same for commands run there).
	Hosts string
}

// SlurmCluster starts a Slurm whose nodes are network namespaces, as
// ../shared/anchors/cluster/slurm.sh does: slurmctld on the first node and
// one slurmd per node, each entered with nsenter (network namespace only:
// `ip netns exec` would remount /sys and hide the cgroup mounts slurmd
// checks) inside private UTS and mount namespaces whose host name is the
// node's and whose /etc/hosts is the node's hosts file. Configuration,
// state, spool and logs live in a fresh directory; auth/none, no cgroups,
// a partition "debug" with every node, cores oversubscribed. It waits
// until every node is idle and stops the daemons when t ends. The
// returned argv prefix runs a command on the first node with SLURM_CONF
// set (append "srun", "-N", ...). Skips or, under CI as root, fails like
// Slurm when the daemons are missing.
func SlurmCluster(t testing.TB, nodes []Node) (prefix []string) {
	t.Helper()
	requireRoot(t, "a multi-node Slurm (slurmd)")
	lookPath(t, "slurmctld, slurmd and slurm-client", "srun", "sinfo", "slurmctld", "slurmd", "nsenter", "unshare")
	if len(nodes) == 0 {
		t.Fatal("launchertest: SlurmCluster without nodes")
	}
	dir, err := os.MkdirTemp("/tmp", "multirail-slurmc-") // short: slurmstepd's sockets live under it
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"state", "log"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(dir, "slurm.conf")
	var b strings.Builder
	fmt.Fprintf(&b, "ClusterName=multirail\nSlurmctldHost=%s(%s)\n", nodes[0].NS, nodes[0].Addr)
	fmt.Fprintf(&b, "AuthType=auth/none\nCredType=cred/none\nProctrackType=proctrack/pgid\nTaskPlugin=task/none\n")
	fmt.Fprintf(&b, "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nSlurmUser=root\nSlurmdUser=root\n")
	fmt.Fprintf(&b, "StateSaveLocation=%[1]s/state\nSlurmdSpoolDir=%[1]s/spool-%%n\nSlurmctldLogFile=%[1]s/log/ctld.log\n", dir)
	fmt.Fprintf(&b, "SlurmdLogFile=%[1]s/log/d-%%n.log\nSlurmctldPidFile=%[1]s/ctld.pid\nSlurmdPidFile=%[1]s/d-%%n.pid\n", dir)
	fmt.Fprintf(&b, "JobAcctGatherType=jobacct_gather/none\nMailProg=/bin/true\nMpiDefault=none\nReturnToService=2\n")
	var names []string
	for _, n := range nodes {
		fmt.Fprintf(&b, "NodeName=%s NodeAddr=%s CPUs=%d RealMemory=500\n", n.NS, n.Addr, runtime.NumCPU())
		names = append(names, n.NS)
	}
	fmt.Fprintf(&b, "PartitionName=debug Nodes=%s Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE\n", strings.Join(names, ","))
	if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	type daemon struct {
		cmd    *exec.Cmd
		exited chan struct{} // closed when Wait returned
	}
	var daemons []daemon
	stop := func() {
		for _, d := range daemons {
			_ = d.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, d := range daemons {
			select {
			case <-d.exited:
			case <-time.After(10 * time.Second):
				_ = d.cmd.Process.Kill()
				<-d.exited
			}
		}
	}
	start := func(n Node, name string, logName string) {
		// nsenter and unshare exec: the process started is the daemon.
		c := exec.Command("nsenter", "--net=/var/run/netns/"+n.NS, "unshare", "--uts", "--mount", "sh", "-c",
			`mount --bind "$1" /etc/hosts && hostname "$2" && exec "$3" -D -f "$4"`, "sh", n.Hosts, n.NS, name, conf)
		out, err := os.Create(filepath.Join(dir, "log", logName))
		if err != nil {
			t.Fatal(err)
		}
		c.Stdout, c.Stderr = out, out
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Start(); err != nil {
			out.Close()
			stop()
			t.Fatalf("launchertest: starting %s on %s: %v", name, n.NS, err)
		}
		out.Close()
		d := daemon{c, make(chan struct{})}
		go func() { _ = c.Wait(); close(d.exited) }()
		daemons = append(daemons, d)
	}
	for _, n := range nodes {
		start(n, "slurmd", "d-"+n.NS+".out")
	}
	start(nodes[0], "slurmctld", "ctld.out")
	t.Cleanup(func() {
		stop()
		if !t.Failed() {
			os.RemoveAll(dir)
		}
	})

	prefix = []string{"ip", "netns", "exec", nodes[0].NS, "env", "SLURM_CONF=" + conf}
	want := fmt.Sprintf("%d idle", len(nodes))
	var last string
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		for _, d := range daemons {
			select {
			case <-d.exited:
				t.Fatalf("launchertest: %s exited during start-up (%v); logs in %s", strings.Join(d.cmd.Args, " "), d.cmd.ProcessState, dir)
			default:
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, _ := exec.CommandContext(ctx, prefix[0], append(prefix[1:], "sinfo", "-h", "-o", "%D %t")...).Output()
		cancel()
		last = string(bytes.TrimSpace(out))
		if last == want {
			return prefix
		}
	}
	t.Fatalf("launchertest: the %d nodes did not become idle in 90 s (sinfo: %q); logs in %s", len(nodes), last, dir)
	return nil
}
