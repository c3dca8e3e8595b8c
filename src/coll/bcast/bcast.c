/* Bcast: algorithm table, choice, and its steps in the MAHCAF template: the
 * inter-node step among node sources, then the intra-node step, piece by piece. */
#include "coll/bcast/bcast.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/facts.h"
#include "coll/move.h"
#include "coll/rules.h"
#include "core/config.h"
#include "hier/hier.h"
#include "node/claim.h"
#include "node/slot.h"
#include "shm/call.h"

/* A bcast that brings fewer bytes than a rank expects: MPICH reports it, Open MPI
 * does not (the bytes that came are in the buffer either way). */
#ifdef MPICH_VERSION
#define MCOLL_BCAST_SHORTER_ERROR MPI_ERR_OTHER
#else
#define MCOLL_BCAST_SHORTER_ERROR MPI_SUCCESS
#endif

const struct mcoll_coll_algs mcoll__bcast_algs = {
    (const struct mcoll_alg_info[]){
        {"shm_tree", "small: down a tree over the node's levels through the ranks' areas", 0, NULL},
        {"shm_pipeline", "two copies through NUMA-placed slots, k readers per slot, pipelined", 0,
         NULL},
        {"cma", "single copy: readers read the source's buffer with process_vm_readv",
         MCOLL_NEED_CMA, NULL},
        {"shm_slot", "small: one slot of the source's area (the data in the flag's line up to 56 B), calls overlap",
         MCOLL_NEED_SLOT, NULL},
    },
    MCOLL_BCAST_NALGS};

/* Largest bcast that goes through one area slot; 0 = none. */
static size_t slot_max(const struct mcoll_comm *c) {
  size_t slot = mcoll__slot_bytes(&c->chan->shm), max = (size_t)mcoll__cfg.BCAST_SLOT_MAX;
  if (mcoll__cfg.BCAST_SLOT_MAX <= 0) return 0;
  return max < slot ? max : slot;
}

/* Whether the whole call fits one slot of an area and goes as one piece. */
static int fits_slot(const struct mcoll_comm *c, size_t bytes) {
  return bytes <= slot_max(c) && (c->topo.nnodes == 1 || bytes <= (size_t)mcoll__cfg.INTER_PIECE);
}

/* bcast's rule for single copy by size: from BCAST_CMA_MIN (up to BCAST_CMA_MAX when
 * honour_max), on nodes of at most BCAST_CMA_RANKS ranks where CMA works. */
static int cma_by_size(const struct mcoll_comm *c, size_t bytes, int honour_max) {
  return c->chan->cma_ok && mcoll__cfg.BCAST_CMA_MIN > 0 && bytes >= (size_t)mcoll__cfg.BCAST_CMA_MIN &&
         (!honour_max || mcoll__cfg.BCAST_CMA_MAX == 0 || bytes < (size_t)mcoll__cfg.BCAST_CMA_MAX) &&
         c->topo.local_size <= mcoll__cfg.BCAST_CMA_RANKS;
}

static int choose_by_thresholds(const struct mcoll_comm *c, size_t bytes) {
  /* Single copy from the root's buffer beats the ring at mid sizes, markedly when a
   * barrier follows each call (OSU's latency), where the ring falls behind native;
   * the ring keeps small and large calls (MCOLL_BCAST_CMA_MIN/MAX in
   * docs/performance.md). Measured on 2-rank nodes only: larger nodes keep the ring. */
  if (cma_by_size(c, bytes, 1)) return MCOLL_BCAST_CMA;
  if (c->topo.nlevels > 0 && bytes <= (size_t)mcoll__cfg.BCAST_TREE_MAX)
    return MCOLL_BCAST_SHM_TREE;
  /* Small calls: one area slot, whose lines the next calls follow (the ring's
   * slots lie a chunk apart: cold pages and lines on a fresh communicator).
   * Measured with a core per rank only: oversubscribed nodes keep the ring. */
  if (fits_slot(c, bytes) && !c->chan->shm.oversubscribed) return MCOLL_BCAST_SHM_SLOT;
  return MCOLL_BCAST_SHM_PIPELINE;
}

/* *adaptable: the choice came from the rules or the thresholds' defaults, not from a
 * forced algorithm or a threshold the user set. */
