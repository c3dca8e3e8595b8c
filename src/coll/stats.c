/* Per-collective counters, the fallback policy and the MCOLL_VERBOSE report. */
#include <mpi.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "coll/registry.h"
#include "core/config.h"

struct coll_counters {
  atomic_ulong alg[MCOLL_MAX_ALGS];
  atomic_ulong inter[MCOLL_MAX_ALGS]; /* what the inter-node phase ran (several nodes) */
  atomic_ulong mixed;                 /* calls whose blocks took different algorithms */
  atomic_ulong blocks[MCOLL_MAX_ALGS]; /* their blocks, by algorithm */
  atomic_ulong control; /* control messages sent between nodes */
  atomic_ulong control_wait_ns; /* time in the phases that wait for them */
  atomic_ulong other_leader; /* calls whose node leader was not its usual one */
  atomic_ulong passthrough;
  atomic_ulong invalid;
  atomic_ulong fallback[MCOLL_NREASONS];
  atomic_ulong forced_denied[MCOLL_NLEVELS][MCOLL_MAX_ALGS][MCOLL_NNEEDS]; /* also in fallback[FORCED] */
};

static struct coll_counters counters[MCOLL_NCOLLS];
MCOLL_TLS unsigned long mcoll__tries_run[MCOLL_NCOLLS];

static const char *const reason_text[MCOLL_NREASONS] = {
#define MCOLL_REASON_TEXT(name, text) text,
    MCOLL_FALLBACK_REASONS(MCOLL_REASON_TEXT)
#undef MCOLL_REASON_TEXT
};

