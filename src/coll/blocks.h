/* Per-rank blocks of a gather-family buffer (allgather(v), gather(v), scatter(v)):
 * where rank r's block lies, as bytes. A buffer described with a non-contiguous
 * datatype is worked on as a packed copy with the blocks in rank order; so is a
 * contiguous one when an algorithm needs the blocks to tile one span (`dense`). */
#ifndef MCOLL_BLOCKS_H
#define MCOLL_BLOCKS_H

#include <mpi.h>
#include <stddef.h>
#include "core/xmalloc.h"

struct mcoll_blocks {
  char *base;         /* rank r's block starts at base + mcoll__block_off(b, r) */
  const int *counts;  /* elements of each rank, or NULL: `count` for every rank */
  const int *displs;  /* displacements in elements, or NULL: rank r at r·count */
  size_t *packed_off; /* offsets in the packed copy of a v-layout (owned) */
  int n, count;
  size_t elem;        /* bytes per element (the type's size) */
  size_t stride;      /* bytes per displacement unit */
  int contiguous;     /* the user's blocks are plain bytes (no packing needed) */
  /* The user's buffer, when base is a packed copy of it. */
  char *packed, *user;
  MPI_Datatype type;
  MPI_Aint extent;
};

static inline size_t mcoll__block_len(const struct mcoll_blocks *b, int r) {
  return (size_t)(b->counts ? b->counts[r] : b->count) * b->elem;
}

/* Displacements may be negative: offsets are signed. */
static inline ptrdiff_t mcoll__block_off(const struct mcoll_blocks *b, int r) {
  if (b->packed_off) return (ptrdiff_t)b->packed_off[r];
  return (b->displs ? (ptrdiff_t)b->displs[r] : (ptrdiff_t)r * b->count) * (ptrdiff_t)b->stride;
}

static inline char *mcoll__block_ptr(const struct mcoll_blocks *b, int r) {
  return b->base + mcoll__block_off(b, r);
}

/* Describes n blocks of buf (counts/displs may be NULL: `count` each, rank-major)
 * without copying. MPI_SUCCESS, or the type query's error. */
int mcoll__blocks_describe(struct mcoll_blocks *b, void *buf, int n, int count,
                           const int *counts, const int *displs, MPI_Datatype type);

/* n blocks of `len` plain bytes each at buf, rank-major. */
void mcoll__blocks_plain(struct mcoll_blocks *b, void *buf, int n, size_t len);

/* Total bytes of all blocks. */
size_t mcoll__blocks_total(const struct mcoll_blocks *b);

/* Whether the blocks tile one span in rank order, from block 0's start. */
int mcoll__blocks_dense(const struct mcoll_blocks *b);

/* Switches to a packed copy when the blocks are not plain bytes, or (need_dense)
 * do not tile one span. fill: -1 none, a rank: copy that block in, -2: all. */
void mcoll__blocks_acquire(struct mcoll_blocks *b, int need_dense, int fill);

/* Copies the packed blocks back to the user's buffer (drain: all but rank
 * `skip`; skip = -2: none) and frees the copy. */
void mcoll__blocks_release(struct mcoll_blocks *b, int drain, int skip);


/* Waits for n requests; the first error. (PMPI_Waitall with MPI_STATUSES_IGNORE
 * trips GCC's -Wstringop-overflow on Open MPI's header.) */
int mcoll__wait_all(int n, MPI_Request *req);

/* n blocks of plain bytes, lens[r] each, in a new packed copy in rank order;
 * mcoll__blocks_release frees it. */
void mcoll__blocks_scratch(struct mcoll_blocks *b, int n, const int *lens);

/* The blocks of the ranks on `node` (ascending rank order) as one datatype over
 * b->base, for the host MPI's point-to-point; free it with PMPI_Type_free. */
int mcoll__blocks_node_type(const struct mcoll_blocks *b, const int *node_of, int node,
                            MPI_Datatype *type);

#endif
