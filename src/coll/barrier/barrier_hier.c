/* Hierarchical barrier (seed 000 §4.1): gather up the levels and scatter back down
 * through one queue of cache-line entries (a rank's arrive and release share its
 * line), with a dissemination barrier among node leaders in between. */
#include "coll/barrier/barrier.h"
#include "coll/tags.h"

const struct mcoll_coll_algs mcoll__barrier_algs = {
    (const struct mcoll_alg_info[]){
        {"hier", "tree over the node's levels in shared memory; dissemination among nodes"},
    },
    MCOLL_BARRIER_NALGS};

static int barrier_between_nodes(struct mcoll_comm *c) {
  const struct mcoll_topo *t = &c->topo;
  for (int dist = 1; dist < t->nnodes; dist <<= 1) {
    int to = t->node_leader[(t->node + dist) % t->nnodes];
    int from = t->node_leader[(t->node - dist + t->nnodes) % t->nnodes];
    int err = PMPI_Sendrecv(NULL, 0, MPI_BYTE, to, MCOLL_TAG_BARRIER, NULL, 0, MPI_BYTE, from,
                            MCOLL_TAG_BARRIER, c->p2p, MPI_STATUS_IGNORE);
    if (err != MPI_SUCCESS) return err;
  }
  return MPI_SUCCESS;
}

int mcoll__barrier(struct mcoll_comm *c) {
  const struct mcoll_topo *t = &c->topo;
  const struct mcoll_shm *shm = &c->shm;
  uint32_t seq = ++c->barrier_seq;
  int err = MPI_SUCCESS;
  mcoll__count_alg(MCOLL_COLL_BARRIER, MCOLL_BARRIER_HIER);

  if (mcoll__node_has_peers(c)) {
    for (int i = 0; i < t->nchildren; i++)
      mcoll__flag_wait(shm, &shm->sync[t->children[i]].arrive, seq);
    if (t->barrier_parent >= 0) {
      mcoll__flag_set(shm, &shm->sync[t->local_rank].arrive, seq);
      mcoll__flag_wait(shm, &shm->sync[t->local_rank].release, seq);
    }
  }
  if (t->local_rank == 0 && t->nnodes > 1) err = barrier_between_nodes(c);
  /* Coarsest children first: they have the most ranks still waiting below them. */
  for (int i = t->nchildren - 1; i >= 0; i--)
    mcoll__flag_set(shm, &shm->sync[t->children[i]].release, seq);
  return err;
}
