#include "task/host.h"

#include <time.h>

#include "core/config.h"
#include "task/task.h"

/* Whether a wait must not block the thread: inside a task, or with tasks pending. */
static int must_not_block(void) { return mcoll__in_task() || mcoll__tasks_pending(); }

int mcoll__host_wait_one(MPI_Request *req, MPI_Status *status) {
  if (!must_not_block()) return PMPI_Wait(req, status);
  return mcoll__host_wait_status(MPI_SUCCESS, req, status);
}

int mcoll__host_wait_any_of(int n, MPI_Request *reqs, int *index) {
  if (!must_not_block()) return PMPI_Waitany(n, reqs, index, MPI_STATUS_IGNORE);
  return mcoll__host_wait_any(n, reqs, index, MPI_STATUS_IGNORE);
}

/* Tests before the first sleep: an answer already on its way is taken without one. */
enum { NAP_AFTER_POLLS = 32 };

int mcoll__host_wait_any_napping(int n, MPI_Request *reqs, int *index) {
  if (!mcoll__cores_shared || mcoll__cfg.WAIT_NAP_US <= 0 || must_not_block())
    return mcoll__host_wait_any_of(n, reqs, index);
  long nap_ns = 1000, max_ns = mcoll__cfg.WAIT_NAP_US * 1000;
  for (unsigned polls = 0;; polls++) {
    int done = 0;
    int err = PMPI_Testany(n, reqs, index, &done, MPI_STATUS_IGNORE);
    if (err != MPI_SUCCESS || done) return err;
    if (polls < NAP_AFTER_POLLS) continue;
    nanosleep(&(struct timespec){0, nap_ns}, NULL);
    nap_ns = nap_ns * 2 > max_ns ? max_ns : nap_ns * 2;
  }
}

int mcoll__host_send(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                     MPI_Comm comm) {
  tag = mcoll__host_tag(tag);
  if (!must_not_block()) return PMPI_Send(buf, count, type, dest, tag, comm);
  MPI_Request req;
  return mcoll__host_wait(PMPI_Isend(buf, count, type, dest, tag, comm, &req), &req);
}

int mcoll__host_recv(void *buf, int count, MPI_Datatype type, int source, int tag,
                     MPI_Comm comm, MPI_Status *status) {
  tag = mcoll__host_tag(tag);
  if (!must_not_block()) return PMPI_Recv(buf, count, type, source, tag, comm, status);
  MPI_Request req;
  return mcoll__host_wait_status(PMPI_Irecv(buf, count, type, source, tag, comm, &req), &req,
                                 status);
}

int mcoll__host_sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                         int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                         int source, int recvtag, MPI_Comm comm, MPI_Status *status) {
  sendtag = mcoll__host_tag(sendtag);
  recvtag = mcoll__host_tag(recvtag);
  if (!must_not_block())
    return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                         recvtype, source, recvtag, comm, status);
  MPI_Request recv, send;
  int err = PMPI_Irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, &recv);
  if (err != MPI_SUCCESS) return err;
  int send_err = mcoll__host_wait(PMPI_Isend(sendbuf, sendcount, sendtype, dest, sendtag, comm,
                                             &send), &send);
  err = mcoll__host_wait_status(MPI_SUCCESS, &recv, status);
  return err != MPI_SUCCESS ? err : send_err;
}

int mcoll__host_comm_dup(MPI_Comm comm, MPI_Comm *out) {
  if (!mcoll__in_task()) return PMPI_Comm_dup(comm, out);
  MPI_Request req;
  return mcoll__host_wait(PMPI_Comm_idup(comm, out, &req), &req);
}
