/* Bcast: algorithm table, choice, and its steps in the MAHCAF template: the
 * inter-node step among node sources, then the intra-node step, piece by piece. */
#include "coll/bcast/bcast.h"

#include "core/config.h"
#include "hier/hier.h"

const struct mcoll_coll_algs mcoll__bcast_algs = {
    (const struct mcoll_alg_info[]){
        {"shm_tree", "small: down a tree over the node's levels through the ranks' areas"},
        {"shm_pipeline", "two copies through NUMA-placed slots, k readers per slot, pipelined"},
        {"cma", "single copy: readers read the source's buffer with process_vm_readv"},
    },
    MCOLL_BCAST_NALGS};

static int choose(const struct mcoll_comm *c, size_t bytes) {
  int forced = mcoll__alg_forced(MCOLL_COLL_BCAST);
  if (forced == MCOLL_BCAST_CMA && !c->cma_ok) forced = MCOLL_BCAST_SHM_PIPELINE;
  if (forced >= 0) return forced;
  if (c->cma_ok && mcoll__cfg.BCAST_CMA_MIN > 0 && bytes >= (size_t)mcoll__cfg.BCAST_CMA_MIN)
    return MCOLL_BCAST_CMA;
  if (c->topo.nlevels > 0 && bytes <= (size_t)mcoll__cfg.BCAST_TREE_MAX)
    return MCOLL_BCAST_SHM_TREE;
  return MCOLL_BCAST_SHM_PIPELINE;
}

static const struct mcoll_bcast_intra *const intra_steps[MCOLL_BCAST_NALGS] = {
    [MCOLL_BCAST_SHM_TREE] = &mcoll__bcast_shm_tree,
    [MCOLL_BCAST_SHM_PIPELINE] = &mcoll__bcast_shm_pipeline,
    [MCOLL_BCAST_CMA] = &mcoll__bcast_cma,
};

static int inter_step(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  struct mcoll_bcast_call *call = hc->args;
  return mcoll__bcast_between_nodes(call->c, call->buf, lo, hi, call->root);
}

static int intra_step(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  struct mcoll_bcast_call *call = hc->args;
  if (!mcoll__node_has_peers(call->c)) return MPI_SUCCESS;
  if (call->c->topo.local_rank == call->source) call->intra->publish(call, lo, hi);
  else call->intra->read(call, lo, hi);
  return MPI_SUCCESS;
}

static int finish_step(struct mcoll_hier_call *hc) {
  struct mcoll_bcast_call *call = hc->args;
  if (mcoll__node_has_peers(call->c)) call->intra->finish(call);
  return MPI_SUCCESS;
}

static const struct mcoll_hier_steps bcast_steps = {NULL, inter_step, intra_step, finish_step};

int mcoll__bcast(struct mcoll_comm *c, void *buf, size_t bytes, int root) {
  const struct mcoll_topo *t = &c->topo;
  int alg = choose(c, bytes);
  mcoll__count_alg(MCOLL_COLL_BCAST, alg);
  if (bytes == 0 || c->size == 1) return MPI_SUCCESS;
  c->bcast_seq++;

  struct mcoll_bcast_call call = {
      .c = c, .buf = buf, .bytes = bytes, .root = root,
      .source = t->node_of[root] == t->node ? mcoll__local_index(t, root) : 0,
      .intra = intra_steps[alg]};
  struct mcoll_hier_call hc = {.c = c, .steps = &bcast_steps, .bytes = bytes,
                               .piece = t->nnodes > 1 ? (size_t)mcoll__cfg.INTER_PIECE : 0,
                               .leader = call.source, .args = &call};
  return mcoll__hier_run(&hc);
}
