/* What the wrappers share that is not inline (pmpi/wrap.h). */
#include "pmpi/wrap.h"

#include <string.h>

#include "coll/adapt.h"
#include "core/relax.h"

MCOLL_TLS struct mcoll_comm *mcoll__met_ctx;

struct mcoll_comm *mcoll__enter_task(enum mcoll_coll coll, MPI_Comm comm) {
  int exists = 1;
  struct mcoll_comm *c = mcoll__task_context_hint(comm);
  if (!c) c = mcoll__comm_find(comm, &exists);
  if (c && c->nbc == MCOLL_NBC_UNKNOWN && !mcoll__context_wished(comm)) {
    /* The first non-blocking call on comm, at the same point of its sequence of calls
     * on every rank: all agree, or the communicator's calls go to the host MPI. The
     * answer stays on the context only where the context is comm's own: calls of
     * the other communicators that share it may come before or after this one on
     * each rank, and must not find an answer that some ranks have and others not
     * yet (comm's wish for a context of its own, below, stands for a no). */
    int mine = mcoll__context_nbc_candidate(c), all = 0;
    int err = MCOLL_HOST(Allreduce, Iallreduce, &mine, &all, 1, MPI_INT, MPI_MIN, comm);
    int yes = err == MPI_SUCCESS && all;
    if (yes || c->private_ctx) mcoll__context_set_nbc(c, yes);
  }
  if (c && c->nbc == MCOLL_NBC_YES) {
    /* The ranks start a communicator's tasks in one order and each enters here
     * before the next may start (task/task.h): the same number everywhere. */
    mcoll__task_number(c->tasks_entered++);
    return c;
  }
  /* Without a context, or with one shared with other communicators (whose calls may
   * come in another order on other ranks): the host MPI takes this call, and comm
   * gets its own context at its next blocking collective. The same on every rank:
   * contexts are built at the same calls everywhere, and the rest was agreed. */
  if (!exists || (c && !c->private_ctx)) mcoll__context_wish_own(comm);
  mcoll__fallback(coll, MCOLL_WHY_NBC);
  return NULL;
}

int mcoll__array_entries(MPI_Comm comm) {
  int inter = 0, n = 0;
  if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return 0;
  if ((inter ? PMPI_Comm_remote_size(comm, &n) : PMPI_Comm_size(comm, &n)) != MPI_SUCCESS) return 0;
  return n;
}

int mcoll__is_root(MPI_Comm comm, int root) {
  int inter = 0, rank = -1;
  if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return 0;
  if (inter) return root == MPI_ROOT;
  return PMPI_Comm_rank(comm, &rank) == MPI_SUCCESS && rank == root;
}

/* A persistent request's own communicator: MPI matches persistent collectives in
 * the order of their initialisations, and the ranks may start them in any order;
 * mcoll runs a communicator's calls in the order they start (task/task.h). On a
 * duplicate made at init, the same point on every rank, the starts of one request
 * meet only one another, and calls of different communicators run side by side.
 * Its context is built there too (set-up may block, which a start may not): the
 * starts run mcoll's algorithms. The duplicate also keeps the call valid when the
 * application frees its communicator before the request (legal). Idup, waited for
 * while the engine runs: tasks pending here may be what the other ranks wait for. */
int mcoll__persistent_make(int host_err, MPI_Request *host, mcoll_task_fn fn,
                           mcoll_task_direct_fn direct, void *args,
                           size_t args_bytes, size_t comm_offset, struct mcoll_task_keep *keep,
                           MPI_Request *request) {
  if (host_err != MPI_SUCCESS) {
    mcoll__task_keep_free(keep);
    return host_err;
  }
  PMPI_Request_free(host);
  MPI_Comm comm, own = MPI_COMM_NULL;
  memcpy(&comm, (char *)args + comm_offset, sizeof comm);
  MPI_Request dup;
  int err = mcoll__host_wait(PMPI_Comm_idup(comm, &own, &dup), &dup);
  if (err != MPI_SUCCESS) {
    mcoll__task_keep_free(keep);
    return err;
  }
  mcoll__context_wish_own(own);
  enum mcoll_fallback_reason why;
  int exists = 0;
  const struct mcoll_comm *parent = mcoll__comm_find(comm, &exists);
  /* (without one its starts go to the host MPI) */
  struct mcoll_comm *ctx = mcoll__comm_get(own, &why);
  /* Its starts follow the choices comm's blocking calls made so far: the same on
   * every rank here (a shared context's calls too come in one order: comm/context.c). */
  if (ctx && parent) mcoll__adapt_inherit(ctx, parent);
  memcpy((char *)args + comm_offset, &own, sizeof own);
  err = mcoll__persistent_init(own, fn, direct, args, args_bytes, keep, ctx, request);
  if (err != MPI_SUCCESS) PMPI_Comm_free(&own);
  return err;
}

