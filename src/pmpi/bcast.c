#include "coll/bcast/bcast.h"
#include "pmpi/wrap.h"

#include <limits.h>
#include <string.h>

static int bcast_run(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_BCAST, comm);
  struct mcoll_bytes data;
  if (!c) return MCOLL_HOST(Bcast, Ibcast, buf, count, type, root, comm);
  if (buf == MPI_IN_PLACE || count < 0 || !mcoll__root_valid(c, root) ||
      !mcoll__type_usable(type) ||
      mcoll__bytes_of(buf, count, type, &data) != MPI_SUCCESS) {
    mcoll__count_invalid(MCOLL_COLL_BCAST);
    return MCOLL_HOST(Bcast, Ibcast, buf, count, type, root, comm);
  }
  int is_root = c->rank == root;
  mcoll__bytes_acquire(buf, count, type, is_root, &data);
  int err = mcoll__bcast(c, data.ptr, data.bytes, root);
  /* After a truncation the bytes that fit are there, as natively. */
  mcoll__bytes_release(&data, buf, count, type,
                       !is_root && (err == MPI_SUCCESS || err == MPI_ERR_TRUNCATE));
  /* Errors reach the communicator's error handler, as the host MPI's would. */
  if (err != MPI_SUCCESS) PMPI_Comm_call_errhandler(comm, err);
  return err;
}

static int bcast_tnbc(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, int *err);

MCOLL_EXPORT int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  int err;
  if (mcoll__tnbc_active && MCOLL_TNBC_ENTER("bcast") &&
      bcast_tnbc(buf, count, type, root, comm, &err))
    return err;
  return bcast_run(buf, count, type, root, comm);
}

/* MPI_Ibcast: the same body as a task (task/task.h). */
static int bcast_task(const void *args) {
  const struct mcoll_mpi_bcast_args *a = args;
  return bcast_run(a->buf, a->count, a->type, a->root, a->comm);
}

MCOLL_EXPORT int MPI_Ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
                            MPI_Request *request) {
  if (!mcoll__nbc_on(comm)) return PMPI_Ibcast(buf, count, type, root, comm, request);
  struct mcoll_mpi_bcast_args a = {buf, count, type, root, comm};
  return mcoll__start(comm, bcast_task, &a, sizeof a, NULL, request);
}

#ifdef MCOLL_PERSISTENT
/* MPI_Bcast_init: the same task, built once and started by MPI_Start. */
MCOLL_EXPORT int MCOLL_PERSISTENT(Bcast_init)(void *buf, int count, MPI_Datatype type, int root,
                                              MPI_Comm comm, MPI_Info info, MPI_Request *request) {
  int nbc = mcoll__nbc_on(comm);
  MPI_Request host; /* (the host's init checks the arguments, or is the whole call) */
  int err = MCOLL_PERSISTENT_HOST(Bcast_init)(buf, count, type, root, comm, info,
                                              nbc ? &host : request);
  if (!nbc) return err;
  struct mcoll_mpi_bcast_args a = {buf, count, type, root, comm};
  return mcoll__persistent_make(err, &host, bcast_task, &a, sizeof a,
                                offsetof(struct mcoll_mpi_bcast_args, comm), NULL, request);
}
#endif

/* T-NBC (tnbc/tnbc.h): taken by every rank alike (the message size, the communicator);
 * 1 if taken (*err: its result). Init: the root copies its data; one small bcast
 * carries the first and last MCOLL_TNBC_EDGE bytes, which complete the partial pages
 * of the receivers' buffers; then the whole message goes as a task into bounce
 * buffers while the receivers' pages are protected. */
enum { BCAST_TNBC_SUB = 256 * 1024 }; /* bytes per sub-message */

static int bcast_tnbc(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, int *err) {
  enum { E = MCOLL_TNBC_EDGE };
  int inter = 1, tsize = 0, p = 0, rank = 0;
  if (buf == MPI_IN_PLACE || comm == MPI_COMM_NULL || count <= 0 ||
      PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS ||
      inter || PMPI_Type_size(type, &tsize) != MPI_SUCCESS || tsize <= 0 ||
      PMPI_Comm_size(comm, &p) != MPI_SUCCESS || root < 0 || root >= p ||
      PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS)
    return 0;
  size_t bytes = (size_t)count * (size_t)tsize;
  if (bytes < (size_t)mcoll__cfg.TNBC_MIN || bytes < 2 * E || bytes > INT_MAX) return 0;
  char edges[2 * E];
  struct mcoll_bytes packed = {0};
  struct mcoll_tnbc_call *call;
  if (rank == root) {
    char *send = mcoll__tnbc_send_copy(buf, count, type, bytes);
    memcpy(edges, send, E);
    memcpy(edges + E, send + bytes - E, E);
    *err = bcast_run(edges, 2 * E, MPI_BYTE, root, comm);
    call = mcoll__tnbc_begin(NULL, 0, 0, send);
    mcoll__tnbc_own(call, send, bytes);
  } else {
    *err = bcast_run(edges, 2 * E, MPI_BYTE, root, comm);
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