static int choose(const struct mcoll_comm *c, size_t bytes, int *adaptable) {
  *adaptable = 0;
  if (mcoll__alg_forced(MCOLL_COLL_BCAST) >= 0) {
    struct mcoll_facts facts = mcoll__facts(c, bytes);
    if (!fits_slot(c, bytes)) facts.holds &= ~MCOLL_NEED_SLOT;
    int forced = mcoll__alg_forced_for(MCOLL_COLL_BCAST, &facts);
    if (forced >= 0) return forced;
  }
  /* The rules, unless the user set one of the thresholds below. */
  static const enum mcoll_param thresholds[] = {MCOLL_PARAM_BCAST_TREE_MAX, MCOLL_PARAM_BCAST_SLOT_MAX,
                                                MCOLL_PARAM_BCAST_CMA_MIN, MCOLL_PARAM_BCAST_CMA_MAX,
                                                MCOLL_PARAM_BCAST_CMA_RANKS};
  if (mcoll__params_user_set(thresholds, 5)) return choose_by_thresholds(c, bytes);
  *adaptable = 1;
  struct mcoll_facts facts = mcoll__facts(c, bytes);
  if (!fits_slot(c, bytes)) facts.holds &= ~MCOLL_NEED_SLOT;
  int ruled = mcoll__rules_pick(MCOLL_COLL_BCAST, MCOLL_LEVEL_NODE, &facts, NULL);
  return ruled >= 0 ? ruled : choose_by_thresholds(c, bytes);
}

/* Single copy's system calls are out of reach below a few KiB. The tree on a node
 * without levels (every reader copies from the source's area) wins at a few KiB and
 * loses by several times from tens of KiB (docs/performance.md): out of reach there,
 * so that a round costs little. */
enum { BCAST_CMA_REACH = 2 << 10, BCAST_FLAT_TREE_REACH = 16 << 10 };

/* as_task: the choice a task makes (coll/adapt.h: mcoll__adapt_kept), for the try
 * on the caller's stack, which must run what the task would. Not counted. */
__attribute__((always_inline)) static inline int select_alg(struct mcoll_comm *c, size_t bytes,
                                                            struct mcoll_adapt_call *timing,
                                                            int as_task) {
  int adaptable;
  int alg = choose(c, bytes, &adaptable);
  timing->cls = NULL;
  if (adaptable) {
    struct mcoll_facts facts = mcoll__facts(c, bytes);
    if (!fits_slot(c, bytes)) facts.holds &= ~MCOLL_NEED_SLOT;
    unsigned reach = (1u << MCOLL_BCAST_SHM_PIPELINE) | (1u << MCOLL_BCAST_SHM_SLOT) |
                     (bytes >= BCAST_CMA_REACH ? 1u << MCOLL_BCAST_CMA : 0) |
                     (c->topo.nlevels > 0 || bytes <= BCAST_FLAT_TREE_REACH ? 1u << MCOLL_BCAST_SHM_TREE : 0);
    alg = as_task ? mcoll__adapt_kept(c, MCOLL_COLL_BCAST, bytes, alg, &facts)
                  : mcoll__adapt_pick(c, MCOLL_COLL_BCAST, bytes, alg, &facts, reach, timing);
  }
  return alg;
}

int mcoll__bcast_select(struct mcoll_comm *c, size_t bytes, struct mcoll_adapt_call *timing) {
  int alg = select_alg(c, bytes, timing, 0);
  mcoll__count_alg(MCOLL_COLL_BCAST, alg);
  return alg;
}

/* The CP bcast (first_arrival) in place of the fixed leader, on nodes sharing one
 * kernel's cores (the caller checks), under Open MPI: the root's flat sends reach
 * the leaders that arrived without a relay through a tree node that must first get
 * a core. Nodes of one rank: from four nodes and pieces of INTER_SAG_MIN, at three
 * from pieces of twice that (at INTER_SAG_MIN itself some jobs lost); nodes of several
 * ranks: from four nodes, pieces from INTER_SAG_MIN up to a whole piece (INTER_PIECE;
 * whole pieces won by less). Under MPICH the fixed leader's data goes eagerly and
 * waits in a late leader's socket (bench/records/net16). */
static int first_arrival_pays(const struct mcoll_comm *c, size_t piece) {
#ifdef OPEN_MPI
  size_t sag_min = (size_t)mcoll__cfg.INTER_SAG_MIN, whole = (size_t)mcoll__cfg.INTER_PIECE;
  int nodes = c->topo.nnodes;
  if (c->size == nodes) return (nodes >= 4 && piece >= sag_min) || (nodes == 3 && piece >= 2 * sag_min);
  return nodes >= 4 && piece >= sag_min && piece < whole;
#else
  (void)c, (void)piece;
  return 0;
#endif
}

