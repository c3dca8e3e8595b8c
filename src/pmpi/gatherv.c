#include "coll/gather/gather.h"
#include "pmpi/wrap.h"

static int counts_valid(const int *counts, const int *displs, int n) {
  if (!counts || !displs) return 0;
  for (int r = 0; r < n; r++)
    if (counts[r] < 0) return 0;
  return 1;
}

static int gatherv_run(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                             void *recvbuf, const int recvcounts[], const int displs[],
                             MPI_Datatype recvtype, int root, MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_GATHERV, comm);
  if (!c)
    return MCOLL_HOST(Gatherv, Igatherv, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                      recvtype,
                        root, comm);
  int is_root = mcoll__root_valid(c, root) && c->rank == root;
  int in_place = is_root && sendbuf == MPI_IN_PLACE;
  struct mcoll_bytes send;
  struct mcoll_blocks dst;
  if (!mcoll__root_valid(c, root) ||
      (is_root && (!counts_valid(recvcounts, displs, c->size) || recvtype == MPI_DATATYPE_NULL ||
                   mcoll__blocks_describe(&dst, recvbuf, c->size, 0, recvcounts, displs,
                                          recvtype) != MPI_SUCCESS)) ||
      (!in_place && (sendbuf == MPI_IN_PLACE || sendcount < 0 || sendtype == MPI_DATATYPE_NULL ||
                     mcoll__bytes_of(sendbuf, sendcount, sendtype, &send) != MPI_SUCCESS ||
                     (is_root && send.bytes != mcoll__block_len(&dst, root))))) {
    mcoll__count_invalid(MCOLL_COLL_GATHERV);
    return MCOLL_HOST(Gatherv, Igatherv, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                      recvtype,
                        root, comm);
  }
  if (!in_place) mcoll__bytes_acquire(sendbuf, sendcount, sendtype, 1, &send);
  struct mcoll_gather_args a = {.mine = in_place ? NULL : send.ptr,
                                .my_len = in_place ? mcoll__block_len(&dst, root) : send.bytes,
                                .dst = is_root ? &dst : NULL, .root = root, .v = 1};
  int err = mcoll__gather(c, MCOLL_COLL_GATHERV, &a);
  if (!in_place) mcoll__bytes_release(&send, NULL, sendcount, sendtype, 0);
  return err;
}

MCOLL_EXPORT int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                             void *recvbuf, const int recvcounts[], const int displs[],
                             MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return gatherv_run(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root,
                     comm);
}

/* MPI_Igatherv: the same body as a task (task/task.h). */
struct gatherv_args {
  const void *sendbuf;
  int sendcount;
  MPI_Datatype sendtype;
  void *recvbuf;
  const int *recvcounts;
  const int *displs;
  MPI_Datatype recvtype;
  int root;
  MPI_Comm comm;
};

static int gatherv_task(const void *args) {
  const struct gatherv_args *a = args;
  return gatherv_run(a->sendbuf, a->sendcount, a->sendtype, a->recvbuf, a->recvcounts, a->displs,
                     a->recvtype, a->root, a->comm);
}

/* The call's arrays, copied when it starts (see task/task.h); the same for MPI_Igatherv and
 * its persistent form. */
static void keep_arrays(struct gatherv_args *a, struct mcoll_task_keep *keep) {
  size_t entries = (size_t)mcoll__array_entries(a->comm);
  if (mcoll__is_root(a->comm, a->root)) {
    a->recvcounts = mcoll__task_keep(keep, a->recvcounts, entries * sizeof(*a->recvcounts));
    a->displs = mcoll__task_keep(keep, a->displs, entries * sizeof(*a->displs));
  }
}

MCOLL_EXPORT int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                              void *recvbuf, const int recvcounts[], const int displs[],
                              MPI_Datatype recvtype, int root, MPI_Comm comm,
                              MPI_Request *request) {
  if (!mcoll__nbc_on(comm))
    return PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root,
                         comm, request);
  struct gatherv_args a = {sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                           root, comm};
  struct mcoll_task_keep keep = {.n = 0};
  keep_arrays(&a, &keep);
  return mcoll__start(comm, gatherv_task, &a, sizeof a, &keep, request);
}

#ifdef MCOLL_PERSISTENT
/* MPI_Gatherv_init: the same task, built once and started by MPI_Start. */
MCOLL_EXPORT int MCOLL_PERSISTENT(Gatherv_init)(const void *sendbuf, int sendcount,
                                                MPI_Datatype sendtype, void *recvbuf,
                                                const int recvcounts[], const int displs[],
                                                MPI_Datatype recvtype, int root, MPI_Comm comm,
                                                MPI_Info info, MPI_Request *request) {
  int nbc = mcoll__nbc_on(comm);
  MPI_Request host; /* (the host's init checks the arguments, or is the whole call) */
  int err = MCOLL_PERSISTENT_HOST(Gatherv_init)(sendbuf, sendcount, sendtype, recvbuf, recvcounts,
                                                displs, recvtype, root, comm, info,
                                                nbc ? &host : request);
  if (!nbc) return err;
  struct gatherv_args a = {sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                           root, comm};
  struct mcoll_task_keep keep = {.n = 0};
  keep_arrays(&a, &keep);
  return mcoll__persistent_make(err, &host, gatherv_task, &a, sizeof a,
                                offsetof(struct gatherv_args, comm), &keep, request);
}
#endif
