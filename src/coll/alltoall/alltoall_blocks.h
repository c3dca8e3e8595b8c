/* The contiguous view of an alltoall(v/w) call (alltoall_blocks.c): every engine
 * moves its blocks. */
#ifndef MCOLL_ALLTOALL_BLOCKS_H
#define MCOLL_ALLTOALL_BLOCKS_H

#include <mpi.h>
#include <stddef.h>

#include "coll/registry.h"
#include "comm/context.h"

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

#endif
