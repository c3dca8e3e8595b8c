#include "task/progress_thread.h"

#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
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
/* While the thread sleeps in ppoll on the host MPI's sockets (sleep_on_sockets), a
 * wake-up also goes through wake_fd (an eventfd, the first entry polled). */
static atomic_int polling;
static int wake_fd = -1;
/* Sleeps on the sockets, and those that data ended (the report's). */
static atomic_long socket_sleeps, data_wakes;

/* Where the machine's cores are shared by more ranks than it has (mcoll__cores_shared),
 * a post does not wake the thread: the wake-up would take a core from a rank at once
 * (its short slices), mostly to poll a call that the caller's own wait is about to
 * drive. The idle thread looks for pending tasks every MCOLL_PROGRESS_LATE_WAKE_US
 * instead. Set when the thread starts. */
static long late_wake_ns;
/* After DEEP_AFTER such looks in a row found nothing (the application has left
 * non-blocking calls alone for a while), the idle thread stops looking and sleeps
 * until a post wakes it (deep is set): blocking phases then cost it nothing. */
enum { DEEP_AFTER = 8 };
static atomic_int deep;

static void wake_thread(void) {
  /* (seq_cst: the post counted its task pending before this load; the thread sets
   * deep before its last look at the pending count: one of the two sees the other) */
  if (late_wake_ns > 0 && !atomic_load(&stopping) && !atomic_load(&deep)) return;
  pthread_mutex_lock(&lock);
  woken = 1;
  pthread_cond_signal(&wake);
  pthread_mutex_unlock(&lock);
  /* (glibc's eventfd calls: not through T-NBC's interposed read and write) */
  if (atomic_load(&polling)) (void)eventfd_write(wake_fd, 1);
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

/* ---- sleeping on the host MPI's sockets (MCOLL_PROGRESS_SOCKETS) ----------------------
 * Across nodes the host MPI's transport is TCP: each of a transfer's protocol steps
 * (a rendezvous's acknowledgement, the rest of a message, the next block) waits for
 * a poll of the host's progress on the side the data reached. Between passes the
 * thread sleeps in ppoll on the process's connected TCP sockets, so that data coming
 * in wakes it at once instead of at the end of a timed sleep; the timeout is the
 * timed sleep's (writes that wait for room in a socket are still found by it). The
 * sockets are the host MPI's own: found in /proc/self/fd, never read here. Off by
 * default: each frame that comes in wakes the thread, which then takes a core from
 * the computation where the cores are all busy (bench/records/net7/). */
enum { SOCKETS_MAX = 32 };
static const long long RESCAN_NS = 100LL * 1000 * 1000;
static struct pollfd watched[1 + SOCKETS_MAX]; /* [0]: wake_fd */
static int nsockets;
static long long scanned_at = -RESCAN_NS;

/* A connected TCP socket (not a listener, not a local or netlink socket). */
static int is_peer_socket(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
  int v = 0;
  socklen_t len = sizeof v;
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) != 0 || (v != AF_INET && v != AF_INET6))
    return 0;
  len = sizeof v;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) != 0 || v != SOCK_STREAM) return 0;
  len = sizeof v;
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) != 0 || v) return 0;
  struct sockaddr_storage peer;
  len = sizeof peer;
  return getpeername(fd, (struct sockaddr *)&peer, &len) == 0;
}

/* The host MPI opens its connections when it first needs them: looked for again at
 * most every RESCAN_NS (a scan costs tens of microseconds). */
static void scan_sockets(long long now) {
  if (now - scanned_at < RESCAN_NS) return;
  scanned_at = now;
  nsockets = 0;
  DIR *dir = opendir("/proc/self/fd");
  if (!dir) return;
  int own = dirfd(dir);
  struct dirent *e;
  while ((e = readdir(dir)) && nsockets < SOCKETS_MAX) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    int fd = atoi(e->d_name);
    if (fd == own || fd == wake_fd || !is_peer_socket(fd)) continue;
    watched[1 + nsockets++] = (struct pollfd){.fd = fd, .events = POLLIN};
  }
  closedir(dir);
}

/* Sleeps up to ns, or until a task is handed over or data comes in on a socket; 1
 * if data came in. */
