/* Gather(v): algorithm tables, choice, and the steps in the MAHCAF template:
 * each node gathers to its sink (the root on the root's node, the node leader
 * elsewhere), then the other nodes' leaders send their node's blocks to the root,
 * which receives each node straight into the ranks' places (a datatype per node). */
#include <stdlib.h>

#include "task/host.h"
#include "coll/gather/gather.h"
#include "coll/facts.h"
#include "coll/settled.h"
#include "coll/tags.h"
#include "core/config.h"
#include "hier/hier.h"

const struct mcoll_coll_algs mcoll__gather_algs = {
    (const struct mcoll_alg_info[]){MCOLL_MOVE_ALG_INFO}, MCOLL_MOVE_NALGS};
const struct mcoll_coll_algs mcoll__gatherv_algs = {
    (const struct mcoll_alg_info[]){MCOLL_MOVE_V_ALG_INFO}, MCOLL_MOVE_V_NALGS};
#define GATHER_INTER_INFO \
  {"direct", "each node's leader sends its node's blocks straight to the root", 0, NULL}
const struct mcoll_coll_algs mcoll__gather_inter_algs = {
    (const struct mcoll_alg_info[]){GATHER_INTER_INFO}, 1};
const struct mcoll_coll_algs mcoll__gatherv_inter_algs = {
    (const struct mcoll_alg_info[]){GATHER_INTER_INFO}, 1};

struct gather_call {
  const struct mcoll_gather_args *a;
  int forced, sink;
  size_t cma_min;
  struct mcoll_blocks uniform; /* gather: every block has my_len bytes */
  struct mcoll_blocks node;    /* another node's leader: its node's blocks */
  int *lens;                   /* another node's leader: bytes of each rank */
  int remote_leader;
};

static int gather_up(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  (void)lo, (void)hi;
  struct gather_call *g = hc->args;
  const struct mcoll_gather_args *a = g->a;
  struct mcoll_gather_node node = {
      .sink = g->sink, .mine = a->mine, .my_len = a->my_len,
      .dst = hc->c->rank == a->root ? a->dst : g->remote_leader ? &g->node : NULL,
      .lens = a->v ? NULL : &g->uniform, .lens_everywhere = !a->v, .forced = g->forced,
      .cma_min = g->cma_min};
  return mcoll__gather_node(hc->c, &node);
}

static int root_receives(struct mcoll_comm *c, const struct mcoll_gather_args *a) {
  const struct mcoll_topo *t = &c->topo;
  int err = MPI_SUCCESS, posted = 0, typed = 0;
  MPI_Request *req = mcoll__xmalloc(sizeof(MPI_Request) * (size_t)t->nnodes);
  MPI_Datatype *types = mcoll__xmalloc(sizeof(MPI_Datatype) * (size_t)t->nnodes);
  for (int k = 0; k < t->nnodes && err == MPI_SUCCESS; k++) {
    if (k == t->node) continue;
    err = mcoll__blocks_node_type(a->dst, t->node_of, k, &types[typed]);
    if (err != MPI_SUCCESS) break;
    err = PMPI_Irecv(a->dst->base, 1, types[typed++], t->node_leader[k],
                     mcoll__host_tag(MCOLL_TAG_GATHER_FAMILY), c->p2p, &req[posted]);
    if (err == MPI_SUCCESS) posted++;
  }
  int wait_err = posted ? mcoll__wait_all(posted, req) : MPI_SUCCESS;
  for (int k = 0; k < typed; k++) PMPI_Type_free(&types[k]);
  free(req);
  free(types);
  return err != MPI_SUCCESS ? err : wait_err;
}

static int between_nodes(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  (void)lo, (void)hi;
  struct gather_call *g = hc->args;
  struct mcoll_comm *c = hc->c;
  if (c->rank == g->a->root) return root_receives(c, g->a);
  return mcoll__host_send(g->node.base, (int)mcoll__blocks_total(&g->node), MPI_BYTE, g->a->root,
                   MCOLL_TAG_GATHER_FAMILY, c->p2p);
}

static const struct mcoll_hier_steps gather_steps = {gather_up, between_nodes, NULL, NULL};

