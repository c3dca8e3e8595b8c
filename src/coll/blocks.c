#include "coll/blocks.h"
#include "core/datatype.h"
#include "task/host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mcoll__blocks_describe(struct mcoll_blocks *b, void *buf, int n, int count,
                           const int *counts, const int *displs, MPI_Datatype type) {
  struct mcoll_type_info info;
  int err = mcoll__type_info(type, &info);
  if (err != MPI_SUCCESS) return err;
  size_t size = info.size;
  MPI_Aint extent = info.extent, true_lb = info.true_lb, true_extent = info.true_extent;
  memset(b, 0, sizeof *b);
  b->n = n;
  b->count = count;
  b->counts = counts;
  b->displs = displs;
  b->elem = (size_t)size;
  b->type = type;
  b->extent = extent;
  (void)true_extent;
  /* Plain bytes: element data in order, and elements one after the other. */
  b->contiguous = size == 0 || (info.dense && (size_t)extent == size);
  b->stride = b->contiguous ? (size_t)extent : (size_t)size;
  /* Packing takes the buffer as given; plain bytes start at the true lower bound. */
  b->user = (char *)buf + (b->contiguous ? true_lb : 0);
  b->base = b->user;
  return MPI_SUCCESS;
}

void mcoll__blocks_plain(struct mcoll_blocks *b, void *buf, int n, size_t len) {
  memset(b, 0, sizeof *b);
  b->n = n;
  b->count = 1;
  b->elem = b->stride = len;
  b->contiguous = 1;
  b->base = b->user = buf;
  b->type = MPI_BYTE;
}

size_t mcoll__blocks_total(const struct mcoll_blocks *b) {
  if (!b->counts) return (size_t)b->n * mcoll__block_len(b, 0);
  size_t total = 0;
  for (int r = 0; r < b->n; r++) total += mcoll__block_len(b, r);
  return total;
}

int mcoll__blocks_dense(const struct mcoll_blocks *b) {
  if (!b->counts && !b->displs) return 1; /* rank-major, stride = element size */
  ptrdiff_t at = mcoll__block_off(b, 0);
  for (int r = 0; r < b->n; r++) {
    if (mcoll__block_len(b, r) && mcoll__block_off(b, r) != at) return 0;
    at += (ptrdiff_t)mcoll__block_len(b, r);
  }
  return 1;
}

/* A packed copy with the blocks in rank order (v-layouts keep their offsets). */
static void alloc_packed(struct mcoll_blocks *b) {
  b->packed = mcoll__xmalloc(mcoll__blocks_total(b));
  if (b->counts) {
    b->packed_off = mcoll__xmalloc(sizeof(size_t) * (size_t)b->n);
    size_t at = 0;
    for (int r = 0; r < b->n; r++) {
      b->packed_off[r] = at;
      at += mcoll__block_len(b, r);
    }
  }
  b->base = b->packed;
}

/* Where rank r's block starts in the user's buffer. */
static char *user_block(const struct mcoll_blocks *b, int r) {
  ptrdiff_t displ = b->displs ? b->displs[r] : (ptrdiff_t)r * b->count;
  return b->user + displ * (ptrdiff_t)b->extent;
}

/* Copies rank r's block between the user's buffer and the packed copy. */
static void move_block(struct mcoll_blocks *b, int r, int to_packed) {
  size_t len = mcoll__block_len(b, r);
  if (len == 0) return;
  char *packed = mcoll__block_ptr(b, r), *user = user_block(b, r);
  int count = b->counts ? b->counts[r] : b->count;
  if (b->contiguous && to_packed) memcpy(packed, user, len);
  else if (b->contiguous) memcpy(user, packed, len);
  else mcoll__pack_move(user, count, b->type, packed, to_packed);
}

void mcoll__blocks_acquire(struct mcoll_blocks *b, int need_dense, int fill) {
  if (b->contiguous && (!need_dense || mcoll__blocks_dense(b))) return;
  b->stride = b->elem;
  alloc_packed(b);
  for (int r = 0; r < b->n; r++)
    if (fill == -2 || fill == r) move_block(b, r, 1);
}

void mcoll__blocks_release(struct mcoll_blocks *b, int drain, int skip) {
  if (!b->packed) return;
  if (drain)
    for (int r = 0; r < b->n; r++)
      if (r != skip) move_block(b, r, 0);
  free(b->packed);
  free(b->packed_off);
  b->packed = NULL;
  b->packed_off = NULL;
}

void mcoll__blocks_scratch(struct mcoll_blocks *b, int n, const int *lens) {
  mcoll__blocks_plain(b, NULL, n, 1);
  b->counts = lens;
  alloc_packed(b);
}

int mcoll__blocks_node_type(const struct mcoll_blocks *b, const int *node_of, int node,
                            MPI_Datatype *type) {
  int members = 0, k = 0;
  for (int r = 0; r < b->n; r++) members += node_of[r] == node && mcoll__block_len(b, r);
  int *lens = mcoll__xmalloc(sizeof(int) * (size_t)members);
  MPI_Aint *displs = mcoll__xmalloc(sizeof(MPI_Aint) * (size_t)members);
  for (int r = 0; r < b->n; r++)
    if (node_of[r] == node && mcoll__block_len(b, r)) {
      lens[k] = (int)mcoll__block_len(b, r);
      displs[k++] = (MPI_Aint)mcoll__block_off(b, r);
    }
  int err = PMPI_Type_create_hindexed(members, lens, displs, MPI_BYTE, type);
  if (err == MPI_SUCCESS) err = PMPI_Type_commit(type);
  free(lens);
  free(displs);
  return err;
}

int mcoll__wait_all(int n, MPI_Request *req) {
  int err = MPI_SUCCESS;
  for (int i = 0; i < n; i++) {
    int one = mcoll__host_wait_one(&req[i], MPI_STATUS_IGNORE);
    if (err == MPI_SUCCESS) err = one;
  }
  return err;
}
