/* Intra-node reduction: the call around the engine it runs (red_node_*.c, over the
 * chunks of red_chunk.c), and passing a leader's buffer to its node. */
#include "coll/move.h"
#include "coll/reduce/red.h"
#include "node/area.h"
#include "node/slot.h"
#include "shm/call.h"

/* What every rank of the node must give the call alike: its size, the algorithm
 * that size chose, and the shape of the result (whole, at one rank, prefixes,
 * blocks). */
static uint32_t digest_of(const struct mcoll_node_red *r, int alg) {
  uint64_t shape = (uint64_t)alg | (uint64_t)r->levels << 3 | (uint64_t)r->prefix << 4 |
                   (uint64_t)r->all_out << 5 | (uint64_t)(r->blocks != NULL) << 6 |
                   (uint64_t)(uint32_t)r->dest << 8;
  return mcoll__call_digest(r->count * r->t->extent, shape);
}

int mcoll__node_red(const struct mcoll_node_red *r, int alg) {
  struct mcoll_comm *c = r->c;
  if (!mcoll__node_has_peers(c)) {
    mcoll__node_alone(r);
    return MPI_SUCCESS;
  }
  struct mcoll_call call;
  const uint32_t start_gen = mcoll__area_last(c->chan);
  mcoll__call_enter(&call, &c->chan->shm, start_gen + 1, digest_of(r, alg));
  if (setjmp(call.escape) == 0) {
    if (alg == MCOLL_RED_FLAT) {
      mcoll__node_red_flat(r); /* publishes when it must */
    } else {
      mcoll__call_publish(&call);
      if (alg == MCOLL_RED_CMA) mcoll__node_red_cma(r);
      else mcoll__node_red_hsra(r);
    }
    mcoll__call_leave();
    return MPI_SUCCESS;
  }
  mcoll__call_settle(&call);
  mcoll__area_resync(c->chan, start_gen, call.beside, &c->chan->red_slots);
  mcoll__call_leave();
  return MPI_ERR_TRUNCATE;
}

int mcoll__node_red_step(struct mcoll_hier_call *hc, const struct mcoll_node_red *r, int alg) {
  int err = mcoll__node_red(r, alg);
  if (err != MPI_SUCCESS) hc->deferred = err;
  return MPI_SUCCESS;
}

int mcoll__node_red_ready(const struct mcoll_node_red *r, int alg, int spin) {
  return alg == MCOLL_RED_FLAT && mcoll__node_has_peers(r->c) &&
         mcoll__node_red_flat_ready(r, digest_of(r, alg), spin);
}

void mcoll__node_share(struct mcoll_comm *c, const struct mcoll_red_type *t, int leader,
                       const char *src, size_t count, mcoll_node_take take, void *arg) {
  if (!mcoll__node_has_peers(c)) return;
  const struct mcoll_shm *shm = &c->chan->shm;
  int me = shm->local_rank;
  size_t cap = shm->area_bytes / t->extent;
  for (size_t first = 0; first < count; first += cap) {
    size_t n = count - first < cap ? count - first : cap;
    uint32_t gen = mcoll__area_next(c->chan);
    if (me == leader) {
      mcoll__area_wait_free(c->chan, gen);
      mcoll__red_copy(t, mcoll__rank_area(shm, me), mcoll__red_at(t, src, first), n);
      mcoll__area_post(c->chan, gen);
    } else {
      mcoll__area_wait_posted(c->chan, leader, gen);
      take(arg, mcoll__rank_area(shm, leader), first, n);
    }
    mcoll__area_done(c->chan, gen);
  }
}
