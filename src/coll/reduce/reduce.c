/* Reduce: algorithm table, and its steps in the MAHCAF template, piece by piece:
 * the node folds the piece into its leader for the call (the root on the root's
 * node, local rank 0 elsewhere: flat or HSRA), then the leaders reduce it to the
 * root (binomial tree, or reduce-scatter + gather for large pieces). */
#include "coll/reduce/red.h"
#include "coll/settled.h"
#include "hier/hier.h"

#include <stdlib.h>

const struct mcoll_coll_algs mcoll__reduce_algs = {
    (const struct mcoll_alg_info[]){
        {"flat", "every rank posts its input in its area, the root folds all of them (small "
                 "messages); MCOLL_ALG_REDUCE=flat", MCOLL_RED_NEEDS, NULL},
        {"hsra", "rank j folds segment j across the areas, level by level (HSRA), the root "
                 "copies the result; leaders: binomial / reduce-scatter+gather; "
                 "MCOLL_ALG_REDUCE=hsra", MCOLL_RED_NEEDS, NULL},
        {"p2p", "binomial / reduce-scatter+gather among all ranks in rank order over "
                "point-to-point (nodes not in rank order); MCOLL_ALG_REDUCE=p2p", 0, NULL},
        {"cma", "the root folds the peers' inputs read in place with CMA (large messages, few "
                "ranks); from MCOLL_RED_SPLIT_MIN each rank folds a segment and writes it to the "
                "root; leaders as hsra; MCOLL_ALG_REDUCE=cma", MCOLL_RED_NEEDS | MCOLL_NEED_CMA, NULL},
    },
    MCOLL_RED_NALGS};

struct reduce_call {
  struct mcoll_comm *c;
  const struct mcoll_red_type *t;
  const char *in;
  char *out;     /* root: the result; other leaders: two pieces of scratch, in turn */
  int root, alg;
  int *leaders;  /* [nnodes] comm rank leading each node for this call */
  int group_alg; /* between nodes (MCOLL_GROUP_*) */
  size_t piece;  /* bytes per piece when there are several (else 0) */
};

/* Where this rank's node result goes for the piece starting at byte lo: the root's
 * result, or a leader's scratch, two pieces in turn, so that the inter-node step of
 * one piece overlaps the node's fold of the next (hier.h). */
static char *piece_dst(const struct reduce_call *a, size_t lo) {
  if (a->c->rank == a->root) return a->out + lo;
  return a->piece ? a->out + (lo / a->piece % 2) * a->piece : a->out;
}

/* The node's part of the piece [lo, hi), folded into node-local rank leader. */
static struct mcoll_node_red node_part(const struct reduce_call *a, int leader, size_t lo,
                                       size_t hi) {
  const struct mcoll_red_type *t = a->t;
  const struct mcoll_topo *topo = &a->c->topo;
  /* The leader copies the whole result out: the others fold it all. */
  struct mcoll_node_red r = {.c = a->c, .t = t, .in = a->in + lo,
                             .count = (hi - lo) / t->extent, .levels = 1,
                             .dest = leader + 1};
  if (topo->local_rank == leader)
    r.out[0] = (struct mcoll_node_out){topo->local_size, piece_dst(a, lo), 0};
  return r;
}

static int up(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  struct reduce_call *a = hc->args;
  struct mcoll_node_red r = node_part(a, hc->leader, lo, hi);
  return mcoll__node_red_step(hc, &r, a->alg);
}

static int inter(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  struct reduce_call *a = hc->args;
  const struct mcoll_topo *topo = &a->c->topo;
  struct mcoll_red_group g = {a->c, topo->nnodes, topo->node, a->leaders, a->group_alg};
  return mcoll__group_reduce(&g, a->t, piece_dst(a, lo), (hi - lo) / a->t->extent,
                             topo->node_of[a->root]);
}

static const struct mcoll_hier_steps reduce_steps = {up, inter, NULL, NULL};

static int reduce_p2p(struct reduce_call *a, size_t count) {
  struct mcoll_comm *c = a->c;
  struct mcoll_red_group g = {c, c->size, c->rank, NULL,
                              mcoll__group_choose(MCOLL_COLL_REDUCE, c, a->t, count, c->size, 0)};
  char *buf = c->rank == a->root ? a->out : mcoll__red_alloc(a->t, count);
  mcoll__red_copy(a->t, buf, a->in, count);
  int err = mcoll__group_reduce(&g, a->t, buf, count, a->root);
  if (buf != a->out) mcoll__red_free(a->t, buf);
  return err;
}

static struct reduce_call call_of(struct mcoll_comm *c, const struct mcoll_red_type *t,
                                  const void *sendbuf, void *recvbuf, int root, int alg) {
  int is_root = c->rank == root;
  return (struct reduce_call){c, t, mcoll__red_data(t, sendbuf == MPI_IN_PLACE && is_root ? recvbuf
                                                                                          : sendbuf),
                              is_root ? mcoll__red_data(t, recvbuf) : NULL, root, alg, NULL,
                              MCOLL_GROUP_SMALL, 0};
}

