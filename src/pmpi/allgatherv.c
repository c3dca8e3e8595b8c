#include "coll/allgather/allgather.h"
#include "pmpi/wrap.h"

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

static int allgatherv_tnbc(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           void *recvbuf, const int recvcounts[], const int displs[],
                           MPI_Datatype recvtype, MPI_Comm comm, int *err);

MCOLL_EXPORT int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                void *recvbuf, const int recvcounts[], const int displs[],
                                MPI_Datatype recvtype, MPI_Comm comm) {
  int err;
  if (mcoll__tnbc_active && MCOLL_TNBC_ENTER("allgatherv") &&
      allgatherv_tnbc(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
                      &err))
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

/* T-NBC (tnbc/tnbc.h), as allgather's with a sub-message per source block. The ranks
 * agree first (one small allreduce): a contiguous receive type everywhere, at least
 * MCOLL_TNBC_MIN bytes per block on average (the counts are the same on every rank);
 * 1 if taken (*err: its result). Init: the rank's block is copied; one small
 * allgather carries the first and last MCOLL_TNBC_EDGE bytes of every block, which
 * complete the partial pages of every block; then mcoll's allgatherv runs as a task
 * into a bounce buffer while the pages are protected. */
static int allgatherv_tnbc(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           void *recvbuf, const int recvcounts[], const int displs[],
                           MPI_Datatype recvtype, MPI_Comm comm, int *err) {
  enum { E = MCOLL_TNBC_EDGE };
  int inter = 1, p = 0, rank = 0, rsize = 0;
  if (recvbuf == MPI_IN_PLACE || sendbuf == recvbuf || comm == MPI_COMM_NULL || !recvcounts ||
      !displs ||
      PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter ||
      PMPI_Comm_size(comm, &p) != MPI_SUCCESS || PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS ||
      p > MCOLL_TNBC_MAX_RANKS)
    return 0;
  int ok = mcoll__tnbc_contiguous(recvtype) && PMPI_Type_size(recvtype, &rsize) == MPI_SUCCESS;
  /* byte counts and displacements (size_t for the call, int for the engine) */
  size_t *v = malloc(2 * sizeof *v * (size_t)p);
  int *iv = malloc(2 * sizeof *iv * (size_t)p);
  size_t rspan = 0, rtotal = 0;
  ok = ok && v && iv;
  for (int i = 0; ok && i < p; i++) {
    v[i] = (size_t)recvcounts[i] * (size_t)rsize;
    v[p + i] = (size_t)displs[i] * (size_t)rsize;
    if (recvcounts[i] < 0 || displs[i] < 0 || v[i] + v[p + i] > INT_MAX) ok = 0;
    iv[i] = (int)v[i];
    iv[p + i] = (int)v[p + i];
    if (v[i] && v[p + i] + v[i] > rspan) rspan = v[p + i] + v[i];
    rtotal += v[i];
  }
  int mine[2] = {ok, -(rtotal >= (size_t)mcoll__cfg.TNBC_MIN * (size_t)p)}, all[2];
  if (mcoll__tnbc_agree(mine, all, 2, comm) != MPI_SUCCESS || !all[0] || !all[1]) {
    free(v);
    free(iv);
    return 0;
  }
  size_t block = v[rank];
  char *send;
  if (sendbuf == MPI_IN_PLACE)
    send = mcoll__tnbc_send_copy((const char *)recvbuf + v[p + rank], recvcounts[rank], recvtype,
                                 block);
  else
    send = mcoll__tnbc_send_copy(sendbuf, sendcount, sendtype, block);
  char *edges = malloc(2 * E * (size_t)(p + 1));
  if (!edges) {
    fprintf(stderr, "mcoll: T-NBC allgatherv: out of memory\n");
    abort();
  }
  size_t zero = 0;
  mcoll__tnbc_pack_edges(edges, send, 1, &block, &zero);
  char *edges_in = edges + 2 * E;
  *err = PMPI_Allgather(edges, 2 * E, MPI_BYTE, edges_in, 2 * E, MPI_BYTE, comm);
  void *target = rspan && mcoll__tnbc_protectable(recvbuf, rspan) ? NULL : recvbuf;
  if (!target) mcoll__tnbc_put_block_edges(recvbuf, edges_in, p, v, v + p);
  free(edges);
  struct mcoll_tnbc_call *call = mcoll__tnbc_begin_ranges(recvbuf, rspan, p, v + p, v, target);
  mcoll__tnbc_edges_done(call);
  free(v);
  mcoll__tnbc_own(call, send, block);
  mcoll__tnbc_own(call, iv, 2 * sizeof *iv * (size_t)p);
  struct mcoll_mpi_allgatherv_args a = {send, (int)block, MPI_BYTE, mcoll__tnbc_target(call), iv, iv + p,
                              MPI_BYTE, comm};
  int task_err = mcoll__tnbc_post(call, comm, allgatherv_task, &a, sizeof a);
  if (*err == MPI_SUCCESS) *err = task_err;
  return 1;
}
