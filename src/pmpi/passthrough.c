/* Collectives without an mcoll algorithm yet: counted, then straight to the host MPI. */
#include "pmpi/wrap.h"

static void passthrough(enum mcoll_coll coll) {
  mcoll__config_load();
  if (!mcoll__cfg.DISABLE) mcoll__count_passthrough(coll);
}

MCOLL_EXPORT int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                            MPI_Op op, int root, MPI_Comm comm) {
  passthrough(MCOLL_COLL_REDUCE);
  return PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
}

MCOLL_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                               MPI_Op op, MPI_Comm comm) {
  passthrough(MCOLL_COLL_ALLREDUCE);
  return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
}

MCOLL_EXPORT int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                               void *recvbuf, int recvcount, MPI_Datatype recvtype,
                               MPI_Comm comm) {
  passthrough(MCOLL_COLL_ALLGATHER);
  return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

MCOLL_EXPORT int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                void *recvbuf, const int recvcounts[], const int displs[],
                                MPI_Datatype recvtype, MPI_Comm comm) {
  passthrough(MCOLL_COLL_ALLGATHERV);
  return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                         comm);
}

MCOLL_EXPORT int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                            void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                            MPI_Comm comm) {
  passthrough(MCOLL_COLL_GATHER);
  return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

MCOLL_EXPORT int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                             void *recvbuf, const int recvcounts[], const int displs[],
                             MPI_Datatype recvtype, int root, MPI_Comm comm) {
  passthrough(MCOLL_COLL_GATHERV);
  return PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root,
                      comm);
}

MCOLL_EXPORT int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                             void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                             MPI_Comm comm) {
  passthrough(MCOLL_COLL_SCATTER);
  return PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

MCOLL_EXPORT int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                              MPI_Datatype sendtype, void *recvbuf, int recvcount,
                              MPI_Datatype recvtype, int root, MPI_Comm comm) {
  passthrough(MCOLL_COLL_SCATTERV);
  return PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root,
                       comm);
}

MCOLL_EXPORT int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                              void *recvbuf, int recvcount, MPI_Datatype recvtype,
                              MPI_Comm comm) {
  passthrough(MCOLL_COLL_ALLTOALL);
  return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

MCOLL_EXPORT int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                               MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                               const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  passthrough(MCOLL_COLL_ALLTOALLV);
  return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                        recvtype, comm);
}

MCOLL_EXPORT int MPI_Alltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[],
                               const MPI_Datatype sendtypes[], void *recvbuf,
                               const int recvcounts[], const int rdispls[],
                               const MPI_Datatype recvtypes[], MPI_Comm comm) {
  passthrough(MCOLL_COLL_ALLTOALLW);
  return PMPI_Alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                        recvtypes, comm);
}

MCOLL_EXPORT int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                                    MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  passthrough(MCOLL_COLL_REDUCE_SCATTER);
  return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm);
}

MCOLL_EXPORT int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                          MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  passthrough(MCOLL_COLL_REDUCE_SCATTER_BLOCK);
  return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm);
}

MCOLL_EXPORT int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                          MPI_Op op, MPI_Comm comm) {
  passthrough(MCOLL_COLL_SCAN);
  return PMPI_Scan(sendbuf, recvbuf, count, type, op, comm);
}

MCOLL_EXPORT int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                            MPI_Op op, MPI_Comm comm) {
  passthrough(MCOLL_COLL_EXSCAN);
  return PMPI_Exscan(sendbuf, recvbuf, count, type, op, comm);
}
