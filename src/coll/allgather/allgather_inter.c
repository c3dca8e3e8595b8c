/* Inter-node allgather among node leaders over the host MPI: a ring of node
 * blocks. A node's ranks need not be consecutive: each node block is a datatype
 * over the rank-ordered buffer, so blocks land in rank order with no reordering. */
#include <stdlib.h>

#include "task/host.h"
#include "coll/allgather/allgather.h"
#include "coll/tags.h"

#define ALLGATHER_INTER_INFO \
  {"ring", "the nodes' leaders pass node blocks around a ring", 0, NULL}
const struct mcoll_coll_algs mcoll__allgather_inter_algs = {
    (const struct mcoll_alg_info[]){ALLGATHER_INTER_INFO}, 1};
const struct mcoll_coll_algs mcoll__allgatherv_inter_algs = {
    (const struct mcoll_alg_info[]){ALLGATHER_INTER_INFO}, 1};

int mcoll__allgather_between_nodes(struct mcoll_comm *c, const struct mcoll_blocks *dst) {
  const struct mcoll_topo *t = &c->topo;
  int p = t->nnodes, me = t->node, err = MPI_SUCCESS, built = 0;
  MPI_Datatype *types = mcoll__xmalloc(sizeof(MPI_Datatype) * (size_t)p);
  for (; built < p && err == MPI_SUCCESS; built++)
    err = mcoll__blocks_node_type(dst, t->node_of, built, &types[built]);
  if (err != MPI_SUCCESS) built--;
  int right = t->node_leader[(me + 1) % p], left = t->node_leader[(me - 1 + p) % p];
  /* Step s passes node me-s's blocks to the right. */
  for (int s = 0; s < p - 1 && err == MPI_SUCCESS; s++) {
    int send = (me - s + p) % p, recv = (me - s - 1 + 2 * p) % p;
    err = mcoll__host_sendrecv(dst->base, 1, types[send], right, MCOLL_TAG_GATHER_FAMILY, dst->base, 1,
                        types[recv], left, MCOLL_TAG_GATHER_FAMILY, c->p2p, MPI_STATUS_IGNORE);
  }
  for (int k = 0; k < built; k++) PMPI_Type_free(&types[k]);
  free(types);
  return err;
}
