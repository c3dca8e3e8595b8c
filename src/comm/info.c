/* The public query API (include/mcoll.h). */
#include <stdio.h>

#include "comm/context.h"
#include "core/config.h"
#include "mcoll.h"

MCOLL_EXPORT const char *mcoll_version(void) { return "0.1.0"; }

MCOLL_EXPORT const char *mcoll_flavour(void) { return MCOLL_FLAVOUR; }

MCOLL_EXPORT void mcoll_print_hierarchy(FILE *out) {
  enum mcoll_fallback_reason why;
  mcoll__config_load();
  struct mcoll_comm *c = mcoll__comm_get(MPI_COMM_WORLD, &why);
  int rank;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (!c) {
    if (rank == 0) fprintf(out, "hierarchy: unavailable (context set-up failed)\n");
    return;
  }
  /* Each node's leader prints its node, in rank order. */
  for (int node = 0; node < c->topo.nnodes; node++) {
    if (node == c->topo.node && c->topo.local_rank == 0) {
      if (node == 0) fprintf(out, "single copy (CMA) between ranks of a node: %s\n",
                             c->chan->cma_ok || c->topo.local_size == 1 ? "yes" : "no (two copies)");
      mcoll__topo_print(&c->topo, out);
      fflush(out);
    }
    PMPI_Barrier(MPI_COMM_WORLD);
  }
}
