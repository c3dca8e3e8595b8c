/* HSRA for a commutative op on a node without levels when the result goes whole to
 * every rank (allreduce) or to one (reduce, or the leader across nodes): rank j
 * folds segment j of every peer's input into private memory where it can (its
 * receive buffer), and the areas carry only what the others read: the other
 * segments of each input, then each result segment that someone still has to copy.
 * On this kind of machine a store to a line another core has just read costs far
 * more than the fold itself, so the fewer stores into the areas the better. */
#include "coll/reduce/red.h"
#include "node/area.h"
#include "shm/call.h"

void mcoll__node_red_hsra_all(const struct mcoll_node_red *r) {
  struct mcoll_comm *c = r->c;
  const struct mcoll_red_type *t = r->t;
  const struct mcoll_shm *shm = &c->chan->shm;
  int n = shm->local_size, me = shm->local_rank, dest = r->dest - 1;
  /* With a dest, only the dest has an output; else every rank has. */
  int takes = r->out[0].upto > 0;
  struct mcoll_node_layout l;
  mcoll__node_layout(&l, r, shm->area_bytes / t->extent);
  char *mine = mcoll__rank_area(shm, me);
  for (size_t k = 0; k < l.nchunks; k++) {
    size_t first, elems, lo, hi;
    mcoll__node_slice(&l, r->count, k, &first, &elems);
    mcoll__node_segment(elems, n, me, -1, &lo, &hi);
    const char *in = mcoll__red_at(t, r->in, first);
    char *out = takes ? mcoll__red_at(t, r->out[0].dst, first) : NULL;

    uint32_t gen = mcoll__area_next(c->chan);
    mcoll__area_wait_free(c->chan, gen);
    mcoll__red_copy(t, mine, in, lo);
    mcoll__red_copy(t, mcoll__red_at(t, mine, hi), mcoll__red_at(t, in, hi), elems - hi);
    mcoll__area_post(c->chan, gen);
    for (int x = 0; x < n; x++)
      if (x != me) {
        mcoll__area_wait_posted(c->chan, x, gen);
        mcoll__call_check(x, 0);
      }
    /* My segment: my input, every peer's folded in; into my output if I have one. */
    char *acc = mcoll__red_at(t, takes ? out : mine, lo);
    mcoll__red_copy(t, acc, mcoll__red_at(t, in, lo), hi - lo);
    for (int x = 0; x < n; x++)
      if (x != me)
        mcoll__red_fold(t, mcoll__red_at(t, mcoll__rank_area(shm, x), lo), acc, hi - lo);
    /* Publish it for the ranks that copy the whole result (not needed at the dest). */
    if (dest < 0) mcoll__red_copy(t, mcoll__red_at(t, mine, lo), acc, hi - lo);

    gen = mcoll__area_next(c->chan);
    mcoll__area_post(c->chan, gen);
    for (int x = 0; x < n && takes; x++) {
      if (x == me) continue;
      size_t x_lo, x_hi;
      mcoll__node_segment(elems, n, x, -1, &x_lo, &x_hi);
      mcoll__area_wait_posted(c->chan, x, gen);
      mcoll__call_check(x, 0);
      mcoll__red_copy(t, mcoll__red_at(t, out, x_lo),
                      mcoll__red_at(t, mcoll__rank_area(shm, x), x_lo), x_hi - x_lo);
    }
    mcoll__area_done(c->chan, gen);
  }
}
