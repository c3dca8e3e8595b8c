#include "task/task.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "core/fiber.h"
#include "core/host_progress.h"
#include "core/tls.h"
#include "shm/call.h"

struct mcoll_task {
  mcoll_task_fn fn;
  const void *argp;          /* its arguments: args, or its persistent request's */
  _Alignas(max_align_t) unsigned char args[MCOLL_TASK_ARGS_MAX];
  /* written by the task, read by the host's request query on the application's
   * thread: the host's completion flag orders them, unseen by ThreadSanitizer */
  _Atomic int err;
  MPI_Request req;           /* the generalized request the application holds, or
                              * MPI_REQUEST_NULL (none: it finished when started) */
  MPI_Comm comm;             /* the application's communicator of the call */
  MPI_Request host_req;      /* a host MPI call the task waits for (MCOLL_HOST) */
  struct mcoll_fiber *fiber;
  struct mcoll_task *next;   /* in its lane */
  atomic_int refs;           /* the engine's, and the starter's: handed to the
                              * generalized request if one is made (freed by the host) */
  struct mcoll_persistent *persistent; /* a start of it (then req is unused), or NULL */
  struct mcoll_call *call;   /* its guarded reduction call, while it yields (shm/call.h) */
  struct mcoll_task_keep keep; /* its copied arrays (not for a persistent start) */
  int independent;           /* later calls of its lane may run beside it */
  unsigned tag_slot;         /* its number among its lane's calls, modulo the window */
  int beside;                /* it ran while an earlier call of its lane was in flight */
  unsigned long serial;      /* its place among all calls started (held_release) */
  void *ctx_hint;            /* its communicator's context, known at start, or NULL */
};

/* A persistent collective (MPI_<Coll>_init): the call's arguments, kept for every
 * start, and the handle the application holds: a persistent receive of the host MPI
 * (the "carrier") on a private duplicate of MPI_COMM_SELF, never started. The host's
 * MPI_Wait, MPI_Test and their -all forms find an inactive request complete at once
 * (an empty status), so mcoll's wrappers of those calls hold it back while a start
 * is in flight; MPI_Waitany, MPI_Testany and the -some forms skip inactive requests,
 * so mcoll's report a completed start there themselves (pmpi/nbc.c). A start that
 * completed stays `done` (with its error) until a completion call reports it: no
 * message, no host request per start. */
struct mcoll_persistent {
  MPI_Comm comm;             /* its own communicator, freed with it (task/task.h) */
  mcoll_task_fn fn;
  mcoll_task_direct_fn direct; /* its try on the starter's stack, or NULL */
  _Alignas(max_align_t) unsigned char args[MCOLL_TASK_ARGS_MAX];
  size_t args_bytes;
  struct mcoll_task_keep keep;
  MPI_Request carrier;
  struct mcoll_task *active; /* the start in flight, or NULL */
  int freed;                 /* MPI_Request_free came while active */
  int done;                  /* the last start completed, not reported yet */
  int err;                   /* its error */
  unsigned long serial;      /* its place among all calls started (held_release) */
  void *ctx;                 /* its communicator's context (lives as long as it), or NULL */
  struct mcoll_persistent *next;
};

/* The calls in flight of one communicator, oldest first: the head runs, and each
 * later one while all ahead of it are independent (within the window). */
struct lane {
  MPI_Comm comm;
  struct mcoll_task *head, *tail;
  struct lane *next;
};

/* One engine per process: its lock is held while a task runs (so a task is resumed
 * by one thread at a time) and while lanes change. */
static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lane *lanes;
static atomic_int pending;
/* Tasks started and finished: the progress thread backs off while it stays. */
static atomic_uint task_events;
static atomic_ulong started, finished_at_start, side_by_side, on_caller_stack;
/* Calls that ran to their end on the starter's thread before any other thread could
 * see them (run_unseen): counted per thread, added to `started` and
 * `finished_at_start` in batches (a locked add per call costs what the rest of the
 * path does). */
static MCOLL_TLS unsigned unseen_calls;
/* Of them, those a try ran on the caller's stack, with no task (the report says so). */
static MCOLL_TLS unsigned unseen_direct;
enum { UNSEEN_BATCH = 64 };

/* Adds 1 to a counter that only engine_lock's holder writes: no locked instruction. */
static void count_locked(atomic_ulong *counter) {
  atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}
static struct mcoll_persistent *persistents; /* under engine_lock */
static unsigned long serial_next; /* calls and persistent requests made (under engine_lock) */
static MPI_Comm carrier_comm = MPI_COMM_NULL;  /* made by the first persistent request */
static void (*_Atomic waker)(void);

void mcoll__task_set_waker(void (*fn)(void)) { atomic_store(&waker, fn); }

int mcoll__task_has_waker(void) { return atomic_load_explicit(&waker, memory_order_relaxed) != NULL; }

static void wake_progress(void) {
  void (*fn)(void) = atomic_load_explicit(&waker, memory_order_acquire);
  if (fn) fn();
}
static atomic_int persistent_active;        /* starts in flight */
static atomic_uint persistent_gen;          /* requests freed (persistent_cached) */
static atomic_int persistent_requests;      /* alive */
/* Completed calls with something to report to a completion call: persistent starts
 * (done, with their error) and MPI_I* calls that failed (failed_calls). */
