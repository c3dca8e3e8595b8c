/* Which collectives have which algorithms; MCOLL_ALG_<COLL> lookups. */
#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "coll/registry.h"
#include "mcoll.h"

/* Every collective's tables, mcoll__<lower>_algs (in a node) and
 * mcoll__<lower>_inter_algs (between nodes), from the one list MCOLL_COLLS. */
#define MCOLL_COLL_TABLE_DECL(upper, lower)                 \
  extern const struct mcoll_coll_algs mcoll__##lower##_algs; \
  extern const struct mcoll_coll_algs mcoll__##lower##_inter_algs;
MCOLL_COLLS(MCOLL_COLL_TABLE_DECL)
#undef MCOLL_COLL_TABLE_DECL

static const struct mcoll_coll_algs *const coll_tables[MCOLL_NLEVELS][MCOLL_NCOLLS] = {
#define MCOLL_COLL_TABLE(upper, lower) [MCOLL_COLL_##upper] = &mcoll__##lower##_algs,
    [MCOLL_LEVEL_NODE] = {MCOLL_COLLS(MCOLL_COLL_TABLE)},
#undef MCOLL_COLL_TABLE
#define MCOLL_COLL_TABLE(upper, lower) [MCOLL_COLL_##upper] = &mcoll__##lower##_inter_algs,
    [MCOLL_LEVEL_INTER] = {MCOLL_COLLS(MCOLL_COLL_TABLE)},
#undef MCOLL_COLL_TABLE
};

static const struct {
  const char *name;
  const char *upper;
} coll_names[MCOLL_NCOLLS] = {
#define MCOLL_COLL_NAME(upper, lower) {#lower, #upper},
    MCOLL_COLLS(MCOLL_COLL_NAME)
#undef MCOLL_COLL_NAME
};

static const struct {
  const char *name, *suffix, *words;
} levels[MCOLL_NLEVELS] = {
#define MCOLL_LEVEL_ENTRY(name, lower, suffix, words) {#lower, suffix, words},
    MCOLL_LEVELS(MCOLL_LEVEL_ENTRY)
#undef MCOLL_LEVEL_ENTRY
};

const char *mcoll__coll_name(enum mcoll_coll coll) { return coll_names[coll].name; }
const char *mcoll__level_name(enum mcoll_alg_level level) { return levels[level].name; }

const struct mcoll_coll_algs *mcoll__level_algs(enum mcoll_alg_level level, enum mcoll_coll coll) {
  return coll_tables[level][coll];
}

const struct mcoll_coll_algs *mcoll__coll_algs(enum mcoll_coll coll) {
  return coll_tables[MCOLL_LEVEL_NODE][coll];
}

static const struct {
  const char *name, *text;
} needs[MCOLL_NNEEDS] = {
#define MCOLL_NEED_ENTRY(name, short, text) {#short, text},
    MCOLL_NEEDS(MCOLL_NEED_ENTRY)
#undef MCOLL_NEED_ENTRY
};

const char *mcoll__need_name(int b) { return needs[b].name; }
const char *mcoll__need_text(int b) { return needs[b].text; }

/* The first restriction of alg that the facts do not satisfy, or -1. */
static int first_unmet(enum mcoll_alg_level level, enum mcoll_coll coll, int alg,
                       const struct mcoll_facts *facts) {
  unsigned unmet = mcoll__level_algs(level, coll)->algs[alg].needs & ~facts->holds;
  for (int b = 0; b < MCOLL_NNEEDS; b++)
    if (unmet & (1u << b)) return b;
  return -1;
}

const char *mcoll__alg_allowed(enum mcoll_coll coll, int alg, const struct mcoll_facts *facts) {
  int b = first_unmet(MCOLL_LEVEL_NODE, coll, alg, facts);
  return b < 0 ? NULL : needs[b].text;
}

/* Algorithm index per collective by name, or -1 when there is none of that name. */
static int alg_index(enum mcoll_alg_level level, enum mcoll_coll coll, const char *name) {
  const struct mcoll_coll_algs *table = mcoll__level_algs(level, coll);
  for (int a = 0; a < table->nalgs; a++)
    if (!strcmp(table->algs[a].name, name)) return a;
  return -1;
}

/* MCOLL_ALG_<COLL> (and _INTER), read for every collective at once on first use (pthread_once);
 * mcoll_set_algorithm may change an entry later from any thread, so the entries are
 * atomics read relaxed (a plain load on the hot path). */
static _Atomic int forced[MCOLL_NLEVELS][MCOLL_NCOLLS];
static atomic_int forced_loaded;
static pthread_once_t forced_once = PTHREAD_ONCE_INIT;

static void forced_read(void) {
  for (int level = 0; level < MCOLL_NLEVELS; level++)
    for (int coll = 0; coll < MCOLL_NCOLLS; coll++) {
      char var[64];
      snprintf(var, sizeof var, "MCOLL_ALG_%s%s", coll_names[coll].upper, levels[level].suffix);
      const char *name = getenv(var);
      int alg = -1;
      if (name && *name) {
        alg = alg_index(level, coll, name);
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
  int b = first_unmet(level, coll, alg, facts);
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
  if (dot && strcmp(dot + 1, levels[MCOLL_LEVEL_INTER].name)) return -1;
  if (dot) level = MCOLL_LEVEL_INTER;
  for (int c = 0; c < MCOLL_NCOLLS; c++) {
    if (strlen(coll_names[c].name) != len || strncmp(coll_names[c].name, coll, len)) continue;
    /* "" or "auto": no forced algorithm (the rules choose again). */
    int choose = !alg || !*alg || !strcmp(alg, "auto");
    int a = choose ? -1 : alg_index(level, c, alg);
    if (!choose && a < 0) return -1;
    forced_load(); /* so that a later first lookup does not overwrite this */
    atomic_store_explicit(&forced[level][c], a, memory_order_relaxed);
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
  fprintf(out, "\nalgorithms between nodes (force one with MCOLL_ALG_<COLL>_INTER=name):\n");
  for (int c = 0; c < MCOLL_NCOLLS; c++) {
    const struct mcoll_coll_algs *table = mcoll__level_algs(MCOLL_LEVEL_INTER, c);
    for (int a = 0; a < table->nalgs; a++)
      fprintf(out, "  %-22s %-18s %s\n", a == 0 ? coll_names[c].name : "", table->algs[a].name,
              table->algs[a].desc);
  }
  fprintf(out, "\nrestrictions (a forced algorithm runs only where they hold; elsewhere the call "
               "is a reported fallback to the normal choice):\n");
  for (int level = 0; level < MCOLL_NLEVELS; level++)
    for (int c = 0; c < MCOLL_NCOLLS; c++) {
      const struct mcoll_coll_algs *table = mcoll__level_algs(level, c);
      char coll[40];
      snprintf(coll, sizeof coll, "%s%s%s", coll_names[c].name, level ? "." : "",
               level ? levels[level].name : "");
      for (int a = 0; a < table->nalgs; a++) {
        fprintf(out, "  %-22s %-18s needs=", coll, table->algs[a].name);
        int any = 0;
        for (int b = 0; b < MCOLL_NNEEDS; b++)
          if (table->algs[a].needs & (1u << b)) fprintf(out, "%s%s", any++ ? "," : "", needs[b].name);
        fprintf(out, "%s\n", any ? "" : "-");
      }
    }
  fprintf(out, "  where\n");
  for (int b = 0; b < MCOLL_NNEEDS; b++) fprintf(out, "    %-12s %s\n", needs[b].name, needs[b].text);
}
