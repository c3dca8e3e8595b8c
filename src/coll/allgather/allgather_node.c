/* Intra-node allgather through the per-rank areas (node/area.h) or by single copy.
 *
 * Every length is known everywhere, so each rank computes the call's T area
 * generations alone (the most chunks any area-moved block needs, at least 1). In
 * generation base+t each rank writes its chunk t into its own area (a single-copy
 * rank publishes its buffer in the first), posts, then copies the others' chunks
 * out in the order me+1, me+2, ...: at each step every source has one reader
 * (bounded concurrency, docs/architecture.md), and marks the generation done. Small calls
 * use slots of the areas so that back-to-back calls overlap (node/slot.h). */
#include <string.h>

#include "coll/allgather/allgather.h"
#include "coll/beside.h"
#include "core/config.h"
#include "node/area.h"
#include "node/publish.h"

static enum mcoll_move move_of(const struct mcoll_comm *c, const struct mcoll_allgather_node *g,
                               size_t len) {
  return mcoll__move_of(c, len, g->forced, g->cma_min);
}

static void exchange(struct mcoll_comm *c, const void *arg) {
  const struct mcoll_allgather_node *g = arg;
  const struct mcoll_shm *shm = &c->chan->shm;
  const struct mcoll_topo *t = &c->topo;
  char *own = mcoll__block_ptr(g->dst, c->rank);
  const size_t area = shm->area_bytes;
  int me = shm->local_rank, n = shm->local_size;
  uint32_t rounds = 1;
  int small = 1; /* one generation, every block in one slot of the areas */
  for (int j = 0; j < n; j++) {
    size_t len = mcoll__block_len(g->dst, t->local_ranks[j]);
    if (move_of(c, g, len) == MCOLL_MOVE_CMA || len > mcoll__slot_bytes(shm)) small = 0;
    if (move_of(c, g, len) == MCOLL_MOVE_AREA && mcoll__area_chunks(len, area) > rounds)
      rounds = mcoll__area_chunks(len, area);
  }
  enum mcoll_move my_move = move_of(c, g, g->my_len);
  uint32_t lag = 0, base = small ? mcoll__slot_take(c->chan, &lag) - 1
                                 : mcoll__area_take(c->chan, rounds);

  for (uint32_t r = 1; r <= rounds; r++) {
    size_t at = (size_t)(r - 1) * area;
    char *my_area = small ? mcoll__slot_area(shm, me, base + r) : mcoll__rank_area(shm, me);
    if (small) mcoll__slot_wait_free(&c->chan->shm, &c->chan->area_slots, base + r, lag);
    else mcoll__area_wait_free(c->chan, base + r);
    if (my_move == MCOLL_MOVE_CMA && r == 1)
      mcoll__publish(mcoll__publish_line(shm, me), g->mine, g->my_len, base + 1);
    else if (my_move == MCOLL_MOVE_AREA && at < g->my_len)
      mcoll__area_write(my_area, g->mine + at, g->my_len - at < area ? g->my_len - at : area);
    mcoll__move_publish();
    mcoll__area_post(c->chan, base + r);
    if (small) mcoll__node_call_beside(c, 1, base + 1);
    if (r == 1 && g->mine != own && g->my_len) memcpy(own, g->mine, g->my_len);
    for (int s = 1; s < n; s++) {
      int j = (me + s) % n;
      size_t len = mcoll__block_len(g->dst, t->local_ranks[j]);
      char *to = mcoll__block_ptr(g->dst, t->local_ranks[j]);
      if (move_of(c, g, len) == MCOLL_MOVE_CMA) {
        if (r > 1) continue;
        mcoll__area_wait_posted(c->chan, j, base + 1);
        mcoll__call_check(j, 0);
        mcoll__peer_read(c->chan, j, to, mcoll__published_addr(mcoll__publish_line(shm, j)), len);
      } else if (at < len) {
        mcoll__area_wait_posted(c->chan, j, base + r);
        mcoll__call_check(j, 0);
        const char *from = small ? mcoll__slot_area(shm, j, base + r) : mcoll__rank_area(shm, j);
        memcpy(to + at, from, len - at < area ? len - at : area);
      }
    }
    mcoll__area_done(c->chan, base + r);
  }
  /* The others read my buffer itself: keep it until they are past generation 1. */
  if (my_move == MCOLL_MOVE_CMA) mcoll__hold_wait(shm, MCOLL_MARK_AREA, -1, base + 1);
}

struct allgather_run {
  const struct mcoll_allgather_node *g;
  const int *local_ranks; /* the communicator's rank of each node-local rank */
};

static void run(struct mcoll_comm *c, const void *arg) {
  exchange(c, ((const struct allgather_run *)arg)->g);
}

/* Every rank knows every length. */
static size_t expects(const void *arg, int x) {
  const struct allgather_run *run = arg;
  return mcoll__block_len(run->g->dst, run->local_ranks[x]);
}

int mcoll__allgather_node(struct mcoll_comm *c, const struct mcoll_allgather_node *g) {
  char *own = mcoll__block_ptr(g->dst, c->rank);
  if (!mcoll__node_has_peers(c)) {
    if (g->mine != own && g->my_len) memcpy(own, g->mine, g->my_len);
    return MPI_SUCCESS;
  }
  struct allgather_run arg = {g, c->topo.local_ranks};
  struct mcoll_move_guard guard = {.my_len = g->my_len, .reads = 1,
                                   .expects = expects, .arg = &arg, .body = run};
  return mcoll__move_guarded(c, &guard);
}
