#include "task/progress_thread.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "task/task.h"

static pthread_t thread;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static atomic_int running, stopping;
static int woken; /* under lock: a task was left pending since the thread last looked */

static void wake_thread(void) {
  pthread_mutex_lock(&lock);
  woken = 1;
  pthread_cond_signal(&wake);
  pthread_mutex_unlock(&lock);
}

/* Sleeps up to ns, or until a task is handed over or left pending (wake_thread). */
static void nap(long ns) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_nsec += ns;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&lock);
  while (!woken && !atomic_load(&stopping))
    if (pthread_cond_timedwait(&wake, &lock, &until) != 0) break;
  woken = 0;
  pthread_mutex_unlock(&lock);
}

/* Passes over pending tasks that yield before the thread starts sleeping between
 * passes (a yield returns at once when a core is free, and hands the core over when
 * not): peers that arrive within ~1000 passes (and YIELD_NS) cost no sleep. Then
 * the sleeps double from SLEEP_MIN_NS to SLEEP_MAX_NS while no task starts or
 * finishes: a transfer bound by the wire needs a poll now and then (the host's
 * socket buffers keep the link busy in between), not a core; one that needs a reply
 * waits at most SLEEP_MAX_NS longer for it. The sleeps are short, so the thread asks
 * for a timer slack of 1 µs (the default 50 µs would stretch each). */
enum { YIELD_PASSES = 1000 };
/* Naps while a caller is between its hand-over and its return (mcoll__progress_hold),
 * at most HOLD_MAX_NS in a row (a hand-over is microseconds; the bound keeps a stuck
 * counter from stopping progress). */
enum { HOLD_NAP_NS = 20 * 1000, HOLD_MAX_NS = 2 * 1000 * 1000 };
static const long YIELD_NS = 200 * 1000, SLEEP_MIN_NS = 10 * 1000, SLEEP_MAX_NS = 250 * 1000;

/* For the MCOLL_VERBOSE report: the thread's CPU time and the time it spent awake
 * with tasks pending (ns). */
static atomic_llong cpu_ns, awake_ns;

