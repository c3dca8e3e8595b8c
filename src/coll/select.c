/* The choice step's common part: algorithms forced by MCOLL_ALG_<COLL>[_INTER] (or
 * mcoll_set_algorithm), checked against a call's facts, and the selection between
 * nodes; each counts what it decided (coll/stats.c). The tables are coll/registry.c. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/registry.h"
#include "mcoll.h"

/* MCOLL_ALG_<COLL> (and _INTER), read for every collective at once on first use (pthread_once);
 * mcoll_set_algorithm may change an entry later from any thread, so the entries are
 * atomics read relaxed (a plain load on the hot path). */
static _Atomic int forced[MCOLL_NLEVELS][MCOLL_NCOLLS];
static atomic_int forced_loaded;
_Atomic unsigned mcoll__forced_epoch;
static pthread_once_t forced_once = PTHREAD_ONCE_INIT;

static void forced_read(void) {
  for (int level = 0; level < MCOLL_NLEVELS; level++)
    for (int coll = 0; coll < MCOLL_NCOLLS; coll++) {
      char var[64];
      snprintf(var, sizeof var, "MCOLL_ALG_%s%s", mcoll__coll_upper(coll), mcoll__level_suffix(level));
      const char *name = getenv(var);
      int alg = -1;
      if (name && *name) {
        alg = mcoll__alg_index(level, coll, name);
        if (alg < 0) fprintf(stderr, "mcoll: %s=%s: no such algorithm, ignored\n", var, name);
      }
      atomic_store_explicit(&forced[level][coll], alg, memory_order_relaxed);
    }
  atomic_store_explicit(&forced_loaded, 1, memory_order_release);
}

static void forced_load(void) {
  if (!atomic_load_explicit(&forced_loaded, memory_order_acquire)) pthread_once(&forced_once, forced_read);
}

int mcoll__level_forced(enum mcoll_alg_level level, enum mcoll_coll coll) {
  forced_load();
  return atomic_load_explicit(&forced[level][coll], memory_order_relaxed);
}

int mcoll__alg_forced(enum mcoll_coll coll) { return mcoll__level_forced(MCOLL_LEVEL_NODE, coll); }

static int forced_for(enum mcoll_alg_level level, enum mcoll_coll coll, const struct mcoll_facts *facts) {
  int alg = mcoll__level_forced(level, coll);
  if (alg < 0) return -1;
  int b = mcoll__alg_first_unmet(level, coll, alg, facts);
  if (b < 0) return alg;
  mcoll__fallback_forced(level, coll, alg, b);
  return -1;
}

int mcoll__alg_forced_for(enum mcoll_coll coll, const struct mcoll_facts *facts) {
  return forced_for(MCOLL_LEVEL_NODE, coll, facts);
}

int mcoll__inter_select(enum mcoll_coll coll, const struct mcoll_facts *facts, int preferred) {
  int forced_alg = forced_for(MCOLL_LEVEL_INTER, coll, facts);
  int alg = forced_alg >= 0 ? forced_alg : preferred;
  mcoll__count_level(MCOLL_LEVEL_INTER, coll, alg);
  return alg;
}

/* coll: a collective's name, with ".inter" for its algorithm between nodes. */
MCOLL_EXPORT int mcoll_set_algorithm(const char *coll, const char *alg) {
  const char *dot = strchr(coll, '.');
  size_t len = dot ? (size_t)(dot - coll) : strlen(coll);
  int level = MCOLL_LEVEL_NODE;
  if (dot && strcmp(dot + 1, mcoll__level_name(MCOLL_LEVEL_INTER))) return -1;
  if (dot) level = MCOLL_LEVEL_INTER;
  for (int c = 0; c < MCOLL_NCOLLS; c++) {
    const char *name = mcoll__coll_name(c);
    if (strlen(name) != len || strncmp(name, coll, len)) continue;
    /* "" or "auto": no forced algorithm (the rules choose again). */
    int choose = !alg || !*alg || !strcmp(alg, "auto");
    int a = choose ? -1 : mcoll__alg_index(level, c, alg);
    if (!choose && a < 0) return -1;
    forced_load(); /* so that a later first lookup does not overwrite this */
    atomic_store_explicit(&forced[level][c], a, memory_order_relaxed);
    atomic_fetch_add_explicit(&mcoll__forced_epoch, 1, memory_order_relaxed);
    return 0;
  }
  return -1;
}

/* coll: as for mcoll_set_algorithm (".inter": the algorithms between nodes). */
MCOLL_EXPORT const char *mcoll_algorithm_name(const char *coll, int index) {
  const char *dot = strchr(coll, '.');
  size_t len = dot ? (size_t)(dot - coll) : strlen(coll);
  if (dot && strcmp(dot + 1, mcoll__level_name(MCOLL_LEVEL_INTER))) return NULL;
  for (int c = 0; c < MCOLL_NCOLLS; c++) {
    const char *name = mcoll__coll_name(c);
    if (strlen(name) != len || strncmp(name, coll, len)) continue;
    const struct mcoll_coll_algs *table = mcoll__level_algs(dot ? MCOLL_LEVEL_INTER : MCOLL_LEVEL_NODE, c);
    if (!table) return NULL;
    return index >= 0 && index < table->nalgs ? table->algs[index].name : NULL;
  }
  return NULL;
}
