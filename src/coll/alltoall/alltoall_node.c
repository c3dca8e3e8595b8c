/* The node's exchange through the per-rank areas (protocol of node/area.h), in
 * rounds: in round r every rank writes fragment r of each of its blocks for node
 * peers into its slots, posts, then copies fragment r of its own blocks out of the
 * peers' slots, visiting them pairwise (step s: peer me-s) so that no area is read
 * by everyone at once. Blocks from cma_min bytes on skip the slots: the receiver
 * reads them straight from the sender's buffer (single copy), whole or a tile per
 * round.
 *
 * The algorithms differ only in the fragment: shm_direct uses all of the area, tiled
 * uses cache-sized tiles and two halves of the area (round r writes half r mod 2
 * while peers may still read the other), so writer and readers work on data that is
 * still in the shared cache (the cache-tiled alltoall, docs/architecture.md). On the
 * 2-core machine this was measured no faster than one large fragment: the per-round
 * synchronisation costs more than the cache saves.
 *
 * Alltoallv/w: the rounds needed depend on block sizes no rank knows in full, so
 * round 0 always runs and carries each rank's own count in its header; everyone
 * reads every header and takes the maximum. On oversubscribed nodes with single
 * copy, a call is one generation in a slot instead (slot_exchange_v). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "coll/alltoall/alltoall_node.h"
#include "coll/beside.h"
#include "coll/move.h"
#include "core/config.h"
#include "node/area.h"
#include "node/publish.h"

static int by_cma(const struct mcoll_a2a_engine *e, size_t bytes) { return bytes >= e->cma_min; }

static size_t pair_frag(const struct mcoll_a2a_engine *e, size_t bytes) {
  return by_cma(e, bytes) ? e->cma_frag : e->slot_frag;
}

static uint32_t pair_rounds(const struct mcoll_a2a_engine *e, size_t bytes) {
  size_t frag = pair_frag(e, bytes);
  if (bytes == 0) return 0;
  return frag == SIZE_MAX ? 1 : (uint32_t)((bytes + frag - 1) / frag);
}

/* Slot of `owner`'s block for node-local rank k in round r. */
static char *slot(const struct mcoll_comm *c, const struct mcoll_a2a_engine *e, int owner, int k,
                  uint32_t r) {
  size_t m = (size_t)c->topo.local_size, index = (size_t)(k < owner ? k : k - 1);
  size_t half = e->double_buffer && (r & 1) ? (m - 1) * e->slot_frag : 0;
  return mcoll__rank_area(&c->chan->shm, owner) + mcoll__a2a_header_bytes((int)m) + half +
         index * e->slot_frag;
}

static void write_round(struct mcoll_a2a *a, const struct mcoll_a2a_engine *e, uint32_t r) {
  const struct mcoll_topo *t = &a->c->topo;
  for (int k = 0; k < t->local_size; k++) {
    const struct mcoll_span *s = &a->send[t->local_ranks[k]];
    if (k == t->local_rank || by_cma(e, s->bytes) || r >= pair_rounds(e, s->bytes)) continue;
    size_t off = (size_t)r * e->slot_frag;
    size_t len = s->bytes - off < e->slot_frag ? s->bytes - off : e->slot_frag;
    mcoll__stream_copy(slot(a->c, e, t->local_rank, k, r), s->ptr + off, len,
                       (size_t)mcoll__cfg.ALLTOALL_STREAM_MIN);
  }
}

/* The length of node-local rank j's block for me as j sends it: alltoall's (the
 * call digest has checked it), else from j's header. */
static size_t sent_to_me(const struct mcoll_a2a *a, int j) {
  const struct mcoll_comm *c = a->c;
  if (a->uniform) return a->recv[c->topo.local_ranks[j]].bytes;
  const uint64_t *lens =
      (const uint64_t *)(mcoll__rank_area(&c->chan->shm, j) + MCOLL_A2A_LEN_OFFSET);
  return (size_t)lens[c->topo.local_rank];
}

/* Fragment r of j's block for me, by the path its length chose on j's side; only what
 * fits my block is kept (a longer block is this rank's MPI_ERR_TRUNCATE). */
