#include <stdlib.h>

#include "coll/bcast/bcast.h"
#include "pmpi/wrap.h"

/* Non-contiguous data is packed, so every rank takes the same path whatever
 * datatype it describes the same bytes with. */
static int bcast_packed(struct mcoll_comm *c, void *buf, int count, MPI_Datatype type,
                        size_t bytes, int root, MPI_Comm comm) {
  int pack_size = 0, position = 0, err;
  PMPI_Pack_size(count, type, comm, &pack_size);
  char *packed = malloc((size_t)pack_size > bytes ? (size_t)pack_size : bytes);
  if (!packed) {
    fprintf(stderr, "mcoll: out of memory packing %zu bytes for bcast\n", bytes);
    return PMPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (c->rank == root) PMPI_Pack(buf, count, type, packed, pack_size, &position, comm);
  err = mcoll__bcast(c, packed, bytes, root);
  if (c->rank != root && err == MPI_SUCCESS)
    err = PMPI_Unpack(packed, (int)bytes, &position, buf, count, type, comm);
  free(packed);
  return err;
}

MCOLL_EXPORT int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_BCAST, comm);
  struct mcoll_bytes data;
  if (!c) return PMPI_Bcast(buf, count, type, root, comm);
  if (count < 0 || !mcoll__root_valid(c, root) || type == MPI_DATATYPE_NULL ||
      mcoll__bytes_of(buf, count, type, &data) != MPI_SUCCESS) {
    mcoll__count_invalid(MCOLL_COLL_BCAST);
    return PMPI_Bcast(buf, count, type, root, comm);
  }
  if (data.contiguous) return mcoll__bcast(c, data.ptr, data.bytes, root);
  return bcast_packed(c, buf, count, type, data.bytes, root, comm);
}
