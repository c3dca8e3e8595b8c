#include "coll/alltoall/alltoall.h"
#include "pmpi/wrap.h"

static int side_valid(const int *counts, const int *displs, const MPI_Datatype *types, int n) {
  if (!counts || !displs || !types) return 0;
  for (int i = 0; i < n; i++)
    if (counts[i] < 0 || types[i] == MPI_DATATYPE_NULL) return 0;
  return 1;
}

static int alltoallw_run(const void *sendbuf, const int sendcounts[], const int sdispls[],
                               const MPI_Datatype sendtypes[], void *recvbuf,
                               const int recvcounts[], const int rdispls[],
                               const MPI_Datatype recvtypes[], MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_ALLTOALLW, comm);
  if (!c)
    return MCOLL_HOST(Alltoallw, Ialltoallw, sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
                      recvcounts, rdispls,
                          recvtypes, comm);
  int inplace = sendbuf == MPI_IN_PLACE;
  struct mcoll_a2a a = {.c = c, .coll = MCOLL_COLL_ALLTOALLW, .inplace = inplace};
  struct mcoll_a2a_side ss = {.buf = (char *)sendbuf, .counts = sendcounts, .displs = sdispls,
                              .types = sendtypes};
  struct mcoll_a2a_side rs = {.buf = recvbuf, .counts = recvcounts, .displs = rdispls,
                              .types = recvtypes};
  if (recvbuf == MPI_IN_PLACE || mcoll__bufs_aliased(sendbuf, recvbuf) ||
      !side_valid(recvcounts, rdispls, recvtypes, c->size) ||
      (!inplace && !side_valid(sendcounts, sdispls, sendtypes, c->size)) ||
      mcoll__a2a_blocks(&a, &ss, &rs) != MPI_SUCCESS) {
    mcoll__count_invalid(MCOLL_COLL_ALLTOALLW);
    return MCOLL_HOST(Alltoallw, Ialltoallw, sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
                      recvcounts, rdispls,
                          recvtypes, comm);
  }
  int err = mcoll__a2a_run(&a);
  mcoll__a2a_blocks_release(&a, err == MPI_SUCCESS);
  return err;
}

MCOLL_EXPORT int MPI_Alltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[],
                               const MPI_Datatype sendtypes[], void *recvbuf,
                               const int recvcounts[], const int rdispls[],
                               const MPI_Datatype recvtypes[], MPI_Comm comm) {
  return alltoallw_run(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                       recvtypes, comm);
}

/* MPI_Ialltoallw: the same body as a task (task/task.h). */
struct alltoallw_args {
  const void *sendbuf;
  const int *sendcounts;
  const int *sdispls;
  const MPI_Datatype *sendtypes;
  void *recvbuf;
  const int *recvcounts;
  const int *rdispls;
  const MPI_Datatype *recvtypes;
  MPI_Comm comm;
};

static int alltoallw_task(const void *args) {
  const struct alltoallw_args *a = args;
  return alltoallw_run(a->sendbuf, a->sendcounts, a->sdispls, a->sendtypes, a->recvbuf,
                       a->recvcounts, a->rdispls, a->recvtypes, a->comm);
}

/* The call's arrays, copied when it starts (see task/task.h); the same for MPI_Ialltoallw and
 * its persistent form. */
static void keep_arrays(struct alltoallw_args *a, struct mcoll_task_keep *keep) {
  size_t entries = (size_t)mcoll__array_entries(a->comm);
  a->sendcounts = mcoll__task_keep(keep, a->sendcounts, entries * sizeof(*a->sendcounts));
  a->sdispls = mcoll__task_keep(keep, a->sdispls, entries * sizeof(*a->sdispls));
  a->sendtypes = mcoll__task_keep(keep, a->sendtypes, entries * sizeof(*a->sendtypes));
  a->recvcounts = mcoll__task_keep(keep, a->recvcounts, entries * sizeof(*a->recvcounts));
  a->rdispls = mcoll__task_keep(keep, a->rdispls, entries * sizeof(*a->rdispls));
  a->recvtypes = mcoll__task_keep(keep, a->recvtypes, entries * sizeof(*a->recvtypes));
}

MCOLL_EXPORT int MPI_Ialltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[],
                                const MPI_Datatype sendtypes[], void *recvbuf,
                                const int recvcounts[], const int rdispls[],
                                const MPI_Datatype recvtypes[], MPI_Comm comm,
                                MPI_Request *request) {
  if (!mcoll__nbc_on(comm))
    return PMPI_Ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                           recvtypes, comm, request);
  struct alltoallw_args a = {sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                             recvtypes, comm};
  struct mcoll_task_keep keep = {.n = 0};
  keep_arrays(&a, &keep);
  return mcoll__start(comm, alltoallw_task, &a, sizeof a, &keep, request);
}

#ifdef MCOLL_PERSISTENT
/* MPI_Alltoallw_init: the same task, built once and started by MPI_Start. */
MCOLL_EXPORT int MCOLL_PERSISTENT(Alltoallw_init)(const void *sendbuf, const int sendcounts[],
                                                  const int sdispls[],
                                                  const MPI_Datatype sendtypes[], void *recvbuf,
                                                  const int recvcounts[], const int rdispls[],
                                                  const MPI_Datatype recvtypes[], MPI_Comm comm,
                                                  MPI_Info info, MPI_Request *request) {
  int nbc = mcoll__nbc_on(comm);
  MPI_Request host; /* (the host's init checks the arguments, or is the whole call) */
  int err = MCOLL_PERSISTENT_HOST(Alltoallw_init)(sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
                                                  recvcounts, rdispls, recvtypes, comm, info,
                                                  nbc ? &host : request);
  if (!nbc) return err;
  struct alltoallw_args a = {sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                             recvtypes, comm};
  struct mcoll_task_keep keep = {.n = 0};
  keep_arrays(&a, &keep);
  return mcoll__persistent_make(err, &host, alltoallw_task, &a, sizeof a,
                                offsetof(struct alltoallw_args, comm), &keep, request);
}
#endif
