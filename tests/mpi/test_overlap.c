/* test_overlap: whether a collective's transfer moves while the application computes
 * and makes no MPI call (test hosts on shaped links: tests/py/test_overlap_multihost.py).
 *
 * usage: test_overlap nbc COLL BYTES COMPUTE_MS REPS
 *          first the blocking call REPS times (its median B, the slowest rank's); then
 *          per rep: a barrier, MPI_I<COLL> (alltoall, allreduce, bcast, allgather; BYTES
 *          per block or in all), a busy loop of max(COMPUTE_MS, 4 B) without MPI calls
 *          (on a loaded machine the transfer takes longer too), one MPI_Test, MPI_Wait
 *        test_overlap tnbc BYTES REPS
 *          per rep: a barrier, blocking MPI_Alltoall of BYTES per block, the time to
 *          return; then the received blocks are checked
 *        test_overlap idle MS REPS
 *          per rep: a barrier, MPI_Iallreduce of 8 B that the last rank joins MS later
 *          (it sleeps first), the others sleeping (no CPU, no MPI call) until then and
 *          waiting: the progress thread polls a call that cannot move
 *        test_overlap quiet MS REPS
 *          per rep: MPI_Iallreduce + wait, then MS of sleep with nothing pending (the
 *          progress thread's wake-ups then: Q), then the idle step above with a 50 ms
 *          delay (the thread's wake-ups while its caller sleeps: W; a post must have
 *          woken a thread that stopped looking)
 *        test_overlap afterwait MS REPS
 *          per rep: an MPI_Iallreduce of 4 B that the last rank joins 2 ms late (the
 *          others wait in MPI_Wait's loop); at once a second one that the last rank
 *          joins 0.1 ms late, while the others sleep MS (no CPU, no MPI call) and then
 *          look at the result in memory: the progress thread must have finished it
 *          after its caller's earlier wait returned
 * Rank 0 prints medians (ms) and counts:
 *   "test_overlap: nbc post_ms=P blocking_ms=B done_after_compute=K/REPS cpu_pct=C"
 *   "test_overlap: idle cpu_pct=C"
 *   "test_overlap: afterwait done=D/N" (D: second calls found finished after the sleep,
 *   over every rank but the last and every rep)
 *   "test_overlap: quiet wakeups=Q woken=W" (Q: the most of any rank and rep; W: the
 *   fewest of any waiting rank and rep; -1 without a progress thread)
 *   (C: CPU time of mcoll's progress thread, "mcoll-progress", over the time from the
 *   post to the end of the wait, in % of a core, the busiest rank's; -1 without one)
 *   "test_overlap: tnbc return_ms=R return_min_ms=M" (M: the fastest rep, which load
 *   slows least: a blocking call never beats the wire)
 * and "test_overlap: passed" when every result was right. */
#include <mpi.h>

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median_ms(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return 1e3 * v[n / 2];
}

/* The progress thread's id in this process, found by its name; 0 if none runs. */
static long progress_tid(void) {
  DIR *dir = opendir("/proc/self/task");
  if (!dir) return 0;
  long tid = 0;
  struct dirent *e;
  while (!tid && (e = readdir(dir))) {
    char path[300], name[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (fgets(name, sizeof name, f) && !strncmp(name, "mcoll-progress", 14)) tid = atol(e->d_name);
    fclose(f);
  }
  closedir(dir);
  return tid;
}

/* A thread's CPU time (s): Linux's per-thread CPU clock of a thread of this process. */
static double thread_cpu(long tid) {
  struct timespec t;
  clockid_t clock = (clockid_t)((~(unsigned)tid) << 3) | 6; /* (CPUCLOCK_SCHED | PERTHREAD) */
  if (tid <= 0 || clock_gettime(clock, &t) != 0) return 0;
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A thread's context switches (voluntary and not): its wake-ups, near enough. */
static long thread_switches(long tid) {
  char path[64], line[128];
  snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
  FILE *f = tid > 0 ? fopen(path, "r") : NULL;
  long n = 0, v;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1 || sscanf(line, "nonvoluntary_ctxt_switches: %ld", &v) == 1)
      n += v;
  if (f) fclose(f);
  return n;
}

static void sleep_ms(double ms) {
  struct timespec pause = {(time_t)(ms / 1e3), (long)(ms * 1e6) % 1000000000L};
  nanosleep(&pause, NULL);
}

/* test_overlap quiet MS REPS (see the top) */
static int quiet(double ms, int reps, int me, int p) {
  long most_quiet = -1, fewest_woken = -1;
  int errors = 0;
  for (int k = 0; k < reps; k++) {
    int x = me + 1, sum = 0;
    MPI_Request q;
    MPI_Iallreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    errors += sum != p * (p + 1) / 2;
    long tid = progress_tid(), s0 = thread_switches(tid);
    sleep_ms(ms);
    long quiet_switches = thread_switches(tid) - s0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == p - 1) sleep_ms(50);
    sum = 0;
    MPI_Iallreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q);
    tid = progress_tid();
    s0 = thread_switches(tid);
    if (me != p - 1) sleep_ms(50);
    long woken = thread_switches(tid) - s0;
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    errors += sum != p * (p + 1) / 2;
    if (tid && quiet_switches > most_quiet) most_quiet = quiet_switches;
    if (tid && me != p - 1 && (fewest_woken < 0 || woken < fewest_woken)) fewest_woken = woken;
  }
  /* (LONG_MAX: a rank with nothing to say about W) */
  long woken_or_none = fewest_woken < 0 ? LONG_MAX : fewest_woken;
  MPI_Allreduce(MPI_IN_PLACE, &most_quiet, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &woken_or_none, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (me == 0) {
    printf("test_overlap: quiet wakeups=%ld woken=%ld\n", most_quiet, woken_or_none == LONG_MAX ? -1 : woken_or_none);
    printf(errors ? "test_overlap: %d wrong sums\n" : "test_overlap: passed\n", errors);
    fflush(stdout);
  }
  return errors;
}

