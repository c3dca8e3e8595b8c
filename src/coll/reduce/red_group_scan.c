/* Exclusive prefix among a group (node leaders, or every rank) over the host MPI's
 * point-to-point: recursive doubling, as MPICH does it. Each member keeps the fold
 * of the aligned run of members it has heard from (partial) and the fold of the
 * members below it (the result); lower partners contribute on the left. */
#include "task/host.h"
#include "coll/reduce/red.h"
#include "coll/tags.h"

static int rank_of(const struct mcoll_red_group *g, int member) {
  return g->ranks ? g->ranks[member] : member;
}

int mcoll__group_exscan(const struct mcoll_red_group *g, const struct mcoll_red_type *t,
                        char *buf, size_t count) {
  if (g->n <= 1 || count == 0) return MPI_SUCCESS;
  if (mcoll__context_p2p(g->c) != MPI_SUCCESS) return MPI_ERR_INTERN;
  char *partial = mcoll__red_alloc(t, count), *tmp = mcoll__red_alloc(t, count);
  int err = MPI_SUCCESS, have = 0;
  mcoll__red_copy(t, partial, buf, count);
  for (int mask = 1; mask < g->n && err == MPI_SUCCESS; mask <<= 1) {
    int peer = g->me ^ mask;
    if (peer >= g->n) continue;
    int rank = rank_of(g, peer);
    err = mcoll__host_sendrecv(partial - t->true_lb, (int)count, t->type, rank, MCOLL_TAG_REDUCE,
                        tmp - t->true_lb, (int)count, t->type, rank, MCOLL_TAG_REDUCE, g->c->p2p,
                        MPI_STATUS_IGNORE);
    if (err != MPI_SUCCESS) break;
    if (peer < g->me) {
      mcoll__red_fold(t, tmp, partial, count);
      if (have) mcoll__red_fold(t, tmp, buf, count);
      else mcoll__red_copy(t, buf, tmp, count);
      have = 1;
    } else if (t->commutative) {
      mcoll__red_fold(t, tmp, partial, count);
    } else {
      mcoll__red_fold(t, partial, tmp, count);
      mcoll__red_copy(t, partial, tmp, count);
    }
  }
  mcoll__red_free(t, partial);
  mcoll__red_free(t, tmp);
  return err;
}
