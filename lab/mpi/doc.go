// Package mpi runs Open MPI across the namespaces of a lab: the sources of
// mrbw, a small MPI bandwidth program measured at the receiver, and of
// mrosu, the OSU-style benchmarks of `multirail osu` (latency, bw, bibw and
// the collectives among N hosts) measured exactly as comm/osu measures the
// communicator; their builds with mpicc into a cache; their mpirun command
// lines (Args for mrbw's two hosts, CollArgs for mrosu's N); and the
// parsing of their output (ParseLine, ParseOSULine).
//
// What the caller must do: check Available, Build (BuildOSU) the program
// once, run the command of Args (CollArgs) in rank 0's namespace inside a
// UTS namespace whose host name is that namespace's name (see Args), with
// OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 when root
// (Env), and give it an rsh agent that runs commands in the other
// namespaces (multirail lab rsh).
package mpi