static int sleep_on_sockets(long ns) {
  atomic_store(&polling, 1);
  pthread_mutex_lock(&lock);
  int was_woken = woken || atomic_load(&stopping);
  pthread_mutex_unlock(&lock);
  int data = 0;
  if (!was_woken) {
    watched[0] = (struct pollfd){.fd = wake_fd, .events = POLLIN};
    struct timespec timeout = {ns / 1000000000L, ns % 1000000000L};
    if (ppoll(watched, (nfds_t)(1 + nsockets), &timeout, NULL) > 0) {
      eventfd_t count;
      if (watched[0].revents & POLLIN) (void)eventfd_read(wake_fd, &count);
      for (int i = 1; i <= nsockets; i++)
        if (watched[i].revents & POLLNVAL) scanned_at = -RESCAN_NS; /* (closed: look again) */
        else if (watched[i].revents) data = 1;
    }
  }
  atomic_store(&polling, 0);
  atomic_fetch_add_explicit(&socket_sleeps, 1, memory_order_relaxed);
  if (data) atomic_fetch_add_explicit(&data_wakes, 1, memory_order_relaxed);
  pthread_mutex_lock(&lock);
  woken = 0;
  pthread_mutex_unlock(&lock);
  return data;
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
static const long long QUICK_WAKE_NS = 5 * 1000;
/* An application thread's wait loop counts as driving the tasks this long after its
 * last pass (a loop that yields may be off its core for a while). */
static const long long DRIVEN_NS = 1000 * 1000;
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
  /* MCOLL_PROGRESS_SPIN_US: a number, or auto (-1) */
  long spin_us = strcmp(mcoll__cfg.PROGRESS_SPIN_US, "auto") ? mcoll__parse_size(mcoll__cfg.PROGRESS_SPIN_US) : -1;
  /* Sleeps that data on a socket ended at once, in a row: a socket that stays
   * readable (data the host reads elsewhere or later) must not make a busy loop,
   * so after two of them the thread takes a timed sleep. */
  int quick_wakes = 0;
  long sleep_ns = SLEEP_MIN_NS, held_ns = 0;
  long long awake_since = now_ns(CLOCK_MONOTONIC), changed = awake_since;
  while (!atomic_load(&stopping)) {
    if (!mcoll__tasks_pending()) {
      long long now = now_ns(CLOCK_MONOTONIC);
      atomic_fetch_add(&awake_ns, now - awake_since);
      pthread_mutex_lock(&lock);
      int looks = 0;
      while (!woken && !atomic_load(&stopping) && !mcoll__tasks_pending()) {
        if (late_wake_ns <= 0) {
          pthread_cond_wait(&wake, &lock);
          continue;
        }
        if (looks++ >= DEEP_AFTER) {
          atomic_store(&deep, 1);
          atomic_thread_fence(memory_order_seq_cst);
          if (mcoll__tasks_pending()) break;
          pthread_cond_wait(&wake, &lock);
          continue;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += late_wake_ns % 1000000000L;
        until.tv_sec += late_wake_ns / 1000000000L + until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&wake, &lock, &until);
      }
      atomic_store(&deep, 0);
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
    long max_ns = mcoll__cfg.PROGRESS_SLEEP_US > 0 ? mcoll__cfg.PROGRESS_SLEEP_US * 1000 : SLEEP_MAX_NS;
    long long driven_ago =
        now_ns(CLOCK_MONOTONIC) - atomic_load_explicit(&mcoll__progress_driven_ns, memory_order_relaxed);
    if (!atomic_load_explicit(&mcoll__progress_urgent, memory_order_acquire) && driven_ago < DRIVEN_NS) {
      /* an application thread waits in a loop that advances the tasks: this thread
       * would only take a core beside it (a wake-up, a finished wait's return, or the
       * bound brings it back). Where posts do not wake it, nothing would end a short
       * nap early either: it sleeps out the window (each wake-up takes a core). */
      nap(late_wake_ns > 0 && DRIVEN_NS - driven_ago > sleep_ns ? (long)(DRIVEN_NS - driven_ago) : sleep_ns);
      sleep_ns = sleep_ns * 2 > max_ns ? max_ns : sleep_ns * 2;
      continue;
    }
    mcoll__progress();
    unsigned seen = mcoll__task_events();
    /* (the last task finished: to the idle sleep at once; a yield here could keep
     * the thread off its core past the next post, whose wake-up it would then miss) */
    if (!mcoll__tasks_pending()) continue;
    if (seen != events) {
      events = seen;
      idle_passes = 0;
      sleep_ns = SLEEP_MIN_NS;
      changed = now_ns(CLOCK_MONOTONIC);
    }
    long long spin_ns = spin_us >= 0 ? spin_us * 1000 : mcoll__cores_shared ? 0 : YIELD_NS;
    if (atomic_load_explicit(&mcoll__progress_urgent, memory_order_acquire)) {
      /* (someone sleeps until a task's data is in: no backoff) */
      if (mcoll__cfg.PROGRESS_URGENT_NAP_US > 0) {
        long us = mcoll__cfg.PROGRESS_URGENT_NAP_US;
        struct timespec pause = {us / 1000000, us % 1000000 * 1000}; /* (tv_nsec < 1e9) */
        nanosleep(&pause, NULL);
      } else {
        sched_yield();
      }
      sleep_ns = SLEEP_MIN_NS;
    } else if (++idle_passes < YIELD_PASSES && now_ns(CLOCK_MONOTONIC) - changed < spin_ns) {
      sched_yield();
    } else {
      long long before = now_ns(CLOCK_MONOTONIC);
      if (mcoll__cfg.PROGRESS_SOCKETS && wake_fd >= 0) scan_sockets(before);
      if (mcoll__cfg.PROGRESS_SOCKETS && wake_fd >= 0 && nsockets > 0 && quick_wakes < 2) {
        if (sleep_on_sockets(sleep_ns)) {
          /* (data woke it: the next pass reads it; the timed sleep keeps its length) */
          quick_wakes = now_ns(CLOCK_MONOTONIC) - before < QUICK_WAKE_NS ? quick_wakes + 1 : 0;
          continue;
        }
      } else {
        nap(sleep_ns);
      }
      quick_wakes = 0;
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
  if (atomic_load(&socket_sleeps))
    fprintf(out, "mcoll: progress thread slept on %d sockets %ld times, woken by data %ld times\n",
            nsockets, atomic_load(&socket_sleeps), atomic_load(&data_wakes));
}

/* Serialises starts (application threads may leave tasks pending at once) and a
 * start against the stop. */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

int mcoll__progress_thread_start(void) {
  pthread_mutex_lock(&start_lock);
  int err = 0;
  if (!atomic_load(&running)) {
    if (wake_fd < 0) wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    atomic_store(&stopping, 0);
    late_wake_ns = mcoll__cores_shared ? mcoll__cfg.PROGRESS_LATE_WAKE_US * 1000 : 0;
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
  close(wake_fd);
  wake_fd = -1;
  scanned_at = -RESCAN_NS;
}

int mcoll__progress_thread_running(void) { return atomic_load(&running); }
