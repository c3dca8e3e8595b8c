/* Scatter(v): algorithm tables, choice, and the steps in the MAHCAF template: the
 * root sends each other node's leader that node's blocks (a datatype per node, so
 * they leave in place; scatterv sends their lengths first), then every node
 * scatters from its source (the root on its node, the leader elsewhere). */
#include <stdlib.h>

#include "task/host.h"
#include "coll/scatter/scatter.h"
#include "coll/facts.h"
#include "coll/tags.h"
#include "core/config.h"
#include "hier/hier.h"

const struct mcoll_coll_algs mcoll__scatter_algs = {
    (const struct mcoll_alg_info[]){MCOLL_MOVE_ALG_INFO}, MCOLL_MOVE_NALGS};
const struct mcoll_coll_algs mcoll__scatterv_algs = {
    (const struct mcoll_alg_info[]){MCOLL_MOVE_V_ALG_INFO}, MCOLL_MOVE_V_NALGS};
#define SCATTER_INTER_INFO \
  {"direct", "the root sends each node's leader that node's blocks", 0, NULL}
const struct mcoll_coll_algs mcoll__scatter_inter_algs = {
    (const struct mcoll_alg_info[]){SCATTER_INTER_INFO}, 1};
const struct mcoll_coll_algs mcoll__scatterv_inter_algs = {
    (const struct mcoll_alg_info[]){SCATTER_INTER_INFO}, 1};

struct scatter_call {
  const struct mcoll_scatter_args *a;
  int forced, source, remote_leader;
  size_t cma_min;
  struct mcoll_blocks node; /* another node's leader: its node's blocks */
  int *lens;                /* bytes of each rank: root (per node, sent) or a leader */
  MPI_Request *req;         /* root: sends still in flight */
  MPI_Datatype *types;
  int nreq, ntypes;
};

static int root_sends(struct mcoll_comm *c, struct scatter_call *s) {
  const struct mcoll_topo *t = &c->topo;
  const struct mcoll_blocks *src = s->a->src;
  int err = MPI_SUCCESS, used = 0;
  s->req = mcoll__xmalloc(sizeof(MPI_Request) * 2 * (size_t)t->nnodes);
  s->types = mcoll__xmalloc(sizeof(MPI_Datatype) * (size_t)t->nnodes);
  s->lens = mcoll__xmalloc(sizeof(int) * (size_t)c->size);
  for (int k = 0; k < t->nnodes && err == MPI_SUCCESS; k++) {
    if (k == t->node) continue;
    int leader = t->node_leader[k], m = 0, *lens = s->lens + used;
    for (int r = 0; r < c->size; r++)
      if (t->node_of[r] == k) lens[m++] = (int)mcoll__block_len(src, r);
    used += m;
    if (s->a->v)
      err = PMPI_Isend(lens, m, MPI_INT, leader, mcoll__host_tag(MCOLL_TAG_GATHER_FAMILY),
                       c->p2p, &s->req[s->nreq++]);
    if (err == MPI_SUCCESS) err = mcoll__blocks_node_type(src, t->node_of, k, &s->types[s->ntypes]);
    if (err != MPI_SUCCESS) break;
    err = PMPI_Isend(src->base, 1, s->types[s->ntypes++], leader,
                     mcoll__host_tag(MCOLL_TAG_GATHER_FAMILY), c->p2p, &s->req[s->nreq++]);
  }
  return err;
}

static int leader_receives(struct mcoll_comm *c, struct scatter_call *s) {
  const struct mcoll_topo *t = &c->topo;
  int *mine = mcoll__xmalloc(sizeof(int) * (size_t)t->local_size), err = MPI_SUCCESS;
  s->lens = mcoll__xmalloc(sizeof(int) * (size_t)c->size);
  for (int r = 0; r < c->size; r++) s->lens[r] = 0;
  if (s->a->v)
    err = mcoll__host_recv(mine, t->local_size, MPI_INT, s->a->root, MCOLL_TAG_GATHER_FAMILY, c->p2p,
                    MPI_STATUS_IGNORE);
  for (int i = 0; i < t->local_size; i++)
    s->lens[t->local_ranks[i]] = s->a->v ? mine[i] : (int)s->a->my_len;
  free(mine);
  mcoll__blocks_scratch(&s->node, c->size, s->lens);
  int recv_err = mcoll__host_recv(s->node.base, (int)mcoll__blocks_total(&s->node), MPI_BYTE, s->a->root,
                           MCOLL_TAG_GATHER_FAMILY, c->p2p, MPI_STATUS_IGNORE);
  return err != MPI_SUCCESS ? err : recv_err;
}

static int between_nodes(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  (void)lo, (void)hi;
  struct scatter_call *s = hc->args;
  return hc->c->rank == s->a->root ? root_sends(hc->c, s) : leader_receives(hc->c, s);
}

static int scatter_down(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  (void)lo, (void)hi;
  struct scatter_call *s = hc->args;
  const struct mcoll_scatter_args *a = s->a;
  struct mcoll_scatter_node node = {
      .source = s->source,
      .src = hc->c->rank == a->root ? a->src : s->remote_leader ? &s->node : NULL,
      .mine = a->mine, .my_len = a->my_len, .forced = s->forced, .cma_min = s->cma_min,
      .uniform = !a->v};
  return mcoll__scatter_node(hc->c, &node);
}

