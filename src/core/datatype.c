#include "core/datatype.h"

#include <stdio.h>
#include <stdlib.h>

int mcoll__bytes_of(const void *buf, int count, MPI_Datatype type, struct mcoll_bytes *out) {
  int size;
  MPI_Aint lb, extent, true_lb, true_extent;
  int err = PMPI_Type_size(type, &size);
  if (err == MPI_SUCCESS) err = PMPI_Type_get_extent(type, &lb, &extent);
  if (err == MPI_SUCCESS) err = PMPI_Type_get_true_extent(type, &true_lb, &true_extent);
  if (err != MPI_SUCCESS) return err;
  out->bytes = (size_t)count * (size_t)size;
  /* Contiguous: no holes in one element, and elements follow each other. */
  out->contiguous = true_extent == size && (count <= 1 || extent == size);
  out->ptr = (char *)buf + true_lb;
  out->packed = NULL;
  return MPI_SUCCESS;
}

int mcoll__bytes_acquire(const void *buf, int count, MPI_Datatype type, int fill,
                         struct mcoll_bytes *out) {
  int err = mcoll__bytes_of(buf, count, type, out);
  if (err != MPI_SUCCESS || out->contiguous) return err;
  int pack_size = 0, position = 0;
  PMPI_Pack_size(count, type, MPI_COMM_SELF, &pack_size);
  size_t room = (size_t)pack_size > out->bytes ? (size_t)pack_size : out->bytes;
  out->packed = malloc(room ? room : 1);
  if (!out->packed) {
    fprintf(stderr, "mcoll: out of memory packing %zu bytes\n", out->bytes);
    PMPI_Abort(MPI_COMM_WORLD, 1);
  }
  out->ptr = out->packed;
  if (fill) err = PMPI_Pack(buf, count, type, out->packed, (int)room, &position, MPI_COMM_SELF);
  return err;
}

void mcoll__bytes_release(struct mcoll_bytes *b, void *buf, int count, MPI_Datatype type,
                          int drain) {
  if (!b->packed) return;
  int position = 0;
  if (drain) PMPI_Unpack(b->packed, (int)b->bytes, &position, buf, count, type, MPI_COMM_SELF);
  free(b->packed);
  b->packed = NULL;
}
