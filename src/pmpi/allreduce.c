#include "pmpi/red_wrap.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static int allreduce_run(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                               MPI_Op op, MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_ALLREDUCE, comm);
  struct mcoll_red_type t;
  if (!c || !mcoll__red_args(MCOLL_COLL_ALLREDUCE, &t, type, op,
                             count >= 0 && mcoll__red_bufs_ok(sendbuf, recvbuf)))
    return MCOLL_HOST(Allreduce, Iallreduce, sendbuf, recvbuf, count, type, op, comm);
  return mcoll__red_return(comm, mcoll__allreduce(c, &t, sendbuf, recvbuf, (size_t)count));
}

static int allreduce_tnbc(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                          MPI_Op op, MPI_Comm comm, int *err);

MCOLL_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                               MPI_Op op, MPI_Comm comm) {
  int err;
  if (mcoll__tnbc_active && MCOLL_TNBC_ENTER("allreduce") &&
      allreduce_tnbc(sendbuf, recvbuf, count, type, op, comm, &err))
    return err;
  return allreduce_run(sendbuf, recvbuf, count, type, op, comm);
}

/* MPI_Iallreduce: the same body as a task (task/task.h). */
static int allreduce_task(const void *args) {
  const struct mcoll_mpi_allreduce_args *a = args;
  return allreduce_run(a->sendbuf, a->recvbuf, a->count, a->type, a->op, a->comm);
}

MCOLL_EXPORT int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                                MPI_Op op, MPI_Comm comm, MPI_Request *request) {
  if (!mcoll__nbc_on(comm))
    return PMPI_Iallreduce(sendbuf, recvbuf, count, type, op, comm, request);
  struct mcoll_mpi_allreduce_args a = {sendbuf, recvbuf, count, type, op, comm};
  return mcoll__start(comm, allreduce_task, &a, sizeof a, NULL, request);
}

#ifdef MCOLL_PERSISTENT
/* MPI_Allreduce_init: the same task, built once and started by MPI_Start. */
MCOLL_EXPORT int MCOLL_PERSISTENT(Allreduce_init)(const void *sendbuf, void *recvbuf, int count,
                                                  MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                                                  MPI_Info info, MPI_Request *request) {
  int nbc = mcoll__nbc_on(comm);
  MPI_Request host; /* (the host's init checks the arguments, or is the whole call) */
  int err = MCOLL_PERSISTENT_HOST(Allreduce_init)(sendbuf, recvbuf, count, type, op, comm, info,
                                                  nbc ? &host : request);
  if (!nbc) return err;
  struct mcoll_mpi_allreduce_args a = {sendbuf, recvbuf, count, type, op, comm};
  return mcoll__persistent_make(err, &host, allreduce_task, &a, sizeof a,
                                offsetof(struct mcoll_mpi_allreduce_args, comm), NULL, request);
}
#endif

/* T-NBC (tnbc/tnbc.h): contiguous types only (the same on every rank), taken by every
 * rank alike; 1 if taken (*err: its result). Init: the input is copied; one small
 * allreduce of the first and last elements (at least MCOLL_TNBC_EDGE bytes each)
 * completes the partial pages; then the whole call goes as a task into a bounce
 * buffer while the pages are protected. */
static int allreduce_tnbc(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                          MPI_Op op, MPI_Comm comm, int *err) {
  enum { E = MCOLL_TNBC_EDGE };
  int inter = 1, tsize = 0;
  if (recvbuf == MPI_IN_PLACE || comm == MPI_COMM_NULL || count <= 0 || op == MPI_OP_NULL ||
      PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter ||
      PMPI_Type_size(type, &tsize) != MPI_SUCCESS || tsize <= 0 || !mcoll__tnbc_contiguous(type))
    return 0;
  size_t bytes = (size_t)count * (size_t)tsize, edge = (E + (size_t)tsize - 1) / (size_t)tsize;
  if (bytes < (size_t)mcoll__cfg.TNBC_MIN || (size_t)count < 2 * edge) return 0;
  size_t eb = edge * (size_t)tsize; /* bytes of one edge */
  char *send = mcoll__tnbc_send_copy(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, count, type, bytes);
  char *edges = malloc(4 * eb);
  if (!edges) {
    free(send);
    return 0;
  }
  memcpy(edges, send, eb);
  memcpy(edges + eb, send + bytes - eb, eb);
  *err = allreduce_run(edges, edges + 2 * eb, (int)(2 * edge), type, op, comm);
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
