#include "pmpi/red_wrap.h"

int mcoll__wrap_allreduce(struct mcoll_comm *c, const void *sendbuf, void *recvbuf, int count,
                          MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  struct mcoll_red_type t;
  if (!mcoll__red_args(MCOLL_COLL_ALLREDUCE, &t, type, op,
                       count >= 0 && mcoll__red_bufs_ok(sendbuf, recvbuf)))
    return MCOLL_TO_HOST;
  return mcoll__red_return(comm, mcoll__allreduce(c, &t, sendbuf, recvbuf, (size_t)count));
}
