/* MPI-4 large-count collectives (MPI_Bcast_c, ...). Clients built against an MPI-4
 * library (mpi4py on MPICH 4.0, for one) call these instead of the int versions.
 * When every count and displacement fits in an int, the call goes to mcoll's int
 * wrapper, which runs it (or passes it on, invalid arguments included); otherwise
 * straight to the host MPI's own _c function. Counts and displacements are read
 * only where the standard says they are significant (the root's, for the rooted v
 * collectives; none of the send side's with MPI_IN_PLACE). */
#include <mpi.h>

#if MPI_VERSION >= 4

#include <limits.h>
#include <stdlib.h>

#include "core/xmalloc.h"
#include "mcoll.h"

static int fits(MPI_Count n) { return n >= INT_MIN && n <= INT_MAX; }

/* int copies of the n-entry arrays counts (MPI_Count) and displs (MPI_Aint, may be
 * NULL) in one allocation: *out_counts, then *out_displs. Returns 0, allocating
 * nothing, when counts is NULL or an entry does not fit (the host MPI takes those). */
static int narrow(const MPI_Count *counts, const MPI_Aint *displs, int n, int **out_counts,
                  int **out_displs) {
  *out_counts = *out_displs = NULL;
  if (!counts) return 0;
  for (int i = 0; i < n; i++)
    if (!fits(counts[i]) || (displs && !fits(displs[i]))) return 0;
  int *ints = mcoll__xmalloc(sizeof(int) * 2 * (size_t)(n > 0 ? n : 1));
  for (int i = 0; i < n; i++) ints[i] = (int)counts[i];
  for (int i = 0; displs && i < n; i++) ints[n + i] = (int)displs[i];
  *out_counts = ints;
  *out_displs = displs ? ints + n : NULL;
  return 1;
}

/* Entries of a v/w argument array: the group size (the remote one on an
 * intercommunicator); 0 for an invalid communicator (the host MPI reports it). */
static int comm_entries(MPI_Comm comm) {
  int inter = 0, n = 0;
  if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return 0;
  if ((inter ? PMPI_Comm_remote_size(comm, &n) : PMPI_Comm_size(comm, &n)) != MPI_SUCCESS)
    return 0;
  return n;
}

static int am_root(MPI_Comm comm, int root) {
  int rank = -1, inter = 0;
  if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return 0;
  if (inter) return root == MPI_ROOT;
  return PMPI_Comm_rank(comm, &rank) == MPI_SUCCESS && rank == root;
}

MCOLL_EXPORT int MPI_Bcast_c(void *buf, MPI_Count count, MPI_Datatype type, int root,
                             MPI_Comm comm) {
  if (!fits(count)) return PMPI_Bcast_c(buf, count, type, root, comm);
  return MPI_Bcast(buf, (int)count, type, root, comm);
}

MCOLL_EXPORT int MPI_Reduce_c(const void *sendbuf, void *recvbuf, MPI_Count count,
                              MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
  if (!fits(count)) return PMPI_Reduce_c(sendbuf, recvbuf, count, type, op, root, comm);
  return MPI_Reduce(sendbuf, recvbuf, (int)count, type, op, root, comm);
}

MCOLL_EXPORT int MPI_Allreduce_c(const void *sendbuf, void *recvbuf, MPI_Count count,
                                 MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  if (!fits(count)) return PMPI_Allreduce_c(sendbuf, recvbuf, count, type, op, comm);
  return MPI_Allreduce(sendbuf, recvbuf, (int)count, type, op, comm);
}

MCOLL_EXPORT int MPI_Scan_c(const void *sendbuf, void *recvbuf, MPI_Count count,
                            MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  if (!fits(count)) return PMPI_Scan_c(sendbuf, recvbuf, count, type, op, comm);
  return MPI_Scan(sendbuf, recvbuf, (int)count, type, op, comm);
}

MCOLL_EXPORT int MPI_Exscan_c(const void *sendbuf, void *recvbuf, MPI_Count count,
                              MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  if (!fits(count)) return PMPI_Exscan_c(sendbuf, recvbuf, count, type, op, comm);
  return MPI_Exscan(sendbuf, recvbuf, (int)count, type, op, comm);
}

MCOLL_EXPORT int MPI_Reduce_scatter_block_c(const void *sendbuf, void *recvbuf,
                                            MPI_Count recvcount, MPI_Datatype type, MPI_Op op,
                                            MPI_Comm comm) {
  if (!fits(recvcount))
    return PMPI_Reduce_scatter_block_c(sendbuf, recvbuf, recvcount, type, op, comm);
  return MPI_Reduce_scatter_block(sendbuf, recvbuf, (int)recvcount, type, op, comm);
}

MCOLL_EXPORT int MPI_Reduce_scatter_c(const void *sendbuf, void *recvbuf,
                                      const MPI_Count recvcounts[], MPI_Datatype type, MPI_Op op,
                                      MPI_Comm comm) {
  int *counts, *unused;
  if (!narrow(recvcounts, NULL, comm_entries(comm), &counts, &unused))
    return PMPI_Reduce_scatter_c(sendbuf, recvbuf, recvcounts, type, op, comm);
  int err = MPI_Reduce_scatter(sendbuf, recvbuf, counts, type, op, comm);
  free(counts);
  return err;
}

