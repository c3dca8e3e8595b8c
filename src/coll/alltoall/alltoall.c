/* Alltoall(v,w): algorithm table, choice, and the call's frame: blocks for other
 * nodes go pairwise over the host MPI's point-to-point among all ranks (started
 * first, so they overlap the node's exchange), the own block is copied, and the
 * node's blocks move in shared memory.
 *
 * Why no node-leader aggregation between nodes: it saves network messages only for
 * small blocks (n² → nodes² messages) at the price of two extra copies and a
 * leader that serialises its node's traffic; large blocks, the ones this file is
 * tuned for, gain nothing from it. Every rank talking to its remote peers keeps
 * all cores busy and needs no staging memory. */
#include "task/host.h"
#include "coll/alltoall/alltoall.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll/adapt.h"
#include "coll/facts.h"
#include "coll/rules.h"
#include "coll/settled.h"
#include "core/config.h"
#include "topo/topo.h"

static const struct mcoll_alg_info alltoall_algs[] = {
    {"shm_direct", "each rank writes its blocks into its area, peers copy theirs out", 0, NULL},
    {"bruck", "Bruck over the areas, log2(n) rounds (alltoall only)",
     MCOLL_NEED_UNIFORM | MCOLL_NEED_BRUCK_FITS, NULL},
    {"pairwise_cma", "pairwise single copy: read (me-s)'s block with process_vm_readv",
     MCOLL_NEED_CMA, NULL},
    {"tiled", "blocks cut into cache-sized tiles, double-buffered through the areas", 0, NULL},
    {"tiled_cma", "single copy tile by tile: round t reads tile t of every block", MCOLL_NEED_CMA,
     NULL},
    {"pair_inline", "2 ranks, blocks up to 256 B: each in its sender's inline lines of the call",
     MCOLL_NEED_PAIR_LINES, NULL},
};
const struct mcoll_coll_algs mcoll__alltoall_algs = {alltoall_algs, MCOLL_A2A_NALGS};
const struct mcoll_coll_algs mcoll__alltoallv_algs = {alltoall_algs, MCOLL_A2A_NALGS};
const struct mcoll_coll_algs mcoll__alltoallw_algs = {alltoall_algs, MCOLL_A2A_NALGS};

static size_t slot_bytes(const struct mcoll_comm *c, int buffers) {
  size_t room = c->chan->shm.area_bytes - mcoll__a2a_header_bytes(c->topo.local_size);
  size_t slot = room / (size_t)buffers / (size_t)(c->topo.local_size - 1);
  return slot / 64 * 64;
}

/* The machine's last-level cache and online CPUs, for the tile. */
static size_t llc;
static int sharing = 1;
static long cpus;

/* Looked up at MPI_Init, not at the first tiled call: the lookup (hwloc, sysconf
 * reading /sys) costs as much as a hundred small calls, and that first call is often an
 * adaptive round's first timed candidate. */
void mcoll__a2a_machine_init(void) {
  if (cpus != 0) return;
  llc = mcoll__llc_bytes(&sharing);
  cpus = sysconf(_SC_NPROCESSORS_ONLN);
}

size_t mcoll__a2a_tile(const struct mcoll_comm *c) {
  if (mcoll__cfg.ALLTOALL_TILE > 0) return (size_t)mcoll__cfg.ALLTOALL_TILE;
  if (cpus == 0) mcoll__a2a_machine_init(); /* (a library used without MPI_Init's hook) */
  /* Ranks copying at once in one cache: those of the node that it can run. */
  size_t ranks = (size_t)c->topo.local_size;
  if (sharing > 0 && ranks > (size_t)sharing) ranks = (size_t)sharing;
  if (cpus > 0 && ranks > (size_t)cpus) ranks = (size_t)cpus;
  size_t tile = (llc ? llc : 8u << 20) / 2 / (ranks * ranks);
  tile = tile / 4096 * 4096;
  return tile < 4096 ? 4096 : tile;
}

static size_t cma_min(void) {
  return mcoll__cfg.ALLTOALL_CMA_MIN > 0 ? (size_t)mcoll__cfg.ALLTOALL_CMA_MIN : 1;
}

