/* The node's shared segment: per-rank control lines, a ring of data slots, and
 * flags that waiters spin on, then yield on, then sleep on (futex). */
#ifndef MCOLL_SHM_H
#define MCOLL_SHM_H

#include <mpi.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "core/status.h"

/* Two lines: adjacent-line prefetch would otherwise couple neighbours. */
#define MCOLL_LINE 128

typedef _Atomic uint32_t mcoll_flag;

/* Barrier: one entry per rank, used for both gather (arrive) and scatter (release). */
struct mcoll_sync_line {
  mcoll_flag arrive;  /* written by the owner */
  mcoll_flag release; /* written by the owner's parent in the barrier tree */
  char pad[MCOLL_LINE - 2 * sizeof(mcoll_flag)];
};

/* A buffer published to node peers, the one format (node/publish.h): its address in
 * its owner's memory, its length, and the generation they belong to. */
struct mcoll_peer_buf {
  _Atomic uint64_t addr;
  _Atomic uint64_t len;
  mcoll_flag gen;
};

/* Data-movement progress of one rank, written by that rank. */
struct mcoll_data_line {
  mcoll_flag consumed;        /* ring: last generation this rank is done with */
  mcoll_flag cma_ready;       /* single copy: chunks of its buffer made readable so far */
  mcoll_flag cma_done;        /* single copy: last bcast sequence it finished reading */
  int32_t pid;
  /* The buffer it publishes for single-copy readers (node/publish.h); a bcast
   * source's len is the bytes of the call (shm tree too), written before the flag
   * that readers wait on in this line, so they compare it for free. */
  struct mcoll_peer_buf buf;
  int32_t world_rank;
  /* For collectives built on the per-rank areas: generation of the data in this
   * rank's area, and the last generation this rank finished reading elsewhere. */
  mcoll_flag posted;
  mcoll_flag done;
  /* Call descriptor of the reductions (shm/call.h), in the half-line of posted and
   * done so that readers compare it for free: the call (its first area generation)
   * and a digest of its size and algorithm; the last call in which this rank found
   * that the ranks disagree. */
  mcoll_flag call_mismatch;
  _Atomic uint64_t call;
  /* Its last MCOLL_CALL_LOG descriptors, by call: for readers of a rank gone on. */
  _Atomic uint64_t call_log[8];
};

_Static_assert(sizeof(struct mcoll_data_line) == 2 * 64, "a data line is two cache lines");

struct mcoll_slot_ctl {
  mcoll_flag gen; /* generation of the data in the slot */
  uint32_t bytes;
  uint64_t call_bytes; /* bytes of the whole bcast (readers check that they agree) */
  char pad[MCOLL_LINE - 2 * sizeof(uint32_t) - sizeof(uint64_t)];
};

/* Bcast sequences whose first arrivals a node keeps: more than any rank of a node
 * can run ahead of another (a bcast source stays within MCOLL_AREA_SLOTS calls of
 * its readers). */
#define MCOLL_CLAIMS 128

struct mcoll_shm_header {
  uint64_t magic;
  _Atomic int32_t sleepers; /* waiters inside futex_wait: writers wake only if > 0 */
  int32_t local_size;
  /* The layout the creator computed: every rank checks it against its own before
   * using the segment (ranks started with different MCOLL_SHM_* must not use it). */
  uint64_t bytes, chunk, area_bytes;
  int32_t nslots, window;
  /* Set by a rank that cannot take part in the sleepers' process-wide fence: then
   * every rank publishes flags with full barriers (mcoll__flag_fence_setup). */
  _Atomic int32_t strong_flags;
  char pad[MCOLL_LINE - 4 * sizeof(uint64_t) - 5 * sizeof(int32_t)];
  /* Counter barrier (coll/barrier): arrivals so far, and the last barrier released.
   * One line, so that the last arriver's add and release take it once. */
  mcoll_flag barrier_arrived;
  mcoll_flag barrier_released;
  char barrier_pad[MCOLL_LINE - 2 * sizeof(mcoll_flag)];
  /* Non-blocking calls that meet (pmpi/wrap.c, mcoll__meet_run): the call's number
   * in the high half, the ranks arrived (and a bit: given up) in the low half. */
  _Atomic uint64_t nbc_meet;
  char meet_pad[MCOLL_LINE - sizeof(uint64_t)];
  /* The scheduler's autogroup of the first rank to set up (0: none), and whether
   * another rank's differs (shm/wait.c: a yield then cannot hand the core over). */
  _Atomic uint64_t autogroup;
  _Atomic int32_t autogroups_differ;
  char group_pad[MCOLL_LINE - sizeof(uint64_t) - sizeof(int32_t)];
};

