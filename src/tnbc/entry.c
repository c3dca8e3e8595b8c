/* T-NBC's entries of the blocking collectives (tnbc/entry.h). */
#include "tnbc/entry.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/collectives.h"
#include "core/config.h"
#include "core/datatype.h"
#include "tnbc/tnbc.h"

/* T-NBC (tnbc/tnbc.h): taken by every rank alike (block size, in place or not, the
 * communicator); 1 if taken (*err: its result). Init: the rank's block is copied;
 * one small allgather carries the first and last MCOLL_TNBC_EDGE bytes of every block,
 * which complete the partial pages of the buffer (in blocks 0 and P-1); then the
 * whole call goes as a task into a bounce buffer while the pages are protected. */
int mcoll__tnbc_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                          void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                          mcoll_task_fn allgather_task, int *err) {
  enum { E = MCOLL_TNBC_EDGE };
  int inter = 1, tsize = 0, p = 0, rank = 0;
  if (recvbuf == MPI_IN_PLACE || sendbuf == recvbuf || comm == MPI_COMM_NULL || recvcount <= 0 ||
      PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter ||
      PMPI_Type_size(recvtype, &tsize) != MPI_SUCCESS || tsize <= 0 ||
      PMPI_Comm_size(comm, &p) != MPI_SUCCESS || PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS)
    return 0;
  size_t block = (size_t)recvcount * (size_t)tsize, bytes = block * (size_t)p;
  if (block < (size_t)mcoll__cfg.TNBC_MIN || block < 2 * E || block > INT_MAX ||
      (size_t)recvcount * (size_t)p > INT_MAX || !mcoll__tnbc_adapt_take(comm, "allgather", block))
    return 0;
  char *send;
  if (sendbuf == MPI_IN_PLACE) {
    /* the rank's block, where the receive type puts it */
    MPI_Aint lb, extent;
    PMPI_Type_get_extent(recvtype, &lb, &extent);
    send = mcoll__tnbc_send_copy((const char *)recvbuf + (MPI_Aint)rank * recvcount * extent,
                                 recvcount, recvtype, block);
  } else {
    send = mcoll__tnbc_send_copy(sendbuf, sendcount, sendtype, block);
  }
  char *edges = malloc(2 * E * (size_t)(p + 1));
  if (!edges) {
    free(send);
    return 0;
  }
  memcpy(edges, send, E);
  memcpy(edges + E, send + block - E, E);
  char *edges_in = edges + 2 * E;
  *err = allgather_task(
      &(struct mcoll_mpi_allgather_args){edges, 2 * E, MPI_BYTE, edges_in, 2 * E, MPI_BYTE, comm});
  struct mcoll_bytes packed;
  void *target = mcoll__tnbc_recv_target(recvbuf, recvcount * p, recvtype, bytes, &packed);
  if (*err == MPI_SUCCESS && !target)
    mcoll__tnbc_put_edges(recvbuf, bytes, edges_in, edges_in + (size_t)(p - 1) * 2 * E + E);
  free(edges);
  struct mcoll_tnbc_call *call = mcoll__tnbc_begin(recvbuf, bytes, block, target);
  mcoll__tnbc_own(call, send, block);
  struct mcoll_mpi_allgather_args a = {send, (int)block, MPI_BYTE, mcoll__tnbc_target(call),
                                       (int)block, MPI_BYTE, comm};
  int task_err = mcoll__tnbc_post(call, comm, allgather_task, &a, sizeof a);
  if (*err == MPI_SUCCESS) *err = task_err;
  mcoll__bytes_release(&packed, recvbuf, recvcount * p, recvtype, 1);
  return 1;
}

/* T-NBC (tnbc/tnbc.h), as allgather's with a sub-message per source block. The ranks
 * agree first (one small allreduce): a contiguous receive type everywhere, at least
 * MCOLL_TNBC_MIN bytes per block on average (the counts are the same on every rank);
 * 1 if taken (*err: its result). Init: the rank's block is copied; one small
 * allgather carries the first and last MCOLL_TNBC_EDGE bytes of every block, which
 * complete the partial pages of every block; then mcoll's allgatherv runs as a task
 * into a bounce buffer while the pages are protected. */
