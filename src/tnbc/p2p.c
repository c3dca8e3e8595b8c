/* T-NBC: the host's point-to-point calls that mcoll does not otherwise wrap settle
 * pending T-NBC calls first (one load while none is pending): the host MPI may read
 * or write the buffer by single copy (CMA), which returns EFAULT on a protected page
 * instead of faulting. (MPI_Send, MPI_Recv, MPI_Sendrecv, MPI_Ssend, MPI_Mrecv and the
 * completion calls settle in pmpi/nbc.c.) */
#include "mcoll.h"
#include "tnbc/tnbc.h"

/* MPI_<name>(params): settles, then PMPI_<name>(args). */
#define SETTLED(name, params, args)                                                                \
  MCOLL_EXPORT int MPI_##name params {                                                             \
    mcoll__tnbc_settle_pending();                                                                  \
    return PMPI_##name args;                                                                       \
  }

/* The shapes the calls below share. */
#define SEND_PARAMS                                                                                \
  (const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
#define SEND_ARGS (buf, count, type, dest, tag, comm)
#define ISEND_PARAMS                                                                               \
  (const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,              \
   MPI_Request *req)
#define ISEND_ARGS (buf, count, type, dest, tag, comm, req)
#define IRECV_PARAMS                                                                               \
  (void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *req)
#define IRECV_ARGS (buf, count, type, source, tag, comm, req)

SETTLED(Isend, ISEND_PARAMS, ISEND_ARGS)
SETTLED(Issend, ISEND_PARAMS, ISEND_ARGS)
SETTLED(Irsend, ISEND_PARAMS, ISEND_ARGS)
SETTLED(Ibsend, ISEND_PARAMS, ISEND_ARGS)
SETTLED(Send_init, ISEND_PARAMS, ISEND_ARGS)
SETTLED(Bsend, SEND_PARAMS, SEND_ARGS)
SETTLED(Rsend, SEND_PARAMS, SEND_ARGS)
SETTLED(Irecv, IRECV_PARAMS, IRECV_ARGS)
SETTLED(Recv_init, IRECV_PARAMS, IRECV_ARGS)
SETTLED(Imrecv, (void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Request *req),
        (buf, count, type, message, req))
SETTLED(Sendrecv_replace,
        (void *buf, int count, MPI_Datatype type, int dest, int sendtag, int source, int recvtag,
         MPI_Comm comm, MPI_Status *status),
        (buf, count, type, dest, sendtag, source, recvtag, comm, status))
