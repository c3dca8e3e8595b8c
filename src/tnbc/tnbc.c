/* T-NBC calls: records, protection, the writer and the SIGSEGV handler (tnbc.h). */
#include "tnbc/tnbc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "mcoll.h"
#include "core/datatype.h"
#include "core/fiber.h"
#include "core/tls.h"
#include "task/progress_thread.h"
#include "tnbc/tnbc_internal.h"
#include "topo/topo.h"

int mcoll__tnbc_active;
MCOLL_TLS struct mcoll_tnbc_caller mcoll__tnbc_caller;
struct mcoll_tnbc_collectives mcoll__tnbc_colls;

/* Sub-messages per call: more blocks than this are grouped (the handler's table is a
 * fixed array, read without locks). Calls: every MPI call of a thread settles the
 * pending ones of that thread, so one per application thread is in flight at a time;
 * spare records leave room for the handler of a just-settled call to finish reading
 * its table. */
enum { MAX_SUBS = 1024, MAX_CALLS = 32, APP_RANGES = 4 };
enum { CALL_FREE, CALL_BUILDING, CALL_POSTED };

struct sub {
  uintptr_t lo, hi;       /* protected bytes of the user's buffer */
  _Atomic uint32_t done;  /* futex word: 1 once written and unprotected */
  int index;              /* the block it is (the source of an alltoall(v)) */
  _Atomic int touched;    /* traced: its first touch is recorded */
};

struct mcoll_tnbc_call {
  _Atomic int state;
  /* Settled by the thread that made it (owner), never by another thread's calls: two
   * threads' calls may each need the peer's call of the other thread. ready: posted
   * to the end (settle may take it); settling: a settle has taken it. */
  const void *owner;
  _Atomic int ready, settling;
  uintptr_t user;         /* the receive buffer */
  size_t bytes;
  uintptr_t plo, phi;     /* its whole pages, protected while posted (plo == phi: none) */
  char *target;           /* where the task receives */
  int own_target;         /* target is our bounce buffer */
  void *owned[2];
  size_t owned_bytes[2];
  int nowned;
  _Atomic size_t edge_left; /* bytes of partial first/last pages still to come */
  MPI_Request req;
  mcoll_task_fn fn;
  _Alignas(max_align_t) unsigned char args[MCOLL_TASK_ARGS_MAX];
  int nsubs;
  struct sub subs[MAX_SUBS];
  /* Ranges the application mprotect()ed while the call was pending: faults there are
   * its own (the last one grows to cover any beyond APP_RANGES). */
  _Atomic int napp;
  struct { uintptr_t lo, hi; } app[APP_RANGES];
  /* The send buffer, read-only while its messages go out (instead of a copy): its
   * whole pages [slo, shi) and one sub-message per destination block. */
  uintptr_t slo, shi;
  int nssubs;
  struct sub ssubs[MAX_SUBS];
  /* MCOLL_TNBC_TRACE/ORDER: the call site; traced (the data is in, the pages stay
   * protected to record first touches), touched and completed blocks in order. */
  int nblocks;
  int site_set, tracing;
  struct mcoll_tnbc_site site;
  _Atomic int ntouched, ndone;
  int touched[MAX_SUBS], done_order[MAX_SUBS];
  /* MCOLL_VERBOSE: the timeline (ns, 0: not reached), and the caller thread's CPU
   * time at the return (its time off the CPU until the settle: preempted). */
  _Atomic long long at[MCOLL_TNBC_MARKS];
  long long cpu_at_return;
};

static struct mcoll_tnbc_call calls[MAX_CALLS];
/* For the MCOLL_VERBOSE report: calls, those whose buffer was protected, faults
 * that waited for a sub-message, interposed calls that waited (host: below). */
static atomic_ulong n_calls, n_protected, n_faults, n_waits;
/* Sub-messages of the protected calls (each made readable on its own). */
static atomic_ulong n_subs;
/* Interposed calls from inside the host MPI that met a pending call's pages and did
 * not wait. */
static atomic_ulong n_host_passes;
/* Early-returning alltoall(v) calls timed (MCOLL_VERBOSE), and their ns before the
 * call returned: in the edge exchange, and in the rest. */
static atomic_ulong n_timed;
static atomic_llong exchange_ns, post_ns;
/* Timelines of settled calls: sums of each mark's ns after the entry, calls that
 * reached it; the callers' ns off the CPU between return and settle; fault waits. */
static atomic_llong mark_ns[MCOLL_TNBC_MARKS], offcpu_ns, fault_wait_ns;
static atomic_ulong mark_n[MCOLL_TNBC_MARKS], n_timelines;
static int was_on;
/* Its address names the calling thread. */
static MCOLL_TLS char this_thread;
static uintptr_t page_size = 4096;
static void bufs_free(void);
static int mem_fd = -1; /* /proc/self/mem, for writing into protected pages */

static long futex(_Atomic uint32_t *word, int op, uint32_t value) {
  return syscall(SYS_futex, (uint32_t *)word, op, value, NULL, NULL, 0);
}

static uintptr_t page_down(uintptr_t a) { return a & ~(page_size - 1); }
static uintptr_t page_up(uintptr_t a) { return (a + page_size - 1) & ~(page_size - 1); }

