/* The flat intra-node engine, for small messages: every rank posts its input in its
 * area and folds every input it needs itself, in rank order, straight into its
 * result. One round of synchronisation, no scratch.
 *
 * A call that fits in a slot (1/RED_SLOTS of an area) writes generation g into slot
 * g % RED_SLOTS, so it needs only the readers of the generation that last used that
 * slot to be done, or those of the last generation that used whole areas (before
 * the current run of slot calls, which every rank of the node sees alike):
 * back-to-back small calls run up to RED_SLOTS - 1 generations ahead of their
 * readers. Each slot ends with a stamp, the generation last written into it; once a
 * run has filled every slot the readers wait on the stamp instead of the posted
 * flag, and an input of up to STAMP_LINE - 8 bytes sits in the stamp's cache line,
 * so the line that says "ready" brings the data with it.
 *
 * Beside the stamp, the writer puts the digest of its call (shm/call.h): the reader
 * compares it with its own before using the data, for nothing (the line is there).
 * Ranks that disagree on a call (an erroneous program) may then disagree on runs
 * too, so writers post even when their readers wait on stamps, and stamps are
 * waited for exactly: a larger value is data that another engine wrote there. */
#include "coll/beside.h"
#include "coll/move.h"
#include "coll/reduce/red.h"
#include "node/area.h"
#include "node/slot.h"
#include "shm/call.h"

#define RED_SLOTS MCOLL_AREA_SLOTS
#define STAMP_LINE 64

struct slot {
  size_t base; /* byte offset of the chunk's data in every area */
  size_t stamp; /* byte offset of the stamp in every area (the call's digest before it) */
  int stamped; /* the readers may wait on stamps */
};

/* Output o of chunk k: the fold of areas [0, upto) in rank order, with no scratch.
 * Every rank that computes the same output folds the same operands in the same
 * order (float sums must agree to the bit): a commutative op from input 0 upwards
 * (my own input read where it is cheapest: in place, or from my area when in
 * place would be overwritten by input 0's copy), others from the right (inout =
 * lower op inout). Either way one copy and upto - 1 folds, as from my own input. */
static void fold_out(const struct mcoll_node_layout *l, const struct mcoll_node_red *r, size_t k,
                     size_t base, const struct mcoll_node_out *o, int own_in_area) {
  const struct mcoll_red_type *t = r->t;
  const struct mcoll_shm *shm = &r->c->chan->shm;
  int me = shm->local_rank;
  size_t pos = 0, displ = 0;
  for (int b = 0; b < l->nblocks; b++) {
    size_t cnt = mcoll__node_block(l, b), off, n;
    mcoll__node_slice(l, cnt, k, &off, &n);
    int mine = o->own_block && (b == me || l->nblocks == 1);
    if ((!o->own_block || mine) && n) {
      char *dst = mcoll__red_at(t, o->dst, mine ? off : displ + off);
      size_t at = base + pos * t->extent;
      if (t->commutative && me < o->upto) {
        /* Input 0 first: dst may be my input (MPI_IN_PLACE), which rank 0 starts from
         * and the others then read from their area. */
        const char *own = me == 0 || !own_in_area ? mcoll__red_at(t, r->in, displ + off)
                                                  : mcoll__rank_area(shm, me) + at;
        mcoll__red_copy(t, dst, me == 0 ? own : mcoll__rank_area(shm, 0) + at, n);
        for (int src = 1; src < o->upto; src++)
          mcoll__red_fold(t, src == me ? own : mcoll__rank_area(shm, src) + at, dst, n);
      } else {
        mcoll__red_copy(t, dst, mcoll__rank_area(shm, o->upto - 1) + at, n);
        for (int src = o->upto - 2; src >= 0; src--)
          mcoll__red_fold(t, mcoll__rank_area(shm, src) + at, dst, n);
      }
    }
    pos += n;
    displ += cnt;
  }
}

