/* How one rank's block moves inside a node, for the gather family: through the
 * owner's area (node/area.h; two copies, chunked when the block exceeds the area),
 * or by a single copy (CMA) straight from the owner's buffer. The choice depends
 * only on the block's length, which both its owner and its reader know. */
#ifndef MCOLL_MOVE_H
#define MCOLL_MOVE_H

#include <stdio.h>
#include <string.h>

#include "coll/adapt.h"
#include "coll/blocks.h"
#include "coll/facts.h"
#include "coll/rules.h"
#include "core/config.h"
#include "comm/context.h"
#include "node/area.h"
#include "node/copy.h"
#include "node/peer.h"
#include "node/slot.h"
#include "shm/call.h"

/* Also the algorithm indices of allgather(v), gather(v) and scatter(v). gatherv and
 * scatterv have a third, MCOLL_MOVE_SLOT: the one-generation protocol that unforced
 * calls run when single copy is on (each block in one slot of its owner's area, larger
 * ones by single copy), which forced `area` does not (it runs the whole-area
 * protocol); as an algorithm of its own the adaptive round can time the two against
 * each other, since which one wins depends on the block size and the day. */
enum mcoll_move { MCOLL_MOVE_AREA, MCOLL_MOVE_CMA, MCOLL_MOVE_NALGS };
enum { MCOLL_MOVE_SLOT = MCOLL_MOVE_NALGS, MCOLL_MOVE_V_NALGS };

#define MCOLL_MOVE_ALG_INFO                                                            \
  {"area", "two copies through the per-rank areas of the node segment, chunked", 0, NULL}, \
  {"cma", "single copy from the owner's buffer (process_vm_readv), bounded readers",       \
   MCOLL_NEED_CMA, NULL}
#define MCOLL_MOVE_V_ALG_INFO                                                                \
  MCOLL_MOVE_ALG_INFO,                                                                       \
  {"slot", "one generation: each block in a slot of its owner's area, larger ones by single " \
           "copy", MCOLL_NEED_CMA, NULL}

/* The rules' starting point for gatherv/scatterv blocks that go through the areas:
 * the slot protocol for blocks that fit the slot's inline line (MCOLL_INLINE_MAX: the
 * reader polls the line itself, no posted flag), the whole-area protocol above
 * (docs/algorithms.md). */
static inline int mcoll__move_slot_start(size_t len) { return len <= MCOLL_INLINE_MAX; }

/* The single-copy threshold in force for a collective whose own is cma_min: on a
 * node of two ranks MCOLL_PAIR_CMA_MIN where that is lower. There every block an
 * area carries is written by one core and read by the other, so each call moves all
 * its lines across the cores; single copy reads the owner's buffer instead, which
 * its reader often still holds in cache (MCOLL_PAIR_CMA_MIN in docs/performance.md;
 * below it the areas win back to back). */
static inline size_t mcoll__move_cma_min(const struct mcoll_comm *c, size_t cma_min) {
  size_t pair = mcoll__cfg.PAIR_CMA_MIN > 0 ? (size_t)mcoll__cfg.PAIR_CMA_MIN : 0;
  if (c->topo.local_size <= 2 && pair > 0 && pair < cma_min) return pair;
  return cma_min;
}

/* The block size from which a call of coll moves blocks by single copy, decided once
 * per call: the rules' crossover where they cover the node (mcoll__rules_threshold),
 * unless the user set the collective's threshold `param` or MCOLL_PAIR_CMA_MIN; else
 * the parameter, with mcoll__move_cma_min. */
static inline size_t mcoll__move_threshold(struct mcoll_comm *c, enum mcoll_coll coll,
                                           enum mcoll_param param) {
  _Static_assert((int)MCOLL_NCOLLS <= (int)MCOLL_CHOICE_SLOTS, "a choice slot per collective");
  struct mcoll_choice *kept = &c->choice[coll]; /* it depends on the communicator only */
  if (kept->epoch == mcoll__cfg.epoch) return kept->value;
  const enum mcoll_param params[] = {param, MCOLL_PARAM_PAIR_CMA_MIN};
  size_t from = 0;
  int covered = 0;
  if (!mcoll__params_user_set(params, 2)) {
    struct mcoll_facts facts = mcoll__facts(c, 0);
    from = mcoll__rules_threshold(coll, &facts, MCOLL_MOVE_CMA, &covered);
  }
  kept->value = covered ? from : mcoll__move_cma_min(c, (size_t)mcoll__cfg_param(param));
  kept->epoch = mcoll__cfg.epoch;
  return kept->value;
}