static int reduce_by(struct mcoll_comm *c, const struct mcoll_red_type *t, const void *sendbuf,
                     void *recvbuf, size_t count, int root, int alg) {
  const struct mcoll_topo *topo = &c->topo;
  size_t bytes = count * t->extent;
  int is_root = c->rank == root;
  struct reduce_call a = call_of(c, t, sendbuf, recvbuf, root, alg);
  if (count == 0) return MPI_SUCCESS;
  if (alg == MCOLL_RED_P2P || c->size == 1) return reduce_p2p(&a, count);

  int root_node = topo->node_of[root];
  int leader = root_node == topo->node ? mcoll__local_index(topo, root) : 0;
  struct mcoll_hier_call hc = {.c = c, .steps = &reduce_steps, .bytes = bytes, .piece = 0,
                               .leader = leader, .args = &a, .overlap = 1};
  if (topo->nnodes == 1) return mcoll__hier_run(&hc);

  hc.piece = mcoll__red_piece(c, t, bytes);
  size_t piece_count = hc.piece / t->extent < count ? hc.piece / t->extent : count;
  a.group_alg = mcoll__group_choose(MCOLL_COLL_REDUCE, c, t, piece_count, topo->nnodes, 1);
  a.leaders = mcoll__xmalloc(sizeof(int) * (size_t)topo->nnodes);
  for (int k = 0; k < topo->nnodes; k++) a.leaders[k] = k == root_node ? root : topo->node_leader[k];
  if (bytes > hc.piece) a.piece = hc.piece;
  if (!is_root && topo->local_rank == leader)
    a.out = mcoll__red_alloc(t, (count < hc.piece / t->extent ? count : 2 * (hc.piece / t->extent)));
  int err = mcoll__hier_run(&hc);
  if (!is_root && a.out) mcoll__red_free(t, a.out);
  free(a.leaders);
  return err;
}

/* A reduce whose choice is settled (coll/settled.h): the node's step alone. */
static int reduce_settled(struct mcoll_comm *c, const struct mcoll_red_type *t,
                          const void *sendbuf, void *recvbuf, size_t count, int root, int alg) {
  struct reduce_call a = call_of(c, t, sendbuf, recvbuf, root, alg);
  struct mcoll_hier_call hc = {.c = c, .steps = &reduce_steps, .bytes = count * t->extent,
                               .leader = mcoll__local_index(&c->topo, root), .args = &a,
                               .overlap = 1};
  return mcoll__hier_node_run(&hc);
}

int mcoll__reduce(struct mcoll_comm *c, const struct mcoll_red_type *t, const void *sendbuf,
                  void *recvbuf, size_t count, int root) {
  size_t bytes = count * t->extent;
  /* (the element's size is part of the key: the choice's facts depend on it) */
  unsigned stamp = 0;
  const struct mcoll_settled *s = mcoll__settled_take(c, MCOLL_COLL_REDUCE, bytes, t->extent, &stamp);
  if (s) return reduce_settled(c, t, sendbuf, recvbuf, count, root, s->alg);
  struct mcoll_adapt_call timing;
  int alg = mcoll__red_choose_adaptive(MCOLL_COLL_REDUCE, c, bytes, !t->commutative,
                                       t->extent, &timing);
  mcoll__count_alg(MCOLL_COLL_REDUCE, alg);
  if (alg != MCOLL_RED_P2P && c->size > 1)
    mcoll__settled_offer(c, MCOLL_COLL_REDUCE, stamp, bytes, t->extent, &timing, alg, alg, 0);
  int err = reduce_by(c, t, sendbuf, recvbuf, count, root, alg);
  mcoll__adapt_done(&timing);
  return err;
}

int mcoll__reduce_try(struct mcoll_comm *c, const struct mcoll_red_type *t, const void *sendbuf,
                      void *recvbuf, size_t count, int root, int *err) {
  if (c->topo.nnodes != 1 || count == 0 || !mcoll__node_has_peers(c)) return -2;
  int alg = mcoll__red_choose_task(MCOLL_COLL_REDUCE, c, count * t->extent, !t->commutative,
                                   t->extent);
  if (alg != MCOLL_RED_FLAT) return -2;
  struct reduce_call a = call_of(c, t, sendbuf, recvbuf, root, alg);
  struct mcoll_node_red r = node_part(&a, mcoll__local_index(&c->topo, root), 0, count * t->extent);
  if (!mcoll__node_red_ready(&r, alg, 1)) return -1;
  mcoll__count_alg(MCOLL_COLL_REDUCE, alg);
  mcoll__count_try(MCOLL_COLL_REDUCE);
  *err = reduce_by(c, t, sendbuf, recvbuf, count, root, alg);
  return 1;
}
