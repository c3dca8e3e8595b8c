#include "coll/alltoall/alltoall.h"
#include "pmpi/wrap.h"

static int counts_valid(const int *counts, const int *displs, int n) {
  if (!counts || !displs) return 0;
  for (int i = 0; i < n; i++)
    if (counts[i] < 0) return 0;
  return 1;
}

int mcoll__wrap_alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                          MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                          const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_ALLTOALLV, comm);
  if (!c)
    return MCOLL_HOST(Alltoallv, Ialltoallv, sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                      recvcounts, rdispls,
                          recvtype, comm);
  int inplace = sendbuf == MPI_IN_PLACE;
  struct mcoll_a2a a = {.c = c, .coll = MCOLL_COLL_ALLTOALLV, .inplace = inplace};
  struct mcoll_a2a_side ss = {.buf = (char *)sendbuf, .counts = sendcounts, .displs = sdispls,
                              .type = sendtype};
  struct mcoll_a2a_side rs = {.buf = recvbuf, .counts = recvcounts, .displs = rdispls,
                              .type = recvtype};
  if (recvbuf == MPI_IN_PLACE || mcoll__bufs_aliased(sendbuf, recvbuf) ||
      recvtype == MPI_DATATYPE_NULL ||
      !counts_valid(recvcounts, rdispls, c->size) ||
      (!inplace &&
       (sendtype == MPI_DATATYPE_NULL || !counts_valid(sendcounts, sdispls, c->size))) ||
      mcoll__a2a_blocks(&a, &ss, &rs) != MPI_SUCCESS) {
    mcoll__count_invalid(MCOLL_COLL_ALLTOALLV);
    return MCOLL_HOST(Alltoallv, Ialltoallv, sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                      recvcounts, rdispls,
                          recvtype, comm);
  }
  int err = mcoll__a2a_run(&a);
  mcoll__a2a_blocks_release(&a, err == MPI_SUCCESS);
  return err;
}