static int finish(struct mcoll_hier_call *hc) {
  struct scatter_call *s = hc->args;
  int err = s->nreq ? mcoll__wait_all(s->nreq, s->req) : MPI_SUCCESS;
  for (int k = 0; k < s->ntypes; k++) PMPI_Type_free(&s->types[k]);
  return err;
}

static const struct mcoll_hier_steps scatter_steps = {NULL, between_nodes, scatter_down, finish};

static size_t largest_block(const struct mcoll_blocks *b) {
  size_t most = 0;
  for (int r = 0; r < b->n; r++)
    if (mcoll__block_len(b, r) > most) most = mcoll__block_len(b, r);
  return most;
}

/* How the call moves its blocks (s->forced, s->cma_min); 1 when it runs the slot
 * protocol (MCOLL_MOVE_SLOT). */
__attribute__((always_inline)) static inline int choose(struct mcoll_comm *c, enum mcoll_coll coll, const struct mcoll_scatter_args *a,
                  struct scatter_call *s, struct mcoll_adapt_call *timing) {
  int is_root = c->rank == a->root;
  s->forced = mcoll__move_forced(c, coll);
  s->cma_min = mcoll__move_threshold(c, coll, MCOLL_PARAM_SCATTER_CMA_MIN);
  timing->cls = NULL;
  /* scatterv adapts only on two ranks: there the one block that moves, the other
   * rank's, is known to both (more ranks: a rank knows only its own count). */
  if (!a->v || c->size == 2)
    s->forced = mcoll__move_adaptive(c, coll, MCOLL_PARAM_SCATTER_CMA_MIN,
                                     a->v && is_root ? mcoll__block_len(a->src, 1 - a->root) : a->my_len,
                                     s->forced, s->cma_min, timing);
  return mcoll__move_slot_resolve(c, &s->forced, &s->cma_min);
}

/* The call once chosen (s: choose's answer, slot its return). */
__attribute__((always_inline)) static inline int scatter_by(struct mcoll_comm *c, enum mcoll_coll coll, const struct mcoll_scatter_args *a,
                      struct scatter_call *s, int slot, struct mcoll_adapt_call *timing) {
  const struct mcoll_topo *t = &c->topo;
  int is_root = c->rank == a->root, root_node = t->node_of[a->root];
  size_t counted = is_root && a->v ? largest_block(a->src) : a->my_len;
  if (slot) mcoll__count_alg(coll, MCOLL_MOVE_SLOT);
  else mcoll__count_moves(c, coll, is_root && a->v ? a->src : NULL, a->my_len, s->forced, s->cma_min);
  mcoll__inter_single(c, coll, counted);
  if (!a->v && a->my_len == 0) return MPI_SUCCESS;

  s->source = t->node == root_node ? mcoll__local_index(t, a->root) : 0;
  s->remote_leader = t->node != root_node && t->local_rank == 0;
  if (is_root) mcoll__blocks_acquire(a->src, 0, -2);
  struct mcoll_hier_call hc = {.c = c, .steps = &scatter_steps, .leader = s->source, .args = s};
  int err = mcoll__hier_run(&hc);
  if (is_root) mcoll__blocks_release(a->src, 0, -2);
  if (s->remote_leader) mcoll__blocks_release(&s->node, 0, -2);
  free(s->lens);
  free(s->req);
  free(s->types);
  mcoll__adapt_done(timing);
  return err;
}

int mcoll__scatter(struct mcoll_comm *c, enum mcoll_coll coll,
                   const struct mcoll_scatter_args *a) {
  struct scatter_call s = {.a = a};
  struct mcoll_adapt_call timing = {0};
  int slot = choose(c, coll, a, &s, &timing);
  return scatter_by(c, coll, a, &s, slot, &timing);
}

int mcoll__scatter_try(struct mcoll_comm *c, enum mcoll_coll coll,
                       const struct mcoll_scatter_args *a, int *err) {
  if (c->topo.nnodes != 1 || !mcoll__node_has_peers(c)) return -2;
  struct scatter_call s = {.a = a};
  struct mcoll_adapt_call timing = {0};
  mcoll__as_task = 1;
  int slot = choose(c, coll, a, &s, &timing);
  if (a->v || a->my_len > 0) {
    struct mcoll_scatter_node node = {
        .source = mcoll__local_index(&c->topo, a->root),
        .src = c->rank == a->root ? a->src : NULL, .mine = a->mine, .my_len = a->my_len,
        .forced = s.forced, .cma_min = s.cma_min, .uniform = !a->v};
    int ready = mcoll__scatter_node_ready(c, &node, !a->v || c->size == 2);
    if (ready < 0) {
      mcoll__as_task = 0;
      return ready;
    }
  }
  mcoll__count_try(coll);
  *err = scatter_by(c, coll, a, &s, slot, &timing);
  mcoll__as_task = 0;
  return 1;
}
