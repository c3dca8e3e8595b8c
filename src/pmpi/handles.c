/* Freeing datatypes and ops: one that calls in flight may still use (MPI_I* calls,
 * persistent requests) is freed by mcoll once they are done (task/task.h), as the
 * host MPI's own reference counting would. Predefined and null handles go to the
 * host MPI at once (it raises what it raises natively). */
#include "pmpi/wrap.h"

static int derived(MPI_Datatype type) {
  int ints, addrs, types, combiner;
  return type != MPI_DATATYPE_NULL &&
         PMPI_Type_get_envelope(type, &ints, &addrs, &types, &combiner) == MPI_SUCCESS &&
         combiner != MPI_COMBINER_NAMED;
}

MCOLL_EXPORT int MPI_Type_free(MPI_Datatype *type) {
  if (type && derived(*type) && mcoll__task_hold_free(*type, MPI_OP_NULL)) {
    *type = MPI_DATATYPE_NULL;
    return MPI_SUCCESS;
  }
  return PMPI_Type_free(type);
}

MCOLL_EXPORT int MPI_Op_free(MPI_Op *op) {
  if (op && *op != MPI_OP_NULL && !mcoll__op_predefined(*op) &&
      mcoll__task_hold_free(MPI_DATATYPE_NULL, *op)) {
    *op = MPI_OP_NULL;
    return MPI_SUCCESS;
  }
  return PMPI_Op_free(op);
}
