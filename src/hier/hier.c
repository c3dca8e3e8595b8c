#include "hier/hier.h"

#include <sched.h>

#include "core/config.h"
#include "core/fiber.h"
#include "core/tls.h"
#include "task/task.h"

/* Runs every step even after an error, keeping the first: the node's other ranks
 * wait in the intra-node steps for this one, the other nodes' leaders in the
 * inter-node step (an error there is the host MPI's, e.g. a truncation when nodes
 * disagree on the size: the buffers hold what came). */
static void keep_first(int *err, int step_err) {
  if (*err == MPI_SUCCESS) *err = step_err;
}

/* Piece i is bytes [i*piece, (i+1)*piece) of the call (one piece when unpieced). */
static size_t piece_size(const struct mcoll_hier_call *call) {
  return call->piece ? call->piece : call->bytes;
}
static size_t piece_lo(const struct mcoll_hier_call *call, size_t i) {
  size_t lo = i * piece_size(call);
  return lo < call->bytes ? lo : call->bytes;
}
static size_t piece_hi(const struct mcoll_hier_call *call, size_t i) {
  return piece_lo(call, i + 1);
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
  for (size_t i = 0; i < side->npieces; i++) {
    while (side->ups_done <= i) mcoll__fiber_yield();
    keep_first(&side->err, call->steps->inter(call, piece_lo(call, i), piece_hi(call, i)));
    side->inters_done = i + 1;
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

/* After its last intra-node step, a call with nothing left but inter-node steps
 * (reduce's leader: up, then inter) is independent (task/task.h): the next calls of
 * its communicator may begin their node steps beside its inter-node ones. */
static void node_steps_over(const struct mcoll_hier_call *call) {
  if (!call->steps->intra_down && !call->steps->finish) mcoll__task_independent();
}

/* The pieces, `ahead` of them up before the first down. ahead 0: up(i), inter(i),
 * down(i), piece after piece. ahead 1 (the overlapped order): every rank of the node
 * runs up(i+1) before down(i), so that the leader's inter-node step of piece i, on
 * the companion fiber, runs while the node folds or fills piece i+1 (the intra-node
 * protocol sees the same order of steps on every rank of the node). A leader with no
 * companion runs its inter-node steps inline, just before each down. */
static int run_pieces(struct mcoll_hier_call *call, int inter, size_t ahead,
                      struct mcoll_fiber *companion) {
  const struct mcoll_hier_steps *steps = call->steps;
  int inter_inline = inter && !companion;
  /* One piece (every call within a node): its steps straight, the hot path of the
   * small calls. */
  if (!call->piece || call->bytes <= call->piece) {
    int err = MPI_SUCCESS;
    if (steps->intra_up) keep_first(&err, steps->intra_up(call, 0, call->bytes));
    node_steps_over(call);
    if (inter) keep_first(&err, steps->inter(call, 0, call->bytes));
    if (steps->intra_down) keep_first(&err, steps->intra_down(call, 0, call->bytes));
    return err;
  }
  size_t npieces = (call->bytes + call->piece - 1) / call->piece;
  struct inter_side side = {call, npieces, steps->intra_up ? 0 : npieces, 0, MPI_SUCCESS};
  if (companion) {
    mcoll__fiber_reset(companion, inter_main, &side);
    mcoll__fiber_set_companion(companion);
    mcoll__fiber_pump(); /* starts piece 0 (bcast: every piece) at once */
  }
  int err = MPI_SUCCESS;
  for (size_t i = 0; i < npieces + ahead; i++) {
    if (i < npieces && steps->intra_up) {
      keep_first(&err, steps->intra_up(call, piece_lo(call, i), piece_hi(call, i)));
      side.ups_done = i + 1;
      if (i + 1 == npieces) node_steps_over(call);
      if (companion) mcoll__fiber_pump();
    }
    if (i < ahead) continue;
    size_t d = i - ahead, lo = piece_lo(call, d), hi = piece_hi(call, d);
    if (companion) await_inter(&side, d + 1);
    if (inter_inline) keep_first(&err, steps->inter(call, lo, hi));
    if (steps->intra_down) keep_first(&err, steps->intra_down(call, lo, hi));
  }
  if (companion) {
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
  /* A rank alone on its node has no node steps to overlap: its pieces go inline, as
   * blocking host calls, which the host MPI's transport drives faster than the
   * companion's test-and-yield waits (docs/algorithms.md). */
  int pieced = call->overlap && mcoll__cfg.INTER_OVERLAP && t->nnodes > 1 && call->piece &&
               call->bytes > call->piece && t->local_size > 1;
  /* A rank alone on its node has no node steps: the call's state is its own (its
   * sequence numbers were taken before) and its messages carry the call's tags, so
   * the later calls of its communicator may run beside it. */
  if (t->nnodes > 1 && t->local_size == 1) mcoll__task_independent();
  struct mcoll_fiber *companion = NULL;
  if (pieced && inter) {
    companion = spare_companion ? spare_companion : mcoll__fiber_new(inter_main, NULL);
    spare_companion = NULL;
  }
  /* Every rank of a node takes the same branch: it depends on the call's size and
   * the communicator's shape only (a leader without a companion still runs the
   * overlapped order, its inter-node steps then inline). */
  int err = run_pieces(call, inter, pieced ? 1 : 0, companion);
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
