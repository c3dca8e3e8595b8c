/* The datatype and op of a reduction, element copies and folds, and the choice of
 * algorithm shared by every reduction collective. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/reduce/red.h"
#include "coll/facts.h"
#include "coll/rules.h"
#include "core/tls.h"
#include "core/config.h"

/* The plain predefined types (no holes, lb 0): their size without asking the MPI. */
static size_t plain_size(MPI_Datatype type) {
  static const struct {
    MPI_Datatype type;
    size_t size;
  } plain[] = {
      {MPI_INT, sizeof(int)},       {MPI_FLOAT, sizeof(float)},
      {MPI_DOUBLE, sizeof(double)}, {MPI_LONG, sizeof(long)},
      {MPI_UNSIGNED, sizeof(unsigned)}, {MPI_UNSIGNED_LONG, sizeof(unsigned long)},
      {MPI_LONG_LONG, sizeof(long long)}, {MPI_UNSIGNED_LONG_LONG, sizeof(unsigned long long)},
      {MPI_SHORT, sizeof(short)},   {MPI_UNSIGNED_SHORT, sizeof(unsigned short)},
      {MPI_SIGNED_CHAR, 1},         {MPI_UNSIGNED_CHAR, 1},       {MPI_CHAR, 1},
      {MPI_BYTE, 1},                {MPI_INT8_T, 1},
      {MPI_UINT8_T, 1},             {MPI_INT16_T, 2},
      {MPI_UINT16_T, 2},            {MPI_INT32_T, 4},
      {MPI_UINT32_T, 4},            {MPI_INT64_T, 8},
      {MPI_UINT64_T, 8},            {MPI_C_FLOAT_COMPLEX, 2 * sizeof(float)},
      {MPI_C_DOUBLE_COMPLEX, 2 * sizeof(double)},
  };
  for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
    if (plain[i].type == type) return plain[i].size;
  return 0;
}

/* Predefined (type, op) pairs with a kernel, seen last by this thread: predefined
 * handles are never reused, so a hit needs no query (MPICH's four queries weigh
 * on every small call). */
struct known_pair {
  MPI_Datatype type;
  MPI_Op op;
  mcoll_red_kernel kernel;
  size_t size;
  int symmetric;
};
static MCOLL_TLS struct known_pair known[4];
static MCOLL_TLS unsigned known_next;

static int known_lookup(struct mcoll_red_type *t, MPI_Datatype type, MPI_Op op) {
  for (int i = 0; i < 4; i++) {
    const struct known_pair *k = &known[i];
    if (k->kernel && k->type == type && k->op == op) {
      *t = (struct mcoll_red_type){type, op, 1, k->kernel, k->size, 0, k->size, k->symmetric};
      return 1;
    }
  }
  size_t size = plain_size(type);
  mcoll_red_kernel kernel = size ? mcoll__red_kernel(type, op, size) : NULL;
  if (!kernel) return 0;
  /* The standard leaves MPI_CHAR out of the reductions' types; a host that refuses
   * a pair must see the call (its error), so ask it once per pair. */
  if (type == MPI_CHAR && !mcoll__op_type_valid(type, op)) return 0;
  int symmetric = mcoll__red_symmetric(type, op);
  known[known_next++ % 4] = (struct known_pair){type, op, kernel, size, symmetric};
  *t = (struct mcoll_red_type){type, op, 1, kernel, size, 0, size, symmetric};
  return 1;
}

enum mcoll_red_check mcoll__red_type_init(struct mcoll_red_type *t, MPI_Datatype type, MPI_Op op) {
  int commutative;
  if (known_lookup(t, type, op)) return MCOLL_RED_OK;
  struct mcoll_type_info info;
  if (type == MPI_DATATYPE_NULL || op == MPI_OP_NULL) return MCOLL_RED_INVALID;
  if (mcoll__type_info(type, &info) != MPI_SUCCESS ||
      PMPI_Op_commutative(op, &commutative) != MPI_SUCCESS)
    return MCOLL_RED_INVALID;
  size_t size = info.size;
  MPI_Aint extent = info.extent, true_lb = info.true_lb, true_extent = info.true_extent;
  /* The pairs the host MPI refuses go to it, which raises the error it would. */
  if (!mcoll__op_type_valid(type, op)) return MCOLL_RED_INVALID;
  t->type = type;
  t->op = op;
  t->commutative = commutative;
  t->extent = (size_t)extent;
  t->true_lb = true_lb;
  t->true_extent = (size_t)true_extent;
  t->kernel = mcoll__red_kernel(type, op, size);
  t->symmetric = t->kernel && mcoll__red_symmetric(type, op);
  /* Folds count elements in ints (PMPI_Reduce_local). */
  if (extent <= 0 || true_extent > extent || size == 0 || size > INT_MAX)
    return MCOLL_RED_UNSUPPORTED;
  if (size == (size_t)true_extent) return MCOLL_RED_OK;
  /* Holes: only inside the predefined pair types (struct padding) may they be
   * copied over; a derived type's holes may be the application's data. */
  return info.named ? MCOLL_RED_OK : MCOLL_RED_UNSUPPORTED;
}

