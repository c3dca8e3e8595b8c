#ifndef MCOLL_BCAST_H
#define MCOLL_BCAST_H

#include <stddef.h>

#include "coll/adapt.h"
#include "comm/context.h"

enum mcoll_bcast_alg {
  MCOLL_BCAST_SHM_TREE,
  MCOLL_BCAST_SHM_PIPELINE,
  MCOLL_BCAST_CMA,
  MCOLL_BCAST_SHM_SLOT,
  MCOLL_BCAST_NALGS
};

/* Between nodes (bcast_inter.c). */
enum mcoll_bcast_inter_alg {
  MCOLL_BCAST_INTER_BINOMIAL,
  MCOLL_BCAST_INTER_SAG,
  MCOLL_BCAST_INTER_FIRST,
  MCOLL_BCAST_INTER_PUSH,
  MCOLL_BCAST_INTER_NALGS
};

/* One bcast as seen by one rank of a node. The node's source is the root on the
 * root's node, the node leader elsewhere (it receives from the other nodes): its
 * first rank to arrive with first_arrival (node/claim.h). */
struct mcoll_bcast_call {
  struct mcoll_comm *c;
  char *buf;
  size_t bytes;
  int root;
  int source; /* node-local rank that holds (or receives) the data */
  const struct mcoll_bcast_intra *intra;
  int inter_alg; /* MCOLL_BCAST_INTER_*, when there are several nodes */
  /* Readers compare the source's byte count with theirs (one node, one piece): in
   * an erroneous program they differ, and then error is what the host MPI reports. */
  int check_bytes;
  int error;
  /* What the call took from the node's counters when it began (its own from then
   * on): its bcast sequence number, and the first generation and count of its
   * engine's own counter (the ring's chunks, the source's single-copy chunks; for
   * the slot engine its one area generation, and how far its source may write
   * ahead of the readers). */
  uint32_t seq, base, gens;
  struct mcoll_slot_run slot_run; /* the slot engine's run before begin (abandon) */
  /* first_arrival: the call's parity among its communicator's first_arrival calls
   * (their announcements' tag), and at the root the other nodes' leaders in the
   * order they announced themselves. */
  unsigned parity;
  int *leaders;
  /* first_arrival's root: its node has the whole call already (published before the
   * root waits for the other nodes' announcements) */
  int published;
};

/* The intra-node step: the source publishes byte ranges as they become valid in
 * its buffer; the readers copy the same ranges out. Every rank calls finish. */
struct mcoll_bcast_intra {
  /* Takes the engine's generations for the call (NULL: it takes them as it goes). */
  void (*begin)(struct mcoll_bcast_call *call);
  void (*publish)(const struct mcoll_bcast_call *call, size_t lo, size_t hi);
  /* Returns call->bytes; or, when call->check_bytes and the source broadcasts
   * another count, that count, having read and consumed nothing (lo is then 0). */
  size_t (*read)(const struct mcoll_bcast_call *call, size_t lo, size_t hi);
  void (*finish)(const struct mcoll_bcast_call *call);
  /* A reader that waits in this engine while its source broadcasts another count
   * with another engine (an erroneous program whose sizes straddle an algorithm's
   * edge): gives back what begin took, before it reads by the source's engine.
   * NULL: such a reader is not noticed. */
  void (*abandon)(struct mcoll_bcast_call *call);
};

/* The call begins on its node: takes its sequence number and its engine's
 * generations, on every rank of the node in the same order. */
void mcoll__bcast_call_begin(struct mcoll_bcast_call *call);

extern const struct mcoll_bcast_intra mcoll__bcast_shm_tree;
/* Whether a shm_tree bcast of `bytes` from node-local `source` would run to its end
 * on this rank now without waiting (one area chunk: the source's area free; a
 * reader's parent posted, of this size, and where the reader forwards, its own area
 * free), polled for a flag wait's spin. Each stays true once seen (only this rank
 * posts its area; the peers' marks only grow). Nothing is taken. */
int mcoll__bcast_shm_tree_ready(const struct mcoll_comm *c, size_t bytes, int source);
extern const struct mcoll_bcast_intra mcoll__bcast_shm_pipeline;
extern const struct mcoll_bcast_intra mcoll__bcast_cma;
extern const struct mcoll_bcast_intra mcoll__bcast_shm_slot;

/* The one selection step of bcast (bcast.c): every size threshold of bcast's
 * intra-node choice (MCOLL_BCAST_SLOT_MAX, _TREE_MAX, _CMA_MIN/_MAX/_RANKS) is
 * applied here, from facts every rank of the node sees alike (the call's size, the
 * node's shape and channel, the environment), after MCOLL_ALG_BCAST where its
 * restrictions hold; the algorithm is counted: the report says what ran. Engines
 * keep only their own tuning (BCAST_K, BCAST_AHEAD), the inter-node step its piece
 * algorithm (bcast_inter.c). A blocking call's choice then adapts at run time
 * (coll/adapt.h): mcoll__adapt_done(timing) after the call. */
int mcoll__bcast_select(struct mcoll_comm *c, size_t bytes, struct mcoll_adapt_call *timing);

/* The intra-node engine that takes a whole result of `bytes` from node-local rank 0
 * down the node, for collectives built on bcast's engines (allgather across nodes):
 * single copy where bcast's rule picks it by size (MCOLL_BCAST_CMA_MIN, on nodes of
 * MCOLL_BCAST_CMA_RANKS; without bcast's upper limit, as allgather always did) or
 * where force_cma (and CMA works), else the ring. */
const struct mcoll_bcast_intra *mcoll__bcast_down_engine(const struct mcoll_comm *c, size_t bytes,
                                                         int force_cma);

/* Moves [lo, hi) of the buffer from the root's node to every node's source, by alg
 * (MCOLL_BCAST_INTER_*). */
int mcoll__bcast_between_nodes(struct mcoll_comm *c, char *buf, size_t lo, size_t hi, int root,
                               int alg);

/* first_arrival's step between nodes for [lo, hi) of the call (bcast_inter.c). */
int mcoll__bcast_first_arrival(struct mcoll_bcast_call *call, size_t lo, size_t hi);

/* push: the root's step, [lo, hi) to every rank of the other nodes; and a rank of
 * another node's whole call, its pieces (of `piece` bytes, 0: one) from the root. */
int mcoll__bcast_push_send(struct mcoll_bcast_call *call, size_t lo, size_t hi);
int mcoll__bcast_push_receive(struct mcoll_comm *c, char *buf, size_t bytes, size_t piece, int root);

/* bcast's selection step between nodes, for pieces of `piece` bytes (counted). */
int mcoll__bcast_inter_select(const struct mcoll_comm *c, size_t piece);

/* Bcast of contiguous bytes; returns an MPI error code. */
int mcoll__bcast(struct mcoll_comm *c, void *buf, size_t bytes, int root);

/* MPI_Ibcast or a persistent bcast's start on c, on the caller's stack, before any
 * task: on one node, where a task would run the slot engine or the tree (one area
 * chunk) and the call would not wait beyond a spin (the source's slot or area free,
 * a reader's data in), the call runs here: 1, *err its result. Else -1, nothing
 * taken: a task runs the whole call. -2: not such a call (another algorithm, or
 * not one node): the same on every rank, which then meet (pmpi/wrap.c). */
int mcoll__bcast_try(struct mcoll_comm *c, void *buf, size_t bytes, int root, int *err);

#endif
