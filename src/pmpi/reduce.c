#include "pmpi/red_wrap.h"

static int reduce_run(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                            MPI_Op op, int root, MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_REDUCE, comm);
  struct mcoll_red_type t;
  /* MPI_IN_PLACE is the root's only; the receive buffer matters at the root only. */
  if (!c || !mcoll__red_args(MCOLL_COLL_REDUCE, &t, type, op,
                             count >= 0 && mcoll__root_valid(c, root) &&
                                 (c->rank == root ? mcoll__red_bufs_ok(sendbuf, recvbuf)
                                                  : sendbuf != MPI_IN_PLACE)))
    return MCOLL_HOST(Reduce, Ireduce, sendbuf, recvbuf, count, type, op, root, comm);
  return mcoll__red_return(comm, mcoll__reduce(c, &t, sendbuf, recvbuf, (size_t)count, root));
}

MCOLL_EXPORT int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                            MPI_Op op, int root, MPI_Comm comm) {
  return reduce_run(sendbuf, recvbuf, count, type, op, root, comm);
}

/* MPI_Ireduce: the same body as a task (task/task.h). */
struct reduce_args {
  const void *sendbuf;
  void *recvbuf;
  int count;
  MPI_Datatype type;
  MPI_Op op;
  int root;
  MPI_Comm comm;
};

static int reduce_task(const void *args) {
  const struct reduce_args *a = args;
  return reduce_run(a->sendbuf, a->recvbuf, a->count, a->type, a->op, a->root, a->comm);
}

MCOLL_EXPORT int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                             MPI_Op op, int root, MPI_Comm comm, MPI_Request *request) {
  if (!mcoll__nbc_on()) return PMPI_Ireduce(sendbuf, recvbuf, count, type, op, root, comm, request);
  struct reduce_args a = {sendbuf, recvbuf, count, type, op, root, comm};
  return mcoll__start(comm, reduce_task, &a, sizeof a, NULL, request);
}

#ifdef MCOLL_PERSISTENT
/* MPI_Reduce_init: the same task, built once and started by MPI_Start. */
MCOLL_EXPORT int MCOLL_PERSISTENT(Reduce_init)(const void *sendbuf, void *recvbuf, int count,
                                               MPI_Datatype type, MPI_Op op, int root,
                                               MPI_Comm comm, MPI_Info info, MPI_Request *request) {
  if (!mcoll__nbc_on())
    return MCOLL_PERSISTENT_HOST(Reduce_init)(sendbuf, recvbuf, count, type, op, root, comm, info,
                                              request);
  struct reduce_args a = {sendbuf, recvbuf, count, type, op, root, comm};
  return mcoll__persistent_init(comm, reduce_task, &a, sizeof a, NULL, request);
}
#endif
