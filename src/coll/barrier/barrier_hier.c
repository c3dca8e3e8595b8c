/* Hierarchical barrier (seed 000 §4.1), an instance of the MAHCAF template:
 * gather up the node's levels and scatter back down through one queue of
 * cache-line entries (a rank's arrive and release share its line), with a
 * dissemination barrier among node leaders in between. */
#include "coll/barrier/barrier.h"
#include "coll/tags.h"
#include "hier/hier.h"

const struct mcoll_coll_algs mcoll__barrier_algs = {
    (const struct mcoll_alg_info[]){
        {"hier", "tree over the node's levels in shared memory; dissemination among nodes"},
    },
    MCOLL_BARRIER_NALGS};

/* Children arrive (finest level first), then this rank arrives at its parent and
 * waits to be released. */
static int gather_up(struct mcoll_hier_call *call, size_t lo, size_t hi) {
  (void)lo, (void)hi;
  struct mcoll_comm *c = call->c;
  const struct mcoll_topo *t = &c->topo;
  const struct mcoll_shm *shm = &c->shm;
  if (!mcoll__node_has_peers(c)) return MPI_SUCCESS;
  for (int i = 0; i < t->nchildren; i++)
    mcoll__flag_wait(shm, &shm->sync[t->children[i]].arrive, c->barrier_seq);
  if (t->barrier_parent >= 0) {
    mcoll__flag_set(shm, &shm->sync[t->local_rank].arrive, c->barrier_seq);
    mcoll__flag_wait(shm, &shm->sync[t->local_rank].release, c->barrier_seq);
  }
  return MPI_SUCCESS;
}

static int dissemination(struct mcoll_hier_call *call, size_t lo, size_t hi) {
  (void)lo, (void)hi;
  struct mcoll_comm *c = call->c;
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

/* Coarsest children first: they have the most ranks still waiting below them. */
static int release_down(struct mcoll_hier_call *call, size_t lo, size_t hi) {
  (void)lo, (void)hi;
  struct mcoll_comm *c = call->c;
  const struct mcoll_topo *t = &c->topo;
  for (int i = t->nchildren - 1; i >= 0; i--)
    mcoll__flag_set(&c->shm, &c->shm.sync[t->children[i]].release, c->barrier_seq);
  return MPI_SUCCESS;
}

static const struct mcoll_hier_steps barrier_steps = {gather_up, dissemination, release_down,
                                                       NULL};

int mcoll__barrier(struct mcoll_comm *c) {
  mcoll__count_alg(MCOLL_COLL_BARRIER, MCOLL_BARRIER_HIER);
  c->barrier_seq++;
  struct mcoll_hier_call call = {.c = c, .steps = &barrier_steps, .leader = 0};
  return mcoll__hier_run(&call);
}
