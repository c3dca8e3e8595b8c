/* Intra-node bcast of small messages through one slot of the source's area
 * (node/slot.h), one area generation per call.
 *
 * The source writes the data into its inline line for the generation (up to
 * MCOLL_INLINE_MAX bytes: the line that says "ready" brings the data with it) or
 * into its area's slot for the generation, and stamps the line; readers wait on
 * the stamp and copy. Back-to-back calls overlap: the source may run up to
 * MCOLL_AREA_SLOTS - 1 generations ahead of its readers.
 *
 * Against the ring (bcast_shm_pipeline.c), whose slots lie a chunk (64 KiB) apart,
 * consecutive calls touch consecutive lines of one or two pages, where through the
 * ring the first calls on a fresh communicator each bring a new ring slot -- a new
 * page (a TLB walk) and cold lines, on both ranks -- and run well behind warm ones;
 * the ring also synchronises through three lines (slot control, data, the readers'
 * consumed flags) where this takes one.
 *
 * The slots' first lines are loaded at set-up (shm/prefault.c, warm_lines), so the
 * first calls find them cached. No call prefetches the next slot's first line: warm,
 * that would move the line away from the core where the source writes it next, a
 * cost on every call, to help only a communicator's first calls, which the set-up's
 * loading serves as well on a quiet host (on a busy one other processes may evict
 * those lines again). */
#include <string.h>

#include "coll/beside.h"
#include "coll/bcast/bcast.h"
#include "coll/move.h"
#include "core/config.h"


/* Every rank takes the call's generation when it begins: a reader then lets the
 * next calls start beside it (coll/beside.h) while it waits for the data. */
static void begin(struct mcoll_bcast_call *call) {
  struct mcoll_comm *c = call->c;
  call->slot_run = c->chan->area_slots;
  call->base = mcoll__slot_take(c->chan, &call->gens); /* gens: the source's lag */
  if (c->topo.local_rank != call->source) mcoll__node_call_beside(c, 1, call->base);
}

/* The whole call is one piece (bcast.c chooses this only then). */
static void publish(const struct mcoll_bcast_call *call, size_t lo, size_t hi) {
  (void)lo, (void)hi;
  struct mcoll_comm *c = call->c;
  const struct mcoll_shm *shm = &c->chan->shm;
  int me = shm->local_rank;
  uint32_t gen = call->base;
  mcoll__area_done(c->chan, gen); /* the source reads no one's area */
  mcoll__slot_wait_free(&c->chan->shm, &c->chan->area_slots, gen, call->gens);
  struct mcoll_inline_line *line = mcoll__inline_line(shm, me, gen);
  line->len = (uint32_t)call->bytes;
  if (call->bytes <= MCOLL_INLINE_MAX) memcpy(line->data, call->buf, call->bytes);
  else memcpy(mcoll__slot_area(shm, me, gen), call->buf, call->bytes);
  mcoll__flag_set(shm, &line->stamp, gen);
  mcoll__node_call_beside(c, 0, gen);
}

static size_t read_range(const struct mcoll_bcast_call *call, size_t lo, size_t hi) {
  (void)lo, (void)hi;
  struct mcoll_comm *c = call->c;
  const struct mcoll_shm *shm = &c->chan->shm;
  uint32_t gen = call->base;
  struct mcoll_inline_line *line = mcoll__inline_line(shm, call->source, gen);
  mcoll__flag_wait(shm, &line->stamp, gen);
  /* The source's byte count is in the line: on a mismatch, leave without marking the
   * generation done (bcast.c reads it again with the source's count). */
  if (call->check_bytes && line->len != call->bytes) return line->len;
  if (call->bytes <= MCOLL_INLINE_MAX) memcpy(call->buf, line->data, call->bytes);
  else memcpy(call->buf, mcoll__slot_area(shm, call->source, gen), call->bytes);
  mcoll__area_done(c->chan, gen);
  return call->bytes;
}

static void finish(const struct mcoll_bcast_call *call) { (void)call; }

/* The generation goes back to the channel as if never taken (the reader marked
 * nothing of it). */
static void abandon(struct mcoll_bcast_call *call) {
  mcoll__slot_give_back(call->c->chan, call->base, call->slot_run);
}

const struct mcoll_bcast_intra mcoll__bcast_shm_slot = {begin, publish, read_range, finish,
                                                        abandon};
