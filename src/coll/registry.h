/* The collectives mcoll knows, their algorithm tables, counters and fallbacks. */
#ifndef MCOLL_REGISTRY_H
#define MCOLL_REGISTRY_H

#include <stdio.h>

#include "core/fallback.h"
#include "core/tls.h"

#define MCOLL_COLLS(X)                                                   \
  X(BARRIER, barrier) X(BCAST, bcast) X(REDUCE, reduce)                  \
  X(ALLREDUCE, allreduce) X(ALLGATHER, allgather) X(ALLGATHERV, allgatherv) \
  X(GATHER, gather) X(GATHERV, gatherv) X(SCATTER, scatter)              \
  X(SCATTERV, scatterv) X(ALLTOALL, alltoall) X(ALLTOALLV, alltoallv)    \
  X(ALLTOALLW, alltoallw) X(REDUCE_SCATTER, reduce_scatter)              \
  X(REDUCE_SCATTER_BLOCK, reduce_scatter_block) X(SCAN, scan) X(EXSCAN, exscan)

enum mcoll_coll {
#define MCOLL_COLL_ENUM(upper, lower) MCOLL_COLL_##upper,
  MCOLL_COLLS(MCOLL_COLL_ENUM)
#undef MCOLL_COLL_ENUM
  MCOLL_NCOLLS
};

#define MCOLL_MAX_ALGS 8

/* What an algorithm needs in order to run at all (not where it is fast: that is the
 * choice). Each is one bit of mcoll_alg_info.needs, checked by mcoll__alg_allowed
 * against the call's facts. X(name, short name printed by mcoll-info, meaning). */
#define MCOLL_NEEDS(X)                                                                       \
  X(CMA, cma, "single copy (CMA) works between the node's ranks")                          \
  X(SLOT, slot, "the whole call fits one area slot (MCOLL_BCAST_SLOT_MAX; several nodes: "  \
                "MCOLL_INTER_PIECE too)")                                                    \
  X(UNIFORM, uniform, "one block size for every rank (alltoall, not alltoallv/w)")          \
  X(BRUCK_FITS, bruck_fits, "a Bruck round's blocks (about half of them) fit a rank's area") \
  X(ORDER, order, "the ranks of each node consecutive in rank order (reductions: unless "   \
                  "the op is commutative; scan/exscan: always)")                            \
  X(ELEM_FITS, elem_fits, "one element (reduce_scatter: two per rank) fits a rank's area "   \
                          "(MCOLL_SHM_AREA)")                                               \
  X(PAIR_LINES, pair_lines, "a node of 2 ranks whose blocks are at most 256 B each way "     \
                            "(MCOLL_A2A_PAIR_MAX)")                                         \
  X(SPLITS, splits, "between nodes: at least one element per leader of the largest "         \
                    "power-of-two group of nodes (Rabenseifner splits the vector)")

enum mcoll_need_bit {
#define MCOLL_NEED_BIT(name, short, text) MCOLL_NEED_BIT_##name,
  MCOLL_NEEDS(MCOLL_NEED_BIT)
#undef MCOLL_NEED_BIT
  MCOLL_NNEEDS
};

#define MCOLL_NEED_CMA (1u << MCOLL_NEED_BIT_CMA)
#define MCOLL_NEED_SLOT (1u << MCOLL_NEED_BIT_SLOT)
#define MCOLL_NEED_UNIFORM (1u << MCOLL_NEED_BIT_UNIFORM)
#define MCOLL_NEED_BRUCK_FITS (1u << MCOLL_NEED_BIT_BRUCK_FITS)
#define MCOLL_NEED_ORDER (1u << MCOLL_NEED_BIT_ORDER)
#define MCOLL_NEED_ELEM_FITS (1u << MCOLL_NEED_BIT_ELEM_FITS)
#define MCOLL_NEED_PAIR_LINES (1u << MCOLL_NEED_BIT_PAIR_LINES)
#define MCOLL_NEED_SPLITS (1u << MCOLL_NEED_BIT_SPLITS)

/* The levels an algorithm runs at. A collective has a table per level: inside a
 * node (shared memory, single copy), and between nodes (the host MPI's
 * point-to-point, among the nodes' leaders or every rank). X(name, lower, suffix of
 * the MCOLL_ALG_<COLL> variable that forces it, words for the report). */
#define MCOLL_LEVELS(X) X(NODE, node, "", "") X(INTER, inter, "_INTER", "between nodes")

enum mcoll_alg_level {
#define MCOLL_LEVEL_ENUM(name, lower, suffix, words) MCOLL_LEVEL_##name,
  MCOLL_LEVELS(MCOLL_LEVEL_ENUM)
#undef MCOLL_LEVEL_ENUM
  MCOLL_NLEVELS
};

/* The facts a call's restrictions are checked against: all of them the same on every
 * rank of a node (the node's shape and channel, the environment, and what the call's
 * arguments say alike on every rank of a correct program), so that a choice that
 * changes the shared-memory protocol is the same on every rank of the node. Fields a
 * collective does not fill hold 1 (the restriction cannot fail for it). */
struct mcoll_facts {
  unsigned holds; /* MCOLL_NEED_* bits that hold for this call */
  int local_size, nnodes;
  size_t bytes; /* the call's bytes (for a cost function) */
  size_t count; /* elements, for the reductions between nodes (else 0) */
  int ranks;    /* the communicator's size (the rules' ranks range) */
  int oversubscribed, nlevels; /* the node: more ranks than cores; levels of its hierarchy */
};

