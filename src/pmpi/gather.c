#include "coll/gather/gather.h"
#include "pmpi/wrap.h"

static int gather_run(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                            void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                            MPI_Comm comm) {
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

MCOLL_EXPORT int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                            void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                            MPI_Comm comm) {
  return gather_run(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

/* MPI_Igather: the same body as a task (task/task.h). */
struct gather_args {
  const void *sendbuf;
  int sendcount;
  MPI_Datatype sendtype;
  void *recvbuf;
  int recvcount;
  MPI_Datatype recvtype;
  int root;
  MPI_Comm comm;
};

static int gather_task(const void *args) {
  const struct gather_args *a = args;
  return gather_run(a->sendbuf, a->sendcount, a->sendtype, a->recvbuf, a->recvcount, a->recvtype,
                    a->root, a->comm);
}

MCOLL_EXPORT int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                             void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                             MPI_Comm comm, MPI_Request *request) {
  if (!mcoll__nbc_on())
    return PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                        request);
  struct gather_args a = {sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm};
  return mcoll__start(comm, gather_task, &a, sizeof a, NULL, request);
}

#ifdef MCOLL_PERSISTENT
/* MPI_Gather_init: the same task, built once and started by MPI_Start. */
MCOLL_EXPORT int MCOLL_PERSISTENT(Gather_init)(const void *sendbuf, int sendcount,
                                               MPI_Datatype sendtype, void *recvbuf, int recvcount,
                                               MPI_Datatype recvtype, int root, MPI_Comm comm,
                                               MPI_Info info, MPI_Request *request) {
  if (!mcoll__nbc_on())
    return MCOLL_PERSISTENT_HOST(Gather_init)(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                              recvtype, root, comm, info, request);
  struct gather_args a = {sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm};
  return mcoll__persistent_init(comm, gather_task, &a, sizeof a, NULL, request);
}
#endif
