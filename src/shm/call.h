/* Call descriptors: how the ranks of a node notice that they are in the same
 * collective call with different sizes (an erroneous program: counts that differ
 * between ranks), instead of reading past each other's buffers or waiting forever
 * on flags of different algorithms.
 *
 * A call is known by its sequence number -- the first area generation it uses, the
 * same on every rank of the node -- and a 32-bit digest of what every rank must
 * give it alike (bytes, algorithm, shape of the result). A rank publishes both in
 * its data line (shm.h), beside posted and done, before it posts anything in a call
 * whose readers look there (the whole-area engines), and keeps its last
 * MCOLL_CALL_LOG descriptors by sequence for readers that look after it has gone
 * on; the flat engine's slot calls carry the digest beside the stamp instead and
 * publish nothing in the data line unless they have to wait long: a store to a line
 * that an ahead peer keeps reading costs a cache-line transfer, a large share of a
 * small call (hence no descriptor at every call's start and end). Readers
 * compare the descriptor beside the flag they waited on (mcoll__call_check), and a
 * waiter past the spin publishes its own and compares every peer's
 * (mcoll__call_poll, from the flag waits).
 *
 * A rank that finds a disagreement leaves the call at once (longjmp to where the
 * call began; nothing in between allocates), marks the call as mismatched in its
 * line, and waits until every peer has marked it too, or is done with its first
 * generation, or has published a later call: a peer still waiting in the call sees
 * the mark when it polls. Then the node's protocol is put back in step (the caller,
 * coll/reduce/red_node.c). */
#ifndef MCOLL_CALL_H
#define MCOLL_CALL_H

#include <setjmp.h>
#include <stdint.h>

#include "core/tls.h"
#include "shm/shm.h"

#define MCOLL_CALL_LOG 8

struct mcoll_call {
  const struct mcoll_shm *shm;
  uint32_t seq;    /* the call's first area generation */
  uint32_t digest;
  int published;   /* the descriptor is in my data line */
  int beside;      /* later calls started beside it (coll/beside.h): the node's
                    * counters have moved on with them */
  /* Instead of the descriptors: a call that publishes none (a bcast reader) leaves
   * when this says that the call's flags will never come. */
  int (*strayed)(const struct mcoll_call *call);
  const void *strayed_arg;
  /* Where ranks give the call different values in a right program (the gather
   * family's v-forms: each rank its own block length): whether node-local rank x
   * may give `digest`; NULL: only my digest. */
  int (*accepts)(const struct mcoll_call *call, int x, uint32_t digest);
  const void *accepts_arg;
  jmp_buf escape;
};

/* The guarded call this thread is in, or NULL. */
extern MCOLL_TLS struct mcoll_call *mcoll__call_current;

/* A digest of the values that every rank of the node must give the call. */
static inline uint32_t mcoll__call_digest(uint64_t a, uint64_t b) {
  uint64_t h = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  return (uint32_t)(h ^ h >> 32);
}

/* Makes the call current on this thread (stores nothing shared). The caller then
 * arms the escape: `if (setjmp(call.escape) == 0) { ... }` in the frame that stays
 * alive for the whole call (locals changed since are indeterminate after the
 * escape, unless volatile). */
static inline void mcoll__call_enter(struct mcoll_call *call, const struct mcoll_shm *shm,
                                     uint32_t seq, uint32_t digest) {
  call->shm = shm;
  call->seq = seq;
  call->digest = digest;
  call->published = 0;
  call->beside = 0;
  call->strayed = NULL;
  call->accepts = NULL;
  mcoll__call_current = call;
}

/* Puts the descriptor in my data line (before the first flag its readers check). */
void mcoll__call_publish(struct mcoll_call *call);

/* The call is over on this rank. */
static inline void mcoll__call_leave(void) { mcoll__call_current = NULL; }

/* Leaves the current call (it must be guarded). */
_Noreturn void mcoll__call_escape(void);

/* After waiting for a flag that node-local rank x sets in this call in a whole-area
 * engine (x published before setting it): leaves the call unless x's descriptor
 * agrees (x in this call with my digest, or gone on, its log saying it had my
 * digest or no longer saying). strict: x must still be in the call (an algorithm
 * where nobody leaves before every peer is done). */
void mcoll__call_check(int x, int strict);

/* From a wait past its spin: publishes mine, and leaves the current call (if any, on
 * this segment) when a peer is in it with another digest, or marked it mismatched. */
void mcoll__call_poll(const struct mcoll_shm *shm);

/* After an escape: marks the call mismatched and waits until every peer has marked
 * it, is done with its first generation, or has published a later call. */
void mcoll__call_settle(struct mcoll_call *call);

#endif
