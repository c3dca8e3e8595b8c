/* Reduce_scatter and reduce_scatter_block: algorithm tables, and their steps in
 * the MAHCAF template. On one node, the node engine cuts the vector into the ranks'
 * blocks and every chunk carries a slice of each, so each rank copies its own
 * slices out of the result as the chunks go by. Across nodes (one piece): the node
 * folds the vector into its leader, the leaders allreduce it (in node order), and
 * each leader passes its ranks' blocks through its area. */
#include "coll/reduce/red.h"
#include "hier/hier.h"

#include <stdlib.h>

#define RS_ALGS(coll)                                                                          \
  {"flat", "every rank posts its input in its area and folds its own block from all of "     \
           "them (small messages); MCOLL_ALG_" coll "=flat", MCOLL_RED_NEEDS, NULL},                                 \
      {"hsra", "rank j folds segment j across the areas (HSRA), every rank copies its block; " \
               "nodes: fold to the leader, leaders allreduce, scatter; MCOLL_ALG_" coll "=hsra", MCOLL_RED_NEEDS, NULL}, \
      {"p2p", "allreduce among all ranks in rank order over point-to-point, keep the block "   \
              "(nodes not in rank order); MCOLL_ALG_" coll "=p2p", 0, NULL},                           \
      {"cma", "every rank folds its block from the peers' inputs read in place with CMA "      \
              "(large messages, few ranks); MCOLL_ALG_" coll "=cma", MCOLL_RED_NEEDS | MCOLL_NEED_CMA, NULL},

const struct mcoll_coll_algs mcoll__reduce_scatter_algs = {
    (const struct mcoll_alg_info[]){RS_ALGS("REDUCE_SCATTER")}, MCOLL_RED_NALGS};
const struct mcoll_coll_algs mcoll__reduce_scatter_block_algs = {
    (const struct mcoll_alg_info[]){RS_ALGS("REDUCE_SCATTER_BLOCK")}, MCOLL_RED_NALGS};

struct rs_call {
  struct mcoll_comm *c;
  const struct mcoll_red_type *t;
  const char *in;
  char *out;           /* my block's result */
  const int *counts;   /* [size] elements of each rank's block */
  size_t total;
  int alg;
  char *scratch;       /* across nodes, the leader's whole vector */
  enum mcoll_coll coll;
  int group_alg;       /* between nodes (MCOLL_GROUP_*) */
};

static size_t displ_of(const struct rs_call *a, int rank) {
  size_t displ = 0;
  for (int r = 0; r < rank; r++) displ += (size_t)a->counts[r];
  return displ;
}

static int up(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  (void)lo, (void)hi;
  struct rs_call *a = hc->args;
  const struct mcoll_topo *topo = &a->c->topo;
  struct mcoll_node_red r = {.c = a->c, .t = a->t, .in = a->in, .count = a->total, .levels = 1};
  if (topo->nnodes == 1) {
    r.blocks = a->counts; /* one node: node-local rank = comm rank */
    r.out[0] = (struct mcoll_node_out){topo->local_size, a->out, 1};
  } else {
    r.dest = hc->leader + 1; /* it alone copies the whole vector out */
    if (topo->local_rank == hc->leader)
      r.out[0] = (struct mcoll_node_out){topo->local_size, a->scratch, 0};
  }
  return mcoll__node_red_step(hc, &r, a->alg);
}

static int inter(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  (void)lo, (void)hi;
  struct rs_call *a = hc->args;
  const struct mcoll_topo *topo = &a->c->topo;
  struct mcoll_red_group g = {a->c, topo->nnodes, topo->node, topo->node_leader, a->group_alg};
  return mcoll__group_allreduce(&g, a->t, a->scratch, a->total);
}

struct own_block {
  const struct mcoll_red_type *t;
  char *dst; /* NULL: the block shared is not mine */
};

static void take_own(void *arg, const char *chunk, size_t first, size_t n) {
  struct own_block *b = arg;
  if (b->dst) mcoll__red_copy(b->t, mcoll__red_at(b->t, b->dst, first), chunk, n);
}

