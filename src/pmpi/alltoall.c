#include "coll/alltoall/alltoall.h"
#include "pmpi/wrap.h"

/* MPI_Alltoall, MPI_Alltoallv and MPI_Alltoallw: the blocks the two sides describe
 * (coll/alltoall/alltoall.h), once the call's own checks passed (args_ok). */
MCOLL_SHARED_BODY int alltoall_blocks(struct mcoll_a2a *a, struct mcoll_a2a_side *send,
                                      struct mcoll_a2a_side *recv, int args_ok) {
  if (!args_ok || mcoll__a2a_blocks(a, send, recv) != MPI_SUCCESS)
    return mcoll__invalid(a->coll);
  int err = mcoll__a2a_run(a);
  mcoll__a2a_blocks_release(a, err == MPI_SUCCESS);
  return err;
}

/* The send type's facts: the receive type's where both are one handle (asked once). */
static inline int send_type_info(MPI_Datatype sendtype, MPI_Datatype recvtype,
                                 const struct mcoll_type_info *rt, struct mcoll_type_info *st) {
  if (sendtype == recvtype) {
    *st = *rt;
    return MPI_SUCCESS;
  }
  return mcoll__type_info(sendtype, st);
}

int mcoll__wrap_alltoall(struct mcoll_comm *c, const void *sendbuf, int sendcount,
                         MPI_Datatype sendtype, void *recvbuf, int recvcount,
                         MPI_Datatype recvtype, MPI_Comm comm) {
  (void)comm;
  int inplace = sendbuf == MPI_IN_PLACE;
  struct mcoll_type_info st = {0}, rt = {0};
  int ok = recvbuf != MPI_IN_PLACE && !mcoll__bufs_aliased(sendbuf, recvbuf) && recvcount >= 0 &&
           mcoll__type_info(recvtype, &rt) == MPI_SUCCESS &&
           (inplace ||
            (sendcount >= 0 && send_type_info(sendtype, recvtype, &rt, &st) == MPI_SUCCESS &&
             (size_t)sendcount * (size_t)st.size == (size_t)recvcount * (size_t)rt.size));
  struct mcoll_a2a a;
  /* Plain blocks on both sides: no per-block description (nothing to release). */
  if (ok && mcoll__a2a_blocks_direct(&a, c, sendbuf, sendcount, &st, recvbuf, recvcount, &rt))
    return mcoll__a2a_run(&a);
  a = (struct mcoll_a2a){.c = c, .coll = MCOLL_COLL_ALLTOALL, .uniform = 1,
                         .block = (size_t)recvcount * (size_t)rt.size, .inplace = inplace};
  struct mcoll_a2a_side ss = {.buf = (char *)sendbuf, .count = sendcount, .type = sendtype};
  struct mcoll_a2a_side rs = {.buf = recvbuf, .count = recvcount, .type = recvtype};
  return alltoall_blocks(&a, &ss, &rs, ok);
}

int mcoll__wrap_alltoallv(struct mcoll_comm *c, const void *sendbuf, const int sendcounts[],
                          const int sdispls[], MPI_Datatype sendtype, void *recvbuf,
                          const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                          MPI_Comm comm) {
  (void)comm;
  int inplace = sendbuf == MPI_IN_PLACE;
  int ok = recvbuf != MPI_IN_PLACE && !mcoll__bufs_aliased(sendbuf, recvbuf) &&
           recvtype != MPI_DATATYPE_NULL && mcoll__counts_valid(recvcounts, rdispls, c->size) &&
           (inplace ||
            (sendtype != MPI_DATATYPE_NULL && mcoll__counts_valid(sendcounts, sdispls, c->size)));
  struct mcoll_a2a a = {.c = c, .coll = MCOLL_COLL_ALLTOALLV, .inplace = inplace};
  struct mcoll_a2a_side ss = {.buf = (char *)sendbuf, .counts = sendcounts, .displs = sdispls,
                              .type = sendtype};
  struct mcoll_a2a_side rs = {.buf = recvbuf, .counts = recvcounts, .displs = rdispls,
                              .type = recvtype};
  return alltoall_blocks(&a, &ss, &rs, ok);
}

/* An alltoallw side's arrays: present, no count negative, no datatype null. */
static int side_valid(const int *counts, const int *displs, const MPI_Datatype *types, int n) {
  if (!counts || !displs || !types) return 0;
  for (int i = 0; i < n; i++)
    if (counts[i] < 0 || types[i] == MPI_DATATYPE_NULL) return 0;
  return 1;
}

int mcoll__wrap_alltoallw(struct mcoll_comm *c, const void *sendbuf, const int sendcounts[],
                          const int sdispls[], const MPI_Datatype sendtypes[], void *recvbuf,
                          const int recvcounts[], const int rdispls[],
                          const MPI_Datatype recvtypes[], MPI_Comm comm) {
  (void)comm;
  int inplace = sendbuf == MPI_IN_PLACE;
  int ok = recvbuf != MPI_IN_PLACE && !mcoll__bufs_aliased(sendbuf, recvbuf) &&
           side_valid(recvcounts, rdispls, recvtypes, c->size) &&
           (inplace || side_valid(sendcounts, sdispls, sendtypes, c->size));
  struct mcoll_a2a a = {.c = c, .coll = MCOLL_COLL_ALLTOALLW, .inplace = inplace};
  struct mcoll_a2a_side ss = {.buf = (char *)sendbuf, .counts = sendcounts, .displs = sdispls,
                              .types = sendtypes};
  struct mcoll_a2a_side rs = {.buf = recvbuf, .counts = recvcounts, .displs = rdispls,
                              .types = recvtypes};
  return alltoall_blocks(&a, &ss, &rs, ok);
}
