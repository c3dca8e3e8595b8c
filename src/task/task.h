/* Tasks: one collective call in flight. A task runs the same code as the blocking
 * call, on a fiber (core/fiber.h): where the blocking call would wait, the task
 * yields, and the progress engine resumes it later.
 *
 * Order. The calls of one communicator start in the order they were started (which
 * MPI makes the same on every rank); a call runs beside the earlier calls of its
 * communicator once each of them has declared itself independent
 * (mcoll__task_independent), up to MCOLL_TASK_WINDOW calls (MCOLL_TASK_WINDOW
 * parameter), else after them; a call that finishes completes at once, in any
 * order. Calls of different communicators run side by side, so that the ranks may
 * start them in different orders. A blocking collective first completes what its
 * communicator has in flight.
 *
 * Requests. An MPI_I* call that does not end when it starts returns a generalized
 * request of the host MPI (MPI_Grequest_start), completed by the engine when the
 * task ends: the host's own MPI_Wait and MPI_Test calls then handle it, mixed with
 * its other requests, and mcoll's wrappers of those calls (pmpi/nbc.c) drive the
 * engine while any task is pending. One that ends at once returns a host request
 * that is complete already. */
#ifndef MCOLL_TASK_H
#define MCOLL_TASK_H

#include <mpi.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>

#include "core/tls.h"

/* What a task runs: the collective's wrapper body, with the arguments of the call
 * (copied into the task when it cannot start at once); returns an MPI error code.
 * It reads all of *args before it first waits: a call that starts at once runs on
 * the caller's record, which is gone once the MPI_I* call returns. */
typedef int (*mcoll_task_fn)(const void *args);

enum { MCOLL_TASK_ARGS_MAX = 160 };

/* Arrays of a call (counts, displacements, datatypes) copied when it starts: native
 * MPIs copy them into their schedules, and programs (mpi4py among them) reuse them
 * once the call has returned. Freed with the task (or the persistent request). */
struct mcoll_task_keep {
  void *mem[6];
  int n;
};
/* A copy of src (bytes) owned by keep, or src itself when there is nothing to copy
 * (NULL, empty) or no memory. */
const void *mcoll__task_keep(struct mcoll_task_keep *keep, const void *src, size_t bytes);
/* Frees the copies of keep (NULL: nothing). */
void mcoll__task_keep_free(struct mcoll_task_keep *keep);

/* Starts fn(args) for communicator comm and returns its request in *req. The task
 * runs at once, as far as it can, when comm has nothing else in flight; if it ends
 * there, *req is a host request complete already, and its error (invalid arguments
 * the host MPI rejected, raised through comm's handler) is returned, with *req =
 * MPI_REQUEST_NULL. */
int mcoll__task_start(MPI_Comm comm, mcoll_task_fn fn, const void *args, size_t args_bytes,
                      struct mcoll_task_keep *keep, MPI_Request *req);

/* A call's try on the caller's stack, before any task (pmpi/barrier.c): args are
 * the call's (its argument record), ctx its context if known (a persistent
 * request's), else NULL. 1: the call is complete (*err: its result); 0: it has
 * begun, and rest->fn(rest->args) in a task must finish it; -1: not tried, nothing
 * done. A call that ends here costs no task, fiber or lock: the targets of
 * bench/records/nbc-overhead-3. */
struct mcoll_task_rest {
  mcoll_task_fn fn;
  _Alignas(max_align_t) unsigned char args[32];
  size_t bytes;
};
typedef int (*mcoll_task_direct_fn)(const void *args, void *ctx, struct mcoll_task_rest *rest,
                                    int *err);
/* Whether a call may try on the caller's stack now: on no fiber, no task pending
 * anywhere (its communicator has no call in flight) and none to hand to the
 * progress thread. */
int mcoll__task_direct_ok(void);
/* A call that completed in its try: counted, and *req the complete request of a
 * call that finished when it started (or, on err, MPI_REQUEST_NULL and err). */
int mcoll__task_direct_done(int err, MPI_Request *req);

/* The next mcoll__task_start of this thread only queues its task for the progress
 * thread (T-NBC: the blocking call returns before its communication runs). */
