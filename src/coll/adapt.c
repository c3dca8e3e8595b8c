/* Choice that adapts at run time: the rounds, the agreement and the report
 * (coll/adapt.h says what and why). */
#include "coll/adapt.h"

#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/xmalloc.h"

/* The last decision of each collective and class in this process (the report). */
struct decision {
  unsigned count;  /* decisions taken (first one and re-checks) */
  unsigned at;     /* the class's call count at the last one */
  int kept, ncands, local_best;
  signed char cands[MCOLL_MAX_ALGS];
  double agreed[MCOLL_MAX_ALGS]; /* the slowest rank's median, µs */
};
static struct decision decisions[MCOLL_NCOLLS][MCOLL_ADAPT_CLASSES];
static pthread_mutex_t decisions_lock = PTHREAD_MUTEX_INITIALIZER;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int allowed(enum mcoll_coll coll, int alg, const struct mcoll_facts *facts) {
  return !(mcoll__coll_algs(coll)->algs[alg].needs & ~facts->holds);
}

/* A class is long when its smallest size is at least ADAPT_LONG bytes: decided by the
 * class, not the call's bytes, so every call of the class (on every rank) agrees. */
static int class_is_long(int cls) {
  long from = mcoll__cfg.ADAPT_LONG;
  size_t smallest = cls ? (size_t)1 << (cls - 1) : 0;
  return from > 0 && smallest >= (size_t)from;
}

static unsigned clamp_samples(long s) {
  return s < 1 ? 1 : s > MCOLL_ADAPT_MAX_SAMPLES ? MCOLL_ADAPT_MAX_SAMPLES : (unsigned)s;
}

/* A round runs each candidate's calls one after the other, the first WARM_CALLS of
 * them untimed: a call right after another algorithm's finds the lines and pages it
 * uses cold and takes several times its steady time below a few KiB, so timing the
 * candidates call by call in turn ranks them by their cold calls (docs/performance.md). */
enum { WARM_CALLS = 1 };

static unsigned calls_per_candidate(const struct mcoll_adapt_class *k) { return WARM_CALLS + k->nsamples; }

/* Settled until the next re-check, which comes after ADAPT_RECHECK calls, then twice
 * as many each time (up to 64 times as many). */
static void settle(struct mcoll_adapt_class *k) {
  long recheck = mcoll__cfg.ADAPT_RECHECK;
  unsigned shift = k->rechecks < 6 ? k->rechecks : 6;
  unsigned long gap = recheck > 0 ? (unsigned long)recheck << shift : 0;
  k->next = gap && k->calls + gap < 0xffffffffUL ? k->calls + (unsigned)gap : 0xffffffffU;
  if (k->rechecks < 255) k->rechecks++;
}

/* A round: the rules' choice first, then every other algorithm within reach that may
 * run for these facts (the same on every rank of the node). */
static void round_begin(struct mcoll_adapt_class *k, enum mcoll_coll coll, int alg,
                        const struct mcoll_facts *facts, unsigned reach) {
  const struct mcoll_coll_algs *table = mcoll__coll_algs(coll);
  k->ncands = 0;
  k->cands[k->ncands++] = (signed char)alg;
  for (int a = 0; a < table->nalgs; a++)
    if (a != alg && (reach & (1u << a)) && allowed(coll, a, facts)) k->cands[k->ncands++] = (signed char)a;
  if (k->ncands < 2) {
    k->kept = -1;
    settle(k);
    return;
  }
  for (int i = 0; i < k->ncands; i++)
    for (unsigned s = 0; s < MCOLL_ADAPT_MAX_SAMPLES; s++) k->samples[i][s] = -1.0f;
  k->explore_from = k->calls;
  k->explore_end = k->calls + k->ncands * calls_per_candidate(k);
  k->round_open = 1;
}

static void decide(struct mcoll_comm *c, enum mcoll_coll coll, struct mcoll_adapt_class *k);

int mcoll__adapt_step(struct mcoll_comm *c, enum mcoll_coll coll, size_t bytes, int alg,
                      const struct mcoll_facts *facts, unsigned reach, struct mcoll_adapt_call *call) {
  if (c->topo.nnodes != 1 || !mcoll__node_has_peers(c) || mcoll__in_task() || mcoll__as_task)
    return alg;
  if (!c->adapt[coll]) {
    c->adapt[coll] = mcoll__xmalloc(sizeof *c->adapt[coll]);
    memset(c->adapt[coll], 0, sizeof *c->adapt[coll]); /* (epoch 0: every class new) */
  }
  struct mcoll_adapt_class *k = &c->adapt[coll]->cls[mcoll__adapt_class_of(bytes)];
  if (k->epoch != mcoll__cfg.epoch) { /* new, or the parameters changed: start again */
    memset(k, 0, sizeof *k);
    k->epoch = mcoll__cfg.epoch;
    k->kept = -1;
    /* Long calls: a short warm-up and fewer samples, so that a round ends within the
     * few calls per size a program such as OSU makes (110 above 8 KiB), while the
     * round's calls stay a small share of the first 1000 (docs/algorithms.md). */
    int long_class = class_is_long(mcoll__adapt_class_of(bytes));
    long warmup = long_class ? mcoll__cfg.ADAPT_LONG_WARMUP : mcoll__cfg.ADAPT_WARMUP;
    k->next = warmup > 0 ? (unsigned)warmup : 1;
    k->nsamples = (unsigned char)clamp_samples(long_class ? mcoll__cfg.ADAPT_LONG_SAMPLES : mcoll__cfg.ADAPT_SAMPLES);
  }
  unsigned n = ++k->calls;
  if (k->round_open && n >= k->explore_end) decide(c, coll, k);
  if (n < k->next) return k->kept >= 0 && allowed(coll, k->kept, facts) ? k->kept : alg;
  if (!k->round_open) round_begin(k, coll, alg, facts, reach);
  if (!k->round_open) return alg; /* nothing to compare: settled */
  k->next = n + 1;
  unsigned i = n - k->explore_from, per = calls_per_candidate(k);
  int cand = (int)(i / per);
  if (!allowed(coll, k->cands[cand], facts)) return alg; /* (not timed) */
  if (i % per < WARM_CALLS) return k->cands[cand];
  *call = (struct mcoll_adapt_call){c, k, cand, (int)(i % per - WARM_CALLS), now_us()};
  return k->cands[cand];
}