/* A block of at most MCOLL_INLINE_MAX bytes travels in one cache line with the
 * generation that says it is there, so the reader's one miss brings both (a flag,
 * a table and the data apart cost three cross-core transfers). Each node-local rank
 * has MCOLL_INLINE_SLOTS lines, used in turn by generation and by nothing else, so
 * a line's stamp only ever grows. */
#define MCOLL_INLINE_MAX 56
#define MCOLL_INLINE_SLOTS 128
/* Slots per rank's area for small calls that run ahead (node/slot.h). */
#define MCOLL_AREA_SLOTS 128
struct mcoll_inline_line {
  mcoll_flag stamp; /* the generation whose data the line holds */
  uint32_t len;
  char data[MCOLL_INLINE_MAX];
};

struct mcoll_shm {
  void *base;
  size_t bytes;
  struct mcoll_shm_header *hdr;
  struct mcoll_sync_line *sync; /* [local_size] */
  struct mcoll_data_line *data; /* [local_size] */
  struct mcoll_slot_ctl *slot;  /* [nslots] */
  struct mcoll_inline_line *inline_line; /* [local_size][MCOLL_INLINE_SLOTS] */
  /* First arrivals (node/claim.h): per bcast sequence modulo MCOLL_CLAIMS, the
   * sequence in the high half and the claiming rank in the low half. After the
   * lines above, so that their places in the segment stay as they were. */
  _Atomic uint64_t *first_arrival; /* [MCOLL_CLAIMS] */
  /* What a one-node bcast's source sends (coll/bcast/bcast.c, strayed): per source
   * (only it writes its lines) and bcast sequence modulo MCOLL_CLAIMS, its bytes,
   * then the sequence in the high half and its engine + 1 in the low half. */
  _Atomic uint64_t *bcast_sent; /* [local_size][MCOLL_CLAIMS][2] */
  char *slot_data;              /* nslots * chunk bytes */
  char *area;                   /* local_size * area_bytes: one area per rank */
  size_t area_bytes;
  size_t chunk;
  int nslots;                   /* ring size: a multiple of window */
  int window;                   /* slots copied concurrently by rotating reader groups */
  int local_rank, local_size;
  int spin;                     /* polls before yielding: few when oversubscribed */
  int oversubscribed;           /* more ranks on this machine than cores */
  int yield_futile;             /* oversubscribed, and the ranks' yields may not hand
                                   the core to each other (shm/wait.c) */
  int light_flags;              /* flags published with plain release stores (wait.c) */
};

/* Creates (node leader), maps (all), then unlinks the segment: after this call
 * nothing is left in /dev/shm even if a rank crashes. Collective over node_comm;
 * fails on every rank of the node alike (no space, layouts that differ). */
mcoll_status mcoll__shm_attach(MPI_Comm node_comm, int real_node_size, struct mcoll_shm *shm);
void mcoll__shm_detach(struct mcoll_shm *shm);

static inline char *mcoll__slot_data(const struct mcoll_shm *shm, int slot) {
  return shm->slot_data + (size_t)slot * shm->chunk;
}

/* Node-local rank r's inline line for generation gen. */
static inline struct mcoll_inline_line *mcoll__inline_line(const struct mcoll_shm *shm, int r,
                                                           uint32_t gen) {
  return &shm->inline_line[(size_t)r * MCOLL_INLINE_SLOTS + gen % MCOLL_INLINE_SLOTS];
}

/* The area owned by node-local rank r (written by r, read by the others). */
static inline char *mcoll__rank_area(const struct mcoll_shm *shm, int r) {
  return shm->area + (size_t)r * shm->area_bytes;
}

/* Sequence numbers wrap: compare modulo 2^32. */
static inline int mcoll__reached(uint32_t value, uint32_t target) {
  return (int32_t)(value - target) >= 0;
}

