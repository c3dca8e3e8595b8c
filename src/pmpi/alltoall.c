#include "coll/alltoall/alltoall.h"
#include "pmpi/wrap.h"
#include "tnbc/entry.h"

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

static int alltoall_task(const void *args);

MCOLL_EXPORT int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                              void *recvbuf, int recvcount, MPI_Datatype recvtype,
                              MPI_Comm comm) {
  int err;
  if (mcoll__tnbc_active && MCOLL_TNBC_ENTER("alltoall") &&
      mcoll__tnbc_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                           alltoall_task, &err))
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
