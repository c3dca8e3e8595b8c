#include "pmpi/red_wrap.h"

int mcoll__wrap_reduce(struct mcoll_comm *c, const void *sendbuf, void *recvbuf, int count,
                       MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
  struct mcoll_red_type t;
  /* MPI_IN_PLACE is the root's only; the receive buffer matters at the root only. */
  if (!mcoll__red_args(MCOLL_COLL_REDUCE, &t, type, op,
                       count >= 0 && mcoll__root_valid(c, root) &&
                           (c->rank == root ? mcoll__red_bufs_ok(sendbuf, recvbuf)
                                            : sendbuf != MPI_IN_PLACE)))
    return MCOLL_TO_HOST;
  return mcoll__red_return(comm, mcoll__reduce(c, &t, sendbuf, recvbuf, (size_t)count, root));
}

/* Arguments the body gives to the host MPI (invalid ones, datatypes mcoll does not
 * fold) stay with the task, which counts them. Tried before the meeting, as bcast's
 * (pmpi/bcast.c): a sender waits for its slot alone, the root for the inputs alone;
 * -2: not such a call (the ranks meet). */
int mcoll__reduce_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, int *err) {
  (void)rest; /* (it never begins a call that it does not finish) */
  const struct mcoll_mpi_reduce_args *a = args;
  struct mcoll_comm *c = mcoll__direct_context(a->comm, ctx);
  struct mcoll_red_type t;
  if (!c || a->count <= 0 || !mcoll__root_valid(c, a->root) ||
      !(c->rank == a->root ? mcoll__red_bufs_ok(a->sendbuf, a->recvbuf) : a->sendbuf != MPI_IN_PLACE) ||
      mcoll__red_type_init(&t, a->type, a->op) != MCOLL_RED_OK)
    return -2;
  int tried = mcoll__reduce_try(c, &t, a->sendbuf, a->recvbuf, (size_t)a->count, a->root, err);
  if (tried < 0) return tried;
  c->tasks_entered++;
  mcoll__red_return(a->comm, *err);
  return 1;
}