/* test_overlap afterwait MS REPS (see the top) */
static int afterwait(double ms, int reps, int me, int p) {
  int errors = 0, done = 0, looked = 0;
  for (int k = 0; k < reps; k++) {
    MPI_Barrier(MPI_COMM_WORLD);
    int x = me + 1, sum = 0;
    MPI_Request q;
    if (me == p - 1) sleep_ms(2);
    MPI_Iallreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    errors += sum != p * (p + 1) / 2;
    sum = 0;
    if (me == p - 1) sleep_ms(0.1);
    MPI_Iallreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q);
    if (me != p - 1) {
      sleep_ms(ms);
      /* (written by the progress thread, if it ran the call meanwhile) */
      done += __atomic_load_n(&sum, __ATOMIC_ACQUIRE) == p * (p + 1) / 2;
      looked++;
    }
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    errors += sum != p * (p + 1) / 2;
  }
  MPI_Allreduce(MPI_IN_PLACE, &done, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &looked, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (me == 0) {
    printf("test_overlap: afterwait done=%d/%d\n", done, looked);
    printf(errors ? "test_overlap: %d wrong sums\n" : "test_overlap: passed\n", errors);
    fflush(stdout);
  }
  return errors;
}

static volatile double sink;
static void busy(double ms) {
  double x = 1.0, until = now() + ms * 1e-3;
  while (now() < until)
    for (int i = 0; i < 1000; i++) x = x * 1.0000001 + 1e-9;
  sink = x;
}

static int post(const char *coll, const char *s, char *r, int n, MPI_Request *q) {
  if (!strcmp(coll, "alltoall")) return MPI_Ialltoall(s, n, MPI_BYTE, r, n, MPI_BYTE, MPI_COMM_WORLD, q);
  if (!strcmp(coll, "allgather")) return MPI_Iallgather(s, n, MPI_BYTE, r, n, MPI_BYTE, MPI_COMM_WORLD, q);
  if (!strcmp(coll, "bcast")) return MPI_Ibcast(r, n, MPI_BYTE, 0, MPI_COMM_WORLD, q);
  return MPI_Iallreduce(s, r, n / 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD, q);
}

static int blocking(const char *coll, const char *s, char *r, int n) {
  MPI_Request q;
  int err = post(coll, s, r, n, &q);
  return err != MPI_SUCCESS ? err : MPI_Wait(&q, MPI_STATUS_IGNORE);
}

/* The result of one call with send blocks filled by fill(): every byte right. */
static void fill(const char *coll, char *s, char *r, int n, int p, int me) {
  if (!strcmp(coll, "allreduce")) {
    for (int i = 0; i < n / 4; i++) ((int *)s)[i] = me + i;
  } else {
    for (int k = 0; k < p; k++) memset(s + (size_t)k * n, (me * 16 + k) & 0x7f, (size_t)n);
  }
  if (!strcmp(coll, "bcast")) memset(r, me == 0 ? 0x55 : 0, (size_t)n);
  else memset(r, 0, (size_t)n * p);
}

