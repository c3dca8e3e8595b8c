/* Scan and exscan: algorithm tables, and their steps in the MAHCAF template, piece
 * by piece: inside the node, the chain of HSRA (or the flat fold) leaves the prefix
 * of ranks 0..k in area k, so every rank copies its own prefix, and the leader the
 * node's total (intra up); the leaders compute the exclusive prefix of the nodes'
 * totals (inter); the leader passes it through its area and every rank folds it in
 * on the left (intra down). Nodes must hold consecutive ranks, else p2p. */
#include "coll/facts.h"
#include "coll/reduce/red.h"
#include "hier/hier.h"

#define SCAN_ALGS(coll)                                                                         \
  {"flat", "every rank posts its input in its area and folds those of the ranks below it "    \
           "(small messages); MCOLL_ALG_" coll "=flat", MCOLL_RED_NEEDS, NULL},                                       \
      {"hsra", "rank j carries segment j along the areas in rank order, leaving prefix k in "  \
               "area k; leaders: recursive-doubling exscan; MCOLL_ALG_" coll "=hsra", MCOLL_RED_NEEDS, NULL},        \
      {"p2p", "recursive-doubling exscan among all ranks over point-to-point (nodes not in "   \
              "rank order); MCOLL_ALG_" coll "=p2p", 0, NULL},                                          \
      {"cma", "every rank folds the inputs of the ranks below it, read in place with CMA "     \
              "(large messages, few ranks); MCOLL_ALG_" coll "=cma", MCOLL_RED_NEEDS | MCOLL_NEED_CMA, NULL},

const struct mcoll_coll_algs mcoll__scan_algs = {(const struct mcoll_alg_info[]){SCAN_ALGS("SCAN")},
                                                 MCOLL_RED_NALGS};
const struct mcoll_coll_algs mcoll__exscan_algs = {
    (const struct mcoll_alg_info[]){SCAN_ALGS("EXSCAN")}, MCOLL_RED_NALGS};

struct scan_call {
  struct mcoll_comm *c;
  const struct mcoll_red_type *t;
  const char *in;
  char *out;
  int exclusive, alg;
  char *total;  /* across nodes, at the leader: two pieces of the node's total, in turn */
  size_t piece; /* bytes per piece (0: one piece) */
};

/* The leader's node total for the piece at byte lo (NULL elsewhere): two buffers in
 * turn, so that the inter-node step of one piece overlaps the next's fold (hier.h). */
static char *total_at(const struct scan_call *a, size_t lo) {
  if (!a->total || !a->piece) return a->total;
  return a->total + (lo / a->piece % 2) * a->piece;
}

static int up(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  struct scan_call *a = hc->args;
  const struct mcoll_topo *topo = &a->c->topo;
  int me = topo->local_rank;
  struct mcoll_node_red r = {.c = a->c, .t = a->t, .in = a->in + lo,
                             .count = (hi - lo) / a->t->extent, .prefix = 1};
  r.out[0] = (struct mcoll_node_out){a->exclusive ? me : me + 1, a->out + lo, 0};
  if (a->total) r.out[1] = (struct mcoll_node_out){topo->local_size, total_at(a, lo), 0};
  return mcoll__node_red_step(hc, &r, a->alg);
}

static int inter(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  struct scan_call *a = hc->args;
  const struct mcoll_topo *topo = &a->c->topo;
  struct mcoll_red_group g = {a->c, topo->nnodes, topo->node, topo->node_leader, MCOLL_GROUP_SMALL};
  return mcoll__group_exscan(&g, a->t, total_at(a, lo), (hi - lo) / a->t->extent);
}

struct fold_into {
  const struct mcoll_red_type *t;
  char *dst;
};

static void take_fold(void *arg, const char *chunk, size_t first, size_t n) {
  struct fold_into *f = arg;
  mcoll__red_fold(f->t, chunk, mcoll__red_at(f->t, f->dst, first), n);
}

/* The nodes below mine come first: result = their fold op my node's prefix. */
static int down(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  struct scan_call *a = hc->args;
  const struct mcoll_topo *topo = &a->c->topo;
  if (topo->nnodes == 1 || topo->node == 0) return MPI_SUCCESS;
  size_t n = (hi - lo) / a->t->extent;
  char *total = total_at(a, lo);
  if (total) { /* the leader is local rank 0: for exscan its prefix is empty */
    if (a->exclusive) mcoll__red_copy(a->t, a->out + lo, total, n);
    else mcoll__red_fold(a->t, total, a->out + lo, n);
  }
  struct fold_into f = {a->t, a->out + lo};
  mcoll__node_share(a->c, a->t, hc->leader, total, n, take_fold, &f);
  return MPI_SUCCESS;
}

