/* Intra-node scatter through the source's area (node/area.h) or by single copy.
 *
 * Only the source knows every length, so each generation's area starts with a
 * table: the call's round count, and per node rank where its part lies (an offset
 * in the area, or in the source's published buffer for single-copy ranks). Round r
 * gives every area-moved rank at most q bytes, q = what fits divided among them.
 * Single-copy readers go in groups of MCOLL_BCAST_K (bounded
 * concurrency on one source buffer); group g starts when group g-1 is done. Most
 * calls need only one generation (one_generation below), and back-to-back ones
 * overlap. */
#include <stdint.h>
#include <string.h>

#include "coll/beside.h"
#include "coll/scatter/scatter.h"
#include "core/config.h"
#include "node/area.h"
#include "node/publish.h"

struct entry {
  uint64_t off, len; /* off: in the area; for a single-copy reader, the block's address */
  int32_t reader; /* order among single-copy readers, -1 for area-moved ranks */
  int32_t pad;
};

_Static_assert(sizeof(struct entry) <= MCOLL_INLINE_MAX, "an entry fits an inline line");

struct head {
  uint32_t rounds;
  uint32_t pad;
  struct entry entry[];
};

/* The length of an inline line that holds an entry, not a block's bytes: a member
 * that expects another kind of line than the source wrote (lengths that disagree)
 * can tell. */
#define ENTRY_LINE UINT32_MAX

static void put_entry(const struct mcoll_shm *shm, struct mcoll_inline_line *line, uint32_t gen,
                      const struct entry *e) {
  line->len = ENTRY_LINE;
  memcpy(line->data, e, sizeof *e);
  mcoll__flag_set(shm, &line->stamp, gen);
}

static size_t head_bytes(int n) {
  return (sizeof(struct head) + sizeof(struct entry) * (size_t)n + 63) / 64 * 64;
}

static enum mcoll_move move_of(const struct mcoll_comm *c, const struct mcoll_scatter_node *s,
                               size_t len) {
  return mcoll__move_of(c, len, s->forced, s->cma_min);
}

/* One generation with the table and every part in one slot of the areas (node/slot.h),
 * only when every block has the same length, which all ranks know. */
static int small_call(const struct mcoll_comm *c, const struct mcoll_scatter_node *s) {
  size_t parts = s->my_len * (size_t)(c->chan->shm.local_size - 1);
  return s->uniform && move_of(c, s, s->my_len) == MCOLL_MOVE_AREA &&
         head_bytes(c->chan->shm.local_size) + parts <= mcoll__slot_bytes(&c->chan->shm);
}

/* One generation per call, its table in one slot of the source's area (node/slot.h):
 * parts that fit go in the slot, the others by single copy. With single copy on,
 * every call (all ranks can tell); without, calls of equal blocks that all fit.
 * Back-to-back calls overlap: the source moves on once its parts are in the slot. */
static int one_generation(const struct mcoll_comm *c, const struct mcoll_scatter_node *s) {
  return (c->chan->cma_ok && s->forced != MCOLL_MOVE_AREA) || small_call(c, s);
}