void mcoll__red_copy(const struct mcoll_red_type *t, char *dst, const char *src, size_t n) {
  if (n && dst != src) memcpy(dst, src, mcoll__red_span(t, n));
}

void mcoll__red_fold(const struct mcoll_red_type *t, const char *in, char *inout, size_t n) {
  if (t->kernel) {
    if (n) t->kernel(in, inout, n);
    return;
  }
  const size_t step = (size_t)1 << 30;
  while (n) {
    size_t m = n < step ? n : step;
    PMPI_Reduce_local(in - t->true_lb, inout - t->true_lb, (int)m, t->type, t->op);
    in += m * t->extent;
    inout += m * t->extent;
    n -= m;
  }
}

char *mcoll__red_alloc(const struct mcoll_red_type *t, size_t n) {
  return mcoll__xmalloc(n * t->extent);
}

void mcoll__red_free(const struct mcoll_red_type *t, char *data) {
  (void)t;
  free(data);
}

int mcoll__red_nodes_contiguous(const struct mcoll_comm *c) {
  /* Nodes are numbered by their lowest rank: contiguous iff node_of never drops. */
  for (int r = 1; r < c->size; r++)
    if (c->topo.node_of[r] < c->topo.node_of[r - 1]) return 0;
  return 1;
}

/* The choice, its facts, and whether the run may adapt it (*adaptable). */
static int red_choice(enum mcoll_coll coll, const struct mcoll_comm *c, size_t bytes, int ordered,
                      size_t area_need, struct mcoll_facts *facts_out, int *adaptable) {
  struct mcoll_facts facts = mcoll__facts(c, bytes);
  *adaptable = 0;
  if (ordered && c->topo.nnodes > 1 && !mcoll__red_nodes_contiguous(c))
    facts.holds &= ~MCOLL_NEED_ORDER;
  /* SHM_AREA, not the mapped size: the same on every node, even one without a segment. */
  if (area_need > (size_t)mcoll__cfg.SHM_AREA) facts.holds &= ~MCOLL_NEED_ELEM_FITS;
  *facts_out = facts;
  int forced = mcoll__alg_forced_for(coll, &facts);
  if (forced >= 0) return forced;
  if ((facts.holds & MCOLL_RED_NEEDS) != MCOLL_RED_NEEDS) return MCOLL_RED_P2P;
  /* The rules, unless the user set one of the thresholds below. */
  static const enum mcoll_param thresholds[] = {MCOLL_PARAM_RED_FLAT_MAX, MCOLL_PARAM_RED_FLAT_MAX_LOWPAR,
                                                MCOLL_PARAM_RED_CMA_MIN, MCOLL_PARAM_RED_CMA_MAX,
                                                MCOLL_PARAM_RED_CMA_RANKS};
  if (!mcoll__params_user_set(thresholds, 5)) {
    *adaptable = 1;
    int ruled = mcoll__rules_pick(coll, MCOLL_LEVEL_NODE, &facts, NULL);
    if (ruled >= 0) return ruled;
  }
  /* Where no rule covers the call: the thresholds. */
  /* Reduce and allreduce need every input whole: from RED_CMA_MAX, HSRA's copies
   * through the areas, which stay in cache, beat reading it by single copy. */
  int whole_inputs = coll == MCOLL_COLL_REDUCE || coll == MCOLL_COLL_ALLREDUCE;
  int cma_max_passed = whole_inputs && mcoll__cfg.RED_CMA_MAX > 0 &&
                       bytes >= (size_t)mcoll__cfg.RED_CMA_MAX;
  if (c->chan->cma_ok && mcoll__cfg.RED_CMA_MIN > 0 && bytes >= (size_t)mcoll__cfg.RED_CMA_MIN &&
      !cma_max_passed && c->topo.local_size <= mcoll__cfg.RED_CMA_RANKS)
    return MCOLL_RED_CMA;
  /* HSRA's parallel folds gain little with two ranks, or with more ranks than
   * cores, and cost a second synchronisation (a scheduler turn when ranks are not
   * running) and, at two ranks, half as many bytes again across the cores. */
  int low_parallelism = c->chan->shm.oversubscribed || c->topo.local_size <= 2;
  long flat_max = low_parallelism ? mcoll__cfg.RED_FLAT_MAX_LOWPAR : mcoll__cfg.RED_FLAT_MAX;
  if (bytes <= (size_t)flat_max) return MCOLL_RED_FLAT;
  return MCOLL_RED_HSRA;
}