static void bump(atomic_ulong *counter) {
  atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

static unsigned long get(atomic_ulong *counter) {
  return atomic_load_explicit(counter, memory_order_relaxed);
}

void mcoll__count_alg(enum mcoll_coll coll, int alg) { bump(&counters[coll].alg[alg]); }
void mcoll__count_level(enum mcoll_alg_level level, enum mcoll_coll coll, int alg) {
  bump(level == MCOLL_LEVEL_INTER ? &counters[coll].inter[alg] : &counters[coll].alg[alg]);
}
void mcoll__count_mixed(enum mcoll_coll coll, const unsigned long *blocks) {
  bump(&counters[coll].mixed);
  for (int a = 0; a < MCOLL_MAX_ALGS; a++)
    if (blocks[a]) atomic_fetch_add_explicit(&counters[coll].blocks[a], blocks[a], memory_order_relaxed);
}
void mcoll__count_control(enum mcoll_coll coll) { bump(&counters[coll].control); }
void mcoll__count_control_wait(enum mcoll_coll coll, double seconds) {
  atomic_fetch_add_explicit(&counters[coll].control_wait_ns, (unsigned long)(seconds * 1e9),
                            memory_order_relaxed);
}
void mcoll__count_other_leader(enum mcoll_coll coll) { bump(&counters[coll].other_leader); }
void mcoll__count_passthrough(enum mcoll_coll coll) { bump(&counters[coll].passthrough); }
void mcoll__count_invalid(enum mcoll_coll coll) { bump(&counters[coll].invalid); }

void mcoll__fallback(enum mcoll_coll coll, enum mcoll_fallback_reason why) {
  bump(&counters[coll].fallback[why]);
  if (mcoll__cfg.fallback_policy == MCOLL_FALLBACK_SILENT) return;
  /* A non-blocking call before the communicator's context exists is the design (its
   * set-up would block), not an algorithm that could not run: said only when asked. */
  if (why == MCOLL_WHY_NBC && mcoll__cfg.fallback_policy != MCOLL_FALLBACK_WARN) return;
  int rank = -1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fprintf(stderr, "mcoll: rank %d: %s falls back to the host MPI: %s\n", rank,
          mcoll__coll_name(coll), reason_text[why]);
  if (mcoll__cfg.fallback_policy == MCOLL_FALLBACK_ERROR) {
    fprintf(stderr, "mcoll: MCOLL_FALLBACK=error: aborting\n");
    PMPI_Abort(MPI_COMM_WORLD, 3);
  }
}

void mcoll__fallback_forced(enum mcoll_alg_level level, enum mcoll_coll coll, int alg, int need) {
  bump(&counters[coll].fallback[MCOLL_WHY_FORCED]);
  unsigned long before = atomic_fetch_add_explicit(&counters[coll].forced_denied[level][alg][need], 1,
                                                   memory_order_relaxed);
  if (mcoll__cfg.fallback_policy == MCOLL_FALLBACK_SILENT) return;
  /* Said once per process and reason (MCOLL_VERBOSE's report counts every call): a
   * warning per call floods stderr and splits other ranks' lines. */
  if (before > 0 && mcoll__cfg.fallback_policy != MCOLL_FALLBACK_ERROR) return;
  int rank = -1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fprintf(stderr, "mcoll: rank %d: %s%s%s: forced algorithm %s cannot run here (needs %s: %s); the "
          "normal choice runs (said once)\n", rank, mcoll__coll_name(coll), level ? "." : "",
          level ? mcoll__level_name(level) : "", mcoll__level_algs(level, coll)->algs[alg].name,
          mcoll__need_name(need), mcoll__need_text(need));
  if (mcoll__cfg.fallback_policy == MCOLL_FALLBACK_ERROR) {
    fprintf(stderr, "mcoll: MCOLL_FALLBACK=error: aborting\n");
    PMPI_Abort(MPI_COMM_WORLD, 3);
  }
}

void mcoll__stats_report(FILE *out) {
  for (int c = 0; c < MCOLL_NCOLLS; c++) {
    struct coll_counters *k = &counters[c];
    const struct mcoll_coll_algs *table = mcoll__coll_algs(c);
    unsigned long by_alg = 0, fallbacks = 0;
    for (int a = 0; a < table->nalgs; a++) by_alg += get(&k->alg[a]);
    by_alg += get(&k->mixed);
    for (int r = 0; r < MCOLL_NREASONS; r++) fallbacks += get(&k->fallback[r]);
    /* A forced algorithm that could not run is a fallback to the normal choice,
     * which counts the call under the algorithm that ran. */
    unsigned long to_host = fallbacks - get(&k->fallback[MCOLL_WHY_FORCED]);
    unsigned long calls = by_alg + to_host + get(&k->passthrough) + get(&k->invalid);
    if (calls == 0) continue;
    fprintf(out, "mcoll: %s calls=%lu", mcoll__coll_name(c), calls);
    for (int a = 0; a < table->nalgs; a++)
      fprintf(out, " %s=%lu", table->algs[a].name, get(&k->alg[a]));
    if (get(&k->mixed)) fprintf(out, " mixed=%lu", get(&k->mixed));
    if (get(&k->passthrough)) fprintf(out, " passthrough=%lu", get(&k->passthrough));
    if (get(&k->invalid)) fprintf(out, " invalid_args=%lu", get(&k->invalid));
    if (mcoll__tries_run[c]) fprintf(out, " on_callers_stack=%lu", mcoll__tries_run[c]);
    fprintf(out, " fallback=%lu\n", fallbacks);
    if (get(&k->mixed)) {
      fprintf(out, "mcoll: %s mixed blocks:", mcoll__coll_name(c));
      for (int a = 0; a < table->nalgs; a++)
        fprintf(out, " %s=%lu", table->algs[a].name, get(&k->blocks[a]));
      fprintf(out, "\n");
    }
    for (int r = 0; r < MCOLL_NREASONS; r++)
      if (get(&k->fallback[r]))
        fprintf(out, "mcoll: %s fallback \"%s\"=%lu\n", mcoll__coll_name(c), reason_text[r],
                get(&k->fallback[r]));
    /* Between nodes: one line when any call spanned several nodes. */
    const struct mcoll_coll_algs *inter = mcoll__level_algs(MCOLL_LEVEL_INTER, c);
    unsigned long by_inter = 0;
    for (int a = 0; a < inter->nalgs; a++) by_inter += get(&k->inter[a]);
    if (by_inter) {
      fprintf(out, "mcoll: %s.inter calls=%lu", mcoll__coll_name(c), by_inter);
      for (int a = 0; a < inter->nalgs; a++)
        fprintf(out, " %s=%lu", inter->algs[a].name, get(&k->inter[a]));
      if (get(&k->control)) fprintf(out, " control_msgs=%lu", get(&k->control));
      if (get(&k->control_wait_ns))
        fprintf(out, " control_wait_us=%lu", get(&k->control_wait_ns) / 1000);
      if (get(&k->other_leader)) fprintf(out, " other_leader=%lu", get(&k->other_leader));
      fprintf(out, "\n");
    }
    for (int level = 0; level < MCOLL_NLEVELS; level++) {
      const struct mcoll_coll_algs *at = mcoll__level_algs(level, c);
      for (int a = 0; a < at->nalgs; a++)
        for (int b = 0; b < MCOLL_NNEEDS; b++)
          if (get(&k->forced_denied[level][a][b]))
            fprintf(out, "mcoll: %s%s%s forced %s not allowed: needs %s (%s)=%lu\n",
                    mcoll__coll_name(c), level ? "." : "", level ? mcoll__level_name(level) : "",
                    at->algs[a].name, mcoll__need_name(b), mcoll__need_text(b),
                    get(&k->forced_denied[level][a][b]));
    }
  }
}
