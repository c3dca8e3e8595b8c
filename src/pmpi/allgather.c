#include "coll/allgather/allgather.h"
#include "pmpi/wrap.h"
#include "tnbc/entry.h"

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

static int allgather_task(const void *args);

MCOLL_EXPORT int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                               void *recvbuf, int recvcount, MPI_Datatype recvtype,
                               MPI_Comm comm) {
  int err;
  if (mcoll__tnbc_active && MCOLL_TNBC_ENTER("allgather") &&
      mcoll__tnbc_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                            allgather_task, &err))
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
