/* Barriers, instances of the MAHCAF template, with a dissemination barrier among
 * node leaders in between their intra-node phases.
 *
 * hier (the single-queue barrier, docs/architecture.md): gather up the node's levels
 * and scatter back down through one queue of cache-line entries (a rank's arrive and
 * release share its line).
 *
 * counter: every rank adds one to a shared count; on a single node the last to
 * arrive releases everyone. Alone it is the faster one when ranks share cores (the
 * tree needs each parent scheduled in turn to pass arrivals up and releases down),
 * but the rules keep hier: the last to arrive leaves first, and after a rooted call
 * that is the rank that received, which then waits a scheduler round for the
 * sender in the next call (docs/performance.md). */
#include "task/host.h"
#include "coll/rules.h"
#include "coll/barrier/barrier.h"
#include "coll/facts.h"
#include "coll/tags.h"
#include "hier/hier.h"

const struct mcoll_coll_algs mcoll__barrier_algs = {
    (const struct mcoll_alg_info[]){
        {"hier", "tree over the node's levels in shared memory; dissemination among nodes", 0,
         NULL},
        {"counter", "shared arrival count, the last to arrive releases (nodes with more ranks "
                    "than cores); dissemination among nodes", 0, NULL},
    },
    MCOLL_BARRIER_NALGS};

const struct mcoll_coll_algs mcoll__barrier_inter_algs = {
    (const struct mcoll_alg_info[]){
        {"dissemination", "the nodes' leaders exchange empty messages at distance 1, 2, 4 ...", 0,
         NULL},
    },
    1};

/* A barrier's sequence number, taken when it begins (the call's own from then on). */
static uint32_t seq_of(const struct mcoll_hier_call *call) { return *(const uint32_t *)call->args; }

/* How the tree's steps wait for a flag: 1 once it reached the target, 0 when the
 * wait gave up (then the step stops where it is; run again with the same sequence
 * number, it picks up there, since each flag is set to it by one rank only). */
typedef int (*tree_wait_fn)(const struct mcoll_shm *shm, mcoll_flag *flag, uint32_t target);

/* The blocking call's and a task's wait: to the end. */
static int wait_to_end(const struct mcoll_shm *shm, mcoll_flag *flag, uint32_t target) {
  mcoll__flag_wait(shm, flag, target);
  return 1;
}

/* Children arrive (finest level first), then this rank arrives at its parent and
 * waits to be released. Inlined with a constant wait: no call through a pointer. */
__attribute__((always_inline)) static inline int tree_gather_up(const struct mcoll_comm *c,
                                                                uint32_t seq, tree_wait_fn wait) {
  const struct mcoll_topo *t = &c->topo;
  const struct mcoll_shm *shm = &c->chan->shm;
  for (int i = 0; i < t->nchildren; i++)
    if (!wait(shm, &shm->sync[t->children[i]].arrive, seq)) return 0;
  if (t->barrier_parent >= 0) {
    mcoll__flag_set(shm, &shm->sync[t->local_rank].arrive, seq);
    if (!wait(shm, &shm->sync[t->local_rank].release, seq)) return 0;
  }
  return 1;
}

/* Coarsest children first: they have the most ranks still waiting below them. */
__attribute__((always_inline)) static inline void tree_release_down(const struct mcoll_comm *c,
                                                                    uint32_t seq) {
  const struct mcoll_topo *t = &c->topo;
  for (int i = t->nchildren - 1; i >= 0; i--)
    mcoll__flag_set(&c->chan->shm, &c->chan->shm.sync[t->children[i]].release, seq);
}

static int gather_up(struct mcoll_hier_call *call, size_t lo, size_t hi) {
  (void)lo, (void)hi;
  if (mcoll__node_has_peers(call->c)) tree_gather_up(call->c, seq_of(call), wait_to_end);
  return MPI_SUCCESS;
}

static int dissemination(struct mcoll_hier_call *call, size_t lo, size_t hi) {
  (void)lo, (void)hi;
  struct mcoll_comm *c = call->c;
  const struct mcoll_topo *t = &c->topo;
  for (int dist = 1; dist < t->nnodes; dist <<= 1) {
    int to = t->node_leader[(t->node + dist) % t->nnodes];
    int from = t->node_leader[(t->node - dist + t->nnodes) % t->nnodes];
    int err = mcoll__host_sendrecv(NULL, 0, MPI_BYTE, to, MCOLL_TAG_BARRIER, NULL, 0, MPI_BYTE, from,
                            MCOLL_TAG_BARRIER, c->p2p, MPI_STATUS_IGNORE);
    if (err != MPI_SUCCESS) return err;
  }
  return MPI_SUCCESS;
}