struct mcoll_alg_info {
  const char *name;
  const char *desc;
  unsigned needs; /* MCOLL_NEED_* bits: restrictions, as data */
  /* Cost model slot: predicted time for the facts; NULL = none (the rules carry the
   * model's choices instead). */
  double (*cost)(const struct mcoll_facts *facts);
};

/* A collective's algorithm table at one level: mcoll__<coll>_algs (in a node) in
 * src/coll/<name>/, mcoll__<coll>_inter_algs (between nodes) beside the inter-node
 * steps. */
struct mcoll_coll_algs {
  const struct mcoll_alg_info *algs;
  int nalgs;
};

const char *mcoll__coll_name(enum mcoll_coll coll);
const char *mcoll__coll_upper(enum mcoll_coll coll); /* as in MCOLL_ALG_<COLL> */
const char *mcoll__level_name(enum mcoll_alg_level level);
const char *mcoll__level_suffix(enum mcoll_alg_level level); /* "_INTER" */
/* Algorithm index by name at a level, or -1 when there is none of that name. */
int mcoll__alg_index(enum mcoll_alg_level level, enum mcoll_coll coll, const char *name);
/* The first restriction bit of alg that the facts do not satisfy, or -1. */
int mcoll__alg_first_unmet(enum mcoll_alg_level level, enum mcoll_coll coll, int alg,
                           const struct mcoll_facts *facts);
const struct mcoll_coll_algs *mcoll__coll_algs(enum mcoll_coll coll);
const struct mcoll_coll_algs *mcoll__level_algs(enum mcoll_alg_level level, enum mcoll_coll coll);

/* Index of the algorithm forced by MCOLL_ALG_<COLL>, or -1. */
int mcoll__alg_forced(enum mcoll_coll coll);
/* Moves on at every mcoll_set_algorithm (which changes no parameter's epoch): a
 * choice kept across calls (coll/settled.h) holds only while it stays. */
extern _Atomic unsigned mcoll__forced_epoch;
/* The same at a level (MCOLL_ALG_<COLL>_INTER between nodes). */
int mcoll__level_forced(enum mcoll_alg_level level, enum mcoll_coll coll);

/* The selection step between nodes: the algorithm forced by MCOLL_ALG_<COLL>_INTER
 * where its restrictions hold for the facts (a reported fallback where not), else
 * `preferred` (the collective's own rule); counted as what ran between nodes. Called
 * once per call, on every rank, when the communicator spans several nodes. */
int mcoll__inter_select(enum mcoll_coll coll, const struct mcoll_facts *facts, int preferred);

/* NULL when alg's restrictions hold for the facts, else the meaning of the first
 * that does not. */
const char *mcoll__alg_allowed(enum mcoll_coll coll, int alg, const struct mcoll_facts *facts);

/* The forced algorithm if it may run for the facts, else -1 (normal choice); a
 * forced one that may not run is a reported fallback (MCOLL_WHY_FORCED, with the
 * restriction that failed), subject to MCOLL_FALLBACK. */
int mcoll__alg_forced_for(enum mcoll_coll coll, const struct mcoll_facts *facts);

/* Short name and meaning of restriction bit b (mcoll-info, the report). */
const char *mcoll__need_name(int b);
const char *mcoll__need_text(int b);

void mcoll__count_alg(enum mcoll_coll coll, int alg);
/* Calls of coll that a try ran whole on the caller's stack (MPI_I* and persistent
 * starts, no task), per thread: a plain add, off the shared counters' lines. The
 * report gives the reporting thread's. */
extern MCOLL_TLS unsigned long mcoll__tries_run[MCOLL_NCOLLS];
static inline void mcoll__count_try(enum mcoll_coll coll) { mcoll__tries_run[coll]++; }
/* A call whose blocks took different algorithms (the gather family: some through the
 * areas, some by single copy): counted as mixed, and each block under the algorithm
 * that moved it (blocks[alg], MCOLL_MAX_ALGS entries). */
void mcoll__count_mixed(enum mcoll_coll coll, const unsigned long *blocks);
void mcoll__count_level(enum mcoll_alg_level level, enum mcoll_coll coll, int alg);
/* One control message of an inter-node algorithm (e.g. alltoall grid_rsend's
 * arrival messages): reported as control_msgs= on the .inter line. */
void mcoll__count_control(enum mcoll_coll coll);
/* Time a rank spent in a phase of control messages (grid_rsend's arrival phase, from
 * its first control send to its last receive): control_wait_us= on the .inter line. */
void mcoll__count_control_wait(enum mcoll_coll coll, double seconds);
/* A call whose node's inter-node step was led by another rank than the node's usual
 * leader (local rank 0 away from the root: bcast's first_arrival): reported as
 * other_leader= on the .inter line. */
void mcoll__count_other_leader(enum mcoll_coll coll);
/* No mcoll algorithm yet for this collective: straight to PMPI (not a fallback). */
void mcoll__count_passthrough(enum mcoll_coll coll);
/* Invalid arguments: PMPI raises the error the application expects. */
void mcoll__count_invalid(enum mcoll_coll coll);
/* Counts a fallback and applies MCOLL_FALLBACK (error aborts the job). */
void mcoll__fallback(enum mcoll_coll coll, enum mcoll_fallback_reason why);
/* A forced algorithm whose restriction bit `need` does not hold: counted per
 * (algorithm, restriction) and as MCOLL_WHY_FORCED; the call then runs (and counts)
 * the normal choice. */
void mcoll__fallback_forced(enum mcoll_alg_level level, enum mcoll_coll coll, int alg, int need);

void mcoll__stats_report(FILE *out);


#endif