static void one_generation_source(struct mcoll_comm *c, const struct mcoll_scatter_node *s) {
  const struct mcoll_shm *shm = &c->chan->shm;
  const struct mcoll_topo *t = &c->topo;
  int me = shm->local_rank, n = shm->local_size, readers = 0;
  uint32_t lag, gen = mcoll__slot_take(c->chan, &lag);
  char *slot = mcoll__slot_area(shm, me, gen);
  struct head *head = (struct head *)slot;
  size_t pos = head_bytes(n), room = mcoll__slot_bytes(shm);
  mcoll__area_done(c->chan, gen); /* the source reads no one's area */
  mcoll__slot_wait_free(&c->chan->shm, &c->chan->area_slots, gen, lag);
  head->rounds = 1;
  for (int step = 1; step < n; step++) {
    int j = (me + step) % n;
    size_t len = mcoll__block_len(s->src, t->local_ranks[j]);
    const char *block = mcoll__block_ptr(s->src, t->local_ranks[j]);
    struct entry *e = &head->entry[j];
    if (len <= MCOLL_INLINE_MAX && move_of(c, s, len) != MCOLL_MOVE_CMA) {
      /* The member, which knows its length too, polls its inline line. */
      mcoll__inline_put(shm, mcoll__inline_line(shm, j, gen), gen, block, len);
      *e = (struct entry){.off = 0, .len = len, .reader = -1};
      continue;
    }
    if (move_of(c, s, len) == MCOLL_MOVE_CMA || pos + len > room) {
      *e = (struct entry){.off = mcoll__peer_addr(block), .len = len, .reader = readers++};
    } else {
      *e = (struct entry){.off = pos, .len = len, .reader = -1};
      if (len) mcoll__area_write(slot + pos, block, len);
      pos += len;
    }
    /* The member polls its inline line anyway: its entry goes there too, so that it
     * need not wait for the table (one cross-core transfer fewer per call). */
    put_entry(shm, mcoll__inline_line(shm, j, gen), gen, e);
  }
  /* (Every member's line is stamped by now: how a member tells this protocol from
   * the whole area's, member_side.) */
  mcoll__area_post(c->chan, gen);
  mcoll__node_call_beside(c, 0, gen);
  if (s->mine && s->my_len) memcpy(s->mine, mcoll__block_ptr(s->src, c->rank), s->my_len);
  /* Single-copy readers read my buffer: keep it until they are done. */
  for (int j = 0; j < n && readers; j++)
    if (j != me && head->entry[j].reader >= 0)
      mcoll__hold_wait(shm, MCOLL_MARK_AREA, j, gen);
}

static void source_side(struct mcoll_comm *c, const struct mcoll_scatter_node *s) {
  const struct mcoll_shm *shm = &c->chan->shm;
  const struct mcoll_topo *t = &c->topo;
  int me = shm->local_rank, n = shm->local_size;
  char *area = mcoll__rank_area(shm, me);
  struct head *head = (struct head *)area;
  size_t hbytes = head_bytes(n);
  uint32_t rounds = 1;
  int sharers = 0, readers = 0;

  for (int j = 0; j < n; j++)
    if (j != me && mcoll__block_len(s->src, t->local_ranks[j]) &&
        move_of(c, s, mcoll__block_len(s->src, t->local_ranks[j])) == MCOLL_MOVE_AREA)
      sharers++;
  size_t share = sharers ? (shm->area_bytes - hbytes) / (size_t)sharers : 0;
  if (share > 64) share &= ~(size_t)63;
  for (int j = 0; j < n && share; j++) {
    size_t len = mcoll__block_len(s->src, t->local_ranks[j]);
    if (j != me && move_of(c, s, len) == MCOLL_MOVE_AREA && mcoll__area_chunks(len, share) > rounds)
      rounds = mcoll__area_chunks(len, share);
  }
  uint32_t base = mcoll__area_take(c->chan, rounds);
  mcoll__area_done(c->chan, base + rounds); /* the source reads no one's area */

  for (uint32_t r = 1; r <= rounds; r++) {
    size_t at = (size_t)(r - 1) * share, pos = hbytes;
    mcoll__area_wait_free(c->chan, base + r);
    head->rounds = rounds;
    for (int step = 1; step < n; step++) {
      int j = (me + step) % n;
      size_t len = mcoll__block_len(s->src, t->local_ranks[j]);
      const char *block = mcoll__block_ptr(s->src, t->local_ranks[j]);
      struct entry *e = &head->entry[j];
      if (move_of(c, s, len) == MCOLL_MOVE_CMA) {
        if (r > 1) continue;
        *e = (struct entry){.off = mcoll__peer_addr(block), .len = len, .reader = readers++};
        continue;
      }
      *e = (struct entry){.off = pos, .len = at < len ? len - at : 0, .reader = -1};
      if (e->len > share) e->len = share;
      if (e->len) mcoll__area_write(area + pos, block + at, e->len);
      pos += e->len;
    }
    mcoll__area_post(c->chan, base + r);
    if (r == 1 && s->mine && s->my_len)
      memcpy(s->mine, mcoll__block_ptr(s->src, c->rank), s->my_len);
  }
  /* Single-copy readers read my buffer: keep it until they are done. */
  for (int j = 0; j < n && readers; j++)
    if (j != me && move_of(c, s, mcoll__block_len(s->src, t->local_ranks[j])) == MCOLL_MOVE_CMA)
      mcoll__hold_wait(shm, MCOLL_MARK_AREA, j, base + rounds);
}

