#include "coll/allgather/allgather.h"
#include "pmpi/wrap.h"

/* MPI_Allgather (v 0: recvcount elements from every rank) and MPI_Allgatherv (v 1:
 * recvcounts and displs): one body over the receive blocks they describe. */
MCOLL_SHARED_BODY int allgather(struct mcoll_comm *c, enum mcoll_coll coll, int v,
                                const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                void *recvbuf, int recvcount, const int *recvcounts,
                                const int *displs, MPI_Datatype recvtype) {
  int in_place = sendbuf == MPI_IN_PLACE;
  struct mcoll_bytes send;
  struct mcoll_blocks dst;
  if (mcoll__bufs_aliased(sendbuf, recvbuf) ||
      (v ? !mcoll__counts_valid(recvcounts, displs, c->size) : recvcount < 0) ||
      recvtype == MPI_DATATYPE_NULL ||
      mcoll__blocks_describe(&dst, recvbuf, c->size, recvcount, recvcounts, displs, recvtype) !=
          MPI_SUCCESS ||
      (!in_place && (sendcount < 0 || sendtype == MPI_DATATYPE_NULL ||
                     mcoll__bytes_of(sendbuf, sendcount, sendtype, &send) != MPI_SUCCESS ||
                     send.bytes != mcoll__block_len(&dst, c->rank))))
    return mcoll__invalid(coll);
  if (!in_place) mcoll__bytes_pack(sendbuf, sendcount, sendtype, 1, &send);
  int err = mcoll__allgather(c, coll, in_place ? NULL : send.ptr, mcoll__block_len(&dst, c->rank),
                             &dst);
  if (!in_place) mcoll__bytes_release(&send, NULL, sendcount, sendtype, 0);
  return err;
}

int mcoll__wrap_allgather(struct mcoll_comm *c, const void *sendbuf, int sendcount,
                          MPI_Datatype sendtype, void *recvbuf, int recvcount,
                          MPI_Datatype recvtype, MPI_Comm comm) {
  (void)comm;
  return allgather(c, MCOLL_COLL_ALLGATHER, 0, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                   NULL, NULL, recvtype);
}

int mcoll__wrap_allgatherv(struct mcoll_comm *c, const void *sendbuf, int sendcount,
                           MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                           const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  (void)comm;
  return allgather(c, MCOLL_COLL_ALLGATHERV, 1, sendbuf, sendcount, sendtype, recvbuf, 0,
                   recvcounts, displs, recvtype);
}
