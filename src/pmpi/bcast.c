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

/* Contiguous data only (a packed copy stays with the task); what the body gives to
 * the host MPI (invalid arguments) too. Tried before the meeting (pmpi/entries.c):
 * the root of a slot or tree bcast does not wait for the readers, and a reader only
 * for its data, so neither needs the others to have entered; -2 where that is not
 * so (then the ranks meet). */
int mcoll__bcast_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, int *err) {
  (void)rest; /* (it never begins a call that it does not finish) */
  const struct mcoll_mpi_bcast_args *a = args;
  struct mcoll_comm *c = mcoll__direct_context(a->comm, ctx);
  struct mcoll_bytes data;
  if (!c || a->buf == MPI_IN_PLACE || a->count <= 0 || !mcoll__root_valid(c, a->root) ||
      mcoll__bytes_of(a->buf, a->count, a->type, &data) != MPI_SUCCESS || !data.contiguous)
    return -2;
  int tried = mcoll__bcast_try(c, data.ptr, data.bytes, a->root, err);
  if (tried < 0) return tried;
  c->tasks_entered++;
  if (*err != MPI_SUCCESS) PMPI_Comm_call_errhandler(a->comm, *err);
  return 1;
}