/* Waits until the single-copy readers of the group before mine are done. With
 * more ranks than cores no more than the cores read at once anyway, and each turn
 * would cost a scheduler round: all go at once. */
static void wait_turn(const struct mcoll_comm *c, const struct head *head, int reader,
                      uint32_t last) {
  const struct mcoll_shm *shm = &c->chan->shm;
  if (shm->oversubscribed) return;
  int k = mcoll__cfg.BCAST_K > 0 ? (int)mcoll__cfg.BCAST_K : 1;
  int group = reader / k;
  if (group == 0) return;
  for (int j = 0; j < shm->local_size; j++) {
    int other = head->entry[j].reader;
    if (j != shm->local_rank && other >= (group - 1) * k && other < group * k)
      mcoll__hold_wait(shm, MCOLL_MARK_AREA, j, last);
  }
}

/* What a member got: MPI_ERR_TRUNCATE when the source sent more than it expects. */
static int got(size_t sent, size_t expected) {
  return sent > expected ? MPI_ERR_TRUNCATE : MPI_SUCCESS;
}

/* A member waiting in its inline line for a source that went by the whole area
 * instead: the source posted the generation and left the line as it was. */
struct source_wait {
  const struct mcoll_channel *ch;
  const struct mcoll_inline_line *line;
  int source;
  uint32_t gen;
};

static int source_went_whole_area(void *arg) {
  const struct source_wait *w = arg;
  return mcoll__area_test_posted(w->ch, w->source, w->gen) && !mcoll__inline_test(w->line, w->gen);
}

/* Either kind of call. Which one runs is the source's choice, from the lengths it
 * sends; a member's own length may say otherwise in an erroneous program (it expects
 * fewer or more bytes, across an edge), so the member follows the source: a
 * one-generation source stamps every member's inline line before it posts, a
 * whole-area source posts without. A member that expects one generation waits for its
 * line and looks at the source's posted only past the spin; one that expects the
 * whole area (or a single copy, which needs the table) waits for posted and then looks
 * at its line. Then the line or the table says how the source sent my block, and the
 * member reads it so (what fits). */
static int member_side(struct mcoll_comm *c, const struct mcoll_scatter_node *s, int one_gen) {
  const struct mcoll_shm *shm = &c->chan->shm;
  int me = shm->local_rank, source = s->source;
  struct mcoll_slot_run run = c->chan->area_slots;
  uint32_t base = one_gen ? mcoll__slot_take(c->chan, NULL) - 1 : mcoll__area_last(c->chan);
  struct mcoll_inline_line *line = mcoll__inline_line(shm, me, base + 1);
  int source_one_gen;
  /* (Not beside later calls: a member only reads; see gather_node.c.) */
  if (one_gen && move_of(c, s, s->my_len) != MCOLL_MOVE_CMA) {
    struct source_wait w = {c->chan, line, source, base + 1};
    source_one_gen = mcoll__flag_wait_unless(shm, &line->stamp, base + 1, source_went_whole_area, &w);
  } else {
    mcoll__area_wait_posted(c->chan, source, base + 1);
    source_one_gen = mcoll__inline_test(line, base + 1);
  }
  if (source_one_gen && !one_gen) mcoll__slot_take(c->chan, NULL);
  if (!source_one_gen && one_gen) mcoll__slot_give_back(c->chan, base + 1, run);

  if (source_one_gen) { /* my block itself, or my entry, is in my line */
    if (line->len != ENTRY_LINE) {
      size_t len = line->len < s->my_len ? line->len : s->my_len;
      if (len) memcpy(s->mine, line->data, len);
      mcoll__area_done(c->chan, base + 1);
      return got(line->len, s->my_len);
    }
    struct entry e;
    memcpy(&e, line->data, sizeof e);
    size_t have = e.len < s->my_len ? (size_t)e.len : s->my_len;
    if (e.reader < 0) { /* a part in the slot */
      if (have) memcpy(s->mine, mcoll__slot_area(shm, source, base + 1) + e.off, have);
    } else { /* by single copy, in my turn (the table, complete once posted) */
      const struct head *head = (const struct head *)mcoll__slot_area(shm, source, base + 1);
      mcoll__area_wait_posted(c->chan, source, base + 1);
      wait_turn(c, head, e.reader, base + 1);
      mcoll__peer_read(c->chan, source, s->mine, e.off, have);
    }
    mcoll__area_done(c->chan, base + 1);
    return got(e.len, s->my_len);
  }

  /* The whole area: the source's table gives the count of generations, and my part
   * in each. */
  const char *area = mcoll__rank_area(shm, source);
  const struct head *head = (const struct head *)area;
  mcoll__area_wait_posted(c->chan, source, base + 1);
  uint32_t rounds = head->rounds;
  size_t sent = 0, have = 0;
  mcoll__area_take(c->chan, rounds);
  if (head->entry[me].reader >= 0) {
    struct entry e = head->entry[me];
    wait_turn(c, head, e.reader, base + rounds);
    have = e.len < s->my_len ? (size_t)e.len : s->my_len;
    mcoll__peer_read(c->chan, source, s->mine, e.off, have);
    sent = e.len;
  } else {
    for (uint32_t r = 1;; r++) {
      struct entry e = head->entry[me];
      size_t len = e.len < s->my_len - have ? (size_t)e.len : s->my_len - have;
      if (len) memcpy(s->mine + have, area + e.off, len);
      have += len;
      sent += e.len;
      if (sent >= s->my_len || r == rounds) break;
      mcoll__area_done(c->chan, base + r);
      mcoll__area_wait_posted(c->chan, source, base + r + 1);
    }
  }
  mcoll__area_done(c->chan, base + rounds);
  return got(sent, s->my_len);
}