static const struct mcoll_hier_steps scan_steps = {up, inter, down, NULL};

static int scan_p2p(struct scan_call *a, size_t count) {
  struct mcoll_comm *c = a->c;
  const struct mcoll_red_type *t = a->t;
  struct mcoll_red_group g = {c, c->size, c->rank, NULL, MCOLL_GROUP_SMALL};
  char *below = mcoll__red_alloc(t, count);
  mcoll__red_copy(t, below, a->in, count);
  int err = mcoll__group_exscan(&g, t, below, count);
  if (!a->exclusive) {
    mcoll__red_copy(t, a->out, a->in, count);
    if (c->rank > 0) mcoll__red_fold(t, below, a->out, count);
  } else if (c->rank > 0) {
    mcoll__red_copy(t, a->out, below, count);
  }
  mcoll__red_free(t, below);
  return err;
}

static int scan_by(struct mcoll_comm *c, const struct mcoll_red_type *t, const void *sendbuf,
                   void *recvbuf, size_t count, int exclusive, int alg) {
  enum mcoll_coll coll = exclusive ? MCOLL_COLL_EXSCAN : MCOLL_COLL_SCAN;
  size_t bytes = count * t->extent;
  struct scan_call a = {c, t, mcoll__red_input(t, sendbuf, recvbuf), mcoll__red_data(t, recvbuf),
                        exclusive, alg, NULL, 0};
  if (count == 0) return MPI_SUCCESS;
  if (alg == MCOLL_RED_P2P || c->size == 1) return scan_p2p(&a, count);
  struct mcoll_hier_call hc = {.c = c, .steps = &scan_steps, .bytes = bytes, .piece = 0,
                               .leader = 0, .args = &a, .overlap = 1};
  if (c->topo.nnodes > 1) {
    struct mcoll_facts facts = mcoll__facts(c, bytes);
    mcoll__inter_select(coll, &facts, 0); /* one algorithm: counted as what ran */
    hc.piece = mcoll__red_piece(c, t, bytes);
    if (c->topo.local_rank == 0)
      a.total = mcoll__red_alloc(t, count < hc.piece / t->extent ? count : 2 * (hc.piece / t->extent));
    if (bytes > hc.piece) a.piece = hc.piece;
  }
  int err = mcoll__hier_run(&hc);
  if (a.total) mcoll__red_free(t, a.total);
  return err;
}

int mcoll__scan(struct mcoll_comm *c, const struct mcoll_red_type *t, const void *sendbuf,
                void *recvbuf, size_t count, int exclusive) {
  enum mcoll_coll coll = exclusive ? MCOLL_COLL_EXSCAN : MCOLL_COLL_SCAN;
  /* A prefix needs the nodes in rank order, whatever the op. */
  int alg = mcoll__red_choose(coll, c, count * t->extent, 1, t->extent);
  mcoll__count_alg(coll, alg);
  return scan_by(c, t, sendbuf, recvbuf, count, exclusive, alg);
}

int mcoll__scan_try(struct mcoll_comm *c, const struct mcoll_red_type *t, const void *sendbuf,
                    void *recvbuf, size_t count, int exclusive, int *err) {
  enum mcoll_coll coll = exclusive ? MCOLL_COLL_EXSCAN : MCOLL_COLL_SCAN;
  if (c->topo.nnodes != 1 || count == 0 || !mcoll__node_has_peers(c)) return -1;
  int alg = mcoll__red_choose(coll, c, count * t->extent, 1, t->extent);
  if (alg != MCOLL_RED_FLAT) return -1;
  /* (the node step of scan_by on one node: `up`, no node total) */
  int me = c->topo.local_rank;
  struct mcoll_node_red r = {.c = c, .t = t, .in = mcoll__red_input(t, sendbuf, recvbuf),
                             .count = count, .prefix = 1};
  r.out[0] = (struct mcoll_node_out){exclusive ? me : me + 1, mcoll__red_data(t, recvbuf), 0};
  if (!mcoll__node_red_ready(&r, alg, 1)) return -1;
  mcoll__count_alg(coll, alg);
  mcoll__count_try(coll);
  *err = scan_by(c, t, sendbuf, recvbuf, count, exclusive, alg);
  return 1;
}
