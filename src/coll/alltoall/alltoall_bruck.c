/* Bruck's alltoall (1997) among the node's ranks, through the per-rank areas:
 * after a local rotation, round k (k = 1, 2, 4, ...) passes every block whose
 * index has bit k to rank me+k, so log2(m) rounds replace m-1 pairwise steps. In
 * shared memory each round is a node-wide generation of the areas, so it trades
 * fewer reads for more synchronisation: kept for measurement and small blocks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/alltoall/alltoall_node.h"
#include "node/area.h"

void mcoll__a2a_node_bruck(struct mcoll_a2a *a) {
  struct mcoll_comm *c = a->c;
  const struct mcoll_topo *t = &c->topo;
  int m = t->local_size, me = t->local_rank;
  size_t block = a->block, header = mcoll__a2a_header_bytes(m);
  char local_tmp[4096], *tmp = local_tmp;
  if ((size_t)m * block > sizeof local_tmp) {
    tmp = malloc((size_t)m * block);
    if (!tmp) {
      fprintf(stderr, "mcoll: alltoall: out of memory\n");
      PMPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  /* tmp[i]: the block for local rank me+i, then the block from local rank me-i. */
  for (int i = 1; i < m; i++)
    memcpy(tmp + (size_t)i * block, a->send[t->local_ranks[(me + i) % m]].ptr, block);
  for (int k = 1; k < m; k <<= 1) {
    uint32_t gen = mcoll__area_next(c->chan);
    char *out = mcoll__rank_area(&c->chan->shm, me) + header;
    mcoll__area_wait_free(c->chan, gen);
    for (int i = 1, n = 0; i < m; i++)
      if (i & k) memcpy(out + (size_t)n++ * block, tmp + (size_t)i * block, block);
    mcoll__area_post(c->chan, gen);
    int from = (me - k + m) % m;
    const char *in = mcoll__rank_area(&c->chan->shm, from) + header;
    mcoll__area_wait_posted(c->chan, from, gen);
    for (int i = 1, n = 0; i < m; i++)
      if (i & k) memcpy(tmp + (size_t)i * block, in + (size_t)n++ * block, block);
    mcoll__area_done(c->chan, gen);
  }
  for (int i = 1; i < m; i++)
    memcpy(a->recv[t->local_ranks[(me - i + m) % m]].ptr, tmp + (size_t)i * block, block);
  if (tmp != local_tmp) free(tmp);
}
