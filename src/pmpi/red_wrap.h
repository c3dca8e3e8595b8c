/* Argument checks shared by the reduction wrappers. */
#ifndef MCOLL_RED_WRAP_H
#define MCOLL_RED_WRAP_H

#include <limits.h>

#include "coll/reduce/red.h"
#include "pmpi/wrap.h"

/* 1: mcoll runs the call; 0: the caller passes it to the host MPI (already counted:
 * invalid arguments, or a datatype layout mcoll does not fold). */
static inline int mcoll__red_args(enum mcoll_coll coll, struct mcoll_red_type *t,
                                  MPI_Datatype type, MPI_Op op, int args_ok) {
  enum mcoll_red_check check = mcoll__red_type_init(t, type, op);
  if (!args_ok || check == MCOLL_RED_INVALID) {
    mcoll__count_invalid(coll);
    return 0;
  }
  if (check == MCOLL_RED_UNSUPPORTED) {
    mcoll__fallback(coll, MCOLL_WHY_DATATYPE);
    return 0;
  }
  return 1;
}

/* A receive buffer that is also the send buffer (not MPI_IN_PLACE) is erroneous. */
static inline int mcoll__red_bufs_ok(const void *sendbuf, const void *recvbuf) {
  return recvbuf != MPI_IN_PLACE && (sendbuf != recvbuf || sendbuf == NULL);
}

/* What mcoll's reduction returns goes through the communicator's error handler, as
 * the host MPI's errors would (MPI_ERR_TRUNCATE: the node's ranks disagreed on the
 * call, shm/call.h). */
static inline int mcoll__red_return(MPI_Comm comm, int err) {
  if (err != MPI_SUCCESS) PMPI_Comm_call_errhandler(comm, err);
  return err;
}

#endif
