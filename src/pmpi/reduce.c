#include "pmpi/red_wrap.h"

int mcoll__wrap_reduce(struct mcoll_comm *c, const void *sendbuf, void *recvbuf, int count,
                       MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
  struct mcoll_red_type t;
  /* MPI_IN_PLACE is the root's only; the receive buffer matters at the root only. */
  if (!mcoll__red_args(MCOLL_COLL_REDUCE, &t, type, op,
                       count >= 0 && mcoll__root_valid(c, root) &&
                           (c->rank == root ? mcoll__red_bufs_ok(sendbuf, recvbuf)
                                            : sendbuf != MPI_IN_PLACE)))
    return MCOLL_TO_HOST;
  return mcoll__red_return(comm, mcoll__reduce(c, &t, sendbuf, recvbuf, (size_t)count, root));
}
