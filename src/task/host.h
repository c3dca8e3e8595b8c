/* The host MPI's point-to-point calls that wait, as mcoll's algorithms make them
 * (inter-node phases, groups of leaders): the same signatures as PMPI_*. On the
 * caller's own stack with nothing else pending they are the host's blocking calls;
 * in a task they post the non-blocking form and yield until it completes; with tasks
 * pending they drive them while waiting. Their tags are the running call's
 * (mcoll__host_tag): calls side by side never match each other's messages. */
#ifndef MCOLL_TASK_HOST_H
#define MCOLL_TASK_HOST_H

#include <mpi.h>

int mcoll__host_send(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                     MPI_Comm comm);
int mcoll__host_recv(void *buf, int count, MPI_Datatype type, int source, int tag,
                     MPI_Comm comm, MPI_Status *status);
int mcoll__host_sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                         int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                         int source, int recvtag, MPI_Comm comm, MPI_Status *status);
int mcoll__host_wait_one(MPI_Request *req, MPI_Status *status);
/* MPI_Waitany on the caller's stack with nothing pending (the host's blocking wait:
 * over TCP its polling loop notices arrivals sooner than a loop of tests), else
 * waited for without blocking the thread. */
int mcoll__host_wait_any_of(int n, MPI_Request *reqs, int *index);
/* A wait for one of n requests (index as MPI_Waitany; n = 1: that request) that a
 * rank makes while another rank must first get a core to answer it: where the ranks
 * on this kernel outnumber its cores (mcoll__cores_shared), a few tests, then tests
 * between sleeps that double up to MCOLL_WAIT_NAP_US. The host MPIs' blocking waits
 * poll without giving up the core, and a yield may keep it (each MPICH rank is a
 * scheduler group of its own): the rank that must answer then waits for the end of
 * a polling rank's time slice. Elsewhere mcoll__host_wait_any_of. */
int mcoll__host_wait_any_napping(int n, MPI_Request *reqs, int *index);
/* MPI_Comm_dup, as MPI_Comm_idup inside a task. */
int mcoll__host_comm_dup(MPI_Comm comm, MPI_Comm *out);

#endif
