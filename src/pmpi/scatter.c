#include "coll/scatter/scatter.h"
#include "pmpi/wrap.h"

/* MPI_Scatter (v 0: sendcount elements to every rank) and MPI_Scatterv (v 1:
 * sendcounts and displs, the root's only): one body over the root's send blocks. */
MCOLL_SHARED_BODY int scatter(struct mcoll_comm *c, enum mcoll_coll coll, int v,
                              const void *sendbuf, int sendcount, const int *sendcounts,
                              const int *displs, MPI_Datatype sendtype, void *recvbuf,
                              int recvcount, MPI_Datatype recvtype, int root) {
  int is_root = mcoll__root_valid(c, root) && c->rank == root;
  int in_place = is_root && recvbuf == MPI_IN_PLACE;
  struct mcoll_bytes recv;
  struct mcoll_blocks src;
  if (!mcoll__root_valid(c, root) ||
      (is_root && ((v ? !mcoll__counts_valid(sendcounts, displs, c->size) : sendcount < 0) ||
                   sendtype == MPI_DATATYPE_NULL ||
                   mcoll__blocks_describe(&src, (void *)sendbuf, c->size, sendcount, sendcounts,
                                          displs, sendtype) != MPI_SUCCESS)) ||
      (!in_place && (recvbuf == MPI_IN_PLACE || recvcount < 0 || recvtype == MPI_DATATYPE_NULL ||
                     mcoll__bytes_of(recvbuf, recvcount, recvtype, &recv) != MPI_SUCCESS ||
                     (is_root && recv.bytes != mcoll__block_len(&src, root)))))
    return mcoll__invalid(coll);
  if (!in_place) mcoll__bytes_pack(recvbuf, recvcount, recvtype, 0, &recv);
  struct mcoll_scatter_args a = {.src = is_root ? &src : NULL, .mine = in_place ? NULL : recv.ptr,
                                 .my_len = in_place ? mcoll__block_len(&src, root) : recv.bytes,
                                 .root = root, .v = v};
  int err = mcoll__scatter(c, coll, &a);
  if (!in_place) mcoll__bytes_release(&recv, recvbuf, recvcount, recvtype, err == MPI_SUCCESS);
  return err;
}

int mcoll__wrap_scatter(struct mcoll_comm *c, const void *sendbuf, int sendcount,
                        MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                        int root, MPI_Comm comm) {
  (void)comm;
  return scatter(c, MCOLL_COLL_SCATTER, 0, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf,
                 recvcount, recvtype, root);
}

int mcoll__wrap_scatterv(struct mcoll_comm *c, const void *sendbuf, const int sendcounts[],
                         const int displs[], MPI_Datatype sendtype, void *recvbuf, int recvcount,
                         MPI_Datatype recvtype, int root, MPI_Comm comm) {
  (void)comm;
  return scatter(c, MCOLL_COLL_SCATTERV, 1, sendbuf, 0, sendcounts, displs, sendtype, recvbuf,
                 recvcount, recvtype, root);
}