/* ---- waiting (handler, interposed calls) ----------------------------------------- */
/* The first of subs[0..n) (sorted) whose end is past a. */
static int first_after(const struct sub *subs, int n, uintptr_t a) {
  int lo = 0, hi = n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (subs[mid].hi <= a) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static int first_sub_after(const struct mcoll_tnbc_call *call, uintptr_t a) {
  return first_after(call->subs, call->nsubs, a);
}

static void wait_done(struct sub *subs, int n, uintptr_t lo, uintptr_t hi) {
  for (int i = first_after(subs, n, lo); i < n && subs[i].lo < hi; i++) {
    if (atomic_load_explicit(&subs[i].done, memory_order_acquire)) continue;
    /* (the progress thread polls without napping while anyone sleeps here) */
    atomic_fetch_add_explicit(&mcoll__progress_urgent, 1, memory_order_acq_rel);
    while (!atomic_load_explicit(&subs[i].done, memory_order_acquire))
      futex(&subs[i].done, FUTEX_WAIT_PRIVATE, 0);
    atomic_fetch_sub_explicit(&mcoll__progress_urgent, 1, memory_order_acq_rel);
  }
}

static void app_protects(struct mcoll_tnbc_call *call, uintptr_t lo, uintptr_t hi);

/* Waits for the sub-messages of posted calls over [lo, hi) that `access` cannot use
 * yet (a read-only send page can be read); 1 if any overlapped. A caller inside the
 * host MPI (libc/interpose.h) does not wait. */
static int wait_subs(uintptr_t lo, uintptr_t hi, enum mcoll_libc_access access,
                     const void *caller) {
  int found = 0, host = -1; /* (classified at the first overlap) */
  for (int c = 0; c < MAX_CALLS; c++) {
    struct mcoll_tnbc_call *call = &calls[c];
    if (atomic_load_explicit(&call->state, memory_order_acquire) != CALL_POSTED) continue;
    int overlaps = (hi > call->plo && lo < call->phi) ||
                   (access != MCOLL_LIBC_READS && hi > call->slo && lo < call->shi);
    if (overlaps && host < 0) host = mcoll__libc_host_caller(caller);
    if (overlaps && host) {
      atomic_fetch_add_explicit(&n_host_passes, 1, memory_order_relaxed);
      continue;
    }
    if (hi > call->plo && lo < call->phi) {
      wait_done(call->subs, call->nsubs, lo, hi);
      if (call->tracing) { /* (the data is in, only protected: a system call may use it) */
        uintptr_t rlo = page_down(lo > call->plo ? lo : call->plo);
        uintptr_t rhi = page_up(hi < call->phi ? hi : call->phi);
        /* free, munmap, mprotect: no page of the call is touched again (the pages may
         * be reused, or protected by the application) */
        if (access >= MCOLL_LIBC_RELEASES) rlo = call->plo, rhi = call->phi;
        mcoll__libc_mprotect((void *)rlo, rhi - rlo, PROT_READ | PROT_WRITE);
        if (rlo <= call->plo && rhi >= call->phi) call->phi = call->plo;
      }
    }
    if (access != MCOLL_LIBC_READS && hi > call->slo && lo < call->shi)
      wait_done(call->ssubs, call->nssubs, lo, hi);
    if (overlaps && access == MCOLL_LIBC_PROTECTS) app_protects(call, lo, hi);
    found |= overlaps;
  }
  return found;
}

/* From the application's thread (mprotect): [lo, hi) of call is the application's to
 * protect from now on. Read by the handler without locks: the range is written
 * before it is counted. */
static void app_protects(struct mcoll_tnbc_call *call, uintptr_t lo, uintptr_t hi) {
  int n = atomic_load_explicit(&call->napp, memory_order_relaxed);
  if (n == APP_RANGES) {
    if (lo < call->app[n - 1].lo) call->app[n - 1].lo = lo;
    if (hi > call->app[n - 1].hi) call->app[n - 1].hi = hi;
    return;
  }
  call->app[n].lo = lo;
  call->app[n].hi = hi;
  atomic_store_explicit(&call->napp, n + 1, memory_order_release);
}

/* Whether a fault at a belongs to the application's own protection of a pending
 * call's pages. */
static int app_protected(uintptr_t a) {
  for (int c = 0; c < MAX_CALLS; c++) {
    struct mcoll_tnbc_call *call = &calls[c];
    if (atomic_load_explicit(&call->state, memory_order_acquire) != CALL_POSTED) continue;
    int n = atomic_load_explicit(&call->napp, memory_order_acquire);
    for (int i = 0; i < n; i++)
      if (a >= call->app[i].lo && a < call->app[i].hi) return 1;
  }
  return 0;
}

int mcoll__tnbc_wait_range(uintptr_t lo, size_t len, enum mcoll_libc_access access,
                           const void *caller) {
  /* A task (or the progress thread running one) must not wait for itself. */
  if (!atomic_load_explicit(&mcoll__tnbc_unsettled, memory_order_acquire) || mcoll__fiber_self())
    return 0;
  int waited = wait_subs(lo, len > UINTPTR_MAX - lo ? UINTPTR_MAX : lo + len, access, caller);
  if (waited) atomic_fetch_add_explicit(&n_waits, 1, memory_order_relaxed);
  return waited;
}

void mcoll__tnbc_wait_all(void) { mcoll__tnbc_wait_range(0, SIZE_MAX, MCOLL_LIBC_WRITES, NULL); }

/* ---- trace (MCOLL_TNBC_TRACE) ------------------------------------------------------ */
/* Sub-message i of a traced call is touched: recorded once (lock-free: the handler
 * of any thread), and its pages that it shares with no other sub-message readable
 * (a shared page stays protected until it is touched itself). */
static void trace_touch(struct mcoll_tnbc_call *call, int i) {
  struct sub *s = &call->subs[i];
  if (atomic_exchange_explicit(&s->touched, 1, memory_order_acq_rel)) return;
  int k = atomic_fetch_add_explicit(&call->ntouched, 1, memory_order_relaxed);
  if (k < MAX_SUBS) call->touched[k] = s->index;
  uintptr_t lo = page_up(s->lo), hi = page_down(s->hi);
  if (lo < hi) mcoll__libc_mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE);
}

/* A fault at a in a traced call's pages: 1 once recorded and readable. */
static int trace_fault(uintptr_t a) {
  for (int c = 0; c < MAX_CALLS; c++) {
    struct mcoll_tnbc_call *call = &calls[c];
    if (atomic_load_explicit(&call->state, memory_order_acquire) != CALL_POSTED ||
        !call->tracing || a < call->plo || a >= call->phi)
      continue;
    int i = first_sub_after(call, a);
    if (i < call->nsubs && call->subs[i].lo <= a) trace_touch(call, i);
    mcoll__libc_mprotect((void *)page_down(a), page_size, PROT_READ | PROT_WRITE);
    return 1;
  }
  return 0;
}

/* Protects a traced call's buffer, whose data is in: 1 if done. */
static int trace_protect(struct mcoll_tnbc_call *call, uintptr_t plo, uintptr_t phi) {
  for (int i = 0; i < call->nsubs; i++) {
    atomic_store_explicit(&call->subs[i].done, 1, memory_order_relaxed);
    atomic_store_explicit(&call->subs[i].touched, 0, memory_order_relaxed);
  }
  if (mcoll__libc_mprotect((void *)plo, phi - plo, PROT_NONE) != 0) return 0;
  call->plo = plo;
  call->phi = phi;
  call->tracing = 1;
  return 1;
}

/* The traced call settles: readable again, its orders into the trace. */
static void trace_end(struct mcoll_tnbc_call *call) {
  mcoll__libc_mprotect((void *)call->plo, call->phi - call->plo, PROT_READ | PROT_WRITE);
  call->tracing = 0;
  int nt = atomic_load(&call->ntouched), nd = atomic_load(&call->ndone);
  mcoll__tnbc_trace_add(&call->site, call->touched, nt < MAX_SUBS ? nt : MAX_SUBS, call->done_order,
                        nd < MAX_SUBS ? nd : MAX_SUBS);
  call->plo = call->phi = 0;
}