/* gatherv: the root tells each other node's leader the bytes of its node's ranks. */
static int send_lengths(struct mcoll_comm *c, const struct mcoll_gather_args *a) {
  const struct mcoll_topo *t = &c->topo;
  int err = MPI_SUCCESS;
  int *lens = mcoll__xmalloc(sizeof(int) * (size_t)c->size);
  for (int k = 0; k < t->nnodes && err == MPI_SUCCESS; k++) {
    int m = 0;
    if (k == t->node) continue;
    for (int r = 0; r < c->size; r++)
      if (t->node_of[r] == k) lens[m++] = (int)mcoll__block_len(a->dst, r);
    err = mcoll__host_send(lens, m, MPI_INT, t->node_leader[k], MCOLL_TAG_GATHER_FAMILY, c->p2p);
  }
  free(lens);
  return err;
}

/* Another node's leader: learns its node's lengths and makes room for its blocks. */
static int prepare_node(struct mcoll_comm *c, struct gather_call *g) {
  const struct mcoll_topo *t = &c->topo;
  int *mine = mcoll__xmalloc(sizeof(int) * (size_t)t->local_size), err = MPI_SUCCESS;
  g->lens = mcoll__xmalloc(sizeof(int) * (size_t)c->size);
  for (int r = 0; r < c->size; r++) g->lens[r] = 0;
  if (g->a->v)
    err = mcoll__host_recv(mine, t->local_size, MPI_INT, g->a->root, MCOLL_TAG_GATHER_FAMILY, c->p2p,
                    MPI_STATUS_IGNORE);
  for (int i = 0; i < t->local_size; i++)
    g->lens[t->local_ranks[i]] = g->a->v ? mine[i] : (int)g->a->my_len;
  free(mine);
  mcoll__blocks_scratch(&g->node, c->size, g->lens);
  return err;
}

static size_t largest_block(const struct mcoll_blocks *b) {
  size_t most = 0;
  for (int r = 0; r < b->n; r++)
    if (mcoll__block_len(b, r) > most) most = mcoll__block_len(b, r);
  return most;
}

/* A gather whose choice is settled (coll/settled.h): the node's step alone. */
static int gather_settled(struct mcoll_comm *c, const struct mcoll_gather_args *a,
                          const struct mcoll_settled *s) {
  int is_root = c->rank == a->root;
  struct gather_call g; /* (g.node and g.lens: another node's leader only) */
  g.a = a;
  g.forced = s->alg;
  g.sink = mcoll__local_index(&c->topo, a->root);
  g.cma_min = s->value;
  g.remote_leader = 0;
  mcoll__blocks_plain(&g.uniform, NULL, c->size, a->my_len);
  if (is_root) mcoll__blocks_acquire(a->dst, 0, -1);
  struct mcoll_hier_call hc = {.c = c, .steps = &gather_steps, .leader = g.sink, .args = &g};
  int err = mcoll__hier_node_run(&hc);
  if (is_root) mcoll__blocks_release(a->dst, err == MPI_SUCCESS, a->mine ? -2 : a->root);
  return err;
}

/* How the call moves its blocks (g->forced, g->cma_min); 1 when it runs the slot
 * protocol (MCOLL_MOVE_SLOT). */
__attribute__((always_inline)) static inline int choose(struct mcoll_comm *c, enum mcoll_coll coll, const struct mcoll_gather_args *a,
                  struct gather_call *g, struct mcoll_adapt_call *timing) {
  int is_root = c->rank == a->root;
  g->forced = mcoll__move_forced(c, coll);
  g->cma_min = mcoll__move_threshold(c, coll, MCOLL_PARAM_GATHER_CMA_MIN);
  timing->cls = NULL;
  /* gatherv adapts only on two ranks: there the one block that moves, the other
   * rank's, is known to both (more ranks: a rank knows only its own count). */
  if (!a->v || c->size == 2)
    g->forced = mcoll__move_adaptive(c, coll, MCOLL_PARAM_GATHER_CMA_MIN,
                                     a->v && is_root ? mcoll__block_len(a->dst, 1 - a->root) : a->my_len,
                                     g->forced, g->cma_min, timing);
  return mcoll__move_slot_resolve(c, &g->forced, &g->cma_min);
}

/* The call once chosen (g: choose's answer, slot its return; stamp for the settled
 * choice). */
