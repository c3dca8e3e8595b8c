/* Protocol of the per-rank areas, shared by every collective that uses them.
 *
 * Each use of the areas on a node channel is one generation g (the channel's
 * area_gen, advanced identically on every rank of the node). A rank may write
 * generation g into its own area only when every peer has finished reading
 * generation g-1 (done >= g-1); it then posts g. A rank that has read all it needs
 * of generation g marks done = g, even if it read nothing.
 *
 * Calls side by side (task/task.h). `posted` and `done` are one counter per rank, so
 * they say "every generation up to here". A call that runs beside later ones has
 * posted all it writes before they start (posts stay in generation order); if it
 * still reads a generation it says so (mcoll__area_reading), and until it marks
 * that one done, this rank's `done` stays below it, whatever the later calls mark.
 * Only calls of one generation do this (node/slot.h), so a call never waits on its
 * own marks. */
#ifndef MCOLL_NODE_AREA_H
#define MCOLL_NODE_AREA_H

#include "shm/channel.h"

/* Generations are taken from the channel when they are known: a call whose count
 * every rank knows at its start takes them all then (mcoll__area_take: base+1 ..
 * base+n are its own); one whose count unfolds as it goes takes each as it starts
 * it (mcoll__area_next). Either way the call keeps them, and nothing is written back
 * to the channel when it ends. */
static inline uint32_t mcoll__area_next(struct mcoll_channel *ch) { return ++ch->area_gen; }
/* The last generation taken: a call's first is after it. */
static inline uint32_t mcoll__area_last(const struct mcoll_channel *ch) { return ch->area_gen; }
static inline uint32_t mcoll__area_take(struct mcoll_channel *ch, uint32_t n) {
  uint32_t base = ch->area_gen;
  ch->area_gen = base + n;
  return base;
}

/* Waits until every node peer is done with generation gen-1 (my area is free). */
void mcoll__area_wait_free(struct mcoll_channel *ch, uint32_t gen);
/* My area now holds generation gen. */
void mcoll__area_post(struct mcoll_channel *ch, uint32_t gen);
/* Whether every node peer is done with generation gen-1 now (does not wait). */
int mcoll__area_test_free(const struct mcoll_channel *ch, uint32_t gen);
/* The same, giving each peer flag_wait's spin (never yields or sleeps). */
int mcoll__area_poll_free(const struct mcoll_channel *ch, uint32_t gen);
/* Waits until node-local rank r has posted generation gen. */
void mcoll__area_wait_posted(struct mcoll_channel *ch, int r, uint32_t gen);
/* Whether node-local rank r has posted generation gen (does not wait). */
static inline int mcoll__area_test_posted(const struct mcoll_channel *ch, int r, uint32_t gen) {
  return mcoll__flag_test(&ch->shm.data[r].posted, gen);
}
/* I have read all I need of generation gen. */
void mcoll__area_done(struct mcoll_channel *ch, uint32_t gen);
/* A call side by side with later ones has yet to read generation gen, the only one
 * it reads: 0 if MCOLL_AREA_READERS calls already do (then it must not let later
 * calls start). */
int mcoll__area_reading(struct mcoll_channel *ch, uint32_t gen);

/* After the node's ranks disagreed on a call that began after generation start_gen
 * (shm/call.h: an erroneous program), each may have used a different number of
 * generations and left a slot run (run) in another state: puts this rank back in
 * step. beside: the call let later calls start (coll/beside.h). */
void mcoll__area_resync(struct mcoll_channel *ch, uint32_t start_gen, int beside,
                        struct mcoll_slot_run *run);
/* Chunks of at most `area` bytes that a block of len bytes needs. */
static inline uint32_t mcoll__area_chunks(size_t len, size_t area) {
  return (uint32_t)((len + area - 1) / area);
}

#endif
