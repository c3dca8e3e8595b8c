/* Reductions among a group of ranks (node leaders, or every rank) over the host
 * MPI's point-to-point, keeping member order for non-commutative ops: a partner
 * below contributes on the left (theirs op mine), a partner above on the right.
 *
 * Non-power-of-two groups first fold members 2i into 2i+1 for i < rem (MPICH's
 * way), leaving pof2 members, each holding a contiguous run of the group. Small:
 * recursive doubling (allreduce), binomial tree (reduce). Large (Rabenseifner):
 * reduce-scatter by recursive halving, then allgather by recursive doubling
 * (allreduce) or every piece straight to the root (reduce). */
#include "task/host.h"
#include "coll/reduce/red.h"
#include "coll/tags.h"
#include "core/config.h"

#define MCOLL_GROUP_ALLREDUCE_ALGS                                                            \
  (const struct mcoll_alg_info[]){                                                            \
      {"recursive_doubling", "leaders exchange whole vectors at distance 1, 2, 4 ... (small)", 0, \
       NULL},                                                                                 \
      {"rabenseifner", "reduce-scatter by recursive halving, allgather by recursive doubling",  \
       MCOLL_NEED_SPLITS, NULL},                                                              \
  }

const struct mcoll_coll_algs mcoll__allreduce_inter_algs = {MCOLL_GROUP_ALLREDUCE_ALGS,
                                                            MCOLL_GROUP_NALGS};
/* reduce_scatter(_block) across nodes: the leaders allreduce the node totals. */
const struct mcoll_coll_algs mcoll__reduce_scatter_inter_algs = {MCOLL_GROUP_ALLREDUCE_ALGS,
                                                                 MCOLL_GROUP_NALGS};
const struct mcoll_coll_algs mcoll__reduce_scatter_block_inter_algs = {MCOLL_GROUP_ALLREDUCE_ALGS,
                                                                       MCOLL_GROUP_NALGS};
const struct mcoll_coll_algs mcoll__reduce_inter_algs = {
    (const struct mcoll_alg_info[]){
        {"binomial", "binomial tree to the root's node (small; non-commutative ops in order)", 0,
         NULL},
        {"rabenseifner", "reduce-scatter by recursive halving, then every piece to the root",
         MCOLL_NEED_SPLITS, NULL},
    },
    MCOLL_GROUP_NALGS};
#define MCOLL_GROUP_EXSCAN_ALGS                                                              \
  (const struct mcoll_alg_info[]){                                                           \
      {"recursive_doubling", "exclusive prefix of the node totals by recursive doubling", 0, \
       NULL},                                                                                \
  }
const struct mcoll_coll_algs mcoll__scan_inter_algs = {MCOLL_GROUP_EXSCAN_ALGS, 1};
const struct mcoll_coll_algs mcoll__exscan_inter_algs = {MCOLL_GROUP_EXSCAN_ALGS, 1};

static int rank_of(const struct mcoll_red_group *g, int member) {
  return g->ranks ? g->ranks[member] : member;
}

static int send_to(const struct mcoll_red_group *g, const struct mcoll_red_type *t,
                   const char *data, size_t n, int member) {
  return mcoll__host_send(data - t->true_lb, (int)n, t->type, rank_of(g, member), MCOLL_TAG_REDUCE,
                   g->c->p2p);
}

static int recv_from(const struct mcoll_red_group *g, const struct mcoll_red_type *t, char *data,
                     size_t n, int member) {
  return mcoll__host_recv(data - t->true_lb, (int)n, t->type, rank_of(g, member), MCOLL_TAG_REDUCE,
                   g->c->p2p, MPI_STATUS_IGNORE);
}

static int exchange(const struct mcoll_red_group *g, const struct mcoll_red_type *t,
                    const char *out, size_t out_n, char *in, size_t in_n, int member) {
  int rank = rank_of(g, member);
  return mcoll__host_sendrecv(out - t->true_lb, (int)out_n, t->type, rank, MCOLL_TAG_REDUCE,
                       in - t->true_lb, (int)in_n, t->type, rank, MCOLL_TAG_REDUCE, g->c->p2p,
                       MPI_STATUS_IGNORE);
}

/* mine = theirs op mine (partner below) or mine op theirs; theirs is scratch. */
static void combine(const struct mcoll_red_type *t, char *mine, char *theirs, size_t n,
                    int partner_below) {
  if (partner_below || t->commutative) {
    mcoll__red_fold(t, theirs, mine, n);
  } else {
    mcoll__red_fold(t, mine, theirs, n);
    mcoll__red_copy(t, mine, theirs, n);
  }
}

