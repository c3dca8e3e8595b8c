/* The host MPI's completion calls, which drive mcoll's tasks while any is pending
 * (their generalized requests complete only when the engine runs). With none pending
 * each wrapper is one load and the host's own call. */
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "core/host_progress.h"
#include "pmpi/wrap.h"

/* ---- completion calls ------------------------------------------------------------ */
/* A wait's loop: advances the tasks and, now and then, the host MPI, with a yield
 * between passes. Where the machine's cores are shared by more ranks than it has
 * (mcoll__cores_shared), a yield does not hand the core to the peer being waited
 * for: after QUIET_POLLS passes in which no task started or finished the loop
 * sleeps, doubling from a short first sleep up to MCOLL_WAIT_NAP_US (0: it only yields). */
struct idle {
  unsigned polls, quiet, events;
  long nap_ns;
};
enum { QUIET_POLLS = 32 };

static void idle(struct idle *w) {
  mcoll__progress();
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  atomic_store_explicit(&mcoll__progress_driven_ns, (long long)now.tv_sec * 1000000000LL + now.tv_nsec,
                        memory_order_relaxed);
  unsigned events = mcoll__task_events();
  if (events != w->events || w->polls == 0) {
    w->events = events;
    w->quiet = 0;
    w->nap_ns = 1000;
  }
  if (++w->polls % 16 == 0) {
    mcoll__host_progress();
  } else if (mcoll__cores_shared && mcoll__cfg.WAIT_NAP_US > 0 && ++w->quiet > QUIET_POLLS) {
    struct timespec pause = {0, w->nap_ns};
    nanosleep(&pause, NULL);
    long max_ns = mcoll__cfg.WAIT_NAP_US * 1000;
    w->nap_ns = w->nap_ns * 2 > max_ns ? max_ns : w->nap_ns * 2;
  } else {
    sched_yield();
  }
}

/* A wait loop that idled returns err: its thread no longer drives the tasks, so
 * the progress thread polls them again at once (it naps while an application thread
 * drives them; the stamp alone would keep it napping after the wait returned,
 * through the computation that follows). */
static int idle_end(const struct idle *w, int err) {
  if (w->polls) atomic_store_explicit(&mcoll__progress_driven_ns, 0, memory_order_relaxed);
  return err;
}

/* Persistent collectives in flight (task.c): their handle is an inactive host
 * request, which the host would report complete at once; these calls hold it back
 * until the start completes. Without one in flight each test below is one load. */
static int busy_in(int n, const MPI_Request reqs[]) {
  if (!mcoll__persistent_any_busy()) return 0;
  for (int i = 0; i < n; i++)
    if (mcoll__persistent_busy(reqs[i])) return 1;
  return 0;
}

/* The same for MPI_Testany/Testsome, which skip inactive requests: also the completed
 * starts not reported yet (reported by mcoll itself, task/task.h: take_done). */
static int unsettled_in(int n, const MPI_Request reqs[]) {
  for (int i = 0; i < n; i++)
    if (mcoll__persistent_unsettled(reqs[i])) return 1;
  return 0;
}

/* Errors found after a call returned (task/task.h: errors_pending): the host
 * completes such a call's request without an error, and these calls report it in
 * its place, in the return code and the status, through the call's communicator
 * (as the host does for its own requests, but on the communicator the call named,
 * where the host would raise it on MPI_COMM_WORLD). Without such an error, and no
 * task pending (none can fail meanwhile), each check is one load. */
static int errors_possible(void) { return mcoll__tasks_pending() || mcoll__task_errors_pending(); }

static int raise_on(MPI_Comm comm, int err) {
  if (comm != MPI_COMM_NULL) PMPI_Comm_call_errhandler(comm, err);
  return err;
}

/* The handles of an array call's requests, kept before the host completes them (it
 * sets those of non-persistent requests to MPI_REQUEST_NULL), while errors are
 * possible; else (or without memory) the array itself. */
