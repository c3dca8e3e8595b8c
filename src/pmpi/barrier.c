#include <string.h>

#include "coll/barrier/barrier.h"
#include "pmpi/wrap.h"

int mcoll__wrap_barrier(struct mcoll_comm *c, MPI_Comm comm) {
  (void)comm;
  return mcoll__barrier(c);
}

/* A barrier begun on the caller's stack, finished in a task. */
struct barrier_rest {
  struct mcoll_comm *c; /* (lives while calls on it are in flight: task/task.h) */
  uint32_t seq;
  unsigned number; /* its number among its communicator's tasks */
};

static int barrier_rest_task(const void *args) {
  struct barrier_rest r = *(const struct barrier_rest *)args; /* (read before any wait) */
  mcoll__task_number(r.number);
  return mcoll__barrier_finish(r.c, r.seq);
}

int mcoll__barrier_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, int *err) {
  const struct mcoll_mpi_barrier_args *a = args;
  struct mcoll_comm *c = mcoll__direct_context(a->comm, ctx);
  if (!c) return -1;
  unsigned number = c->tasks_entered;
  uint32_t seq = 0;
  int tried = mcoll__barrier_try(c, &seq);
  if (tried < 0) return -1;
  c->tasks_entered++;
  *err = MPI_SUCCESS;
  if (tried == 0) {
    struct barrier_rest r = {c, seq, number};
    _Static_assert(sizeof r <= sizeof rest->args, "a barrier's rest fits");
    rest->fn = barrier_rest_task;
    memcpy(rest->args, &r, sizeof r);
    rest->bytes = sizeof r;
  }
  return tried;
}
