/* The collectives mcoll knows, their algorithm tables, counters and fallbacks. */
#ifndef MCOLL_COLL_H
#define MCOLL_COLL_H

#include <stdio.h>

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

/* Why a call went to the host MPI although mcoll has an algorithm for it. */
#define MCOLL_FALLBACK_REASONS(X)                                  \
  X(INTERCOMM, "intercommunicator")                                \
  X(NO_CONTEXT, "no shared-memory context for this communicator")  \
  X(DATATYPE, "datatype not supported")                            \
  X(OP, "reduction op not supported")                              \
  X(NBC, "non-blocking call on a communicator without a task-ready context")

enum mcoll_fallback_reason {
#define MCOLL_REASON_ENUM(name, text) MCOLL_WHY_##name,
  MCOLL_FALLBACK_REASONS(MCOLL_REASON_ENUM)
#undef MCOLL_REASON_ENUM
  MCOLL_NREASONS
};

#define MCOLL_MAX_ALGS 8

struct mcoll_alg_info {
  const char *name;
  const char *desc;
};

/* A collective's algorithm table; lives in src/coll/<name>/. */
struct mcoll_coll_algs {
  const struct mcoll_alg_info *algs;
  int nalgs;
};

const char *mcoll__coll_name(enum mcoll_coll coll);
const struct mcoll_coll_algs *mcoll__coll_algs(enum mcoll_coll coll);

/* Index of the algorithm forced by MCOLL_ALG_<COLL>, or -1. */
int mcoll__alg_forced(enum mcoll_coll coll);

void mcoll__count_alg(enum mcoll_coll coll, int alg);
/* No mcoll algorithm yet for this collective: straight to PMPI (not a fallback). */
void mcoll__count_passthrough(enum mcoll_coll coll);
/* Invalid arguments: PMPI raises the error the application expects. */
void mcoll__count_invalid(enum mcoll_coll coll);
/* Counts a fallback and applies MCOLL_FALLBACK (error aborts the job). */
void mcoll__fallback(enum mcoll_coll coll, enum mcoll_fallback_reason why);

void mcoll__stats_report(FILE *out);


#endif