static int down(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  (void)lo, (void)hi;
  struct rs_call *a = hc->args;
  const struct mcoll_topo *topo = &a->c->topo;
  if (topo->nnodes == 1) return MPI_SUCCESS;
  int me = topo->local_rank;
  for (int p = 0; p < topo->local_size; p++) {
    int rank = topo->local_ranks[p];
    const char *src = me == hc->leader ? mcoll__red_at(a->t, a->scratch, displ_of(a, rank)) : NULL;
    if (p == me && me == hc->leader) mcoll__red_copy(a->t, a->out, src, (size_t)a->counts[rank]);
    if (p == hc->leader) continue;
    struct own_block b = {a->t, p == me ? a->out : NULL};
    mcoll__node_share(a->c, a->t, hc->leader, src, (size_t)a->counts[rank], take_own, &b);
  }
  return MPI_SUCCESS;
}

static const struct mcoll_hier_steps rs_steps = {up, inter, down, NULL};

static int run(struct rs_call *a) {
  struct mcoll_comm *c = a->c;
  const struct mcoll_red_type *t = a->t;
  size_t mine = (size_t)a->counts[c->rank];
  if (a->alg == MCOLL_RED_P2P || c->size == 1) {
    struct mcoll_red_group g = {c, c->size, c->rank, NULL,
                                mcoll__group_choose(a->coll, c, t, a->total, c->size, 0)};
    char *all = mcoll__red_alloc(t, a->total);
    mcoll__red_copy(t, all, a->in, a->total);
    int err = mcoll__group_allreduce(&g, t, all, a->total);
    mcoll__red_copy(t, a->out, mcoll__red_at(t, all, displ_of(a, c->rank)), mine);
    mcoll__red_free(t, all);
    return err;
  }
  struct mcoll_hier_call hc = {.c = c, .steps = &rs_steps, .bytes = a->total * t->extent,
                               .piece = 0, .leader = 0, .args = a};
  if (c->topo.nnodes > 1) {
    a->group_alg = mcoll__group_choose(a->coll, c, t, a->total, c->topo.nnodes, 1);
    if (c->topo.local_rank == 0) a->scratch = mcoll__red_alloc(t, a->total);
  }
  int err = mcoll__hier_run(&hc);
  if (a->scratch) mcoll__red_free(t, a->scratch);
  return err;
}

int mcoll__reduce_scatter(struct mcoll_comm *c, const struct mcoll_red_type *t,
                          const void *sendbuf, void *recvbuf, const int *recvcounts,
                          int recvcount) {
  enum mcoll_coll coll = recvcounts ? MCOLL_COLL_REDUCE_SCATTER : MCOLL_COLL_REDUCE_SCATTER_BLOCK;
  int *block_counts = NULL;
  if (!recvcounts) {
    block_counts = mcoll__xmalloc(sizeof(int) * (size_t)c->size);
    for (int r = 0; r < c->size; r++) block_counts[r] = recvcount;
  }
  struct rs_call a = {c, t, mcoll__red_input(t, sendbuf, recvbuf), mcoll__red_data(t, recvbuf),
                      recvcounts ? recvcounts : block_counts, 0, 0, NULL, coll, MCOLL_GROUP_SMALL};
  a.total = displ_of(&a, c->size);
  /* The area holds at least two elements per rank: chunks carry a slice of every block. */
  a.alg = mcoll__red_choose(coll, c, a.total * t->extent, !t->commutative,
                            2 * (size_t)c->size * t->extent);
  mcoll__count_alg(coll, a.alg);
  int err = MPI_SUCCESS;
  if (a.total == 0) goto cleanup;
  /* In place, my block's result goes to the start of recvbuf, where other blocks'
   * input may still be unread: unequal blocks go through scratch. */
  char *result = a.out;
  size_t mine = (size_t)a.counts[c->rank];
  int scratch = sendbuf == MPI_IN_PLACE && recvcounts && c->rank > 0 && a.alg != MCOLL_RED_P2P &&
                c->topo.nnodes == 1;
  if (scratch) a.out = mcoll__red_alloc(t, mine);
  err = run(&a);
  if (scratch) {
    mcoll__red_copy(t, result, a.out, mine);
    mcoll__red_free(t, a.out);
  }
cleanup:
  free(block_counts);
  return err;
}