int mcoll__red_choose(enum mcoll_coll coll, const struct mcoll_comm *c, size_t bytes, int ordered,
                      size_t area_need) {
  struct mcoll_facts facts;
  int adaptable;
  return red_choice(coll, c, bytes, ordered, area_need, &facts, &adaptable);
}

/* Flat folds every input on one rank (all of them, on every rank for allreduce): out
 * of reach beyond a few tens of KiB, except on nodes of two ranks, where it reads one
 * peer's area and its time holds from job to job while HSRA's and single copy's move
 * by several times (bench/records/osu-day7/); single copy's system calls below a few
 * KiB; p2p is for nodes out of rank order only. */
enum { RED_FLAT_REACH = 64 << 10, RED_CMA_REACH = 2 << 10 };

int mcoll__red_choose_task(enum mcoll_coll coll, const struct mcoll_comm *c, size_t bytes,
                           int ordered, size_t area_need) {
  struct mcoll_facts facts;
  int adaptable;
  int alg = red_choice(coll, c, bytes, ordered, area_need, &facts, &adaptable);
  if (!adaptable || alg == MCOLL_RED_P2P) return alg;
  return mcoll__adapt_kept(c, coll, bytes, alg, &facts);
}

int mcoll__red_choose_adaptive(enum mcoll_coll coll, struct mcoll_comm *c, size_t bytes, int ordered,
                               size_t area_need, struct mcoll_adapt_call *call) {
  struct mcoll_facts facts;
  int adaptable;
  int alg = red_choice(coll, c, bytes, ordered, area_need, &facts, &adaptable);
  call->cls = NULL;
  if (!adaptable || alg == MCOLL_RED_P2P) return alg;
  unsigned reach = (1u << MCOLL_RED_HSRA) | (bytes >= RED_CMA_REACH ? 1u << MCOLL_RED_CMA : 0) |
                   (bytes <= RED_FLAT_REACH || c->topo.local_size == 2 ? 1u << MCOLL_RED_FLAT : 0);
  return mcoll__adapt_pick(c, coll, bytes, alg, &facts, reach, call);
}

size_t mcoll__red_piece(const struct mcoll_comm *c, const struct mcoll_red_type *t, size_t bytes) {
  /* Ranks alone on their nodes have no node steps for the pieces to overlap with, and
   * every piece costs the leaders a round of messages (allreduce of 1 MiB between two
   * 1 Gbit/s test hosts: 13.9 ms in 256 KiB pieces, 8.5 ms whole): one piece then.
   * Every rank sees the same shape, so all cut the same pieces. */
  size_t piece = c->topo.nnodes == c->size && bytes > 0 ? bytes : (size_t)mcoll__cfg.INTER_PIECE;
  return piece < t->extent ? t->extent : piece - piece % t->extent;
}

static int largest_pof2(int n) {
  int pof2 = 1;
  while (pof2 * 2 <= n) pof2 *= 2;
  return pof2;
}

int mcoll__group_choose(enum mcoll_coll coll, const struct mcoll_comm *c,
                        const struct mcoll_red_type *t, size_t count, int n, int between_nodes) {
  int splits = count >= (size_t)largest_pof2(n);
  int preferred = count * t->extent > (size_t)mcoll__cfg.RED_RD_MAX && splits ? MCOLL_GROUP_SPLIT
                                                                           : MCOLL_GROUP_SMALL;
  if (!between_nodes) return preferred;
  struct mcoll_facts facts = mcoll__facts(c, count * t->extent);
  facts.count = count;
  if (!splits) facts.holds &= ~MCOLL_NEED_SPLITS;
  /* Between nodes the rules decide, unless the user set RED_RD_MAX. */
  static const enum mcoll_param threshold[] = {MCOLL_PARAM_RED_RD_MAX};
  int ruled = mcoll__params_user_set(threshold, 1) ? -1
                                                   : mcoll__rules_pick(coll, MCOLL_LEVEL_INTER, &facts, NULL);
  return mcoll__inter_select(coll, &facts, ruled >= 0 ? ruled : preferred);
}
