/* The contiguous view of an alltoall(v/w) call (alltoall_blocks.c): every engine
 * moves its blocks. */
#ifndef MCOLL_ALLTOALL_BLOCKS_H
#define MCOLL_ALLTOALL_BLOCKS_H

#include <mpi.h>
#include <stddef.h>

#include "coll/registry.h"
#include "comm/context.h"
#include "core/datatype.h"

struct mcoll_span {
  char *ptr;
  size_t bytes;
};

/* One side of a call as the application described it. Block j is `counts[j]`
 * elements of `types[j]` at `displs[j]` (alltoallw: bytes; alltoallv: extents of
 * `type`); the arrays are NULL for alltoall, whose block j is `count` elements of
 * `type` at j·count extents. */
struct mcoll_a2a_side {
  char *buf;
  int count;
  MPI_Datatype type;
  const int *counts, *displs;
  const MPI_Datatype *types;
};

/* The contiguous view of a call on one rank. */
struct mcoll_a2a {
  struct mcoll_comm *c;
  enum mcoll_coll coll;
  struct mcoll_span *send, *recv; /* [size], indexed by comm rank */
  int uniform;                    /* alltoall: every block is `block` bytes, on every rank */
  size_t block;
  int inplace;
  int truncated; /* a peer's table said it sent me more than I expect (read what fits) */
  /* Packing state, private to alltoall_blocks.c. */
  struct mcoll_a2a_side rside;
  char *scratch;   /* packed send blocks, or the send data copied for MPI_IN_PLACE */
  char *rscratch;  /* receive blocks whose type has holes, unpacked at the end */
  unsigned char *rpacked; /* [size] receive block j lives in rscratch */
  struct mcoll_span inline_send[16], inline_recv[16]; /* small communicators: no malloc */
  unsigned char inline_packed[16];
};

/* Builds the contiguous view; sside is ignored when inplace. MPI_SUCCESS, or the
 * error of a datatype query (the caller then lets the host MPI raise it). */
int mcoll__a2a_blocks(struct mcoll_a2a *a, const struct mcoll_a2a_side *sside,
                      const struct mcoll_a2a_side *rside);
/* Unpacks what needs unpacking (when ok) and frees everything. */
void mcoll__a2a_blocks_release(struct mcoll_a2a *a, int ok);

/* Whether `count` elements of a type with facts t are plain bytes (the test of
 * alltoall_blocks.c's describe). */
static inline int mcoll__a2a_plain(const struct mcoll_type_info *t, int count) {
  return count == 0 || t->size == 0 ||
         (t->dense && (count <= 1 || (size_t)t->extent == t->size));
}

/* An alltoall whose blocks are plain bytes on both sides (not in place) on a
 * communicator small enough for the inline arrays: the view mcoll__a2a_blocks would
 * build, straight from the types' facts the caller queried (st, rt), with nothing
 * to pack and nothing for mcoll__a2a_blocks_release to free. 0 where it does not
 * apply (a left untouched): the caller then describes the call with
 * mcoll__a2a_blocks. */
static inline int mcoll__a2a_blocks_direct(struct mcoll_a2a *a, struct mcoll_comm *c,
                                           const void *sendbuf, int sendcount,
                                           const struct mcoll_type_info *st, void *recvbuf,
                                           int recvcount, const struct mcoll_type_info *rt) {
  int n = c->size;
  if (sendbuf == MPI_IN_PLACE || n > (int)(sizeof a->inline_send / sizeof a->inline_send[0]) ||
      !mcoll__a2a_plain(st, sendcount) || !mcoll__a2a_plain(rt, recvcount))
    return 0;
  size_t bytes = (size_t)recvcount * rt->size;
  MPI_Aint sstride = (MPI_Aint)sendcount * st->extent, rstride = (MPI_Aint)recvcount * rt->extent;
  char *sp = (char *)sendbuf + st->true_lb, *rp = (char *)recvbuf + rt->true_lb;
  a->c = c;
  a->coll = MCOLL_COLL_ALLTOALL;
  a->uniform = 1;
  a->block = bytes;
  a->inplace = 0;
  a->truncated = 0;
  a->scratch = a->rscratch = NULL;
  a->send = a->inline_send;
  a->recv = a->inline_recv;
  a->rpacked = NULL;
  for (int j = 0; j < n; j++) {
    a->send[j] = (struct mcoll_span){sp + (MPI_Aint)j * sstride, bytes};
    a->recv[j] = (struct mcoll_span){rp + (MPI_Aint)j * rstride, bytes};
  }
  return 1;
}

#endif
