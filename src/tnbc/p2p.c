/* T-NBC: the host's point-to-point calls that mcoll does not otherwise wrap settle
 * pending T-NBC calls first (one load while none is pending): the host MPI may read
 * or write the buffer by single copy (CMA), which returns EFAULT on a protected page
 * instead of faulting. (MPI_Send, MPI_Recv, MPI_Sendrecv, MPI_Ssend, MPI_Mrecv and the
 * completion calls settle in pmpi/nbc.c.) */
#include "mcoll.h"
#include "tnbc/tnbc.h"

#define SETTLED(call)                                                                              \
  do {                                                                                             \
    mcoll__tnbc_settle_pending();                                                                  \
    return call;                                                                                   \
  } while (0)

MCOLL_EXPORT int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                           MPI_Comm comm, MPI_Request *req) {
  SETTLED(PMPI_Isend(buf, count, type, dest, tag, comm, req));
}

MCOLL_EXPORT int MPI_Issend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                            MPI_Comm comm, MPI_Request *req) {
  SETTLED(PMPI_Issend(buf, count, type, dest, tag, comm, req));
}

MCOLL_EXPORT int MPI_Irsend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                            MPI_Comm comm, MPI_Request *req) {
  SETTLED(PMPI_Irsend(buf, count, type, dest, tag, comm, req));
}

MCOLL_EXPORT int MPI_Ibsend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                            MPI_Comm comm, MPI_Request *req) {
  SETTLED(PMPI_Ibsend(buf, count, type, dest, tag, comm, req));
}

MCOLL_EXPORT int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag,
                           MPI_Comm comm, MPI_Request *req) {
  SETTLED(PMPI_Irecv(buf, count, type, source, tag, comm, req));
}

MCOLL_EXPORT int MPI_Imrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message,
                            MPI_Request *req) {
  SETTLED(PMPI_Imrecv(buf, count, type, message, req));
}

MCOLL_EXPORT int MPI_Bsend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                           MPI_Comm comm) {
  SETTLED(PMPI_Bsend(buf, count, type, dest, tag, comm));
}

MCOLL_EXPORT int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                           MPI_Comm comm) {
  SETTLED(PMPI_Rsend(buf, count, type, dest, tag, comm));
}

MCOLL_EXPORT int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest,
                                      int sendtag, int source, int recvtag, MPI_Comm comm,
                                      MPI_Status *status) {
  SETTLED(PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status));
}

MCOLL_EXPORT int MPI_Send_init(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                               MPI_Comm comm, MPI_Request *req) {
  SETTLED(PMPI_Send_init(buf, count, type, dest, tag, comm, req));
}

MCOLL_EXPORT int MPI_Recv_init(void *buf, int count, MPI_Datatype type, int source, int tag,
                               MPI_Comm comm, MPI_Request *req) {
  SETTLED(PMPI_Recv_init(buf, count, type, source, tag, comm, req));
}
