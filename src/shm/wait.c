/* Waiting on a flag: spin briefly (a running writer's flag arrives within a
 * cache-line round trip), then yield (cheap, and an oversubscribed writer needs the
 * core), then sleep on a futex (a wake-up costs far more than a yield, so only after
 * a long wait; the costs: docs/architecture.md). With a core per rank the yields
 * wait MCOLL_SPIN_US first: a yield lets any runnable process, however low its
 * priority, run for up to a scheduler tick: large gathers took many times longer
 * while other jobs ran at nice 19 (docs/performance.md). Once past the spin, let
 * the host MPI progress every 32 polls: the application's point-to-point traffic
 * may need this rank (a rendezvous send to a receive it posted before the
 * collective), and its peer may be blocked in that send rather than coming here.
 * While waiting, check now and then that the node's peers are alive: a dead peer
 * aborts the job; and, inside a reduction, that the peers are not in the same call
 * with another size (shm/call.h): the ranks of an erroneous program may wait on
 * flags of different algorithms. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/fiber.h"
#include "core/host_progress.h"
#include "core/relax.h"
#include "shm/shm.h"

/* Whether the application may run MPI calls from several threads (MPI_THREAD_MULTIPLE,
 * known once MPI is initialized): its threads may then share the cores with the ranks,
 * and one may wait for another on the same core. */
static int app_threads(void) {
  static atomic_int known = -1; /* (every thread computes the same value) */
  int was = atomic_load_explicit(&known, memory_order_relaxed);
  if (was >= 0) return was;
  int level = mcoll__app_thread_level, initialized = 0;
  if (level < 0) {
    PMPI_Initialized(&initialized);
    if (!initialized) return 1;
    PMPI_Query_thread(&level);
  }
  int multiple = level >= MPI_THREAD_MULTIPLE;
  atomic_store_explicit(&known, multiple, memory_order_relaxed);
  return multiple;
}

/* Past the spin, instead of a yield: poll on while this rank has a core of its own,
 * no other thread of the process (the application's at MPI_THREAD_MULTIPLE, the
 * progress thread with tasks pending) may need that core, and it has waited less than
 * MCOLL_SPIN_US (the host MPIs' own waits do not yield). */
static int keep_polling(const struct mcoll_shm *shm, double waited_us) {
  return !shm->oversubscribed && waited_us < (double)mcoll__cfg.SPIN_US && !app_threads() &&
         !mcoll__background_pending();
}

/* Polls between two rounds of host progress and checks while polling: about as often
 * in time as every 32 yields, since a poll is much cheaper than a yield. */
enum { POLLING_ROUNDS = 256 };

static void relax_or_yield(int polling) {
  if (polling) mcoll__cpu_relax();
  else sched_yield();
}

static long futex(mcoll_flag *addr, int op, uint32_t value, const struct timespec *timeout) {
  return syscall(SYS_futex, (uint32_t *)addr, op, value, timeout, NULL, 0);
}

/* A writer stores a flag, then reads sleepers; a sleeper adds itself to sleepers,
 * then reads the flag: each side needs a full barrier between its store and its
 * load, or both may miss the other (the sleeper then sleeps until its timeout).
 * A seq_cst store is that barrier on the writer's side, but it stalls the writer
 * until the flag's line, which its reader polls, comes back from the reader's
 * cache: on every call. Instead, where the kernel allows, the rare side pays: a
 * sleeper issues membarrier(GLOBAL_EXPEDITED), a full barrier on every running
 * thread of every registered process, between its add and its load, and the
 * writers publish with plain release stores. */
static int fence_able;
static pthread_once_t fence_once = PTHREAD_ONCE_INIT;

static void fence_register(void) {
  long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  fence_able = cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
               syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
}

void mcoll__flag_fence_register(void) { pthread_once(&fence_once, fence_register); }

void mcoll__flag_fence_mark(struct mcoll_shm *shm) {
  mcoll__flag_fence_register();
  if (!fence_able || !mcoll__cfg.LIGHT_FLAGS) atomic_store(&shm->hdr->strong_flags, 1);
}

void mcoll__flag_fence_decide(struct mcoll_shm *shm) {
  shm->light_flags = fence_able && mcoll__cfg.LIGHT_FLAGS && !atomic_load(&shm->hdr->strong_flags);
}

/* Linux schedules each autogroup (one per session, sched_autogroup_enabled; only for
 * tasks in the root cpu cgroup) as one entity, and a yield only passes the core to
 * another task of the yielder's own group. Launchers that start each rank in a session
 * of its own (MPICH's hydra) put the node's ranks in different groups: there a waiting
 * rank's yields may keep its core until its slice ends (milliseconds, seen where other
 * jobs loaded the node) while the rank it waits for sits on the run queue. This rank's
 * autogroup, or 0 where yields pass the core on. */
