/* Allgather(v): algorithm tables, choice, and the steps in the MAHCAF template.
 * One node: every rank reads every other's block (allgather_node.c). Several
 * nodes: gather to the node leader, ring of node blocks among leaders, then the
 * leader's full result goes down its node with bcast's intra-node step. */
#include <string.h>

#include "coll/allgather/allgather.h"
#include "coll/bcast/bcast.h"
#include "coll/facts.h"
#include "coll/gather/gather.h"
#include "coll/settled.h"
#include "core/config.h"
#include "hier/hier.h"

const struct mcoll_coll_algs mcoll__allgather_algs = {
    (const struct mcoll_alg_info[]){MCOLL_MOVE_ALG_INFO}, MCOLL_MOVE_NALGS};
const struct mcoll_coll_algs mcoll__allgatherv_algs = {
    (const struct mcoll_alg_info[]){MCOLL_MOVE_ALG_INFO}, MCOLL_MOVE_NALGS};

struct allgather_call {
  const char *mine;
  size_t my_len;
  struct mcoll_blocks *dst;
  int forced;
  size_t cma_min;
  struct mcoll_bcast_call bcast; /* several nodes: the leader's result down the node */
};

static int node_step(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  (void)lo, (void)hi;
  struct allgather_call *a = hc->args;
  struct mcoll_allgather_node g = {a->mine, a->my_len, a->dst, a->forced, a->cma_min};
  return mcoll__allgather_node(hc->c, &g);
}

static int gather_up(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  (void)lo, (void)hi;
  struct allgather_call *a = hc->args;
  struct mcoll_gather_node g = {.sink = 0, .mine = a->mine, .my_len = a->my_len,
                                .dst = a->dst, .lens = a->dst, .lens_everywhere = 1,
                                .forced = a->forced, .cma_min = a->cma_min};
  return mcoll__gather_node(hc->c, &g);
}

static int between_nodes(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  (void)lo, (void)hi;
  struct allgather_call *a = hc->args;
  return mcoll__allgather_between_nodes(hc->c, a->dst);
}

static int bcast_down(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  struct allgather_call *a = hc->args;
  if (!mcoll__node_has_peers(hc->c)) return MPI_SUCCESS;
  if (hc->c->topo.local_rank == 0) a->bcast.intra->publish(&a->bcast, lo, hi);
  else a->bcast.intra->read(&a->bcast, lo, hi);
  return MPI_SUCCESS;
}

static int bcast_finish(struct mcoll_hier_call *hc) {
  struct allgather_call *a = hc->args;
  if (mcoll__node_has_peers(hc->c)) a->bcast.intra->finish(&a->bcast);
  return MPI_SUCCESS;
}

static const struct mcoll_hier_steps one_node_steps = {NULL, NULL, node_step, NULL};
static const struct mcoll_hier_steps hier_steps = {gather_up, between_nodes, bcast_down,
                                                   bcast_finish};

static size_t largest_block(const struct mcoll_blocks *b) {
  size_t most = 0;
  for (int r = 0; r < b->n; r++)
    if (mcoll__block_len(b, r) > most) most = mcoll__block_len(b, r);
  return b->counts ? most : mcoll__block_len(b, 0);
}

/* An allgather whose choice is settled (coll/settled.h): the node's step alone. */
static int allgather_settled(struct mcoll_comm *c, const char *mine, size_t my_len,
                             struct mcoll_blocks *dst, const struct mcoll_settled *s) {
  int in_place = mine == NULL;
  mcoll__blocks_acquire(dst, 0, in_place ? c->rank : -1);
  struct allgather_call a = {.mine = in_place ? mcoll__block_ptr(dst, c->rank) : mine,
                             .my_len = my_len, .dst = dst, .forced = s->alg, .cma_min = s->value};
  struct mcoll_hier_call hc = {.c = c, .steps = &one_node_steps,
                               .bytes = my_len * (size_t)dst->n, .args = &a};
  int err = mcoll__hier_node_run(&hc);
  mcoll__blocks_release(dst, err == MPI_SUCCESS, in_place ? c->rank : -2);
  return err;
}

int mcoll__allgather(struct mcoll_comm *c, enum mcoll_coll coll, const char *mine,
                     size_t my_len, struct mcoll_blocks *dst) {
  /* allgather: every block has my_len bytes (allgatherv: a key would be every count) */
  int uniform = coll == MCOLL_COLL_ALLGATHER && !dst->counts;
  unsigned stamp = 0;
  const struct mcoll_settled *s = uniform ? mcoll__settled_take(c, coll, my_len, 0, &stamp) : NULL;
  if (s) return allgather_settled(c, mine, my_len, dst, s);
  const struct mcoll_topo *t = &c->topo;
  int forced = mcoll__move_forced(c, coll);
  size_t cma_min = mcoll__move_threshold(c, coll, MCOLL_PARAM_ALLGATHER_CMA_MIN);
  struct mcoll_adapt_call timing = {0};
  /* allgatherv too: every rank has every count, so the class (the largest block) is
   * the same on every rank. */
  forced = mcoll__move_adaptive(c, coll, MCOLL_PARAM_ALLGATHER_CMA_MIN, largest_block(dst), forced,
                                cma_min, &timing);
  mcoll__count_moves(c, coll, dst, 0, forced, cma_min);
  mcoll__inter_single(c, coll, largest_block(dst));
  size_t total = mcoll__blocks_total(dst);
  if (total == 0) return MPI_SUCCESS;
  if (uniform && forced < 0 && mcoll__block_len(dst, 0) == my_len)
    mcoll__settled_offer(c, coll, stamp, my_len, 0, &timing, forced,
                         mcoll__move_of(c, my_len, forced, cma_min), cma_min);
  int in_place = mine == NULL, several = t->nnodes > 1;
  /* Several nodes: the result travels as one span (bcast), so it must be dense. */
  mcoll__blocks_acquire(dst, several, in_place ? c->rank : -1);
  struct allgather_call a = {.mine = in_place ? mcoll__block_ptr(dst, c->rank) : mine,
                             .my_len = my_len, .dst = dst, .forced = forced, .cma_min = cma_min};
  struct mcoll_hier_call hc = {.c = c, .steps = &one_node_steps, .bytes = total, .args = &a};
  if (several) {
    hc.steps = &hier_steps;
    /* The bcast's own rule for single copy (bcast.c); a forced area keeps the ring. */
    const struct mcoll_bcast_intra *down =
        forced == MCOLL_MOVE_AREA ? &mcoll__bcast_shm_pipeline
                                  : mcoll__bcast_down_engine(c, total, forced == MCOLL_MOVE_CMA);
    a.bcast = (struct mcoll_bcast_call){
        .c = c, .buf = mcoll__block_ptr(dst, 0), .bytes = total, .root = t->local_ranks[0],
        .source = 0, .intra = down};
    mcoll__bcast_call_begin(&a.bcast);
  }
  int err = mcoll__hier_run(&hc);
  mcoll__blocks_release(dst, err == MPI_SUCCESS, in_place ? c->rank : -2);
  mcoll__adapt_done(&timing);
  return err;
}
