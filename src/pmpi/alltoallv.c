#include "coll/alltoall/alltoall.h"
#include "pmpi/wrap.h"

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

static int alltoallv_tnbc(const void *sendbuf, const int sendcounts[], const int sdispls[],
                          MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                          const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, int *err);

MCOLL_EXPORT int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                               MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                               const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  int err;
  if (mcoll__tnbc_active && MCOLL_TNBC_ENTER("alltoallv") &&
      alltoallv_tnbc(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                     recvtype, comm, &err))
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

/* T-NBC (tnbc/tnbc.h). The ranks agree first (one small allreduce): contiguous types
 * everywhere, and some rank receiving at least MCOLL_TNBC_MIN bytes per block on
 * average; 1 if taken (*err: its result). The send data is copied, the blocks go by
 * the point-to-point schedule, each published as it arrives; the bytes on the
 * partial first and last pages are waited for before the call returns. */
static int alltoallv_tnbc(const void *sendbuf, const int sendcounts[], const int sdispls[],
                          MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                          const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, int *err) {
  int inter = 1, p = 0, ssize = 0, rsize = 0;
  if (sendbuf == MPI_IN_PLACE || recvbuf == MPI_IN_PLACE || sendbuf == recvbuf ||
      comm == MPI_COMM_NULL ||
      !sendcounts || !sdispls || !recvcounts || !rdispls ||
      PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter ||
      PMPI_Comm_size(comm, &p) != MPI_SUCCESS || p > MCOLL_TNBC_MAX_RANKS)
    return 0;
  int contiguous = mcoll__tnbc_contiguous(sendtype) && mcoll__tnbc_contiguous(recvtype) &&
                   PMPI_Type_size(sendtype, &ssize) == MPI_SUCCESS &&
                   PMPI_Type_size(recvtype, &rsize) == MPI_SUCCESS;
  size_t *v = malloc(4 * sizeof *v * (size_t)p);
  size_t rspan = 0, sspan = 0, rtotal = 0;
  for (int i = 0; contiguous && v && i < p; i++) {
    if (sendcounts[i] < 0 || recvcounts[i] < 0 || sdispls[i] < 0 || rdispls[i] < 0 ||
        (size_t)sendcounts[i] * (size_t)ssize > INT_MAX || (size_t)recvcounts[i] * (size_t)rsize > INT_MAX) {
      contiguous = 0;
      break;
    }
    v[i] = (size_t)sendcounts[i] * (size_t)ssize;
    v[p + i] = (size_t)sdispls[i] * (size_t)ssize;
    v[2 * p + i] = (size_t)recvcounts[i] * (size_t)rsize;
    v[3 * p + i] = (size_t)rdispls[i] * (size_t)rsize;
    if (v[i] && v[p + i] + v[i] > sspan) sspan = v[p + i] + v[i];
    if (v[2 * p + i] && v[3 * p + i] + v[2 * p + i] > rspan) rspan = v[3 * p + i] + v[2 * p + i];
    rtotal += v[2 * p + i];
  }
  /* {all contiguous, -(some rank is large)}: MPI_MIN of both */
  int mine[2] = {contiguous && v, -(rtotal >= (size_t)mcoll__cfg.TNBC_MIN * (size_t)p)}, all[2];
  if (mcoll__tnbc_agree(mine, all, 2, comm) != MPI_SUCCESS || !all[0] || !all[1]) {
    free(v);
    return 0;
  }
  /* Init: the first and last 4 KiB of every block, by the host's alltoall (the lane is
   * empty after the agreement, and mcoll's would take this path again for a
   * MCOLL_TNBC_MIN below 8 KiB); they complete the partial pages on both sides. */
  enum { E = MCOLL_TNBC_EDGE };
  char *edges = malloc(4 * E * (size_t)p);
  if (!edges) {
    fprintf(stderr, "mcoll: T-NBC alltoallv: out of memory\n");
    abort();
  }
  char *edges_in = edges + 2 * E * (size_t)p;
  mcoll__tnbc_pack_edges(edges, sendbuf, p, v, v + p);
  *err = PMPI_Alltoall(edges, 2 * E, MPI_BYTE, edges_in, 2 * E, MPI_BYTE, comm);
  void *target = rspan && mcoll__tnbc_protectable(recvbuf, rspan) ? NULL : recvbuf;
  if (!target) mcoll__tnbc_put_block_edges(recvbuf, edges_in, p, v + 2 * p, v + 3 * p);
  struct mcoll_tnbc_call *call =
      mcoll__tnbc_begin_ranges(recvbuf, rspan, p, v + 3 * p, v + 2 * p, target);
  mcoll__tnbc_edges_done(call);
  const char *from = mcoll__tnbc_send_in_place(call, sendbuf, sspan, p, v + p, v);
  if (!from) {
    char *send = mcoll__tnbc_send_copy(sendbuf, (int)(sspan / (size_t)ssize), sendtype, sspan);
    mcoll__tnbc_own(call, send, sspan);
    from = send;
  }
  mcoll__tnbc_own(call, edges, 4 * E * (size_t)p);
  int task_err = mcoll__tnbc_alltoallv_post(call, comm, from, p, v, v + p, v + 2 * p, v + 3 * p,
                                            edges_in);
  if (*err == MPI_SUCCESS) *err = task_err;
  free(v);
  return 1;
}
