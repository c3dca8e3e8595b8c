#include "coll/barrier/barrier.h"
#include "pmpi/wrap.h"

int mcoll__wrap_barrier(MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_BARRIER, comm);
  if (!c) return MCOLL_HOST(Barrier, Ibarrier, comm);
  return mcoll__barrier(c);
}