struct handles {
  MPI_Request local[16], *copy;
  const MPI_Request *of;
};

static void handles_keep(struct handles *h, int n, const MPI_Request reqs[]) {
  h->of = reqs;
  h->copy = NULL;
  if (n <= 0 || !errors_possible()) return;
  h->copy = n <= 16 ? h->local : malloc(sizeof *h->copy * (size_t)n);
  if (!h->copy) return;
  for (int i = 0; i < n; i++) h->copy[i] = reqs[i];
  h->of = h->copy;
}

static void handles_drop(struct handles *h) {
  if (h->copy != h->local) free(h->copy);
}

static int one_done(MPI_Request handle, int err, MPI_Status *status) {
  if (!mcoll__task_errors_pending()) return err;
  MPI_Comm comm = MPI_COMM_NULL;
  int failed = mcoll__task_take_error(handle, &comm);
  if (failed == MPI_SUCCESS) return err;
  if (status != MPI_STATUS_IGNORE) status->MPI_ERROR = failed;
  return raise_on(comm, failed);
}

/* The same for n completed entries of an array call (which[k]: the index of the
 * k-th, or NULL: k itself): MPI_ERR_IN_STATUS with each entry's status, or the error
 * itself when the statuses are ignored, raised once on the first failed call's
 * communicator. */
static int some_failed(int n, const MPI_Request handles[], const int which[], int err,
                       MPI_Status statuses[]) {
  if (!mcoll__task_errors_pending()) return err;
  int failed = MPI_SUCCESS;
  MPI_Comm first = MPI_COMM_NULL;
  for (int k = 0; k < n; k++) {
    MPI_Comm comm = MPI_COMM_NULL;
    int e = mcoll__task_take_error(handles[which ? which[k] : k], &comm);
    if (e == MPI_SUCCESS) continue;
    if (failed == MPI_SUCCESS) {
      first = comm;
      if (statuses != MPI_STATUSES_IGNORE && err == MPI_SUCCESS)
        for (int j = 0; j < n; j++) statuses[j].MPI_ERROR = MPI_SUCCESS;
    }
    failed = e;
    if (statuses != MPI_STATUSES_IGNORE) statuses[k].MPI_ERROR = e;
  }
  if (failed == MPI_SUCCESS) return err;
  return raise_on(first, statuses != MPI_STATUSES_IGNORE ? MPI_ERR_IN_STATUS : failed);
}

/* A copy of reqs with the unsettled persistent ones as MPI_REQUEST_NULL, for the
 * host's Test{any,some}; busy[i] says which (the host gives back every other entry;
 * a busy one may complete meanwhile, and keeps its handle). */
struct masked {
  MPI_Request local[16], *copy;
  char local_busy[16], *busy;
  int nbusy;
};

static int mask(struct masked *m, int n, const MPI_Request reqs[]) {
  m->copy = n <= 16 ? m->local : malloc(sizeof *m->copy * (size_t)n);
  m->busy = n <= 16 ? m->local_busy : malloc((size_t)n);
  m->nbusy = 0;
  if (!m->copy || !m->busy) return 0;
  for (int i = 0; i < n; i++) {
    m->busy[i] = (char)mcoll__persistent_unsettled(reqs[i]);
    m->copy[i] = m->busy[i] ? MPI_REQUEST_NULL : reqs[i];
    m->nbusy += m->busy[i];
  }
  return 1;
}

static void unmask(struct masked *m, int n, MPI_Request reqs[]) {
  for (int i = 0; m->copy && m->busy && i < n; i++)
    if (!m->busy[i]) reqs[i] = m->copy[i];
  if (m->copy != m->local) free(m->copy);
  if (m->busy != m->local_busy) free(m->busy);
}

/* A persistent start that completed (task/task.h: take_done) as the host would
 * report a request: an empty status with its error. */
