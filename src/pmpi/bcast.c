#include "coll/bcast/bcast.h"
#include "pmpi/wrap.h"

int mcoll__wrap_bcast(struct mcoll_comm *c, void *buf, int count, MPI_Datatype type, int root,
                      MPI_Comm comm) {
  struct mcoll_bytes data;
  if (buf == MPI_IN_PLACE || count < 0 || !mcoll__root_valid(c, root) ||
      mcoll__bytes_of(buf, count, type, &data) != MPI_SUCCESS)
    return mcoll__invalid(MCOLL_COLL_BCAST);
  int is_root = c->rank == root;
  mcoll__bytes_pack(buf, count, type, is_root, &data);
  int err = mcoll__bcast(c, data.ptr, data.bytes, root);
  /* After a truncation the bytes that fit are there, as natively. */
  mcoll__bytes_release(&data, buf, count, type,
                       !is_root && (err == MPI_SUCCESS || err == MPI_ERR_TRUNCATE));
  /* Errors reach the communicator's error handler, as the host MPI's would. */
  if (err != MPI_SUCCESS) PMPI_Comm_call_errhandler(comm, err);
  return err;
}