int mcoll__bcast_inter_select(const struct mcoll_comm *c, size_t piece) {
  /* van de Geijn moves 2(p-1)/p of a piece per leader where the tree moves lg p
   * whole pieces through the root: worth its p-1 extra steps from three nodes on. */
  int sag = c->topo.nnodes >= 3 && piece >= (size_t)mcoll__cfg.INTER_SAG_MIN;
  struct mcoll_facts facts = mcoll__facts(c, piece);
  static const enum mcoll_param threshold[] = {MCOLL_PARAM_INTER_SAG_MIN};
  int preferred = mcoll__params_user_set(threshold, 1)
                      ? -1
                      : mcoll__rules_pick(MCOLL_COLL_BCAST, MCOLL_LEVEL_INTER, &facts, NULL);
  if (preferred < 0) preferred = sag ? MCOLL_BCAST_INTER_SAG : MCOLL_BCAST_INTER_BINOMIAL;
  /* Nodes sharing one kernel's cores: every dependent step between them waits for a
   * core, so the tree's fewer steps beat van de Geijn's at every size (the model's
   * shared_step_wait_us); a rules file of the user's still decides. */
  int shared = !strcmp(mcoll__rules_source(), "built-in") && !mcoll__params_user_set(threshold, 1) &&
               mcoll__topo_nodes_share_cores(&c->topo);
  if (preferred == MCOLL_BCAST_INTER_SAG && shared) preferred = MCOLL_BCAST_INTER_BINOMIAL;
  if (shared && first_arrival_pays(c, piece)) preferred = MCOLL_BCAST_INTER_FIRST;
  return mcoll__inter_select(MCOLL_COLL_BCAST, &facts, preferred);
}

const struct mcoll_bcast_intra *mcoll__bcast_down_engine(const struct mcoll_comm *c, size_t bytes,
                                                         int force_cma) {
  int cma = c->chan->cma_ok && (force_cma || cma_by_size(c, bytes, 0));
  return cma ? &mcoll__bcast_cma : &mcoll__bcast_shm_pipeline;
}

static const struct mcoll_bcast_intra *const intra_steps[MCOLL_BCAST_NALGS] = {
    [MCOLL_BCAST_SHM_TREE] = &mcoll__bcast_shm_tree,
    [MCOLL_BCAST_SHM_PIPELINE] = &mcoll__bcast_shm_pipeline,
    [MCOLL_BCAST_CMA] = &mcoll__bcast_cma,
    [MCOLL_BCAST_SHM_SLOT] = &mcoll__bcast_shm_slot,
};

static int inter_step(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  struct mcoll_bcast_call *call = hc->args;
  if (call->inter_alg == MCOLL_BCAST_INTER_FIRST) {
    /* The root's node needs nothing from the other nodes: publish to it before
     * waiting for their announcements, or its ranks wait for the latest node's first
     * arrival (one piece: later pieces' publishing would run on the companion). */
    if (call->c->rank == call->root && lo == 0 && hi == call->bytes &&
        mcoll__node_has_peers(call->c)) {
      call->intra->publish(call, lo, hi);
      call->published = 1;
    }
    return mcoll__bcast_first_arrival(call, lo, hi);
  }
  if (call->inter_alg == MCOLL_BCAST_INTER_PUSH) return mcoll__bcast_push_send(call, lo, hi);
  return mcoll__bcast_between_nodes(call->c, call->buf, lo, hi, call->root, call->inter_alg);
}

/* An erroneous program: the source broadcasts source_bytes where this rank expects
 * call->bytes. Read the source's bytes by its protocol (engine intra, so that the
 * node's counters stay in step) into scratch memory, keep what fits, and report what
 * the host MPI reports: MPI_ERR_TRUNCATE when more came than fits. */
static void read_as_sent(struct mcoll_bcast_call *call, const struct mcoll_bcast_intra *intra,
                         size_t source_bytes, int own_call) {
  char *scratch = malloc(source_bytes ? source_bytes : 1);
  if (!scratch) {
    fprintf(stderr, "mcoll: bcast: out of memory for the %zu bytes of a mismatched bcast; aborting\n",
            source_bytes);
    PMPI_Abort(MPI_COMM_WORLD, 1);
  }
  struct mcoll_bcast_call as_sent = *call;
  as_sent.buf = scratch;
  as_sent.bytes = source_bytes;
  as_sent.intra = intra;
  /* own_call: another engine than the call's, run from its begin to its finish */
  if (own_call && intra->begin) intra->begin(&as_sent);
  intra->read(&as_sent, 0, source_bytes);
  if (own_call) intra->finish(&as_sent);
  memcpy(call->buf, scratch, source_bytes < call->bytes ? source_bytes : call->bytes);
  free(scratch);
  /* (equal sizes: only the engines differed, e.g. ranks forced differently) */
  call->error = source_bytes > call->bytes   ? MPI_ERR_TRUNCATE
                : source_bytes < call->bytes ? MCOLL_BCAST_SHORTER_ERROR
                                             : MPI_SUCCESS;
}