MCOLL_EXPORT int MPI_Allgather_c(const void *sendbuf, MPI_Count sendcount,
                                 MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount,
                                 MPI_Datatype recvtype, MPI_Comm comm) {
  if (!fits(sendcount) || !fits(recvcount))
    return PMPI_Allgather_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  return MPI_Allgather(sendbuf, (int)sendcount, sendtype, recvbuf, (int)recvcount, recvtype,
                       comm);
}

MCOLL_EXPORT int MPI_Gather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                              void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                              int root, MPI_Comm comm) {
  if (!fits(sendcount) || !fits(recvcount))
    return PMPI_Gather_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  return MPI_Gather(sendbuf, (int)sendcount, sendtype, recvbuf, (int)recvcount, recvtype, root,
                    comm);
}

MCOLL_EXPORT int MPI_Scatter_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                               void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                               int root, MPI_Comm comm) {
  if (!fits(sendcount) || !fits(recvcount))
    return PMPI_Scatter_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                          comm);
  return MPI_Scatter(sendbuf, (int)sendcount, sendtype, recvbuf, (int)recvcount, recvtype, root,
                     comm);
}

MCOLL_EXPORT int MPI_Alltoall_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                                void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                                MPI_Comm comm) {
  if (!fits(sendcount) || !fits(recvcount))
    return PMPI_Alltoall_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  return MPI_Alltoall(sendbuf, (int)sendcount, sendtype, recvbuf, (int)recvcount, recvtype,
                      comm);
}

MCOLL_EXPORT int MPI_Allgatherv_c(const void *sendbuf, MPI_Count sendcount,
                                  MPI_Datatype sendtype, void *recvbuf,
                                  const MPI_Count recvcounts[], const MPI_Aint displs[],
                                  MPI_Datatype recvtype, MPI_Comm comm) {
  int *counts, *at;
  if (!fits(sendcount) || !narrow(recvcounts, displs, comm_entries(comm), &counts, &at))
    return PMPI_Allgatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                             recvtype, comm);
  int err = MPI_Allgatherv(sendbuf, (int)sendcount, sendtype, recvbuf, counts, at, recvtype,
                           comm);
  free(counts);
  return err;
}

MCOLL_EXPORT int MPI_Gatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                               void *recvbuf, const MPI_Count recvcounts[],
                               const MPI_Aint displs[], MPI_Datatype recvtype, int root,
                               MPI_Comm comm) {
  int *counts = NULL, *at = NULL;
  if (!fits(sendcount) ||
      (am_root(comm, root) && !narrow(recvcounts, displs, comm_entries(comm), &counts, &at)))
    return PMPI_Gatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                          root, comm);
  int err = MPI_Gatherv(sendbuf, (int)sendcount, sendtype, recvbuf, counts, at, recvtype, root,
                        comm);
  free(counts);
  return err;
}

MCOLL_EXPORT int MPI_Scatterv_c(const void *sendbuf, const MPI_Count sendcounts[],
                                const MPI_Aint displs[], MPI_Datatype sendtype, void *recvbuf,
                                MPI_Count recvcount, MPI_Datatype recvtype, int root,
                                MPI_Comm comm) {
  int *counts = NULL, *at = NULL;
  if (!fits(recvcount) ||
      (am_root(comm, root) && !narrow(sendcounts, displs, comm_entries(comm), &counts, &at)))
    return PMPI_Scatterv_c(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,
                           root, comm);
  int err = MPI_Scatterv(sendbuf, counts, at, sendtype, recvbuf, (int)recvcount, recvtype, root,
                         comm);
  free(counts);
  return err;
}

MCOLL_EXPORT int MPI_Alltoallv_c(const void *sendbuf, const MPI_Count sendcounts[],
                                 const MPI_Aint sdispls[], MPI_Datatype sendtype, void *recvbuf,
                                 const MPI_Count recvcounts[], const MPI_Aint rdispls[],
                                 MPI_Datatype recvtype, MPI_Comm comm) {
  int n = comm_entries(comm);
  int *scounts = NULL, *sat = NULL, *rcounts, *rat;
  if (!narrow(recvcounts, rdispls, n, &rcounts, &rat))
    return PMPI_Alltoallv_c(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                            rdispls, recvtype, comm);
  if (sendbuf != MPI_IN_PLACE && !narrow(sendcounts, sdispls, n, &scounts, &sat)) {
    free(rcounts);
    return PMPI_Alltoallv_c(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                            rdispls, recvtype, comm);
  }
  int err = MPI_Alltoallv(sendbuf, scounts, sat, sendtype, recvbuf, rcounts, rat, recvtype, comm);
  free(scounts);
  free(rcounts);
  return err;
}

