#include "node/peer.h"

#include <stdio.h>
#include <stdlib.h>

void mcoll__peer_failed(const struct mcoll_channel *ch, int r, int write, int err) {
  const struct mcoll_data_line *line = &ch->shm.data[r];
  fprintf(stderr, "mcoll: %s world rank %d (pid %d) failed (errno %d); aborting\n",
          ch->peer_mem == MCOLL_PEER_SHARED ? (write ? "memcpy to" : "memcpy from")
          : write                           ? "process_vm_writev to"
                                            : "process_vm_readv from",
          line->world_rank, (int)line->pid, err);
  PMPI_Abort(MPI_COMM_WORLD, 1);
  abort(); /* (PMPI_Abort does not return) */
}
