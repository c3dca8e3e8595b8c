/* From the application's (buffer, counts, displacements, types) to one contiguous
 * byte block per peer. A block whose type has holes is packed (send side) or
 * received into scratch and unpacked at the end (receive side): a local decision
 * that does not change which algorithm runs, so ranks may describe their blocks
 * with different layouts. With MPI_IN_PLACE the outgoing data is copied first, so
 * that no peer reads a block this rank is already overwriting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/alltoall/alltoall_blocks.h"
#include "core/datatype.h"
#include "core/xmalloc.h"

struct block_desc {
  char *base; /* where the block starts for MPI (pack, unpack) */
  char *ptr;  /* its first byte of data (true lower bound applied) */
  int count;
  MPI_Datatype type;
  size_t bytes;
  int contiguous;
};

/* Type facts; alltoall and alltoallv query their one type once. */
struct type_facts {
  MPI_Datatype type;
  size_t size;
  MPI_Aint extent, true_lb;
  int dense; /* element data in typemap order (core/datatype.h) */
};

static int type_facts(MPI_Datatype type, struct type_facts *f) {
  struct mcoll_type_info info;
  f->type = type;
  int err = mcoll__type_info(type, &info);
  f->size = info.size;
  f->extent = info.extent;
  f->true_lb = info.true_lb;
  f->dense = info.dense;
  return err;
}

static int describe(const struct mcoll_a2a_side *s, int j, struct type_facts *f,
                    struct block_desc *d) {
  char *at;
  if (s->types) {
    if (f->type != s->types[j]) {
      int err = type_facts(s->types[j], f);
      if (err != MPI_SUCCESS) return err;
    }
    d->count = s->counts[j];
    at = s->buf + s->displs[j];
  } else if (s->counts) {
    d->count = s->counts[j];
    at = s->buf + (MPI_Aint)s->displs[j] * f->extent;
  } else {
    d->count = s->count;
    at = s->buf + (MPI_Aint)j * s->count * f->extent;
  }
  d->type = f->type;
  d->base = at;
  d->ptr = at + f->true_lb;
  d->bytes = (size_t)d->count * f->size;
  d->contiguous = d->bytes == 0 || (f->dense && (d->count <= 1 || (size_t)f->extent == f->size));
  return MPI_SUCCESS;
}

/* Block j of the side into scratch (at *off), packing if it has holes. */
static int copy_out(const struct block_desc *d, char *scratch, size_t *off) {
  int err = MPI_SUCCESS;
  if (d->contiguous) {
    memcpy(scratch + *off, d->ptr, d->bytes);
  } else {
    err = mcoll__pack_move(d->base, d->count, d->type, scratch + *off, 1);
  }
  *off += d->bytes;
  return err;
}

static int build_recv(struct mcoll_a2a *a, const struct mcoll_a2a_side *rs) {
  int n = a->c->size, err = MPI_SUCCESS;
  struct type_facts f = {MPI_DATATYPE_NULL, 0, 0, 0, 0};
  size_t scratch = 0, off = 0;
  struct block_desc d = {0};
  if (!rs->types && (err = type_facts(rs->type, &f)) != MPI_SUCCESS) return err;
  for (int j = 0; j < n && err == MPI_SUCCESS; j++) {
    err = describe(rs, j, &f, &d);
    a->recv[j].ptr = d.ptr;
    a->recv[j].bytes = d.bytes;
    a->rpacked[j] = !d.contiguous && !(a->inplace && j == a->c->rank);
    if (a->rpacked[j]) scratch += d.bytes;
  }
  if (err != MPI_SUCCESS || scratch == 0) return err;
  a->rscratch = mcoll__xmalloc(scratch);
  for (int j = 0; j < n; j++)
    if (a->rpacked[j]) {
      a->recv[j].ptr = a->rscratch + off;
      off += a->recv[j].bytes;
    }
  return MPI_SUCCESS;
}

/* Send blocks: the user's where contiguous, else packed into scratch. In place:
 * every peer's block copied from the receive side into scratch. */
static int build_send(struct mcoll_a2a *a, const struct mcoll_a2a_side *ss) {
  int n = a->c->size, me = a->c->rank, err = MPI_SUCCESS;
  struct type_facts f = {MPI_DATATYPE_NULL, 0, 0, 0, 0};
  size_t scratch = 0, off = 0;
  struct block_desc d = {0};
  if (!ss->types && (err = type_facts(ss->type, &f)) != MPI_SUCCESS) return err;
  for (int j = 0; j < n && err == MPI_SUCCESS; j++) {
    err = describe(ss, j, &f, &d);
    /* In place, the own block stays where it is and is never sent. */
    int copy = a->inplace ? j != me : !d.contiguous;
    a->send[j].ptr = copy || (a->inplace && j == me) ? NULL : d.ptr;
    a->send[j].bytes = d.bytes;
    if (copy) scratch += d.bytes;
  }
  if (err != MPI_SUCCESS || scratch == 0) return err;
  a->scratch = mcoll__xmalloc(scratch);
  for (int j = 0; j < n && err == MPI_SUCCESS; j++) {
    if (a->send[j].ptr || (a->inplace && j == me)) continue;
    describe(ss, j, &f, &d);
    a->send[j].ptr = a->scratch + off;
    err = copy_out(&d, a->scratch, &off);
  }
  return err;
}

int mcoll__a2a_blocks(struct mcoll_a2a *a, const struct mcoll_a2a_side *sside,
                      const struct mcoll_a2a_side *rside) {
  int n = a->c->size;
  a->scratch = a->rscratch = NULL;
  a->rside = *rside;
  if (n <= (int)(sizeof a->inline_send / sizeof a->inline_send[0])) {
    a->send = a->inline_send;
    a->recv = a->inline_recv;
    a->rpacked = a->inline_packed;
  } else {
    a->send = mcoll__xmalloc(sizeof(struct mcoll_span) * 2 * (size_t)n + (size_t)n);
    a->recv = a->send + n;
    a->rpacked = (unsigned char *)(a->recv + n);
  }
  int err = build_recv(a, rside);
  if (err == MPI_SUCCESS) err = build_send(a, a->inplace ? rside : sside);
  if (err != MPI_SUCCESS) mcoll__a2a_blocks_release(a, 0);
  return err;
}

void mcoll__a2a_blocks_release(struct mcoll_a2a *a, int ok) {
  int n = a->c->size;
  if (a->rscratch && ok) {
    struct type_facts f = {MPI_DATATYPE_NULL, 0, 0, 0, 0};
    if (!a->rside.types) type_facts(a->rside.type, &f);
    for (int j = 0; j < n; j++) {
      if (!a->rpacked[j]) continue;
      struct block_desc d = {0};
      describe(&a->rside, j, &f, &d);
      mcoll__pack_move(d.base, d.count, d.type, a->recv[j].ptr, 0);
    }
  }
  free(a->scratch);
  free(a->rscratch);
  if (a->send && a->send != a->inline_send) free(a->send);
  a->scratch = a->rscratch = NULL;
  a->send = a->recv = NULL;
}