/* forced: MCOLL_MOVE_* or -1 (by length: single copy from cma_min, the call's
 * mcoll__move_threshold). */
static inline enum mcoll_move mcoll__move_of(const struct mcoll_comm *c, size_t len, int forced,
                                             size_t cma_min) {
  if (!c->chan->cma_ok || len == 0) return MCOLL_MOVE_AREA;
  if (forced >= 0) return (enum mcoll_move)forced;
  return len >= cma_min ? MCOLL_MOVE_CMA : MCOLL_MOVE_AREA;
}

/* Records how a call of the gather family moved its blocks inside the node: by the
 * one path they all took, or as mixed with each block under its own. b: every
 * block (NULL: this rank knows only its own, my_len). */
static inline void mcoll__count_moves(const struct mcoll_comm *c, enum mcoll_coll coll,
                                      const struct mcoll_blocks *b, size_t my_len, int forced,
                                      size_t cma_min) {
  unsigned long blocks[MCOLL_MAX_ALGS] = {0};
  if (b) {
    for (int j = 0; j < c->topo.local_size; j++) {
      size_t len = mcoll__block_len(b, c->topo.local_ranks[j]);
      if (len) blocks[mcoll__move_of(c, len, forced, cma_min)]++;
    }
  }
  if (blocks[MCOLL_MOVE_AREA] && blocks[MCOLL_MOVE_CMA]) mcoll__count_mixed(coll, blocks);
  else if (blocks[MCOLL_MOVE_CMA]) mcoll__count_alg(coll, MCOLL_MOVE_CMA);
  else if (b) mcoll__count_alg(coll, MCOLL_MOVE_AREA);
  else mcoll__count_alg(coll, mcoll__move_of(c, my_len, forced, cma_min));
}

/* MCOLL_ALG_<COLL> for a move collective, if its restrictions hold here, else -1
 * (reported as a fallback to the normal choice). */
static inline int mcoll__move_forced(const struct mcoll_comm *c, enum mcoll_coll coll) {
  if (mcoll__alg_forced(coll) < 0) return -1;
  struct mcoll_facts facts = mcoll__facts(c, 0);
  return mcoll__alg_forced_for(coll, &facts);
}

/* Single copy's system calls are out of reach for blocks below this many bytes.
 * Allgather(v)'s two copies through the areas are from AREA_REACH up where single copy
 * is the rules' choice: every rank copies every block twice, and a round that a
 * disturbance hit could keep them for the rest of the calls (docs/algorithms.md). Such
 * a class has no round. Gather and scatter keep the areas: a member's copy in
 * overlaps the root's copy out, and the areas won some of their rounds there. */
enum { MCOLL_MOVE_CMA_REACH = 1 << 10, MCOLL_MOVE_AREA_REACH = 128 << 10 };

/* A blocking call whose class every rank computes alike (gather, scatter, allgather:
 * the block; allgatherv: its largest block; gatherv/scatterv on two ranks: the other
 * rank's block; not on more, where a rank knows only its own): the choice between
 * the areas and single copy adapts at run time
 * (coll/adapt.h), returned as the call's forced move; `forced` unchanged where it does
 * not apply (forced already, a threshold the user set, no single copy here). */
