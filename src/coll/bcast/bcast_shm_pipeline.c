/* Intra-node bcast through the segment's ring of slots (bounded concurrency:
 * docs/architecture.md).
 *
 * The source copies chunk after chunk into the node's ring (node/ring.h); chunk i
 * of the call has generation base+i+1 and goes in once every reader is done with
 * its slot's previous generation. Readers take the ring a window of S slots
 * at a time; reader group j (k readers) starts the window at slot j and rotates,
 * so at most k ranks copy from one slot (one NUMA domain) at a time.
 *
 * Between calls the source may run the whole ring ahead. Within a long call on a
 * node with a core per rank it keeps at most MCOLL_BCAST_AHEAD bytes ahead of the
 * readers and writes with plain stores, so that a chunk is still in cache when it
 * is read, faster than streaming the chunks to memory across the whole ring
 * (MCOLL_BCAST_AHEAD in docs/performance.md). With more ranks than cores the
 * readers are often not running, and the source had better finish its copies
 * meanwhile. */
#include <string.h>

#include "coll/bcast/bcast.h"
#include "coll/move.h"
#include "core/config.h"
#include "node/ring.h"

static size_t chunk_count(const struct mcoll_shm *shm, size_t bytes) {
  return (bytes + shm->chunk - 1) / shm->chunk;
}

/* Chunks the source may be ahead of the readers within a call. Readers report
 * whole windows, so it must be at least two of them (one filled, one read). */
static size_t run_ahead(const struct mcoll_shm *shm) {
  if (shm->oversubscribed || mcoll__cfg.BCAST_AHEAD <= 0) return (size_t)shm->nslots;
  size_t ahead = (size_t)mcoll__cfg.BCAST_AHEAD / shm->chunk, window = (size_t)shm->window;
  if (ahead < 2 * window) ahead = 2 * window;
  return ahead < (size_t)shm->nslots ? ahead : (size_t)shm->nslots;
}

static void publish(const struct mcoll_bcast_call *call, size_t lo, size_t hi) {
  const struct mcoll_shm *shm = &call->c->chan->shm;
  uint32_t base = call->base;
  size_t ahead = run_ahead(shm);
  int cached = ahead < (size_t)shm->nslots && call->bytes > shm->chunk;
  for (size_t idx = lo / shm->chunk; idx < chunk_count(shm, hi); idx++) {
    uint32_t gen = base + (uint32_t)idx + 1;
    size_t off = idx * shm->chunk;
    size_t len = call->bytes - off < shm->chunk ? call->bytes - off : shm->chunk;
    mcoll__ring_wait_free(shm, call->source, gen, (uint32_t)(idx >= ahead ? ahead : (size_t)shm->nslots));
    if (cached) memcpy(mcoll__ring_data(shm, gen), call->buf + off, len);
    else mcoll__area_write(mcoll__ring_data(shm, gen), call->buf + off, len);
    mcoll__ring_put(shm, gen, len, call->bytes);
  }
}

static size_t read_range(const struct mcoll_bcast_call *call, size_t lo, size_t hi) {
  const struct mcoll_shm *shm = &call->c->chan->shm;
  uint32_t base = call->base;
  size_t end = chunk_count(shm, hi);
  int me = shm->local_rank, n = shm->local_size;
  int reader = (me - call->source + n) % n - 1;
  int group = reader / (int)mcoll__cfg.BCAST_K;
  /* The source's byte count is in chunk 0's line: the first reader group checks it
   * when it takes chunk 0 first anyway, the others wait for that line first. */
  int unchecked = call->check_bytes && lo == 0;
  size_t first_window = end < (size_t)shm->window ? end : (size_t)shm->window;
  if (unchecked && (size_t)group % first_window != 0) {
    const struct mcoll_slot_ctl *ctl = mcoll__ring_wait(shm, base + 1);
    if (ctl->call_bytes != call->bytes) return ctl->call_bytes;
    unchecked = 0;
  }
  for (size_t first = lo / shm->chunk; first < end; first += (size_t)shm->window) {
    size_t m = end - first < (size_t)shm->window ? end - first : (size_t)shm->window;
    for (size_t step = 0; step < m; step++) {
      size_t idx = first + ((size_t)group + step) % m;
      uint32_t gen = base + (uint32_t)idx + 1;
      size_t off = idx * shm->chunk;
      size_t len = call->bytes - off < shm->chunk ? call->bytes - off : shm->chunk;
      const struct mcoll_slot_ctl *ctl = mcoll__ring_wait(shm, gen);
      if (unchecked) { /* chunk 0 */
        if (ctl->call_bytes != call->bytes) return ctl->call_bytes;
        unchecked = 0;
      }
      memcpy(call->buf + off, mcoll__ring_data(shm, gen), len);
    }
    mcoll__ring_consumed(shm, me, base + (uint32_t)(first + m));
  }
  return call->bytes;
}

static void begin(struct mcoll_bcast_call *call) {
  struct mcoll_channel *ch = call->c->chan;
  call->gens = (uint32_t)chunk_count(&ch->shm, call->bytes);
  call->base = ch->ring_gen;
  ch->ring_gen += call->gens;
}

static void finish(const struct mcoll_bcast_call *call) {
  struct mcoll_channel *ch = call->c->chan;
  uint32_t nchunks = (uint32_t)chunk_count(&ch->shm, call->bytes);
  /* The source never reads its own chunks: mark them done for the next writer. */
  if (ch->shm.local_rank == call->source)
    mcoll__ring_consumed(&ch->shm, call->source, call->base + nchunks);
  /* A reader that met another count (bcast.c:read_mismatched) took its own; the
   * node goes on with the source's. */
  ch->ring_gen += nchunks - call->gens;
}

static void abandon(struct mcoll_bcast_call *call) { call->c->chan->ring_gen -= call->gens; }

const struct mcoll_bcast_intra mcoll__bcast_shm_pipeline = {begin, publish, read_range, finish,
                                                            abandon};
