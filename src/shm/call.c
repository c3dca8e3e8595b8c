#include "shm/call.h"

#include <stddef.h>

MCOLL_TLS struct mcoll_call *mcoll__call_current;

/* posted, done and the descriptor share the first half of the line. */
_Static_assert(offsetof(struct mcoll_data_line, call) + sizeof(uint64_t) <= 64 &&
                   offsetof(struct mcoll_data_line, posted) / 64 == 0 &&
                   offsetof(struct mcoll_data_line, done) / 64 == 0,
               "the descriptor sits in the cache line of posted and done");

static uint64_t word(uint32_t seq, uint32_t digest) { return (uint64_t)seq << 32 | digest; }
static uint32_t seq_of(uint64_t w) { return (uint32_t)(w >> 32); }

void mcoll__call_publish(struct mcoll_call *call) {
  const struct mcoll_shm *shm = call->shm;
  struct mcoll_data_line *me = &shm->data[shm->local_rank];
  atomic_store_explicit(&me->call_log[call->seq % MCOLL_CALL_LOG], word(call->seq, call->digest),
                        memory_order_relaxed);
  atomic_store_explicit(&me->call, word(call->seq, call->digest), memory_order_release);
  call->published = 1;
}

_Noreturn void mcoll__call_escape(void) {
  longjmp(mcoll__call_current->escape, 1);
}

static int digest_ok(const struct mcoll_call *call, int x, uint32_t digest) {
  return call->accepts ? call->accepts(call, x, digest) : digest == call->digest;
}

/* 1: x agrees with the call as far as its line tells; 0: it does not. */
static int agrees(const struct mcoll_call *call, int x, int strict) {
  const struct mcoll_data_line *line = &call->shm->data[x];
  uint64_t w = atomic_load_explicit(&line->call, memory_order_acquire);
  int32_t ahead = (int32_t)(seq_of(w) - call->seq);
  if (ahead == 0) return digest_ok(call, x, (uint32_t)w);
  if (ahead < 0 || strict) return 0; /* not in it yet, yet it set the flag: another call */
  uint64_t logged = atomic_load_explicit(&line->call_log[call->seq % MCOLL_CALL_LOG],
                                         memory_order_relaxed);
  return seq_of(logged) != call->seq || digest_ok(call, x, (uint32_t)logged);
}

void mcoll__call_check(int x, int strict) {
  struct mcoll_call *call = mcoll__call_current;
  if (call && !agrees(call, x, strict)) mcoll__call_escape();
}

void mcoll__call_poll(const struct mcoll_shm *shm) {
  struct mcoll_call *call = mcoll__call_current;
  if (!call || call->shm != shm) return;
  if (call->strayed) {
    if (call->strayed(call)) mcoll__call_escape();
    return;
  }
  if (!call->published) mcoll__call_publish(call);
  for (int x = 0; x < shm->local_size; x++) {
    if (x == shm->local_rank) continue;
    const struct mcoll_data_line *line = &shm->data[x];
    uint64_t w = atomic_load_explicit(&line->call, memory_order_acquire);
    int32_t ahead = (int32_t)(seq_of(w) - call->seq);
    if (atomic_load_explicit(&line->call_mismatch, memory_order_acquire) == call->seq ||
        (ahead == 0 && !digest_ok(call, x, (uint32_t)w)))
      mcoll__call_escape();
    /* A peer gone on whose log says it had another digest: the flags this rank waits
     * for will be another call's. */
    if (ahead > 0 && !agrees(call, x, 0)) mcoll__call_escape();
  }
}

static int settled(void *arg) {
  const struct mcoll_call *call = arg;
  const struct mcoll_shm *shm = call->shm;
  for (int x = 0; x < shm->local_size; x++) {
    if (x == shm->local_rank) continue;
    const struct mcoll_data_line *line = &shm->data[x];
    if (atomic_load_explicit(&line->call_mismatch, memory_order_acquire) == call->seq) continue;
    /* Done with the call's first generation: it read what it needed of mine (every
     * engine marks a generation done once its reads of it are over; the flat engine,
     * the one that may finish without noticing, uses one generation). */
    if (mcoll__reached(atomic_load_explicit(&line->done, memory_order_acquire), call->seq))
      continue;
    uint64_t w = atomic_load_explicit(&line->call, memory_order_acquire);
    if ((int32_t)(seq_of(w) - call->seq) <= 0) return 0;
  }
  return 1;
}

void mcoll__call_settle(struct mcoll_call *call) {
  const struct mcoll_shm *shm = call->shm;
  if (!call->published) mcoll__call_publish(call);
  mcoll__call_current = NULL; /* no escape from the waits below */
  mcoll__flag_set(shm, &shm->data[shm->local_rank].call_mismatch, call->seq);
  mcoll__wait_until(shm, settled, call);
}