static void read_pair(struct mcoll_a2a *a, const struct mcoll_a2a_engine *e, uint32_t r, int j) {
  struct mcoll_comm *c = a->c;
  const struct mcoll_shm *shm = &c->chan->shm;
  int me = c->topo.local_rank;
  const struct mcoll_span *rv = &a->recv[c->topo.local_ranks[j]];
  size_t sent = sent_to_me(a, j), frag = pair_frag(e, sent), off = (size_t)r * frag;
  size_t len = sent - off < frag ? sent - off : frag;
  if (sent != rv->bytes) {
    a->truncated |= sent > rv->bytes;
    len = off >= rv->bytes ? 0 : rv->bytes - off < len ? rv->bytes - off : len;
    if (!len) return;
  }
  if (!by_cma(e, sent)) {
    memcpy(rv->ptr + off, slot(c, e, j, me, r), len);
    return;
  }
  const uint64_t *addr =
      (const uint64_t *)(mcoll__rank_area(shm, j) + mcoll__a2a_addr_offset(c->topo.local_size));
  mcoll__peer_read(c->chan, j, rv->ptr + off, addr[me] + off, len);
}

static int reads_in_round(const struct mcoll_a2a *a, const struct mcoll_a2a_engine *e, uint32_t r,
                          int j) {
  return r < pair_rounds(e, sent_to_me(a, j));
}

/* Peers in pairwise order, but whoever has posted already goes first: with more
 * ranks than cores, waiting for one peer that is not running would stall the rest. */
static void read_round(struct mcoll_a2a *a, const struct mcoll_a2a_engine *e, uint32_t r,
                       uint32_t gen) {
  struct mcoll_comm *c = a->c;
  int m = c->topo.local_size, me = c->topo.local_rank;
  uint64_t served = 0; /* bit s: step s done in the first pass (m <= 64) */
  for (int s = 1; s < m && m <= 64; s++) {
    int j = (me - s + m) % m;
    if (reads_in_round(a, e, r, j) && mcoll__area_test_posted(c->chan, j, gen)) {
      mcoll__call_check(j, 0);
      read_pair(a, e, r, j);
      served |= 1ull << s;
    }
  }
  for (int s = 1; s < m; s++) {
    int j = (me - s + m) % m;
    if ((m <= 64 && (served >> s & 1)) || !reads_in_round(a, e, r, j)) continue;
    mcoll__area_wait_posted(c->chan, j, gen);
    mcoll__call_check(j, 0);
    read_pair(a, e, r, j);
  }
}

static void copy_own(struct mcoll_a2a *a) {
  const struct mcoll_span *s = &a->send[a->c->rank], *d = &a->recv[a->c->rank];
  if (!a->inplace && d->bytes) memcpy(d->ptr, s->ptr, d->bytes);
}

/* Small alltoall: all my blocks for node peers fit in one slot of my area
 * (node/slot.h), block k at k·block. One generation per call, and a rank may run
 * up to the slots' depth ahead of peers that are not running (oversubscribed). */
static int fits_slot(const struct mcoll_a2a *a, const struct mcoll_a2a_engine *e) {
  const struct mcoll_comm *c = a->c;
  return a->uniform && !e->double_buffer && a->block < e->cma_min &&
         (size_t)c->topo.local_size * a->block <= mcoll__slot_bytes(&c->chan->shm);
}

static void slot_exchange(struct mcoll_a2a *a) {
  struct mcoll_comm *c = a->c;
  const struct mcoll_topo *t = &c->topo;
  int m = t->local_size, me = t->local_rank;
  uint32_t lag, gen = mcoll__slot_take(c->chan, &lag);
  mcoll__slot_wait_free(&c->chan->shm, &c->chan->area_slots, gen, lag);
  char *mine = mcoll__slot_area(&c->chan->shm, me, gen);
  for (int k = 0; k < m; k++)
    if (k != me) memcpy(mine + (size_t)k * a->block, a->send[t->local_ranks[k]].ptr, a->block);
  mcoll__move_publish();
  mcoll__area_post(c->chan, gen);
  mcoll__node_call_beside(c, 1, gen);
  copy_own(a);
  for (int s = 1; s < m; s++) {
    int j = (me - s + m) % m;
    mcoll__area_wait_posted(c->chan, j, gen);
    mcoll__call_check(j, 0);
    memcpy(a->recv[t->local_ranks[j]].ptr,
           mcoll__slot_area(&c->chan->shm, j, gen) + (size_t)me * a->block, a->block);
  }
  mcoll__area_done(c->chan, gen);
}

