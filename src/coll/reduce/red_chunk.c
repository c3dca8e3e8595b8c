/* How a vector goes through the per-rank areas in chunks, for every intra-node
 * reduction engine (red_node_*.c).
 *
 * Chunk k of a vector cut into blocks holds slice k of every block (each block is
 * cut into nchunks slices), so every chunk carries a share of every rank's block
 * and a reduce_scatter keeps all ranks busy in every chunk. */
#include "coll/reduce/red.h"
#include "node/copy.h"
#include "shm/shm.h"

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