int mcoll__tnbc_allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           void *recvbuf, const int recvcounts[], const int displs[],
                           MPI_Datatype recvtype, MPI_Comm comm, mcoll_task_fn allgatherv_task,
                           int *err) {
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
  if (mcoll__tnbc_agree(mine, all, 2, comm) != MPI_SUCCESS || !all[0] || !all[1] ||
      !mcoll__tnbc_adapt_take(comm, "allgatherv", rtotal)) {
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
  struct mcoll_mpi_allgatherv_args a = {send, (int)block, MPI_BYTE, mcoll__tnbc_target(call),
                                        iv, iv + p, MPI_BYTE, comm};
  int task_err = mcoll__tnbc_post(call, comm, allgatherv_task, &a, sizeof a);
  if (*err == MPI_SUCCESS) *err = task_err;
  return 1;
}

/* T-NBC (tnbc/tnbc.h): contiguous types only (the same on every rank), taken by every
 * rank alike; 1 if taken (*err: its result). Init: the input is copied; one small
 * allreduce of the first and last elements (at least MCOLL_TNBC_EDGE bytes each)
 * completes the partial pages; then the whole call goes as a task into a bounce
 * buffer while the pages are protected. */
int mcoll__tnbc_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                          MPI_Op op, MPI_Comm comm, mcoll_task_fn allreduce_task, int *err) {
  enum { E = MCOLL_TNBC_EDGE };
  int inter = 1, tsize = 0;
  if (recvbuf == MPI_IN_PLACE || comm == MPI_COMM_NULL || count <= 0 || op == MPI_OP_NULL ||
      PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter ||
      PMPI_Type_size(type, &tsize) != MPI_SUCCESS || tsize <= 0 || !mcoll__tnbc_contiguous(type))
    return 0;
  size_t bytes = (size_t)count * (size_t)tsize, edge = (E + (size_t)tsize - 1) / (size_t)tsize;
  if (bytes < (size_t)mcoll__cfg.TNBC_MIN || (size_t)count < 2 * edge ||
      !mcoll__tnbc_adapt_take(comm, "allreduce", bytes))
    return 0;
  size_t eb = edge * (size_t)tsize; /* bytes of one edge */
  char *send = mcoll__tnbc_send_copy(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, count, type, bytes);
  char *edges = malloc(4 * eb);
  if (!edges) {
    free(send);
    return 0;
  }
  memcpy(edges, send, eb);
  memcpy(edges + eb, send + bytes - eb, eb);
  *err = allreduce_task(
      &(struct mcoll_mpi_allreduce_args){edges, edges + 2 * eb, (int)(2 * edge), type, op, comm});
  struct mcoll_bytes packed;
  void *target = mcoll__tnbc_recv_target(recvbuf, count, type, bytes, &packed);
  if (*err == MPI_SUCCESS && !target)
    mcoll__tnbc_put_edges(recvbuf, bytes, edges + 2 * eb, edges + 4 * eb - E);
  free(edges);
  struct mcoll_tnbc_call *call = mcoll__tnbc_begin(recvbuf, bytes, 256 * 1024, target);
  mcoll__tnbc_own(call, send, bytes);
  struct mcoll_mpi_allreduce_args a = {send, mcoll__tnbc_target(call), count, type, op, comm};
  int task_err = mcoll__tnbc_post(call, comm, allreduce_task, &a, sizeof a);
  if (*err == MPI_SUCCESS) *err = task_err;
  mcoll__bytes_release(&packed, recvbuf, count, type, 1);
  return 1;
}

/* T-NBC (tnbc/tnbc.h): taken by every rank alike, from what they agree on (the block
 * size, in place or not, the communicator); 1 if taken (*err: its result). Init: the
 * send data is copied; one small alltoall gives each rank the first and last
 * MCOLL_TNBC_EDGE bytes of every block it receives, which complete the partial pages
 * of its buffer (in block 0 and block P-1); then the whole call goes as a task into
 * a bounce buffer while the buffer's pages are protected. */
