/* The facts of a call that algorithm restrictions (coll/registry.h) are checked against. */
#ifndef MCOLL_FACTS_H
#define MCOLL_FACTS_H

#include "comm/context.h"
#include "coll/registry.h"

#define MCOLL_NEED_ALL ((1u << MCOLL_NNEEDS) - 1)

/* What the communicator's node says alike on all its ranks; a collective clears the
 * bits its call's arguments rule out. */
static inline struct mcoll_facts mcoll__facts(const struct mcoll_comm *c, size_t bytes) {
  struct mcoll_facts f = {MCOLL_NEED_ALL, c->topo.local_size, c->topo.nnodes, bytes, 0, c->size,
                          c->chan->shm.oversubscribed, c->topo.nlevels};
  /* A rank alone on its node reads no peer (its channel has no CMA probe). */
  if (!c->chan->cma_ok && mcoll__node_has_peers(c)) f.holds &= ~MCOLL_NEED_CMA;
  return f;
}

/* A collective with one algorithm between nodes counts it as what ran there, once
 * per call, when the communicator spans several nodes (MCOLL_ALG_<COLL>_INTER may
 * still name it). */
static inline void mcoll__inter_single(const struct mcoll_comm *c, enum mcoll_coll coll,
                                       size_t bytes) {
  if (c->topo.nnodes <= 1) return;
  struct mcoll_facts facts = mcoll__facts(c, bytes);
  mcoll__inter_select(coll, &facts, 0);
}

#endif
