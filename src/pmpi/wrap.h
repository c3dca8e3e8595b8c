/* What every collective wrapper does before choosing: honour MCOLL_DISABLE, send
 * invalid arguments to the host MPI (which raises the error the application
 * expects), and find the communicator's context (or fall back). */
#ifndef MCOLL_WRAP_H
#define MCOLL_WRAP_H

#include <mpi.h>
#include <stddef.h>

#include "coll/registry.h"
#include "core/collectives.h"
#include "core/config.h"
#include "comm/context.h"
#include "core/datatype.h"
#include "task/task.h"
#include "tnbc/tnbc.h"

#include "mcoll.h"

/* Persistent collectives: MPI-4's MPI_<Coll>_init, or Open MPI 4's MPIX_<Coll>_init
 * (its pcollreq extension, declared in mpi-ext.h). */
#if MPI_VERSION >= 4
#define MCOLL_PERSISTENT(name) MPI_##name
#define MCOLL_PERSISTENT_HOST(name) PMPI_##name
#elif defined(OPEN_MPI) && __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define MCOLL_PERSISTENT(name) MPIX_##name
#define MCOLL_PERSISTENT_HOST(name) PMPIX_##name
#endif
#endif

/* After the host MPI's init (collective over MPI_COMM_WORLD) and before its
 * finalize; each runs once, from MPI_Init(_thread), MPI_Finalize or their Fortran entry
 * points (pmpi/init.c). */
void mcoll__before_init(void); /* disables mcoll in a program of another MPI */
void mcoll__started(void);
void mcoll__finishing(void);
/* Completes the SMPI sends still in flight (pmpi/smpi.c), before the host's finalize. */
void mcoll__smpi_finish(void);

/* Inside a task (an MPI_I* call): the context if the communicator's ranks agree that
 * it may run tasks (comm/context.h); decided at its first non-blocking call. */
struct mcoll_comm *mcoll__enter_task(enum mcoll_coll coll, MPI_Comm comm);

/* A call that met (mcoll__meet_run): its context, for the body's mcoll__enter. */
extern MCOLL_TLS struct mcoll_comm *mcoll__met_ctx;

/* The context to use, or NULL: then the wrapper calls the host MPI (already
 * counted). A blocking call first completes the communicator's calls in flight. */
static inline struct mcoll_comm *mcoll__enter(enum mcoll_coll coll, MPI_Comm comm) {
  /* A call that met (mcoll__meet_run) found its context already, a persistent
   * request's among them: no lookup, and the thread's cached one stays. */
  struct mcoll_comm *met = mcoll__met_ctx;
  if (met) {
    mcoll__met_ctx = NULL;
    return met;
  }
  mcoll__config_load();
  if (mcoll__cfg.DISABLE) return NULL;
  if (comm == MPI_COMM_NULL) {
    mcoll__count_invalid(coll);
    return NULL;
  }
  if (mcoll__in_task()) return mcoll__enter_task(coll, comm);
  if (mcoll__tasks_pending()) {
    mcoll__tnbc_settle_pending();
    mcoll__progress(); /* (others' calls in flight move at every blocking call) */
    mcoll__task_drain(comm);
  }
  enum mcoll_fallback_reason why;
  struct mcoll_comm *c = mcoll__comm_get(comm, &why);
  if (!c) mcoll__fallback(coll, why);
  return c;
}

/* The host MPI's collective `name` (non-blocking: `iname`) with the call's arguments: blocking in a blocking
 * call; in a task (or a call run as one), its non-blocking form, waited for without
 * blocking the thread (`return MCOLL_HOST(Bcast, Ibcast, buf, ...)`). The form
 * depends only on how the call runs, the same on every rank: the host MPI matches
 * no blocking collective with a non-blocking one. Tasks pending elsewhere while a
 * blocking call waits in the host MPI move on the progress thread, as they do
 * during any other call that only the host MPI runs. */
