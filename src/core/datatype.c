#include "core/datatype.h"

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
  return MPI_SUCCESS;
}
