/* Call descriptors: how the ranks of a node notice that they are in the same
 * collective call with different sizes (an erroneous program: counts that differ
 * between ranks), instead of reading past each other's buffers or waiting forever
 * on flags of different algorithms.
 *
 * Each rank publishes, in its data line (shm.h), the call it is in: a sequence
 * number (2n+1 inside its n-th guarded call on the segment, 2n+2 once it has left
 * it) and a 32-bit digest of what every rank must agree on (bytes, algorithm, shape
 * of the result); and keeps its last MCOLL_CALL_LOG descriptors by n, for readers
 * that look after it has gone on. That costs a few stores into a line the rank
 * writes in the same call anyway, and nothing for the readers: they compare the
 * descriptor beside the flag they waited on (mcoll__call_check), and a waiter past
 * the spin compares every peer's (mcoll__call_poll, from the flag waits).
 *
 * A rank that finds a disagreement leaves the call at once (longjmp to
 * where the call began; nothing in between allocates),
 * marks the call as mismatched in its line, and waits until every peer has either
 * marked it too or left it: a peer waiting on this rank sees the mark when it polls.
 * Then the node's protocol is put back in step (see the caller, coll/reduce). */
#ifndef MCOLL_CALL_H
#define MCOLL_CALL_H

#include <setjmp.h>
#include <stdint.h>

#include "core/tls.h"
#include "shm/shm.h"

#define MCOLL_CALL_LOG 8

struct mcoll_call {
  const struct mcoll_shm *shm;
  uint32_t seq;    /* 2n+1 */
  uint32_t digest;
  jmp_buf escape;
};

/* A digest of the values that every rank of the node must give the call. */
uint32_t mcoll__call_digest(uint64_t a, uint64_t b);

/* Publishes the call and makes it current on this thread. The caller then arms
 * the escape: `if (setjmp(call.escape) == 0) { ... }` in the frame that stays alive
 * for the whole call (locals changed since are indeterminate after the escape,
 * unless volatile). */
void mcoll__call_enter(struct mcoll_call *call, const struct mcoll_shm *shm, uint32_t digest);
/* The call is over on this rank. */
void mcoll__call_leave(struct mcoll_call *call);

/* Leaves the current call (it must be guarded). */
_Noreturn void mcoll__call_escape(void);

/* After waiting for a flag that node-local rank x sets in this call: leaves the call
 * unless x's descriptor agrees (x in this call with my digest, or gone on, its log
 * saying it had my digest or no longer saying). strict: x must still be inside the
 * call (an algorithm where nobody leaves before every peer is done). */
void mcoll__call_check(int x, int strict);

/* From a wait past its spin: leaves the current call (if any, on this segment) when
 * a peer is in it with another digest, or marked it mismatched. */
void mcoll__call_poll(const struct mcoll_shm *shm);

/* After an escape: marks the call mismatched and waits until every peer has marked
 * it or left it. The call is still this rank's current one (leave it after). */
void mcoll__call_settle(struct mcoll_call *call);

/* The guarded call this thread is in, or NULL. */
extern MCOLL_TLS struct mcoll_call *mcoll__call_current;

#endif
