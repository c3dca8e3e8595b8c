/* The single-copy intra-node engine, for large messages on few ranks: every rank
 * posts the address of its input in its area, and folds what it needs from the
 * peers' inputs read straight out of their memory with process_vm_readv (CMA), in
 * rank order. No copy into the areas: a peer's input crosses between cores once
 * (twice through the areas: written there, then read), and an input the owner has
 * not changed since the last call is still in the reader's cache. Reads are cut
 * into CMA_CHUNK pieces through a scratch buffer (core/fiber.h).
 *
 * When one rank alone takes the whole result (reduce), the work is split instead:
 * rank j folds segment j of the vector over every rank's input and writes it into
 * the taker's output (process_vm_writev), so each rank reads and folds 1/n of what
 * the taker alone would.
 *
 * A rank's input must stay as it is until every peer has read it: every rank waits
 * for all peers to be done before it returns, and an input that is also an output
 * (MPI_IN_PLACE) is published as a private copy. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "coll/reduce/red.h"
#include "core/fiber.h"
#include "core/config.h"
#include "node/area.h"
#include "node/peer.h"
#include "node/publish.h"
#include "shm/call.h"

struct cma_call {
  const struct mcoll_node_red *r;
  const char *own; /* my input as published */
  char *tmp;       /* one chunk of a peer's input */
  uint32_t gen;
};

static int overlaps(const char *a, size_t a_len, const char *b, size_t b_len) {
  return a < b + b_len && b < a + a_len;
}

/* Reads elements [v, v + m) of peer x's input into dst. */
static void read_peer(const struct cma_call *k, int x, char *dst, size_t v, size_t m) {
  const struct mcoll_red_type *t = k->r->t;
  const struct mcoll_shm *shm = &k->r->c->chan->shm;
  uint64_t addr = *(const uint64_t *)mcoll__rank_area(shm, x) + v * t->extent;
  mcoll__peer_read(k->r->c->chan, x, dst, addr, mcoll__red_span(t, m));
}

/* Ranks that disagree on the count (an erroneous program) would read or write past
 * each other's buffers: every peer's descriptor must be this call's (shm/call.h;
 * nobody leaves a single-copy call before all are done, so the peer is in it), and
 * its count, which sits in the line of the address we read anyway, ours. Else the
 * call is left before anything is read. */
static void check_same_count(const struct mcoll_node_red *r, int x) {
  mcoll__call_check(x, 1);
  if (((const uint64_t *)mcoll__rank_area(&r->c->chan->shm, x))[2] != r->count) mcoll__call_escape();
}

/* Elements [v, v + m) of rank x's input: mine in place, a peer's read into tmp. */
static const char *input_of(const struct cma_call *k, int x, size_t v, size_t m) {
  if (x == k->r->c->chan->shm.local_rank) return mcoll__red_at(k->r->t, k->own, v);
  read_peer(k, x, k->tmp, v, m);
  return k->tmp;
}

/* d[0, m) = fold of ranks [0, upto) over vector elements [v, v + m). */
static void fold_chunk(const struct cma_call *k, int upto, char *d, size_t v, size_t m) {
  const struct mcoll_red_type *t = k->r->t;
  int me = k->r->c->chan->shm.local_rank;
  if (t->symmetric && me < upto && upto > 1) {
    /* Ranks 0 and 1 in either order give the same bits, the rest follow in rank
     * order: the first peer's input straight into d, then the others. */
    int first = me == 0 ? 1 : 0;
    read_peer(k, first, d, v, m);
    for (int x = 0; x < upto; x++)
      if (x != first) mcoll__red_fold(t, input_of(k, x, v, m), d, m);
    return;
  }
  /* Rank order, the same on every rank: the last rank's input straight into d, then
   * the others folded in from the right. */
  if (upto - 1 == me) mcoll__red_copy(t, d, input_of(k, me, v, m), m);
  else read_peer(k, upto - 1, d, v, m);
  for (int x = upto - 2; x >= 0; x--) mcoll__red_fold(t, input_of(k, x, v, m), d, m);
}

/* Reduce: node-local rank dest-1 alone takes the whole fold (of every rank), large
 * enough that splitting pays for the extra system calls (MCOLL_RED_SPLIT_MIN). */
static int one_taker(const struct mcoll_node_red *r) {
  size_t split_min = (size_t)mcoll__cfg.RED_SPLIT_MIN;
  if (r->dest <= 0 || r->blocks || r->prefix || r->all_out || split_min == 0 ||
      r->count * r->t->extent < split_min)
    return 0;
  const struct mcoll_node_out *o = &r->out[0];
  int taker = r->c->chan->shm.local_rank == r->dest - 1;
  return r->out[1].upto <= 0 && (taker ? o->upto == r->c->chan->shm.local_size && !o->own_block
                                       : o->upto <= 0);
}