static void read_mismatched(struct mcoll_bcast_call *call, size_t source_bytes) {
  read_as_sent(call, call->intra, source_bytes, 0);
  call->bytes = source_bytes; /* finish() accounts for the chunks the source sent */
}

/* The call's entry of what its source sends. */
static _Atomic uint64_t *bcast_sent(const struct mcoll_bcast_call *call) {
  size_t entry = (size_t)call->source * MCOLL_CLAIMS + call->seq % MCOLL_CLAIMS;
  return &call->c->chan->shm.bcast_sent[2 * entry];
}

/* The engine of a bcast (its index in intra_steps), or -1. */
static int engine_of(const struct mcoll_bcast_intra *intra) {
  for (int alg = 0; alg < MCOLL_BCAST_NALGS; alg++)
    if (intra_steps[alg] == intra) return alg;
  return -1;
}

void mcoll__bcast_call_begin(struct mcoll_bcast_call *call) {
  if (!mcoll__node_has_peers(call->c)) return;
  call->seq = ++call->c->chan->bcast_seq;
  if (call->intra->begin) call->intra->begin(call);
  if (call->check_bytes && call->c->topo.local_rank == call->source) {
    /* For readers that wait in another engine (strayed): two stores to a line of
     * this rank's, which they read only once their wait has gone past its spin. */
    _Atomic uint64_t *sent = bcast_sent(call);
    atomic_store_explicit(&sent[0], call->bytes, memory_order_relaxed);
    atomic_store_explicit(&sent[1], (uint64_t)call->seq << 32 | (uint32_t)(engine_of(call->intra) + 1),
                          memory_order_release);
  }
}

/* A reader's wait past its spin: whether its source is in this call with another
 * engine (sizes that straddle an algorithm's edge: then the flags it waits for
 * never come); *alg and *bytes: the source's. */
static int source_engine(const struct mcoll_bcast_call *call, int *alg, size_t *bytes) {
  const _Atomic uint64_t *sent = bcast_sent(call);
  uint64_t word = atomic_load_explicit(&sent[1], memory_order_acquire);
  if ((uint32_t)(word >> 32) != call->seq) return 0;
  *alg = (int)(uint32_t)word - 1;
  *bytes = (size_t)atomic_load_explicit(&sent[0], memory_order_relaxed);
  return *alg >= 0 && *alg < MCOLL_BCAST_NALGS && intra_steps[*alg] != call->intra;
}

static int strayed(const struct mcoll_call *guard) {
  int alg;
  size_t bytes;
  return source_engine(guard->strayed_arg, &alg, &bytes);
}

/* After a strayed reader's escape: reads the source's bytes by the source's engine
 * (as read_mismatched does within one engine). */
__attribute__((noinline, cold)) static void read_by_source_engine(struct mcoll_bcast_call *call) {
  int alg = 0;
  size_t source_bytes = 0;
  source_engine(call, &alg, &source_bytes);
  call->intra->abandon(call);
  read_as_sent(call, intra_steps[alg], source_bytes, 1);
}

static int intra_step(struct mcoll_hier_call *hc, size_t lo, size_t hi) {
  struct mcoll_bcast_call *call = hc->args;
  if (!mcoll__node_has_peers(call->c)) return MPI_SUCCESS;
  if (call->c->topo.local_rank == call->source) {
    if (!call->published) call->intra->publish(call, lo, hi);
  } else {
    size_t source_bytes = call->intra->read(call, lo, hi);
    if (source_bytes != call->bytes) read_mismatched(call, source_bytes);
  }
  return MPI_SUCCESS;
}

static int finish_step(struct mcoll_hier_call *hc) {
  struct mcoll_bcast_call *call = hc->args;
  if (mcoll__node_has_peers(call->c)) call->intra->finish(call);
  return MPI_SUCCESS;
}

static const struct mcoll_hier_steps bcast_steps = {NULL, inter_step, intra_step, finish_step};

