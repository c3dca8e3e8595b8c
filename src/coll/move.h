/* How one rank's block moves inside a node, for the gather family: through the
 * owner's area (shm/area.h; two copies, chunked when the block exceeds the area),
 * or by a single copy (CMA) straight from the owner's buffer. The choice depends
 * only on the block's length, which both its owner and its reader know. */
#ifndef MCOLL_MOVE_H
#define MCOLL_MOVE_H

#include <stdio.h>
#include <string.h>

#include "coll/facts.h"
#include "core/config.h"
#include "comm/context.h"
#include "shm/area.h"

/* Also the algorithm indices of allgather(v), gather(v) and scatter(v). */
enum mcoll_move { MCOLL_MOVE_AREA, MCOLL_MOVE_CMA, MCOLL_MOVE_NALGS };

#define MCOLL_MOVE_ALG_INFO                                                            \
  {"area", "two copies through the per-rank areas of the node segment, chunked", 0, NULL}, \
  {"cma", "single copy from the owner's buffer (process_vm_readv), bounded readers",       \
   MCOLL_NEED_CMA, NULL}

/* The single-copy threshold in force for a collective whose own is cma_min: on a
 * node of two ranks MCOLL_PAIR_CMA_MIN where that is lower. There every block an
 * area carries is written by one core and read by the other, so each call moves all
 * its lines across the cores; single copy reads the owner's buffer instead, which
 * its reader often still holds in cache (OSU's latency mode, 2 ranks, 8-16 KiB:
 * gather/scatter/allgather 1.1-2.3x faster than through the areas, back to back
 * 1.05-1.8x; below 8 KiB the areas win back to back, 0.4x). */
static inline size_t mcoll__move_cma_min(const struct mcoll_comm *c, size_t cma_min) {
  size_t pair = mcoll__cfg.PAIR_CMA_MIN > 0 ? (size_t)mcoll__cfg.PAIR_CMA_MIN : 0;
  if (c->topo.local_size <= 2 && pair > 0 && pair < cma_min) return pair;
  return cma_min;
}

/* forced: MCOLL_MOVE_* or -1 (by length: single copy from the threshold in force for
 * cma_min, mcoll__move_cma_min). */
static inline enum mcoll_move mcoll__move_of(const struct mcoll_comm *c, size_t len, int forced,
                                             size_t cma_min) {
  if (!c->chan->cma_ok || len == 0) return MCOLL_MOVE_AREA;
  if (forced >= 0) return (enum mcoll_move)forced;
  return len >= mcoll__move_cma_min(c, cma_min) ? MCOLL_MOVE_CMA : MCOLL_MOVE_AREA;
}

/* MCOLL_ALG_<COLL> for a move collective, if its restrictions hold here, else -1
 * (reported as a fallback to the normal choice). */
static inline int mcoll__move_forced(const struct mcoll_comm *c, enum mcoll_coll coll) {
  if (mcoll__alg_forced(coll) < 0) return -1;
  struct mcoll_facts facts = mcoll__facts(c, 0);
  return mcoll__alg_forced_for(coll, &facts);
}

/* Chunks of at most `area` bytes that a block of len bytes needs. */
static inline uint32_t mcoll__area_chunks(size_t len, size_t area) {
  return (uint32_t)((len + area - 1) / area);
}

/* Small calls may run several generations apart, although the area protocol keeps one
 * in flight: a generation whose data fits in one slot (1/MCOLL_AREA_SLOTS of an area)
 * uses slot gen % MCOLL_AREA_SLOTS of every area. During a run of such generations a
 * writer needs its peers done with the generation that last used its slot (or with
 * the one before the run), not with gen-1. Every rank of the node calls
 * mcoll__slot_begin for each such generation; it returns the writer's lag.
 * MCOLL_AREA_SLOTS is in shm/shm.h (the segment touches the slots' pages). */
static inline uint32_t mcoll__slot_begin(struct mcoll_comm *c, uint32_t gen) {
  if (c->chan->area_slot_last != gen - 1) {
    c->chan->area_slot_from = gen;
    c->chan->area_slot_seen = gen - 2;
  }
  c->chan->area_slot_last = gen;
  uint32_t behind = gen - c->chan->area_slot_from;
  return behind < MCOLL_AREA_SLOTS - 1 ? behind : MCOLL_AREA_SLOTS - 1;
}

static inline size_t mcoll__slot_bytes(const struct mcoll_shm *shm) {
  return shm->area_bytes / MCOLL_AREA_SLOTS;
}

static inline char *mcoll__slot_area(const struct mcoll_shm *shm, int r, uint32_t gen) {
  return mcoll__rank_area(shm, r) + (gen % MCOLL_AREA_SLOTS) * mcoll__slot_bytes(shm);
}

/* Inline lines (shm/shm.h): slot runs may use them once every rank's lag is bounded
 * by MCOLL_INLINE_SLOTS as by MCOLL_AREA_SLOTS. */
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

/* mcoll__area_wait_free for a slot generation. area_slot_seen keeps the least `done`
 * seen last time (they only grow), so that most calls of a run need not pull the
 * peers' lines over from their cores. */
static inline void mcoll__slot_wait_free(struct mcoll_comm *c, uint32_t gen, uint32_t lag) {
  const struct mcoll_shm *shm = &c->chan->shm;
  uint32_t need = gen - 1 - lag;
  if (mcoll__reached(c->chan->area_slot_seen, need)) return;
  uint32_t least = gen;
  for (int r = 0; r < shm->local_size; r++) {
    if (r == shm->local_rank) continue;
    mcoll__flag_wait(shm, &shm->data[r].done, need);
    uint32_t done = atomic_load_explicit(&shm->data[r].done, memory_order_acquire);
    if (!mcoll__reached(done, least)) least = done;
  }
  c->chan->area_slot_seen = least;
}

/* Copies into memory that a peer has read before: plain stores would first take
 * every line back from the reader's cache; streaming stores skip that (a 64 KiB
 * copy went from 11 to 2 µs here). From stream_min bytes (0: never), 16-byte aligned. */
void mcoll__stream_copy(void *dst, const void *src, size_t len, size_t stream_min);
/* mcoll__stream_copy from MCOLL_AREA_STREAM_MIN bytes. */
void mcoll__area_write(void *dst, const void *src, size_t len);

/* Single copy of len bytes at `addr` in node-local rank r's memory; aborts on failure
 * (the probe at set-up said CMA works, so a failure is a broken peer). */
static inline void mcoll__cma_get(const struct mcoll_comm *c, int r, void *dst, uint64_t addr,
                                  size_t len) {
  int err = mcoll__cma_read(c->chan->shm.data[r].pid, dst, addr, len);
  if (err) {
    fprintf(stderr, "mcoll: process_vm_readv from pid %d failed (errno %d); aborting\n",
            (int)c->chan->shm.data[r].pid, err);
    PMPI_Abort(MPI_COMM_WORLD, 1);
  }
}

#endif
