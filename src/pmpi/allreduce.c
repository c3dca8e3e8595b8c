#include "pmpi/red_wrap.h"

int mcoll__wrap_allreduce(struct mcoll_comm *c, const void *sendbuf, void *recvbuf, int count,
                          MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  struct mcoll_red_type t;
  if (!mcoll__red_args(MCOLL_COLL_ALLREDUCE, &t, type, op,
                       count >= 0 && mcoll__red_bufs_ok(sendbuf, recvbuf)))
    return MCOLL_TO_HOST;
  return mcoll__red_return(comm, mcoll__allreduce(c, &t, sendbuf, recvbuf, (size_t)count));
}

/* As reduce's try (pmpi/reduce.c): what the body gives to the host MPI stays with the task. */
int mcoll__allreduce_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, int *err) {
  (void)rest; /* (it never begins a call that it does not finish) */
  const struct mcoll_mpi_allreduce_args *a = args;
  struct mcoll_comm *c = mcoll__direct_context(a->comm, ctx);
  struct mcoll_red_type t;
  if (!c || a->count <= 0 || !mcoll__red_bufs_ok(a->sendbuf, a->recvbuf) ||
      mcoll__red_type_init(&t, a->type, a->op) != MCOLL_RED_OK ||
      mcoll__allreduce_try(c, &t, a->sendbuf, a->recvbuf, (size_t)a->count, err) < 0)
    return -1;
  c->tasks_entered++;
  mcoll__red_return(a->comm, *err);
  return 1;
}
