/* Allocation that cannot fail quietly: out of memory aborts the job with a message,
 * as the host MPI does when its own internal allocations fail. */
#ifndef MCOLL_XMALLOC_H
#define MCOLL_XMALLOC_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static inline void *mcoll__xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "mcoll: out of memory (%zu bytes)\n", bytes);
    PMPI_Abort(MPI_COMM_WORLD, 1);
  }
  return p;
}

#endif
