#include "coll/move.h"

#include <setjmp.h>
#include <stdint.h>

/* A call's digest is the block length itself where it fits, so that a reader can
 * tell a longer block from a shorter one. */
enum { HASHED = 1u << 31 };

static uint32_t digest_of(size_t len) {
  return len < HASHED ? (uint32_t)len : HASHED | mcoll__call_digest(len, 0);
}

static size_t expected(const struct mcoll_move_guard *g, int x) {
  return g->expects ? g->expects(g->arg, x) : g->my_len;
}

static int accepts(const struct mcoll_call *call, int x, uint32_t digest) {
  size_t len = expected(call->accepts_arg, x);
  return len == SIZE_MAX || digest == digest_of(len);
}

/* Whether node-local rank x gave the call a longer block than this rank expects, as
 * far as its line still says (a peer long gone on may no longer say: counted as
 * longer, the error the host MPIs give most such programs). */
static int gave_longer(const struct mcoll_call *call, const struct mcoll_move_guard *g, int x) {
  const struct mcoll_data_line *line = &call->shm->data[x];
  uint64_t w = atomic_load_explicit(&line->call, memory_order_acquire);
  if ((uint32_t)(w >> 32) != call->seq) w = atomic_load(&line->call_log[call->seq % MCOLL_CALL_LOG]);
  size_t len = expected(g, x);
  if (len == SIZE_MAX) return 0;
  if ((uint32_t)(w >> 32) != call->seq || ((uint32_t)w & HASHED) || len >= HASHED) return 1;
  return (uint32_t)w > len;
}

static int truncated(const struct mcoll_call *call, const struct mcoll_move_guard *g) {
  for (int x = 0; x < call->shm->local_size; x++)
    if (x != call->shm->local_rank && gave_longer(call, g, x)) return 1;
  return 0;
}

int mcoll__move_guarded(struct mcoll_comm *c, const struct mcoll_move_guard *g) {
  if (mcoll__call_current) { /* inside another guarded call, which handles it */
    g->body(c, g->arg);
    return MPI_SUCCESS;
  }
  struct mcoll_call call;
  const uint32_t start_gen = mcoll__area_last(c->chan);
  mcoll__call_enter(&call, &c->chan->shm, start_gen + 1, digest_of(g->my_len));
  if (g->expects) { /* else every peer must give my digest: no lookup */
    call.accepts = accepts;
    call.accepts_arg = g;
  }
  if (setjmp(call.escape) == 0) {
    g->body(c, g->arg);
    mcoll__call_leave();
    return MPI_SUCCESS;
  }
  mcoll__call_settle(&call);
  int err = g->reads && truncated(&call, g) ? MPI_ERR_TRUNCATE : MPI_SUCCESS;
  mcoll__area_resync(c->chan, start_gen, call.beside, &c->chan->area_slots);
  mcoll__call_leave();
  return err;
}
