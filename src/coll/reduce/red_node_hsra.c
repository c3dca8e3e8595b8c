/* HSRA: hierarchical segmented reduction in the node's areas (docs/architecture.md).
 *
 * Chunk by chunk, every rank copies its input into its area. Then, stage by stage
 * (one per level of the node, finest first, then the whole node), the members of a
 * group split the chunk into segments and member i carries segment i along the
 * group's parts in order: area(a)[seg] is folded into area(b)[seg] (b = a op b)
 * and so on, so the group's result ends in the area of its last part (its "tail")
 * with no scratch and no extra copy. Without levels the chain runs over every rank
 * in rank order and leaves the prefix of ranks 0..k in area k (scan uses that).
 * A segment of area x is touched by one rank per stage, and a stage starts when
 * every member of the group has finished the previous one: that is all the
 * synchronisation there is, plus the final wait before results are copied out.
 *
 * A commutative op on a node without levels (and no prefix wanted) needs no order:
 * rank j folds every other area's segment j into its own, so every write stays in
 * the writer's cache and the results are spread over the areas for the copy-out;
 * when the whole result goes to every rank or to one, red_node_hsra_all.c folds
 * into the receive buffers instead.
 *
 * Non-commutative ops keep rank order when each level's groups are contiguous
 * ranges of ranks (else the levels are not used); groups of a level must nest in
 * the next level's. */

#include "coll/reduce/red.h"
#include "core/fiber.h"
#include "node/area.h"
#include "shm/call.h"

struct plan {
  int own;                        /* segment j folded into area j, in any order */
  int nlevels;                    /* levels used, finest first */
  const struct mcoll_level *level[MCOLL_MAX_LEVELS];
  int *tail;                      /* [n] area holding the result of each rank's group so far */
  int *last;                      /* [n] scratch by group id */
};

static int contiguous(const struct mcoll_level *level, int n) {
  int changes = 0;
  for (int r = 1; r < n; r++) changes += level->group_of[r] != level->group_of[r - 1];
  return changes == level->ngroups - 1;
}

static int nested(const struct mcoll_level *fine, const struct mcoll_level *coarse, int n) {
  for (int r = 0; r < n; r++)
    if (coarse->group_of[r] != coarse->group_of[fine->leader_of[fine->group_of[r]]]) return 0;
  return 1;
}

static void plan_levels(struct plan *p, const struct mcoll_node_red *r) {
  const struct mcoll_topo *t = &r->c->topo;
  p->nlevels = 0;
  for (int l = 0; r->levels && l < t->nlevels; l++) {
    const struct mcoll_level *level = &t->level[l];
    if (!r->t->commutative && !contiguous(level, t->local_size)) break;
    if (p->nlevels > 0 && !nested(p->level[p->nlevels - 1], level, t->local_size)) break;
    p->level[p->nlevels++] = level;
  }
}

/* Group id of rank x at stage s (1..nlevels+1); the last stage is the node. */
static int group_at(const struct plan *p, int s, int x) {
  return s <= p->nlevels ? p->level[s - 1]->group_of[x] : 0;
}

/* Whether x is the first (lowest) rank of its part at stage s: at stage 1 every
 * rank is a part; later the parts are the previous stage's groups. */
static int leads_part(const struct plan *p, int s, int x) {
  if (s == 1) return 1;
  const struct mcoll_level *level = p->level[s - 2];
  return level->leader_of[level->group_of[x]] == x;
}

/* Stage s of one chunk of `elems` elements, for rank me. */
static void stage(struct plan *p, const struct mcoll_node_red *r, int s, size_t elems,
                  uint32_t gen) {
  struct mcoll_comm *c = r->c;
  const struct mcoll_shm *shm = &c->chan->shm;
  const struct mcoll_red_type *t = r->t;
  int n = shm->local_size, me = shm->local_rank, mine = group_at(p, s, me);
  int index = 0, members = 0;
  for (int x = 0; x < n; x++) {
    if (group_at(p, s, x) != mine) continue;
    if (x == me) {
      index = members;
    } else {
      mcoll__area_wait_posted(c->chan, x, gen - 1);
      mcoll__call_check(x, 0);
    }
    members++;
  }
  size_t lo, hi;
  mcoll__node_segment(elems, members, index, s > p->nlevels ? r->dest - 1 : -1, &lo, &hi);
  size_t at = lo * t->extent;
  if (p->own) {
    for (int x = 0; x < n && hi > lo; x++)
      if (x != me)
        mcoll__red_fold(t, mcoll__rank_area(shm, x) + at, mcoll__rank_area(shm, me) + at, hi - lo);
    mcoll__area_post(c->chan, gen);
    return;
  }
  int prev = -1;
  for (int x = 0; x < n && hi > lo; x++) {
    if (group_at(p, s, x) != mine || !leads_part(p, s, x)) continue;
    int next = p->tail[x];
    if (prev >= 0)
      mcoll__red_fold(t, mcoll__rank_area(shm, prev) + at, mcoll__rank_area(shm, next) + at,
                      hi - lo);
    prev = next;
  }
  /* Every rank's group now ends in the tail of its group's last part. */
  for (int x = 0; x < n; x++)
    if (leads_part(p, s, x)) p->last[group_at(p, s, x)] = p->tail[x];
  for (int x = 0; x < n; x++) p->tail[x] = p->last[group_at(p, s, x)];
  mcoll__area_post(c->chan, gen);
}

void mcoll__node_red_hsra(const struct mcoll_node_red *r) {
  struct mcoll_comm *c = r->c;
  const struct mcoll_shm *shm = &c->chan->shm;
  int n = shm->local_size, me = shm->local_rank;
  struct plan p;
  plan_levels(&p, r);
  p.own = r->t->commutative && p.nlevels == 0 && !r->prefix;
  if (p.own && !r->blocks && (r->all_out || r->dest)) {
    mcoll__node_red_hsra_all(r);
    return;
  }
  /* Scratch, not malloc: a call that leaves early (shm/call.h) must not leak. */
  p.tail = mcoll__scratch(MCOLL_SCRATCH_PLAN, 2 * (size_t)n * sizeof(int));
  p.last = p.tail + n;
  int reads = r->out[0].upto > 0 || r->out[1].upto > 0;
  struct mcoll_node_layout l;
  mcoll__node_layout(&l, r, shm->area_bytes / r->t->extent);
  for (size_t k = 0; k < l.nchunks; k++) {
    uint32_t gen = mcoll__area_next(c->chan);
    mcoll__area_wait_free(c->chan, gen);
    size_t elems = mcoll__node_chunk_in(&l, r, k, mcoll__rank_area(shm, me));
    mcoll__area_post(c->chan, gen);
    for (int x = 0; x < n; x++) p.tail[x] = x;
    for (int s = 1; s <= p.nlevels + 1; s++) stage(&p, r, s, elems, gen = mcoll__area_next(c->chan));
    if (reads)
      for (int x = 0; x < n; x++)
        if (x != me) {
          mcoll__area_wait_posted(c->chan, x, gen);
          mcoll__call_check(x, 0);
        }
    for (int i = 0; i < 2; i++) {
      const struct mcoll_node_out *o = &r->out[i];
      if (o->upto <= 0) continue;
      /* A prefix short of the node exists only when the chain ran over every rank. */
      int src = o->upto == n ? p.tail[me] : o->upto - 1;
      mcoll__node_chunk_out(&l, r, k, p.own ? NULL : mcoll__rank_area(shm, src), elems, o);
    }
    mcoll__area_done(c->chan, gen);
  }
}
