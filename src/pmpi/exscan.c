#include "pmpi/red_wrap.h"

static int exscan_run(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                            MPI_Op op, MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_EXSCAN, comm);
  struct mcoll_red_type t;
  if (!c || !mcoll__red_args(MCOLL_COLL_EXSCAN, &t, type, op,
                             count >= 0 && mcoll__red_bufs_ok(sendbuf, recvbuf)))
    return MCOLL_HOST(Exscan, Iexscan, sendbuf, recvbuf, count, type, op, comm);
  return mcoll__red_return(comm, mcoll__scan(c, &t, sendbuf, recvbuf, (size_t)count, 1));
}

MCOLL_EXPORT int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                            MPI_Op op, MPI_Comm comm) {
  return exscan_run(sendbuf, recvbuf, count, type, op, comm);
}

/* MPI_Iexscan: the same body as a task (task/task.h). */
struct exscan_args {
  const void *sendbuf;
  void *recvbuf;
  int count;
  MPI_Datatype type;
  MPI_Op op;
  MPI_Comm comm;
};

static int exscan_task(const void *args) {
  const struct exscan_args *a = args;
  return exscan_run(a->sendbuf, a->recvbuf, a->count, a->type, a->op, a->comm);
}

MCOLL_EXPORT int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                             MPI_Op op, MPI_Comm comm, MPI_Request *request) {
  if (!mcoll__nbc_on()) return PMPI_Iexscan(sendbuf, recvbuf, count, type, op, comm, request);
  struct exscan_args a = {sendbuf, recvbuf, count, type, op, comm};
  return mcoll__start(comm, exscan_task, &a, sizeof a, NULL, request);
}

#ifdef MCOLL_PERSISTENT
/* MPI_Exscan_init: the same task, built once and started by MPI_Start. */
MCOLL_EXPORT int MCOLL_PERSISTENT(Exscan_init)(const void *sendbuf, void *recvbuf, int count,
                                               MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                                               MPI_Info info, MPI_Request *request) {
  if (!mcoll__nbc_on())
    return MCOLL_PERSISTENT_HOST(Exscan_init)(sendbuf, recvbuf, count, type, op, comm, info,
                                              request);
  struct exscan_args a = {sendbuf, recvbuf, count, type, op, comm};
  return mcoll__persistent_init(comm, exscan_task, &a, sizeof a, NULL, request);
}
#endif
