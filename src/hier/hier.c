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
    /* Every step runs even after an error (kept: the first one): the node's other
     * ranks wait in the intra-node steps for this one, the other nodes' leaders in
     * the inter-node step (an error there is the host MPI's, e.g. a truncation when
     * nodes disagree on the size: the buffers hold what came). */
    int step_err = MPI_SUCCESS;
    if (steps->intra_up) step_err = steps->intra_up(call, lo, hi);
    if (err == MPI_SUCCESS) err = step_err;
    if (inter) step_err = steps->inter(call, lo, hi);
    if (err == MPI_SUCCESS) err = step_err;
    if (steps->intra_down) step_err = steps->intra_down(call, lo, hi);
    if (err == MPI_SUCCESS) err = step_err;
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
