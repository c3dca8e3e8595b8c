#include "coll/allgather/allgather.h"
#include "pmpi/wrap.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static int allgather_run(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                               void *recvbuf, int recvcount, MPI_Datatype recvtype,
                               MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_ALLGATHER, comm);
  if (!c)
    return MCOLL_HOST(Allgather, Iallgather, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                      recvtype, comm);
  int in_place = sendbuf == MPI_IN_PLACE;
  struct mcoll_bytes send;
  struct mcoll_blocks dst;
  if (mcoll__bufs_aliased(sendbuf, recvbuf) || recvcount < 0 || recvtype == MPI_DATATYPE_NULL ||
      mcoll__blocks_describe(&dst, recvbuf, c->size, recvcount, NULL, NULL, recvtype) !=
          MPI_SUCCESS ||
      (!in_place && (sendcount < 0 || sendtype == MPI_DATATYPE_NULL ||
                     mcoll__bytes_of(sendbuf, sendcount, sendtype, &send) != MPI_SUCCESS ||
                     send.bytes != mcoll__block_len(&dst, c->rank)))) {
    mcoll__count_invalid(MCOLL_COLL_ALLGATHER);
    return MCOLL_HOST(Allgather, Iallgather, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                      recvtype, comm);
  }
  if (!in_place) mcoll__bytes_acquire(sendbuf, sendcount, sendtype, 1, &send);
  int err = mcoll__allgather(c, MCOLL_COLL_ALLGATHER, in_place ? NULL : send.ptr,
                             mcoll__block_len(&dst, c->rank), &dst);
  if (!in_place) mcoll__bytes_release(&send, NULL, sendcount, sendtype, 0);
  return err;
}

static int allgather_tnbc(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                          void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                          int *err);

MCOLL_EXPORT int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                               void *recvbuf, int recvcount, MPI_Datatype recvtype,
                               MPI_Comm comm) {
  int err;
  if (mcoll__tnbc_active && MCOLL_TNBC_ENTER("allgather") &&
      allgather_tnbc(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &err))
    return err;
  return allgather_run(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

/* MPI_Iallgather: the same body as a task (task/task.h). */
static int allgather_task(const void *args) {
  const struct mcoll_mpi_allgather_args *a = args;
  return allgather_run(a->sendbuf, a->sendcount, a->sendtype, a->recvbuf, a->recvcount, a->recvtype,
                       a->comm);
}

MCOLL_EXPORT int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                                MPI_Request *request) {
  if (!mcoll__nbc_on(comm))
    return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                           request);
  struct mcoll_mpi_allgather_args a = {sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm};
  return mcoll__start(comm, allgather_task, &a, sizeof a, NULL, request);
}

#ifdef MCOLL_PERSISTENT
/* MPI_Allgather_init: the same task, built once and started by MPI_Start. */
MCOLL_EXPORT int MCOLL_PERSISTENT(Allgather_init)(const void *sendbuf, int sendcount,
                                                  MPI_Datatype sendtype, void *recvbuf,
                                                  int recvcount, MPI_Datatype recvtype,
                                                  MPI_Comm comm, MPI_Info info,
                                                  MPI_Request *request) {
  int nbc = mcoll__nbc_on(comm);
  MPI_Request host; /* (the host's init checks the arguments, or is the whole call) */
  int err = MCOLL_PERSISTENT_HOST(Allgather_init)(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                                  recvtype, comm, info, nbc ? &host : request);
  if (!nbc) return err;
  struct mcoll_mpi_allgather_args a = {sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm};
  return mcoll__persistent_make(err, &host, allgather_task, &a, sizeof a,
                                offsetof(struct mcoll_mpi_allgather_args, comm), NULL, request);
}
#endif

/* T-NBC (tnbc/tnbc.h): taken by every rank alike (block size, in place or not, the
 * communicator); 1 if taken (*err: its result). Init: the rank's block is copied;
 * one small allgather carries the first and last MCOLL_TNBC_EDGE bytes of every block,
 * which complete the partial pages of the buffer (in blocks 0 and P-1); then the
 * whole call goes as a task into a bounce buffer while the pages are protected. */
static int allgather_tnbc(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                          void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                          int *err) {
  enum { E = MCOLL_TNBC_EDGE };
  int inter = 1, tsize = 0, p = 0, rank = 0;
  if (recvbuf == MPI_IN_PLACE || sendbuf == recvbuf || comm == MPI_COMM_NULL || recvcount <= 0 ||
      PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter ||
      PMPI_Type_size(recvtype, &tsize) != MPI_SUCCESS || tsize <= 0 ||
      PMPI_Comm_size(comm, &p) != MPI_SUCCESS || PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS)
    return 0;
  size_t block = (size_t)recvcount * (size_t)tsize, bytes = block * (size_t)p;
  if (block < (size_t)mcoll__cfg.TNBC_MIN || block < 2 * E || block > INT_MAX ||
      (size_t)recvcount * (size_t)p > INT_MAX)
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
  *err = allgather_run(edges, 2 * E, MPI_BYTE, edges_in, 2 * E, MPI_BYTE, comm);
  struct mcoll_bytes packed;
  void *target = mcoll__tnbc_recv_target(recvbuf, recvcount * p, recvtype, bytes, &packed);
  if (*err == MPI_SUCCESS && !target)
    mcoll__tnbc_put_edges(recvbuf, bytes, edges_in, edges_in + (size_t)(p - 1) * 2 * E + E);
  free(edges);
  struct mcoll_tnbc_call *call = mcoll__tnbc_begin(recvbuf, bytes, block, target);
  mcoll__tnbc_own(call, send, block);
  struct mcoll_mpi_allgather_args a = {send, (int)block, MPI_BYTE, mcoll__tnbc_target(call), (int)block,
                             MPI_BYTE, comm};
  int task_err = mcoll__tnbc_post(call, comm, allgather_task, &a, sizeof a);
  if (*err == MPI_SUCCESS) *err = task_err;
  mcoll__bytes_release(&packed, recvbuf, recvcount * p, recvtype, 1);
  return 1;
}