static int report_done(int err, MPI_Status *status) {
  if (status != MPI_STATUS_IGNORE) {
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_ANY_SOURCE;
    status->MPI_TAG = MPI_ANY_TAG;
    status->MPI_ERROR = err;
  }
  return err;
}

/* One round of MPI_Testany over reqs, busy persistent ones left out; *flag 0 while
 * only those remain active. */
static int testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status) {
  int err = MPI_SUCCESS;
  MPI_Comm comm = MPI_COMM_NULL;
  int i = mcoll__persistent_take_done(n, reqs, &err, &comm);
  if (i >= 0) {
    *index = i;
    *flag = 1;
    return err == MPI_SUCCESS ? report_done(err, status) : raise_on(comm, report_done(err, status));
  }
  /* (after take_done: a start that completes from here on is masked, and reported
   * by the next round) */
  if (!unsettled_in(n, reqs)) return PMPI_Testany(n, reqs, index, flag, status);
  struct masked m;
  if (!mask(&m, n, reqs)) {
    unmask(&m, n, reqs);
    return MPI_ERR_NO_MEM;
  }
  err = PMPI_Testany(n, m.copy, index, flag, status);
  unmask(&m, n, reqs);
  if (err == MPI_SUCCESS && *flag && *index == MPI_UNDEFINED && m.nbusy) {
    *flag = 0;
    mcoll__host_progress(); /* (the host may skip it for an array of inactive requests) */
  }
  return err;
}

static int testsome(int n, MPI_Request reqs[], int *outcount, int indices[],
                    MPI_Status statuses[]) {
  /* Completed persistent starts first, reported alone (the host skips them). */
  int k = 0, failed = MPI_SUCCESS;
  MPI_Comm first = MPI_COMM_NULL;
  for (int from = 0; from < n;) {
    int err = MPI_SUCCESS;
    MPI_Comm comm = MPI_COMM_NULL;
    int i = mcoll__persistent_take_done(n - from, reqs + from, &err, &comm);
    if (i < 0) break;
    indices[k] = from + i;
    report_done(err, statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[k]);
    if (err != MPI_SUCCESS && failed == MPI_SUCCESS) first = comm, failed = err;
    k++;
    from += i + 1;
  }
  if (k > 0) {
    *outcount = k;
    if (failed == MPI_SUCCESS) return MPI_SUCCESS;
    return raise_on(first, statuses != MPI_STATUSES_IGNORE ? MPI_ERR_IN_STATUS : failed);
  }
  if (!unsettled_in(n, reqs)) return PMPI_Testsome(n, reqs, outcount, indices, statuses);
  struct masked m;
  if (!mask(&m, n, reqs)) {
    unmask(&m, n, reqs);
    return MPI_ERR_NO_MEM;
  }
  int err = PMPI_Testsome(n, m.copy, outcount, indices, statuses);
  unmask(&m, n, reqs);
  if (err == MPI_SUCCESS && *outcount == MPI_UNDEFINED && m.nbusy) {
    *outcount = 0;
    mcoll__host_progress(); /* (as in testany) */
  }
  return err;
}

static int all_done(int n, struct handles *h, int err, MPI_Status statuses[]) {
  err = some_failed(n, h->of, NULL, err, statuses);
  handles_drop(h);
  return err;
}

static int any_done(struct handles *h, int index, int flag, int err, MPI_Status *status) {
  if (flag && index != MPI_UNDEFINED) err = one_done(h->of[index], err, status);
  handles_drop(h);
  return err;
}

static int some_done(struct handles *h, int outcount, const int indices[], int err,
                     MPI_Status statuses[]) {
  if (outcount != MPI_UNDEFINED) err = some_failed(outcount, h->of, indices, err, statuses);
  handles_drop(h);
  return err;
}

