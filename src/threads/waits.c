/* How a thread rank waits: spin, then yield, then sleep on a futex that every event
 * wakes (thr_wake_waiters); meanwhile the runtime's progress runs. */
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"
#include "wake_word.h"
#include "../core/relax.h"

/* The runtime's progress (rings, host MPI, non-blocking schedules), set at its start. */
static void (*progress_fn)(void);
/* Whether a message may arrive that wakes nobody (through the host MPI). */
static int silent_arrivals;

/* The word this process's waits sleep on: its own, or its word in the node's segment. */
static struct thr_wake_word own_word;
static struct thr_wake_word *word = &own_word;

static int yield_us(void);
static atomic_long sleeps; /* (MCOLL_THREADS_STATS) */

long thr_wait_sleep_count(void)
{
  return atomic_load_explicit(&sleeps, memory_order_relaxed);
}

void thr_waits_init(void (*progress)(void), struct thr_wake_word *node_word, int host_carries)
{
  progress_fn = progress;
  silent_arrivals = host_carries;
  if (node_word) {
    word = node_word;
    word->shared = 1;
  }
  word->exact = yield_us() == 0;
}

static void wait_progress(void)
{
  if (progress_fn)
    progress_fn();
}

/* Whether the node's thread ranks outnumber the CPUs this process may use. */
static int oversubscribed(void)
{
  return thr_proc.threads * thr_proc.node_processes > thr_proc.cpus;
}

static int env_or(const char *name, int fallback)
{
  const char *value = getenv(name);
  return value && *value ? atoi(value) : fallback;
}

/* A wait setting: read once (cache starts at -1), at least `least`. */
int thr_env_cached(atomic_int *cache, const char *name, int fallback, int least)
{
  int n = atomic_load_explicit(cache, memory_order_relaxed);
  if (n < 0) {
    n = env_or(name, fallback);
    if (n < least)
      n = least;
    atomic_store_explicit(cache, n, memory_order_relaxed);
  }
  return n;
}

/* As libmcoll's MCOLL_SPIN and MCOLL_SPIN_OVERSUBSCRIBED: with a core each, a yield hands
 * the core to any runnable task of the machine (another job, a nice 19 build) for up to a
 * time slice, and a ping-pong then waits for slices instead of cache lines (on a loaded
 * node: docs/threads.md); sharing cores, the rank waited for may need
 * this one's. */
enum { SPIN_POLLS = 4000, SPIN_POLLS_OVERSUBSCRIBED = 8 };
static int spin_polls(void)
{
  static atomic_int polls = -1;
  return thr_env_cached(&polls, "MCOLL_THREADS_SPIN",
                    oversubscribed() ? SPIN_POLLS_OVERSUBSCRIBED : SPIN_POLLS, 0);
}

/* Past the polls, how long a wait with a core of its own keeps polling before it yields
 * (libmcoll's MCOLL_SPIN_US); 0 when the ranks share cores. */
enum { SPIN_US = 20000 };
static int spin_us(void)
{
  static atomic_int us = -1;
  return thr_env_cached(&us, "MCOLL_THREADS_SPIN_US", oversubscribed() ? 0 : SPIN_US, 0);
}

static double now_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* How long a wait yields before it sleeps (MCOLL_THREADS_YIELD_US). Sharing cores, a
 * yield is the cheap hand-off (a futex wake-up crosses CPUs, an interrupt that a
 * virtual machine pays dearly for), but it may return to the yielding thread while the
 * rank waited for sits on the run queue, or hand the core to another job: past this a
 * waiter leaves the run queue on a futex, and every event a rank may wait for wakes it
 * (thr_wake_waiters, and between a node's processes their rings: wake_word.h). Where
 * messages cross the host MPI, waits yield on: such a message wakes nobody. */
enum { YIELD_US = 1000 };
static int yield_us(void)
{
  static atomic_int us = -1;
  return thr_env_cached(&us, "MCOLL_THREADS_YIELD_US", silent_arrivals ? INT_MAX : YIELD_US, 0);
}

void thr_wake_waiters(void)
{
  thr_wake_word_wake(word);
}

/* The longest sleep, after which the waiter looks again (MCOLL_THREADS_SLEEP_US): only
 * a safety net where every event wakes; where messages cross the host MPI (and waits
 * sleep only when MCOLL_THREADS_YIELD_US says so) such a message wakes nobody, so it
 * bounds that latency. */
static long sleep_ns(void)
{
  static atomic_int us = -1;
  return thr_env_cached(&us, "MCOLL_THREADS_SLEEP_US", silent_arrivals ? 100 : 1000, 1) * 1000L;
}

/* Progress every PROGRESS_POLLS polls while spinning (a message from another process
 * needs a drain of the host; a poll is a few ns), and the clock every CLOCK_POLLS. */
enum { PROGRESS_POLLS = 16, CLOCK_POLLS = 256 };
enum { SPINNING, YIELDING, SLEEPING };

void thr_wait_pause(struct thr_waiter *w)
{
  unsigned polls = ++w->polls;
  if (w->phase == SLEEPING) {
    if (w->armed) {
      long ns = sleep_ns();
      struct timespec timeout = {ns / 1000000000L, ns % 1000000000L};
      atomic_fetch_add_explicit(&sleeps, 1, memory_order_relaxed);
      syscall(SYS_futex, &word->seq, word->shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE, w->seq,
              &timeout, NULL, 0);
      atomic_fetch_sub(&word->sleepers, 1);
      w->armed = 0;
    }
    wait_progress();
    /* Armed before the caller looks again: an event after this look wakes the futex.
     * woken is cleared after seq is read: a wake-up that set it before then either moved
     * seq past what was read (the futex returns at once) or moved it before (and every
     * event from the clearing on wakes again); cleared before the read, an event after
     * it could find the flag of a wake-up whose seq this sleeper already read, and skip. */
    atomic_fetch_add(&word->sleepers, 1);
    w->seq = atomic_load(&word->seq);
    atomic_exchange(&word->woken, 0);
    w->armed = 1;
    return;
  }
  if (w->phase == YIELDING) {
    wait_progress();
    sched_yield();
    if (yield_us() != INT_MAX && now_us() - w->start_us >= yield_us())
      w->phase = SLEEPING;
    return;
  }
  /* (the clock only once the polls are spent: a wait answered within them pays nothing) */
  mcoll__cpu_relax();
  if (polls % PROGRESS_POLLS == 0)
    wait_progress();
  if (polls < (unsigned)spin_polls())
    return;
  if (polls == (unsigned)spin_polls())
    w->start_us = now_us();
  if (spin_us() <= 0 || (polls % CLOCK_POLLS == 0 && now_us() - w->start_us >= spin_us())) {
    w->phase = YIELDING;
    w->start_us = now_us();
  }
}

void thr_wait_end(struct thr_waiter *w)
{
  if (w->armed)
    atomic_fetch_sub(&word->sleepers, 1);
  w->armed = 0;
}