int mcoll__tnbc_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                         void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                         mcoll_task_fn alltoall_task, int *err) {
  enum { E = MCOLL_TNBC_EDGE };
  int inter = 1, tsize = 0, p = 0;
  if (sendbuf == MPI_IN_PLACE || recvbuf == MPI_IN_PLACE || sendbuf == recvbuf ||
      comm == MPI_COMM_NULL ||
      recvcount <= 0 || sendcount <= 0 || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS ||
      inter || PMPI_Type_size(recvtype, &tsize) != MPI_SUCCESS || tsize <= 0 ||
      PMPI_Comm_size(comm, &p) != MPI_SUCCESS)
    return 0;
  size_t block = (size_t)recvcount * (size_t)tsize, bytes = block * (size_t)p;
  if (block < (size_t)mcoll__cfg.TNBC_MIN || block < 2 * E || block > INT_MAX ||
      (size_t)recvcount * (size_t)p > INT_MAX || (size_t)sendcount * (size_t)p > INT_MAX ||
      !mcoll__tnbc_adapt_take(comm, "alltoall", block))
    return 0;
  /* The schedule sends a contiguous send buffer in place (read-only meanwhile), the
   * engine from a copy. */
  int in_place = mcoll__cfg.TNBC_BLOCKS && mcoll__tnbc_contiguous(sendtype);
  char *send = in_place ? NULL : mcoll__tnbc_send_copy(sendbuf, sendcount * p, sendtype, bytes);
  const char *from = in_place ? sendbuf : send;
  char *edges = malloc(4 * E * (size_t)p);
  size_t *blocks = malloc(2 * sizeof *blocks * (size_t)p); /* offsets, lengths */
  if (!edges || !blocks) {
    fprintf(stderr, "mcoll: T-NBC alltoall: out of memory\n");
    abort();
  }
  for (int r = 0; r < p; r++) {
    memcpy(edges + (size_t)r * 2 * E, from + (size_t)r * block, E);
    memcpy(edges + (size_t)r * 2 * E + E, from + (size_t)(r + 1) * block - E, E);
    blocks[r] = (size_t)r * block;
    blocks[p + r] = block;
  }
  char *edges_in = edges + (size_t)p * 2 * E;
  long long started = mcoll__tnbc_verbose_clock();
  *err = alltoall_task(
      &(struct mcoll_mpi_alltoall_args){edges, 2 * E, MPI_BYTE, edges_in, 2 * E, MPI_BYTE, comm});
  long long exchanged = mcoll__tnbc_verbose_clock();
  struct mcoll_bytes packed;
  void *target = mcoll__tnbc_recv_target(recvbuf, recvcount * p, recvtype, bytes, &packed);
  if (*err == MPI_SUCCESS && !target)
    mcoll__tnbc_put_edges(recvbuf, bytes, edges_in, edges_in + (size_t)(p - 1) * 2 * E + E);
  struct mcoll_tnbc_call *call = mcoll__tnbc_begin(recvbuf, bytes, block, target);
  if (in_place && !mcoll__tnbc_send_in_place(call, sendbuf, bytes, p, blocks, blocks + p))
    from = send = mcoll__tnbc_send_copy(sendbuf, sendcount * p, sendtype, bytes);
  mcoll__tnbc_mark(call, MCOLL_TNBC_AT_BEGUN);
  free(blocks);
  if (send) mcoll__tnbc_own(call, send, bytes);
  int task_err;
  if (mcoll__cfg.TNBC_BLOCKS) {
    mcoll__tnbc_own(call, edges, 4 * E * (size_t)p); /* (the schedule writes edges_in over the blocks) */
    task_err = mcoll__tnbc_alltoall_post(call, comm, from, block, edges_in);
  } else {
    free(edges);
    struct mcoll_mpi_alltoall_args a = {send, (int)block, MPI_BYTE, mcoll__tnbc_target(call),
                                        (int)block, MPI_BYTE, comm};
    task_err = mcoll__tnbc_post(call, comm, alltoall_task, &a, sizeof a);
  }
  if (*err == MPI_SUCCESS) *err = task_err;
  mcoll__bytes_release(&packed, recvbuf, recvcount * p, recvtype, 1);
  mcoll__tnbc_note_return(call, started, exchanged, mcoll__tnbc_verbose_clock());
  return 1;
}

