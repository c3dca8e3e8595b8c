/* Slot generations: small calls may run several generations apart, although the
 * area protocol (node/area.h) keeps one in flight. A generation whose data fits in
 * one slot (1/nslots of an area) uses slot gen % nslots of every area. During a run
 * of such generations a writer needs its peers done with the generation that last
 * used its slot (or with the one before the run), not with gen-1. Every rank of the
 * node calls mcoll__slot_begin for each such generation, with the same run
 * (struct mcoll_slot_run, shm/channel.h: one per set of slots); it returns the
 * writer's lag. MCOLL_AREA_SLOTS is in shm/shm.h (the segment touches the slots'
 * pages). Inline lines (shm/shm.h) follow the area slots. */
#ifndef MCOLL_NODE_SLOT_H
#define MCOLL_NODE_SLOT_H

#include <string.h>

#include "shm/channel.h"

static inline uint32_t mcoll__slot_begin_n(struct mcoll_slot_run *run, uint32_t gen,
                                           uint32_t nslots) {
  if (run->last != gen - 1) {
    run->from = gen;
    run->seen = gen - 2;
  }
  run->last = gen;
  uint32_t behind = gen - run->from;
  return behind < nslots - 1 ? behind : nslots - 1;
}

/* Before the first generation of a fresh segment, where every slot is as it was
 * made (zero stamps are older than any generation): a run as if every slot had been
 * used, so that mcoll__slot_run_full holds at once. (After the generations wrap,
 * run->seen holds a generation before 0, never 0, so this happens once.) */
static inline void mcoll__slot_run_fresh(struct mcoll_slot_run *run, uint32_t gen,
                                         uint32_t nslots) {
  if (gen == 1 && run->last == 0 && run->from == 0 && run->seen == 0) {
    run->from = gen - nslots;
    run->seen = gen - 2;
  }
}

/* Generation gen was not one of the run's: the next slot generation starts a new run. */
static inline void mcoll__slot_run_end(struct mcoll_slot_run *run, uint32_t gen) {
  run->last = gen - 1;
}

static inline uint32_t mcoll__slot_begin(struct mcoll_slot_run *run, uint32_t gen) {
  return mcoll__slot_begin_n(run, gen, MCOLL_AREA_SLOTS);
}

/* A call that uses one slot generation takes it from the channel when it starts and
 * keeps it (the channel's counter moves now; nothing is written back when the call
 * ends), and begins it in the area slots' run. Returns the generation; *lag (if not
 * NULL): how far ahead of its readers this rank may write it. */
static inline uint32_t mcoll__slot_take(struct mcoll_channel *ch, uint32_t *lag) {
  uint32_t gen = ++ch->area_gen;
  uint32_t ahead = mcoll__slot_begin(&ch->area_slots, gen);
  if (lag) *lag = ahead;
  return gen;
}

/* Gives back generation gen, taken by mcoll__slot_take with the slots' run as it was
 * before (run), when nothing of it was marked or written: a reader that found its
 * source running another engine (a mismatched call) leaves the channel as if the
 * generation had never been taken. */
static inline void mcoll__slot_give_back(struct mcoll_channel *ch, uint32_t gen,
                                         struct mcoll_slot_run run) {
  ch->area_gen = gen - 1;
  ch->area_slots = run;
}

/* Whether the run has used every one of nslots slots before gen (so every slot's
 * previous content is of this run). */
static inline int mcoll__slot_run_full(const struct mcoll_slot_run *run, uint32_t gen,
                                       uint32_t nslots) {
  return mcoll__reached(gen - nslots, run->from);
}

static inline size_t mcoll__slot_bytes(const struct mcoll_shm *shm) {
  return shm->area_bytes / MCOLL_AREA_SLOTS;
}

static inline char *mcoll__slot_area(const struct mcoll_shm *shm, int r, uint32_t gen) {
  return mcoll__rank_area(shm, r) + (gen % MCOLL_AREA_SLOTS) * mcoll__slot_bytes(shm);
}

/* The generation every peer must be done with before a writer `lag` generations
 * ahead in a run may write slot generation gen. */
static inline uint32_t mcoll__slot_need(uint32_t gen, uint32_t lag) { return gen - 1 - lag; }

/* mcoll__area_wait_free for a slot generation. run->seen keeps the least `done`
 * seen last time (they only grow), so that most calls of a run need not pull the
 * peers' lines over from their cores. */
static inline void mcoll__slot_wait_free(const struct mcoll_shm *shm, struct mcoll_slot_run *run,
                                         uint32_t gen, uint32_t lag) {
  uint32_t need = mcoll__slot_need(gen, lag);
  if (mcoll__reached(run->seen, need)) return;
  uint32_t least = gen;
  for (int r = 0; r < shm->local_size; r++) {
    if (r == shm->local_rank) continue;
    mcoll__flag_wait(shm, &shm->data[r].done, need);
    uint32_t done = atomic_load_explicit(&shm->data[r].done, memory_order_acquire);
    if (!mcoll__reached(done, least)) least = done;
  }
  run->seen = least;
}

/* Whether mcoll__slot_wait_free would return without waiting (updates run->seen
 * when it finds every peer done). */
static inline int mcoll__slot_test_free(const struct mcoll_shm *shm, struct mcoll_slot_run *run,
                                        uint32_t gen, uint32_t lag) {
  uint32_t need = mcoll__slot_need(gen, lag);
  if (mcoll__reached(run->seen, need)) return 1;
  uint32_t least = gen;
  for (int r = 0; r < shm->local_size; r++) {
    if (r == shm->local_rank) continue;
    uint32_t done = atomic_load_explicit(&shm->data[r].done, memory_order_acquire);
    if (!mcoll__reached(done, need)) return 0;
    if (!mcoll__reached(done, least)) least = done;
  }
  run->seen = least;
  return 1;
}

/* mcoll__slot_test_free for as long as a wait would spin before it yields: whether the
 * slot is free without waiting beyond the spin (a try on the caller's stack). */
static inline int mcoll__slot_poll_free(const struct mcoll_shm *shm, struct mcoll_slot_run *run,
                                        uint32_t gen, uint32_t lag) {
  for (int i = 0; i <= shm->spin; i++)
    if (mcoll__slot_test_free(shm, run, gen, lag)) return 1;
  return 0;
}

/* Inline lines: slot runs may use them once every rank's lag is bounded by
 * MCOLL_INLINE_SLOTS as by MCOLL_AREA_SLOTS. */
_Static_assert(MCOLL_INLINE_SLOTS == MCOLL_AREA_SLOTS, "inline lines follow the area slots");

static inline void mcoll__inline_put(const struct mcoll_shm *shm, struct mcoll_inline_line *line,
                                     uint32_t gen, const void *data, size_t len) {
  line->len = (uint32_t)len;
  if (len) memcpy(line->data, data, len);
  mcoll__flag_set(shm, &line->stamp, gen);
}

static inline void mcoll__inline_get(const struct mcoll_shm *shm, struct mcoll_inline_line *line,
                                     uint32_t gen, void *data, size_t len) {
  mcoll__flag_wait(shm, &line->stamp, gen);
  if (len) memcpy(data, line->data, len);
}

/* Whether the line holds generation gen (or later) now. */
static inline int mcoll__inline_test(const struct mcoll_inline_line *line, uint32_t gen) {
  return mcoll__reached(atomic_load_explicit(&line->stamp, memory_order_acquire), gen);
}

#endif
