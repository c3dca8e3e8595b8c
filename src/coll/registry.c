/* Which collectives have which algorithms; MCOLL_ALG_<COLL> lookups. */
#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/coll.h"
#include "mcoll.h"

extern const struct mcoll_coll_algs mcoll__barrier_algs;
extern const struct mcoll_coll_algs mcoll__bcast_algs;
extern const struct mcoll_coll_algs mcoll__reduce_algs;
extern const struct mcoll_coll_algs mcoll__allreduce_algs;
extern const struct mcoll_coll_algs mcoll__reduce_scatter_algs;
extern const struct mcoll_coll_algs mcoll__reduce_scatter_block_algs;
extern const struct mcoll_coll_algs mcoll__scan_algs;
extern const struct mcoll_coll_algs mcoll__exscan_algs;
extern const struct mcoll_coll_algs mcoll__allgather_algs;
extern const struct mcoll_coll_algs mcoll__allgatherv_algs;
extern const struct mcoll_coll_algs mcoll__gather_algs;
extern const struct mcoll_coll_algs mcoll__gatherv_algs;
extern const struct mcoll_coll_algs mcoll__scatter_algs;
extern const struct mcoll_coll_algs mcoll__scatterv_algs;
extern const struct mcoll_coll_algs mcoll__alltoall_algs;
extern const struct mcoll_coll_algs mcoll__alltoallv_algs;
extern const struct mcoll_coll_algs mcoll__alltoallw_algs;

static const struct mcoll_coll_algs no_algs = {NULL, 0};

static const struct {
  const char *name;
  const char *upper;
} coll_names[MCOLL_NCOLLS] = {
#define MCOLL_COLL_NAME(upper, lower) {#lower, #upper},
    MCOLL_COLLS(MCOLL_COLL_NAME)
#undef MCOLL_COLL_NAME
};

const char *mcoll__coll_name(enum mcoll_coll coll) { return coll_names[coll].name; }

const struct mcoll_coll_algs *mcoll__coll_algs(enum mcoll_coll coll) {
  switch (coll) {
  case MCOLL_COLL_BARRIER: return &mcoll__barrier_algs;
  case MCOLL_COLL_BCAST: return &mcoll__bcast_algs;
  case MCOLL_COLL_REDUCE: return &mcoll__reduce_algs;
  case MCOLL_COLL_ALLREDUCE: return &mcoll__allreduce_algs;
  case MCOLL_COLL_REDUCE_SCATTER: return &mcoll__reduce_scatter_algs;
  case MCOLL_COLL_REDUCE_SCATTER_BLOCK: return &mcoll__reduce_scatter_block_algs;
  case MCOLL_COLL_SCAN: return &mcoll__scan_algs;
  case MCOLL_COLL_EXSCAN: return &mcoll__exscan_algs;
  case MCOLL_COLL_ALLGATHER: return &mcoll__allgather_algs;
  case MCOLL_COLL_ALLGATHERV: return &mcoll__allgatherv_algs;
  case MCOLL_COLL_GATHER: return &mcoll__gather_algs;
  case MCOLL_COLL_GATHERV: return &mcoll__gatherv_algs;
  case MCOLL_COLL_SCATTER: return &mcoll__scatter_algs;
  case MCOLL_COLL_SCATTERV: return &mcoll__scatterv_algs;
  case MCOLL_COLL_ALLTOALL: return &mcoll__alltoall_algs;
  case MCOLL_COLL_ALLTOALLV: return &mcoll__alltoallv_algs;
  case MCOLL_COLL_ALLTOALLW: return &mcoll__alltoallw_algs;
  default: return &no_algs;
  }
}

/* Algorithm index per collective by name, or -1 when there is none of that name. */
static int alg_index(enum mcoll_coll coll, const char *name) {
  const struct mcoll_coll_algs *table = mcoll__coll_algs(coll);
  for (int a = 0; a < table->nalgs; a++)
    if (!strcmp(table->algs[a].name, name)) return a;
  return -1;
}

/* MCOLL_ALG_<COLL>, read for every collective at once on first use (pthread_once);
 * mcoll_set_algorithm may change an entry later from any thread, so the entries are
 * atomics read relaxed (a plain load on the hot path). */
static _Atomic int forced[MCOLL_NCOLLS];
static atomic_int forced_loaded;
static pthread_once_t forced_once = PTHREAD_ONCE_INIT;

static void forced_read(void) {
  for (int coll = 0; coll < MCOLL_NCOLLS; coll++) {
    char var[64];
    snprintf(var, sizeof var, "MCOLL_ALG_%s", coll_names[coll].upper);
    const char *name = getenv(var);
    int alg = -1;
    if (name && *name) {
      alg = alg_index(coll, name);
      if (alg < 0) fprintf(stderr, "mcoll: %s=%s: no such algorithm, ignored\n", var, name);
    }
    atomic_store_explicit(&forced[coll], alg, memory_order_relaxed);
  }
  atomic_store_explicit(&forced_loaded, 1, memory_order_release);
}

static void forced_load(void) {
  if (!atomic_load_explicit(&forced_loaded, memory_order_acquire)) pthread_once(&forced_once, forced_read);
}

int mcoll__alg_forced(enum mcoll_coll coll) {
  forced_load();
  return atomic_load_explicit(&forced[coll], memory_order_relaxed);
}

MCOLL_EXPORT int mcoll_set_algorithm(const char *coll, const char *alg) {
  for (int c = 0; c < MCOLL_NCOLLS; c++) {
    if (strcmp(coll_names[c].name, coll)) continue;
    int a = alg && *alg ? alg_index(c, alg) : -1;
    if (alg && *alg && a < 0) return -1;
    forced_load(); /* so that a later first lookup does not overwrite this */
    atomic_store_explicit(&forced[c], a, memory_order_relaxed);
    return 0;
  }
  return -1;
}

MCOLL_EXPORT void mcoll_print_algorithms(FILE *out) {
  fprintf(out, "\nalgorithms (force one with MCOLL_ALG_<COLL>=name):\n");
  for (int c = 0; c < MCOLL_NCOLLS; c++) {
    const struct mcoll_coll_algs *table = mcoll__coll_algs(c);
    if (table->nalgs == 0) {
      fprintf(out, "  %-22s (host MPI)\n", coll_names[c].name);
      continue;
    }
    for (int a = 0; a < table->nalgs; a++)
      fprintf(out, "  %-22s %-16s %s\n", a == 0 ? coll_names[c].name : "", table->algs[a].name,
              table->algs[a].desc);
  }
}
