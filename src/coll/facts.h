/* The facts of a call that algorithm restrictions (core/coll.h) are checked against. */
#ifndef MCOLL_FACTS_H
#define MCOLL_FACTS_H

#include "comm/context.h"
#include "core/coll.h"

#define MCOLL_NEED_ALL ((1u << MCOLL_NNEEDS) - 1)

/* What the communicator's node says alike on all its ranks; a collective clears the
 * bits its call's arguments rule out. */
static inline struct mcoll_facts mcoll__facts(const struct mcoll_comm *c, size_t bytes) {
  struct mcoll_facts f = {MCOLL_NEED_ALL, c->topo.local_size, c->topo.nnodes, bytes};
  /* A rank alone on its node reads no peer (its channel has no CMA probe). */
  if (!c->chan->cma_ok && mcoll__node_has_peers(c)) f.holds &= ~MCOLL_NEED_CMA;
  return f;
}

#endif