/* A node of two ranks where both blocks between them are at most MCOLL_A2A_PAIR_MAX
 * bytes. Each rank's send to the other is the other's receive, so both know both
 * lengths and choose this alike, whatever the counts (alltoallv/w as well). My block
 * travels in my inline lines (shm/shm.h), MCOLL_INLINE_MAX bytes in each, one line
 * per generation of the call: the call takes as many generations as the larger of
 * the two blocks needs lines. Each line carries a stamp, so the reader loads all of
 * them at once and one transfer of the lines brings both data and flags, where the
 * areas' protocol moves a header, the data and a posted flag, and a done flag that
 * the next call waits on. Every line's stamp is the call's first generation: after
 * an erroneous call whose ranks took different numbers of lines, the node counts it
 * as one generation (node/area.h: mcoll__area_resync), and the next call's lines
 * must not find this one's stamps equal to theirs. */
int mcoll__a2a_pair_inline_fits(const struct mcoll_a2a *a) {
  const struct mcoll_topo *t = &a->c->topo;
  if (t->local_size != 2) return 0;
  int peer = t->local_ranks[1 - t->local_rank];
  return a->send[peer].bytes <= MCOLL_A2A_PAIR_MAX && a->recv[peer].bytes <= MCOLL_A2A_PAIR_MAX;
}

static uint32_t pair_lines(size_t bytes) {
  return bytes ? (uint32_t)((bytes + MCOLL_INLINE_MAX - 1) / MCOLL_INLINE_MAX) : 1;
}

/* Whether the n lines of rank j from generation first all hold that call: one pass
 * that loads every line before it looks at any. */
static int pair_lines_ready(const struct mcoll_shm *shm, int j, uint32_t first, uint32_t n) {
  uint32_t missing = 0;
  for (uint32_t i = 0; i < n; i++)
    missing |= atomic_load_explicit(&mcoll__inline_line(shm, j, first + i)->stamp,
                                    memory_order_acquire) ^ first;
  return missing == 0;
}

static void pair_inline_exchange(struct mcoll_a2a *a) {
  struct mcoll_comm *c = a->c;
  const struct mcoll_shm *shm = &c->chan->shm;
  int me = c->topo.local_rank, j = 1 - me, peer = c->topo.local_ranks[j];
  const struct mcoll_span *s = &a->send[peer], *rv = &a->recv[peer];
  uint32_t n = pair_lines(s->bytes > rv->bytes ? s->bytes : rv->bytes), lag = 0, gen = 0;
  for (uint32_t i = 0; i < n; i++) gen = mcoll__slot_take(c->chan, &lag);
  mcoll__slot_wait_free(&c->chan->shm, &c->chan->area_slots, gen, lag);
  uint32_t first = gen - (n - 1);
  mcoll__move_publish();
  /* Every line but the last with a plain release of its stamp: a reader that sleeps
   * waits on the last, which wakes it, and finds the others set before it. */
  for (uint32_t i = 0; i < n; i++) {
    struct mcoll_inline_line *line = mcoll__inline_line(shm, me, first + i);
    size_t off = (size_t)i * MCOLL_INLINE_MAX;
    size_t len = off >= s->bytes ? 0 : s->bytes - off < MCOLL_INLINE_MAX ? s->bytes - off : MCOLL_INLINE_MAX;
    line->len = (uint32_t)s->bytes;
    if (len) memcpy(line->data, s->ptr + off, len);
    if (i + 1 < n) atomic_store_explicit(&line->stamp, first, memory_order_release);
    else mcoll__flag_set(shm, &line->stamp, first);
  }
  /* (later calls beside this one only where it reads one generation, node/area.h) */
  if (n == 1) mcoll__node_call_beside(c, 1, gen);
  copy_own(a);
  int ready = 0;
  for (int i = 0; i <= shm->spin && !ready; i++) ready = pair_lines_ready(shm, j, first, n);
  for (uint32_t i = 0; i < n && !ready; i++) /* the last first: the one that wakes */
    mcoll__flag_wait_exact(shm, &mcoll__inline_line(shm, j, first + (i + n - 1) % n)->stamp, first);
  size_t sent = mcoll__inline_line(shm, j, first)->len;
  if (sent != rv->bytes) {
    a->truncated |= sent > rv->bytes;
    mcoll__move_disagree();
  }
  /* (without a call descriptor to escape by: what fits in both) */
  size_t len = sent < rv->bytes ? sent : rv->bytes;
  if (len > (size_t)n * MCOLL_INLINE_MAX) len = (size_t)n * MCOLL_INLINE_MAX;
  for (uint32_t i = 0; (size_t)i * MCOLL_INLINE_MAX < len; i++) {
    size_t off = (size_t)i * MCOLL_INLINE_MAX;
    memcpy(rv->ptr + off, mcoll__inline_line(shm, j, first + i)->data,
           len - off < MCOLL_INLINE_MAX ? len - off : MCOLL_INLINE_MAX);
  }
  mcoll__area_done(c->chan, gen);
}