/* Whether flags of this segment may be published with plain release stores: every
 * rank of the node registered for the process-wide fence that a sleeper issues
 * instead (wait.c). Each rank marks its inability in the header before the set-up's
 * last node barrier (mark) and reads the node's verdict after it (decide). */
void mcoll__flag_fence_mark(struct mcoll_shm *shm);
void mcoll__flag_fence_decide(struct mcoll_shm *shm);
/* The same for yield_futile: each rank writes its scheduler autogroup before that
 * barrier, and after it the node knows whether all ranks share one (wait.c). */
void mcoll__yield_mark(struct mcoll_shm *shm);
void mcoll__yield_decide(struct mcoll_shm *shm);
/* The MCOLL_VERBOSE report's line on it (nothing where yields work). */
void mcoll__wait_report(FILE *out);
/* Registers the process for that fence now, once. The kernel registers a process
 * of one thread at once, one with threads only after a grace period: the host
 * MPI's init starts threads, so MPI_Init registers before it. */
void mcoll__flag_fence_register(void);
/* Publishes a flag value and wakes sleepers, if any. */
void mcoll__flag_set(const struct mcoll_shm *shm, mcoll_flag *flag, uint32_t value);
/* Adds to a flag that others may wait on (wakes sleepers as mcoll__flag_set does);
 * returns the new value. */
uint32_t mcoll__flag_add(const struct mcoll_shm *shm, mcoll_flag *flag, uint32_t add);

/* Whether process pid has exited (gone, or a zombie). */
int mcoll__process_gone(pid_t pid);

/* What the waits below also run past their spin (every 32 polls), given the node's
 * segment: the call descriptors' check (shm/call.c, which sits above the waits), set
 * once at the start of mcoll (pmpi/init.c). */
void mcoll__wait_set_poll(void (*poll)(const struct mcoll_shm *shm));

/* Waits until *flag reaches target. Aborts the job if a node peer dies meanwhile.
 * Inside a reduction (shm/call.h), past the spin it also looks at the peers' call
 * descriptors, and leaves the call (longjmp) when they disagree with this rank's. */
void mcoll__flag_wait(const struct mcoll_shm *shm, mcoll_flag *flag, uint32_t target);
/* Whether flag reaches target within flag_wait's spin (then it would not have yielded
 * or slept); never waits longer. */
int mcoll__flag_poll(const struct mcoll_shm *shm, mcoll_flag *flag, uint32_t target);
/* The same until *flag is exactly target (a stamp that other data may have
 * overwritten: any other value, even a larger one, means not yet). */
void mcoll__flag_wait_exact(const struct mcoll_shm *shm, mcoll_flag *flag, uint32_t target);
/* mcoll__flag_wait that gives up once stop(stop_arg) holds, which it asks only past
 * the spin (every 32 polls): 1 when the flag reached target, 0 when it stopped. For a
 * reader that may wait on the flag of another protocol than its source's (an erroneous
 * program), at no cost while the flag comes in time. */
int mcoll__flag_wait_unless(const struct mcoll_shm *shm, mcoll_flag *flag, uint32_t target,
                            int (*stop)(void *), void *stop_arg);
/* The test twins of mcoll__flag_wait and mcoll__flag_wait_exact: whether the flag holds now. */
static inline int mcoll__flag_test(const mcoll_flag *flag, uint32_t target) {
  return mcoll__reached(atomic_load_explicit(flag, memory_order_acquire), target);
}
static inline int mcoll__flag_test_exact(const mcoll_flag *flag, uint32_t target) {
  return atomic_load_explicit(flag, memory_order_acquire) == target;
}
/* Waits until ready(arg), polling as the flag waits do (never sleeps on a futex:
 * wakes every millisecond once past the yield phase). */
void mcoll__wait_until(const struct mcoll_shm *shm, int (*ready)(void *), void *arg);

/* Single copy (CMA) from another process; 0 or an errno. */
int mcoll__cma_read(pid_t pid, void *dst, uint64_t remote_addr, size_t bytes);
/* The other way: bytes at src into remote_addr of process pid (process_vm_writev). */
int mcoll__cma_write(pid_t pid, uint64_t remote_addr, const void *src, size_t bytes);

/* Whether every rank of the node can read its peers with CMA; collective. */
int mcoll__cma_probe(MPI_Comm node_comm, const struct mcoll_shm *shm);

#endif
