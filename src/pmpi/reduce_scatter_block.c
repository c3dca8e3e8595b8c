#include "pmpi/red_wrap.h"

int mcoll__wrap_reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                     MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_REDUCE_SCATTER_BLOCK, comm);
  struct mcoll_red_type t;
  /* Blocks travel between leaders as one message of int count. */
  if (!c || !mcoll__red_args(MCOLL_COLL_REDUCE_SCATTER_BLOCK, &t, type, op,
                             recvcount >= 0 && (long)recvcount * c->size <= INT_MAX &&
                                 mcoll__red_bufs_ok(sendbuf, recvbuf)))
    return MCOLL_HOST(Reduce_scatter_block, Ireduce_scatter_block, sendbuf, recvbuf, recvcount,
                      type, op, comm);
  return mcoll__red_return(comm, mcoll__reduce_scatter(c, &t, sendbuf, recvbuf, NULL, recvcount));
}
