/* Intra-node single-copy bcast: readers read the source's buffer directly with
 * single copy (node/peer.h), chunk by chunk as the source makes chunks valid (pipelined
 * with the inter-node phase). Reader group j starts at chunk j·N/groups, so about
 * k readers hit one part of the buffer at a time. The source returns only when
 * every reader is done with its buffer. */
#include <stdio.h>
#include <stdlib.h>

#include "coll/bcast/bcast.h"
#include "core/config.h"
#include "node/peer.h"
#include "node/publish.h"

static size_t cma_chunk(void) { return (size_t)mcoll__cfg.CMA_CHUNK; }

static size_t chunk_count(size_t bytes) { return (bytes + cma_chunk() - 1) / cma_chunk(); }

/* Chunks readable once the first `valid` bytes are. */
static size_t chunks_ready(const struct mcoll_bcast_call *call, size_t valid) {
  return valid == call->bytes ? chunk_count(call->bytes) : valid / cma_chunk();
}

static void publish(const struct mcoll_bcast_call *call, size_t lo, size_t hi) {
  (void)lo;
  const struct mcoll_shm *shm = &call->c->chan->shm;
  mcoll__publish(mcoll__publish_line(shm, call->source), call->buf, call->bytes, call->seq);
  mcoll__publish_ready(shm, call->base + (uint32_t)chunks_ready(call, hi));
}

static size_t read_range(const struct mcoll_bcast_call *call, size_t lo, size_t hi) {
  struct mcoll_comm *c = call->c;
  const struct mcoll_shm *shm = &c->chan->shm;
  const struct mcoll_peer_buf *src = mcoll__publish_line(shm, call->source);
  if (call->check_bytes && lo == 0) {
    mcoll__published_wait_ready(shm, call->source, call->base + 1);
    size_t theirs = mcoll__published_len(src);
    if (theirs != call->bytes) return theirs;
  }
  size_t first = chunks_ready(call, lo), nchunks = chunks_ready(call, hi) - first;
  if (nchunks == 0) return call->bytes;
  int me = shm->local_rank, n = shm->local_size;
  int readers = n - 1, k = (int)mcoll__cfg.BCAST_K;
  int groups = (readers + k - 1) / k;
  int group = ((me - call->source + n) % n - 1) / k;
  size_t start = nchunks * (size_t)group / (size_t)groups;
  for (size_t step = 0; step < nchunks; step++) {
    size_t idx = first + (start + step) % nchunks;
    size_t off = idx * cma_chunk();
    size_t len = call->bytes - off < cma_chunk() ? call->bytes - off : cma_chunk();
    mcoll__published_wait_ready(shm, call->source, call->base + (uint32_t)idx + 1);
    mcoll__peer_read(c->chan, call->source, call->buf + off, mcoll__published_addr(src) + off,
                     len);
  }
  if (first + nchunks == chunk_count(call->bytes))
    mcoll__read_done(shm, MCOLL_MARK_BCAST, call->seq);
  return call->bytes;
}

static void finish(const struct mcoll_bcast_call *call) {
  struct mcoll_comm *c = call->c;
  const struct mcoll_shm *shm = &c->chan->shm;
  if (shm->local_rank == call->source) mcoll__hold_wait(shm, MCOLL_MARK_BCAST, -1, call->seq);
  /* A reader that met another count (bcast.c:read_mismatched) took its own; the
   * node goes on with the source's. */
  c->chan->cma_ready[call->source] += (uint32_t)chunk_count(call->bytes) - call->gens;
}

static void begin(struct mcoll_bcast_call *call) {
  uint32_t *ready = &call->c->chan->cma_ready[call->source];
  call->gens = (uint32_t)chunk_count(call->bytes);
  call->base = *ready;
  *ready += call->gens;
}

static void abandon(struct mcoll_bcast_call *call) {
  call->c->chan->cma_ready[call->source] -= call->gens;
}

const struct mcoll_bcast_intra mcoll__bcast_cma = {begin, publish, read_range, finish, abandon};
