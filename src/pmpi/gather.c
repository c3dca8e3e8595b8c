#include "coll/gather/gather.h"
#include "pmpi/wrap.h"

/* MPI_Gather (v 0: recvcount elements from every rank) and MPI_Gatherv (v 1:
 * recvcounts and displs, the root's only): one body over the root's receive blocks. */
MCOLL_SHARED_BODY int gather(struct mcoll_comm *c, enum mcoll_coll coll, int v, const void *sendbuf,
                             int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                             const int *recvcounts, const int *displs, MPI_Datatype recvtype,
                             int root) {
  int is_root = mcoll__root_valid(c, root) && c->rank == root;
  int in_place = is_root && sendbuf == MPI_IN_PLACE;
  struct mcoll_bytes send;
  struct mcoll_blocks dst;
  if (!mcoll__root_valid(c, root) ||
      (is_root && ((v ? !mcoll__counts_valid(recvcounts, displs, c->size) : recvcount < 0) ||
                   recvtype == MPI_DATATYPE_NULL ||
                   mcoll__blocks_describe(&dst, recvbuf, c->size, recvcount, recvcounts, displs,
                                          recvtype) != MPI_SUCCESS)) ||
      (!in_place && (sendbuf == MPI_IN_PLACE || sendcount < 0 || sendtype == MPI_DATATYPE_NULL ||
                     mcoll__bytes_of(sendbuf, sendcount, sendtype, &send) != MPI_SUCCESS ||
                     (is_root && send.bytes != mcoll__block_len(&dst, root)))))
    return mcoll__invalid(coll);
  if (!in_place) mcoll__bytes_pack(sendbuf, sendcount, sendtype, 1, &send);
  struct mcoll_gather_args a = {.mine = in_place ? NULL : send.ptr,
                                .my_len = in_place ? mcoll__block_len(&dst, root) : send.bytes,
                                .dst = is_root ? &dst : NULL, .root = root, .v = v};
  int err = mcoll__gather(c, coll, &a);
  if (!in_place) mcoll__bytes_release(&send, NULL, sendcount, sendtype, 0);
  return err;
}

int mcoll__wrap_gather(struct mcoll_comm *c, const void *sendbuf, int sendcount,
                       MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                       int root, MPI_Comm comm) {
  (void)comm;
  return gather(c, MCOLL_COLL_GATHER, 0, sendbuf, sendcount, sendtype, recvbuf, recvcount, NULL,
                NULL, recvtype, root);
}

int mcoll__wrap_gatherv(struct mcoll_comm *c, const void *sendbuf, int sendcount,
                        MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                        const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm) {
  (void)comm;
  return gather(c, MCOLL_COLL_GATHERV, 1, sendbuf, sendcount, sendtype, recvbuf, 0, recvcounts,
                displs, recvtype, root);
}
