// Package launch works out, from its environment and host name alone,
// which launcher started this process and what it says: rank, size, local
// rank and size, a job id, and where the rendezvous is. It does no I/O:
// Detect is a pure function of (getenv, host), table-tested with real
// environment dumps (testdata/env).
//
// # Launchers
//
//	launcher     variables read                                                rendezvous (without MULTIRAIL_RDZV)
//	multirail    MULTIRAIL_RANK, _SIZE, [_LOCAL_RANK, _LOCAL_SIZE], [_JOB_ID]  MULTIRAIL_RDZV (see below)
//	torchrun     TORCHELASTIC_RUN_ID (+ _RESTART_COUNT), RANK, WORLD_SIZE,     tcp://MASTER_ADDR:MASTER_PORT, or
//	             LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT        MASTER_PORT+1 when TORCHELASTIC_USE_AGENT_STORE=True
//	env          RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,                   tcp://MASTER_ADDR:MASTER_PORT
//	             [LOCAL_RANK, LOCAL_WORLD_SIZE]
//	ompi         OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE;        one host: file://$TMPDIR/multirail-rdzv-<job id>;
//	             job id PMIX_NAMESPACE | OMPI_MCA_ess_base_jobid |             across hosts: an error asking for
//	             OMPI_MCA_orte_hnp_uri                                         mpirun -x MULTIRAIL_RDZV=tcp://<host of rank 0>:<port>
//	mpich        PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS          as ompi (mpiexec -genv MULTIRAIL_RDZV ...); Hydra
//	             (or PMI_LOCAL_RANK, PMI_LOCAL_SIZE); job id PMI_JOBID         sets no PMI_JOBID, so one host needs MULTIRAIL_JOB_ID
//	slurm        SLURM_PROCID, SLURM_STEP_NUM_TASKS | SLURM_NTASKS |           one node: file://$TMPDIR/multirail-rdzv-<job>.<step>;
//	             SLURM_NPROCS, SLURM_LOCALID, SLURM_NODEID,                    several: tcp://<first host of the node list>:<port>,
//	             SLURM_STEP_TASKS_PER_NODE | SLURM_TASKS_PER_NODE,             port SLURM_STEP_RESV_PORTS' first, else
//	             SLURM_STEP_NODELIST | SLURM_JOB_NODELIST | SLURM_NODELIST,    SlurmPort(job, step) in 20100..23999
//	             SLURM_JOB_ID, SLURM_STEP_ID
//	k8s          JOB_COMPLETION_INDEX, MULTIRAIL_SIZE, MULTIRAIL_K8S_SERVICE,  tcp://<job>-0.<service>:DefaultPort, the job name
//	             the host name <job>-<index>                                  taken from the host name
//
// TMPDIR defaults to /tmp. Ranks with no launcher-given local rank or
// size get Unknown (-1) there; the rendezvous can derive them from the
// host identities it collects.
//
// # Overrides, whatever the launcher
//
//   - MULTIRAIL_RDZV=tcp://host:port or file:///abs/dir replaces the
//     rendezvous the launcher implies: the way to run Open MPI or MPICH
//     across hosts (mpirun -x MULTIRAIL_RDZV=tcp://hostA:29555), or to put
//     anything anywhere.
//   - MULTIRAIL_RDZV_PORT replaces the port of a tcp rendezvous the
//     launcher implies (Slurm, Kubernetes, torchrun, env://); ignored when
//     MULTIRAIL_RDZV is set, which has its own port.
//   - MULTIRAIL_JOB_ID replaces the launcher's job id (and so the name of
//     a one-host file:// store).
//   - MULTIRAIL_RDZV_SERVE=0 says that something else (multirail run)
//     serves the tcp rendezvous: Info.Serve stays false on rank 0 too.
//     The default, 1, makes rank 0 serve it; a file:// rendezvous is never
//     served.
//
// A variable set to the empty string counts as unset.
//
// # multirail run and by hand
//
// multirail run sets MULTIRAIL_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE,
// _JOB_ID, _RDZV (its own tcp server) and MULTIRAIL_RDZV_SERVE=0. By hand,
// MULTIRAIL_RANK and MULTIRAIL_SIZE are required; the local pair defaults
// to Unknown, the job id to empty; MULTIRAIL_RDZV is required unless the
// size is 1 (no rendezvous: Info.Rdzv is empty) or all ranks say they
// share this host (MULTIRAIL_LOCAL_SIZE = MULTIRAIL_SIZE) and give a
// MULTIRAIL_JOB_ID (a one-host file:// store).
//
// # Precedence
//
// When several launchers' variables are present, the innermost launcher,
// the one whose ranks these processes are, must win; outer launchers'
// variables leak through (srun exports its environment to every task,
// mpirun under Slurm starts its daemons with srun, Hydra its proxies). The
// order:
//
//		MULTIRAIL_RANK > TORCHELASTIC_RUN_ID > RANK+WORLD_SIZE+MASTER_ADDR >
//		OMPI_COMM_WORLD_RANK > PMI_RANK > SLURM_PROCID > JOB_COMPLETION_INDEX
//
//	  - Explicit MULTIRAIL_* first: the user (or multirail run) said so.
//	  - torchrun next: it is always started by the others (srun torchrun,
//	    mpirun torchrun), never the reverse, and its TORCHELASTIC_RUN_ID
//	    tells it apart from plain env://.
//	  - Plain env:// before the MPI launchers and Slurm: none of those sets
//	    RANK and WORLD_SIZE, so when they are present (with MASTER_ADDR)
//	    something inside the job set them: a per-node launcher such as
//	    DeepSpeed's or a wrapper script mapping SLURM_PROCID to RANK. RANK
//	    and WORLD_SIZE without MASTER_ADDR are not taken as env://.
//	  - Open MPI before Slurm: OMPI_COMM_WORLD_* are only ever set by
//	    mpirun's daemons; under sbatch the ranks also carry the batch step's
//	    SLURM_PROCID=0 (testdata/env/ompi-in-sbatch-*.env).
//	  - PMI_RANK before Slurm, unless Slurm set it: srun --mpi=pmi2 sets
//	    PMI_RANK, PMI_SIZE and PMI_JOBID=<SLURM_JOB_ID>.<SLURM_STEP_ID>, and
//	    then Slurm, which knows the node list, is used. Hydra under Slurm sets
//	    no such PMI_JOBID: MPICH wins (testdata/env/mpich-hydra-in-sbatch-*,
//	    where rank 0's PMI_RANK equals its proxy's SLURM_PROCID, so
//	    comparing ranks would split the job). The test uses job-wide values
//	    only, so every rank decides alike.
//	  - Slurm before Kubernetes: a pod is the outermost container of
//	    anything.
//
// A Slurm variable set with no SLURM_STEP_ID (a program run by the batch
// script itself, not by srun) is an error, not a job of SLURM_NTASKS ranks
// of which only one would ever start.
//
// # Ports
//
// The tcp rendezvous of a multi-node Slurm step, with neither
// MULTIRAIL_RDZV_PORT nor srun --resv-ports, listens on SlurmPort(job,
// step) = SlurmPortBase + FNV-1a(job.step) % SlurmPortCount, in
// 20100..23999: computed alike on every rank, clear of the well-known
// ports, the usual HPC daemons, torch's 29400/29500/29501, Kubernetes
// NodePorts and Linux's ephemeral range (see SlurmPortBase). Two steps
// whose rank 0 share a node collide with probability 1/3900; set
// MULTIRAIL_RDZV_PORT or use --resv-ports when that matters. A Kubernetes
// pod has its own network namespace, so a fixed DefaultPort (29600) serves.
//
// # Errors
//
// Every error is one line beginning "launch: " and naming the variable,
// its value and what is allowed, or what to set. ErrNoLauncher (test with
// errors.Is) when no launcher fits; its message names every variable
// looked for and those that were set. Host lists and tasks-per-node
// strings are bounded (MaxHosts) and errors name the bad input.
package launch
