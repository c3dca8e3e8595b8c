/* The transport between thread ranks in different processes of one node (node_copy.c):
 * the node's shared rings and blocks, and single copy. Below the runtime's matching
 * (runtime.c), which it does not know. */
#ifndef MCOLL_THREADS_NODE_COPY_H
#define MCOLL_THREADS_NODE_COPY_H

#include <mpi.h>
#include <stdatomic.h>
#include <stddef.h>

#include "rings.h"

struct thr_node_queue;
/* A rank's sending side towards other processes of its node (node_copy.c): per node
 * rank, messages waiting for room, in the order sent (allocated at the first), how
 * many wait, where its look for a free block starts, and its own node rank. */
struct thr_node_out {
  struct thr_node_queue *pending;
  long queued;
  int next_block;
  int node_rank;
};

/* Set up over the node's processes (collective), and unmapped at the end. */
void thr_node_copy_init(MPI_Comm node, int process, int processes, int threads);
void thr_node_copy_finalize(void);
/* The rings: a thread rank's node rank, or -1 when messages to it do not take them;
 * how many the node has; this process's; whether one is a thread of this process; the
 * ring from sender to receiver (node ranks). */
int thr_node_rings_on(void);
int thr_node_rank(int process, int thread);
int thr_node_rank_count(void);
int thr_node_rank_of_thread(int thread);
int thr_node_rank_is_local(int node_rank);
struct thr_ring *thr_node_ring(int receiver, int sender);
/* A message into node rank dst's ring, or its pair's queue at the sender while there
 * is no room. Returns 1 when the send is complete (its bytes inline, or in a block);
 * else *done is set once they are in a block (by this rank's progress) or once the
 * receiver has read them from bytes (from the single-copy limit). */
int thr_node_send(struct thr_node_out *out, int dst, int ctx, int src, int tag,
                  const void *bytes, size_t len, atomic_int *done);
/* This process's wake word in the segment (NULL without one); after a rank drained a
 * ring, what its sender in another process may wait for (a slot, a block) is free. */
struct thr_wake_word *thr_node_wake_word(void);
void thr_node_wake_sender(int node_rank);
/* The bytes of a THR_SLOT_BLOCK message, and its block given back once they are copied. */
const void *thr_node_block(const struct thr_peer_ref *ref);
void thr_node_block_free(const struct thr_peer_ref *ref);
/* The sender's queues into the rings; at finalize (after the last barrier) what is
 * left, never received, dropped. */
void thr_node_send_progress(struct thr_node_out *out, int finalize);
/* Single copy: whether a message of len bytes to host process `process` goes that way;
 * its bytes read from the sender; the sender's flag set. */
int thr_node_copy_takes(int process, size_t len);
void thr_node_copy_read(const struct thr_peer_ref *ref, void *dst, size_t len);
void thr_node_copy_release(const struct thr_peer_ref *ref);
long thr_node_copy_count(void); /* messages this process read so */

#endif
