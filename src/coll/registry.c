/* Which collectives have which algorithms, at which level, and what each needs: the
 * tables as data (the choice that reads them is coll/select.c). */
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
const char *mcoll__coll_upper(enum mcoll_coll coll) { return coll_names[coll].upper; }
const char *mcoll__level_name(enum mcoll_alg_level level) { return levels[level].name; }
const char *mcoll__level_suffix(enum mcoll_alg_level level) { return levels[level].suffix; }

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

int mcoll__alg_first_unmet(enum mcoll_alg_level level, enum mcoll_coll coll, int alg,
                       const struct mcoll_facts *facts) {
  unsigned unmet = mcoll__level_algs(level, coll)->algs[alg].needs & ~facts->holds;
  for (int b = 0; b < MCOLL_NNEEDS; b++)
    if (unmet & (1u << b)) return b;
  return -1;
}

const char *mcoll__alg_allowed(enum mcoll_coll coll, int alg, const struct mcoll_facts *facts) {
  int b = mcoll__alg_first_unmet(MCOLL_LEVEL_NODE, coll, alg, facts);
  return b < 0 ? NULL : needs[b].text;
}

int mcoll__alg_index(enum mcoll_alg_level level, enum mcoll_coll coll, const char *name) {
  const struct mcoll_coll_algs *table = mcoll__level_algs(level, coll);
  for (int a = 0; a < table->nalgs; a++)
    if (!strcmp(table->algs[a].name, name)) return a;
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