int mcoll__scatter_node(struct mcoll_comm *c, const struct mcoll_scatter_node *s) {
  if (!mcoll__node_has_peers(c)) {
    if (s->mine && s->my_len) memcpy(s->mine, mcoll__block_ptr(s->src, c->rank), s->my_len);
    return MPI_SUCCESS;
  }
  int one_gen = one_generation(c, s);
  if (c->chan->shm.local_rank != s->source) return member_side(c, s, one_gen);
  if (one_gen) one_generation_source(c, s);
  else source_side(c, s);
  return MPI_SUCCESS;
}

/* The members a one-generation source would hand their block by single copy (their
 * block goes so, or does not fit its slot beside the others': one_generation_source),
 * for which it would wait. At a member (known lengths only): every member's block
 * has my length. */
static int source_readers(const struct mcoll_comm *c, const struct mcoll_scatter_node *s) {
  const struct mcoll_shm *shm = &c->chan->shm;
  int me = shm->local_rank, n = shm->local_size, at_source = me == s->source, readers = 0;
  size_t pos = head_bytes(n), room = mcoll__slot_bytes(shm);
  for (int step = 1; step < n; step++) {
    int j = (s->source + step) % n;
    size_t len = at_source ? mcoll__block_len(s->src, c->topo.local_ranks[j]) : s->my_len;
    if (len <= MCOLL_INLINE_MAX && move_of(c, s, len) != MCOLL_MOVE_CMA) continue;
    if (move_of(c, s, len) == MCOLL_MOVE_CMA || pos + len > room) readers++;
    else pos += len;
  }
  return readers;
}

int mcoll__scatter_node_ready(struct mcoll_comm *c, const struct mcoll_scatter_node *s, int known) {
  if (!one_generation(c, s)) return -2;
  struct mcoll_channel *ch = c->chan;
  const struct mcoll_shm *shm = &ch->shm;
  uint32_t gen = ch->area_gen + 1;
  int at_source = shm->local_rank == s->source;
  if ((at_source || known) && source_readers(c, s)) return known ? -2 : -1;
  if (at_source) {
    struct mcoll_slot_run run = ch->area_slots; /* (a copy: the call begins the real one) */
    uint32_t lag = mcoll__slot_begin(&run, gen);
    return mcoll__slot_poll_free(shm, &run, gen, lag) ? 1 : -1;
  }
  /* A member: its block, or its entry, in its line (a single-copy reader's entry
   * means waiting its turn among the readers: not here). */
  if (move_of(c, s, s->my_len) == MCOLL_MOVE_CMA) return -1;
  struct mcoll_inline_line *line = mcoll__inline_line(shm, shm->local_rank, gen);
  if (!mcoll__flag_poll(shm, &line->stamp, gen)) return -1;
  if (line->len != ENTRY_LINE) return 1;
  struct entry e;
  memcpy(&e, line->data, sizeof e);
  return e.reader < 0 ? 1 : -1;
}
