#include "pmpi/red_wrap.h"

int mcoll__wrap_reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                               MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_REDUCE_SCATTER, comm);
  struct mcoll_red_type t;
  int counts_ok = c && recvcounts != NULL;
  long total = 0;
  for (int r = 0; counts_ok && r < c->size; r++) {
    counts_ok = recvcounts[r] >= 0;
    total += recvcounts[r];
  }
  /* Blocks travel between leaders as one message of int count. */
  if (!c || !mcoll__red_args(MCOLL_COLL_REDUCE_SCATTER, &t, type, op,
                             counts_ok && total <= INT_MAX &&
                                 mcoll__red_bufs_ok(sendbuf, recvbuf)))
    return MCOLL_HOST(Reduce_scatter, Ireduce_scatter, sendbuf, recvbuf, recvcounts, type, op,
                      comm);
  return mcoll__red_return(comm, mcoll__reduce_scatter(c, &t, sendbuf, recvbuf, recvcounts, 0));
}
