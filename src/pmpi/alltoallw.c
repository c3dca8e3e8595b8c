#include "coll/alltoall/alltoall.h"
#include "pmpi/wrap.h"

static int side_valid(const int *counts, const int *displs, const MPI_Datatype *types, int n) {
  if (!counts || !displs || !types) return 0;
  for (int i = 0; i < n; i++)
    if (counts[i] < 0 || types[i] == MPI_DATATYPE_NULL) return 0;
  return 1;
}

int mcoll__wrap_alltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[],
                          const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                          const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_ALLTOALLW, comm);
  if (!c)
    return MCOLL_HOST(Alltoallw, Ialltoallw, sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
                      recvcounts, rdispls,
                          recvtypes, comm);
  int inplace = sendbuf == MPI_IN_PLACE;
  struct mcoll_a2a a = {.c = c, .coll = MCOLL_COLL_ALLTOALLW, .inplace = inplace};
  struct mcoll_a2a_side ss = {.buf = (char *)sendbuf, .counts = sendcounts, .displs = sdispls,
                              .types = sendtypes};
  struct mcoll_a2a_side rs = {.buf = recvbuf, .counts = recvcounts, .displs = rdispls,
                              .types = recvtypes};
  if (recvbuf == MPI_IN_PLACE || mcoll__bufs_aliased(sendbuf, recvbuf) ||
      !side_valid(recvcounts, rdispls, recvtypes, c->size) ||
      (!inplace && !side_valid(sendcounts, sdispls, sendtypes, c->size)) ||
      mcoll__a2a_blocks(&a, &ss, &rs) != MPI_SUCCESS) {
    mcoll__count_invalid(MCOLL_COLL_ALLTOALLW);
    return MCOLL_HOST(Alltoallw, Ialltoallw, sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
                      recvcounts, rdispls,
                          recvtypes, comm);
  }
  int err = mcoll__a2a_run(&a);
  mcoll__a2a_blocks_release(&a, err == MPI_SUCCESS);
  return err;
}