struct shape {
  int pof2, rem;
  int newrank; /* -1: folded into my right neighbour */
};

static struct shape shape_of(int n, int me) {
  struct shape s = {1, 0, -1};
  while (s.pof2 * 2 <= n) s.pof2 *= 2;
  s.rem = n - s.pof2;
  if (me >= 2 * s.rem) s.newrank = me - s.rem;
  else if (me % 2) s.newrank = me / 2;
  return s;
}

static int member_of(const struct shape *s, int newrank) {
  return newrank < s->rem ? 2 * newrank + 1 : newrank + s->rem;
}

static int fold_extra(const struct mcoll_red_group *g, const struct mcoll_red_type *t,
                      const struct shape *s, char *buf, char *tmp, size_t count) {
  if (g->me >= 2 * s->rem) return MPI_SUCCESS;
  if (g->me % 2 == 0) return send_to(g, t, buf, count, g->me + 1);
  int err = recv_from(g, t, tmp, count, g->me - 1);
  if (err == MPI_SUCCESS) mcoll__red_fold(t, tmp, buf, count);
  return err;
}

/* Range of elements newrank keeps after the halving steps below `upto_mask`. */
static void halved(const struct shape *s, int newrank, size_t count, int upto_mask, size_t *lo,
                   size_t *hi) {
  *lo = 0;
  *hi = count;
  for (int mask = 1; mask < s->pof2 && mask < upto_mask; mask <<= 1) {
    size_t mid = *lo + (*hi - *lo) / 2;
    if (newrank & mask) *lo = mid;
    else *hi = mid;
  }
}

/* Recursive halving: afterwards I hold the fold of all pof2 members over my range. */
static int reduce_scatter_halving(const struct mcoll_red_group *g, const struct mcoll_red_type *t,
                                  const struct shape *s, char *buf, char *tmp, size_t count) {
  int err = MPI_SUCCESS;
  for (int mask = 1; mask < s->pof2 && err == MPI_SUCCESS; mask <<= 1) {
    int peer = s->newrank ^ mask;
    size_t lo, hi, keep_lo, keep_hi;
    halved(s, s->newrank, count, mask, &lo, &hi);
    halved(s, s->newrank, count, mask << 1, &keep_lo, &keep_hi);
    size_t send_lo = keep_lo == lo ? keep_hi : lo, send_hi = keep_lo == lo ? hi : keep_lo;
    err = exchange(g, t, mcoll__red_at(t, buf, send_lo), send_hi - send_lo, tmp,
                   keep_hi - keep_lo, member_of(s, peer));
    if (err == MPI_SUCCESS)
      combine(t, mcoll__red_at(t, buf, keep_lo), tmp, keep_hi - keep_lo, peer < s->newrank);
  }
  return err;
}

static int allgather_doubling(const struct mcoll_red_group *g, const struct mcoll_red_type *t,
                              const struct shape *s, char *buf, size_t count) {
  int err = MPI_SUCCESS;
  for (int mask = s->pof2 / 2; mask >= 1 && err == MPI_SUCCESS; mask >>= 1) {
    size_t lo, hi, mine_lo, mine_hi;
    halved(s, s->newrank, count, mask, &lo, &hi);
    halved(s, s->newrank, count, mask << 1, &mine_lo, &mine_hi);
    size_t other_lo = mine_lo == lo ? mine_hi : lo, other_hi = mine_lo == lo ? hi : mine_lo;
    err = exchange(g, t, mcoll__red_at(t, buf, mine_lo), mine_hi - mine_lo,
                   mcoll__red_at(t, buf, other_lo), other_hi - other_lo,
                   member_of(s, s->newrank ^ mask));
  }
  return err;
}

/* Both partners of a step compute the same fold, lower op upper, with the same
 * operands in the same roles, so that every member ends with the same bits (a
 * symmetric op may swap them). The partner below keeps the result in the received
 * buffer: the two buffers trade roles instead of a copy per step. */
static int doubling(const struct mcoll_red_group *g, const struct mcoll_red_type *t,
                    const struct shape *s, char *buf, char *tmp, size_t count) {
  int err = MPI_SUCCESS;
  char *acc = buf, *theirs = tmp;
  for (int mask = 1; mask < s->pof2 && err == MPI_SUCCESS; mask <<= 1) {
    int peer = s->newrank ^ mask;
    err = exchange(g, t, acc, count, theirs, count, member_of(s, peer));
    if (err != MPI_SUCCESS) break;
    if (peer < s->newrank || t->symmetric) {
      mcoll__red_fold(t, theirs, acc, count);
    } else {
      mcoll__red_fold(t, acc, theirs, count);
      char *swap = acc;
      acc = theirs;
      theirs = swap;
    }
  }
  mcoll__red_copy(t, buf, acc, count);
  return err;
}