#define MCOLL_HOST(name, iname, ...)                                                                \
  ((mcoll__in_task() || mcoll__as_task)                                                             \
       ? mcoll__host_call_nb(PMPI_##iname(__VA_ARGS__, mcoll__host_request()))                      \
       : PMPI_##name(__VA_ARGS__))

/* Whether an MPI_I* call (or persistent request) on comm becomes a task, else the
 * host MPI's own call takes it: for MPI_COMM_NULL (whose error the host raises) and
 * intercommunicators (whose arrays and semantics mcoll's tasks do not model). */
static inline int mcoll__nbc_on(MPI_Comm comm) {
  mcoll__config_load();
  if (mcoll__cfg.DISABLE || !mcoll__cfg.NBC || comm == MPI_COMM_NULL) return 0;
  /* (a usable context is an intracommunicator's: no call to the host MPI) */
  if (mcoll__comm_peek(comm)) return 1;
  int inter = 0;
  return PMPI_Comm_test_inter(comm, &inter) == MPI_SUCCESS && !inter;
}

/* Whether an MPI_I* call on comm goes to the progress thread before it runs a step
 * (MCOLL_NBC_HANDOFF): across nodes the host's transport may push a whole message
 * inside the call that posts it (MPICH's UCX over TCP blocks in sendmsg at the
 * wire's pace), which would keep the caller there for the transfer. Calls that
 * move fewer than MCOLL_NBC_HANDOFF_MIN bytes (moved(args), asked only here) stay
 * on the caller: a small message fits the socket's buffer, and the hand-over costs
 * the thread a wake-up. */
int mcoll__nbc_handoff(MPI_Comm comm, size_t (*moved)(const void *args), const void *args);

/* The collectives whose MPI_I* calls and persistent starts try on the caller's stack
 * first (task/task.h: mcoll_task_direct_fn), else NULL. */
int mcoll__barrier_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, int *err);
int mcoll__bcast_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, int *err);
int mcoll__reduce_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, int *err);
int mcoll__allreduce_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, int *err);
int mcoll__scan_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, int *err);
int mcoll__exscan_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, int *err);
int mcoll__scatter_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, int *err);
int mcoll__scatterv_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, int *err);
int mcoll__gather_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, int *err);
int mcoll__gatherv_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, int *err);
static inline mcoll_task_direct_fn mcoll__direct_of(enum mcoll_coll coll) {
  return coll == MCOLL_COLL_BARRIER     ? mcoll__barrier_direct
         : coll == MCOLL_COLL_BCAST     ? mcoll__bcast_direct
         : coll == MCOLL_COLL_REDUCE    ? mcoll__reduce_direct
         : coll == MCOLL_COLL_ALLREDUCE ? mcoll__allreduce_direct
         : coll == MCOLL_COLL_SCAN      ? mcoll__scan_direct
         : coll == MCOLL_COLL_EXSCAN    ? mcoll__exscan_direct
         : coll == MCOLL_COLL_SCATTER   ? mcoll__scatter_direct
         : coll == MCOLL_COLL_SCATTERV  ? mcoll__scatterv_direct
         : coll == MCOLL_COLL_GATHER    ? mcoll__gather_direct
         : coll == MCOLL_COLL_GATHERV   ? mcoll__gatherv_direct
                                        : NULL;
}

/* The tries that go before the meeting: the collectives in which the root waits
 * for the others and they for nobody (reduce), or the reverse (bcast, scatter(v)).
 * Gather(v)'s try, the same shape, comes after the meeting (mcoll__direct_of):
 * before it, post + wait of gather measured slower than with the meeting. */
static inline mcoll_task_direct_fn mcoll__direct_first_of(enum mcoll_coll coll) {
  return coll == MCOLL_COLL_BCAST      ? mcoll__bcast_direct
         : coll == MCOLL_COLL_REDUCE   ? mcoll__reduce_direct
         : coll == MCOLL_COLL_SCATTER  ? mcoll__scatter_direct
         : coll == MCOLL_COLL_SCATTERV ? mcoll__scatterv_direct
                                       : NULL;
}

/* Every MPI_I* call's and persistent start's first try (pmpi/wrap.c): the whole call
 * run here as the blocking one when all ranks of its one-node communicator (ctx, or
 * comm's context) enter it within MCOLL_NBC_MEET polls; 1 (*err: its result) or -1
 * (nothing done: every rank makes a task or tries its own way). */
int mcoll__meet_run(MPI_Comm comm, void *ctx, mcoll_task_fn run, const void *args, int *err);

/* A persistent request's try: not reduce's, whose start + wait measured slower with
 * it than with the task (on the request's own duplicate communicator:
 * bench/records/nbc-overhead-4/). */
static inline mcoll_task_direct_fn mcoll__persistent_direct_of(enum mcoll_coll coll) {
  return coll == MCOLL_COLL_REDUCE ? NULL : mcoll__direct_of(coll);
}

/* The context a try on the caller's stack runs on (ctx, a persistent request's, or
 * comm's), or NULL: only one that runs tasks already (the ranks agreed at an
 * earlier call), so that the call is the one a task would run. A try that takes
 * the call numbers it as a task (c->tasks_entered++: pmpi/wrap.c). */
static inline struct mcoll_comm *mcoll__direct_context(MPI_Comm comm, void *ctx) {
  struct mcoll_comm *c = ctx;
  int exists = 0;
  if (!c) c = mcoll__comm_find(comm, &exists);
  return c && c->nbc == MCOLL_NBC_YES ? c : NULL;
}

/* An MPI_I* call: `run(args)` (the blocking wrapper's body) as a task; keep(args,
 * kept): copies its arrays into kept and points args at them, or NULL (no arrays),
 * asked only when a task is made (a call that its try or the meeting takes uses
 * the caller's arrays while it runs); moved(args): the bytes of its first buffer
 * (SIZE_MAX: not known from the arguments), asked only for the hand-over, after a
 * try (a type's size is a call of the host MPI). A try that begins a call (0) is
 * not a collective with arrays (mcoll__direct_of). */