void mcoll__adapt_inherit(struct mcoll_comm *to, const struct mcoll_comm *from) {
  for (int coll = 0; coll < MCOLL_CHOICE_SLOTS; coll++) {
    if (!from->adapt[coll] || to->adapt[coll]) continue;
    to->adapt[coll] = mcoll__xmalloc(sizeof *to->adapt[coll]);
    memcpy(to->adapt[coll], from->adapt[coll], sizeof *to->adapt[coll]);
  }
}

static int by_value(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static double median(const float *samples, unsigned n) {
  float v[MCOLL_ADAPT_MAX_SAMPLES];
  unsigned m = 0;
  for (unsigned s = 0; s < n; s++)
    if (samples[s] >= 0) v[m++] = samples[s];
  if (m == 0) return INFINITY;
  qsort(v, m, sizeof v[0], by_value);
  return m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

static int fastest(const double *t, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (t[i] < t[best]) best = i;
  return best;
}

/* At the class's first call after a round, on every rank at the same call: one
 * allreduce gives every rank the slowest rank's median per candidate, and so the same
 * decision. */
static void decide(struct mcoll_comm *c, enum mcoll_coll coll, struct mcoll_adapt_class *k) {
  double t[MCOLL_MAX_ALGS];
  int n = k->ncands;
  for (int i = 0; i < n; i++) t[i] = median(k->samples[i], k->nsamples);
  int local_best = k->cands[fastest(t, n)];
  PMPI_Allreduce(MPI_IN_PLACE, t, n, MPI_DOUBLE, MPI_MAX, c->comm);
  int best = fastest(t, n);
  /* The rules' choice stays unless another is faster by the margin: noise alone
   * should not move a class off the model's choice. */
  double margin = (double)mcoll__cfg.ADAPT_MARGIN / 100.0;
  k->kept = best != 0 && t[best] < (1.0 - margin) * t[0] ? k->cands[best] : -1;
  k->round_open = 0;
  settle(k);
  pthread_mutex_lock(&decisions_lock);
  struct decision *d = &decisions[coll][k - c->adapt[coll]->cls];
  d->count++;
  d->at = k->calls;
  d->kept = k->kept >= 0 ? k->kept : k->cands[0];
  d->ncands = n;
  d->local_best = local_best;
  for (int i = 0; i < n; i++) {
    d->cands[i] = k->cands[i];
    d->agreed[i] = t[i];
  }
  pthread_mutex_unlock(&decisions_lock);
}

void mcoll__adapt_timed(struct mcoll_adapt_call *call) {
  struct mcoll_adapt_class *k = call->cls;
  double us = now_us() - call->t0;
  /* For tests: every rank alone would prefer another candidate. */
  if (mcoll__cfg.TEST_ADAPT_SKEW_US)
    us += (double)mcoll__cfg.TEST_ADAPT_SKEW_US *
          (((mcoll__cfg.TEST_ADAPT_SKEW_ALIKE ? 1 : call->c->rank) + call->cand) % k->ncands);
  k->samples[call->cand][call->sample] = (float)us;
}

static void size_text(char *out, size_t len, size_t bytes) {
  if (bytes >= (1u << 20)) snprintf(out, len, "%zuM", bytes >> 20);
  else if (bytes >= 1024) snprintf(out, len, "%zuK", bytes >> 10);
  else snprintf(out, len, "%zu", bytes);
}

void mcoll__adapt_report(FILE *out, int rank) {
  pthread_mutex_lock(&decisions_lock);
  for (int coll = 0; coll < MCOLL_NCOLLS; coll++)
    for (int cls = 0; cls < MCOLL_ADAPT_CLASSES; cls++) {
      struct decision *d = &decisions[coll][cls];
      if (!d->count) continue;
      const struct mcoll_coll_algs *table = mcoll__coll_algs(coll);
      char lo[16], hi[16];
      size_text(lo, sizeof lo, cls ? (size_t)1 << (cls - 1) : 0);
      size_text(hi, sizeof hi, (size_t)1 << cls);
      fprintf(out, "mcoll: rank %d adapt %s [%s, %s) B: %s (%s) at call %u, decisions=%u; slowest rank's "
              "median us:", rank, mcoll__coll_name(coll), lo, hi, table->algs[d->kept].name,
              d->kept == d->cands[0] ? "the rules' choice" : "faster than the rules' choice", d->at,
              d->count);
      for (int i = 0; i < d->ncands; i++)
        fprintf(out, " %s=%.1f%s", table->algs[d->cands[i]].name, d->agreed[i], i ? "" : "(rules)");
      fprintf(out, "; this rank alone: %s\n", table->algs[d->local_best].name);
    }
  pthread_mutex_unlock(&decisions_lock);
}