/* SIGSEGV: a protected page waits for its sub-messages, then is readable (the writer
 * unprotects it too; doing it here as well spares a second fault when the writer is
 * still between pages). Anything else goes to the handler before ours. */
static void on_segv(int sig, siginfo_t *si, void *uc) {
  int saved = errno;
  uintptr_t a = (uintptr_t)si->si_addr, page = page_down(a);
  int mine = !mcoll__fiber_self() && !app_protected(a);
  if (mine && trace_fault(a)) {
    atomic_fetch_add_explicit(&n_faults, 1, memory_order_relaxed);
    errno = saved;
    return;
  }
  long long fault_at = mine ? mcoll__tnbc_verbose_clock() : 0;
  if (mine && wait_subs(page, page + page_size, MCOLL_LIBC_WRITES, NULL)) {
    atomic_fetch_add_explicit(&n_faults, 1, memory_order_relaxed);
    if (fault_at)
      atomic_fetch_add_explicit(&fault_wait_ns, mcoll__tnbc_verbose_clock() - fault_at,
                                memory_order_relaxed);
    mcoll__libc_mprotect((void *)page, page_size, PROT_READ | PROT_WRITE);
    errno = saved;
    return;
  }
  errno = saved;
  const struct sigaction *app = &mcoll__tnbc_app_segv;
  if ((app->sa_flags & SA_SIGINFO) && app->sa_sigaction) {
    app->sa_sigaction(sig, si, uc);
  } else if (!(app->sa_flags & SA_SIGINFO) && app->sa_handler != SIG_DFL &&
             app->sa_handler != SIG_IGN) {
    app->sa_handler(sig);
  } else {
    /* As without mcoll: the default action, when the access faults again. */
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    mcoll__tnbc_real_sigaction(SIGSEGV, &dfl, NULL);
  }
}

/* Each thread that returns early gets its own signal stack: a fault on a nearly full
 * stack must still reach the handler. */
static MCOLL_TLS int altstack_done;
static void ensure_altstack(void) {
  if (altstack_done) return;
  altstack_done = 1;
  stack_t old;
  if (sigaltstack(NULL, &old) == 0 && !(old.ss_flags & SS_DISABLE)) return;
  size_t size = 64 * 1024;
  void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return;
  stack_t ss = {.ss_sp = mem, .ss_size = size, .ss_flags = 0};
  sigaltstack(&ss, NULL);
}

/* ---- start and stop ---------------------------------------------------------------- */
/* Set when T-NBC stood down for cores shared by more ranks than they are. */
static int shared_ranks, shared_cores;
static char shared_why[160];

static void before_fork(void) { mcoll__tnbc_wait_all(); }

void mcoll__tnbc_start(int rank, const struct mcoll_tnbc_collectives *colls) {
  mcoll__tnbc_colls = *colls;
  mcoll__config_load();
  if (!mcoll__cfg.TNBC || mcoll__cfg.DISABLE) return;
  mcoll__tnbc_trace_start(rank);
  const char *why = NULL;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  why = "a sanitizer build (its runtime interposes free, read, ... before mcoll)";
#else
  if (!mcoll__progress_thread_running())
    why = "no progress thread (MCOLL_PROGRESS_THREAD=0, or the host MPI did not grant "
          "MPI_THREAD_MULTIPLE)";
  else if ((mem_fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC)) < 0)
    why = "/proc/self/mem cannot be opened for writing";
#endif
  /* Every rank finds the same answer in the world's places (the init phase is
   * collective, so the job takes T-NBC everywhere or nowhere). */
  if (!why && !mcoll__cfg.TNBC_CORES_SHARED &&
      mcoll__topo_world_any_cores_shared(&shared_ranks, &shared_cores)) {
    snprintf(shared_why, sizeof shared_why,
             "%d ranks run on a machine of %d cores (MCOLL_TNBC_CORES_SHARED=1 runs it anyway)",
             shared_ranks, shared_cores);
    why = shared_why;
  }
  if (!why) {
    page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART};
    sigemptyset(&sa.sa_mask);
    if (mcoll__tnbc_real_sigaction(SIGSEGV, &sa, &mcoll__tnbc_app_segv) != 0)
      why = "the SIGSEGV handler could not be installed";
  }
  if (why) {
    if (mem_fd >= 0) close(mem_fd);
    mem_fd = -1;
    if (mcoll__cfg.VERBOSE && rank == 0) fprintf(stderr, "mcoll: MCOLL_TNBC=1 but T-NBC is off: %s\n", why);
    return;
  }
  static int atfork_done;
  if (!atfork_done) pthread_atfork(before_fork, NULL, NULL);
  atfork_done = 1;
  mcoll__libc_guard_install(&(struct mcoll_libc_guard){mcoll__tnbc_wait_range, mcoll__tnbc_forget});
  mcoll__tnbc_handler_installed = 1;
  mcoll__tnbc_active = 1;
  was_on = 1;
  if (mcoll__cfg.VERBOSE && rank == 0)
    fprintf(stderr, "mcoll: T-NBC on from %ld bytes per block\n", mcoll__cfg.TNBC_MIN);
}

void mcoll__tnbc_stop(void) {
  if (!mcoll__tnbc_active) return;
  mcoll__tnbc_settle_all();
  mcoll__tnbc_trace_stop();
  mcoll__tnbc_active = 0;
  /* The application's handler again (it may have set one since: kept in app_segv). */
  mcoll__tnbc_handler_installed = 0;
  mcoll__tnbc_real_sigaction(SIGSEGV, &mcoll__tnbc_app_segv, NULL);
  bufs_free();
  close(mem_fd);
  mem_fd = -1;
}

/* ---- where buffers may be protected ------------------------------------------------ */
static MCOLL_TLS uintptr_t stack_lo, stack_hi;

static int on_my_stack(uintptr_t lo, uintptr_t hi) {
  if (!stack_hi) {
    pthread_attr_t attr;
    void *addr;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
        stack_lo = (uintptr_t)addr;
        stack_hi = stack_lo + size;
      }
      pthread_attr_destroy(&attr);
    }
    if (!stack_hi) stack_hi = 1; /* unknown: checked by the mappings below */
  }
  return lo < stack_hi && hi > stack_lo;
}

/* Ranges found private and writable, until freed or unmapped (libc/interpose.c forgets
 * them): reading /proc/self/maps costs more than a small call, and buffers are
 * reused call after call. */
enum { KNOWN = 8 };
static struct { uintptr_t lo, hi; } known[KNOWN];
static int known_next;
static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;

