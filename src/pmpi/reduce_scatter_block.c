#include "pmpi/red_wrap.h"

static int reduce_scatter_block_run(const void *sendbuf, void *recvbuf, int recvcount,
                                          MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_REDUCE_SCATTER_BLOCK, comm);
  struct mcoll_red_type t;
  /* Blocks travel between leaders as one message of int count. */
  if (!c || !mcoll__red_args(MCOLL_COLL_REDUCE_SCATTER_BLOCK, &t, type, op,
                             recvcount >= 0 && (long)recvcount * c->size <= INT_MAX &&
                                 mcoll__red_bufs_ok(sendbuf, recvbuf)))
    return MCOLL_HOST(Reduce_scatter_block, Ireduce_scatter_block, sendbuf, recvbuf, recvcount,
                      type, op, comm);
  return mcoll__red_return(comm, mcoll__reduce_scatter(c, &t, sendbuf, recvbuf, NULL, recvcount));
}

MCOLL_EXPORT int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                          MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return reduce_scatter_block_run(sendbuf, recvbuf, recvcount, type, op, comm);
}

/* MPI_Ireduce_scatter_block: the same body as a task (task/task.h). */
struct reduce_scatter_block_args {
  const void *sendbuf;
  void *recvbuf;
  int recvcount;
  MPI_Datatype type;
  MPI_Op op;
  MPI_Comm comm;
};

static int reduce_scatter_block_task(const void *args) {
  const struct reduce_scatter_block_args *a = args;
  return reduce_scatter_block_run(a->sendbuf, a->recvbuf, a->recvcount, a->type, a->op, a->comm);
}

MCOLL_EXPORT int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                           MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                                           MPI_Request *request) {
  if (!mcoll__nbc_on())
    return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm, request);
  struct reduce_scatter_block_args a = {sendbuf, recvbuf, recvcount, type, op, comm};
  return mcoll__start(comm, reduce_scatter_block_task, &a, sizeof a, NULL, request);
}

#ifdef MCOLL_PERSISTENT
/* MPI_Reduce_scatter_block_init: the same task, built once and started by MPI_Start. */
MCOLL_EXPORT int MCOLL_PERSISTENT(Reduce_scatter_block_init)(const void *sendbuf, void *recvbuf,
    int recvcount, MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Info info,
    MPI_Request *request) {
  if (!mcoll__nbc_on())
    return MCOLL_PERSISTENT_HOST(Reduce_scatter_block_init)(sendbuf, recvbuf, recvcount, type, op,
                                                            comm, info, request);
  struct reduce_scatter_block_args a = {sendbuf, recvbuf, recvcount, type, op, comm};
  return mcoll__persistent_init(comm, reduce_scatter_block_task, &a, sizeof a, NULL, request);
}
#endif