MCOLL_EXPORT int MPI_Wait(MPI_Request *req, MPI_Status *status) {
  mcoll__tnbc_settle_pending();
  if (mcoll__task_done_request(req, status)) return MPI_SUCCESS;
  MPI_Request handle = *req; /* (a persistent one keeps it) */
  if (!mcoll__tasks_pending()) {
    /* A persistent start of this thread's that completed: the host's wait of the
     * inactive handle would only give the empty status. */
    int failed;
    MPI_Comm comm;
    if (mcoll__task_errors_pending() && mcoll__persistent_take_own(handle, &failed, &comm))
      return failed == MPI_SUCCESS ? report_done(failed, status)
                                   : raise_on(comm, report_done(failed, status));
    return one_done(handle, PMPI_Wait(req, status), status);
  }
  struct idle polls = {0};
  while (mcoll__persistent_busy(*req)) idle(&polls);
  for (;;) {
    int done = 0, err = PMPI_Test(req, &done, status);
    if (err != MPI_SUCCESS || done) return idle_end(&polls, one_done(handle, err, status));
    idle(&polls);
  }
}

MCOLL_EXPORT int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[]) {
  mcoll__tnbc_settle_pending();
  if (!errors_possible()) return PMPI_Waitall(n, reqs, statuses);
  struct handles h;
  handles_keep(&h, n, reqs);
  if (!mcoll__tasks_pending()) return all_done(n, &h, PMPI_Waitall(n, reqs, statuses), statuses);
  struct idle polls = {0};
  while (busy_in(n, reqs)) idle(&polls);
  for (;;) {
    int done = 0, err = PMPI_Testall(n, reqs, &done, statuses);
    if (err != MPI_SUCCESS || done) return idle_end(&polls, all_done(n, &h, err, statuses));
    idle(&polls);
  }
}

MCOLL_EXPORT int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status) {
  mcoll__tnbc_settle_pending();
  if (!errors_possible()) return PMPI_Waitany(n, reqs, index, status);
  struct handles h;
  handles_keep(&h, n, reqs);
  struct idle polls = {0};
  for (;;) {
    /* Nothing pending before the round: no start completed in it unseen. */
    int settled = !mcoll__tasks_pending();
    int done = 0, err = testany(n, reqs, index, &done, status);
    if (err != MPI_SUCCESS || done) return idle_end(&polls, any_done(&h, *index, done, err, status));
    if (settled)
      return idle_end(&polls, any_done(&h, *index, 1, PMPI_Waitany(n, reqs, index, status), status));
    idle(&polls);
  }
}

MCOLL_EXPORT int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[],
                              MPI_Status statuses[]) {
  mcoll__tnbc_settle_pending();
  if (!errors_possible()) return PMPI_Waitsome(n, reqs, outcount, indices, statuses);
  struct handles h;
  handles_keep(&h, n, reqs);
  struct idle polls = {0};
  for (;;) {
    int settled = !mcoll__tasks_pending(); /* (as in MPI_Waitany) */
    int err = testsome(n, reqs, outcount, indices, statuses);
    if (err != MPI_SUCCESS || *outcount != 0) /* (MPI_UNDEFINED: none active) */
      return idle_end(&polls, some_done(&h, *outcount, indices, err, statuses));
    if (settled) {
      err = PMPI_Waitsome(n, reqs, outcount, indices, statuses);
      return idle_end(&polls, some_done(&h, *outcount, indices, err, statuses));
    }
    idle(&polls);
  }
}

/* A busy persistent request's test: the engine and the host MPI progress (natively
 * a test does), and it is not complete. */
static int busy_test(int *flag) {
  mcoll__host_progress();
  *flag = 0;
  return MPI_SUCCESS;
}

MCOLL_EXPORT int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status) {
  mcoll__tnbc_settle_pending();
  mcoll__progress();
  if (mcoll__persistent_busy(*req)) return busy_test(flag);
  MPI_Request handle = *req;
  int err = PMPI_Test(req, flag, status);
  return *flag ? one_done(handle, err, status) : err;
}