void mcoll__tnbc_forget(uintptr_t lo, uintptr_t hi) {
  pthread_mutex_lock(&known_lock);
  for (int i = 0; i < KNOWN; i++)
    if (known[i].lo < hi && known[i].hi > lo) known[i].lo = known[i].hi = 0;
  pthread_mutex_unlock(&known_lock);
}

static int is_known(uintptr_t lo, uintptr_t hi) {
  pthread_mutex_lock(&known_lock);
  int found = 0;
  for (int i = 0; i < KNOWN && !found; i++) found = known[i].lo <= lo && hi <= known[i].hi && lo < hi;
  pthread_mutex_unlock(&known_lock);
  return found;
}

static void remember(uintptr_t lo, uintptr_t hi) {
  pthread_mutex_lock(&known_lock);
  known[known_next].lo = lo;
  known[known_next].hi = hi;
  known_next = (known_next + 1) % KNOWN;
  atomic_store(&mcoll__tnbc_known_any, 1);
  pthread_mutex_unlock(&known_lock);
}

/* Whether [lo, hi) lies in consecutive private read-write mappings that are no
 * stack (shared ones: other processes would see the data late). */
static int private_mapping(uintptr_t lo, uintptr_t hi) {
  FILE *maps = fopen("/proc/self/maps", "re");
  if (!maps) return 0;
  char line[512];
  uintptr_t covered = lo;
  int ok = 1;
  while (ok && covered < hi && fgets(line, sizeof line, maps)) {
    unsigned long a, b;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s", &a, &b, perms) != 3 || b <= covered) continue;
    if (a > covered) break; /* a hole */
    ok = !strcmp(perms, "rw-p") && !strstr(line, "[stack");
    covered = b;
  }
  fclose(maps);
  return ok && covered >= hi;
}

int mcoll__tnbc_protectable(void *buf, size_t bytes) {
  uintptr_t lo = (uintptr_t)buf, hi = lo + bytes, plo = page_up(lo), phi = page_down(hi);
  if (!mcoll__tnbc_active || plo >= phi || on_my_stack(lo, hi)) return 0;
  if (is_known(lo, hi)) return 1;
  if (!private_mapping(page_down(lo), page_up(hi))) return 0;
  remember(lo, hi);
  return 1;
}

/* ---- buffers ------------------------------------------------------------------------- */
/* Bounce buffers and send copies come back for the next call: a fresh one costs a
 * page fault per page (and its munmap), about as much as the copy itself. */
enum { SPARE_BUFS = 4 };
static struct { void *mem; size_t bytes; } spare[SPARE_BUFS];
static pthread_mutex_t spare_lock = PTHREAD_MUTEX_INITIALIZER;

static void *buf_get(size_t bytes) {
  void *mem = NULL;
  pthread_mutex_lock(&spare_lock);
  for (int i = 0; i < SPARE_BUFS && !mem; i++)
    if (spare[i].mem && spare[i].bytes >= bytes && spare[i].bytes / 2 <= bytes) {
      mem = spare[i].mem;
      spare[i].mem = NULL;
    }
  pthread_mutex_unlock(&spare_lock);
  if (!mem) mem = malloc(bytes ? bytes : 1);
  if (!mem) {
    fprintf(stderr, "mcoll: T-NBC: out of memory for a %zu-byte buffer\n", bytes);
    abort();
  }
  return mem;
}

static void buf_put(void *mem, size_t bytes) {
  pthread_mutex_lock(&spare_lock);
  for (int i = 0; i < SPARE_BUFS && mem; i++)
    if (!spare[i].mem) {
      spare[i].mem = mem;
      spare[i].bytes = bytes;
      mem = NULL;
    }
  pthread_mutex_unlock(&spare_lock);
  free(mem);
}

static void bufs_free(void) {
  for (int i = 0; i < SPARE_BUFS; i++) {
    free(spare[i].mem);
    spare[i].mem = NULL;
  }
}

/* ---- calls --------------------------------------------------------------------------- */
static struct mcoll_tnbc_call *call_new(void *recvbuf, size_t bytes, void *target);

struct mcoll_tnbc_call *mcoll__tnbc_begin(void *recvbuf, size_t bytes, size_t sub, void *target) {
  struct mcoll_tnbc_call *call = call_new(recvbuf, bytes, target);
  if (call->own_target) {
    if (sub < page_size) sub = page_size;
    size_t n = (bytes + sub - 1) / sub;
    if (n > MAX_SUBS) sub *= (n + MAX_SUBS - 1) / MAX_SUBS;
    call->nblocks = (int)((bytes + sub - 1) / sub);
    /* Sub-messages clipped to the protected pages, in address order. */
    for (uintptr_t lo = call->user; lo < call->user + bytes; lo += sub) {
      uintptr_t slo = lo < call->plo ? call->plo : lo;
      uintptr_t shi = lo + sub > call->user + bytes ? call->user + bytes : lo + sub;
      if (shi > call->phi) shi = call->phi;
      if (slo >= shi) continue;
      struct sub *s = &call->subs[call->nsubs++];
      s->lo = slo;
      s->hi = shi;
      s->index = (int)((lo - call->user) / sub);
      atomic_store_explicit(&s->done, 0, memory_order_relaxed);
    }
  }
  return call;
}

static size_t overlap(uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d) {
  uintptr_t lo = a > c ? a : c, hi = b < d ? b : d;
  return lo < hi ? hi - lo : 0;
}