int mcoll__group_allreduce(const struct mcoll_red_group *g, const struct mcoll_red_type *t,
                           char *buf, size_t count) {
  if (g->n <= 1 || count == 0) return MPI_SUCCESS;
  if (mcoll__context_p2p(g->c) != MPI_SUCCESS) return MPI_ERR_INTERN;
  struct shape s = shape_of(g->n, g->me);
  char *tmp = mcoll__red_alloc(t, count);
  int err = fold_extra(g, t, &s, buf, tmp, count);
  if (err == MPI_SUCCESS && s.newrank >= 0) {
    if (g->alg == MCOLL_GROUP_SMALL || count < (size_t)s.pof2) {
      err = doubling(g, t, &s, buf, tmp, count);
    } else {
      err = reduce_scatter_halving(g, t, &s, buf, tmp, count);
      if (err == MPI_SUCCESS) err = allgather_doubling(g, t, &s, buf, count);
    }
  }
  /* The folded members get the result back from their right neighbour. */
  if (err == MPI_SUCCESS && g->me < 2 * s.rem) {
    if (g->me % 2) err = send_to(g, t, buf, count, g->me - 1);
    else err = recv_from(g, t, buf, count, g->me + 1);
  }
  mcoll__red_free(t, tmp);
  return err;
}

/* Binomial tree; non-commutative ops go to member 0 in order, then to the root. */
static int binomial(const struct mcoll_red_group *g, const struct mcoll_red_type *t, char *buf,
                    char *tmp, size_t count, int root) {
  int n = g->n, rotate = t->commutative ? root : 0;
  int v = (g->me - rotate + n) % n, err = MPI_SUCCESS;
  char *acc = buf, *other = tmp;
  for (int mask = 1; mask < n && err == MPI_SUCCESS; mask <<= 1) {
    if (v & mask) {
      err = send_to(g, t, acc, count, (v - mask + rotate) % n);
      break;
    }
    if (v + mask >= n) continue;
    err = recv_from(g, t, other, count, (v + mask + rotate) % n);
    if (err != MPI_SUCCESS) break;
    if (t->commutative) {
      mcoll__red_fold(t, other, acc, count);
    } else { /* acc holds [v, v+mask), other what follows: acc op other */
      mcoll__red_fold(t, acc, other, count);
      char *swap = acc;
      acc = other;
      other = swap;
    }
  }
  if (err != MPI_SUCCESS) return err;
  if (v == 0 && g->me != root) return send_to(g, t, acc, count, root);
  if (v == 0) mcoll__red_copy(t, buf, acc, count);
  else if (g->me == root) err = recv_from(g, t, buf, count, rotate);
  return err;
}

int mcoll__group_reduce(const struct mcoll_red_group *g, const struct mcoll_red_type *t,
                        char *buf, size_t count, int root) {
  if (g->n <= 1 || count == 0) return MPI_SUCCESS;
  if (mcoll__context_p2p(g->c) != MPI_SUCCESS) return MPI_ERR_INTERN;
  char *tmp = mcoll__red_alloc(t, count);
  int err = MPI_SUCCESS;
  struct shape s = shape_of(g->n, g->me);
  if (g->alg == MCOLL_GROUP_SMALL || count < (size_t)s.pof2) {
    err = binomial(g, t, buf, tmp, count, root);
    goto cleanup;
  }
  err = fold_extra(g, t, &s, buf, tmp, count);
  if (err == MPI_SUCCESS && s.newrank >= 0) err = reduce_scatter_halving(g, t, &s, buf, tmp, count);
  if (err != MPI_SUCCESS) goto cleanup;
  /* Every piece straight to the root. */
  if (s.newrank >= 0 && g->me != root) {
    size_t lo, hi;
    halved(&s, s.newrank, count, s.pof2, &lo, &hi);
    err = send_to(g, t, mcoll__red_at(t, buf, lo), hi - lo, root);
  } else if (g->me == root) {
    for (int q = 0; q < s.pof2 && err == MPI_SUCCESS; q++) {
      if (q == s.newrank) continue;
      size_t lo, hi;
      halved(&s, q, count, s.pof2, &lo, &hi);
      err = recv_from(g, t, mcoll__red_at(t, buf, lo), hi - lo, member_of(&s, q));
    }
  }
cleanup:
  mcoll__red_free(t, tmp);
  return err;
}