/* My segment of the fold, chunk by chunk: straight into the output at the taker,
 * through `out_tmp` and a single-copy write elsewhere. */
static void fold_segment_for_taker(const struct cma_call *k, char *out_tmp) {
  const struct mcoll_node_red *r = k->r;
  const struct mcoll_red_type *t = r->t;
  const struct mcoll_shm *shm = &r->c->chan->shm;
  int me = shm->local_rank, n = shm->local_size, taker = r->dest - 1;
  size_t lo, hi, chunk = (size_t)mcoll__cfg.CMA_CHUNK / t->extent;
  if (chunk == 0) chunk = 1;
  mcoll__node_segment(r->count, n, me, -1, &lo, &hi);
  uint64_t out_addr = ((const uint64_t *)mcoll__rank_area(shm, taker))[1];
  for (size_t v = lo; v < hi; v += chunk) {
    size_t m = hi - v < chunk ? hi - v : chunk;
    if (me == taker) {
      fold_chunk(k, n, mcoll__red_at(t, r->out[0].dst, v), v, m);
      continue;
    }
    fold_chunk(k, n, out_tmp, v, m);
    mcoll__peer_write(r->c->chan, taker, out_addr + v * t->extent, out_tmp, mcoll__red_span(t, m));
  }
}

static size_t block_start(const struct mcoll_node_red *r, int b) {
  size_t start = 0;
  for (int x = 0; x < b; x++) start += (size_t)r->blocks[x];
  return start;
}

void mcoll__node_red_cma(const struct mcoll_node_red *r) {
  struct mcoll_comm *c = r->c;
  const struct mcoll_red_type *t = r->t;
  const struct mcoll_shm *shm = &c->chan->shm;
  int me = shm->local_rank;
  size_t chunk = (size_t)mcoll__cfg.CMA_CHUNK / t->extent, span = mcoll__red_span(t, r->count);
  if (chunk == 0) chunk = 1;
  /* An input that is also an output goes out as a private copy. */
  int copy = 0;
  for (int i = 0; i < 2; i++) {
    const struct mcoll_node_out *o = &r->out[i];
    size_t n = o->own_block && r->blocks ? (size_t)r->blocks[me] : r->count;
    if (o->upto > 0 && overlaps(o->dst, mcoll__red_span(t, n), r->in, span)) copy = 1;
  }
  int split = one_taker(r);
  size_t own_bytes = copy ? r->count * t->extent : 0;
  char *room = mcoll__scratch(MCOLL_SCRATCH_DATA, own_bytes + (split ? 2 : 1) * chunk * t->extent);
  struct cma_call k = {r, copy ? room : r->in, room + own_bytes, 0};
  if (copy) mcoll__red_copy(t, room, r->in, r->count);

  k.gen = mcoll__area_next(c->chan);
  mcoll__area_wait_free(c->chan, k.gen);
  uint64_t *published = (uint64_t *)mcoll__rank_area(shm, me);
  published[0] = mcoll__peer_addr(k.own);
  if (split && me == r->dest - 1) published[1] = mcoll__peer_addr(r->out[0].dst);
  published[2] = r->count;
  mcoll__area_post(c->chan, k.gen);
  int need = split ? shm->local_size
                   : r->out[0].upto > r->out[1].upto ? r->out[0].upto : r->out[1].upto;
  for (int x = 0; x < need; x++)
    if (x != me) {
      mcoll__area_wait_posted(c->chan, x, k.gen);
      check_same_count(r, x);
    }
  if (split) fold_segment_for_taker(&k, room + own_bytes + chunk * t->extent);
  for (int i = 0; i < 2 && !split; i++) {
    const struct mcoll_node_out *o = &r->out[i];
    if (o->upto <= 0) continue;
    int mine = o->own_block && r->blocks;
    size_t first = mine ? block_start(r, me) : 0, len = mine ? (size_t)r->blocks[me] : r->count;
    if (o->upto == 1 && me != 0) { /* rank 0's input as it is (exscan): no fold to chunk for */
      read_peer(&k, 0, o->dst, first, len);
      continue;
    }
    for (size_t f = 0; f < len; f += chunk) {
      size_t m = len - f < chunk ? len - f : chunk;
      fold_chunk(&k, o->upto, mcoll__red_at(t, o->dst, f), first + f, m);
    }
  }
  mcoll__area_done(c->chan, k.gen);
  mcoll__hold_wait(shm, MCOLL_MARK_AREA, -1, k.gen);
}