/* The call once its algorithm is chosen. */
static int bcast_by(struct mcoll_comm *c, void *buf, size_t bytes, int root, int alg,
                    struct mcoll_adapt_call timing) {
  const struct mcoll_topo *t = &c->topo;
  if (bytes == 0 || c->size == 1) return MPI_SUCCESS;

  struct mcoll_bcast_call call = {
      .c = c, .buf = buf, .bytes = bytes, .root = root,
      .source = t->node_of[root] == t->node ? mcoll__local_index(t, root) : 0,
      .intra = intra_steps[alg], .check_bytes = t->nnodes == 1, .error = MPI_SUCCESS};
  struct mcoll_hier_call hc = {.c = c, .steps = &bcast_steps, .bytes = bytes,
                               .piece = t->nnodes > 1 ? (size_t)mcoll__cfg.INTER_PIECE : 0,
                               .leader = call.source, .args = &call, .overlap = 1};
  if (t->nnodes > 1) call.inter_alg = mcoll__bcast_inter_select(c, bytes < hc.piece ? bytes : hc.piece);
  /* push: away from the root's node every rank receives its own copy; no node step */
  if (call.inter_alg == MCOLL_BCAST_INTER_PUSH && t->nnodes > 1 && t->node_of[root] != t->node)
    return mcoll__bcast_push_receive(c, buf, bytes, hc.piece, root);
  if (call.inter_alg == MCOLL_BCAST_INTER_FIRST && t->nnodes > 1) {
    /* The CP bcast: away from the root's node, the first rank to arrive leads. */
    call.parity = c->first_arrival_calls++ & 1;
    if (t->node_of[root] != t->node && mcoll__node_has_peers(c)) {
      call.source = hc.leader = mcoll__claim_first(&c->chan->shm, c->chan->bcast_seq + 1);
      if (call.source != 0) mcoll__count_other_leader(MCOLL_COLL_BCAST);
    }
  }
  mcoll__bcast_call_begin(&call);
  /* One node: a reader whose source went by another engine leaves its wait (the
   * guard) and reads by the source's. */
  struct mcoll_call guard;
  int guarded = call.check_bytes && call.intra->abandon && mcoll__node_has_peers(c) &&
                t->local_rank != call.source && !mcoll__call_current;
  if (guarded) {
    mcoll__call_enter(&guard, &c->chan->shm, call.seq, 0);
    guard.strayed = strayed;
    guard.strayed_arg = &call;
    if (setjmp(guard.escape) != 0) {
      mcoll__call_leave();
      read_by_source_engine(&call);
      if (call.leaders) free(call.leaders);
      return call.error;
    }
  }
  int err = mcoll__hier_run(&hc);
  if (guarded) mcoll__call_leave();
  if (call.leaders) free(call.leaders); /* (free is interposed under T-NBC: not on the hot path) */
  mcoll__adapt_done(&timing);
  return err != MPI_SUCCESS ? err : call.error;
}

int mcoll__bcast(struct mcoll_comm *c, void *buf, size_t bytes, int root) {
  struct mcoll_adapt_call timing;
  int alg = mcoll__bcast_select(c, bytes, &timing);
  return bcast_by(c, buf, bytes, root, alg, timing);
}

/* Whether a slot bcast would run to its end now without waiting: the source's slot
 * is free, a reader's data is in, of its size (within flag_wait's spin). Nothing
 * is taken: the generation is the one the call will take. */
static int slot_ready(struct mcoll_comm *c, size_t bytes, int source) {
  struct mcoll_channel *ch = c->chan;
  const struct mcoll_shm *shm = &ch->shm;
  uint32_t gen = ch->area_gen + 1;
  if (shm->local_rank != source) {
    struct mcoll_inline_line *line = mcoll__inline_line(shm, source, gen);
    return mcoll__flag_poll(shm, &line->stamp, gen) && line->len == bytes;
  }
  struct mcoll_slot_run run = ch->area_slots; /* (a copy: the call begins the real one) */
  uint32_t lag = mcoll__slot_begin(&run, gen);
  return mcoll__slot_poll_free(shm, &run, gen, lag);
}

int mcoll__bcast_try(struct mcoll_comm *c, void *buf, size_t bytes, int root, int *err) {
  const struct mcoll_topo *t = &c->topo;
  if (t->nnodes != 1 || bytes == 0 || !mcoll__node_has_peers(c)) return -2;
  struct mcoll_adapt_call timing;
  int alg = select_alg(c, bytes, &timing, 1);
  int source = mcoll__local_index(t, root);
  if (alg != MCOLL_BCAST_SHM_SLOT && alg != MCOLL_BCAST_SHM_TREE) return -2;
  int ready = alg == MCOLL_BCAST_SHM_SLOT ? slot_ready(c, bytes, source)
                                          : mcoll__bcast_shm_tree_ready(c, bytes, source);
  if (!ready) return -1;
  mcoll__count_alg(MCOLL_COLL_BCAST, alg);
  mcoll__count_try(MCOLL_COLL_BCAST);
  *err = bcast_by(c, buf, bytes, root, alg, timing);
  return 1;
}
