/* Intra-node bcast down a tree over the node's levels (small
 * messages): the source posts the data in its area; in every level group that
 * does not hold the source, the group's leader copies it from its parent's area
 * into its own (on its own NUMA domain) for its members. Without levels the tree
 * is flat. Data larger than an area goes through in area-sized chunks, one area
 * generation each. */
#include <string.h>

#include "coll/bcast/bcast.h"
#include "node/area.h"
#include "node/publish.h"

/* Leader of r's group at level l for this call: the source leads its own groups. */
static int group_leader(const struct mcoll_topo *t, int l, int r, int source) {
  const struct mcoll_level *level = &t->level[l];
  int g = level->group_of[r];
  return level->group_of[source] == g ? source : level->leader_of[g];
}

/* The rank r copies from: its leader at the finest level where it does not lead. */
static int tree_parent(const struct mcoll_topo *t, int r, int source) {
  for (int l = 0; l < t->nlevels; l++) {
    int lead = group_leader(t, l, r, source);
    if (lead != r) return lead;
  }
  return source;
}

static int has_children(const struct mcoll_topo *t, int me, int source) {
  for (int r = 0; r < t->local_size; r++)
    if (r != source && r != me && tree_parent(t, r, source) == me) return 1;
  return 0;
}

static void publish(const struct mcoll_bcast_call *call, size_t lo, size_t hi) {
  struct mcoll_comm *c = call->c;
  size_t step = c->chan->shm.area_bytes;
  for (size_t off = lo; off < hi; off += step) {
    size_t len = hi - off < step ? hi - off : step;
    uint32_t gen = mcoll__area_next(c->chan);
    mcoll__area_wait_free(c->chan, gen);
    memcpy(mcoll__rank_area(&c->chan->shm, c->chan->shm.local_rank), call->buf + off, len);
    mcoll__publish_len(mcoll__publish_line(&c->chan->shm, c->chan->shm.local_rank), call->bytes);
    mcoll__area_post(c->chan, gen);
    mcoll__area_done(c->chan, gen);
  }
}

static size_t read_range(const struct mcoll_bcast_call *call, size_t lo, size_t hi) {
  struct mcoll_comm *c = call->c;
  const struct mcoll_topo *t = &c->topo;
  int me = t->local_rank;
  int parent = tree_parent(t, me, call->source);
  int forward = has_children(t, me, call->source);
  size_t step = c->chan->shm.area_bytes;
  for (size_t off = lo; off < hi; off += step) {
    size_t len = hi - off < step ? hi - off : step;
    mcoll__area_wait_posted(c->chan, parent, mcoll__area_last(c->chan) + 1);
    /* The parent stamps the call's size in the line of the flag we waited for;
     * on a mismatch, leave before taking the generation. */
    if (call->check_bytes && off == 0) {
      size_t theirs = mcoll__published_len(mcoll__publish_line(&c->chan->shm, parent));
      if (theirs != call->bytes) return theirs;
    }
    uint32_t gen = mcoll__area_next(c->chan);
    memcpy(call->buf + off, mcoll__rank_area(&c->chan->shm, parent), len);
    if (forward) {
      mcoll__area_wait_free(c->chan, gen);
      memcpy(mcoll__rank_area(&c->chan->shm, me), call->buf + off, len);
      mcoll__publish_len(mcoll__publish_line(&c->chan->shm, me), call->bytes);
      mcoll__area_post(c->chan, gen);
    }
    mcoll__area_done(c->chan, gen);
  }
  return call->bytes;
}

static void finish(const struct mcoll_bcast_call *call) { (void)call; }

int mcoll__bcast_shm_tree_ready(const struct mcoll_comm *c, size_t bytes, int source) {
  const struct mcoll_channel *ch = c->chan;
  const struct mcoll_topo *t = &c->topo;
  /* One chunk only: a later chunk's flags come after this rank's own posts. */
  if (bytes == 0 || bytes > ch->shm.area_bytes) return 0;
  uint32_t gen = mcoll__area_last(ch) + 1;
  int me = t->local_rank;
  const struct mcoll_shm *shm = &ch->shm;
  if (me != source) {
    int parent = tree_parent(t, me, source);
    if (!mcoll__flag_poll(shm, &shm->data[parent].posted, gen)) return 0;
    /* (another size: the task's read sorts out the mismatch) */
    if (mcoll__published_len(mcoll__publish_line(shm, parent)) != bytes) return 0;
    if (!has_children(t, me, source)) return 1;
  }
  /* my area free: every peer done with the generation before (as area_wait_free) */
  for (int r = 0; r < shm->local_size; r++)
    if (r != me && !mcoll__flag_poll(shm, &shm->data[r].done, gen - 1)) return 0;
  return 1;
}

/* A reader whose source went by another engine (sizes that straddle an edge, or an
 * adaptive round's candidate on the source's side only) leaves in its first wait for
 * its parent's area, before it takes a generation: nothing to give back. Its
 * parent, if not the source, is a reader that leaves the same way. */
static void abandon(struct mcoll_bcast_call *call) { (void)call; }

const struct mcoll_bcast_intra mcoll__bcast_shm_tree = {NULL, publish, read_range, finish, abandon};
