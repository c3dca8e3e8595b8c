#include "coll/scatter/scatter.h"
#include "pmpi/wrap.h"

static int counts_valid(const int *counts, const int *displs, int n) {
  if (!counts || !displs) return 0;
  for (int r = 0; r < n; r++)
    if (counts[r] < 0) return 0;
  return 1;
}

static int scatterv_run(const void *sendbuf, const int sendcounts[], const int displs[],
                              MPI_Datatype sendtype, void *recvbuf, int recvcount,
                              MPI_Datatype recvtype, int root, MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_SCATTERV, comm);
  if (!c)
    return MCOLL_HOST(Scatterv, Iscatterv, sendbuf, sendcounts, displs, sendtype, recvbuf,
                      recvcount, recvtype,
                         root, comm);
  int is_root = mcoll__root_valid(c, root) && c->rank == root;
  int in_place = is_root && recvbuf == MPI_IN_PLACE;
  struct mcoll_bytes recv;
  struct mcoll_blocks src;
  if (!mcoll__root_valid(c, root) ||
      (is_root && (!counts_valid(sendcounts, displs, c->size) || sendtype == MPI_DATATYPE_NULL ||
                   mcoll__blocks_describe(&src, (void *)sendbuf, c->size, 0, sendcounts, displs,
                                          sendtype) != MPI_SUCCESS)) ||
      (!in_place && (recvbuf == MPI_IN_PLACE || recvcount < 0 || recvtype == MPI_DATATYPE_NULL ||
                     mcoll__bytes_of(recvbuf, recvcount, recvtype, &recv) != MPI_SUCCESS ||
                     (is_root && recv.bytes != mcoll__block_len(&src, root))))) {
    mcoll__count_invalid(MCOLL_COLL_SCATTERV);
    return MCOLL_HOST(Scatterv, Iscatterv, sendbuf, sendcounts, displs, sendtype, recvbuf,
                      recvcount, recvtype,
                         root, comm);
  }
  if (!in_place) mcoll__bytes_acquire(recvbuf, recvcount, recvtype, 0, &recv);
  struct mcoll_scatter_args a = {.src = is_root ? &src : NULL, .mine = in_place ? NULL : recv.ptr,
                                 .my_len = in_place ? mcoll__block_len(&src, root) : recv.bytes,
                                 .root = root, .v = 1};
  int err = mcoll__scatter(c, MCOLL_COLL_SCATTERV, &a);
  if (!in_place) mcoll__bytes_release(&recv, recvbuf, recvcount, recvtype, err == MPI_SUCCESS);
  return err;
}

MCOLL_EXPORT int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                              MPI_Datatype sendtype, void *recvbuf, int recvcount,
                              MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return scatterv_run(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root,
                      comm);
}

/* MPI_Iscatterv: the same body as a task (task/task.h). */
struct scatterv_args {
  const void *sendbuf;
  const int *sendcounts;
  const int *displs;
  MPI_Datatype sendtype;
  void *recvbuf;
  int recvcount;
  MPI_Datatype recvtype;
  int root;
  MPI_Comm comm;
};

static int scatterv_task(const void *args) {
  const struct scatterv_args *a = args;
  return scatterv_run(a->sendbuf, a->sendcounts, a->displs, a->sendtype, a->recvbuf, a->recvcount,
                      a->recvtype, a->root, a->comm);
}

/* The call's arrays, copied when it starts (see task/task.h); the same for MPI_Iscatterv and
 * its persistent form. */
static void keep_arrays(struct scatterv_args *a, struct mcoll_task_keep *keep) {
  size_t entries = (size_t)mcoll__array_entries(a->comm);
  if (mcoll__is_root(a->comm, a->root)) {
    a->sendcounts = mcoll__task_keep(keep, a->sendcounts, entries * sizeof(*a->sendcounts));
    a->displs = mcoll__task_keep(keep, a->displs, entries * sizeof(*a->displs));
  }
}

MCOLL_EXPORT int MPI_Iscatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                               MPI_Datatype sendtype, void *recvbuf, int recvcount,
                               MPI_Datatype recvtype, int root, MPI_Comm comm,
                               MPI_Request *request) {
  if (!mcoll__nbc_on(comm))
    return PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root,
                          comm, request);
  struct scatterv_args a = {sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,
                            root, comm};
  struct mcoll_task_keep keep = {.n = 0};
  keep_arrays(&a, &keep);
  return mcoll__start(comm, scatterv_task, &a, sizeof a, &keep, request);
}

#ifdef MCOLL_PERSISTENT
/* MPI_Scatterv_init: the same task, built once and started by MPI_Start. */
MCOLL_EXPORT int MCOLL_PERSISTENT(Scatterv_init)(const void *sendbuf, const int sendcounts[],
                                                 const int displs[], MPI_Datatype sendtype,
                                                 void *recvbuf, int recvcount,
                                                 MPI_Datatype recvtype, int root, MPI_Comm comm,
                                                 MPI_Info info, MPI_Request *request) {
  int nbc = mcoll__nbc_on(comm);
  MPI_Request host; /* (the host's init checks the arguments, or is the whole call) */
  int err = MCOLL_PERSISTENT_HOST(Scatterv_init)(sendbuf, sendcounts, displs, sendtype, recvbuf,
                                                 recvcount, recvtype, root, comm, info,
                                                 nbc ? &host : request);
  if (!nbc) return err;
  struct scatterv_args a = {sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,
                            root, comm};
  struct mcoll_task_keep keep = {.n = 0};
  keep_arrays(&a, &keep);
  return mcoll__persistent_make(err, &host, scatterv_task, &a, sizeof a,
                                offsetof(struct scatterv_args, comm), &keep, request);
}
#endif
