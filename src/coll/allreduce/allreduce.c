/* Allreduce: algorithm table, and its steps in the MAHCAF template, piece by piece:
 * the node folds the piece into its leader (intra up: flat or HSRA), the leaders
 * allreduce it (inter), the leader passes it back through its area (intra down).
 * On a single node every rank copies the whole result out of the areas instead. */
#include "coll/reduce/red.h"
#include "hier/hier.h"

const struct mcoll_coll_algs mcoll__allreduce_algs = {
    (const struct mcoll_alg_info[]){
        {"flat", "every rank posts its input in its area and folds all of them (small messages); "
                 "MCOLL_ALG_ALLREDUCE=flat", MCOLL_RED_NEEDS, NULL},
        {"hsra", "rank j folds segment j across the areas, level by level (HSRA), all copy the "
                 "result; leaders: recursive doubling / Rabenseifner; MCOLL_ALG_ALLREDUCE=hsra", MCOLL_RED_NEEDS, NULL},
        {"p2p", "recursive doubling / Rabenseifner among all ranks in rank order over "
                "point-to-point (nodes not in rank order); MCOLL_ALG_ALLREDUCE=p2p", 0, NULL},
        {"cma", "every rank folds the peers' inputs read in place with CMA (large messages, "
                "few ranks); leaders as hsra; MCOLL_ALG_ALLREDUCE=cma", MCOLL_RED_NEEDS | MCOLL_NEED_CMA, NULL},
    },
    MCOLL_RED_NALGS};

struct allreduce_call {
  struct mcoll_comm *c;
  const struct mcoll_red_type *t;
  const char *in;
  char *out;
  int alg;
  int group_alg; /* between nodes (MCOLL_GROUP_*) */
};

static int up(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  struct allreduce_call *a = hc->args;
  const struct mcoll_red_type *t = a->t;
  const struct mcoll_topo *topo = &a->c->topo;
  size_t first = lo / t->extent;
  struct mcoll_node_red r = {.c = a->c, .t = t, .in = mcoll__red_at(t, a->in, first),
                             .count = (hi - lo) / t->extent, .levels = 1};
  if (topo->nnodes == 1 || topo->local_rank == hc->leader)
    r.out[0] = (struct mcoll_node_out){topo->local_size, mcoll__red_at(t, a->out, first), 0};
  /* Across nodes the leader alone copies the result out (then goes on to the
   * inter-node step): the others fold it all. */
  if (topo->nnodes > 1) r.dest = hc->leader + 1;
  else r.all_out = 1;
  return mcoll__node_red_step(hc, &r, a->alg);
}

static int inter(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  struct allreduce_call *a = hc->args;
  const struct mcoll_topo *topo = &a->c->topo;
  struct mcoll_red_group g = {a->c, topo->nnodes, topo->node, topo->node_leader, a->group_alg};
  return mcoll__group_allreduce(&g, a->t, a->out + lo, (hi - lo) / a->t->extent);
}

struct copy_to {
  const struct mcoll_red_type *t;
  char *dst;
};

static void take_copy(void *arg, const char *chunk, size_t first, size_t n) {
  struct copy_to *to = arg;
  mcoll__red_copy(to->t, mcoll__red_at(to->t, to->dst, first), chunk, n);
}

static int down(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  struct allreduce_call *a = hc->args;
  if (a->c->topo.nnodes == 1) return MPI_SUCCESS;
  struct copy_to to = {a->t, a->out + lo};
  mcoll__node_share(a->c, a->t, hc->leader, a->out + lo, (hi - lo) / a->t->extent, take_copy,
                    &to);
  return MPI_SUCCESS;
}

static const struct mcoll_hier_steps allreduce_steps = {up, inter, down, NULL};

static int allreduce_by(struct mcoll_comm *c, const struct mcoll_red_type *t, const void *sendbuf,
                        void *recvbuf, size_t count, int alg) {
  size_t bytes = count * t->extent;
  struct allreduce_call a = {c, t, mcoll__red_input(t, sendbuf, recvbuf),
                             mcoll__red_data(t, recvbuf), alg, MCOLL_GROUP_SMALL};
  if (count == 0) return MPI_SUCCESS;
  if (alg == MCOLL_RED_P2P || c->size == 1) {
    struct mcoll_red_group g = {c, c->size, c->rank, NULL,
                                mcoll__group_choose(MCOLL_COLL_ALLREDUCE, c, t, count, c->size, 0)};
    mcoll__red_copy(t, a.out, a.in, count);
    return mcoll__group_allreduce(&g, t, a.out, count);
  }
  struct mcoll_hier_call hc = {.c = c, .steps = &allreduce_steps, .bytes = bytes,
                               .piece = c->topo.nnodes > 1 ? mcoll__red_piece(c, t, bytes) : 0,
                               .leader = 0, .args = &a, .overlap = 1};
  if (c->topo.nnodes > 1) {
    size_t piece_count = hc.piece / t->extent < count ? hc.piece / t->extent : count;
    a.group_alg = mcoll__group_choose(MCOLL_COLL_ALLREDUCE, c, t, piece_count, c->topo.nnodes, 1);
  }
  return mcoll__hier_run(&hc);
}

int mcoll__allreduce(struct mcoll_comm *c, const struct mcoll_red_type *t, const void *sendbuf,
                     void *recvbuf, size_t count) {
  struct mcoll_adapt_call timing;
  int alg = mcoll__red_choose_adaptive(MCOLL_COLL_ALLREDUCE, c, count * t->extent, !t->commutative,
                                       t->extent, &timing);
  mcoll__count_alg(MCOLL_COLL_ALLREDUCE, alg);
  int err = allreduce_by(c, t, sendbuf, recvbuf, count, alg);
  mcoll__adapt_done(&timing);
  return err;
}

int mcoll__allreduce_try(struct mcoll_comm *c, const struct mcoll_red_type *t, const void *sendbuf,
                         void *recvbuf, size_t count, int *err) {
  if (c->topo.nnodes != 1 || count == 0 || !mcoll__node_has_peers(c)) return -1;
  int alg = mcoll__red_choose_task(MCOLL_COLL_ALLREDUCE, c, count * t->extent, !t->commutative,
                                   t->extent);
  if (alg != MCOLL_RED_FLAT) return -1;
  /* (the node step of allreduce_by on one node: `up`) */
  struct mcoll_node_red r = {.c = c, .t = t, .in = mcoll__red_input(t, sendbuf, recvbuf),
                             .count = count, .levels = 1, .all_out = 1};
  r.out[0] = (struct mcoll_node_out){c->topo.local_size, mcoll__red_data(t, recvbuf), 0};
  if (!mcoll__node_red_ready(&r, alg, 0)) return -1;
  mcoll__count_alg(MCOLL_COLL_ALLREDUCE, alg);
  mcoll__count_try(MCOLL_COLL_ALLREDUCE);
  *err = allreduce_by(c, t, sendbuf, recvbuf, count, alg);
  return 1;
}