int mcoll__nbc_handoff(MPI_Comm comm, size_t (*moved)(const void *args), const void *args) {
  long how = mcoll__cfg.NBC_HANDOFF;
  if (how == 0 || !mcoll__task_has_waker()) return 0;
  if (how == 1) return 1;
  if (moved(args) < (size_t)mcoll__cfg.NBC_HANDOFF_MIN) return 0;
  /* 2: a communicator whose context spans nodes (one not built yet runs here:
   * its first call agrees on the context and builds it). */
  int exists = 0;
  const struct mcoll_comm *c = mcoll__comm_find(comm, &exists);
  return c && c->topo.nnodes > 1;
}

/* The meeting word of the node's channel (shm/shm.h, nbc_meet): call number seq in
 * the high half; in the low half the ranks arrived, and GAVE_UP once a rank waited
 * MCOLL_NBC_MEET polls for the others in vain. The word decides once per call, for
 * every rank: all arrived before anyone gave up (all run the call here), or not
 * (all make tasks). A rank that finds a later call's number there was not needed by
 * that call's ranks for this one any more (they finished it): it makes a task,
 * which runs beside their blocking call as any task runs beside another rank's. */
enum { MEET_GAVE_UP = 1u << 30, MEET_COUNT = MEET_GAVE_UP - 1 };
/* Calls the others can be ahead of a rank that has not arrived yet (their nodes'
 * slots keep them within far fewer); any other number in the word is an older
 * call's, or another context's that had the channel before (numbers start at a
 * place of the context's own). */
enum { MEET_AHEAD = 1024 };

static int meet(const struct mcoll_comm *c, uint32_t seq) {
  const struct mcoll_shm *shm = &c->chan->shm;
  _Atomic uint64_t *word = &shm->hdr->nbc_meet;
  const uint64_t all = (uint64_t)shm->local_size;
  /* First guess: the word as the previous call left it when all met there (calls in
   * a row); the compare-and-swap corrects a wrong guess, and takes the line at once
   * where a load would share it first. */
  uint64_t v = (uint64_t)(seq - 1) << 32 | all, next;
  do {
    uint32_t ahead = (uint32_t)(v >> 32) - seq;
    if ((ahead != 0 && ahead <= MEET_AHEAD) || (ahead == 0 && (v & MEET_GAVE_UP))) return 0;
    next = ahead ? ((uint64_t)seq << 32 | 1) : v + 1;
  } while (!atomic_compare_exchange_weak_explicit(word, &v, next, memory_order_acq_rel,
                                                  memory_order_acquire));
  if ((next & MEET_COUNT) == all) return 1;
  int polls = shm->spin < mcoll__cfg.NBC_MEET ? shm->spin : (int)mcoll__cfg.NBC_MEET;
  for (int i = 0;; i++) {
    v = atomic_load_explicit(word, memory_order_acquire);
    for (;;) {
      if ((uint32_t)(v >> 32) != seq || (v & MEET_GAVE_UP)) return 0;
      if ((v & MEET_COUNT) == all) return 1;
      if (i < polls) break;
      if (atomic_compare_exchange_weak_explicit(word, &v, v | MEET_GAVE_UP, memory_order_acq_rel,
                                                memory_order_acquire))
        return 0;
    }
    mcoll__cpu_relax();
  }
}

int mcoll__meet_run(MPI_Comm comm, void *ctx, mcoll_task_fn run, const void *args, int *err) {
  if (mcoll__cfg.NBC_MEET <= 0) return -1;
  struct mcoll_comm *c = mcoll__direct_context(comm, ctx);
  if (!c || c->topo.nnodes != 1 || !mcoll__node_has_peers(c) ||
      !meet(c, c->tasks_entered + (uint32_t)c->id * 0x9E3779B1u))
    return -1;
  c->tasks_entered++;
  mcoll__as_task = 1;
  mcoll__met_ctx = c; /* (taken by the body's mcoll__enter, its first step) */
  *err = run(args);
  mcoll__met_ctx = NULL;
  mcoll__as_task = 0;
  return 1;
}
