/* Choice that adapts at run time (after STAR-MPI's self-tuned collectives): for a
 * communicator and a collective whose size class (the bytes' bit length) repeats,
 * the blocking calls of the class time the candidate algorithms in turn, the ranks
 * agree on the slowest rank's times with one small allreduce at the end of the
 * round, and the class keeps the fastest until a rare re-check. Every rank counts
 * the class's calls alike, so every rank runs the same algorithm at every call.
 *
 * Only blocking calls on a communicator within one node adapt. A task (MPI_I*) runs
 * the class's kept algorithm without counting or timing: only blocking calls change
 * what a class keeps, and a blocking call first completes its communicator's tasks,
 * so each task reads the same choice on every rank, whenever it runs. A persistent
 * request's own communicator starts with its parent's choices (copied at the init,
 * mcoll__adapt_inherit) and keeps them. */
#ifndef MCOLL_ADAPT_H
#define MCOLL_ADAPT_H

#include <stddef.h>

#include "coll/registry.h"
#include "comm/context.h"
#include "core/config.h"
#include "task/task.h"

enum { MCOLL_ADAPT_CLASSES = 48, MCOLL_ADAPT_MAX_SAMPLES = 15 };

struct mcoll_adapt_class {
  unsigned calls;       /* adaptable calls of this class so far */
  unsigned next;        /* the call from which mcoll__adapt_step runs (a phase changes) */
  unsigned epoch;       /* the parameters' epoch the class's state belongs to */
  unsigned explore_from, explore_end; /* the round of timed calls: [from, end) */
  signed char kept;     /* the algorithm the class keeps; -1: each call's rules' choice */
  unsigned char ncands, rechecks;
  unsigned char nsamples;   /* timed calls per candidate in this class's rounds */
  unsigned char round_open; /* a round began and is not decided yet */
  signed char cands[MCOLL_MAX_ALGS]; /* cands[0]: the rules' choice when the round began */
  float samples[MCOLL_MAX_ALGS][MCOLL_ADAPT_MAX_SAMPLES]; /* µs; < 0: not timed */
};

/* A collective's classes on one context (allocated at its first adaptable call, freed
 * with the context). */
struct mcoll_adapt_coll {
  struct mcoll_adapt_class cls[MCOLL_ADAPT_CLASSES];
};

/* One call's timing: cls NULL when the call is not timed. */
struct mcoll_adapt_call {
  struct mcoll_comm *c;
  struct mcoll_adapt_class *cls;
  int cand, sample;
  double t0;
};

/* The slow path of mcoll__adapt_pick: a class's first call, a round's calls, the
 * decision's follow-up and re-checks. */
int mcoll__adapt_step(struct mcoll_comm *c, enum mcoll_coll coll, size_t bytes, int alg,
                      const struct mcoll_facts *facts, unsigned reach, struct mcoll_adapt_call *call);
/* Ends a timed call. */
void mcoll__adapt_timed(struct mcoll_adapt_call *call);
/* A persistent request's new context `to` takes the choices of its communicator's
 * context `from` (both at the init, the same point on every rank). */
void mcoll__adapt_inherit(struct mcoll_comm *to, const struct mcoll_comm *from);
/* Every decision taken in this process, for the MCOLL_VERBOSE report. */
void mcoll__adapt_report(FILE *out, int rank);

static inline int mcoll__adapt_class_of(size_t bytes) {
  int bits = bytes ? 64 - __builtin_clzll((unsigned long long)bytes) : 0;
  return bits < MCOLL_ADAPT_CLASSES ? bits : MCOLL_ADAPT_CLASSES - 1;
}

/* A class below ADAPT_MIN (its smallest size; by class, so every call of the class
 * agrees) keeps the rules' choice: no round, nothing counted. */
static inline int mcoll__adapt_class_below_min(size_t bytes) {
  int cls = mcoll__adapt_class_of(bytes);
  size_t smallest = cls ? (size_t)1 << (cls - 1) : 0;
  return smallest < (size_t)(mcoll__cfg.ADAPT_MIN > 0 ? mcoll__cfg.ADAPT_MIN : 0);
}

/* What a task runs (an MPI_I* call, a persistent start, or their try on the caller's
 * stack): the class's kept algorithm where it may run for these facts, else alg;
 * nothing counted or timed. A class below ADAPT_MIN, or one that no blocking call
 * has begun under the current parameters, keeps nothing: its zeroed state is not
 * a choice, and a try and a task of the same call on two ranks must agree with
 * mcoll__adapt_pick's answer for it. */
static inline int mcoll__adapt_kept(const struct mcoll_comm *c, enum mcoll_coll coll, size_t bytes,
                                    int alg, const struct mcoll_facts *facts) {
  const struct mcoll_adapt_coll *a = mcoll__cfg.ADAPT ? c->adapt[coll] : NULL;
  if (!a || mcoll__adapt_class_below_min(bytes)) return alg;
  const struct mcoll_adapt_class *k = &a->cls[mcoll__adapt_class_of(bytes)];
  if (k->epoch != mcoll__cfg.epoch || k->kept < 0 || k->kept == alg) return alg;
  unsigned needs = mcoll__coll_algs(coll)->algs[k->kept].needs;
  return (needs & ~facts->holds) ? alg : k->kept;
}

/* The algorithm a blocking call runs: `alg` (the rules' or thresholds' choice for the
 * call's facts) unless the class keeps another one that may run for these facts, or
 * a round times another candidate now. reach: the algorithms (bits by index) worth
 * timing for this size. Callers skip it when the choice was forced or came from a
 * threshold the user set. Settled: a counter and a branch. */
static inline int mcoll__adapt_pick(struct mcoll_comm *c, enum mcoll_coll coll, size_t bytes, int alg,
                                    const struct mcoll_facts *facts, unsigned reach,
                                    struct mcoll_adapt_call *call) {
  call->cls = NULL;
  if (!mcoll__cfg.ADAPT || mcoll__adapt_class_below_min(bytes)) return alg;
  struct mcoll_adapt_coll *a = c->adapt[coll];
  if (!a) return mcoll__adapt_step(c, coll, bytes, alg, facts, reach, call);
  if (mcoll__in_task() || mcoll__as_task) return mcoll__adapt_kept(c, coll, bytes, alg, facts);
  struct mcoll_adapt_class *k = &a->cls[mcoll__adapt_class_of(bytes)];
  if (++k->calls < k->next && k->epoch == mcoll__cfg.epoch)
    return mcoll__adapt_kept(c, coll, bytes, alg, facts);
  k->calls--; /* (counted again by the slow path) */
  return mcoll__adapt_step(c, coll, bytes, alg, facts, reach, call);
}

static inline void mcoll__adapt_done(struct mcoll_adapt_call *call) {
  if (call->cls) mcoll__adapt_timed(call);
}

#endif