static atomic_int unreported_errors;
/* An MPI_I* call that failed after it returned: its generalized request completes
 * without an error, so that the host, which would raise it on MPI_COMM_WORLD,
 * reports success; mcoll's completion calls report it in its place through the
 * call's communicator (pmpi/nbc.c). Under engine_lock. */
struct failed_call {
  MPI_Request req;
  MPI_Comm comm; /* MPI_COMM_NULL once the application freed it */
  int err;
  struct failed_call *next;
};
static struct failed_call *failed_calls;
/* The task this thread runs right now (between resume and yield). */
static MCOLL_TLS struct mcoll_task *running;
static MCOLL_TLS MPI_Request thread_host_req;
static MCOLL_TLS int defer_next; /* mcoll__task_defer_next */
MCOLL_TLS int mcoll__as_task;

void mcoll__task_defer_next(void) { defer_next = 1; }

/* Per-thread state that belongs to the call, not the thread: the reduction guard
 * (shm/call.h) goes with the task across yields and threads. */
static int resume(struct mcoll_task *t) {
  struct mcoll_call *outer = mcoll__call_current;
  mcoll__call_current = t->call;
  running = t;
  int ended = mcoll__fiber_resume(t->fiber);
  running = NULL;
  t->call = mcoll__call_current;
  mcoll__call_current = outer;
  return ended;
}

void *mcoll__task_context_hint(MPI_Comm comm) {
  struct mcoll_task *t = running;
  if (!t || t->comm != comm) return NULL;
  void *hint = t->ctx_hint;
  t->ctx_hint = NULL;
  return hint;
}

void mcoll__task_number(unsigned n) {
  if (running) running->tag_slot = n % MCOLL_TASK_WINDOW;
}

void mcoll__task_independent(void) {
  if (running) running->independent = 1;
}

int mcoll__host_tag(int tag) {
  return running ? tag + MCOLL_TASK_TAG_STRIDE * (int)running->tag_slot : tag;
}

MPI_Request *mcoll__host_request(void) { return running ? &running->host_req : &thread_host_req; }

/* Finished tasks wait, with their fiber, in a short list per thread for the next
 * call: a call then allocates nothing (malloc, a stack from the pool and the zeroing
 * of a task cost as much as a small collective). */
enum { SPARE_TASKS = 16 };
static MCOLL_TLS struct mcoll_task *spare_tasks;
static MCOLL_TLS int nspare;

const void *mcoll__task_keep(struct mcoll_task_keep *keep, const void *src, size_t bytes) {
  if (!src || !bytes || keep->n == (int)(sizeof keep->mem / sizeof keep->mem[0])) return src;
  void *copy = malloc(bytes);
  if (!copy) return src;
  memcpy(copy, src, bytes);
  keep->mem[keep->n++] = copy;
  return copy;
}

void mcoll__task_keep_free(struct mcoll_task_keep *keep) {
  for (int i = 0; keep && i < keep->n; i++) free(keep->mem[i]);
  if (keep) keep->n = 0;
}

static void task_unref(struct mcoll_task *t) {
  /* (the last holder needs no locked instruction: nobody else can drop a reference) */
  if (atomic_load_explicit(&t->refs, memory_order_acquire) != 1 &&
      atomic_fetch_sub(&t->refs, 1) != 1)
    return;
  mcoll__task_keep_free(&t->keep);
  if (nspare < SPARE_TASKS) {
    t->next = spare_tasks;
    spare_tasks = t;
    nspare++;
    return;
  }
  mcoll__fiber_free(t->fiber);
  free(t);
}

