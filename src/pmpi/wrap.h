/* What every collective wrapper does before choosing: honour MCOLL_DISABLE, send
 * invalid arguments to the host MPI (which raises the error the application
 * expects), and find the communicator's context (or fall back). */
#ifndef MCOLL_WRAP_H
#define MCOLL_WRAP_H

#include <mpi.h>

#include "core/coll.h"
#include "core/config.h"
#include "comm/context.h"
#include "core/datatype.h"

#include "mcoll.h"

/* After the host MPI's init (collective over MPI_COMM_WORLD) and before its
 * finalize; each runs once, from MPI_Init(_thread), MPI_Finalize or their Fortran entry
 * points (pmpi/init.c). */
void mcoll__before_init(void); /* disables mcoll in a program of another MPI */
void mcoll__started(void);
void mcoll__finishing(void);

/* The context to use, or NULL: then the wrapper calls PMPI_* (already counted). */
static inline struct mcoll_comm *mcoll__enter(enum mcoll_coll coll, MPI_Comm comm) {
  mcoll__config_load();
  if (mcoll__cfg.DISABLE) return NULL;
  if (comm == MPI_COMM_NULL) {
    mcoll__count_invalid(coll);
    return NULL;
  }
  enum mcoll_fallback_reason why;
  struct mcoll_comm *c = mcoll__comm_get(comm, &why);
  if (!c) mcoll__fallback(coll, why);
  return c;
}

static inline int mcoll__root_valid(const struct mcoll_comm *c, int root) {
  return root >= 0 && root < c->size;
}

/* A datatype the host MPI would accept for communication: not null, and for
 * derived types committed (core/datatype.h). */
static inline int mcoll__type_usable(MPI_Datatype type) {
  struct mcoll_type_info info;
  return mcoll__type_info(type, &info) == MPI_SUCCESS;
}

#endif
