/* Peer memory: reading and writing len bytes at an address that node-local rank r
 * published (node/publish.h). Between processes by CMA (process_vm_readv/writev,
 * shm/cma.c); between ranks that share one address space (threads) by memcpy. The
 * channel says which (peer_mem). A failure is a broken peer (the set-up probe said
 * the peers can be read): mcoll__peer_read/_write report it and abort the job. */
#ifndef MCOLL_NODE_PEER_H
#define MCOLL_NODE_PEER_H

#include <stdint.h>
#include <string.h>

#include "shm/channel.h"

/* 0 or an errno, nothing reported. */
static inline int mcoll__peer_read_status(const struct mcoll_channel *ch, int r, void *dst,
                                          uint64_t addr, size_t len) {
  if (ch->peer_mem == MCOLL_PEER_SHARED) {
    if (len) memcpy(dst, (const void *)(uintptr_t)addr, len);
    return 0;
  }
  return mcoll__cma_read(ch->shm.data[r].pid, dst, addr, len);
}

static inline int mcoll__peer_write_status(const struct mcoll_channel *ch, int r, uint64_t addr,
                                           const void *src, size_t len) {
  if (ch->peer_mem == MCOLL_PEER_SHARED) {
    if (len) memcpy((void *)(uintptr_t)addr, src, len);
    return 0;
  }
  return mcoll__cma_write(ch->shm.data[r].pid, addr, src, len);
}

/* Reports a failed access to rank r's memory and aborts the job. */
_Noreturn void mcoll__peer_failed(const struct mcoll_channel *ch, int r, int write, int err);

/* len bytes at addr in node-local rank r's memory into dst. */
static inline void mcoll__peer_read(const struct mcoll_channel *ch, int r, void *dst,
                                    uint64_t addr, size_t len) {
  int err = mcoll__peer_read_status(ch, r, dst, addr, len);
  if (err) mcoll__peer_failed(ch, r, 0, err);
}

/* len bytes at src into addr in node-local rank r's memory. */
static inline void mcoll__peer_write(const struct mcoll_channel *ch, int r, uint64_t addr,
                                     const void *src, size_t len) {
  int err = mcoll__peer_write_status(ch, r, addr, src, len);
  if (err) mcoll__peer_failed(ch, r, 1, err);
}

#endif