/* Alltoallv/w with single copy on: one generation per call, in one slot of each
 * area. The slot opens with a table, an entry per node-local rank: where my block
 * for it lies, an offset in the slot or (single copy) its address in my buffer.
 * Blocks below cma_min go into the slot while they fit; the others are read from my
 * buffer. Nobody needs another rank's counts to take part, so back-to-back calls
 * overlap, and a call costs one synchronisation instead of a header round first. */
struct v_entry {
  uint64_t where, len, by_cma;
};

static size_t v_table_bytes(int m) {
  return (sizeof(struct v_entry) * (size_t)m + MCOLL_LINE - 1) / MCOLL_LINE * MCOLL_LINE;
}

/* The same on every rank of the node: the engine (the node's choice), the shape, and
 * oversubscription: running ahead pays where peers are not running; with a core
 * each, ranks run in step and the whole area, still in the caches, is faster
 * than the slots. */
static int one_generation_v(const struct mcoll_a2a *a, const struct mcoll_a2a_engine *e) {
  return !a->uniform && a->c->chan->shm.oversubscribed && a->c->chan->cma_ok && e->cma_min != SIZE_MAX &&
         e->cma_frag == SIZE_MAX &&
         !e->double_buffer && v_table_bytes(a->c->topo.local_size) < mcoll__slot_bytes(&a->c->chan->shm);
}

static void read_v(struct mcoll_a2a *a, int j, uint32_t gen) {
  struct mcoll_comm *c = a->c;
  const struct mcoll_span *rv = &a->recv[c->topo.local_ranks[j]];
  const char *slot = mcoll__slot_area(&c->chan->shm, j, gen);
  const struct v_entry *en = (const struct v_entry *)slot + c->topo.local_rank;
  /* Matching signatures make the lengths equal; a mismatch must not read past. */
  size_t len = en->len < rv->bytes ? en->len : rv->bytes;
  if (en->len > rv->bytes) a->truncated = 1;
  if (!len) return;
  if (en->by_cma) mcoll__peer_read(c->chan, j, rv->ptr, en->where, len);
  else memcpy(rv->ptr, slot + en->where, len);
}

static void slot_exchange_v(struct mcoll_a2a *a, const struct mcoll_a2a_engine *e) {
  struct mcoll_comm *c = a->c;
  const struct mcoll_topo *t = &c->topo;
  const struct mcoll_shm *shm = &c->chan->shm;
  int m = t->local_size, me = t->local_rank, cma_sends = 0;
  uint32_t lag, gen = mcoll__slot_take(c->chan, &lag);
  mcoll__slot_wait_free(&c->chan->shm, &c->chan->area_slots, gen, lag);
  char *mine = mcoll__slot_area(shm, me, gen);
  struct v_entry *table = (struct v_entry *)mine;
  size_t pos = v_table_bytes(m), room = mcoll__slot_bytes(shm);
  for (int k = 0; k < m; k++) {
    const struct mcoll_span *s = &a->send[t->local_ranks[k]];
    if (k == me) continue;
    if (s->bytes < e->cma_min && s->bytes <= room - pos) {
      if (s->bytes) memcpy(mine + pos, s->ptr, s->bytes);
      table[k] = (struct v_entry){pos, s->bytes, 0};
      pos += s->bytes;
    } else {
      table[k] = (struct v_entry){mcoll__peer_addr(s->ptr), s->bytes, 1};
      cma_sends = 1;
    }
  }
  mcoll__move_publish();
  mcoll__area_post(c->chan, gen);
  mcoll__node_call_beside(c, 1, gen);
  copy_own(a);
  /* Whoever has posted first, then the rest in pairwise order (see read_round). */
  uint64_t served = 0;
  for (int s = 1; s < m && m <= 64; s++) {
    int j = (me - s + m) % m;
    if (a->recv[t->local_ranks[j]].bytes && mcoll__area_test_posted(c->chan, j, gen)) {
      mcoll__call_check(j, 0);
      read_v(a, j, gen);
      served |= 1ull << s;
    }
  }
  for (int s = 1; s < m; s++) {
    int j = (me - s + m) % m;
    if ((m <= 64 && (served >> s & 1)) || !a->recv[t->local_ranks[j]].bytes) continue;
    mcoll__area_wait_posted(c->chan, j, gen);
    mcoll__call_check(j, 0);
    read_v(a, j, gen);
  }
  mcoll__area_done(c->chan, gen);
  /* Single-copy readers read my buffers: they stay mine until those are done. */
  for (int k = 0; k < m && cma_sends; k++)
    if (k != me && a->send[t->local_ranks[k]].bytes && table[k].by_cma)
      mcoll__hold_wait(shm, MCOLL_MARK_AREA, k, gen);
}

