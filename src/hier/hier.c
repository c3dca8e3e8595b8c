#include "hier/hier.h"

int mcoll__hier_run(struct mcoll_hier_call *call) {
  const struct mcoll_hier_steps *steps = call->steps;
  const struct mcoll_topo *t = &call->c->topo;
  int inter = t->nnodes > 1 && t->local_rank == call->leader && steps->inter;
  size_t piece = call->piece ? call->piece : call->bytes;
  int err = MPI_SUCCESS;
  size_t lo = 0;
  do {
    size_t hi = piece && call->bytes - lo > piece ? lo + piece : call->bytes;
    if (steps->intra_up && err == MPI_SUCCESS) err = steps->intra_up(call, lo, hi);
    if (inter && err == MPI_SUCCESS) err = steps->inter(call, lo, hi);
    if (steps->intra_down && err == MPI_SUCCESS) err = steps->intra_down(call, lo, hi);
    lo = hi;
  } while (lo < call->bytes);
  if (steps->finish) {
    int finish_err = steps->finish(call);
    if (err == MPI_SUCCESS) err = finish_err;
  }
  return err != MPI_SUCCESS ? err : call->deferred;
}

int mcoll__local_index(const struct mcoll_topo *t, int rank) {
  for (int i = 0; i < t->local_size; i++)
    if (t->local_ranks[i] == rank) return i;
  return -1;
}
