#include "pmpi/red_wrap.h"

static int reduce_scatter_run(const void *sendbuf, void *recvbuf, const int recvcounts[],
                                    MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_REDUCE_SCATTER, comm);
  struct mcoll_red_type t;
  int counts_ok = c && recvcounts != NULL;
  long total = 0;
  for (int r = 0; counts_ok && r < c->size; r++) {
    counts_ok = recvcounts[r] >= 0;
    total += recvcounts[r];
  }
  /* Blocks travel between leaders as one message of int count. */
  if (!c || !mcoll__red_args(MCOLL_COLL_REDUCE_SCATTER, &t, type, op,
                             counts_ok && total <= INT_MAX &&
                                 mcoll__red_bufs_ok(sendbuf, recvbuf)))
    return MCOLL_HOST(Reduce_scatter, Ireduce_scatter, sendbuf, recvbuf, recvcounts, type, op,
                      comm);
  return mcoll__red_return(comm, mcoll__reduce_scatter(c, &t, sendbuf, recvbuf, recvcounts, 0));
}

MCOLL_EXPORT int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                                    MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return reduce_scatter_run(sendbuf, recvbuf, recvcounts, type, op, comm);
}

/* MPI_Ireduce_scatter: the same body as a task (task/task.h). */
struct reduce_scatter_args {
  const void *sendbuf;
  void *recvbuf;
  const int *recvcounts;
  MPI_Datatype type;
  MPI_Op op;
  MPI_Comm comm;
};

static int reduce_scatter_task(const void *args) {
  const struct reduce_scatter_args *a = args;
  return reduce_scatter_run(a->sendbuf, a->recvbuf, a->recvcounts, a->type, a->op, a->comm);
}

/* The call's arrays, copied when it starts (see task/task.h); the same for MPI_Ireduce_scatter and
 * its persistent form. */
static void keep_arrays(struct reduce_scatter_args *a, struct mcoll_task_keep *keep) {
  size_t entries = (size_t)mcoll__array_entries(a->comm);
  a->recvcounts = mcoll__task_keep(keep, a->recvcounts, entries * sizeof(*a->recvcounts));
}

MCOLL_EXPORT int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                                     MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                                     MPI_Request *request) {
  if (!mcoll__nbc_on(comm))
    return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm, request);
  struct reduce_scatter_args a = {sendbuf, recvbuf, recvcounts, type, op, comm};
  struct mcoll_task_keep keep = {.n = 0};
  keep_arrays(&a, &keep);
  return mcoll__start(comm, reduce_scatter_task, &a, sizeof a, &keep, request);
}

#ifdef MCOLL_PERSISTENT
/* MPI_Reduce_scatter_init: the same task, built once and started by MPI_Start. */
MCOLL_EXPORT int MCOLL_PERSISTENT(Reduce_scatter_init)(const void *sendbuf, void *recvbuf,
                                                       const int recvcounts[], MPI_Datatype type,
                                                       MPI_Op op, MPI_Comm comm, MPI_Info info,
                                                       MPI_Request *request) {
  int nbc = mcoll__nbc_on(comm);
  MPI_Request host; /* (the host's init checks the arguments, or is the whole call) */
  int err = MCOLL_PERSISTENT_HOST(Reduce_scatter_init)(sendbuf, recvbuf, recvcounts, type, op, comm,
                                                       info, nbc ? &host : request);
  if (!nbc) return err;
  struct reduce_scatter_args a = {sendbuf, recvbuf, recvcounts, type, op, comm};
  struct mcoll_task_keep keep = {.n = 0};
  keep_arrays(&a, &keep);
  return mcoll__persistent_make(err, &host, reduce_scatter_task, &a, sizeof a,
                                offsetof(struct reduce_scatter_args, comm), &keep, request);
}
#endif