static uint64_t autogroup_id(void) {
  FILE *f = fopen("/proc/sys/kernel/sched_autogroup_enabled", "r");
  int enabled = 0;
  if (f) {
    if (fscanf(f, "%d", &enabled) != 1) enabled = 0;
    fclose(f);
  }
  if (!enabled) return 0;
  /* the cpu controller's cgroup (v1 "N:...cpu...:PATH", else v2 "0::PATH"): root only */
  char line[512], root = 0;
  int found_v1 = 0;
  f = fopen("/proc/self/cgroup", "r");
  while (f && fgets(line, sizeof line, f)) {
    char *controllers = strchr(line, ':'), *path = controllers ? strchr(controllers + 1, ':') : NULL;
    if (!path) continue;
    *path++ = '\0';
    int is_root = !strcmp(path, "/\n") || !strcmp(path, "/");
    char *c = controllers + 1;
    int has_cpu = 0;
    char *save = NULL;
    for (char *tok = strtok_r(c, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
      has_cpu |= !strcmp(tok, "cpu");
    if (has_cpu) {
      found_v1 = 1;
      root = (char)is_root;
    } else if (!found_v1 && *c == '\0') {
      root = (char)is_root;
    }
  }
  if (f) fclose(f);
  if (!root) return 0;
  unsigned long long id = 0;
  f = fopen("/proc/self/autogroup", "r");
  if (f) {
    if (fscanf(f, "/autogroup-%llu", &id) != 1) id = 0;
    fclose(f);
  }
  return id;
}

void mcoll__yield_mark(struct mcoll_shm *shm) {
  /* (read once: a process's group changes only with its session) */
  static atomic_ullong known = ULLONG_MAX;
  uint64_t mine = atomic_load_explicit(&known, memory_order_relaxed), first = 0;
  if (mine == ULLONG_MAX) {
    mine = autogroup_id();
    atomic_store_explicit(&known, mine, memory_order_relaxed);
  }
  if (mine && !atomic_compare_exchange_strong(&shm->hdr->autogroup, &first, mine) && first != mine)
    atomic_store(&shm->hdr->autogroups_differ, 1);
}

/* Segments set up with futile yields, and in them the waits past the spin and those
 * that slept because their yields kept the core (the MCOLL_VERBOSE report's). */
static atomic_ulong futile_segments, futile_waits, futile_early_sleeps;

void mcoll__yield_decide(struct mcoll_shm *shm) {
  shm->yield_futile = shm->oversubscribed && atomic_load(&shm->hdr->autogroups_differ);
  if (shm->yield_futile) atomic_fetch_add_explicit(&futile_segments, 1, memory_order_relaxed);
}

void mcoll__wait_report(FILE *out) {
  unsigned long n = atomic_load(&futile_segments);
  if (!n) return;
  fprintf(out, "mcoll: waits sleep after %ld us in %lu node segments: ranks in different "
          "autogroups, oversubscribed (yields may keep the core)", (long)mcoll__cfg.YIELD_FUTILE_US, n);
  if (mcoll__cfg.YIELD_FUTILE_RUN_US > 0)
    fprintf(out, "; or after %ld us of yields that kept it: %lu of %lu waits here",
            (long)mcoll__cfg.YIELD_FUTILE_RUN_US, atomic_load(&futile_early_sleeps), atomic_load(&futile_waits));
  fputc('\n', out);
}

/* Whether more tasks are runnable on the machine than the node has ranks: others'
 * tasks want the cores. On a node where only the ranks run, their yields still pass
 * the core on now and then, and waking sleepers costs more than yielding. Read at
 * most once per LOAD_EVERY_US (the kernel's count: /proc/loadavg). */
enum { LOAD_EVERY_US = 1000 };
static int others_runnable(const struct mcoll_shm *shm, double now) {
  static _Atomic double read_at = -1e18;
  static atomic_int verdict;
  if (now - atomic_load_explicit(&read_at, memory_order_relaxed) < LOAD_EVERY_US)
    return atomic_load_explicit(&verdict, memory_order_relaxed);
  int running = 0, more = 1; /* (unreadable: assume others) */
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fscanf(f, "%*f %*f %*f %d/", &running) == 1) more = running > shm->local_size;
    fclose(f);
  }
  atomic_store_explicit(&verdict, more, memory_order_relaxed);
  atomic_store_explicit(&read_at, now, memory_order_relaxed);
  return more;
}

/* Context switches of the calling thread so far: a yield that passed the core on
 * counts one. */
static long thread_switches(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_THREAD, &ru) != 0) return -1;
  return ru.ru_nvcsw + ru.ru_nivcsw;
}

