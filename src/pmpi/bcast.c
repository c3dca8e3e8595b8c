#include "coll/bcast/bcast.h"
#include "pmpi/wrap.h"
#include "tnbc/entry.h"

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

static int bcast_task(const void *args);

MCOLL_EXPORT int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  int err;
  if (mcoll__tnbc_active && MCOLL_TNBC_ENTER("bcast") &&
      mcoll__tnbc_bcast(buf, count, type, root, comm, bcast_task, &err))
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