MCOLL_EXPORT int MPI_Alltoallw_c(const void *sendbuf, const MPI_Count sendcounts[],
                                 const MPI_Aint sdispls[], const MPI_Datatype sendtypes[],
                                 void *recvbuf, const MPI_Count recvcounts[],
                                 const MPI_Aint rdispls[], const MPI_Datatype recvtypes[],
                                 MPI_Comm comm) {
  int n = comm_entries(comm);
  int *scounts = NULL, *sat = NULL, *rcounts, *rat;
  if (!narrow(recvcounts, rdispls, n, &rcounts, &rat))
    return PMPI_Alltoallw_c(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
                            rdispls, recvtypes, comm);
  if (sendbuf != MPI_IN_PLACE && !narrow(sendcounts, sdispls, n, &scounts, &sat)) {
    free(rcounts);
    return PMPI_Alltoallw_c(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
                            rdispls, recvtypes, comm);
  }
  int err = MPI_Alltoallw(sendbuf, scounts, sat, sendtypes, recvbuf, rcounts, rat, recvtypes,
                          comm);
  free(scounts);
  free(rcounts);
  return err;
}


/* The non-blocking forms whose counts are scalars (the v/w forms' narrowed arrays
 * would have to live until completion: they go to the host MPI). */
MCOLL_EXPORT int MPI_Ibcast_c(void *buf, MPI_Count count, MPI_Datatype type, int root,
                              MPI_Comm comm, MPI_Request *req) {
  if (!fits(count)) return PMPI_Ibcast_c(buf, count, type, root, comm, req);
  return MPI_Ibcast(buf, (int)count, type, root, comm, req);
}

MCOLL_EXPORT int MPI_Ireduce_c(const void *sendbuf, void *recvbuf, MPI_Count count,
                               MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
                               MPI_Request *req) {
  if (!fits(count)) return PMPI_Ireduce_c(sendbuf, recvbuf, count, type, op, root, comm, req);
  return MPI_Ireduce(sendbuf, recvbuf, (int)count, type, op, root, comm, req);
}

MCOLL_EXPORT int MPI_Iallreduce_c(const void *sendbuf, void *recvbuf, MPI_Count count,
                                  MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request *req) {
  if (!fits(count)) return PMPI_Iallreduce_c(sendbuf, recvbuf, count, type, op, comm, req);
  return MPI_Iallreduce(sendbuf, recvbuf, (int)count, type, op, comm, req);
}

MCOLL_EXPORT int MPI_Iscan_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype type,
                             MPI_Op op, MPI_Comm comm, MPI_Request *req) {
  if (!fits(count)) return PMPI_Iscan_c(sendbuf, recvbuf, count, type, op, comm, req);
  return MPI_Iscan(sendbuf, recvbuf, (int)count, type, op, comm, req);
}

MCOLL_EXPORT int MPI_Iexscan_c(const void *sendbuf, void *recvbuf, MPI_Count count,
                               MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request *req) {
  if (!fits(count)) return PMPI_Iexscan_c(sendbuf, recvbuf, count, type, op, comm, req);
  return MPI_Iexscan(sendbuf, recvbuf, (int)count, type, op, comm, req);
}

MCOLL_EXPORT int MPI_Ireduce_scatter_block_c(const void *sendbuf, void *recvbuf,
                                             MPI_Count recvcount, MPI_Datatype type, MPI_Op op,
                                             MPI_Comm comm, MPI_Request *req) {
  if (!fits(recvcount))
    return PMPI_Ireduce_scatter_block_c(sendbuf, recvbuf, recvcount, type, op, comm, req);
  return MPI_Ireduce_scatter_block(sendbuf, recvbuf, (int)recvcount, type, op, comm, req);
}

#define MCOLL_IGATHER_FAMILY_C(Name, name)                                                      \
  MCOLL_EXPORT int MPI_I##name##_c(const void *sendbuf, MPI_Count sendcount,                    \
                                   MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount,   \
                                   MPI_Datatype recvtype, MCOLL_ROOT_PARAM MPI_Comm comm,       \
                                   MPI_Request *req) {                                          \
    if (!fits(sendcount) || !fits(recvcount))                                                   \
      return PMPI_I##name##_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,       \
                              MCOLL_ROOT_ARG comm, req);                                        \
    return MPI_I##name(sendbuf, (int)sendcount, sendtype, recvbuf, (int)recvcount, recvtype,    \
                       MCOLL_ROOT_ARG comm, req);                                               \
  }
#define MCOLL_ROOT_PARAM
#define MCOLL_ROOT_ARG
MCOLL_IGATHER_FAMILY_C(Allgather, allgather)
MCOLL_IGATHER_FAMILY_C(Alltoall, alltoall)
#undef MCOLL_ROOT_PARAM
#undef MCOLL_ROOT_ARG
#define MCOLL_ROOT_PARAM int root,
#define MCOLL_ROOT_ARG root,
MCOLL_IGATHER_FAMILY_C(Gather, gather)
MCOLL_IGATHER_FAMILY_C(Scatter, scatter)
#undef MCOLL_ROOT_PARAM
#undef MCOLL_ROOT_ARG

#endif /* MPI_VERSION >= 4 */