static inline int mcoll__start(MPI_Comm comm, mcoll_task_fn run, mcoll_task_direct_fn direct,
                               void *args, size_t bytes,
                               struct mcoll_task_keep *(*keep)(void *args, struct mcoll_task_keep *kept),
                               size_t (*moved)(const void *args), MPI_Request *req) {
  mcoll__tnbc_settle_pending();
  struct mcoll_task_keep kept = {.n = 0};
  /* (MCOLL_NBC_HANDOFF=1 hands every call to the progress thread; 2 only calls across
   * nodes, which no try takes) */
  if (direct && mcoll__cfg.NBC_HANDOFF != 1 && mcoll__task_direct_ok()) {
    struct mcoll_task_rest rest;
    int err = MPI_SUCCESS, tried = direct(args, NULL, &rest, &err);
    if (tried == 1) return mcoll__task_direct_done(err, req);
    if (tried == 0) return mcoll__task_start(comm, rest.fn, rest.args, rest.bytes, NULL, req);
  }
  if (mcoll__nbc_handoff(comm, moved, args)) mcoll__task_defer_next();
  return mcoll__task_start(comm, run, args, bytes, keep ? keep(args, &kept) : NULL, req);
}

/* Each collective's body, pmpi/: on comm's context c, checks the arguments and runs
 * mcoll's algorithm (its result), or returns MCOLL_TO_HOST for the host MPI to take
 * the call. pmpi/entries.c makes every entry point around it from the table of
 * collectives: it finds the context (mcoll__enter) and calls the host MPI. */
#define MCOLL_WRAP_DECLARE(Name, lower, UPPER, shape, tnbc)                     \
  int mcoll__wrap_##lower(struct mcoll_comm *c,                                 \
                          MCOLL_ARGLIST(MCOLL_PARAMS_##UPPER, MCOLL_PARAM_DECL));
MCOLL_COLLECTIVES(MCOLL_WRAP_DECLARE)
#undef MCOLL_WRAP_DECLARE

/* A body's answer when the host MPI takes the call: arguments mcoll does not run
 * (counted); invalid ones, for which the host raises the error the application
 * expects. No MPI error code is negative. */
#define MCOLL_TO_HOST (-1)
static inline int mcoll__invalid(enum mcoll_coll coll) {
  mcoll__count_invalid(coll);
  return MCOLL_TO_HOST;
}

/* A body shared by two or three collectives (allgather and allgatherv, ...), inlined
 * in each: one call per blocking call, as for the others. */
#define MCOLL_SHARED_BODY __attribute__((always_inline)) static inline

/* Count and displacement arrays of n entries: present, no count negative. */
static inline int mcoll__counts_valid(const int *counts, const int *displs, int n) {
  if (!counts || !displs) return 0;
  for (int r = 0; r < n; r++)
    if (counts[r] < 0) return 0;
  return 1;
}

/* The rest of an MPI_<Coll>_init once the host MPI's own init of the same call has
 * run (host_err, *host): that checks the arguments and raises errors through the
 * communicator's handler as natively; an error is returned (keep freed), else the
 * host's request is freed unused and task/task.h's persistent request is made from
 * args (whose communicator is the MPI_Comm at comm_offset) on a communicator of its
 * own (wrap.c). */
int mcoll__persistent_make(int host_err, MPI_Request *host, mcoll_task_fn fn,
                           mcoll_task_direct_fn direct, void *args,
                           size_t args_bytes, size_t comm_offset, struct mcoll_task_keep *keep,
                           MPI_Request *request);

/* Entries of a v/w collective's arrays: the group's size (the remote group's on an
 * intercommunicator); 0 for an invalid communicator (nothing is copied). */
int mcoll__array_entries(MPI_Comm comm);
/* Whether this rank is the root of a rooted collective (MPI_ROOT on an intercommunicator). */
int mcoll__is_root(MPI_Comm comm, int root);

/* A send buffer that is also the receive buffer (not MPI_IN_PLACE) is erroneous: the
 * host MPI takes the call and says what it says natively. */
static inline int mcoll__bufs_aliased(const void *sendbuf, const void *recvbuf) {
  return sendbuf == recvbuf && sendbuf != MPI_IN_PLACE;
}

static inline int mcoll__root_valid(const struct mcoll_comm *c, int root) {
  return root >= 0 && root < c->size;
}

/* A datatype the host MPI would accept for communication: not null, and for
 * derived types committed (core/datatype.h). */
static inline int mcoll__type_usable(MPI_Datatype type) {
  struct mcoll_type_info info;
  return mcoll__type_info(type, &info) == MPI_SUCCESS;
}

#endif