MCOLL_EXPORT int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[]) {
  mcoll__tnbc_settle_pending();
  mcoll__progress();
  if (busy_in(n, reqs)) return busy_test(flag);
  if (!errors_possible()) return PMPI_Testall(n, reqs, flag, statuses);
  struct handles h;
  handles_keep(&h, n, reqs);
  int err = PMPI_Testall(n, reqs, flag, statuses);
  if (*flag) return all_done(n, &h, err, statuses);
  handles_drop(&h);
  return err;
}

MCOLL_EXPORT int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status) {
  mcoll__tnbc_settle_pending();
  mcoll__progress();
  if (!errors_possible()) return testany(n, reqs, index, flag, status);
  struct handles h;
  handles_keep(&h, n, reqs);
  int err = testany(n, reqs, index, flag, status);
  return any_done(&h, *index, *flag, err, status);
}

MCOLL_EXPORT int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[],
                              MPI_Status statuses[]) {
  mcoll__tnbc_settle_pending();
  mcoll__progress();
  if (!errors_possible()) return testsome(n, reqs, outcount, indices, statuses);
  struct handles h;
  handles_keep(&h, n, reqs);
  int err = testsome(n, reqs, outcount, indices, statuses);
  return some_done(&h, *outcount, indices, err, statuses);
}

MCOLL_EXPORT int MPI_Start(MPI_Request *req) {
  mcoll__tnbc_settle_pending();
  int err;
  if (req && mcoll__persistent_start(req, &err)) return err;
  return PMPI_Start(req);
}

MCOLL_EXPORT int MPI_Startall(int n, MPI_Request reqs[]) {
  mcoll__tnbc_settle_pending();
  for (int i = 0; i < n; i++) {
    int err = MPI_Start(&reqs[i]);
    if (err != MPI_SUCCESS) return err;
  }
  return MPI_SUCCESS;
}

MCOLL_EXPORT int MPI_Request_get_status(MPI_Request req, int *flag, MPI_Status *status) {
  mcoll__tnbc_settle_pending();
  mcoll__progress();
  if (mcoll__persistent_busy(req)) return busy_test(flag);
  return PMPI_Request_get_status(req, flag, status);
}

MCOLL_EXPORT int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
  mcoll__tnbc_settle_pending();
  mcoll__progress();
  return PMPI_Iprobe(source, tag, comm, flag, status);
}

MCOLL_EXPORT int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
  mcoll__tnbc_settle_pending();
  if (!mcoll__tasks_pending()) return PMPI_Probe(source, tag, comm, status);
  struct idle polls = {0};
  for (;;) {
    int flag = 0, err = PMPI_Iprobe(source, tag, comm, &flag, status);
    if (err != MPI_SUCCESS || flag) return idle_end(&polls, err);
    idle(&polls);
  }
}

MCOLL_EXPORT int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag,
                          MPI_Comm comm, MPI_Status *status) {
  mcoll__tnbc_settle_pending();
  if (!mcoll__tasks_pending()) return PMPI_Recv(buf, count, type, source, tag, comm, status);
  MPI_Request req;
  int err = PMPI_Irecv(buf, count, type, source, tag, comm, &req);
  return err != MPI_SUCCESS ? err : MPI_Wait(&req, status);
}

MCOLL_EXPORT int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                          MPI_Comm comm) {
  mcoll__tnbc_settle_pending();
  if (!mcoll__tasks_pending()) return PMPI_Send(buf, count, type, dest, tag, comm);
  MPI_Request req;
  int err = PMPI_Isend(buf, count, type, dest, tag, comm, &req);
  return err != MPI_SUCCESS ? err : MPI_Wait(&req, MPI_STATUS_IGNORE);
}