void mcoll__task_defer_next(void);

/* Whether a progress thread runs or starts when a task is left pending. */
int mcoll__task_has_waker(void);

/* Advances every pending task once; cheap when none is pending. Not from a task. */
void mcoll__progress(void);

/* Whether any task is pending (one load). */
int mcoll__tasks_pending(void);
/* Counts task starts and completions: unchanged while the pending tasks only wait. */
unsigned mcoll__task_events(void);
/* Calls between handing a task over and returning to the application (T-NBC's early
 * return): while non-zero the progress thread naps instead of taking the core of a
 * caller that is about to return (it would run first on the caller's core). */
extern atomic_int mcoll__progress_hold;
/* Application threads asleep until a task's data is in (T-NBC's fault handler and
 * waits): while non-zero the progress thread polls with no backoff, every
 * MCOLL_PROGRESS_URGENT_NAP_US (a yield-loop would take a core that another process
 * may be computing on). */
extern atomic_int mcoll__progress_urgent;
/* When an application thread last advanced the tasks itself while waiting for one
 * (MPI_Wait's loop; CLOCK_MONOTONIC, ns): meanwhile the progress thread naps instead
 * of polling the same tasks beside it on a core that a peer may need. */
extern atomic_llong mcoll__progress_driven_ns;
/* Set once at MPI_Init: the ranks on this machine's kernel (test hosts included)
 * outnumber its cores, so waits sleep between polls instead of only yielding. */
extern int mcoll__cores_shared;

/* Completes every task of comm (before a blocking collective on it, or its free). */
void mcoll__task_drain(MPI_Comm comm);

/* Calls of one communicator that may run side by side, at most: their inter-node
 * messages carry distinct tags (mcoll__host_tag). */
enum { MCOLL_TASK_WINDOW = 4, MCOLL_TASK_TAG_STRIDE = 64 /* mcoll's tags are below it */ };

/* Inside a task: the call's number among its communicator's tasks, the same on
 * every rank (pmpi/wrap.c numbers them in the order they enter mcoll). */
void mcoll__task_number(unsigned n);

/* Inside a task on comm: the context its persistent request keeps (ctx of
 * mcoll__persistent_init: the start finds it without a lookup), once; else NULL. */
void *mcoll__task_context_hint(MPI_Comm comm);

/* Inside a task: the call has taken every sequence number and generation it will use
 * and from now on touches no state that a later call of its communicator uses in
 * the same order on every rank (node protocols, the host MPI's collectives): later
 * calls may start beside it. Outside a task: nothing. */
void mcoll__task_independent(void);

/* The tag of one of mcoll's own point-to-point messages (coll/tags.h) for the call
 * this thread runs: calls side by side never match each other's messages. */
int mcoll__host_tag(int tag);

/* Inside a task: whether it runs on one (else the caller's own stack). */
int mcoll__in_task(void);
/* Set while a non-blocking call runs on the caller's stack as the blocking call does
 * (pmpi/wrap.c: mcoll__meet_run): it chooses its algorithm and host calls as a task
 * would, so that it agrees with ranks that run the same call in a task. */
extern MCOLL_TLS int mcoll__as_task;

/* The host MPI's non-blocking call made with *req (err is what it returned), waited
 * for: inside a task by yielding, else by driving the engine and the host MPI. */
int mcoll__host_wait(int err, MPI_Request *req);
/* The same, filling *status (or MPI_STATUS_IGNORE) as PMPI_Wait would. */
int mcoll__host_wait_status(int err, MPI_Request *req, MPI_Status *status);
/* PMPI_Waitany, waited for as mcoll__host_wait does. */
int mcoll__host_wait_any(int n, MPI_Request *reqs, int *index, MPI_Status *status);

/* For a non-blocking host call made where a task or the caller would otherwise
 * block (pmpi/wrap.h's MCOLL_HOST): its request slot (the running task's, else the
 * thread's), and the wait for it. */
MPI_Request *mcoll__host_request(void);
int mcoll__host_call_nb(int err);

