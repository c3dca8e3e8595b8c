/* Intra-node reduction pieces: how a vector goes through the per-rank areas in
 * chunks, the choice of engine, and passing a leader's buffer to its node.
 *
 * Chunk k of a vector cut into blocks holds slice k of every block (each block is
 * cut into nchunks slices), so every chunk carries a share of every rank's block
 * and a reduce_scatter keeps all ranks busy in every chunk. */
#include "coll/move.h"
#include "coll/reduce/red.h"
#include "node/area.h"
#include "node/slot.h"
#include "shm/call.h"

void mcoll__node_layout(struct mcoll_node_layout *l, const struct mcoll_node_red *r,
                        size_t area_elems) {
  l->count = r->count;
  l->blocks = r->blocks;
  l->nblocks = r->blocks ? r->c->topo.local_size : 1;
  /* Slices round up: a chunk may hold up to one element more per block. */
  size_t room = area_elems > (size_t)l->nblocks ? area_elems - (size_t)(l->nblocks - 1) : 1;
  if (!l->blocks) room = area_elems;
  l->nchunks = (r->count + room - 1) / room;
}

size_t mcoll__node_chunk_in(const struct mcoll_node_layout *l, const struct mcoll_node_red *r,
                            size_t k, char *area) {
  const struct mcoll_red_type *t = r->t;
  size_t pos = 0, displ = 0;
  for (int b = 0; b < l->nblocks; b++) {
    size_t cnt = mcoll__node_block(l, b), off, n;
    mcoll__node_slice(l, cnt, k, &off, &n);
    if (n) mcoll__area_write(mcoll__red_at(t, area, pos), mcoll__red_at(t, r->in, displ + off),
                             mcoll__red_span(t, n));
    pos += n;
    displ += cnt;
  }
  return pos;
}

void mcoll__node_segment(size_t elems, int members, int index, int skip, size_t *lo,
                         size_t *hi) {
  if (skip >= 0 && members > 1) {
    if (index == skip) {
      *lo = *hi = 0;
      return;
    }
    index -= index > skip;
    members--;
  }
  *lo = (size_t)index * elems / (size_t)members;
  *hi = (size_t)(index + 1) * elems / (size_t)members;
}

/* Copies n elements from chunk position pos: from `area`, or, when area is NULL,
 * from the areas of the ranks whose final segments hold them. */
static void copy_range(const struct mcoll_node_red *r, char *dst, const char *area, size_t pos,
                       size_t n, size_t elems) {
  const struct mcoll_red_type *t = r->t;
  if (area) {
    mcoll__red_copy(t, dst, mcoll__red_at(t, area, pos), n);
    return;
  }
  const struct mcoll_shm *shm = &r->c->chan->shm;
  for (int j = 0; j < shm->local_size; j++) {
    size_t lo, hi;
    mcoll__node_segment(elems, shm->local_size, j, r->dest - 1, &lo, &hi);
    if (lo < pos) lo = pos;
    if (hi > pos + n) hi = pos + n;
    if (lo < hi)
      mcoll__red_copy(t, mcoll__red_at(t, dst, lo - pos),
                      mcoll__red_at(t, mcoll__rank_area(shm, j), lo), hi - lo);
  }
}

void mcoll__node_chunk_out(const struct mcoll_node_layout *l, const struct mcoll_node_red *r,
                           size_t k, const char *area, size_t elems,
                           const struct mcoll_node_out *o) {
  const struct mcoll_red_type *t = r->t;
  int me = r->c->topo.local_rank;
  size_t pos = 0, displ = 0;
  for (int b = 0; b < l->nblocks; b++) {
    size_t cnt = mcoll__node_block(l, b), off, n;
    mcoll__node_slice(l, cnt, k, &off, &n);
    if (!o->own_block) {
      copy_range(r, mcoll__red_at(t, o->dst, displ + off), area, pos, n, elems);
    } else if (b == me || l->nblocks == 1) {
      copy_range(r, mcoll__red_at(t, o->dst, off), area, pos, n, elems);
      return;
    }
    pos += n;
    displ += cnt;
  }
}

/* A node of one rank: the fold of ranks [0, 1) is my input. */
void mcoll__node_alone(const struct mcoll_node_red *r) {
  for (int i = 0; i < 2; i++) {
    const struct mcoll_node_out *o = &r->out[i];
    if (o->upto > 0)
      mcoll__red_copy(r->t, o->dst, r->in, r->blocks && o->own_block ? (size_t)r->blocks[0]
                                                                      : r->count);
  }
}

/* What every rank of the node must give the call alike: its size, the algorithm
 * that size chose, and the shape of the result (whole, at one rank, prefixes,
 * blocks). */
static uint32_t digest_of(const struct mcoll_node_red *r, int alg) {
  uint64_t shape = (uint64_t)alg | (uint64_t)r->levels << 3 | (uint64_t)r->prefix << 4 |
                   (uint64_t)r->all_out << 5 | (uint64_t)(r->blocks != NULL) << 6 |
                   (uint64_t)(uint32_t)r->dest << 8;
  return mcoll__call_digest(r->count * r->t->extent, shape);
}

int mcoll__node_red(const struct mcoll_node_red *r, int alg) {
  struct mcoll_comm *c = r->c;
  if (!mcoll__node_has_peers(c)) {
    mcoll__node_alone(r);
    return MPI_SUCCESS;
  }
  struct mcoll_call call;
  const uint32_t start_gen = mcoll__area_last(c->chan);
  mcoll__call_enter(&call, &c->chan->shm, start_gen + 1, digest_of(r, alg));
  if (setjmp(call.escape) == 0) {
    if (alg == MCOLL_RED_FLAT) {
      mcoll__node_red_flat(r); /* publishes when it must */
    } else {
      mcoll__call_publish(&call);
      if (alg == MCOLL_RED_CMA) mcoll__node_red_cma(r);
      else mcoll__node_red_hsra(r);
    }
    mcoll__call_leave();
    return MPI_SUCCESS;
  }
  mcoll__call_settle(&call);
  mcoll__area_resync(c->chan, start_gen, call.beside, &c->chan->red_slots);
  mcoll__call_leave();
  return MPI_ERR_TRUNCATE;
}

int mcoll__node_red_ready(const struct mcoll_node_red *r, int alg, int spin) {
  return alg == MCOLL_RED_FLAT && mcoll__node_has_peers(r->c) &&
         mcoll__node_red_flat_ready(r, digest_of(r, alg), spin);
}

void mcoll__node_share(struct mcoll_comm *c, const struct mcoll_red_type *t, int leader,
                       const char *src, size_t count, mcoll_node_take take, void *arg) {
  if (!mcoll__node_has_peers(c)) return;
  const struct mcoll_shm *shm = &c->chan->shm;
  int me = shm->local_rank;
  size_t cap = shm->area_bytes / t->extent;
  for (size_t first = 0; first < count; first += cap) {
    size_t n = count - first < cap ? count - first : cap;
    uint32_t gen = mcoll__area_next(c->chan);
    if (me == leader) {
      mcoll__area_wait_free(c->chan, gen);
      mcoll__red_copy(t, mcoll__rank_area(shm, me), mcoll__red_at(t, src, first), n);
      mcoll__area_post(c->chan, gen);
    } else {
      mcoll__area_wait_posted(c->chan, leader, gen);
      take(arg, mcoll__rank_area(shm, leader), first, n);
    }
    mcoll__area_done(c->chan, gen);
  }
}
