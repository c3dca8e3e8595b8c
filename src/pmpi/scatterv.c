#include "coll/scatter/scatter.h"
#include "pmpi/wrap.h"

static int counts_valid(const int *counts, const int *displs, int n) {
  if (!counts || !displs) return 0;
  for (int r = 0; r < n; r++)
    if (counts[r] < 0) return 0;
  return 1;
}

int mcoll__wrap_scatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                         MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                         int root, MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_SCATTERV, comm);
  if (!c)
    return MCOLL_HOST(Scatterv, Iscatterv, sendbuf, sendcounts, displs, sendtype, recvbuf,
                      recvcount, recvtype,
                         root, comm);
  int is_root = mcoll__root_valid(c, root) && c->rank == root;
  int in_place = is_root && recvbuf == MPI_IN_PLACE;
  struct mcoll_bytes recv;
  struct mcoll_blocks src;
  if (!mcoll__root_valid(c, root) ||
      (is_root && (!counts_valid(sendcounts, displs, c->size) || sendtype == MPI_DATATYPE_NULL ||
                   mcoll__blocks_describe(&src, (void *)sendbuf, c->size, 0, sendcounts, displs,
                                          sendtype) != MPI_SUCCESS)) ||
      (!in_place && (recvbuf == MPI_IN_PLACE || recvcount < 0 || recvtype == MPI_DATATYPE_NULL ||
                     mcoll__bytes_of(recvbuf, recvcount, recvtype, &recv) != MPI_SUCCESS ||
                     (is_root && recv.bytes != mcoll__block_len(&src, root))))) {
    mcoll__count_invalid(MCOLL_COLL_SCATTERV);
    return MCOLL_HOST(Scatterv, Iscatterv, sendbuf, sendcounts, displs, sendtype, recvbuf,
                      recvcount, recvtype,
                         root, comm);
  }
  if (!in_place) mcoll__bytes_acquire(recvbuf, recvcount, recvtype, 0, &recv);
  struct mcoll_scatter_args a = {.src = is_root ? &src : NULL, .mine = in_place ? NULL : recv.ptr,
                                 .my_len = in_place ? mcoll__block_len(&src, root) : recv.bytes,
                                 .root = root, .v = 1};
  int err = mcoll__scatter(c, MCOLL_COLL_SCATTERV, &a);
  if (!in_place) mcoll__bytes_release(&recv, recvbuf, recvcount, recvtype, err == MPI_SUCCESS);
  return err;
}
