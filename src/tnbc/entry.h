/* The blocking calls that T-NBC may return early from (tnbc/tnbc.h): whether to take
 * the call, its init exchange and its post. Each is called by the collective's
 * blocking wrapper (pmpi/) with the call's arguments and the collective's body as
 * a task (`<coll>_task`: mcoll's blocking call on a struct mcoll_mpi_<coll>_args,
 * core/collectives.h), which runs the init exchange and, as a task, the call.
 * Returns 1 if taken (*err: the call's result), 0 if the wrapper runs the call. */
#ifndef MCOLL_TNBC_ENTRY_H
#define MCOLL_TNBC_ENTRY_H

#include <mpi.h>

#include "task/task.h"

int mcoll__tnbc_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                          void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                          mcoll_task_fn allgather_task, int *err);
int mcoll__tnbc_allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           void *recvbuf, const int recvcounts[], const int displs[],
                           MPI_Datatype recvtype, MPI_Comm comm, mcoll_task_fn allgatherv_task,
                           int *err);
int mcoll__tnbc_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                          MPI_Op op, MPI_Comm comm, mcoll_task_fn allreduce_task, int *err);
int mcoll__tnbc_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                         void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                         mcoll_task_fn alltoall_task, int *err);
int mcoll__tnbc_alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                          MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                          const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                          mcoll_task_fn alltoallv_task, int *err);
int mcoll__tnbc_bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
                      mcoll_task_fn bcast_task, int *err);

#endif
