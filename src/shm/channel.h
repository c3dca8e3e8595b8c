/* A node channel: the node's shared segment and the protocol counters that the
 * ranks of the node advance in step. A channel belongs to a list of processes (its
 * members, in node-local order), not to a communicator: every context whose node
 * holds the same processes in the same order may use it (comm/context.c decides
 * when), and when its last context is freed it waits, mapped and warm, in a small
 * pool for the next communicator over the same processes. */
#ifndef MCOLL_CHANNEL_H
#define MCOLL_CHANNEL_H

#include <mpi.h>
#include <stdint.h>

#include "shm/shm.h"

/* A run of slot generations on the per-rank areas (node/slot.h): the first
 * generation of the run, the last one begun, and the least `done` seen at the
 * peers last time they were looked at. */
struct mcoll_slot_run {
  uint32_t from, last, seen;
};

/* Calls in flight side by side on one channel (node/area.h): the area generations
 * that some of them have yet to read, and the latest generation marked done by the
 * others. This rank's `done` says the least of them: every generation up to it is
 * read, whichever call owned it. */
enum { MCOLL_AREA_READERS = 4 };
struct mcoll_area_reads {
  int n;
  uint32_t gen[MCOLL_AREA_READERS];
  uint32_t marked;
};

/* How a rank reads and writes a node peer's memory (node/peer.h). */
enum mcoll_peer_mem {
  MCOLL_PEER_CMA,    /* processes: process_vm_readv/writev */
  MCOLL_PEER_SHARED, /* ranks in one address space (threads): memcpy */
};

struct mcoll_channel {
  struct mcoll_shm shm; /* mapped when the node has more than one rank */
  int cma_ok;           /* every rank of the node can read its peers (node/peer.h) */
  enum mcoll_peer_mem peer_mem; /* how (CMA unless the ranks share one address space) */
  /* Counters that advance identically on every rank of the node. */
  uint32_t barrier_seq;         /* hier barriers */
  uint32_t barrier_counter_seq; /* counter barriers (the count in the segment) */
  uint32_t ring_gen;            /* generations published through the ring */
  uint32_t bcast_seq;
  uint32_t area_gen;            /* generations of the per-rank areas (node/area.h) */
  struct mcoll_slot_run area_slots; /* runs of small area generations (node/slot.h) */
  struct mcoll_slot_run red_slots;  /* the same for the flat reduction's slots */
  struct mcoll_area_reads area_reads; /* generations calls side by side still read */
  uint32_t *cma_ready;          /* [local_size] each rank's cma_ready counter */
  /* Identity and ownership (channel.c). */
  unsigned id;       /* agreed by the members when it was made: equal ids name one channel */
  int nmembers;
  int *members;      /* world ranks of the node's ranks, in node-local order */
  int users;         /* contexts using it; 0: in the pool */
  int pooled;        /* made by mcoll__channel_create (else a private, segment-less one) */
  int exclusive;     /* its one context runs non-blocking calls: no other may claim it
                      * while it is in use (their order on the ranks may differ) */
  struct mcoll_channel *next;
};

/* A channel for a node of one rank: nothing shared, freed by its release. */
struct mcoll_channel *mcoll__channel_private(void);

/* Claims the channel with the smallest id whose members are `members` and that is
 * unused (or in use too, when `live_ok`), or returns NULL. */
struct mcoll_channel *mcoll__channel_claim(const int *members, int nmembers, int live_ok);

/* Collective over node_comm (the node's ranks in node-local order): maps a new
 * segment. On failure returns an error and nothing is held; on success the channel
 * is claimed once. */
mcoll_status mcoll__channel_create(MPI_Comm node_comm, int real_node_size, const int *members,
                                   unsigned id, struct mcoll_channel **out);

/* Drops one claim; an unused pooled channel stays mapped (the oldest beyond
 * MCOLL_CHANNEL_POOL are unmapped). */
void mcoll__channel_release(struct mcoll_channel *ch);

/* Channels this process has made. */
unsigned long mcoll__channels_made(void);

/* Unmaps every pooled channel (MPI_Finalize, after the contexts are gone). */
void mcoll__channel_free_all(void);

#endif
