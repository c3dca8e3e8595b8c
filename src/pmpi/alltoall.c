#include "coll/alltoall/alltoall.h"
#include "pmpi/wrap.h"

#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static int alltoall_run(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                              void *recvbuf, int recvcount, MPI_Datatype recvtype,
                              MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_ALLTOALL, comm);
  if (!c)
    return MCOLL_HOST(Alltoall, Ialltoall, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                      recvtype, comm);
  int inplace = sendbuf == MPI_IN_PLACE;
  struct mcoll_type_info st = {0}, rt = {0};
  if (recvbuf == MPI_IN_PLACE || mcoll__bufs_aliased(sendbuf, recvbuf) || recvcount < 0 ||
      mcoll__type_info(recvtype, &rt) != MPI_SUCCESS ||
      (!inplace && (sendcount < 0 || mcoll__type_info(sendtype, &st) != MPI_SUCCESS ||
                    (size_t)sendcount * (size_t)st.size != (size_t)recvcount * (size_t)rt.size))) {
    mcoll__count_invalid(MCOLL_COLL_ALLTOALL);
    return MCOLL_HOST(Alltoall, Ialltoall, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                      recvtype, comm);
  }
  struct mcoll_a2a a = {.c = c, .coll = MCOLL_COLL_ALLTOALL, .uniform = 1,
                        .block = (size_t)recvcount * (size_t)rt.size, .inplace = inplace};
  struct mcoll_a2a_side ss = {.buf = (char *)sendbuf, .count = sendcount, .type = sendtype};
  struct mcoll_a2a_side rs = {.buf = recvbuf, .count = recvcount, .type = recvtype};
  if (mcoll__a2a_blocks(&a, &ss, &rs) != MPI_SUCCESS) {
    mcoll__count_invalid(MCOLL_COLL_ALLTOALL);
    return MCOLL_HOST(Alltoall, Ialltoall, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                      recvtype, comm);
  }
  int err = mcoll__a2a_run(&a);
  mcoll__a2a_blocks_release(&a, err == MPI_SUCCESS);
  return err;
}

static int alltoall_tnbc(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                         void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                         int *err);

MCOLL_EXPORT int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                              void *recvbuf, int recvcount, MPI_Datatype recvtype,
                              MPI_Comm comm) {
  int err;
  if (mcoll__tnbc_active && MCOLL_TNBC_ENTER("alltoall") &&
      alltoall_tnbc(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &err))
    return err;
  return alltoall_run(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

/* MPI_Ialltoall: the same body as a task (task/task.h). */
static int alltoall_task(const void *args) {
  const struct mcoll_mpi_alltoall_args *a = args;
  return alltoall_run(a->sendbuf, a->sendcount, a->sendtype, a->recvbuf, a->recvcount, a->recvtype,
                      a->comm);
}

MCOLL_EXPORT int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                               void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                               MPI_Request *request) {
  if (!mcoll__nbc_on(comm))
    return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                          request);
  struct mcoll_mpi_alltoall_args a = {sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm};
  return mcoll__start(comm, alltoall_task, &a, sizeof a, NULL, request);
}

#ifdef MCOLL_PERSISTENT
/* MPI_Alltoall_init: the same task, built once and started by MPI_Start. */
MCOLL_EXPORT int MCOLL_PERSISTENT(Alltoall_init)(const void *sendbuf, int sendcount,
                                                 MPI_Datatype sendtype, void *recvbuf,
                                                 int recvcount, MPI_Datatype recvtype,
                                                 MPI_Comm comm, MPI_Info info,
                                                 MPI_Request *request) {
  int nbc = mcoll__nbc_on(comm);
  MPI_Request host; /* (the host's init checks the arguments, or is the whole call) */
  int err = MCOLL_PERSISTENT_HOST(Alltoall_init)(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                                 recvtype, comm, info, nbc ? &host : request);
  if (!nbc) return err;
  struct mcoll_mpi_alltoall_args a = {sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm};
  return mcoll__persistent_make(err, &host, alltoall_task, &a, sizeof a,
                                offsetof(struct mcoll_mpi_alltoall_args, comm), NULL, request);
}
#endif

/* T-NBC (tnbc/tnbc.h): taken by every rank alike, from what they agree on (the block
 * size, in place or not, the communicator); 1 if taken (*err: its result). Init: the
 * send data is copied; one small alltoall gives each rank the first and last
 * MCOLL_TNBC_EDGE bytes of every block it receives, which complete the partial pages
 * of its buffer (in block 0 and block P-1); then the whole call goes as a task into
 * a bounce buffer while the buffer's pages are protected. */
static int alltoall_tnbc(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                         void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                         int *err) {
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
      (size_t)recvcount * (size_t)p > INT_MAX || (size_t)sendcount * (size_t)p > INT_MAX)
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
  *err = alltoall_run(edges, 2 * E, MPI_BYTE, edges_in, 2 * E, MPI_BYTE, comm);
  struct mcoll_bytes packed;
  void *target = mcoll__tnbc_recv_target(recvbuf, recvcount * p, recvtype, bytes, &packed);
  if (*err == MPI_SUCCESS && !target)
    mcoll__tnbc_put_edges(recvbuf, bytes, edges_in, edges_in + (size_t)(p - 1) * 2 * E + E);
  struct mcoll_tnbc_call *call = mcoll__tnbc_begin(recvbuf, bytes, block, target);
  if (in_place && !mcoll__tnbc_send_in_place(call, sendbuf, bytes, p, blocks, blocks + p))
    from = send = mcoll__tnbc_send_copy(sendbuf, sendcount * p, sendtype, bytes);
  free(blocks);
  if (send) mcoll__tnbc_own(call, send, bytes);
  int task_err;
  if (mcoll__cfg.TNBC_BLOCKS) {
    mcoll__tnbc_own(call, edges, 4 * E * (size_t)p); /* (the schedule writes edges_in over the blocks) */
    task_err = mcoll__tnbc_alltoall_post(call, comm, from, block, edges_in);
  } else {
    free(edges);
    struct mcoll_mpi_alltoall_args a = {send, (int)block, MPI_BYTE, mcoll__tnbc_target(call), (int)block,
                              MPI_BYTE, comm};
    task_err = mcoll__tnbc_post(call, comm, alltoall_task, &a, sizeof a);
  }
  if (*err == MPI_SUCCESS) *err = task_err;
  mcoll__bytes_release(&packed, recvbuf, recvcount * p, recvtype, 1);
  return 1;
}
