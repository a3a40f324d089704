package launch

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// detectMultirail reads MULTIRAIL_*, as `multirail run` sets them or a user
// sets them by hand. MULTIRAIL_RANK and MULTIRAIL_SIZE are required;
// MULTIRAIL_LOCAL_RANK and MULTIRAIL_LOCAL_SIZE are optional (Unknown
// when unset); MULTIRAIL_JOB_ID is optional. The rendezvous is
// MULTIRAIL_RDZV; without it a lone rank (size 1) needs none, and ranks
// that say they all share one host (MULTIRAIL_LOCAL_SIZE equal to
// MULTIRAIL_SIZE) and give MULTIRAIL_JOB_ID get the one-host file:// store.
func detectMultirail(l *lookup) (plan, error) {
	const who = "MULTIRAIL_RANK is set"
	rank, size, err := l.rankSize(who, "MULTIRAIL_RANK", "MULTIRAIL_SIZE")
	if err != nil {
		return plan{}, err
	}
	lrank, lsize, err := l.local("MULTIRAIL_LOCAL_RANK", "MULTIRAIL_LOCAL_SIZE", size, "MULTIRAIL_SIZE")
	if err != nil {
		return plan{}, err
	}
	jobID, _ := l.get("MULTIRAIL_JOB_ID")
	p := plan{info: Info{Launcher: Multirail, Rank: rank, Size: size, LocalRank: lrank, LocalSize: lsize, JobID: jobID}}
	switch {
	case size == 1:
	case lsize == size && jobID != "":
		p.oneHost = true
	default:
		p.needRdzv = fmt.Sprintf("launch: MULTIRAIL_RANK=%d and MULTIRAIL_SIZE=%d are set, but MULTIRAIL_RDZV is not: "+
			"set it to tcp://<host of rank 0>:<port> or file:///<shared dir> "+
			"(or, when all ranks share this host, MULTIRAIL_LOCAL_SIZE=%d and a MULTIRAIL_JOB_ID)", rank, size, size)
	}
	return p, nil
}

// detectTorchrun reads what torchrun (TorchElastic) gives each worker.
// The rendezvous is MASTER_ADDR:MASTER_PORT, or MASTER_ADDR:MASTER_PORT+1
// when TORCHELASTIC_USE_AGENT_STORE=True: then the agent's TCPStore owns
// MASTER_PORT and the workers are clients of it.
func detectTorchrun(l *lookup) (plan, error) {
	const who = "torchrun (TORCHELASTIC_RUN_ID is set)"
	runID, _ := l.get("TORCHELASTIC_RUN_ID")
	rank, size, err := l.rankSize(who, "RANK", "WORLD_SIZE")
	if err != nil {
		return plan{}, err
	}
	for _, k := range []string{"LOCAL_RANK", "LOCAL_WORLD_SIZE"} {
		if _, err := l.need(who, k); err != nil {
			return plan{}, err
		}
	}
	lrank, lsize, err := l.local("LOCAL_RANK", "LOCAL_WORLD_SIZE", size, "WORLD_SIZE")
	if err != nil {
		return plan{}, err
	}
	jobID := runID
	if v, ok := l.get("TORCHELASTIC_RESTART_COUNT"); ok {
		if _, ok := smallUint(v); !ok {
			return plan{}, fmt.Errorf("launch: TORCHELASTIC_RESTART_COUNT=%q: want an integer >= 0", clip(v))
		}
		jobID += "." + v
	}
	addr, err := l.need(who, "MASTER_ADDR")
	if err != nil {
		return plan{}, err
	}
	portS, err := l.need(who, "MASTER_PORT")
	if err != nil {
		return plan{}, err
	}
	add := 0
	if v, ok := l.get("TORCHELASTIC_USE_AGENT_STORE"); ok {
		switch strings.ToLower(v) {
		case "true", "1":
			add = 1
		case "false", "0":
		default:
			return plan{}, fmt.Errorf("launch: TORCHELASTIC_USE_AGENT_STORE=%q: want True or False", clip(v))
		}
	}
	port, err := portValue("MASTER_PORT", portS, add)
	if err != nil {
		return plan{}, err
	}
	return plan{
		info: Info{Launcher: Torchrun, Rank: rank, Size: size, LocalRank: lrank, LocalSize: lsize, JobID: jobID},
		host: addr, port: port, hostVar: "MASTER_ADDR", hostVal: addr,
	}, nil
}

