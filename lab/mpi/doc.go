// Package mpi runs Open MPI across the namespaces of a lab: the source of
// mrbw, a small MPI bandwidth program measured at the receiver, its build
// with mpicc into a cache, the mpirun command line, and the parsing of
// mrbw's output.
//
// What the caller must do: check Available, Build the program once, run
// the command of Args in side A's namespace inside a UTS namespace whose
// host name is A's namespace name (see Args), with
// OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 when root,
// and give it an rsh agent that runs commands in B's namespace (multirail
// lab rsh).
package mpi
