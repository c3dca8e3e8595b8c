#include "pmpi/red_wrap.h"

/* MPI_Reduce_scatter (recvcounts) and MPI_Reduce_scatter_block (recvcount to every
 * rank). Blocks travel between leaders as one message of int count. */
int mcoll__wrap_reduce_scatter(struct mcoll_comm *c, const void *sendbuf, void *recvbuf,
                               const int recvcounts[], MPI_Datatype type, MPI_Op op,
                               MPI_Comm comm) {
  struct mcoll_red_type t;
  int counts_ok = recvcounts != NULL;
  long total = 0;
  for (int r = 0; counts_ok && r < c->size; r++) {
    counts_ok = recvcounts[r] >= 0;
    total += recvcounts[r];
  }
  if (!mcoll__red_args(MCOLL_COLL_REDUCE_SCATTER, &t, type, op,
                       counts_ok && total <= INT_MAX && mcoll__red_bufs_ok(sendbuf, recvbuf)))
    return MCOLL_TO_HOST;
  return mcoll__red_return(comm, mcoll__reduce_scatter(c, &t, sendbuf, recvbuf, recvcounts, 0));
}

int mcoll__wrap_reduce_scatter_block(struct mcoll_comm *c, const void *sendbuf, void *recvbuf,
                                     int recvcount, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  struct mcoll_red_type t;
  if (!mcoll__red_args(MCOLL_COLL_REDUCE_SCATTER_BLOCK, &t, type, op,
                       recvcount >= 0 && (long)recvcount * c->size <= INT_MAX &&
                           mcoll__red_bufs_ok(sendbuf, recvbuf)))
    return MCOLL_TO_HOST;
  return mcoll__red_return(comm, mcoll__reduce_scatter(c, &t, sendbuf, recvbuf, NULL, recvcount));
}