// detectEnv reads plain env:// (PyTorchJob, DeepSpeed's and many scripts'
// per-node launchers): RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, which
// rank 0 is free to bind, and LOCAL_RANK, LOCAL_WORLD_SIZE when present.
func detectEnv(l *lookup) (plan, error) {
	const who = "env:// (RANK, WORLD_SIZE and MASTER_ADDR are set)"
	rank, size, err := l.rankSize(who, "RANK", "WORLD_SIZE")
	if err != nil {
		return plan{}, err
	}
	lrank, lsize, err := l.local("LOCAL_RANK", "LOCAL_WORLD_SIZE", size, "WORLD_SIZE")
	if err != nil {
		return plan{}, err
	}
	addr, _ := l.get("MASTER_ADDR")
	portS, err := l.need(who, "MASTER_PORT")
	if err != nil {
		return plan{}, err
	}
	port, err := portValue("MASTER_PORT", portS, 0)
	if err != nil {
		return plan{}, err
	}
	return plan{
		info: Info{Launcher: Env, Rank: rank, Size: size, LocalRank: lrank, LocalSize: lsize},
		host: addr, port: port, hostVar: "MASTER_ADDR", hostVal: addr,
	}, nil
}

// detectOMPI reads Open MPI's OMPI_COMM_WORLD_*. The job id is
// PMIX_NAMESPACE (Open MPI 4 and 5), else OMPI_MCA_ess_base_jobid, else
// the job family in OMPI_MCA_orte_hnp_uri (the part before ';'). Open MPI
// does not say where rank 0 is: on one host the rendezvous is a file://
// store, across hosts MULTIRAIL_RDZV must say.
func detectOMPI(l *lookup) (plan, error) {
	const who = "Open MPI (OMPI_COMM_WORLD_RANK is set)"
	rank, size, err := l.rankSize(who, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")
	if err != nil {
		return plan{}, err
	}
	for _, k := range []string{"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"} {
		if _, err := l.need(who, k); err != nil {
			return plan{}, err
		}
	}
	lrank, lsize, err := l.local("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", size, "OMPI_COMM_WORLD_SIZE")
	if err != nil {
		return plan{}, err
	}
	var jobID string
	if name, v, ok := l.first("PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_hnp_uri"); ok {
		jobID = v
		if name == "OMPI_MCA_orte_hnp_uri" {
			jobID, _, _ = strings.Cut(v, ";")
		}
	}
	p := plan{info: Info{Launcher: OpenMPI, Rank: rank, Size: size, LocalRank: lrank, LocalSize: lsize, JobID: jobID}}
	if lsize == size {
		p.oneHost = true
		p.noJobID = "launch: Open MPI on one host, but none of PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid, OMPI_MCA_orte_hnp_uri " +
			"is set to key the file:// rendezvous: pass -x MULTIRAIL_JOB_ID=<unique id> or -x MULTIRAIL_RDZV=file:///<dir> to mpirun"
	} else {
		p.needRdzv = fmt.Sprintf("launch: Open MPI ranks span hosts (OMPI_COMM_WORLD_LOCAL_SIZE=%d, OMPI_COMM_WORLD_SIZE=%d) "+
			"and Open MPI does not say where rank 0 is: pass -x MULTIRAIL_RDZV=tcp://<host of rank 0>:<port> to mpirun", lsize, size)
	}
	return p, nil
}

// slurmOwnsPMI reports whether PMI_RANK was set by srun itself: Slurm's
// mpi/pmi2 plugin sets PMI_RANK, PMI_SIZE, PMI_FD and PMI_JOBID, the last
// to "<SLURM_JOB_ID>.<SLURM_STEP_ID>" (srun --mpi=pmi2 here: PMI_JOBID=4.0
// with SLURM_JOB_ID=4, SLURM_STEP_ID=0). Slurm, which knows the node list,
// is then the better source. An mpiexec started inside a Slurm allocation
// (Hydra starts its proxies with srun) leaves a different or no PMI_JOBID
// and sets MPI_LOCALRANKID: it is the innermost launcher and wins. The test
// looks at job-wide values only, so every rank of a job decides the same
// way (comparing PMI_RANK with SLURM_PROCID would not: under Hydra, rank 0
// and the proxy step's task 0 agree).
func slurmOwnsPMI(l *lookup) bool {
	pmiJob, _ := l.getenv("PMI_JOBID")
	if pmiJob == "" {
		return false
	}
	for _, j := range []string{"SLURM_JOB_ID", "SLURM_JOBID"} {
		job, _ := l.getenv(j)
		for _, s := range []string{"SLURM_STEP_ID", "SLURM_STEPID"} {
			step, _ := l.getenv(s)
			if job != "" && step != "" && pmiJob == job+"."+step {
				return true
			}
		}
	}
	return false
}

// detectMPICH reads PMI_RANK and PMI_SIZE (MPICH's Hydra, Intel MPI, any
// PMI-1 launcher) with the local rank and size from Hydra's
// MPI_LOCALRANKID and MPI_LOCALNRANKS, or else PMI_LOCAL_RANK and
// PMI_LOCAL_SIZE (Cray PALS). The job id is PMI_JOBID; Hydra (MPICH 4.0)
// does not set it, so a one-host run under Hydra needs MULTIRAIL_JOB_ID
// or MULTIRAIL_RDZV. As with Open MPI, across hosts MULTIRAIL_RDZV must
// say where rank 0 is.
func detectMPICH(l *lookup) (plan, error) {
	const who = "MPICH/Hydra (PMI_RANK is set)"
	rank, size, err := l.rankSize(who, "PMI_RANK", "PMI_SIZE")
	if err != nil {
		return plan{}, err
	}
	lrVar, lsVar := "MPI_LOCALRANKID", "MPI_LOCALNRANKS"
	if !l.has(lrVar) && !l.has(lsVar) {
		lrVar, lsVar = "PMI_LOCAL_RANK", "PMI_LOCAL_SIZE"
	}
	lrank, lsize, err := l.local(lrVar, lsVar, size, "PMI_SIZE")
	if err != nil {
		return plan{}, err
	}
	jobID, _ := l.get("PMI_JOBID")
	p := plan{info: Info{Launcher: MPICH, Rank: rank, Size: size, LocalRank: lrank, LocalSize: lsize, JobID: jobID}}
	switch {
	case lsize == size:
		p.oneHost = true
		p.noJobID = "launch: MPICH/Hydra on one host, but PMI_JOBID is not set (Hydra does not export a job id) " +
			"to key the file:// rendezvous: pass -genv MULTIRAIL_JOB_ID <unique id> or -genv MULTIRAIL_RDZV file:///<dir> to mpiexec"
	case lsize == Unknown:
		p.needRdzv = fmt.Sprintf("launch: MPICH/Hydra (PMI_SIZE=%d) without MPI_LOCALNRANKS or PMI_LOCAL_SIZE: cannot tell whether all ranks share this host; "+
			"pass -genv MULTIRAIL_RDZV tcp://<host of rank 0>:<port> (or file:///<dir> on one host) to mpiexec", size)
	default:
		p.needRdzv = fmt.Sprintf("launch: MPICH ranks span hosts (%s=%d, PMI_SIZE=%d) and MPICH does not say where rank 0 is: "+
			"pass -genv MULTIRAIL_RDZV tcp://<host of rank 0>:<port> to mpiexec", lsVar, lsize, size)
	}
	return p, nil
}

// detectSlurm reads what srun gives each task. Size is
// SLURM_STEP_NUM_TASKS (else SLURM_NTASKS, else SLURM_NPROCS), the local
// size this node's entry (SLURM_NODEID, else this host's place in the node
// list) of SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE), the job
// id SLURM_JOB_ID.SLURM_STEP_ID. On one node the rendezvous is a file://
// store; across nodes it is tcp on the first host of SLURM_STEP_NODELIST
// (else SLURM_JOB_NODELIST, else SLURM_NODELIST), where srun's default
// block distribution puts task 0, at the port SLURM_STEP_RESV_PORTS
// reserves (srun --resv-ports) or else the one derived from the job id (see
// SlurmPortBase).
func detectSlurm(l *lookup, host string) (plan, error) {
	const who = "Slurm (SLURM_PROCID is set)"
	_, jobID, ok := l.first("SLURM_JOB_ID", "SLURM_JOBID")
	if !ok {
		return plan{}, fmt.Errorf("launch: %s, but SLURM_JOB_ID is not set", who)
	}
	_, stepID, ok := l.first("SLURM_STEP_ID", "SLURM_STEPID")
	if !ok {
		return plan{}, fmt.Errorf("launch: %s, but SLURM_STEP_ID is not set: this is a batch script or an allocation's shell, "+
			"not a task started by srun; start the program with srun", who)
	}
	sizeVar, _, ok := l.first("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS")
	if !ok {
		return plan{}, fmt.Errorf("launch: %s, but none of SLURM_STEP_NUM_TASKS, SLURM_NTASKS, SLURM_NPROCS is set", who)
	}
	rank, size, err := l.rankSize(who, "SLURM_PROCID", sizeVar)
	if err != nil {
		return plan{}, err
	}
	listVar, list, ok := l.first("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
	if !ok {
		return plan{}, fmt.Errorf("launch: %s, but none of SLURM_STEP_NODELIST, SLURM_JOB_NODELIST, SLURM_NODELIST is set", who)
	}
	nodes, err := ExpandHostList(list)
	if err != nil {
		return plan{}, fmt.Errorf("launch: %s: %v", listVar, strings.TrimPrefix(err.Error(), "launch: "))
	}
	tpnVar, tpnS, ok := l.first("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
	if !ok {
		return plan{}, fmt.Errorf("launch: %s, but neither SLURM_STEP_TASKS_PER_NODE nor SLURM_TASKS_PER_NODE is set", who)
	}
	tpn, err := parseTasksPerNode(tpnVar, tpnS)
	if err != nil {
		return plan{}, err
	}
	if tpnVar == "SLURM_STEP_TASKS_PER_NODE" {
		if len(tpn) != len(nodes) {
			return plan{}, fmt.Errorf("launch: %s=%q lists %d nodes but %s=%q has %d", tpnVar, clip(tpnS), len(tpn), listVar, clip(list), len(nodes))
		}
		sum := 0
		for _, n := range tpn {
			sum += n
		}
		if sum != size {
			return plan{}, fmt.Errorf("launch: %s=%q adds up to %d tasks but %s=%d", tpnVar, clip(tpnS), sum, sizeVar, size)
		}
	}
	node := -1
	if v, ok := l.get("SLURM_NODEID"); ok {
		n, ok := smallUint(v)
		if !ok || n >= len(tpn) || n >= len(nodes) {
			return plan{}, fmt.Errorf("launch: SLURM_NODEID=%q: want an integer in [0, %d) (the nodes of %s=%q)", clip(v), min(len(tpn), len(nodes)), listVar, clip(list))
		}
		node = n
	} else {
		short, _, _ := strings.Cut(host, ".")
		for i, h := range nodes {
			if h == host || h == short {
				node = i
				break
			}
		}
		if node < 0 || node >= len(tpn) {
			return plan{}, fmt.Errorf("launch: SLURM_NODEID is not set and host %q is not in %s=%q", clip(host), listVar, clip(list))
		}
	}
	lsize := tpn[node]
	lrS, err := l.need(who, "SLURM_LOCALID")
	if err != nil {
		return plan{}, err
	}
	lrank, ok := smallUint(lrS)
	if !ok || lrank >= lsize {
		return plan{}, fmt.Errorf("launch: SLURM_LOCALID=%q: want an integer in [0, %d) (node %d's entry of %s=%q)", clip(lrS), lsize, node, tpnVar, clip(tpnS))
	}
	if lsize > size {
		return plan{}, fmt.Errorf("launch: %s=%q gives node %d %d tasks, more than %s=%d", tpnVar, clip(tpnS), node, lsize, sizeVar, size)
	}
	p := plan{info: Info{Launcher: Slurm, Rank: rank, Size: size, LocalRank: lrank, LocalSize: lsize, JobID: jobID + "." + stepID}}
	if len(nodes) == 1 {
		p.oneHost = true
		return p, nil
	}
	p.host, p.hostVar, p.hostVal = nodes[0], listVar, list
	if v, ok := l.get("SLURM_STEP_RESV_PORTS"); ok {
		first, _, _ := strings.Cut(v, ",")
		first, _, _ = strings.Cut(first, "-")
		port, ok := smallUint(first)
		if !ok || port < 1 || port > 65535 {
			return plan{}, fmt.Errorf("launch: SLURM_STEP_RESV_PORTS=%q: want ports in 1..65535 such as 12000-12003", clip(v))
		}
		p.port = port
	} else {
		p.port = SlurmPort(jobID, stepID)
	}
	return p, nil
}

// SlurmPort is the tcp rendezvous port of a multi-node Slurm step when
// nothing else gives one: SlurmPortBase + FNV-1a-32(jobID + "." + stepID)
// % SlurmPortCount.
func SlurmPort(jobID, stepID string) int {
	h := fnv.New32a()
	h.Write([]byte(jobID + "." + stepID))
	return SlurmPortBase + int(h.Sum32()%SlurmPortCount)
}

// detectK8s reads a Kubernetes Indexed Job: the rank is
// JOB_COMPLETION_INDEX, the size MULTIRAIL_SIZE (Kubernetes does not put
// spec.completions in the environment), the local rank and size 0 and 1
// (a pod is a host of its own). Rank 0 is the pod <job>-0 of the headless
// Service named by MULTIRAIL_K8S_SERVICE, port MULTIRAIL_RDZV_PORT or
// DefaultPort.
//
// From the Kubernetes documentation, "Job with Pod-to-Pod Communication"
// (https://kubernetes.io/docs/tasks/job/job-with-pod-to-pod-communication/):
// "Jobs in Indexed completion mode automatically set the pods' hostname to
// be in the format of ${jobName}-${completionIndex}", and pods reach each
// other by those names once a headless Service selecting the Job's pods
// (clusterIP: None, selector job-name: <job>) is named as the pod
// template's subdomain; the pod <job>-0 is then <job>-0.<service> within
// the namespace. The control plane sets JOB_COMPLETION_INDEX in every
// container of an Indexed Job (the batch.kubernetes.io/job-completion-index
// annotation).
func detectK8s(l *lookup, host string) (plan, error) {
	idxS, _ := l.get("JOB_COMPLETION_INDEX")
	if !l.has("MULTIRAIL_SIZE") {
		return plan{}, fmt.Errorf("launch: Kubernetes Indexed Job (JOB_COMPLETION_INDEX=%q), but MULTIRAIL_SIZE is not set: "+
			"Kubernetes does not pass the Job's size; set MULTIRAIL_SIZE to spec.completions in the pod template", clip(idxS))
	}
	rank, size, err := l.rankSize("Kubernetes Indexed Job", "JOB_COMPLETION_INDEX", "MULTIRAIL_SIZE")
	if err != nil {
		return plan{}, err
	}
	short, _, _ := strings.Cut(host, ".")
	i := strings.LastIndexByte(short, '-')
	var job string
	if i > 0 {
		if n, ok := smallUint(short[i+1:]); ok && n == rank && validHost(short[:i]) {
			job = short[:i]
		}
	}
	p := plan{info: Info{Launcher: K8s, Rank: rank, Size: size, LocalRank: 0, LocalSize: 1, JobID: job}}
	if job == "" {
		p.needRdzv = fmt.Sprintf("launch: Kubernetes Indexed Job: host name %q is not <job>-%d (JOB_COMPLETION_INDEX=%d), "+
			"so rank 0's name is unknown: set MULTIRAIL_RDZV=tcp://<host of rank 0>:<port>", clip(host), rank, rank)
		return p, nil
	}
	svc, ok := l.get("MULTIRAIL_K8S_SERVICE")
	if !ok {
		p.needRdzv = fmt.Sprintf("launch: Kubernetes Indexed Job %q, but MULTIRAIL_K8S_SERVICE is not set: "+
			"set it to the headless Service named as the pod template's subdomain, so that rank 0 is %q.<service> "+
			"(or set MULTIRAIL_RDZV=tcp://<host of rank 0>:<port>)", job, job+"-0")
		return p, nil
	}
	if !dnsName(svc) {
		return plan{}, fmt.Errorf("launch: MULTIRAIL_K8S_SERVICE=%q: want a DNS name (lower-case letters, digits, '-', '.')", clip(svc))
	}
	p.host, p.hostVar, p.hostVal = job+"-0."+svc, "MULTIRAIL_K8S_SERVICE", svc
	p.port = DefaultPort
	return p, nil
}

// dnsName reports whether s looks like a DNS name as Kubernetes names
// Services: lower-case letters, digits, '-' and '.', no empty label.
func dnsName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
