#include "coll/allgather/allgather.h"
#include "pmpi/wrap.h"

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
  if (recvcount < 0 || recvtype == MPI_DATATYPE_NULL ||
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

MCOLL_EXPORT int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                               void *recvbuf, int recvcount, MPI_Datatype recvtype,
                               MPI_Comm comm) {
  return allgather_run(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

/* MPI_Iallgather: the same body as a task (task/task.h). */
struct allgather_args {
  const void *sendbuf;
  int sendcount;
  MPI_Datatype sendtype;
  void *recvbuf;
  int recvcount;
  MPI_Datatype recvtype;
  MPI_Comm comm;
};

static int allgather_task(const void *args) {
  const struct allgather_args *a = args;
  return allgather_run(a->sendbuf, a->sendcount, a->sendtype, a->recvbuf, a->recvcount, a->recvtype,
                       a->comm);
}

MCOLL_EXPORT int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                                MPI_Request *request) {
  if (!mcoll__nbc_on())
    return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                           request);
  struct allgather_args a = {sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm};
  return mcoll__start(comm, allgather_task, &a, sizeof a, NULL, request);
}

#ifdef MCOLL_PERSISTENT
/* MPI_Allgather_init: the same task, built once and started by MPI_Start. */
MCOLL_EXPORT int MCOLL_PERSISTENT(Allgather_init)(const void *sendbuf, int sendcount,
                                                  MPI_Datatype sendtype, void *recvbuf,
                                                  int recvcount, MPI_Datatype recvtype,
                                                  MPI_Comm comm, MPI_Info info,
                                                  MPI_Request *request) {
  if (!mcoll__nbc_on())
    return MCOLL_PERSISTENT_HOST(Allgather_init)(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                                 recvtype, comm, info, request);
  struct allgather_args a = {sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm};
  return mcoll__persistent_init(comm, allgather_task, &a, sizeof a, NULL, request);
}
#endif
