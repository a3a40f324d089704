// Package labbench is `multirail lab bench`: it measures multirail against
// one TCP stream per rail, Linux MPTCP and Open MPI's TCP transport on a
// lab of two network namespaces (package lab), before and after a
// competing TCP stream starts on the fastest rail.
//
// The contenders are Systems, all behind one interface: tcp-per-rail,
// mptcp, openmpi-default, openmpi-weighted and multirail-<sched> for every
// scheduler (Lookup, Expand). A run of one system at one message size
// lasts Plan.Duration; the receiver counts payload bytes in buckets of
// Bucket, and the Report turns them into the static and dynamic phases'
// goodput, each against the ceiling (the rails' rates x 1448/1514).
//
// The agent systems run this program twice inside the namespaces, as
// `<exe> lab agent --spec JSON`: a receiver in B, which prints Ready, then
// Progress lines, then one ResultLine (the agent protocol: Spec,
// AgentResult, RunAgent), and a sender in A. The Open MPI systems run
// mpirun in A with `<exe> lab rsh` as its rsh agent (ParseRsh, RshArgv).
// The caller's program must therefore route those two subcommands to
// RunAgent and RshArgv.
//
// Use: New (checks the program, builds the MPI program when an Open MPI
// system is planned), Up (builds the lab; needs root), RunAll, Down. The
// package never prints: progress and failures reach the caller through
// Hooks, logs go to Options.Logger.
//
// RunColl is the collective bench (`lab bench --hosts N`): on a cluster
// (lab.Config.Hosts) it runs OSU-style tests, one rank per host, every
// system started by Open MPI's mpirun on host 0 with `<exe> lab rsh`:
// openmpi-default and openmpi-weighted run mrosu (package lab/mpi), gloo
// runs gloo_osu.py under one torchrun per host, torch-multirail[-plaintext]
// the same program with torch's backend multirail (python/multirail over
// the C ABI; FindTorchMultirail, TorchSetup), multirail-<sched>[-plaintext]
// runs `<exe> osu`; all print the same result lines or JSON, gathered into
// a CollReport. The test ddp (DDPTest) runs ddp_bench.py, DDP training
// steps of an MLP, on the torch systems. Every run's busy CPU share is in
// the report. Failed runs are in the report and make a RunsError.
package labbench