struct mcoll_tnbc_call *mcoll__tnbc_begin_ranges(void *recvbuf, size_t bytes, int n,
                                                 const size_t *off, const size_t *len,
                                                 void *target) {
  struct mcoll_tnbc_call *call = call_new(recvbuf, bytes, target);
  call->nblocks = n;
  if (!call->own_target) return call;
  int *order = malloc(sizeof *order * (size_t)(n ? n : 1));
  if (!order) abort();
  int m = 0;
  for (int i = 0; i < n; i++)
    if (len[i]) order[m++] = i;
  for (int i = 1; i < m; i++) /* (insertion sort: n is the communicator's size) */
    for (int j = i; j > 0 && off[order[j - 1]] > off[order[j]]; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  size_t edge = 0;
  uintptr_t end = call->user + bytes;
  for (int k = 0; k < m && call->nsubs < MAX_SUBS; k++) {
    uintptr_t lo = call->user + off[order[k]], hi = lo + len[order[k]];
    edge += overlap(lo, hi, call->user, call->plo) + overlap(lo, hi, call->phi, end);
    uintptr_t slo = lo < call->plo ? call->plo : lo, shi = hi > call->phi ? call->phi : hi;
    if (call->nsubs && slo < call->subs[call->nsubs - 1].hi) slo = call->subs[call->nsubs - 1].hi;
    if (slo >= shi) continue;
    struct sub *s = &call->subs[call->nsubs++];
    s->lo = slo;
    s->hi = shi;
    s->index = order[k];
    atomic_store_explicit(&s->done, 0, memory_order_relaxed);
  }
  free(order);
  atomic_store(&call->edge_left, edge);
  return call;
}

static struct mcoll_tnbc_call *call_new(void *recvbuf, size_t bytes, void *target) {
  mcoll__tnbc_settle_pending();
  /* Pages of another thread's pending call (handed over by the application, which
   * synchronised with that thread by other means) get their data first: this call's
   * protection and that call's unprotection must not cross. */
  if (recvbuf && atomic_load(&mcoll__tnbc_unsettled))
    mcoll__tnbc_wait_range((uintptr_t)recvbuf, bytes, MCOLL_LIBC_WRITES, NULL);
  struct mcoll_tnbc_call *call = NULL;
  for (int i = 0; i < MAX_CALLS && !call; i++) {
    int expected = CALL_FREE;
    if (atomic_compare_exchange_strong(&calls[i].state, &expected, CALL_BUILDING)) call = &calls[i];
  }
  if (!call) {
    /* (only with several threads making calls at once) */
    fprintf(stderr, "mcoll: T-NBC: more than %d calls in flight\n", MAX_CALLS);
    abort();
  }
  call->owner = &this_thread;
  atomic_store(&call->ready, 0);
  atomic_store(&call->napp, 0);
  call->user = (uintptr_t)recvbuf;
  call->bytes = bytes;
  call->nowned = 0;
  call->req = MPI_REQUEST_NULL;
  call->own_target = target == NULL;
  call->target = target ? target : buf_get(bytes);
  call->plo = call->phi = 0;
  call->nsubs = 0;
  call->slo = call->shi = 0;
  call->nssubs = 0;
  atomic_store(&call->edge_left, 0);
  call->nblocks = 1;
  call->tracing = 0;
  atomic_store(&call->ntouched, 0);
  atomic_store(&call->ndone, 0);
  for (int k = 0; k < MCOLL_TNBC_MARKS; k++) atomic_store_explicit(&call->at[k], 0, memory_order_relaxed);
  call->site_set = 0;
  if (mcoll__tnbc_tracing || mcoll__tnbc_ordering) {
    mcoll__tnbc_site_key(mcoll__tnbc_caller.ret, call->site.key, sizeof call->site.key);
    snprintf(call->site.coll, sizeof call->site.coll, "%s",
             mcoll__tnbc_caller.coll ? mcoll__tnbc_caller.coll : "?");
  }
  mcoll__tnbc_caller.ret = NULL;
  mcoll__tnbc_caller.coll = NULL;
  if (call->own_target) {
    call->plo = page_up(call->user);
    call->phi = page_down(call->user + bytes);
    ensure_altstack();
  }
  return call;
}

const char *mcoll__tnbc_send_in_place(struct mcoll_tnbc_call *call, const void *sendbuf,
                                      size_t bytes, int n, const size_t *off, const size_t *len) {
  uintptr_t lo = (uintptr_t)sendbuf, slo = page_up(lo), shi = page_down(lo + bytes);
  /* Whole pages only (the partial ones hold other data, which the progress thread
   * may write: the caller covers their bytes), apart from the receive buffer's pages
   * (peers and the host read these), on no stack, in a private mapping. */
  if (!bytes || n > MAX_SUBS || slo >= shi ||
      (call->own_target && slo < page_up(call->user + call->bytes) && shi > page_down(call->user)) ||
      !mcoll__tnbc_protectable((void *)sendbuf, bytes))
    return NULL;
  if (atomic_load(&mcoll__tnbc_unsettled)) /* (as in call_new) */
    mcoll__tnbc_wait_range(lo, bytes, MCOLL_LIBC_WRITES, NULL);
  int *order = malloc(sizeof *order * (size_t)n);
  if (!order) return NULL;
  int m = 0;
  for (int i = 0; i < n; i++)
    if (len[i]) order[m++] = i;
  for (int i = 1; i < m; i++)
    for (int j = i; j > 0 && off[order[j - 1]] > off[order[j]]; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  /* sub-messages over the whole pages, each block extended to its page boundaries
   * and merged with a block it overlaps */
  call->nssubs = 0;
  for (int k = 0; k < m; k++) {
    uintptr_t blo = page_down(lo + off[order[k]]), bhi = page_up(lo + off[order[k]] + len[order[k]]);
    if (blo < slo) blo = slo;
    if (bhi > shi) bhi = shi;
    if (blo >= bhi) continue;
    struct sub *last = call->nssubs ? &call->ssubs[call->nssubs - 1] : NULL;
    if (last && blo < last->hi) {
      if (bhi > last->hi) last->hi = bhi;
      continue;
    }
    struct sub *sb = &call->ssubs[call->nssubs++];
    sb->lo = blo;
    sb->hi = bhi;
    atomic_store_explicit(&sb->done, 0, memory_order_relaxed);
  }
  free(order);
  call->slo = slo;
  call->shi = shi;
  return sendbuf;
}

/* The sends of [off, off+len) of the send buffer are complete: writable again. */
void mcoll__tnbc_sent(struct mcoll_tnbc_call *call, size_t off, size_t len) {
  if (call->slo >= call->shi) return;
  uintptr_t lo = call->slo + off, hi = lo + len;
  for (int i = first_after(call->ssubs, call->nssubs, lo); i < call->nssubs && call->ssubs[i].lo < hi; i++) {
    struct sub *sb = &call->ssubs[i];
    if (atomic_load_explicit(&sb->done, memory_order_relaxed)) continue;
    mcoll__libc_mprotect((void *)sb->lo, sb->hi - sb->lo, PROT_READ | PROT_WRITE);
    atomic_store_explicit(&sb->done, 1, memory_order_release);
    futex(&sb->done, FUTEX_WAKE_PRIVATE, INT_MAX);
  }
}

int mcoll__tnbc_split_subs(struct mcoll_tnbc_call *call, const size_t *off, size_t piece) {
  /* (a trace records one first touch per block: its calls keep a sub-message each) */
  if (!call->own_target || !piece || mcoll__tnbc_tracing || call->nsubs == 0) return 0;
  int n = 0;
  for (int i = 0; i < call->nsubs; i++) {
    uintptr_t start = call->user + off[call->subs[i].index];
    n += (int)((call->subs[i].hi - 1 - start) / piece - (call->subs[i].lo - start) / piece) + 1;
  }
  if (n > MAX_SUBS) return 0;
  /* In place from the end: sub i's pieces land at or after i. */
  int at = n;
  for (int i = call->nsubs - 1; i >= 0; i--) {
    uintptr_t lo = call->subs[i].lo, hi = call->subs[i].hi, start = call->user + off[call->subs[i].index];
    int index = call->subs[i].index;
    size_t first = (lo - start) / piece, last = (hi - 1 - start) / piece;
    for (size_t c = last + 1; c-- > first;) {
      uintptr_t plo = start + c * piece, phi = plo + piece;
      struct sub *t = &call->subs[--at];
      t->lo = plo > lo ? plo : lo;
      t->hi = phi < hi ? phi : hi;
      t->index = index;
      atomic_store_explicit(&t->done, 0, memory_order_relaxed);
      atomic_store_explicit(&t->touched, 0, memory_order_relaxed);
    }
  }
  call->nsubs = n;
  return 1;
}

void *mcoll__tnbc_target(struct mcoll_tnbc_call *call) { return call->target; }

void mcoll__tnbc_edges_done(struct mcoll_tnbc_call *call) { atomic_store(&call->edge_left, 0); }

void mcoll__tnbc_own(struct mcoll_tnbc_call *call, void *mem, size_t bytes) {
  if (call->nowned < (int)(sizeof call->owned / sizeof call->owned[0])) {
    call->owned[call->nowned] = mem;
    call->owned_bytes[call->nowned++] = bytes;
  }
}

/* The rest of the call's site, once its communicator is known. */
static void site_fill(struct mcoll_tnbc_call *call, MPI_Comm comm) {
  if (call->site_set) return;
  call->site_set = 1;
  PMPI_Comm_size(comm, &call->site.size);
  PMPI_Comm_rank(comm, &call->site.rank);
  call->site.count = call->bytes;
  call->site.nblocks = call->nblocks;
}

void mcoll__tnbc_block_done(struct mcoll_tnbc_call *call, int index) {
  int k = atomic_fetch_add_explicit(&call->ndone, 1, memory_order_relaxed);
  if (k < MAX_SUBS) call->done_order[k] = index;
}

int mcoll__tnbc_call_order(struct mcoll_tnbc_call *call, MPI_Comm comm, int *order, int n) {
  if (!mcoll__tnbc_ordering) return 0;
  site_fill(call, comm);
  return mcoll__tnbc_order_find(&call->site, order, n);
}

/* Writes src into the user's (protected) memory at dst. */
static void write_protected(uintptr_t dst, const char *src, size_t len) {
  while (len) {
    ssize_t n = syscall(SYS_pwrite64, mem_fd, src, len, (off_t)dst);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      /* Unmapped behind mcoll's back (a munmap that did not come through
       * libc/interpose.c): nobody can read it any more. */
      if (n < 0 && (errno == EIO || errno == EFAULT)) return;
      fprintf(stderr, "mcoll: T-NBC: writing into the protected buffer failed (%s)\n",
              strerror(errno));
      abort();
    }
    dst += (size_t)n;
    src += n;
    len -= (size_t)n;
  }
}

/* Bytes [off, off+len) of the receive buffer are final in the target: the
 * sub-messages wholly inside go into the user's pages, which are unprotected where no
 * sub-message still missing shares them, then their readers are woken. From the task
 * (an engine's hook) or at its end. */
void mcoll__tnbc_publish(struct mcoll_tnbc_call *call, size_t off, size_t len) {
  if (call->plo >= call->phi) return;
  uintptr_t lo = call->user + off, hi = lo + len;
  if (atomic_load_explicit(&call->edge_left, memory_order_relaxed)) {
    /* Bytes on the partial first and last pages: straight in (not protected; the
     * caller waits for them before it returns). */
    uintptr_t edges[2][2] = {{call->user, call->plo}, {call->phi, call->user + call->bytes}};
    for (int e = 0; e < 2; e++) {
      uintptr_t elo = lo > edges[e][0] ? lo : edges[e][0], ehi = hi < edges[e][1] ? hi : edges[e][1];
      if (elo >= ehi) continue;
      memcpy((void *)elo, call->target + (elo - call->user), ehi - elo);
      atomic_fetch_sub_explicit(&call->edge_left, ehi - elo, memory_order_release);
    }
  }
  for (int i = first_sub_after(call, lo); i < call->nsubs && call->subs[i].lo < hi; i++) {
    struct sub *s = &call->subs[i];
    if (s->lo < lo || s->hi > hi || atomic_load_explicit(&s->done, memory_order_relaxed)) continue;
    write_protected(s->lo, call->target + (s->lo - call->user), s->hi - s->lo);
    /* its pages, less a first or last one shared with a sub-message not yet done */
    uintptr_t ulo = page_down(s->lo), uhi = page_up(s->hi);
    if (ulo < s->lo && i > 0 && !atomic_load_explicit(&call->subs[i - 1].done, memory_order_acquire))
      ulo += page_size;
    if (uhi > s->hi && i + 1 < call->nsubs &&
        !atomic_load_explicit(&call->subs[i + 1].done, memory_order_acquire))
      uhi -= page_size;
    if (ulo < uhi) mcoll__libc_mprotect((void *)ulo, uhi - ulo, PROT_READ | PROT_WRITE);
    atomic_store_explicit(&s->done, 1, memory_order_release);
    futex(&s->done, FUTEX_WAKE_PRIVATE, INT_MAX);
  }
}

static int call_task(const void *args) {
  struct mcoll_tnbc_call *call = *(struct mcoll_tnbc_call *const *)args;
  int err = call->fn(call->args);
  mcoll__tnbc_publish(call, 0, call->bytes); /* (what the engine did not publish itself) */
  mcoll__tnbc_sent(call, 0, call->shi - call->slo);
  mcoll__tnbc_mark(call, MCOLL_TNBC_AT_TASK_END);
  return err;
}

/* Waits for call's task and frees what it held; returns the task's error. */
static int settle_one(struct mcoll_tnbc_call *call) {
  int err = MPI_SUCCESS;
  if (call->tracing) trace_end(call);
  if (call->req != MPI_REQUEST_NULL) {
    MPI_Request handle = call->req;
    for (;;) {
      int done = 0;
      err = PMPI_Test(&call->req, &done, MPI_STATUS_IGNORE);
      if (err != MPI_SUCCESS) break;
      if (done) {
        err = mcoll__task_take_error(handle, NULL);
        break;
      }
      mcoll__progress();
      sched_yield();
    }
  }
  if (call->own_target && call->user && call->plo >= call->phi) memcpy((void *)call->user, call->target, call->bytes);
  if (call->own_target) buf_put(call->target, call->bytes);
  for (int i = 0; i < call->nowned; i++) buf_put(call->owned[i], call->owned_bytes[i]);
  call->nowned = 0;
  call->target = NULL;
  return err;
}

static long long thread_cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* A settled call's timeline into the report's sums. */
static void timeline_add(struct mcoll_tnbc_call *call) {
  long long enter = atomic_load(&call->at[MCOLL_TNBC_AT_ENTER]);
  if (!enter) return;
  for (int k = 1; k < MCOLL_TNBC_MARKS; k++) {
    long long at = atomic_load(&call->at[k]);
    if (!at) continue;
    atomic_fetch_add_explicit(&mark_ns[k], at - enter, memory_order_relaxed);
    atomic_fetch_add_explicit(&mark_n[k], 1, memory_order_relaxed);
  }
  long long ret = atomic_load(&call->at[MCOLL_TNBC_AT_RETURN]);
  long long settle = atomic_load(&call->at[MCOLL_TNBC_AT_SETTLE]);
  if (ret && settle && call->cpu_at_return && call->owner == &this_thread) {
    long long off = (settle - ret) - (thread_cpu_ns() - call->cpu_at_return);
    atomic_fetch_add_explicit(&offcpu_ns, off > 0 ? off : 0, memory_order_relaxed);
  }
  atomic_fetch_add_explicit(&n_timelines, 1, memory_order_relaxed);
}

void mcoll__tnbc_mark(struct mcoll_tnbc_call *call, enum mcoll_tnbc_mark what) {
  if (!mcoll__cfg.VERBOSE || !call) return;
  long long expected = 0;
  atomic_compare_exchange_strong_explicit(&call->at[what], &expected, mcoll__tnbc_verbose_clock(),
                                          memory_order_relaxed, memory_order_relaxed);
}

/* Settles the ready calls of this thread, or of every thread (then also waits for
 * those another thread is settling). */
static void settle_calls(int every_thread) {
  if (mcoll__fiber_self()) return;
  for (int i = 0; i < MAX_CALLS; i++) {
    struct mcoll_tnbc_call *call = &calls[i];
    if (atomic_load(&call->state) != CALL_POSTED || !atomic_load(&call->ready) ||
        (!every_thread && call->owner != &this_thread))
      continue;
    int idle = 0;
    if (!atomic_compare_exchange_strong(&call->settling, &idle, 1)) {
      while (every_thread && atomic_load(&call->settling)) sched_yield();
      continue;
    }
    mcoll__tnbc_mark(call, MCOLL_TNBC_AT_SETTLE);
    settle_one(call);
    mcoll__tnbc_mark(call, MCOLL_TNBC_AT_SETTLED);
    timeline_add(call);
    atomic_store(&call->ready, 0);
    atomic_store(&call->settling, 0);
    atomic_store_explicit(&call->state, CALL_FREE, memory_order_release);
    atomic_fetch_sub(&mcoll__tnbc_unsettled, 1);
  }
}

void mcoll__tnbc_settle(void) { settle_calls(0); }

void mcoll__tnbc_settle_all(void) { settle_calls(1); }

int mcoll__tnbc_post(struct mcoll_tnbc_call *call, MPI_Comm comm, mcoll_task_fn fn,
                     const void *args, size_t args_bytes) {
  return mcoll__tnbc_post_how(call, comm, fn, args, args_bytes, 0);
}

int mcoll__tnbc_post_how(struct mcoll_tnbc_call *call, MPI_Comm comm, mcoll_task_fn fn,
                         const void *args, size_t args_bytes, int start_here) {
  call->fn = fn;
  memcpy(call->args, args, args_bytes);
  if (mcoll__tnbc_tracing) site_fill(call, comm);
  atomic_store_explicit(&call->state, CALL_POSTED, memory_order_release);
  atomic_fetch_add(&mcoll__tnbc_unsettled, 1);
  if (call->plo < call->phi &&
      mcoll__libc_mprotect((void *)call->plo, call->phi - call->plo, PROT_NONE) != 0)
    call->plo = call->phi = 0; /* (then received into the bounce buffer and copied) */
  if (call->slo < call->shi && mcoll__libc_mprotect((void *)call->slo, call->shi - call->slo, PROT_READ) != 0)
    call->slo = call->shi = 0; /* (it stays writable: the caller copied nothing, so wait) */
  mcoll__tnbc_mark(call, MCOLL_TNBC_AT_PROTECTED);
  int waits = call->user && call->plo >= call->phi;
  atomic_fetch_add_explicit(&n_calls, 1, memory_order_relaxed);
  if (!waits && call->user) {
    atomic_fetch_add_explicit(&n_protected, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&n_subs, (unsigned long)call->nsubs, memory_order_relaxed);
  }
  if (!waits && !start_here) mcoll__task_defer_next();
  /* The return before the progress thread's first pass (TNBC_RETURN_FIRST): held
   * from the hand-over to the return, unless the caller waits below. */
  int hold = !waits && mcoll__cfg.TNBC_RETURN_FIRST != 0;
  if (hold) atomic_fetch_add_explicit(&mcoll__progress_hold, 1, memory_order_acq_rel);
  int err = mcoll__task_start(comm, call_task, &call, sizeof call, NULL, &call->req);
  mcoll__tnbc_mark(call, MCOLL_TNBC_AT_STARTED);
  if (hold && (err != MPI_SUCCESS || atomic_load(&call->edge_left) ||
               (mcoll__tnbc_tracing && call->plo < call->phi))) {
    atomic_fetch_sub_explicit(&mcoll__progress_hold, 1, memory_order_acq_rel);
    hold = 0;
  }
  if (err != MPI_SUCCESS) {
    /* Nothing started: the buffer as it was. */
    if (call->plo < call->phi) mcoll__libc_mprotect((void *)call->plo, call->phi - call->plo, PROT_READ | PROT_WRITE);
    if (call->slo < call->shi) mcoll__libc_mprotect((void *)call->slo, call->shi - call->slo, PROT_READ | PROT_WRITE);
    call->plo = call->phi = 0;
    call->slo = call->shi = 0;
    call->nsubs = 0;
    if (call->own_target) buf_put(call->target, call->bytes);
    call->own_target = 0;
    waits = 0;
  }
  /* Partial first and last pages complete before the call returns. */
  while (!waits && err == MPI_SUCCESS && atomic_load_explicit(&call->edge_left, memory_order_acquire)) {
    mcoll__progress();
    sched_yield();
  }
  /* Traced: the call runs to its end (the task publishes as usual), then its pages
   * are protected again to record the first touches (trace_protect). */
  uintptr_t trace_lo = call->plo, trace_hi = call->phi;
  int traced = !waits && err == MPI_SUCCESS && mcoll__tnbc_tracing && trace_lo < trace_hi;
  if (waits || err != MPI_SUCCESS || traced) {
    int task_err = settle_one(call);
    if (err == MPI_SUCCESS) err = task_err;
    call->own_target = 0; /* (settle_one gave the bounce buffer back) */
    if (!traced || err != MPI_SUCCESS || !trace_protect(call, trace_lo, trace_hi)) {
      atomic_store_explicit(&call->state, CALL_FREE, memory_order_release);
      atomic_fetch_sub(&mcoll__tnbc_unsettled, 1);
      return err;
    }
  }
  atomic_store_explicit(&call->ready, 1, memory_order_release);
  if (hold) atomic_fetch_sub_explicit(&mcoll__progress_hold, 1, memory_order_acq_rel);
  return err;
}

int mcoll__tnbc_agree(const int *mine, int *all, int n, MPI_Comm comm) {
  struct mcoll_tnbc_caller caller = mcoll__tnbc_caller;
  int err = mcoll__tnbc_colls.allreduce(mine, all, n, MPI_INT, MPI_MIN, comm);
  mcoll__tnbc_caller = caller;
  return err;
}

int mcoll__tnbc_contiguous(MPI_Datatype type) {
  MPI_Aint lb, extent, true_lb, true_extent;
  int size;
  if (type == MPI_DATATYPE_NULL || PMPI_Type_size(type, &size) != MPI_SUCCESS ||
      PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS ||
      PMPI_Type_get_true_extent(type, &true_lb, &true_extent) != MPI_SUCCESS)
    return 0;
  return size > 0 && lb == 0 && true_lb == 0 && extent == size && true_extent == size;
}

void *mcoll__tnbc_recv_target(void *recvbuf, int count, MPI_Datatype type, size_t bytes,
                              struct mcoll_bytes *packed) {
  packed->packed = NULL;
  if (!mcoll__tnbc_contiguous(type)) {
    mcoll__bytes_acquire(recvbuf, count, type, 0, packed);
    return packed->ptr;
  }
  return mcoll__tnbc_protectable(recvbuf, bytes) ? NULL : recvbuf;
}

char *mcoll__tnbc_send_copy(const void *buf, int count, MPI_Datatype type, size_t bytes) {
  struct mcoll_bytes b;
  mcoll__bytes_acquire(buf, count, type, 1, &b);
  if (b.packed) return b.packed;
  char *copy = buf_get(bytes);
  memcpy(copy, buf, bytes);
  return copy;
}

void mcoll__tnbc_put_edges(void *recvbuf, size_t bytes, const void *head, const void *tail) {
  memcpy(recvbuf, head, MCOLL_TNBC_EDGE);
  memcpy((char *)recvbuf + bytes - MCOLL_TNBC_EDGE, tail, MCOLL_TNBC_EDGE);
}

long long mcoll__tnbc_verbose_clock(void) {
  if (!mcoll__cfg.VERBOSE) return 0;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

void mcoll__tnbc_note_return(struct mcoll_tnbc_call *call, long long start, long long exchanged,
                             long long end) {
  if (!start) return;
  if (call) {
    atomic_store(&call->at[MCOLL_TNBC_AT_ENTER], start);
    atomic_store(&call->at[MCOLL_TNBC_AT_EXCHANGED], exchanged);
    atomic_store(&call->at[MCOLL_TNBC_AT_RETURN], end);
    call->cpu_at_return = thread_cpu_ns();
  }
  atomic_fetch_add_explicit(&n_timed, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&exchange_ns, exchanged - start, memory_order_relaxed);
  atomic_fetch_add_explicit(&post_ns, end - exchanged, memory_order_relaxed);
}

void mcoll__tnbc_report(FILE *out) {
  if (!mcoll__cfg.TNBC) return;
  if (!was_on && shared_ranks)
    fprintf(out, "mcoll: tnbc stood down: %s\n", shared_why);
  fprintf(out, "mcoll: tnbc active=%d calls=%lu protected=%lu faults=%lu waits=%lu host=%lu\n",
          was_on, atomic_load(&n_calls), atomic_load(&n_protected),
          atomic_load(&n_faults), atomic_load(&n_waits), atomic_load(&n_host_passes));
  unsigned long prot = atomic_load(&n_protected);
  if (prot)
    fprintf(out, "mcoll: tnbc sub-messages per protected call=%.1f\n",
            (double)atomic_load(&n_subs) / (double)prot);
  unsigned long timed = atomic_load(&n_timed);
  if (timed)
    fprintf(out, "mcoll: tnbc alltoall early return: %lu calls, per call edge exchange=%.3f ms "
                 "protect+post=%.3f ms\n",
            timed, (double)atomic_load(&exchange_ns) / 1e6 / (double)timed,
            (double)atomic_load(&post_ns) / 1e6 / (double)timed);
  unsigned long lines = atomic_load(&n_timelines);
  if (!lines) return;
  static const char *const names[MCOLL_TNBC_MARKS] = {
      "enter", "exchanged", "begun", "protected", "started", "returned", "sends_posted", "first_in",
      "all_in", "sends_done", "task_end", "settle", "settled"};
  fprintf(out, "mcoll: tnbc timeline, ms after entry (mean of %lu calls):", lines);
  for (int k = 1; k < MCOLL_TNBC_MARKS; k++) {
    unsigned long n = atomic_load(&mark_n[k]);
    if (n) fprintf(out, " %s=%.3f", names[k], (double)atomic_load(&mark_ns[k]) / 1e6 / (double)n);
  }
  fprintf(out, "\nmcoll: tnbc caller off-cpu between return and settle %.3f ms/call, "
               "fault waits %.3f ms/call\n",
          (double)atomic_load(&offcpu_ns) / 1e6 / (double)lines,
          (double)atomic_load(&fault_wait_ns) / 1e6 / (double)lines);
}

int mcoll__tnbc_caller_chooses;

/* For the overlap benchmark (tools/bench, found with dlsym): T-NBC on or off between
 * calls of one job, once it could start; returns whether it is on now. */
MCOLL_EXPORT int mcoll_tnbc_enable(int on) {
  if (!was_on || mcoll__fiber_self()) return 0;
  mcoll__tnbc_settle_all();
  mcoll__tnbc_caller_chooses = 1;
  mcoll__tnbc_active = on != 0 && mem_fd >= 0;
  return mcoll__tnbc_active;
}
