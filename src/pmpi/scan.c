#include "pmpi/red_wrap.h"

static int scan_run(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                          MPI_Op op, MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_SCAN, comm);
  struct mcoll_red_type t;
  if (!c || !mcoll__red_args(MCOLL_COLL_SCAN, &t, type, op,
                             count >= 0 && mcoll__red_bufs_ok(sendbuf, recvbuf)))
    return MCOLL_HOST(Scan, Iscan, sendbuf, recvbuf, count, type, op, comm);
  return mcoll__red_return(comm, mcoll__scan(c, &t, sendbuf, recvbuf, (size_t)count, 0));
}

MCOLL_EXPORT int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                          MPI_Op op, MPI_Comm comm) {
  return scan_run(sendbuf, recvbuf, count, type, op, comm);
}

/* MPI_Iscan: the same body as a task (task/task.h). */
struct scan_args {
  const void *sendbuf;
  void *recvbuf;
  int count;
  MPI_Datatype type;
  MPI_Op op;
  MPI_Comm comm;
};

static int scan_task(const void *args) {
  const struct scan_args *a = args;
  return scan_run(a->sendbuf, a->recvbuf, a->count, a->type, a->op, a->comm);
}

MCOLL_EXPORT int MPI_Iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                           MPI_Op op, MPI_Comm comm, MPI_Request *request) {
  if (!mcoll__nbc_on()) return PMPI_Iscan(sendbuf, recvbuf, count, type, op, comm, request);
  struct scan_args a = {sendbuf, recvbuf, count, type, op, comm};
  return mcoll__start(comm, scan_task, &a, sizeof a, NULL, request);
}

#ifdef MCOLL_PERSISTENT
/* MPI_Scan_init: the same task, built once and started by MPI_Start. */
MCOLL_EXPORT int MCOLL_PERSISTENT(Scan_init)(const void *sendbuf, void *recvbuf, int count,
                                             MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                                             MPI_Info info, MPI_Request *request) {
  if (!mcoll__nbc_on())
    return MCOLL_PERSISTENT_HOST(Scan_init)(sendbuf, recvbuf, count, type, op, comm, info, request);
  struct scan_args a = {sendbuf, recvbuf, count, type, op, comm};
  return mcoll__persistent_init(comm, scan_task, &a, sizeof a, NULL, request);
}
#endif
