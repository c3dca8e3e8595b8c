/* Bcast: algorithm table, choice, and the pipeline of the inter-node phase with
 * the intra-node phase (a node's readers copy piece i while its leader receives
 * piece i+1). */
#include "coll/bcast/bcast.h"

#include "core/config.h"

const struct mcoll_coll_algs mcoll__bcast_algs = {
    (const struct mcoll_alg_info[]){
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
  return MCOLL_BCAST_SHM_PIPELINE;
}

static int local_index(const struct mcoll_topo *t, int rank) {
  for (int i = 0; i < t->local_size; i++)
    if (t->local_ranks[i] == rank) return i;
  return -1;
}

int mcoll__bcast(struct mcoll_comm *c, void *buf, size_t bytes, int root) {
  const struct mcoll_topo *t = &c->topo;
  int alg = choose(c, bytes);
  mcoll__count_alg(MCOLL_COLL_BCAST, alg);
  if (bytes == 0 || c->size == 1) return MPI_SUCCESS;
  c->bcast_seq++;

  int on_root_node = t->node_of[root] == t->node;
  struct mcoll_bcast_call call = {c, buf, bytes, on_root_node ? local_index(t, root) : 0};
  const struct mcoll_bcast_intra *intra =
      alg == MCOLL_BCAST_CMA ? &mcoll__bcast_cma : &mcoll__bcast_shm_pipeline;
  int peers = mcoll__node_has_peers(c);
  int err = MPI_SUCCESS;

  if (t->local_rank == call.source) {
    if (t->nnodes == 1) {
      if (peers) intra->publish(&call, 0, bytes);
    } else {
      size_t piece = (size_t)mcoll__cfg.INTER_PIECE;
      for (size_t lo = 0; lo < bytes && err == MPI_SUCCESS; lo += piece) {
        size_t hi = bytes - lo > piece ? lo + piece : bytes;
        err = mcoll__bcast_between_nodes(c, buf, lo, hi, root);
        if (peers) intra->publish(&call, lo, hi);
      }
    }
  } else {
    intra->read(&call);
  }
  if (peers) intra->finish(&call);
  return err;
}