static inline int mcoll__move_adaptive(struct mcoll_comm *c, enum mcoll_coll coll, enum mcoll_param param,
                                       size_t len, int forced, size_t cma_min,
                                       struct mcoll_adapt_call *call) {
  call->cls = NULL;
  if (forced >= 0 || !c->chan->cma_ok || len == 0 || !mcoll__cfg.ADAPT) return forced;
  const enum mcoll_param params[] = {param, MCOLL_PARAM_PAIR_CMA_MIN};
  if (mcoll__params_user_set(params, 2)) return forced;
  struct mcoll_facts facts = mcoll__facts(c, len);
  int alg = mcoll__move_of(c, len, -1, cma_min);
  int with_slot = mcoll__coll_algs(coll)->nalgs > MCOLL_MOVE_SLOT && c->topo.nnodes == 1;
  unsigned reach = (1u << MCOLL_MOVE_AREA) | (len >= MCOLL_MOVE_CMA_REACH ? 1u << MCOLL_MOVE_CMA : 0);
  int allgather = coll == MCOLL_COLL_ALLGATHER || coll == MCOLL_COLL_ALLGATHERV;
  if (allgather && alg == MCOLL_MOVE_CMA && len >= MCOLL_MOVE_AREA_REACH) reach = 1u << MCOLL_MOVE_CMA;
  if (with_slot) {
    if (alg == MCOLL_MOVE_AREA && mcoll__move_slot_start(len)) alg = MCOLL_MOVE_SLOT;
    /* Below single copy's reach the start alone, no round: the two ranks of an
     * erroneous call count it in the classes of their own lengths, and a class whose
     * counts then differ would end its round at different calls (the agreement's
     * allreduce: a hang), as classes with one candidate never do. */
    reach = len >= MCOLL_MOVE_CMA_REACH ? reach | 1u << MCOLL_MOVE_SLOT : 1u << alg;
  }
  int picked = mcoll__adapt_pick(c, coll, len, alg, &facts, reach, call);
  /* (gatherv/scatterv name each protocol: area is the whole-area one, as forced) */
  return picked == alg && !with_slot ? forced : picked;
}

/* gatherv/scatterv: the slot protocol (MCOLL_MOVE_SLOT, forced or picked) is the
 * unforced call with single copy from a slot's size at most, so that every block
 * fits a slot or goes by single copy (the one-generation condition, alike on every
 * rank). Returns 1 when the call runs it. */
static inline int mcoll__move_slot_resolve(const struct mcoll_comm *c, int *forced, size_t *cma_min) {
  if (*forced != MCOLL_MOVE_SLOT) return 0;
  size_t slot = mcoll__slot_bytes(&c->chan->shm);
  *forced = -1;
  if (*cma_min == 0 || *cma_min > slot) *cma_min = slot;
  return 1;
}

/* Erroneous programs where a block's owner and its reader disagree on its length
 * (counts that differ between ranks): the node's part of a call runs under a call
 * descriptor (shm/call.h) whose digest is this rank's own block length, and every
 * reader checks its peer's after the flag it waited on, so that a disagreement is
 * reported instead of read past, read as garbage (another move), or waited on
 * forever (flags of another move). */
struct mcoll_move_guard {
  size_t my_len;  /* this rank's own block */
  int reads;      /* it reads peers' blocks */
  /* the length this rank expects of node-local rank x's block, SIZE_MAX if it does
   * not know (it reads nothing of x); NULL: my_len */
  size_t (*expects)(const void *arg, int x);
  const void *arg; /* for expects and body */
  void (*body)(struct mcoll_comm *c, const void *arg);
};

/* Runs g->body on the node. After a disagreement (the node is back in step then):
 * MPI_ERR_TRUNCATE on a reading rank that a peer sent more than it expects (as the
 * host MPIs report it), else MPI_SUCCESS, as for a shorter message. */
int mcoll__move_guarded(struct mcoll_comm *c, const struct mcoll_move_guard *g);

/* A writer, right before it first sets a flag that its readers wait on (posted, an
 * inline line's stamp): its descriptor, which they check after the flag. Not earlier:
 * its data line is the one its readers poll for posted, and a store to it while they
 * do costs one more transfer of the line between the cores; right before the post it
 * is still this rank's. */
static inline void mcoll__move_publish(void) {
  struct mcoll_call *call = mcoll__call_current;
  if (call && !call->published) mcoll__call_publish(call);
}

/* A reader that found its peer's block of another length than it expects. */
static inline void mcoll__move_disagree(void) {
  if (mcoll__call_current) mcoll__call_escape();
}

#endif