/* 1 if *req is the request of a task in flight (MPI_Request_free and MPI_Cancel on it
 * are erroneous: MPI-3.1 §5.12). */
int mcoll__task_request_is_mine(const MPI_Request *req);

/* Persistent collectives (MPI-4 MPI_<Coll>_init, or Open MPI's MPIX_<Coll>_init):
 * the request in *req is a host persistent request that mcoll recognises (see
 * task.c). init: direct, if not NULL, tries each start first (mcoll_task_direct_fn); comm is the request's own communicator (ctx: its context, or NULL) (pmpi/wrap.c: a duplicate
 * made at init, which args name), owned by it from then on: its starts match one
 * another only, whatever order the ranks start requests in, and it outlives the
 * application's communicator; on an error keep is freed. start: 1 if *req was one
 * (then *err: the start's result); busy: a start of req is in flight; any_busy: of
 * any; free: 1 if *req was one (freed now, or when its start in flight completes).
 */
int mcoll__persistent_init(MPI_Comm comm, mcoll_task_fn fn, mcoll_task_direct_fn direct,
                           const void *args, size_t args_bytes, struct mcoll_task_keep *keep,
                           void *ctx, MPI_Request *req);
int mcoll__persistent_start(MPI_Request *req, int *err);
int mcoll__persistent_busy(MPI_Request req);
int mcoll__persistent_any_busy(void);
int mcoll__persistent_free(MPI_Request *req);

/* Errors of calls that completed after they returned (an MPI_I* call queued behind
 * another, a truncation found while it ran, a persistent start): the host completes
 * their requests without an error (it would raise one on MPI_COMM_WORLD, whatever
 * the call's communicator says), and mcoll's completion calls report it in its place
 * through the call's communicator (pmpi/nbc.c). errors_pending: some completed call
 * failed, or a persistent start completed, and no completion call reported it yet
 * (one load); take_error: that error if req was such a call's request (then
 * cleared, and a persistent start reported; *comm, if comm is not NULL: the
 * communicator whose handler it goes to, MPI_COMM_NULL if freed meanwhile), else
 * MPI_SUCCESS; comm_freed: the application frees comm. */
int mcoll__task_errors_pending(void);
/* For MPI_Waitany/Testany/Waitsome/Testsome, which skip the inactive host request
 * that a persistent collective's handle is: the index of the first of reqs whose
 * start completed and was not reported yet (then reported: *err its error, *comm its
 * communicator), else -1 (one load when none is). */
int mcoll__persistent_take_done(int n, const MPI_Request reqs[], int *err, MPI_Comm *comm);
/* Whether req is a persistent collective's handle whose start is in flight or
 * completed unreported (what those calls must not hand to the host). */
int mcoll__persistent_unsettled(MPI_Request req);
int mcoll__task_take_error(MPI_Request req, MPI_Comm *comm);
/* MPI_Wait's shortcut while no task is pending: if req is the persistent request
 * this thread last started and its start completed unreported, reports it (*err,
 * *comm as take_error) and returns 1; else 0 (then the usual path). */
int mcoll__persistent_take_own(MPI_Request req, int *err, MPI_Comm *comm);
/* If *req is the complete request of a call that finished when it started
 * (mcoll__task_start), completes it as the host's wait would (*req =
 * MPI_REQUEST_NULL, status as the host's) without calling the host: 1; else 0. */
int mcoll__task_done_request(MPI_Request *req, MPI_Status *status);
void mcoll__task_comm_freed(MPI_Comm comm);

/* The application frees a derived datatype (op: MPI_OP_NULL) or a user op (type:
 * MPI_DATATYPE_NULL): 1 if calls in flight or persistent requests made before now
 * may use it, and mcoll frees it with the host MPI once they are done; 0: free it
 * now. */
int mcoll__task_hold_free(MPI_Datatype type, MPI_Op op);

/* Called (outside the engine's lock) when a started task is left pending: the
 * progress thread's wake-up; NULL: none. */
void mcoll__task_set_waker(void (*waker)(void));

/* Tasks started, of them those that finished at start, and of those the calls a try
 * ran on the caller's stack with no task. */
void mcoll__task_report(FILE *out);

#endif
