#include "coll/alltoall/alltoall.h"
#include "pmpi/wrap.h"

static int alltoall_run(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                              void *recvbuf, int recvcount, MPI_Datatype recvtype,
                              MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_ALLTOALL, comm);
  if (!c)
    return MCOLL_HOST(Alltoall, Ialltoall, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                      recvtype, comm);
  int inplace = sendbuf == MPI_IN_PLACE;
  struct mcoll_type_info st = {0}, rt = {0};
  if (recvbuf == MPI_IN_PLACE || recvcount < 0 || mcoll__type_info(recvtype, &rt) != MPI_SUCCESS ||
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

MCOLL_EXPORT int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                              void *recvbuf, int recvcount, MPI_Datatype recvtype,
                              MPI_Comm comm) {
  return alltoall_run(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

/* MPI_Ialltoall: the same body as a task (task/task.h). */
struct alltoall_args {
  const void *sendbuf;
  int sendcount;
  MPI_Datatype sendtype;
  void *recvbuf;
  int recvcount;
  MPI_Datatype recvtype;
  MPI_Comm comm;
};

static int alltoall_task(const void *args) {
  const struct alltoall_args *a = args;
  return alltoall_run(a->sendbuf, a->sendcount, a->sendtype, a->recvbuf, a->recvcount, a->recvtype,
                      a->comm);
}

MCOLL_EXPORT int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                               void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                               MPI_Request *request) {
  if (!mcoll__nbc_on())
    return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                          request);
  struct alltoall_args a = {sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm};
  return mcoll__start(comm, alltoall_task, &a, sizeof a, NULL, request);
}

#ifdef MCOLL_PERSISTENT
/* MPI_Alltoall_init: the same task, built once and started by MPI_Start. */
MCOLL_EXPORT int MCOLL_PERSISTENT(Alltoall_init)(const void *sendbuf, int sendcount,
                                                 MPI_Datatype sendtype, void *recvbuf,
                                                 int recvcount, MPI_Datatype recvtype,
                                                 MPI_Comm comm, MPI_Info info,
                                                 MPI_Request *request) {
  if (!mcoll__nbc_on())
    return MCOLL_PERSISTENT_HOST(Alltoall_init)(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                                recvtype, comm, info, request);
  struct alltoall_args a = {sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm};
  return mcoll__persistent_init(comm, alltoall_task, &a, sizeof a, NULL, request);
}
#endif
