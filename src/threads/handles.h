/* How the runtime's own handles (communicators, requests) are encoded, and how the
 * size of a predefined basic type is read: the only parts of the runtime that depend
 * on the host flavour's handle representation (MPICH: integers; Open MPI: addresses of
 * library objects). */
#ifndef MCOLL_THREADS_HANDLES_H
#define MCOLL_THREADS_HANDLES_H

#include <mpi.h>

#if defined(MPICH_VERSION)
#include "handles_mpich.h"
#elif defined(OMPI_MAJOR_VERSION)
#include "handles_openmpi.h"
#else
#error "thread ranks: no handle encoding for this MPI flavour (MPICH and Open MPI only)"
#endif

#endif
