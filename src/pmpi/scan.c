#include "pmpi/red_wrap.h"

int mcoll__wrap_scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                     MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_SCAN, comm);
  struct mcoll_red_type t;
  if (!c || !mcoll__red_args(MCOLL_COLL_SCAN, &t, type, op,
                             count >= 0 && mcoll__red_bufs_ok(sendbuf, recvbuf)))
    return MCOLL_HOST(Scan, Iscan, sendbuf, recvbuf, count, type, op, comm);
  return mcoll__red_return(comm, mcoll__scan(c, &t, sendbuf, recvbuf, (size_t)count, 0));
}