/* After a write of flag (seq_cst, or light_flags): either we see the sleeper, or it
 * sees the value. */
static void wake_sleepers(const struct mcoll_shm *shm, mcoll_flag *flag) {
  if (atomic_load(&shm->hdr->sleepers) > 0) futex(flag, FUTEX_WAKE, INT_MAX, NULL);
}

void mcoll__flag_set(const struct mcoll_shm *shm, mcoll_flag *flag, uint32_t value) {
  if (shm->light_flags) {
    atomic_store_explicit(flag, value, memory_order_release);
    /* The sleeper's membarrier is the hardware fence; the compiler must still not
     * move the read of sleepers above this store. */
    atomic_signal_fence(memory_order_seq_cst);
  } else {
    atomic_store(flag, value);
  }
  wake_sleepers(shm, flag);
}

uint32_t mcoll__flag_add(const struct mcoll_shm *shm, mcoll_flag *flag, uint32_t add) {
  uint32_t value = atomic_fetch_add(flag, add) + add;
  wake_sleepers(shm, flag);
  return value;
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int mcoll__process_gone(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
  char path[64], state = '?';
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  /* "pid (comm) state ...": comm may hold spaces, so scan from the last ')'. */
  char line[512];
  size_t n = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  line[n] = '\0';
  char *paren = strrchr(line, ')');
  if (paren && paren[1] == ' ') state = paren[2];
  return state == 'Z' || state == 'X';
}

static void check_peers(const struct mcoll_shm *shm) {
  for (int r = 0; r < shm->local_size; r++) {
    if (r == shm->local_rank) continue;
    pid_t pid = shm->data[r].pid;
    if (pid > 0 && mcoll__process_gone(pid)) {
      fprintf(stderr,
              "mcoll: world rank %d (pid %d) on this node is gone while rank %d waits for it; "
              "aborting the job\n",
              shm->data[r].world_rank, (int)pid, shm->data[shm->local_rank].world_rank);
      PMPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
}

static void (*_Atomic wait_poll)(const struct mcoll_shm *shm);

void mcoll__wait_set_poll(void (*poll)(const struct mcoll_shm *shm)) {
  atomic_store_explicit(&wait_poll, poll, memory_order_release);
}

static void poll_call(const struct mcoll_shm *shm) {
  void (*poll)(const struct mcoll_shm *) = atomic_load_explicit(&wait_poll, memory_order_acquire);
  if (poll) poll(shm);
}

static int flag_ok(uint32_t value, uint32_t target, int exact) {
  return exact ? value == target : mcoll__reached(value, target);
}

/* On a task's fiber (a non-blocking collective): give the thread back until the
 * condition holds; whoever resumes the task polls the host MPI. Liveness and the
 * peers' call descriptors as below. */
static int wait_in_fiber(const struct mcoll_shm *shm, mcoll_flag *flag, uint32_t target, int exact,
                         int (*ready)(void *), void *arg, int (*stop)(void *), void *stop_arg) {
  double last_check = now_us();
  const double liveness_us = (double)mcoll__cfg.LIVENESS_MS * 1e3;
  for (unsigned i = 1;; i++) {
    mcoll__fiber_yield();
    if (ready ? ready(arg) : flag_ok(atomic_load_explicit(flag, memory_order_acquire), target, exact))
      return 1;
    if (i % 32 != 0) continue;
    if (stop && stop(stop_arg)) return 0;
    if (!ready) poll_call(shm);
    double now = now_us();
    if (now - last_check > liveness_us) {
      check_peers(shm);
      last_check = now;
    }
  }
}

/* Past the spin: yield, then sleep; host progress, liveness, the peers' call
 * descriptors and stop (if any: then returns 0) every 32 polls; 1 once the flag holds. */
static int wait_slow(const struct mcoll_shm *shm, mcoll_flag *flag, uint32_t target, int exact,
                     int (*stop)(void *), void *stop_arg) {
  if (mcoll__fiber_self()) return wait_in_fiber(shm, flag, target, exact, NULL, NULL, stop, stop_arg);
  double start = now_us(), last_check = start;
  /* (where yields may not pass the core on: MCOLL_YIELD_FUTILE_US, after which a futex
   * wake-up is the hand-off) */
  const double yield_us = (double)(shm->yield_futile ? mcoll__cfg.YIELD_FUTILE_US : mcoll__cfg.YIELD_US);
  const double liveness_us = (double)mcoll__cfg.LIVENESS_MS * 1e3;
  /* There, also sleep once the yields have kept the core for run_us since the thread
   * last left it (run_from): on a quiet node they pass it on often enough to win over
   * a futex wake-up, beside other jobs' tasks they keep it for a whole slice. */
  const double run_us = shm->yield_futile ? (double)mcoll__cfg.YIELD_FUTILE_RUN_US : 0;
  long switches = 0;
  double run_from = start;
  if (run_us > 0) {
    switches = thread_switches();
    atomic_fetch_add_explicit(&futile_waits, 1, memory_order_relaxed);
  }
  int polling = keep_polling(shm, 0), slept_early = 0;
  for (unsigned i = 1;; i++) {
    uint32_t value = atomic_load_explicit(flag, memory_order_acquire);
    if (flag_ok(value, target, exact)) return 1;
    if (i % (polling ? POLLING_ROUNDS : 32) != 0) {
      relax_or_yield(polling);
      continue;
    }
    if (stop && stop(stop_arg)) return 0;
    mcoll__host_progress();
    poll_call(shm);
    double now = now_us();
    if (now - last_check > liveness_us) {
      check_peers(shm);
      last_check = now;
    }
    polling = keep_polling(shm, now - start);
    int kept = 0;
    if (run_us > 0) {
      long count = thread_switches();
      if (count != switches) {
        switches = count;
        run_from = now;
      }
      kept = now - run_from >= run_us;
      if (kept && !others_runnable(shm, now)) {
        kept = 0;
        run_from = now;
      }
    }
    /* (no sleep while tasks are pending: their progress comes from this loop) */
    if (polling || (now - start < yield_us && !kept) || mcoll__background_pending()) {
      relax_or_yield(polling);
      continue;
    }
    if (kept && now - start < yield_us && !slept_early) {
      slept_early = 1;
      atomic_fetch_add_explicit(&futile_early_sleeps, 1, memory_order_relaxed);
    }
    /* Long wait: sleep until a writer wakes us, or at most 10 ms, after which the
     * host MPI progresses again (long enough that a wake-up and 32 yields are a small
     * share of it). */
    struct timespec timeout = {.tv_sec = 0, .tv_nsec = 10 * 1000 * 1000};
    atomic_fetch_add(&shm->hdr->sleepers, 1);
    if (shm->light_flags) syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0);
    value = atomic_load(flag);
    if (!flag_ok(value, target, exact)) futex(flag, FUTEX_WAIT, value, &timeout);
    atomic_fetch_sub(&shm->hdr->sleepers, 1);
  }
}

void mcoll__flag_wait(const struct mcoll_shm *shm, mcoll_flag *flag, uint32_t target) {
  if (!mcoll__flag_poll(shm, flag, target)) wait_slow(shm, flag, target, 0, NULL, NULL);
}

int mcoll__flag_poll(const struct mcoll_shm *shm, mcoll_flag *flag, uint32_t target) {
  if (mcoll__reached(atomic_load_explicit(flag, memory_order_acquire), target)) return 1;
  for (int i = 0; i < shm->spin; i++) {
    mcoll__cpu_relax();
    if (mcoll__reached(atomic_load_explicit(flag, memory_order_acquire), target)) return 1;
  }
  return 0;
}

void mcoll__flag_wait_exact(const struct mcoll_shm *shm, mcoll_flag *flag, uint32_t target) {
  if (atomic_load_explicit(flag, memory_order_acquire) == target) return;
  for (int i = 0; i < shm->spin; i++) {
    mcoll__cpu_relax();
    if (atomic_load_explicit(flag, memory_order_acquire) == target) return;
  }
  wait_slow(shm, flag, target, 1, NULL, NULL);
}

int mcoll__flag_wait_unless(const struct mcoll_shm *shm, mcoll_flag *flag, uint32_t target,
                            int (*stop)(void *), void *stop_arg) {
  return mcoll__flag_poll(shm, flag, target) || wait_slow(shm, flag, target, 0, stop, stop_arg);
}

void mcoll__wait_until(const struct mcoll_shm *shm, int (*ready)(void *), void *arg) {
  if (mcoll__fiber_self()) {
    if (!ready(arg)) wait_in_fiber(shm, NULL, 0, 0, ready, arg, NULL, NULL);
    return;
  }
  double start = now_us(), last_check = start;
  const double yield_us = (double)mcoll__cfg.YIELD_US;
  const double liveness_us = (double)mcoll__cfg.LIVENESS_MS * 1e3;
  int polling = keep_polling(shm, 0);
  for (unsigned i = 1;; i++) {
    if (ready(arg)) return;
    if (i % (polling ? POLLING_ROUNDS : 32) != 0) {
      relax_or_yield(polling);
      continue;
    }
    mcoll__host_progress();
    double now = now_us();
    if (now - last_check > liveness_us) {
      check_peers(shm);
      last_check = now;
    }
    polling = keep_polling(shm, now - start);
    if (polling || now - start < yield_us) relax_or_yield(polling);
    else nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 1000 * 1000}, NULL);
  }
}