void mcoll__a2a_engine_config(const struct mcoll_a2a *a, int alg, struct mcoll_a2a_engine *e) {
  e->cma_min = SIZE_MAX;
  e->cma_frag = SIZE_MAX;
  e->double_buffer = 0;
  e->pair_inline = alg == MCOLL_A2A_PAIR_INLINE;
  /* (pair_inline moves no block through the areas' slots) */
  e->slot_frag = e->pair_inline ? 0 : slot_bytes(a->c, 1);
  switch (alg) {
  case MCOLL_A2A_PAIRWISE_CMA: e->cma_min = cma_min(); break;
  case MCOLL_A2A_TILED_CMA:
    e->cma_min = cma_min();
    e->cma_frag = mcoll__a2a_tile(a->c);
    break;
  case MCOLL_A2A_TILED: {
    size_t tile = mcoll__a2a_tile(a->c), slot = slot_bytes(a->c, 2);
    e->slot_frag = tile < slot ? tile : slot;
    e->double_buffer = 1;
    break;
  }
  default: break;
  }
}

/* Whether Bruck's rounds fit the areas: about half the blocks move per round. */
static int bruck_fits(const struct mcoll_a2a *a) {
  size_t m = (size_t)a->c->topo.local_size;
  return a->block <= (a->c->chan->shm.area_bytes - mcoll__a2a_header_bytes((int)m)) / (m / 2 + 1);
}

/* Depends only on what every rank of the node knows alike: the collective, the
 * block size of alltoall, the node's shape and the environment. Nodes may choose
 * differently: the algorithm only moves blocks inside the node. */
static int choose(const struct mcoll_a2a *a, int *adaptable) {
  const struct mcoll_comm *c = a->c;
  int alg = -1;
  *adaptable = 0;
  /* (a rank alone on its node counts as a pair: it moves no block through the lines) */
  int pair = !mcoll__node_has_peers(c) || mcoll__a2a_pair_inline_fits(a);
  if (mcoll__alg_forced(a->coll) >= 0) {
    struct mcoll_facts facts = mcoll__facts(c, a->uniform ? a->block : 0);
    if (!a->uniform) facts.holds &= ~(MCOLL_NEED_UNIFORM | MCOLL_NEED_BRUCK_FITS);
    else if (mcoll__node_has_peers(c) && !bruck_fits(a)) facts.holds &= ~MCOLL_NEED_BRUCK_FITS;
    if (!pair) facts.holds &= ~MCOLL_NEED_PAIR_LINES;
    alg = mcoll__alg_forced_for(a->coll, &facts);
  }
  /* Two ranks, blocks up to MCOLL_A2A_PAIR_MAX each way: lines that carry their own
   * flags cross the cores each way (alltoall_node.c, pair_inline_exchange). */
  /* The rules, for alltoall's one block size (alltoallv/w decide per block inside
   * pairwise_cma), unless the user set the threshold below. */
  static const enum mcoll_param threshold[] = {MCOLL_PARAM_ALLTOALL_CMA_MIN};
  if (alg < 0 && a->uniform && mcoll__node_has_peers(c) && !mcoll__params_user_set(threshold, 1)) {
    struct mcoll_facts facts = mcoll__facts(c, a->block);
    if (!bruck_fits(a)) facts.holds &= ~MCOLL_NEED_BRUCK_FITS;
    if (!pair) facts.holds &= ~MCOLL_NEED_PAIR_LINES;
    alg = mcoll__rules_pick(a->coll, MCOLL_LEVEL_NODE, &facts, NULL);
    *adaptable = 1;
  }
  /* Where no rule covers the call: the thresholds. */
  if (alg < 0 && mcoll__node_has_peers(c) && pair) alg = MCOLL_A2A_PAIR_INLINE;
  /* Small blocks through the areas, single copy from cma_min(), the crossover measured
   * at 2 and 4 ranks (alltoallv/w decide per block, inside pairwise_cma). */
  if (alg < 0) {
    int large = !a->uniform || a->block >= cma_min();
    if (!large) alg = MCOLL_A2A_SHM_DIRECT;
    else if (c->chan->cma_ok) alg = MCOLL_A2A_PAIRWISE_CMA;
    else alg = a->uniform ? MCOLL_A2A_TILED : MCOLL_A2A_SHM_DIRECT;
  }
  return alg;
}

/* Single copy's system calls are out of reach for small blocks; Bruck's log2(n)
 * rounds move each block several times, and pair_inline is for lines only. From
 * A2A_AREA_REACH, where single copy may run, the two copies through the areas
 * (shm_direct, tiled) are out of reach: twice the bytes moved, and they lost every
 * round there (docs/algorithms.md); with few samples a round that a disturbance hit
 * could keep one for the rest of the calls. */
enum { A2A_CMA_REACH = 2 << 10, A2A_BRUCK_REACH = 4 << 10, A2A_AREA_REACH = 128 << 10 };