static void exchange(struct mcoll_a2a *a, const struct mcoll_a2a_engine *e) {
  if (e->pair_inline) {
    pair_inline_exchange(a);
    return;
  }
  if (fits_slot(a, e)) {
    slot_exchange(a);
    return;
  }
  if (one_generation_v(a, e)) {
    slot_exchange_v(a, e);
    return;
  }
  struct mcoll_comm *c = a->c;
  const struct mcoll_topo *t = &c->topo;
  int m = t->local_size, me = t->local_rank;
  char *mine = mcoll__rank_area(&c->chan->shm, me);
  uint64_t *my_addr = (uint64_t *)(mine + mcoll__a2a_addr_offset(m));
  uint64_t *my_lens = (uint64_t *)(mine + MCOLL_A2A_LEN_OFFSET);
  uint32_t rounds = a->uniform ? pair_rounds(e, a->block) : 1;
  int cma_sends = a->uniform && by_cma(e, a->block);
  for (int k = 0; k < m && !a->uniform; k++) {
    size_t bytes = a->send[t->local_ranks[k]].bytes;
    if (k == me) continue;
    if (pair_rounds(e, bytes) > rounds) rounds = pair_rounds(e, bytes);
    if (bytes && by_cma(e, bytes)) cma_sends = 1;
  }
  for (uint32_t r = 0; r < rounds; r++) {
    uint32_t gen = mcoll__area_next(c->chan);
    /* Double-buffered, round r only needs the half of round r-2 to be free. */
    mcoll__area_wait_free(c->chan, e->double_buffer && r > 0 ? gen - 1 : gen);
    if (r == 0) {
      *(volatile uint32_t *)mine = rounds;
      for (int k = 0; k < m && !a->uniform; k++) my_lens[k] = a->send[t->local_ranks[k]].bytes;
      for (int k = 0; k < m && cma_sends; k++)
        my_addr[k] = mcoll__peer_addr(a->send[t->local_ranks[k]].ptr);
    }
    write_round(a, e, r);
    mcoll__move_publish();
    mcoll__area_post(c->chan, gen);
    if (r == 0) copy_own(a); /* while the peers finish writing */
    for (int s = 1; s < m && r == 0 && !a->uniform; s++) {
      int j = (me - s + m) % m;
      mcoll__area_wait_posted(c->chan, j, gen);
      mcoll__call_check(j, 0);
      uint32_t theirs = *(volatile uint32_t *)mcoll__rank_area(&c->chan->shm, j);
      if (theirs > rounds) rounds = theirs;
    }
    read_round(a, e, r, gen);
    mcoll__area_done(c->chan, gen);
  }
  /* Peers read my buffers directly: they stay mine only once everyone is done. */
  if (cma_sends) mcoll__hold_wait(&c->chan->shm, MCOLL_MARK_AREA, -1, mcoll__area_last(c->chan));
}

struct a2a_run {
  struct mcoll_a2a *a;
  const struct mcoll_a2a_engine *e;
  int known; /* every rank's digest is its block for me: alltoall, or two ranks */
};

static void run(struct mcoll_comm *c, const void *arg) {
  (void)c;
  const struct a2a_run *run = arg;
  exchange(run->a, run->e);
}

static size_t expects(const void *arg, int x) {
  const struct a2a_run *run = arg;
  return run->known ? run->a->recv[run->a->c->topo.local_ranks[x]].bytes : SIZE_MAX;
}

int mcoll__a2a_node_engine(struct mcoll_a2a *a, const struct mcoll_a2a_engine *e) {
  const struct mcoll_topo *t = &a->c->topo;
  /* A rank's call digest is one length: its block (alltoall), or on two ranks its
   * block for the other; alltoallv/w beyond rely on the tables that carry lengths. */
  struct a2a_run arg = {a, e, a->uniform || t->local_size == 2};
  size_t mine = a->uniform ? a->block
                : t->local_size == 2 ? a->send[t->local_ranks[1 - t->local_rank]].bytes : 0;
  struct mcoll_move_guard guard = {.my_len = mine, .reads = 1,
                                   .expects = a->uniform ? NULL : expects, .arg = &arg, .body = run};
  int err = mcoll__move_guarded(a->c, &guard);
  return err == MPI_SUCCESS && a->truncated ? MPI_ERR_TRUNCATE : err;
}
