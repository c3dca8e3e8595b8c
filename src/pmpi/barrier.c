#include "coll/barrier/barrier.h"
#include "pmpi/wrap.h"

static int barrier_run(MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_BARRIER, comm);
  if (!c) return MCOLL_HOST(Barrier, Ibarrier, comm);
  return mcoll__barrier(c);
}

MCOLL_EXPORT int MPI_Barrier(MPI_Comm comm) {
  return barrier_run(comm);
}

/* MPI_Ibarrier: the same body as a task (task/task.h). */
struct barrier_args {
  MPI_Comm comm;
};

static int barrier_task(const void *args) {
  const struct barrier_args *a = args;
  return barrier_run(a->comm);
}

MCOLL_EXPORT int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request) {
  if (!mcoll__nbc_on()) return PMPI_Ibarrier(comm, request);
  struct barrier_args a = {comm};
  return mcoll__start(comm, barrier_task, &a, sizeof a, NULL, request);
}

#ifdef MCOLL_PERSISTENT
/* MPI_Barrier_init: the same task, built once and started by MPI_Start. */
MCOLL_EXPORT int MCOLL_PERSISTENT(Barrier_init)(MPI_Comm comm, MPI_Info info,
                                                MPI_Request *request) {
  if (!mcoll__nbc_on()) return MCOLL_PERSISTENT_HOST(Barrier_init)(comm, info, request);
  struct barrier_args a = {comm};
  return mcoll__persistent_init(comm, barrier_task, &a, sizeof a, NULL, request);
}
#endif
