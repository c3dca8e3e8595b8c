#include "coll/alltoall/alltoall.h"
#include "pmpi/wrap.h"
#include "tnbc/entry.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

static int counts_valid(const int *counts, const int *displs, int n) {
  if (!counts || !displs) return 0;
  for (int i = 0; i < n; i++)
    if (counts[i] < 0) return 0;
  return 1;
}

static int alltoallv_run(const void *sendbuf, const int sendcounts[], const int sdispls[],
                               MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                               const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_ALLTOALLV, comm);
  if (!c)
    return MCOLL_HOST(Alltoallv, Ialltoallv, sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                      recvcounts, rdispls,
                          recvtype, comm);
  int inplace = sendbuf == MPI_IN_PLACE;
  struct mcoll_a2a a = {.c = c, .coll = MCOLL_COLL_ALLTOALLV, .inplace = inplace};
  struct mcoll_a2a_side ss = {.buf = (char *)sendbuf, .counts = sendcounts, .displs = sdispls,
                              .type = sendtype};
  struct mcoll_a2a_side rs = {.buf = recvbuf, .counts = recvcounts, .displs = rdispls,
                              .type = recvtype};
  if (recvbuf == MPI_IN_PLACE || mcoll__bufs_aliased(sendbuf, recvbuf) ||
      recvtype == MPI_DATATYPE_NULL ||
      !counts_valid(recvcounts, rdispls, c->size) ||
      (!inplace &&
       (sendtype == MPI_DATATYPE_NULL || !counts_valid(sendcounts, sdispls, c->size))) ||
      mcoll__a2a_blocks(&a, &ss, &rs) != MPI_SUCCESS) {
    mcoll__count_invalid(MCOLL_COLL_ALLTOALLV);
    return MCOLL_HOST(Alltoallv, Ialltoallv, sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                      recvcounts, rdispls,
                          recvtype, comm);
  }
  int err = mcoll__a2a_run(&a);
  mcoll__a2a_blocks_release(&a, err == MPI_SUCCESS);
  return err;
}

static int alltoallv_task(const void *args);

MCOLL_EXPORT int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                               MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                               const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  int err;
  if (mcoll__tnbc_active && MCOLL_TNBC_ENTER("alltoallv") &&
      mcoll__tnbc_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                     recvtype, comm, alltoallv_task, &err))
    return err;
  return alltoallv_run(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                       recvtype, comm);
}

/* MPI_Ialltoallv: the same body as a task (task/task.h). */
static int alltoallv_task(const void *args) {
  const struct mcoll_mpi_alltoallv_args *a = args;
  return alltoallv_run(a->sendbuf, a->sendcounts, a->sdispls, a->sendtype, a->recvbuf,
                       a->recvcounts, a->rdispls, a->recvtype, a->comm);
}

/* The call's arrays, copied when it starts (see task/task.h); the same for MPI_Ialltoallv and
 * its persistent form. */
static void keep_arrays(struct mcoll_mpi_alltoallv_args *a, struct mcoll_task_keep *keep) {
  size_t entries = (size_t)mcoll__array_entries(a->comm);
  a->sendcounts = mcoll__task_keep(keep, a->sendcounts, entries * sizeof(*a->sendcounts));
  a->sdispls = mcoll__task_keep(keep, a->sdispls, entries * sizeof(*a->sdispls));
  a->recvcounts = mcoll__task_keep(keep, a->recvcounts, entries * sizeof(*a->recvcounts));
  a->rdispls = mcoll__task_keep(keep, a->rdispls, entries * sizeof(*a->rdispls));
}

MCOLL_EXPORT int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                                MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                                const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                                MPI_Request *request) {
  if (!mcoll__nbc_on(comm))
    return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                           recvtype, comm, request);
  struct mcoll_mpi_alltoallv_args a = {sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                             recvtype, comm};
  struct mcoll_task_keep keep = {.n = 0};
  keep_arrays(&a, &keep);
  return mcoll__start(comm, alltoallv_task, &a, sizeof a, &keep, request);
}

#ifdef MCOLL_PERSISTENT
/* MPI_Alltoallv_init: the same task, built once and started by MPI_Start. */
MCOLL_EXPORT int MCOLL_PERSISTENT(Alltoallv_init)(const void *sendbuf, const int sendcounts[],
                                                  const int sdispls[], MPI_Datatype sendtype,
                                                  void *recvbuf, const int recvcounts[],
                                                  const int rdispls[], MPI_Datatype recvtype,
                                                  MPI_Comm comm, MPI_Info info,
                                                  MPI_Request *request) {
  int nbc = mcoll__nbc_on(comm);
  MPI_Request host; /* (the host's init checks the arguments, or is the whole call) */
  int err = MCOLL_PERSISTENT_HOST(Alltoallv_init)(sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                                                  recvcounts, rdispls, recvtype, comm, info,
                                                  nbc ? &host : request);
  if (!nbc) return err;
  struct mcoll_mpi_alltoallv_args a = {sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                             recvtype, comm};
  struct mcoll_task_keep keep = {.n = 0};
  keep_arrays(&a, &keep);
  return mcoll__persistent_make(err, &host, alltoallv_task, &a, sizeof a,
                                offsetof(struct mcoll_mpi_alltoallv_args, comm), &keep, request);
}
#endif