static int wrong(const char *coll, const char *r, int n, int p, int me) {
  int bad = 0;
  if (!strcmp(coll, "allreduce")) {
    for (int i = 0; i < n / 4; i++) bad += ((const int *)r)[i] != p * (p - 1) / 2 + p * i;
  } else if (!strcmp(coll, "bcast")) {
    for (int i = 0; i < n; i++) bad += r[i] != 0x55;
  } else {
    for (int k = 0; k < p; k++) {
      int want = !strcmp(coll, "alltoall") ? (k * 16 + me) & 0x7f : (k * 16) & 0x7f;
      for (int i = 0; i < n; i++) bad += r[(size_t)k * n + i] != want;
    }
  }
  return bad;
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
  int me, p;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  int is_nbc = argc == 6 && !strcmp(argv[1], "nbc"), is_tnbc = argc == 4 && !strcmp(argv[1], "tnbc");
  if (argc == 4 && !strcmp(argv[1], "idle")) {
    double ms = atof(argv[2]), cpu = 0, wall = 0;
    int reps = atoi(argv[3]), errors = 0, seen = 0;
    for (int k = 0; k < reps; k++) {
      MPI_Barrier(MPI_COMM_WORLD);
      struct timespec pause = {(time_t)(ms / 1e3), (long)(ms * 1e6) % 1000000000L};
      int x = me + 1, sum = 0;
      MPI_Request q;
      if (me == p - 1) nanosleep(&pause, NULL);
      MPI_Iallreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q);
      long tid = progress_tid();
      double t0 = now(), c0 = thread_cpu(tid);
      if (me != p - 1) nanosleep(&pause, NULL);
      MPI_Wait(&q, MPI_STATUS_IGNORE);
      if (tid && me != p - 1) {
        cpu += thread_cpu(tid) - c0;
        wall += now() - t0;
        seen = 1;
      }
      errors += sum != p * (p + 1) / 2;
    }
    double pct = seen ? 100 * cpu / wall : -1;
    MPI_Allreduce(MPI_IN_PLACE, &pct, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (me == 0) {
      printf("test_overlap: idle cpu_pct=%.1f\n", pct);
      printf(errors ? "test_overlap: %d wrong sums\n" : "test_overlap: passed\n", errors);
      fflush(stdout);
    }
    MPI_Finalize();
    return errors != 0;
  }
  if (argc == 4 && !strcmp(argv[1], "afterwait")) {
    int errors = afterwait(atof(argv[2]), atoi(argv[3]), me, p);
    MPI_Finalize();
    return errors != 0;
  }
  if (argc == 4 && !strcmp(argv[1], "quiet")) {
    int errors = quiet(atof(argv[2]), atoi(argv[3]), me, p);
    MPI_Finalize();
    return errors != 0;
  }
  if (!is_nbc && !is_tnbc) {
    if (me == 0)
      fprintf(stderr, "usage: test_overlap nbc COLL BYTES COMPUTE_MS REPS | tnbc BYTES REPS | idle MS REPS | quiet MS REPS | afterwait MS REPS\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char *coll = is_nbc ? argv[2] : "alltoall";
  int n = atoi(argv[is_nbc ? 3 : 2]), reps = atoi(argv[is_nbc ? 5 : 3]);
  double compute_ms = is_nbc ? atof(argv[4]) : 0;
  char *s = malloc((size_t)n * p), *r = malloc((size_t)n * p);
  double *t_post = malloc(sizeof(double) * reps), *t_block = malloc(sizeof(double) * reps);
  int errors = 0, done_after = 0;
  double block_ms = 0, cpu = 0, wall = 0;
  int seen = 0;
  if (is_nbc) {
    for (int k = 0; k < reps; k++) {
      fill(coll, s, r, n, p, me);
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = now();
      blocking(coll, s, r, n);
      t_block[k] = now() - t0;
      errors += wrong(coll, r, n, p, me);
    }
    block_ms = median_ms(t_block, reps);
    MPI_Allreduce(MPI_IN_PLACE, &block_ms, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (compute_ms < 4 * block_ms) compute_ms = 4 * block_ms;
  }
  for (int k = 0; k < reps; k++) {
    fill(coll, s, r, n, p, me);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    if (is_nbc) {
      MPI_Request q;
      int flag = 0;
      post(coll, s, r, n, &q);
      t_post[k] = now() - t0;
      long tid = progress_tid();
      double c0 = thread_cpu(tid), w0 = now();
      busy(compute_ms);
      MPI_Test(&q, &flag, MPI_STATUS_IGNORE);
      done_after += flag;
      MPI_Wait(&q, MPI_STATUS_IGNORE);
      if (tid) {
        cpu += thread_cpu(tid) - c0;
        wall += now() - w0;
        seen = 1;
      }
    } else {
      MPI_Alltoall(s, n, MPI_BYTE, r, n, MPI_BYTE, MPI_COMM_WORLD);
      t_post[k] = now() - t0;
    }
    errors += wrong(coll, r, n, p, me);
  }
  /* the slowest rank's medians; a call counts as done after computing on every rank */
  double post_ms = median_ms(t_post, reps), post_min_ms = 1e3 * t_post[0]; /* (sorted) */
  MPI_Allreduce(MPI_IN_PLACE, &post_ms, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &post_min_ms, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &done_after, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  double pct = seen ? 100 * cpu / wall : -1;
  MPI_Allreduce(MPI_IN_PLACE, &pct, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (me == 0) {
    if (is_nbc)
      printf("test_overlap: nbc %s post_ms=%.3f blocking_ms=%.3f compute_ms=%.1f done_after_compute=%d/%d "
             "cpu_pct=%.1f\n", coll, post_ms, block_ms, compute_ms, done_after, reps, pct);
    else
      printf("test_overlap: tnbc return_ms=%.3f return_min_ms=%.3f\n", post_ms, post_min_ms);
    printf(errors ? "test_overlap: %d wrong bytes\n" : "test_overlap: passed\n", errors);
    fflush(stdout);
  }
  free(s);
  free(r);
  free(t_post);
  free(t_block);
  MPI_Finalize();
  return errors != 0;
}