/* Whether an output overlaps my input. */
static int in_place(const struct mcoll_node_red *r, size_t span) {
  for (int i = 0; i < 2; i++) {
    const struct mcoll_node_out *o = &r->out[i];
    if (o->upto > 0 && o->dst < r->in + span && r->in < o->dst + span) return 1;
  }
  return 0;
}

static mcoll_flag *stamp_of(const struct mcoll_shm *shm, int r, const struct slot *s) {
  return (mcoll_flag *)(mcoll__rank_area(shm, r) + s->stamp);
}

static uint32_t *digest_of(const struct mcoll_shm *shm, int r, const struct slot *s) {
  return (uint32_t *)(mcoll__rank_area(shm, r) + s->stamp - sizeof(uint32_t));
}

/* After src's flag said generation gen is there: whether it is src's part of this
 * call (whole areas: the descriptor beside the posted flag; slots: the stamp line). */
static void check_peer(const struct mcoll_shm *shm, int src, const struct slot *s, int slotted,
                       uint32_t gen) {
  if (!slotted) {
    mcoll__call_check(src, 0);
    return;
  }
  if (atomic_load_explicit(stamp_of(shm, src, s), memory_order_acquire) != gen ||
      *digest_of(shm, src, s) != mcoll__call_current->digest)
    mcoll__call_escape();
}

/* Slot gen % RED_SLOTS begun in run (the slot protocol of node/slot.h on the
 * channel's red_slots run); *lag: the writer's lag for mcoll__slot_wait_free. */
static struct slot slot_place(const struct mcoll_shm *shm, struct mcoll_slot_run *run, uint32_t gen,
                              size_t span, uint32_t *lag) {
  size_t slot_bytes = shm->area_bytes / RED_SLOTS, start = (gen % RED_SLOTS) * slot_bytes;
  /* The context's first area generation: every stamp is valid, as if a run of slot
   * calls had filled them all, and the first calls may wait on stamps. */
  mcoll__slot_run_fresh(run, gen, RED_SLOTS);
  *lag = mcoll__slot_begin_n(run, gen, RED_SLOTS);
  struct slot s = {start, start + slot_bytes - sizeof(mcoll_flag),
                   mcoll__slot_run_full(run, gen, RED_SLOTS)};
  if (span <= STAMP_LINE - 2 * sizeof(mcoll_flag)) s.base = start + slot_bytes - STAMP_LINE;
  return s;
}

/* Takes slot gen % RED_SLOTS once the readers of the slot's previous generation are
 * done (every rank stamps its slot, even one that writes no data). */
static struct slot slot_start(struct mcoll_comm *c, uint32_t gen, size_t span) {
  uint32_t lag;
  struct slot s = slot_place(&c->chan->shm, &c->chan->red_slots, gen, span, &lag);
  mcoll__slot_wait_free(&c->chan->shm, &c->chan->red_slots, gen, lag);
  return s;
}

/* Whether the call goes through one slot (else whole areas, chunk by chunk). */
static int slotted_call(const struct mcoll_node_layout *l, const struct mcoll_shm *shm, size_t span) {
  size_t slot_bytes = shm->area_bytes / RED_SLOTS;
  return l->nchunks == 1 && slot_bytes > STAMP_LINE && span <= slot_bytes - STAMP_LINE;
}

/* The outputs' largest fold: the inputs this rank reads. */
static int inputs_needed(const struct mcoll_node_red *r) {
  return r->out[0].upto > r->out[1].upto ? r->out[0].upto : r->out[1].upto;
}

