#include "coll/barrier/barrier.h"
#include "pmpi/wrap.h"

MCOLL_EXPORT int MPI_Barrier(MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_BARRIER, comm);
  if (!c) return PMPI_Barrier(comm);
  return mcoll__barrier(c);
}