__attribute__((always_inline)) static inline int gather_by(struct mcoll_comm *c, enum mcoll_coll coll, const struct mcoll_gather_args *a,
                     struct gather_call *g, int slot, struct mcoll_adapt_call *timing,
                     unsigned stamp) {
  const struct mcoll_topo *t = &c->topo;
  int is_root = c->rank == a->root, root_node = t->node_of[a->root];
  size_t counted = is_root && a->v ? largest_block(a->dst) : a->my_len;
  if (slot) mcoll__count_alg(coll, MCOLL_MOVE_SLOT);
  else mcoll__count_moves(c, coll, is_root && a->v ? a->dst : NULL, a->my_len, g->forced, g->cma_min);
  mcoll__inter_single(c, coll, counted);
  if (!a->v && a->my_len == 0) return MPI_SUCCESS;
  if (!a->v && g->forced < 0)
    mcoll__settled_offer(c, coll, stamp, a->my_len, 0, timing, g->forced,
                         mcoll__move_of(c, a->my_len, g->forced, g->cma_min), g->cma_min);

  int err = MPI_SUCCESS;
  g->sink = t->node == root_node ? mcoll__local_index(t, a->root) : 0;
  g->remote_leader = t->node != root_node && t->local_rank == 0;
  mcoll__blocks_plain(&g->uniform, NULL, c->size, a->my_len);
  if (is_root) mcoll__blocks_acquire(a->dst, 0, -1);
  if (is_root && a->v && t->nnodes > 1) err = send_lengths(c, a);
  if (g->remote_leader) {
    int prep_err = prepare_node(c, g);
    if (err == MPI_SUCCESS) err = prep_err;
  }
  struct mcoll_hier_call hc = {.c = c, .steps = &gather_steps, .leader = g->sink, .args = g};
  int run_err = mcoll__hier_run(&hc);
  if (err == MPI_SUCCESS) err = run_err;
  if (is_root) mcoll__blocks_release(a->dst, err == MPI_SUCCESS, a->mine ? -2 : a->root);
  if (g->remote_leader) mcoll__blocks_release(&g->node, 0, -2);
  free(g->lens);
  mcoll__adapt_done(timing);
  return err;
}

int mcoll__gather(struct mcoll_comm *c, enum mcoll_coll coll, const struct mcoll_gather_args *a) {
  unsigned stamp = 0;
  const struct mcoll_settled *s = a->v ? NULL : mcoll__settled_take(c, coll, a->my_len, 0, &stamp);
  if (s) return gather_settled(c, a, s);
  struct gather_call g = {.a = a};
  struct mcoll_adapt_call timing = {0};
  int slot = choose(c, coll, a, &g, &timing);
  return gather_by(c, coll, a, &g, slot, &timing, stamp);
}

int mcoll__gather_try(struct mcoll_comm *c, enum mcoll_coll coll, const struct mcoll_gather_args *a,
                      int *err) {
  if (c->topo.nnodes != 1 || !mcoll__node_has_peers(c)) return -2;
  struct gather_call g = {.a = a};
  struct mcoll_adapt_call timing = {0};
  /* A size whose blocking calls keep their choice (coll/settled.h): that choice, the
   * one a task makes through the whole path (the try runs on the application's
   * thread, where the kept choice may be read). */
  const struct mcoll_settled *kept = a->v ? NULL : mcoll__settled_find(c, coll, a->my_len);
  mcoll__as_task = 1;
  int slot = 0;
  if (kept) {
    g.forced = kept->alg;
    g.cma_min = kept->value;
  } else {
    slot = choose(c, coll, a, &g, &timing);
  }
  if (a->v || a->my_len > 0) {
    mcoll__blocks_plain(&g.uniform, NULL, c->size, a->my_len);
    struct mcoll_gather_node node = {
        .sink = mcoll__local_index(&c->topo, a->root), .mine = a->mine, .my_len = a->my_len,
        .dst = c->rank == a->root ? a->dst : NULL, .lens = a->v ? NULL : &g.uniform,
        .lens_everywhere = !a->v, .forced = g.forced, .cma_min = g.cma_min};
    int ready = mcoll__gather_node_ready(c, &node, !a->v || c->size == 2);
    if (ready < 0) {
      mcoll__as_task = 0;
      return ready;
    }
  }
  mcoll__count_try(coll);
  if (kept) mcoll__count_alg(coll, kept->counted);
  *err = kept ? gather_settled(c, a, kept) : gather_by(c, coll, a, &g, slot, &timing, 0);
  mcoll__as_task = 0;
  return 1;
}