void mcoll__node_red_flat(const struct mcoll_node_red *r) {
  struct mcoll_comm *c = r->c;
  if (!mcoll__node_has_peers(c)) {
    mcoll__node_alone(r);
    return;
  }
  const struct mcoll_shm *shm = &c->chan->shm;
  int me = shm->local_rank;
  int need = inputs_needed(r);
  struct mcoll_node_layout l;
  mcoll__node_layout(&l, r, shm->area_bytes / r->t->extent);
  size_t span = mcoll__red_span(r->t, r->count);
  int slotted = slotted_call(&l, shm, span);
  /* Nobody reads the area of a dest of a commutative op: it reads its input in
   * place, unless that is its output and input 0 goes there first. */
  int writes = r->dest - 1 != me || !r->t->commutative ||
               (me != 0 && in_place(r, mcoll__red_span(r->t, r->count)));
  /* Whole areas: readers look for the call's descriptor beside posted. */
  if (!slotted) mcoll__call_publish(mcoll__call_current);
  for (size_t k = 0; k < l.nchunks; k++) {
    uint32_t gen = mcoll__area_next(c->chan);
    struct slot s = {0, 0, 0};
    if (slotted) s = slot_start(c, gen, span);
    else if (writes) mcoll__area_wait_free(c->chan, gen);
    if (writes) mcoll__node_chunk_in(&l, r, k, mcoll__rank_area(shm, me) + s.base);
    /* A call that may let later ones start (coll/beside.h) puts its descriptor in its
     * data line and log before it posts: its readers may then find this rank gone on
     * to a later call, and its log must still say which digest this call had. */
    if (slotted && writes && !mcoll__call_current->published && mcoll__node_beside_possible(c))
      mcoll__call_publish(mcoll__call_current);
    /* Every slot call stamps its slot, so that later calls of the run may trust it. */
    if (slotted) {
      *digest_of(shm, me, &s) = mcoll__call_current->digest;
      mcoll__flag_set(shm, stamp_of(shm, me, &s), gen);
    }
    /* Readers waiting on stamps do not look at posted: a plain store, no wake-up (a
     * reader that waits on it instead, after a disagreement, polls it anyway). */
    if (writes && s.stamped)
      atomic_store_explicit(&shm->data[me].posted, gen, memory_order_release);
    else if (writes) mcoll__area_post(c->chan, gen);
    if (slotted && writes && mcoll__node_call_beside(c, need > 0, gen))
      mcoll__call_current->beside = 1;
    for (int src = 0; src < need; src++) {
      if (src == me) continue;
      if (s.stamped) mcoll__flag_wait_exact(shm, stamp_of(shm, src, &s), gen);
      else mcoll__area_wait_posted(c->chan, src, gen);
      check_peer(shm, src, &s, slotted, gen);
    }
    for (int i = 0; i < 2; i++)
      if (r->out[i].upto > 0) fold_out(&l, r, k, s.base, &r->out[i], writes);
    mcoll__area_done(c->chan, gen);
  }
}

/* The checks of the engine's waits, polled, on a copy of the slots' run: the call's
 * slot free, and each input this rank folds posted (or stamped) with this call's
 * generation and digest (else a wait, or an escape, would follow). */
int mcoll__node_red_flat_ready(const struct mcoll_node_red *r, uint32_t digest, int spin) {
  struct mcoll_comm *c = r->c;
  const struct mcoll_shm *shm = &c->chan->shm;
  struct mcoll_node_layout l;
  mcoll__node_layout(&l, r, shm->area_bytes / r->t->extent);
  size_t span = mcoll__red_span(r->t, r->count);
  if (!slotted_call(&l, shm, span)) return 0;
  uint32_t gen = mcoll__area_last(c->chan) + 1, lag;
  struct mcoll_slot_run run = c->chan->red_slots;
  struct slot s = slot_place(shm, &run, gen, span, &lag);
  if (!mcoll__slot_poll_free(shm, &run, gen, lag)) return 0;
  for (int src = 0; src < inputs_needed(r); src++) {
    if (src == shm->local_rank) continue;
    mcoll_flag *flag = s.stamped ? stamp_of(shm, src, &s) : &shm->data[src].posted;
    if (!(spin ? mcoll__flag_poll(shm, flag, gen)
               : mcoll__reached(atomic_load_explicit(flag, memory_order_acquire), gen)) ||
        atomic_load_explicit(stamp_of(shm, src, &s), memory_order_acquire) != gen ||
        *digest_of(shm, src, &s) != digest)
      return 0;
  }
  return 1;
}
