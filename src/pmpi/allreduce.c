#include "pmpi/red_wrap.h"
#include "tnbc/entry.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static int allreduce_run(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                               MPI_Op op, MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_ALLREDUCE, comm);
  struct mcoll_red_type t;
  if (!c || !mcoll__red_args(MCOLL_COLL_ALLREDUCE, &t, type, op,
                             count >= 0 && mcoll__red_bufs_ok(sendbuf, recvbuf)))
    return MCOLL_HOST(Allreduce, Iallreduce, sendbuf, recvbuf, count, type, op, comm);
  return mcoll__red_return(comm, mcoll__allreduce(c, &t, sendbuf, recvbuf, (size_t)count));
}

static int allreduce_task(const void *args);

MCOLL_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                               MPI_Op op, MPI_Comm comm) {
  int err;
  if (mcoll__tnbc_active && MCOLL_TNBC_ENTER("allreduce") &&
      mcoll__tnbc_allreduce(sendbuf, recvbuf, count, type, op, comm, allreduce_task, &err))
    return err;
  return allreduce_run(sendbuf, recvbuf, count, type, op, comm);
}

/* MPI_Iallreduce: the same body as a task (task/task.h). */
static int allreduce_task(const void *args) {
  const struct mcoll_mpi_allreduce_args *a = args;
  return allreduce_run(a->sendbuf, a->recvbuf, a->count, a->type, a->op, a->comm);
}

MCOLL_EXPORT int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                                MPI_Op op, MPI_Comm comm, MPI_Request *request) {
  if (!mcoll__nbc_on(comm))
    return PMPI_Iallreduce(sendbuf, recvbuf, count, type, op, comm, request);
  struct mcoll_mpi_allreduce_args a = {sendbuf, recvbuf, count, type, op, comm};
  return mcoll__start(comm, allreduce_task, &a, sizeof a, NULL, request);
}

#ifdef MCOLL_PERSISTENT
/* MPI_Allreduce_init: the same task, built once and started by MPI_Start. */
MCOLL_EXPORT int MCOLL_PERSISTENT(Allreduce_init)(const void *sendbuf, void *recvbuf, int count,
                                                  MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                                                  MPI_Info info, MPI_Request *request) {
  int nbc = mcoll__nbc_on(comm);
  MPI_Request host; /* (the host's init checks the arguments, or is the whole call) */
  int err = MCOLL_PERSISTENT_HOST(Allreduce_init)(sendbuf, recvbuf, count, type, op, comm, info,
                                                  nbc ? &host : request);
  if (!nbc) return err;
  struct mcoll_mpi_allreduce_args a = {sendbuf, recvbuf, count, type, op, comm};
  return mcoll__persistent_make(err, &host, allreduce_task, &a, sizeof a,
                                offsetof(struct mcoll_mpi_allreduce_args, comm), NULL, request);
}
#endif
