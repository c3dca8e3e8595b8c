#include "task/progress_thread.h"

#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <stdatomic.h>
#include <time.h>

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

/* Passes over pending tasks that yield before the thread starts sleeping between
 * passes (a yield returns at once when a core is free, and hands the core over when
 * not): peers that arrive within ~1000 passes cost no sleep. The sleeps are short, so
 * the thread asks for a timer slack of 1 µs (the default 50 µs would stretch each). */
enum { YIELD_PASSES = 1000, SLEEP_NS = 10 * 1000 };

static void *progress_main(void *arg) {
  (void)arg;
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  unsigned idle_passes = 0;
  while (!atomic_load(&stopping)) {
    if (!mcoll__tasks_pending()) {
      pthread_mutex_lock(&lock);
      while (!woken && !atomic_load(&stopping) && !mcoll__tasks_pending())
        pthread_cond_wait(&wake, &lock);
      woken = 0;
      pthread_mutex_unlock(&lock);
      idle_passes = 0;
      continue;
    }
    mcoll__progress();
    if (++idle_passes < YIELD_PASSES) sched_yield();
    else nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = SLEEP_NS}, NULL);
  }
  return NULL;
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
