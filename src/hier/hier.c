#include "hier/hier.h"

#include <sched.h>

#include "core/config.h"
#include "core/fiber.h"
#include "core/tls.h"

/* Runs every step even after an error, keeping the first: the node's other ranks
 * wait in the intra-node steps for this one, the other nodes' leaders in the
 * inter-node step (an error there is the host MPI's, e.g. a truncation when nodes
 * disagree on the size: the buffers hold what came). */
static void keep_first(int *err, int step_err) {
  if (*err == MPI_SUCCESS) *err = step_err;
}

static size_t piece_end(const struct mcoll_hier_call *call, size_t lo) {
  size_t piece = call->piece ? call->piece : call->bytes;
  return call->bytes - lo > piece ? lo + piece : call->bytes;
}

/* One piece after the other: up, inter, down. */
static int run_in_sequence(struct mcoll_hier_call *call, int inter) {
  const struct mcoll_hier_steps *steps = call->steps;
  int err = MPI_SUCCESS;
  size_t lo = 0;
  do {
    size_t hi = piece_end(call, lo);
    if (steps->intra_up) keep_first(&err, steps->intra_up(call, lo, hi));
    if (inter) keep_first(&err, steps->inter(call, lo, hi));
    if (steps->intra_down) keep_first(&err, steps->intra_down(call, lo, hi));
    lo = hi;
  } while (lo < call->bytes);
  return err;
}

/* The leader's inter-node steps on a companion fiber: piece i once the intra-node
 * step up has brought it (ups_done > i). Its host point-to-point waits yield back
 * to the leader's own steps, whose waits drive it on (mcoll__fiber_pump). */
struct inter_side {
  struct mcoll_hier_call *call;
  size_t npieces;
  size_t ups_done, inters_done;
  int err;
};

static void inter_main(void *arg) {
  struct inter_side *side = arg;
  struct mcoll_hier_call *call = side->call;
  size_t lo = 0;
  for (size_t i = 0; i < side->npieces; i++) {
    while (side->ups_done <= i) mcoll__fiber_yield();
    size_t hi = piece_end(call, lo);
    keep_first(&side->err, call->steps->inter(call, lo, hi));
    side->inters_done = i + 1;
    lo = hi;
  }
}

/* Drives the companion until it has done `pieces` inter-node steps. */
static void await_inter(struct inter_side *side, size_t pieces) {
  for (unsigned polls = 1; side->inters_done < pieces; polls++) {
    mcoll__fiber_pump();
    if (side->inters_done >= pieces) break;
    if (mcoll__fiber_self()) mcoll__fiber_yield(); /* a task: the engine runs the others */
    else if (polls % 16 == 0) sched_yield();       /* oversubscribed: let the peers run */
  }
}

/* Every rank of the node: up(i+1) before down(i), so that the leader's inter-node
 * step of piece i runs while the node folds or fills piece i+1 (the intra-node
 * protocol sees the same order of steps on every rank of the node). */
static int run_overlapped(struct mcoll_hier_call *call, int inter, struct mcoll_fiber *companion) {
  const struct mcoll_hier_steps *steps = call->steps;
  int inter_inline = inter && !companion; /* no fiber to spare: in order, before down */
  if (inter_inline) inter = 0;
  size_t npieces = (call->bytes + call->piece - 1) / call->piece;
  struct inter_side side = {call, npieces, steps->intra_up ? 0 : npieces, 0, MPI_SUCCESS};
  if (inter) {
    mcoll__fiber_reset(companion, inter_main, &side);
    mcoll__fiber_set_companion(companion);
    mcoll__fiber_pump(); /* starts piece 0 (bcast: every piece) at once */
  }
  int err = MPI_SUCCESS;
  size_t up_lo = 0, down_lo = 0;
  for (size_t i = 0; i <= npieces; i++) {
    if (i < npieces && steps->intra_up) {
      size_t hi = piece_end(call, up_lo);
      keep_first(&err, steps->intra_up(call, up_lo, hi));
      up_lo = hi;
      side.ups_done = i + 1;
      if (inter) mcoll__fiber_pump();
    }
    if (i == 0) continue;
    if (inter) await_inter(&side, i);
    size_t hi = piece_end(call, down_lo);
    if (inter_inline) keep_first(&err, steps->inter(call, down_lo, hi));
    if (steps->intra_down) keep_first(&err, steps->intra_down(call, down_lo, hi));
    down_lo = hi;
  }
  if (inter) {
    mcoll__fiber_set_companion(NULL);
    keep_first(&err, side.err);
  }
  return err;
}

/* A spare companion per thread (its stack comes from the fiber pool). */
static MCOLL_TLS struct mcoll_fiber *spare_companion;

int mcoll__hier_run(struct mcoll_hier_call *call) {
  const struct mcoll_hier_steps *steps = call->steps;
  const struct mcoll_topo *t = &call->c->topo;
  int inter = t->nnodes > 1 && t->local_rank == call->leader && steps->inter;
  int err;
  int pieced = call->overlap && mcoll__cfg.INTER_OVERLAP && t->nnodes > 1 && call->piece &&
               call->bytes > call->piece;
  struct mcoll_fiber *companion = NULL;
  if (pieced && inter) {
    companion = spare_companion ? spare_companion : mcoll__fiber_new(inter_main, NULL);
    spare_companion = NULL;
    if (!companion) pieced = 0; /* out of memory: the steps in sequence */
  }
  /* Every rank of a node takes the same branch: it depends on the call's size and
   * the communicator's shape only (a leader without a companion still runs the
   * overlapped order, its inter-node steps then inline). */
  if (pieced) err = run_overlapped(call, inter, companion);
  else err = run_in_sequence(call, inter);
  if (companion) {
    if (spare_companion) mcoll__fiber_free(companion);
    else spare_companion = companion;
  }
  if (steps->finish) keep_first(&err, steps->finish(call));
  return err != MPI_SUCCESS ? err : call->deferred;
}

int mcoll__local_index(const struct mcoll_topo *t, int rank) {
  for (int i = 0; i < t->local_size; i++)
    if (t->local_ranks[i] == rank) return i;
  return -1;
}
