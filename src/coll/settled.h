/* A settled small call: on a communicator within one node, a call whose size class
 * the adaptive choice leaves alone (below MCOLL_ADAPT_MIN, or MCOLL_ADAPT=0) and
 * whose algorithm nobody forced makes the same choice at every call of the same
 * size while the parameters hold (their epoch, and no mcoll_set_algorithm since), on
 * every rank alike. Its first call makes the choice through every layer and keeps
 * it in the context; the next calls of that size take it from there and skip the
 * choice and the hierarchy's steps (one node: only the node's steps run,
 * mcoll__hier_node_run). A call of another size, a class that adapts, or a new epoch
 * takes the whole path again.
 *
 * Every collective that keeps its choice does it through the two calls at the end:
 * mcoll__settled_take at its entry (the kept choice, counted, or NULL), then, when
 * it chose through the whole path, mcoll__settled_offer with what it chose. */
#ifndef MCOLL_SETTLED_H
#define MCOLL_SETTLED_H

#include <stdatomic.h>

#include "coll/adapt.h"
#include "coll/registry.h"
#include "comm/context.h"
#include "core/config.h"
#include "task/task.h"

/* Only the application thread's blocking calls keep or take a choice, and only where
 * the application calls MPI from one thread: communicators that share a context can
 * run calls at once on other threads (tasks on the progress thread, application
 * threads at MPI_THREAD_MULTIPLE), and a kept choice is several words read together. */
static inline int mcoll__settled_here(void) {
  static atomic_int multiple = -1;
  if (mcoll__in_task() || mcoll__as_task) return 0;
  int m = atomic_load_explicit(&multiple, memory_order_relaxed);
  if (m < 0) {
    m = mcoll__thread_level() == MPI_THREAD_MULTIPLE;
    atomic_store_explicit(&multiple, m, memory_order_relaxed);
  }
  return !m;
}

/* Whether a call of `key` bytes on c may keep its choice (key > 0: an empty call is
 * never taken from the cache). */
static inline int mcoll__settled_may(const struct mcoll_comm *c, enum mcoll_coll coll,
                                     size_t key) {
  return key > 0 && c->topo.nnodes == 1 && mcoll__alg_forced(coll) < 0 && mcoll__settled_here() &&
         (!mcoll__cfg.ADAPT || mcoll__adapt_class_below_min(key));
}

/* The kept choice for a call of `key` bytes, or NULL. */
static inline struct mcoll_settled *mcoll__settled_find(struct mcoll_comm *c, enum mcoll_coll coll,
                                                        size_t key) {
  struct mcoll_settled *s = &c->settled[coll];
  return s->epoch == mcoll__cfg.epoch && s->key == key && key > 0 && mcoll__settled_here() &&
                 s->forced_epoch ==
                     atomic_load_explicit(&mcoll__forced_epoch, memory_order_relaxed)
             ? s
             : NULL;
}

/* The forced algorithms' epoch before a call chooses, for mcoll__settled_keep (a
 * change from another thread while it chooses leaves nothing kept). */
static inline unsigned mcoll__settled_stamp(void) {
  return atomic_load_explicit(&mcoll__forced_epoch, memory_order_relaxed);
}

static inline void mcoll__settled_keep(struct mcoll_comm *c, enum mcoll_coll coll, unsigned stamp,
                                       size_t key, int alg, int counted, size_t value) {
  struct mcoll_settled *s = &c->settled[coll];
  s->epoch = mcoll__cfg.epoch;
  s->forced_epoch = stamp;
  s->key = key;
  s->alg = alg;
  s->counted = counted;
  s->value = value;
}

/* A collective's entry: the kept choice for a call of `key` bytes whose other facet
 * of the choice (reduce: the element's size; else 0) is `facet`, with its algorithm
 * counted as the whole path would count it; or NULL, and *stamp for
 * mcoll__settled_offer. */
static inline const struct mcoll_settled *mcoll__settled_take(struct mcoll_comm *c,
                                                              enum mcoll_coll coll, size_t key,
                                                              size_t facet, unsigned *stamp) {
  const struct mcoll_settled *s = mcoll__settled_find(c, coll, key);
  if (s && s->facet == facet) {
    mcoll__count_alg(coll, s->counted);
    return s;
  }
  *stamp = mcoll__settled_stamp();
  return NULL;
}

/* After a call chose through the whole path: keeps its choice (alg passed down,
 * `counted` as counted, a threshold `value`) where the call may, and not when the
 * adaptive choice timed it (timing: the call's, or NULL). */
static inline void mcoll__settled_offer(struct mcoll_comm *c, enum mcoll_coll coll, unsigned stamp,
                                        size_t key, size_t facet,
                                        const struct mcoll_adapt_call *timing, int alg,
                                        int counted, size_t value) {
  if ((timing && timing->cls) || !mcoll__settled_may(c, coll, key)) return;
  mcoll__settled_keep(c, coll, stamp, key, alg, counted, value);
  c->settled[coll].facet = facet;
}

#endif
