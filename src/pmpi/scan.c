#include "pmpi/red_wrap.h"

/* MPI_Scan and MPI_Exscan (exclusive): one body. */
MCOLL_SHARED_BODY int scan(struct mcoll_comm *c, enum mcoll_coll coll, int exclusive,
                           const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                           MPI_Op op, MPI_Comm comm) {
  struct mcoll_red_type t;
  if (!mcoll__red_args(coll, &t, type, op, count >= 0 && mcoll__red_bufs_ok(sendbuf, recvbuf)))
    return MCOLL_TO_HOST;
  return mcoll__red_return(comm, mcoll__scan(c, &t, sendbuf, recvbuf, (size_t)count, exclusive));
}

int mcoll__wrap_scan(struct mcoll_comm *c, const void *sendbuf, void *recvbuf, int count,
                     MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return scan(c, MCOLL_COLL_SCAN, 0, sendbuf, recvbuf, count, type, op, comm);
}

int mcoll__wrap_exscan(struct mcoll_comm *c, const void *sendbuf, void *recvbuf, int count,
                       MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return scan(c, MCOLL_COLL_EXSCAN, 1, sendbuf, recvbuf, count, type, op, comm);
}