MCOLL_EXPORT int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                              int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                              int source, int recvtag, MPI_Comm comm, MPI_Status *status) {
  mcoll__tnbc_settle_pending();
  if (!mcoll__tasks_pending())
    return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                         recvtype, source, recvtag, comm, status);
  MPI_Request reqs[2];
  MPI_Status statuses[2];
  int err = PMPI_Irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, &reqs[0]);
  if (err != MPI_SUCCESS) return err;
  err = PMPI_Isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, &reqs[1]);
  if (err != MPI_SUCCESS) {
    PMPI_Cancel(&reqs[0]);
    PMPI_Request_free(&reqs[0]);
    return err;
  }
  err = MPI_Waitall(2, reqs, statuses);
  if (status != MPI_STATUS_IGNORE) *status = statuses[0];
  return err == MPI_ERR_IN_STATUS ? statuses[0].MPI_ERROR != MPI_SUCCESS ? statuses[0].MPI_ERROR
                                                                        : statuses[1].MPI_ERROR
                                  : err;
}

MCOLL_EXPORT int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                           MPI_Comm comm) {
  mcoll__tnbc_settle_pending();
  if (!mcoll__tasks_pending()) return PMPI_Ssend(buf, count, type, dest, tag, comm);
  MPI_Request req;
  int err = PMPI_Issend(buf, count, type, dest, tag, comm, &req);
  return err != MPI_SUCCESS ? err : MPI_Wait(&req, MPI_STATUS_IGNORE);
}

MCOLL_EXPORT int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message,
                            MPI_Status *status) {
  mcoll__tnbc_settle_pending();
  if (!mcoll__tasks_pending()) return PMPI_Mprobe(source, tag, comm, message, status);
  struct idle polls = {0};
  for (;;) {
    int flag = 0, err = PMPI_Improbe(source, tag, comm, &flag, message, status);
    if (err != MPI_SUCCESS || flag) return idle_end(&polls, err);
    idle(&polls);
  }
}

MCOLL_EXPORT int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                             MPI_Status *status) {
  mcoll__tnbc_settle_pending();
  mcoll__progress();
  return PMPI_Improbe(source, tag, comm, flag, message, status);
}

MCOLL_EXPORT int MPI_Mrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message,
                           MPI_Status *status) {
  mcoll__tnbc_settle_pending();
  if (!mcoll__tasks_pending()) return PMPI_Mrecv(buf, count, type, message, status);
  MPI_Request req;
  int err = PMPI_Imrecv(buf, count, type, message, &req);
  return err != MPI_SUCCESS ? err : MPI_Wait(&req, status);
}

MCOLL_EXPORT int MPI_Request_free(MPI_Request *req) {
  mcoll__tnbc_settle_pending();
  /* Freeing an active non-blocking collective's request is erroneous (MPI-3.1 §5.12):
   * both host MPIs raise MPI_ERR_REQUEST on MPI_COMM_WORLD and keep the request; so
   * does mcoll. A persistent one is freed when its start in flight completes. */
  if (req && mcoll__task_request_is_mine(req)) {
    PMPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_REQUEST);
    return MPI_ERR_REQUEST;
  }
  if (req && mcoll__persistent_free(req)) return MPI_SUCCESS;
  MPI_Request handle = req ? *req : MPI_REQUEST_NULL;
  int err = PMPI_Request_free(req);
  if (err == MPI_SUCCESS) mcoll__task_take_error(handle, NULL); /* (nobody will ask) */
  return err;
}

MCOLL_EXPORT int MPI_Cancel(MPI_Request *req) {
  mcoll__tnbc_settle_pending();
  /* Collectives cannot be cancelled; the call completes normally (and
   * MPI_Test_cancelled says false). */
  if (req && mcoll__task_request_is_mine(req)) return MPI_SUCCESS;
  return PMPI_Cancel(req);
}

MCOLL_EXPORT int MPI_Comm_free(MPI_Comm *comm) {
  mcoll__tnbc_settle_pending();
  /* Calls in flight on it complete first: its context goes with it. */
  if (comm && mcoll__tasks_pending()) mcoll__task_drain(*comm);
  if (comm) mcoll__context_forget(*comm);
  if (comm) mcoll__task_comm_freed(*comm);
  return PMPI_Comm_free(comm);
}