static int release_down(struct mcoll_hier_call *call, size_t lo, size_t hi) {
  (void)lo, (void)hi;
  tree_release_down(call->c, seq_of(call));
  return MPI_SUCCESS;
}

static const struct mcoll_hier_steps barrier_steps = {gather_up, dissemination, release_down,
                                                       NULL};

/* Barrier k is complete when the count reaches k times the node's ranks: no rank
 * adds for k+1 before k is released, so the count never runs ahead. Between
 * nodes the leader waits for the count, and releases after the dissemination. */
static int counter_arrive(struct mcoll_hier_call *call, size_t lo, size_t hi) {
  (void)lo, (void)hi;
  struct mcoll_comm *c = call->c;
  const struct mcoll_shm *shm = &c->chan->shm;
  if (!mcoll__node_has_peers(c)) return MPI_SUCCESS;
  uint32_t seq = seq_of(call), all = seq * (uint32_t)shm->local_size;
  uint32_t arrived = mcoll__flag_add(shm, &shm->hdr->barrier_arrived, 1);
  if (c->topo.nnodes > 1 && shm->local_rank == call->leader)
    mcoll__flag_wait(shm, &shm->hdr->barrier_arrived, all);
  else if (c->topo.nnodes == 1 && arrived == all)
    mcoll__flag_set(shm, &shm->hdr->barrier_released, seq);
  else
    mcoll__flag_wait(shm, &shm->hdr->barrier_released, seq);
  return MPI_SUCCESS;
}

static int counter_release(struct mcoll_hier_call *call, size_t lo, size_t hi) {
  (void)lo, (void)hi;
  struct mcoll_comm *c = call->c;
  if (c->topo.nnodes > 1 && c->chan->shm.local_rank == call->leader && mcoll__node_has_peers(c))
    mcoll__flag_set(&c->chan->shm, &c->chan->shm.hdr->barrier_released, seq_of(call));
  return MPI_SUCCESS;
}

static const struct mcoll_hier_steps counter_steps = {counter_arrive, dissemination,
                                                      counter_release, NULL};

/* The choice depends only on what every rank of the node sees alike; each kind
 * counts its own barriers (the bench switches kinds between blocks). */
__attribute__((always_inline)) static inline int barrier_alg(struct mcoll_comm *c) {
  int alg = -1;
  if (mcoll__alg_forced(MCOLL_COLL_BARRIER) >= 0) {
    struct mcoll_facts facts = mcoll__facts(c, 0);
    alg = mcoll__alg_forced_for(MCOLL_COLL_BARRIER, &facts);
  }
  if (alg < 0) {
    struct mcoll_facts facts = mcoll__facts(c, 0);
    alg = mcoll__rules_pick(MCOLL_COLL_BARRIER, MCOLL_LEVEL_NODE, &facts, NULL);
  }
  if (alg < 0) alg = c->chan->shm.oversubscribed ? MCOLL_BARRIER_COUNTER : MCOLL_BARRIER_HIER;
  return alg;
}

int mcoll__barrier(struct mcoll_comm *c) {
  int alg = barrier_alg(c);
  mcoll__count_alg(MCOLL_COLL_BARRIER, alg);
  mcoll__inter_single(c, MCOLL_COLL_BARRIER, 0);
  uint32_t seq = alg == MCOLL_BARRIER_COUNTER ? ++c->chan->barrier_counter_seq
                                              : ++c->chan->barrier_seq;
  struct mcoll_hier_call call = {
      .c = c, .steps = alg == MCOLL_BARRIER_COUNTER ? &counter_steps : &barrier_steps, .leader = 0,
      .args = &seq};
  return mcoll__hier_run(&call);
}

/* The tree barrier on one node, its blocking call's steps with every wait cut to
 * flag_wait's spin (mcoll__flag_poll). The task that finishes a barrier begun here
 * runs them all again with the same sequence number. */
int mcoll__barrier_try(struct mcoll_comm *c, uint32_t *seq) {
  if (c->topo.nnodes != 1 || barrier_alg(c) != MCOLL_BARRIER_HIER) return -1;
  mcoll__count_alg(MCOLL_COLL_BARRIER, MCOLL_BARRIER_HIER);
  *seq = ++c->chan->barrier_seq;
  if (!mcoll__node_has_peers(c)) return 1;
  if (!tree_gather_up(c, *seq, mcoll__flag_poll)) return 0;
  tree_release_down(c, *seq);
  mcoll__count_try(MCOLL_COLL_BARRIER);
  return 1;
}

int mcoll__barrier_finish(struct mcoll_comm *c, uint32_t seq) {
  struct mcoll_hier_call call = {.c = c, .steps = &barrier_steps, .leader = 0, .args = &seq};
  return mcoll__hier_run(&call);
}