/* A blocking alltoall's choice adapts at run time (coll/adapt.h): its block size,
 * the class, is the same on every rank (alltoallv/w's blocks are not, so their
 * classes could differ between ranks: they keep the rules' choice). The facts are
 * those the rules saw, alike on every rank of the node. */
static int adapt(struct mcoll_a2a *a, int alg, struct mcoll_adapt_call *timing) {
  const struct mcoll_comm *c = a->c;
  struct mcoll_facts facts = mcoll__facts(c, a->block);
  if (!bruck_fits(a)) facts.holds &= ~MCOLL_NEED_BRUCK_FITS;
  if (!mcoll__a2a_pair_inline_fits(a)) facts.holds &= ~MCOLL_NEED_PAIR_LINES;
  int areas = a->block < A2A_AREA_REACH || !(facts.holds & MCOLL_NEED_CMA);
  unsigned reach = (areas ? (1u << MCOLL_A2A_SHM_DIRECT) | (1u << MCOLL_A2A_TILED) : 0) |
                   (1u << MCOLL_A2A_PAIR_INLINE) |
                   (a->block <= A2A_BRUCK_REACH ? 1u << MCOLL_A2A_BRUCK : 0) |
                   (a->block >= A2A_CMA_REACH ? (1u << MCOLL_A2A_PAIRWISE_CMA) | (1u << MCOLL_A2A_TILED_CMA) : 0);
  return mcoll__adapt_pick(a->c, a->coll, a->block, alg, &facts, reach, timing);
}

/* The node's blocks and the own block, by alg. */
static int node_part(struct mcoll_a2a *a, int alg) {
  struct mcoll_comm *c = a->c;
  int me = c->rank, engine = mcoll__node_has_peers(c) && alg != MCOLL_A2A_BRUCK;
  /* The node engine copies the own block while its peers catch up. */
  if (!engine && !a->inplace && a->recv[me].bytes)
    memcpy(a->recv[me].ptr, a->send[me].ptr, a->recv[me].bytes);
  if (!mcoll__node_has_peers(c)) return MPI_SUCCESS;
  if (!engine) {
    mcoll__a2a_node_bruck(a);
    return MPI_SUCCESS;
  }
  struct mcoll_a2a_engine e;
  mcoll__a2a_engine_config(a, alg, &e);
  return mcoll__a2a_node_engine(a, &e);
}

int mcoll__a2a_run(struct mcoll_a2a *a) {
  struct mcoll_comm *c = a->c;
  /* alltoall: every block has a->block bytes, the key (alltoallv/w: every count) */
  int keyed = a->coll == MCOLL_COLL_ALLTOALL && a->uniform;
  unsigned stamp = 0;
  const struct mcoll_settled *s = keyed ? mcoll__settled_take(c, a->coll, a->block, 0, &stamp) : NULL;
  if (s) return node_part(a, s->alg); /* (coll/settled.h: one node) */
  int adaptable;
  int alg = choose(a, &adaptable), nreq = 0, err = MPI_SUCCESS;
  struct mcoll_adapt_call timing = {.cls = NULL};
  if (adaptable && a->block > 0) alg = adapt(a, alg, &timing);
  mcoll__count_alg(a->coll, alg);
  int inter = c->topo.nnodes > 1 ? mcoll__a2a_inter_choose(a) : -1;
  if (a->uniform && a->block == 0) return MPI_SUCCESS;
  if (keyed) mcoll__settled_offer(c, a->coll, stamp, a->block, 0, &timing, alg, alg, 0);
  MPI_Request local_reqs[32], *reqs = local_reqs;
  if (c->topo.nnodes > 1) {
    size_t need = 2 * (size_t)(c->size - c->topo.local_size);
    if (need > sizeof local_reqs / sizeof local_reqs[0]) {
      reqs = malloc(sizeof *reqs * need);
      if (!reqs) return MPI_ERR_NO_MEM;
    }
    err = mcoll__a2a_inter_start(a, inter, reqs, &nreq);
  }
  int node_err = node_part(a, alg);
  if (err == MPI_SUCCESS) err = node_err;
  for (int i = 0; i < nreq; i++) {
    int wait_err = mcoll__host_wait_one(&reqs[i], MPI_STATUS_IGNORE);
    if (err == MPI_SUCCESS) err = wait_err;
  }
  if (reqs != local_reqs) free(reqs);
  mcoll__adapt_done(&timing);
  return err;
}
