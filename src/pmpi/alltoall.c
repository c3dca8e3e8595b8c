#include "coll/alltoall/alltoall.h"
#include "pmpi/wrap.h"

int mcoll__wrap_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                         int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
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
