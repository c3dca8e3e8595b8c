#include "coll/allgather/allgather.h"
#include "pmpi/wrap.h"
#include "tnbc/entry.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static int counts_valid(const int *counts, const int *displs, int n) {
  if (!counts || !displs) return 0;
  for (int r = 0; r < n; r++)
    if (counts[r] < 0) return 0;
  return 1;
}

static int allgatherv_run(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                void *recvbuf, const int recvcounts[], const int displs[],
                                MPI_Datatype recvtype, MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_ALLGATHERV, comm);
  if (!c)
    return MCOLL_HOST(Allgatherv, Iallgatherv, sendbuf, sendcount, sendtype, recvbuf, recvcounts,
                      displs, recvtype,
                           comm);
  int in_place = sendbuf == MPI_IN_PLACE;
  struct mcoll_bytes send;
  struct mcoll_blocks dst;
  if (mcoll__bufs_aliased(sendbuf, recvbuf) || !counts_valid(recvcounts, displs, c->size) ||
      recvtype == MPI_DATATYPE_NULL ||
      mcoll__blocks_describe(&dst, recvbuf, c->size, 0, recvcounts, displs, recvtype) !=
          MPI_SUCCESS ||
      (!in_place && (sendcount < 0 || sendtype == MPI_DATATYPE_NULL ||
                     mcoll__bytes_of(sendbuf, sendcount, sendtype, &send) != MPI_SUCCESS ||
                     send.bytes != mcoll__block_len(&dst, c->rank)))) {
    mcoll__count_invalid(MCOLL_COLL_ALLGATHERV);
    return MCOLL_HOST(Allgatherv, Iallgatherv, sendbuf, sendcount, sendtype, recvbuf, recvcounts,
                      displs, recvtype,
                           comm);
  }
  if (!in_place) mcoll__bytes_acquire(sendbuf, sendcount, sendtype, 1, &send);
  int err = mcoll__allgather(c, MCOLL_COLL_ALLGATHERV, in_place ? NULL : send.ptr,
                             mcoll__block_len(&dst, c->rank), &dst);
  if (!in_place) mcoll__bytes_release(&send, NULL, sendcount, sendtype, 0);
  return err;
}

static int allgatherv_task(const void *args);

MCOLL_EXPORT int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                void *recvbuf, const int recvcounts[], const int displs[],
                                MPI_Datatype recvtype, MPI_Comm comm) {
  int err;
  if (mcoll__tnbc_active && MCOLL_TNBC_ENTER("allgatherv") &&
      mcoll__tnbc_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
                      allgatherv_task, &err))
    return err;
  return allgatherv_run(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
}

/* MPI_Iallgatherv: the same body as a task (task/task.h). */
static int allgatherv_task(const void *args) {
  const struct mcoll_mpi_allgatherv_args *a = args;
  return allgatherv_run(a->sendbuf, a->sendcount, a->sendtype, a->recvbuf, a->recvcounts, a->displs,
                        a->recvtype, a->comm);
}

/* The call's arrays, copied when it starts (see task/task.h); the same for MPI_Iallgatherv and
 * its persistent form. */
static void keep_arrays(struct mcoll_mpi_allgatherv_args *a, struct mcoll_task_keep *keep) {
  size_t entries = (size_t)mcoll__array_entries(a->comm);
  a->recvcounts = mcoll__task_keep(keep, a->recvcounts, entries * sizeof(*a->recvcounts));
  a->displs = mcoll__task_keep(keep, a->displs, entries * sizeof(*a->displs));
}

MCOLL_EXPORT int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                 void *recvbuf, const int recvcounts[], const int displs[],
                                 MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
  if (!mcoll__nbc_on(comm))
    return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                            comm, request);
  struct mcoll_mpi_allgatherv_args a = {sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                              comm};
  struct mcoll_task_keep keep = {.n = 0};
  keep_arrays(&a, &keep);
  return mcoll__start(comm, allgatherv_task, &a, sizeof a, &keep, request);
}

#ifdef MCOLL_PERSISTENT
/* MPI_Allgatherv_init: the same task, built once and started by MPI_Start. */
MCOLL_EXPORT int MCOLL_PERSISTENT(Allgatherv_init)(const void *sendbuf, int sendcount,
                                                   MPI_Datatype sendtype, void *recvbuf,
                                                   const int recvcounts[], const int displs[],
                                                   MPI_Datatype recvtype, MPI_Comm comm,
                                                   MPI_Info info, MPI_Request *request) {
  int nbc = mcoll__nbc_on(comm);
  MPI_Request host; /* (the host's init checks the arguments, or is the whole call) */
  int err = MCOLL_PERSISTENT_HOST(Allgatherv_init)(sendbuf, sendcount, sendtype, recvbuf, recvcounts,
                                                   displs, recvtype, comm, info,
                                                   nbc ? &host : request);
  if (!nbc) return err;
  struct mcoll_mpi_allgatherv_args a = {sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                              comm};
  struct mcoll_task_keep keep = {.n = 0};
  keep_arrays(&a, &keep);
  return mcoll__persistent_make(err, &host, allgatherv_task, &a, sizeof a,
                                offsetof(struct mcoll_mpi_allgatherv_args, comm), &keep, request);
}
#endif
