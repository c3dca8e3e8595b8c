#include "coll/gather/gather.h"
#include "pmpi/wrap.h"

int mcoll__wrap_gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                       int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_GATHER, comm);
  if (!c)
    return MCOLL_HOST(Gather, Igather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                      root, comm);
  int is_root = mcoll__root_valid(c, root) && c->rank == root;
  int in_place = is_root && sendbuf == MPI_IN_PLACE;
  struct mcoll_bytes send;
  struct mcoll_blocks dst;
  if (!mcoll__root_valid(c, root) ||
      (is_root && (recvcount < 0 || recvtype == MPI_DATATYPE_NULL ||
                   mcoll__blocks_describe(&dst, recvbuf, c->size, recvcount, NULL, NULL,
                                          recvtype) != MPI_SUCCESS)) ||
      (!in_place && (sendbuf == MPI_IN_PLACE || sendcount < 0 || sendtype == MPI_DATATYPE_NULL ||
                     mcoll__bytes_of(sendbuf, sendcount, sendtype, &send) != MPI_SUCCESS ||
                     (is_root && send.bytes != mcoll__block_len(&dst, root))))) {
    mcoll__count_invalid(MCOLL_COLL_GATHER);
    return MCOLL_HOST(Gather, Igather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                      root, comm);
  }
  if (!in_place) mcoll__bytes_acquire(sendbuf, sendcount, sendtype, 1, &send);
  struct mcoll_gather_args a = {.mine = in_place ? NULL : send.ptr,
                                .my_len = in_place ? mcoll__block_len(&dst, root) : send.bytes,
                                .dst = is_root ? &dst : NULL, .root = root, .v = 0};
  int err = mcoll__gather(c, MCOLL_COLL_GATHER, &a);
  if (!in_place) mcoll__bytes_release(&send, NULL, sendcount, sendtype, 0);
  return err;
}
