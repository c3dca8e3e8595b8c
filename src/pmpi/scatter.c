#include "coll/scatter/scatter.h"
#include "pmpi/wrap.h"

static int scatter_run(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                             void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                             MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_SCATTER, comm);
  if (!c)
    return MCOLL_HOST(Scatter, Iscatter, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                      root, comm);
  int is_root = mcoll__root_valid(c, root) && c->rank == root;
  int in_place = is_root && recvbuf == MPI_IN_PLACE;
  struct mcoll_bytes recv;
  struct mcoll_blocks src;
  if (!mcoll__root_valid(c, root) ||
      (is_root && (sendcount < 0 || sendtype == MPI_DATATYPE_NULL ||
                   mcoll__blocks_describe(&src, (void *)sendbuf, c->size, sendcount, NULL, NULL,
                                          sendtype) != MPI_SUCCESS)) ||
      (!in_place && (recvbuf == MPI_IN_PLACE || recvcount < 0 || recvtype == MPI_DATATYPE_NULL ||
                     mcoll__bytes_of(recvbuf, recvcount, recvtype, &recv) != MPI_SUCCESS ||
                     (is_root && recv.bytes != mcoll__block_len(&src, root))))) {
    mcoll__count_invalid(MCOLL_COLL_SCATTER);
    return MCOLL_HOST(Scatter, Iscatter, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                      root, comm);
  }
  if (!in_place) mcoll__bytes_acquire(recvbuf, recvcount, recvtype, 0, &recv);
  struct mcoll_scatter_args a = {.src = is_root ? &src : NULL, .mine = in_place ? NULL : recv.ptr,
                                 .my_len = in_place ? mcoll__block_len(&src, root) : recv.bytes,
                                 .root = root, .v = 0};
  int err = mcoll__scatter(c, MCOLL_COLL_SCATTER, &a);
  if (!in_place) mcoll__bytes_release(&recv, recvbuf, recvcount, recvtype, err == MPI_SUCCESS);
  return err;
}

MCOLL_EXPORT int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                             void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                             MPI_Comm comm) {
  return scatter_run(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

/* MPI_Iscatter: the same body as a task (task/task.h). */
struct scatter_args {
  const void *sendbuf;
  int sendcount;
  MPI_Datatype sendtype;
  void *recvbuf;
  int recvcount;
  MPI_Datatype recvtype;
  int root;
  MPI_Comm comm;
};

static int scatter_task(const void *args) {
  const struct scatter_args *a = args;
  return scatter_run(a->sendbuf, a->sendcount, a->sendtype, a->recvbuf, a->recvcount, a->recvtype,
                     a->root, a->comm);
}

MCOLL_EXPORT int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                              void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                              MPI_Comm comm, MPI_Request *request) {
  if (!mcoll__nbc_on())
    return PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                         request);
  struct scatter_args a = {sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm};
  return mcoll__start(comm, scatter_task, &a, sizeof a, NULL, request);
}

#ifdef MCOLL_PERSISTENT
/* MPI_Scatter_init: the same task, built once and started by MPI_Start. */
MCOLL_EXPORT int MCOLL_PERSISTENT(Scatter_init)(const void *sendbuf, int sendcount,
                                                MPI_Datatype sendtype, void *recvbuf, int recvcount,
                                                MPI_Datatype recvtype, int root, MPI_Comm comm,
                                                MPI_Info info, MPI_Request *request) {
  if (!mcoll__nbc_on())
    return MCOLL_PERSISTENT_HOST(Scatter_init)(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                               recvtype, root, comm, info, request);
  struct scatter_args a = {sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm};
  return mcoll__persistent_init(comm, scatter_task, &a, sizeof a, NULL, request);
}
#endif