/* ---- the generalized request ------------------------------------------------------ */
static int request_query(void *extra, MPI_Status *status) {
  (void)extra;
  /* A collective's status says nothing but its error (as the host MPIs' do). */
  PMPI_Status_set_elements(status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(status, 0);
  status->MPI_SOURCE = MPI_ANY_SOURCE;
  status->MPI_TAG = MPI_ANY_TAG;
  status->MPI_ERROR = MPI_SUCCESS; /* (its error: failed_calls) */
  return MPI_SUCCESS;
}

static int request_free(void *extra) {
  task_unref(extra);
  return MPI_SUCCESS;
}

static int request_cancel(void *extra, int complete) {
  (void)extra, (void)complete; /* collectives cannot be cancelled: they complete */
  return MPI_SUCCESS;
}

/* ---- running ------------------------------------------------------------------------- */
static void task_main(void *arg) {
  struct mcoll_task *t = arg;
  t->err = t->fn(t->argp);
}

/* One emptied lane kept for the next communicator's call (under engine_lock). */
static struct lane *spare_lane;

static struct lane *lane_of(MPI_Comm comm, int create) {
  for (struct lane *l = lanes; l; l = l->next)
    if (l->comm == comm) return l;
  if (!create) return NULL;
  struct lane *l = spare_lane ? spare_lane : calloc(1, sizeof *l);
  if (!l) return NULL;
  spare_lane = NULL;
  l->comm = comm;
  l->head = l->tail = NULL;
  l->next = lanes;
  lanes = l;
  return l;
}

static void persistent_destroy(struct mcoll_persistent *p);
static void held_release(void);

/* Task t of l has finished: its request completes (the calls of a lane may finish
 * in any order). Under engine_lock. */
static void finish(struct lane *l, struct mcoll_task *t) {
  struct mcoll_task *prev = NULL;
  for (struct mcoll_task *u = l->head; u != t; u = u->next) prev = u;
  if (prev) prev->next = t->next;
  else l->head = t->next;
  if (l->tail == t) l->tail = prev;
  if (mcoll__cfg.TEST_FINISH_DELAY_US) usleep((useconds_t)mcoll__cfg.TEST_FINISH_DELAY_US);
  struct mcoll_persistent *p = t->persistent;
  if (p) {
    /* Done before the start stops counting as busy: a thread that sees it idle
     * (pmpi/nbc.c, partly without the lock) finds it done. */
    p->err = t->err;
    p->done = 1;
    atomic_fetch_add(&unreported_errors, 1);
    p->active = NULL;
    atomic_fetch_sub(&persistent_active, 1);
    if (p->freed) persistent_destroy(p);
  } else if (t->req != MPI_REQUEST_NULL) {
    struct failed_call *f = t->err != MPI_SUCCESS ? malloc(sizeof *f) : NULL;
    if (f) {
      *f = (struct failed_call){t->req, t->comm, t->err, failed_calls};
      failed_calls = f;
      atomic_fetch_add(&unreported_errors, 1);
    }
    PMPI_Grequest_complete(t->req);
  }
  /* Last: a thread that sees nothing pending (and nothing to report) hands its
   * completion calls to the host directly (pmpi/nbc.c), which must then find the
   * generalized request complete and a persistent start counted as done. */
  atomic_fetch_sub(&pending, 1);
  atomic_fetch_add_explicit(&task_events, 1, memory_order_relaxed);
  task_unref(t);
  held_release();
}

/* Drops p from the registry and frees it with its carrier. Under engine_lock. */
static void persistent_destroy(struct mcoll_persistent *p) {
  for (struct mcoll_persistent **link = &persistents; *link; link = &(*link)->next)
    if (*link == p) {
      *link = p->next;
      break;
    }
  atomic_fetch_sub(&persistent_requests, 1);
  atomic_fetch_add(&persistent_gen, 1);
  if (p->done) atomic_fetch_sub(&unreported_errors, 1);
  PMPI_Request_free(&p->carrier);
  PMPI_Comm_free(&p->comm);
  mcoll__task_keep_free(&p->keep);
  free(p);
  held_release();
}

/* How many calls of one communicator may run side by side (MCOLL_TASK_WINDOW). */
static int window(void) {
  int w = mcoll__cfg.TASK_WINDOW;
  return w < 1 ? 1 : w > MCOLL_TASK_WINDOW ? MCOLL_TASK_WINDOW : w;
}

/* Whether t may run now: every call ahead of it in its lane is independent, and
 * fewer than the window. Under engine_lock. */
static int may_run(const struct lane *l, const struct mcoll_task *t) {
  int ahead = 0;
  for (const struct mcoll_task *u = l->head; u != t; u = u->next)
    if (!u->independent || ++ahead >= window()) return 0;
  return 1;
}

/* Resumes t; if it ends, completes it. 1 if it ended. Under engine_lock. */
static int advance(struct lane *l, struct mcoll_task *t) {
  if (t != l->head && !t->beside) {
    t->beside = 1;
    atomic_fetch_add_explicit(&side_by_side, 1, memory_order_relaxed);
  }
  if (!resume(t)) return 0;
  finish(l, t);
  return 1;
}

/* Resumes the calls of l that may run, oldest first; 1 if l is then empty. Under
 * engine_lock. */
static int run_lane(struct lane *l) {
  struct mcoll_task *t = l->head;
  while (t && may_run(l, t)) {
    struct mcoll_task *next = t->next; /* (t may be completed and freed) */
    advance(l, t);
    t = next;
  }
  return l->head == NULL;
}

static void drop_empty_lanes(void) {
  for (struct lane **p = &lanes; *p;) {
    if (!(*p)->head) {
      struct lane *dead = *p;
      *p = dead->next;
      if (!spare_lane) spare_lane = dead;
      else free(dead);
    } else {
      p = &(*p)->next;
    }
  }
}

void mcoll__progress(void) {
  if (!atomic_load_explicit(&pending, memory_order_relaxed) || mcoll__fiber_self()) return;
  /* Another thread progressing does the same work: no need to queue behind it. */
  if (pthread_mutex_trylock(&engine_lock) != 0) return;
  int emptied = 0;
  for (struct lane *l = lanes; l; l = l->next) emptied |= run_lane(l);
  if (emptied) drop_empty_lanes();
  pthread_mutex_unlock(&engine_lock);
}

atomic_int mcoll__progress_hold;
atomic_int mcoll__progress_urgent;
atomic_llong mcoll__progress_driven_ns;
int mcoll__cores_shared;

int mcoll__tasks_pending(void) { return atomic_load_explicit(&pending, memory_order_acquire) != 0; }

unsigned mcoll__task_events(void) { return atomic_load_explicit(&task_events, memory_order_relaxed); }

int mcoll__in_task(void) { return mcoll__fiber_self() != NULL; }

/* While waiting on the caller's stack: the engine, the host MPI, then the CPU. */
static void idle_step(unsigned *polls) {
  mcoll__progress();
  if (++*polls % 16 == 0) mcoll__host_progress();
  else sched_yield();
}

void mcoll__task_drain(MPI_Comm comm) {
  unsigned polls = 0;
  for (;;) {
    pthread_mutex_lock(&engine_lock);
    struct lane *l = lane_of(comm, 0);
    int busy = l && l->head;
    pthread_mutex_unlock(&engine_lock);
    if (!busy) return;
    idle_step(&polls);
  }
}

int mcoll__host_wait_status(int err, MPI_Request *req, MPI_Status *status) {
  if (err != MPI_SUCCESS) return err;
  unsigned polls = 0;
  for (;;) {
    int done = 0;
    err = PMPI_Test(req, &done, status);
    if (err != MPI_SUCCESS || done) return err;
    if (mcoll__fiber_self()) mcoll__fiber_yield();
    else idle_step(&polls);
  }
}

int mcoll__host_wait(int err, MPI_Request *req) {
  return mcoll__host_wait_status(err, req, MPI_STATUS_IGNORE);
}

int mcoll__host_wait_any(int n, MPI_Request *reqs, int *index, MPI_Status *status) {
  unsigned polls = 0;
  for (;;) {
    int done = 0;
    int err = PMPI_Testany(n, reqs, index, &done, status);
    if (err != MPI_SUCCESS || done) return err;
    if (mcoll__fiber_self()) mcoll__fiber_yield();
    else idle_step(&polls);
  }
}

int mcoll__host_call_nb(int err) { return mcoll__host_wait(err, mcoll__host_request()); }

static void engine_progress_hook(void) { mcoll__progress(); }

/* args_bytes 0: args is used in place (a persistent request's, which outlives its
 * starts, or the caller's for a call that runs at once), else copied. */
static struct mcoll_task *task_new(mcoll_task_fn fn, const void *args, size_t args_bytes) {
  static atomic_int hooked;
  if (args_bytes > MCOLL_TASK_ARGS_MAX) return NULL;
  struct mcoll_task *t = spare_tasks;
  if (t) {
    spare_tasks = t->next;
    nspare--;
    mcoll__fiber_reset(t->fiber, task_main, t);
  } else {
    t = malloc(sizeof *t);
    if (!t) return NULL;
    t->fiber = mcoll__fiber_new(task_main, t);
    if (!t->fiber) {
      free(t);
      return NULL;
    }
  }
  t->fn = fn;
  t->argp = args;
  if (args_bytes) {
    memcpy(t->args, args, args_bytes);
    t->argp = t->args;
  }
  t->err = MPI_SUCCESS;
  t->req = t->host_req = MPI_REQUEST_NULL;
  t->comm = MPI_COMM_NULL;
  t->next = NULL;
  t->persistent = NULL;
  t->call = NULL;
  t->keep.n = 0;
  t->independent = 0;
  t->tag_slot = 0;
  t->beside = 0;
  t->ctx_hint = NULL;
  atomic_init(&t->refs, 2);
  if (!atomic_load_explicit(&hooked, memory_order_relaxed) && !atomic_exchange(&hooked, 1))
    mcoll__set_background(engine_progress_hook, mcoll__tasks_pending);
  return t;
}

/* Puts t at the tail of lane l and counts it started and pending. Under engine_lock. */
static void lane_append(struct lane *l, struct mcoll_task *t) {
  t->serial = serial_next++;
  count_locked(&started);
  atomic_fetch_add(&pending, 1);
  atomic_fetch_add_explicit(&task_events, 1, memory_order_relaxed);
  if (l->tail) l->tail->next = t;
  else l->head = t;
  l->tail = t;
}

/* Appends t to comm's lane and, when it may run now (task/task.h: order), runs it
 * as far as it goes; 1 if it finished then (*err: its result). Under engine_lock. */
static int enqueue(MPI_Comm comm, struct mcoll_task *t, int *err) {
  struct lane *l = lane_of(comm, 1);
  if (!l) return -1;
  lane_append(l, t);
  int defer = defer_next;
  defer_next = 0;
  if (mcoll__fiber_self() || defer || !may_run(l, t) || !advance(l, t)) return 0;
  *err = t->err;
  if (!l->head) drop_empty_lanes();
  count_locked(&finished_at_start);
  return 1;
}

/* Gives t, in flight, the generalized request the application waits on (which
 * takes over the starter's reference). Under engine_lock. */
static int give_request(struct mcoll_task *t) {
  int err = PMPI_Grequest_start(request_query, request_free, request_cancel, t, &t->req);
  if (err != MPI_SUCCESS) t->req = MPI_REQUEST_NULL;
  return err;
}

/* A request that is complete already, for a call that finished when it started:
 * the host's own request of an empty send to MPI_PROC_NULL, which both host MPIs
 * make without allocating (a generalized request costs an allocation, its
 * completion and a query at the wait). Where the host gives one static handle for
 * every such send (two alive at once are equal: Open MPI's empty request, MPICH's
 * builtin null send), that handle is kept and handed out without the call, and
 * mcoll's MPI_Wait completes it as the host's wait did at the check (the status
 * recorded there): mcoll__task_done_request. */
/* Written once, under done_once; done_known (set last) says they hold: MPI_Wait
 * looks from any thread, whether or not a call made them yet. */
static MPI_Request done_handle;
static MPI_Status done_status;
static atomic_int done_known;
static pthread_once_t done_once = PTHREAD_ONCE_INIT;

static void done_handle_check(void) {
  MPI_Request a = MPI_REQUEST_NULL, b = MPI_REQUEST_NULL;
  if (PMPI_Isend(NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_SELF, &a) != MPI_SUCCESS) return;
  int ok = PMPI_Isend(NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_SELF, &b) == MPI_SUCCESS;
  MPI_Request kept = a;
  int same = ok && a == b;
  MPI_Status status;
  PMPI_Wait(&a, &status);
  if (ok) PMPI_Wait(&b, MPI_STATUS_IGNORE);
  /* (the wait must also leave MPI_REQUEST_NULL, as for any non-persistent request) */
  if (!same || kept == MPI_REQUEST_NULL || a != MPI_REQUEST_NULL) return;
  done_status = status;
  done_handle = kept;
  atomic_store_explicit(&done_known, 1, memory_order_release);
}

static int completed_request(MPI_Request *req) {
  if (atomic_load_explicit(&done_known, memory_order_acquire)) { /* (after the first call) */
    *req = done_handle;
    return MPI_SUCCESS;
  }
  pthread_once(&done_once, done_handle_check);
  if (!atomic_load_explicit(&done_known, memory_order_relaxed))
    return PMPI_Isend(NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_SELF, req);
  *req = done_handle;
  return MPI_SUCCESS;
}

int mcoll__task_done_request(MPI_Request *req, MPI_Status *status) {
  if (!atomic_load_explicit(&done_known, memory_order_acquire) || *req != done_handle) return 0;
  *req = MPI_REQUEST_NULL;
  if (status != MPI_STATUS_IGNORE) { /* (MPI_Wait leaves MPI_ERROR as it was) */
    int error = status->MPI_ERROR;
    *status = done_status;
    status->MPI_ERROR = error;
  }
  return 1;
}

/* A task whose both references the starter holds (nobody else saw it) back to the
 * spares. */
static void task_recycle(struct mcoll_task *t) {
  atomic_store_explicit(&t->refs, 1, memory_order_relaxed);
  task_unref(t);
}

static void count_unseen(void) {
  if (++unseen_calls < UNSEEN_BATCH) return;
  atomic_fetch_add_explicit(&started, unseen_calls, memory_order_relaxed);
  atomic_fetch_add_explicit(&finished_at_start, unseen_calls, memory_order_relaxed);
  atomic_fetch_add_explicit(&on_caller_stack, unseen_direct, memory_order_relaxed);
  unseen_calls = unseen_direct = 0;
}

/* Runs t to its end on this thread (no lane would take it), the engine and the host
 * MPI progressing meanwhile. Not under engine_lock. */
static void run_here(struct mcoll_task *t) {
  unsigned polls = 0;
  for (;;) {
    pthread_mutex_lock(&engine_lock);
    int ended = resume(t);
    pthread_mutex_unlock(&engine_lock);
    if (ended) return;
    idle_step(&polls);
  }
}

/* The start of a call while no task is pending anywhere (so its communicator's lane
 * is empty, and no call of it may start on another thread meanwhile: MPI orders a
 * communicator's collectives): the task runs at once without a lane, unseen by other
 * threads; only if it yields is it put in its lane (as its head) and given a
 * request. It runs under engine_lock all the same, as every task does: the host
 * MPI's calls made from tasks stay one at a time. 1 if it finished (*err: its
 * result). */
static int run_unseen(MPI_Comm comm, struct mcoll_task *t, int *err, int *request_err) {
  pthread_mutex_lock(&engine_lock);
  if (resume(t)) {
    pthread_mutex_unlock(&engine_lock);
    *err = t->err;
    count_unseen();
    return 1;
  }
  struct lane *l = lane_of(comm, 1);
  if (!l) {
    pthread_mutex_unlock(&engine_lock);
    run_here(t);
    *err = t->err;
    count_unseen();
    return 1;
  }
  lane_append(l, t);
  *request_err = t->persistent ? MPI_SUCCESS : give_request(t);
  pthread_mutex_unlock(&engine_lock);
  return 0;
}


int mcoll__task_start(MPI_Comm comm, mcoll_task_fn fn, const void *args, size_t args_bytes,
                      struct mcoll_task_keep *keep, MPI_Request *req) {
  int unseen = !defer_next && !mcoll__fiber_self() &&
               !atomic_load_explicit(&pending, memory_order_acquire);
  /* (run at once, fn has read args before this returns: no copy; task/task.h) */
  struct mcoll_task *t = task_new(fn, args, unseen ? 0 : args_bytes);
  if (!t) {
    mcoll__task_keep_free(keep);
    return MPI_ERR_NO_MEM;
  }
  if (keep) t->keep = *keep;
  t->comm = comm;
  int err = MPI_SUCCESS, request_err = MPI_SUCCESS, ran_to_end;
  if (unseen) {
    ran_to_end = run_unseen(comm, t, &err, &request_err);
    if (ran_to_end) {
      task_recycle(t);
      if (err != MPI_SUCCESS) {
        *req = MPI_REQUEST_NULL;
        return err;
      }
      return completed_request(req);
    }
  } else {
    pthread_mutex_lock(&engine_lock);
    ran_to_end = enqueue(comm, t, &err);
    request_err = ran_to_end == 0 ? give_request(t) : MPI_SUCCESS;
    pthread_mutex_unlock(&engine_lock);
  }
  if (ran_to_end < 0) { /* (nothing started) */
    task_unref(t);
    task_unref(t);
    return MPI_ERR_NO_MEM;
  }
  if (ran_to_end == 0) {
    wake_progress();
    if (request_err == MPI_SUCCESS) {
      *req = t->req; /* (t lives on at least as long as its request) */
      return MPI_SUCCESS;
    }
    /* No request to give: the call completes here. */
    unsigned polls = 0;
    while (atomic_load(&t->refs) > 1) {
      if (mcoll__fiber_self()) mcoll__fiber_yield();
      else idle_step(&polls);
    }
    err = t->err;
  }
  task_unref(t);
  /* An error (the host MPI's checks, raised through the communicator as natively)
   * is the call's own, with no request, as the host's MPI_I* returns it. */
  if (err != MPI_SUCCESS) {
    *req = MPI_REQUEST_NULL;
    return err;
  }
  return completed_request(req);
}

int mcoll__task_direct_ok(void) {
  return !defer_next && !mcoll__fiber_self() && !atomic_load_explicit(&pending, memory_order_acquire);
}

int mcoll__task_direct_done(int err, MPI_Request *req) {
  unseen_direct++;
  count_unseen();
  if (err != MPI_SUCCESS) {
    *req = MPI_REQUEST_NULL;
    return err;
  }
  return completed_request(req);
}

/* The task in flight whose request is *req, or NULL. Under engine_lock. */
static struct mcoll_task *task_of_request(const MPI_Request *req) {
  for (struct lane *l = lanes; l; l = l->next)
    for (struct mcoll_task *t = l->head; t; t = t->next)
      if (t->req == *req) return t;
  return NULL;
}

int mcoll__task_request_is_mine(const MPI_Request *req) {
  if (!atomic_load_explicit(&pending, memory_order_relaxed) || *req == MPI_REQUEST_NULL) return 0;
  pthread_mutex_lock(&engine_lock);
  struct mcoll_task *t = task_of_request(req);
  pthread_mutex_unlock(&engine_lock);
  return t != NULL;
}

/* ---- persistent collectives ---------------------------------------------------------- */
int mcoll__persistent_init(MPI_Comm comm, mcoll_task_fn fn, mcoll_task_direct_fn direct,
                           const void *args, size_t args_bytes, struct mcoll_task_keep *keep,
                           void *ctx, MPI_Request *req) {
  struct mcoll_persistent *p = calloc(1, sizeof *p);
  if (!p || args_bytes > sizeof p->args) {
    free(p);
    mcoll__task_keep_free(keep);
    return MPI_ERR_NO_MEM;
  }
  pthread_mutex_lock(&engine_lock);
  int err = carrier_comm == MPI_COMM_NULL ? PMPI_Comm_dup(MPI_COMM_SELF, &carrier_comm) : MPI_SUCCESS;
  pthread_mutex_unlock(&engine_lock);
  if (err == MPI_SUCCESS) err = PMPI_Recv_init(NULL, 0, MPI_BYTE, 0, 0, carrier_comm, &p->carrier);
  if (err != MPI_SUCCESS) {
    free(p);
    mcoll__task_keep_free(keep);
    return err;
  }
  p->comm = comm;
  p->fn = fn;
  p->direct = direct;
  memcpy(p->args, args, args_bytes);
  p->args_bytes = args_bytes;
  p->ctx = ctx;
  if (keep) p->keep = *keep;
  pthread_mutex_lock(&engine_lock);
  p->serial = serial_next++;
  p->next = persistents;
  persistents = p;
  atomic_fetch_add(&persistent_requests, 1);
  pthread_mutex_unlock(&engine_lock);
  *req = p->carrier;
  return MPI_SUCCESS;
}

/* The persistent collective whose handle is req, or NULL. Under engine_lock. */
static struct mcoll_persistent *persistent_of(MPI_Request req) {
  for (struct mcoll_persistent *p = persistents; p; p = p->next)
    if (p->carrier == req) return p;
  return NULL;
}

/* Per thread, the persistent request it last started: its next start and the wait
 * for it find it without the engine's lock (a program starts and waits for a
 * request on one thread at a time: MPI-3.1 §12.4.2). Stale once any request is
 * freed (persistent_gen, bumped under engine_lock). */
static MCOLL_TLS struct mcoll_persistent *cached_persistent;
static MCOLL_TLS MPI_Request cached_handle;
static MCOLL_TLS unsigned cached_gen;

static struct mcoll_persistent *persistent_cached(MPI_Request req) {
  struct mcoll_persistent *p = cached_persistent;
  if (!p || req != cached_handle ||
      atomic_load_explicit(&persistent_gen, memory_order_acquire) != cached_gen)
    return NULL;
  return p;
}

/* Under engine_lock. */
static void persistent_cache(MPI_Request req, struct mcoll_persistent *p) {
  cached_persistent = p;
  cached_handle = req;
  cached_gen = atomic_load_explicit(&persistent_gen, memory_order_relaxed);
}

/* A start of p while no task is pending (run_unseen's case): its task runs at once,
 * unseen, and only if it yields does p become active with it in its lane. */
static int persistent_start_unseen(struct mcoll_persistent *p, struct mcoll_task *t) {
  if (p->done) { /* (as in mcoll__persistent_start) */
    p->done = 0;
    p->err = MPI_SUCCESS;
    atomic_fetch_sub(&unreported_errors, 1);
  }
  t->persistent = p;
  t->comm = p->comm;
  t->ctx_hint = p->ctx;
  pthread_mutex_lock(&engine_lock); /* (as in run_unseen) */
  if (resume(t)) {
    p->err = t->err;
    p->done = 1;
    atomic_fetch_add(&unreported_errors, 1);
    pthread_mutex_unlock(&engine_lock);
    count_unseen();
    task_recycle(t);
    return MPI_SUCCESS;
  }
  struct lane *l = lane_of(p->comm, 1);
  if (!l) {
    pthread_mutex_unlock(&engine_lock);
    run_here(t);
    p->err = t->err;
    p->done = 1;
    atomic_fetch_add(&unreported_errors, 1);
    count_unseen();
    task_recycle(t);
    return MPI_SUCCESS;
  }
  p->active = t;
  atomic_fetch_add(&persistent_active, 1);
  lane_append(l, t);
  task_unref(t); /* (the starter's: the engine's stays) */
  pthread_mutex_unlock(&engine_lock);
  wake_progress();
  return MPI_SUCCESS;
}

/* A start of p that its try completed: reported as a completed start is. */
static void persistent_done_direct(struct mcoll_persistent *p, int err) {
  if (!p->done) atomic_fetch_add(&unreported_errors, 1);
  p->err = err;
  p->done = 1;
  unseen_direct++;
  count_unseen();
}

int mcoll__persistent_start(MPI_Request *req, int *err) {
  struct mcoll_persistent *p = persistent_cached(*req);
  if (p && !defer_next && !mcoll__fiber_self() &&
      !atomic_load_explicit(&pending, memory_order_acquire) && !p->active) {
    struct mcoll_task_rest rest;
    int tried = p->direct ? p->direct(p->args, p->ctx, &rest, err) : -1;
    if (tried == 1) {
      persistent_done_direct(p, *err);
      *err = MPI_SUCCESS;
      return 1;
    }
    /* (begun: its rest runs as the start's task, on a copy of its arguments) */
    struct mcoll_task *t = tried == 0 ? task_new(rest.fn, rest.args, rest.bytes)
                                      : task_new(p->fn, p->args, 0);
    if (t) {
      *err = persistent_start_unseen(p, t);
      return 1;
    }
    if (tried == 0) { /* (begun, and nothing to finish it on) */
      *err = MPI_ERR_NO_MEM;
      return 1;
    }
  }
  pthread_mutex_lock(&engine_lock);
  p = persistents ? persistent_of(*req) : NULL;
  if (!p) {
    pthread_mutex_unlock(&engine_lock);
    return 0;
  }
  persistent_cache(*req, p);
  *err = MPI_SUCCESS;
  struct mcoll_task *t = p->active ? NULL : task_new(p->fn, p->args, 0);
  if (!t) {
    pthread_mutex_unlock(&engine_lock);
    *err = p->active ? MPI_ERR_REQUEST : MPI_ERR_NO_MEM; /* (started twice: erroneous) */
    return 1;
  }
  if (p->done) { /* (a completion nobody asked for goes with the next start) */
    p->done = 0;
    p->err = MPI_SUCCESS;
    atomic_fetch_sub(&unreported_errors, 1);
  }
  t->persistent = p;
  p->active = t;
  atomic_fetch_add(&persistent_active, 1);
  t->comm = p->comm;
  t->ctx_hint = p->ctx;
  int ignored, ran_to_end = enqueue(p->comm, t, &ignored);
  if (ran_to_end < 0) { /* (nothing started) */
    *err = MPI_ERR_NO_MEM;
    p->active = NULL;
    atomic_fetch_sub(&persistent_active, 1);
    task_unref(t);
  }
  task_unref(t);
  pthread_mutex_unlock(&engine_lock);
  if (ran_to_end == 0) wake_progress();
  return 1;
}

int mcoll__persistent_busy(MPI_Request req) {
  if (!atomic_load_explicit(&persistent_active, memory_order_acquire) || req == MPI_REQUEST_NULL)
    return 0;
  pthread_mutex_lock(&engine_lock);
  struct mcoll_persistent *p = persistent_of(req);
  int busy = p && p->active;
  pthread_mutex_unlock(&engine_lock);
  return busy;
}

int mcoll__persistent_unsettled(MPI_Request req) {
  if (req == MPI_REQUEST_NULL || (!atomic_load_explicit(&persistent_active, memory_order_acquire) &&
                                  !atomic_load_explicit(&unreported_errors, memory_order_acquire)))
    return 0;
  pthread_mutex_lock(&engine_lock);
  struct mcoll_persistent *p = persistents ? persistent_of(req) : NULL;
  int unsettled = p && (p->active || p->done);
  pthread_mutex_unlock(&engine_lock);
  return unsettled;
}

int mcoll__task_errors_pending(void) {
  return atomic_load_explicit(&unreported_errors, memory_order_relaxed) != 0;
}

int mcoll__persistent_take_own(MPI_Request req, int *err, MPI_Comm *comm) {
  struct mcoll_persistent *p = persistent_cached(req);
  if (!p || !p->done) return 0;
  *err = p->err;
  *comm = p->comm;
  p->done = 0;
  p->err = MPI_SUCCESS;
  atomic_fetch_sub(&unreported_errors, 1);
  return 1;
}

int mcoll__task_take_error(MPI_Request req, MPI_Comm *comm) {
  if (req == MPI_REQUEST_NULL || !atomic_load_explicit(&unreported_errors, memory_order_acquire))
    return MPI_SUCCESS;
  int err = MPI_SUCCESS;
  pthread_mutex_lock(&engine_lock);
  struct mcoll_persistent *p = persistents ? persistent_of(req) : NULL;
  if (p && p->done) {
    err = p->err;
    p->done = 0;
    p->err = MPI_SUCCESS;
    if (comm) *comm = p->comm;
    atomic_fetch_sub(&unreported_errors, 1);
  }
  for (struct failed_call **link = &failed_calls; !p && *link; link = &(*link)->next) {
    struct failed_call *f = *link;
    if (f->req != req) continue;
    err = f->err;
    if (comm) *comm = f->comm;
    *link = f->next;
    free(f);
    atomic_fetch_sub(&unreported_errors, 1);
    break;
  }
  pthread_mutex_unlock(&engine_lock);
  return err;
}

int mcoll__persistent_take_done(int n, const MPI_Request reqs[], int *err, MPI_Comm *comm) {
  if (!atomic_load_explicit(&unreported_errors, memory_order_acquire) ||
      !atomic_load_explicit(&persistent_requests, memory_order_relaxed))
    return -1;
  int found = -1;
  pthread_mutex_lock(&engine_lock);
  for (int i = 0; i < n && found < 0; i++) {
    struct mcoll_persistent *p = reqs[i] == MPI_REQUEST_NULL ? NULL : persistent_of(reqs[i]);
    if (!p || !p->done) continue;
    found = i;
    *err = p->err;
    *comm = p->comm;
    p->done = 0;
    p->err = MPI_SUCCESS;
    atomic_fetch_sub(&unreported_errors, 1);
  }
  pthread_mutex_unlock(&engine_lock);
  return found;
}

void mcoll__task_comm_freed(MPI_Comm comm) {
  if (!atomic_load_explicit(&unreported_errors, memory_order_acquire)) return;
  pthread_mutex_lock(&engine_lock);
  for (struct failed_call *f = failed_calls; f; f = f->next)
    if (f->comm == comm) f->comm = MPI_COMM_NULL;
  pthread_mutex_unlock(&engine_lock);
}

int mcoll__persistent_any_busy(void) {
  return atomic_load_explicit(&persistent_active, memory_order_acquire) != 0;
}

int mcoll__persistent_free(MPI_Request *req) {
  if (*req == MPI_REQUEST_NULL) return 0;
  pthread_mutex_lock(&engine_lock);
  struct mcoll_persistent *p = persistents ? persistent_of(*req) : NULL;
  if (p && p->active) p->freed = 1; /* freed when the start in flight completes */
  else if (p) persistent_destroy(p);
  pthread_mutex_unlock(&engine_lock);
  if (p) *req = MPI_REQUEST_NULL;
  return p != NULL;
}

void mcoll__task_report(FILE *out) {
  /* (this thread's unseen calls not added yet; other threads' stay out: < UNSEEN_BATCH each) */
  atomic_fetch_add(&started, unseen_calls);
  atomic_fetch_add(&finished_at_start, unseen_calls);
  atomic_fetch_add(&on_caller_stack, unseen_direct);
  unseen_calls = unseen_direct = 0;
  unsigned long n = atomic_load(&started);
  if (n)
    fprintf(out, "mcoll: non-blocking calls=%lu finished at start=%lu (no task: %lu) side by side=%lu\n", n,
            atomic_load(&finished_at_start), atomic_load(&on_caller_stack), atomic_load(&side_by_side));
}

/* ---- handles the application frees while calls may use them -------------------- */
/* A datatype or op freed while calls made before the free are in flight (or persistent
 * requests made before it are alive) stays valid for them, as natively (MPI-3.1
 * §4.1.9, §5.9.5): the host's free waits until they are done, so that neither the
 * handle nor what it points to is reused meanwhile. Each is freed once no call or
 * persistent request older than its free is left; under engine_lock. */
struct held_handle {
  MPI_Datatype type; /* or MPI_DATATYPE_NULL */
  MPI_Op op;         /* or MPI_OP_NULL */
  unsigned long horizon; /* calls with a smaller serial may use it */
  struct held_handle *next;
};
static struct held_handle *held;

/* The serial of the oldest call or persistent request alive (serial_next: none). */
static unsigned long oldest_serial(void) {
  unsigned long oldest = serial_next;
  for (struct lane *l = lanes; l; l = l->next)
    for (struct mcoll_task *t = l->head; t; t = t->next)
      if (t->serial < oldest) oldest = t->serial;
  for (struct mcoll_persistent *p = persistents; p; p = p->next)
    if (p->serial < oldest) oldest = p->serial;
  return oldest;
}

static void held_release(void) {
  if (!held) return;
  unsigned long oldest = oldest_serial();
  for (struct held_handle **link = &held; *link;) {
    struct held_handle *h = *link;
    if (h->horizon > oldest) {
      link = &h->next;
      continue;
    }
    *link = h->next;
    if (h->type != MPI_DATATYPE_NULL) PMPI_Type_free(&h->type);
    if (h->op != MPI_OP_NULL) PMPI_Op_free(&h->op);
    free(h);
  }
}

int mcoll__task_hold_free(MPI_Datatype type, MPI_Op op) {
  pthread_mutex_lock(&engine_lock);
  int in_use = oldest_serial() < serial_next;
  struct held_handle *h = in_use ? malloc(sizeof *h) : NULL;
  if (h) {
    *h = (struct held_handle){type, op, serial_next, held};
    held = h;
  }
  pthread_mutex_unlock(&engine_lock);
  return h != NULL;
}