static long long now_ns(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Asks the scheduler for short slices (Linux 6.12+ EEVDF: a fair task's custom
 * slice, sched_attr.sched_runtime; no privilege needed, same share of the CPU). A
 * task with a shorter slice has an earlier deadline, so this thread's wake-ups
 * preempt a computing thread at once instead of waiting up to a tick (4 ms at
 * HZ=250) for the core: across hosts each of a transfer's protocol steps waits for
 * one of its polls. Older kernels ignore the field (or refuse: nothing changes). */
static void ask_short_slices(void) {
#ifdef SYS_sched_setattr
  struct {
    uint32_t size, sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
    uint32_t sched_util_min, sched_util_max;
  } attr = {.size = sizeof attr, .sched_policy = 0 /* SCHED_OTHER */, .sched_runtime = 100 * 1000};
  attr.sched_nice = getpriority(PRIO_PROCESS, 0);
  (void)syscall(SYS_sched_setattr, 0, &attr, 0);
#endif
}

static void *progress_main(void *arg) {
  (void)arg;
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  pthread_setname_np(pthread_self(), "mcoll-progress");
  ask_short_slices();
  unsigned idle_passes = 0, events = mcoll__task_events();
  long sleep_ns = SLEEP_MIN_NS, held_ns = 0;
  long long awake_since = now_ns(CLOCK_MONOTONIC), changed = awake_since;
  while (!atomic_load(&stopping)) {
    if (!mcoll__tasks_pending()) {
      long long now = now_ns(CLOCK_MONOTONIC);
      atomic_fetch_add(&awake_ns, now - awake_since);
      pthread_mutex_lock(&lock);
      while (!woken && !atomic_load(&stopping) && !mcoll__tasks_pending())
        pthread_cond_wait(&wake, &lock);
      woken = 0;
      pthread_mutex_unlock(&lock);
      awake_since = changed = now_ns(CLOCK_MONOTONIC);
      idle_passes = 0;
      sleep_ns = SLEEP_MIN_NS;
      continue;
    }
    if (atomic_load_explicit(&mcoll__progress_hold, memory_order_acquire) && held_ns < HOLD_MAX_NS) {
      /* a caller is returning early: its return first (a nap: a yield would leave
       * this thread runnable and first in line on that core) */
      struct timespec pause = {0, HOLD_NAP_NS};
      nanosleep(&pause, NULL);
      held_ns += HOLD_NAP_NS;
      continue;
    }
    held_ns = 0;
    mcoll__progress();
    unsigned seen = mcoll__task_events();
    if (seen != events) {
      events = seen;
      idle_passes = 0;
      sleep_ns = SLEEP_MIN_NS;
      changed = now_ns(CLOCK_MONOTONIC);
    }
    long long spin_ns = mcoll__cfg.PROGRESS_SPIN_US >= 0 ? mcoll__cfg.PROGRESS_SPIN_US * 1000 : YIELD_NS;
    if (atomic_load_explicit(&mcoll__progress_urgent, memory_order_acquire)) {
      sched_yield(); /* (someone sleeps until a task's data is in: no nap) */
      sleep_ns = SLEEP_MIN_NS;
    } else if (++idle_passes < YIELD_PASSES && now_ns(CLOCK_MONOTONIC) - changed < spin_ns) {
      sched_yield();
    } else {
      nap(sleep_ns);
      long max_ns = mcoll__cfg.PROGRESS_SLEEP_US > 0 ? mcoll__cfg.PROGRESS_SLEEP_US * 1000 : SLEEP_MAX_NS;
      sleep_ns = sleep_ns * 2 > max_ns ? max_ns : sleep_ns * 2;
    }
  }
  atomic_fetch_add(&awake_ns, now_ns(CLOCK_MONOTONIC) - awake_since);
  atomic_store(&cpu_ns, now_ns(CLOCK_THREAD_CPUTIME_ID));
  return NULL;
}

void mcoll__progress_thread_report(FILE *out) {
  long long awake = atomic_load(&awake_ns), cpu = atomic_load(&cpu_ns);
  if (awake > 0)
    fprintf(out, "mcoll: progress thread cpu=%.1f ms awake=%.1f ms (%.1f%% of a core)\n", cpu / 1e6,
            awake / 1e6, 100.0 * (double)cpu / (double)awake);
}

/* Serialises starts (application threads may leave tasks pending at once) and a
 * start against the stop. */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

int mcoll__progress_thread_start(void) {
  pthread_mutex_lock(&start_lock);
  int err = 0;
  if (!atomic_load(&running)) {
    atomic_store(&stopping, 0);
    err = pthread_create(&thread, NULL, progress_main, NULL) != 0 ? -1 : 0;
    if (!err) atomic_store(&running, 1);
  }
  pthread_mutex_unlock(&start_lock);
  if (!err) mcoll__task_set_waker(wake_thread);
  return err;
}

/* The waker until the thread runs: the first task left pending starts it. (A failed
 * start leaves things as with no thread: pending calls progress in mcoll's calls.) */
static void start_and_wake(void) {
  if (mcoll__progress_thread_start() == 0) wake_thread();
  else mcoll__task_set_waker(NULL);
}

void mcoll__progress_thread_on_demand(void) { mcoll__task_set_waker(start_and_wake); }

void mcoll__progress_thread_stop(void) {
  mcoll__task_set_waker(NULL);
  pthread_mutex_lock(&start_lock);
  int was_running = atomic_exchange(&running, 0);
  pthread_mutex_unlock(&start_lock);
  if (!was_running) return;
  atomic_store(&stopping, 1);
  wake_thread();
  pthread_join(thread, NULL);
}

int mcoll__progress_thread_running(void) { return atomic_load(&running); }