/* T-NBC (tnbc/tnbc.h). The ranks agree first (one small allreduce): contiguous types
 * everywhere, and some rank receiving at least MCOLL_TNBC_MIN bytes per block on
 * average; 1 if taken (*err: its result). The send data is copied, the blocks go by
 * the point-to-point schedule, each published as it arrives; the bytes on the
 * partial first and last pages are waited for before the call returns. */
int mcoll__tnbc_alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                          MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                          const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                          mcoll_task_fn alltoallv_task, int *err) {
  (void)alltoallv_task; /* (its blocks go by the point-to-point schedule) */
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
  if (mcoll__tnbc_agree(mine, all, 2, comm) != MPI_SUCCESS || !all[0] || !all[1] ||
      !mcoll__tnbc_adapt_take(comm, "alltoallv", 0)) { /* (totals differ by rank: no size) */
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

/* T-NBC (tnbc/tnbc.h): taken by every rank alike (the message size, the communicator);
 * 1 if taken (*err: its result). Init: the root copies its data; one small bcast
 * carries the first and last MCOLL_TNBC_EDGE bytes, which complete the partial pages
 * of the receivers' buffers; then the whole message goes as a task into bounce
 * buffers while the receivers' pages are protected. */
enum { BCAST_TNBC_SUB = 256 * 1024 }; /* bytes per sub-message */

int mcoll__tnbc_bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
                      mcoll_task_fn bcast_task, int *err) {
  enum { E = MCOLL_TNBC_EDGE };
  int inter = 1, tsize = 0, p = 0, rank = 0;
  if (buf == MPI_IN_PLACE || comm == MPI_COMM_NULL || count <= 0 ||
      PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS ||
      inter || PMPI_Type_size(type, &tsize) != MPI_SUCCESS || tsize <= 0 ||
      PMPI_Comm_size(comm, &p) != MPI_SUCCESS || root < 0 || root >= p ||
      PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS)
    return 0;
  size_t bytes = (size_t)count * (size_t)tsize;
  if (bytes < (size_t)mcoll__cfg.TNBC_MIN || bytes < 2 * E || bytes > INT_MAX ||
      !mcoll__tnbc_adapt_take(comm, "bcast", bytes))
    return 0;
  char edges[2 * E];
  struct mcoll_bytes packed = {0};
  struct mcoll_tnbc_call *call;
  if (rank == root) {
    char *send = mcoll__tnbc_send_copy(buf, count, type, bytes);
    memcpy(edges, send, E);
    memcpy(edges + E, send + bytes - E, E);
    *err = bcast_task(&(struct mcoll_mpi_bcast_args){edges, 2 * E, MPI_BYTE, root, comm});
    call = mcoll__tnbc_begin(NULL, 0, 0, send);
    mcoll__tnbc_own(call, send, bytes);
  } else {
    *err = bcast_task(&(struct mcoll_mpi_bcast_args){edges, 2 * E, MPI_BYTE, root, comm});
    void *target = mcoll__tnbc_recv_target(buf, count, type, bytes, &packed);
    if (*err == MPI_SUCCESS && !target) mcoll__tnbc_put_edges(buf, bytes, edges, edges + E);
    call = mcoll__tnbc_begin(buf, bytes, BCAST_TNBC_SUB, target);
  }
  struct mcoll_mpi_bcast_args a = {mcoll__tnbc_target(call), (int)bytes, MPI_BYTE, root, comm};
  int task_err = mcoll__tnbc_post(call, comm, bcast_task, &a, sizeof a);
  if (*err == MPI_SUCCESS) *err = task_err;
  mcoll__bytes_release(&packed, buf, count, type, 1);
  return 1;
}
