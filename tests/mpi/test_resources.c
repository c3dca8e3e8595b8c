/* test_resources: node segments and per-communicator state under stress.
 *
 *   basic                 a few collectives on a dup of MPI_COMM_WORLD, checked
 *   layout VAR V0 VREST   like basic, but rank 0 runs with VAR=V0 and the others with
 *                         VAR=VREST (set before MPI_Init): the node must agree to fall
 *                         back, not hang or crash
 *   full NCOMMS           NCOMMS live dups, each running a 512 KiB-per-rank allgather
 *                         and a 2 MiB allreduce (a small /dev/shm must not mean SIGBUS)
 *   threads NTHREADS ITERS  MPI_THREAD_MULTIPLE: each thread uses its own dup from
 *                         its first call on, all at once
 *   killsetup             the second rank of the node is SIGKILLed inside mcoll's
 *                         set-up, after the leader created the segment file (this
 *                         program interposes mmap): the job must end and leave no
 *                         file behind
 *   cycles N R            R rounds each of N times dup + allreduce 8 B + free,
 *                         alternately native (PMPI_*) and mcoll; prints medians
 *   splitcycles N R       the same with a split that reverses the ranks (a new group)
 *   live N                N live dups, each used once; prints RSS per communicator
 *                         (from the tenth on)
 *   maxlive               dups (each used once) until the host MPI or mcoll fails
 *   splitlive N, splitmaxlive   the same with reversing splits
 *
 * Prints "test_resources: N checks, E errors" (the suite's convention).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long checks, errors;
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;

static void check(int good, const char *fmt, ...) {
  pthread_mutex_lock(&count_lock);
  checks++;
  if (!good) {
    errors++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "test_resources: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
  }
  pthread_mutex_unlock(&count_lock);
}

/* bcast, allreduce, allgather at a few sizes on comm, results checked; salt varies
 * the data between calls and threads. */
static void run_collectives(MPI_Comm comm, int salt, size_t max_bytes) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  size_t max_ints = max_bytes / sizeof(int);
  int *buf = malloc(max_ints * sizeof(int) * (size_t)size), *out = malloc(max_ints * sizeof(int) * (size_t)size);
  if (!buf || !out) MPI_Abort(MPI_COMM_WORLD, 2);
  for (size_t n = 1; n <= max_ints; n *= 16) {
    int root = (int)(n + (size_t)salt) % size;
    for (size_t i = 0; i < n; i++) buf[i] = rank == root ? (int)(i * 7 + (size_t)salt) : -1;
    MPI_Bcast(buf, (int)n, MPI_INT, root, comm);
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad |= buf[i] != (int)(i * 7 + (size_t)salt);
    check(!bad, "bcast of %zu ints (salt %d) wrong on rank %d", n, salt, rank);

    for (size_t i = 0; i < n; i++) buf[i] = rank + (int)i + salt;
    MPI_Allreduce(buf, out, (int)n, MPI_INT, MPI_SUM, comm);
    bad = 0;
    for (size_t i = 0; i < n; i++)
      bad |= out[i] != size * (int)i + size * salt + size * (size - 1) / 2;
    check(!bad, "allreduce of %zu ints (salt %d) wrong on rank %d", n, salt, rank);

    MPI_Allgather(buf, (int)n, MPI_INT, out, (int)n, MPI_INT, comm);
    bad = 0;
    for (int r = 0; r < size; r++)
      for (size_t i = 0; i < n; i++) bad |= out[(size_t)r * n + i] != r + (int)i + salt;
    check(!bad, "allgather of %zu ints (salt %d) wrong on rank %d", n, salt, rank);
  }
  MPI_Barrier(comm);
  free(buf);
  free(out);
}

/* The allgather (512 KiB per rank) and allreduce (2 MiB) of the small-/dev/shm report. */
static void big_collectives(MPI_Comm comm, int salt) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  size_t block = (512 << 10) / sizeof(int), count = (2 << 20) / sizeof(int);
  int *in = malloc(count * sizeof(int)), *out = malloc(block * sizeof(int) * (size_t)size);
  int *sum = malloc(count * sizeof(int));
  if (!in || !out || !sum) MPI_Abort(MPI_COMM_WORLD, 2);
  for (size_t i = 0; i < count; i++) in[i] = rank * 3 + (int)(i % 1000) + salt;
  MPI_Allgather(in, (int)block, MPI_INT, out, (int)block, MPI_INT, comm);
  int bad = 0;
  for (int r = 0; r < size; r++)
    for (size_t i = 0; i < block; i++) bad |= out[(size_t)r * block + i] != r * 3 + (int)(i % 1000) + salt;
  check(!bad, "allgather 512 KiB per rank (comm %d) wrong on rank %d", salt, rank);
  MPI_Allreduce(in, sum, (int)count, MPI_INT, MPI_SUM, comm);
  bad = 0;
  for (size_t i = 0; i < count; i++)
    bad |= sum[i] != 3 * size * (size - 1) / 2 + size * ((int)(i % 1000) + salt);
  check(!bad, "allreduce 2 MiB (comm %d) wrong on rank %d", salt, rank);
  free(in);
  free(out);
  free(sum);
}

struct thread_job {
  MPI_Comm comm;
  int index, iters;
};

static void *thread_main(void *arg) {
  struct thread_job *job = arg;
  for (int it = 0; it < job->iters; it++) run_collectives(job->comm, job->index * 1000 + it, 64 << 10);
  return NULL;
}

/* killsetup: the node's second rank dies inside mcoll's set-up, as soon as it touches
 * the leader's segment file (by name, by descriptor or by mapping it: this program
 * interposes those calls; UCX rewrites mmap's relocations, hence more than one). */
static volatile int kill_in_setup;

static void die_in_setup(const char *how) {
  fprintf(stderr, "test_resources: killed inside the segment set-up (%s)\n", how);
  fflush(stderr);
  raise(SIGKILL);
}

static int is_mcoll_segment(int fd) {
  char link[64], target[256];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return 0;
  target[n] = '\0';
  return strstr(target, "/dev/shm/mcoll-") != NULL;
}

int shm_open(const char *name, int flags, mode_t mode) {
  static int (*real_shm_open)(const char *, int, mode_t);
  if (kill_in_setup && !(flags & O_CREAT) && strstr(name, "mcoll-")) die_in_setup("opening it");
  if (!real_shm_open) real_shm_open = (int (*)(const char *, int, mode_t))dlsym(RTLD_NEXT, "shm_open");
  return real_shm_open(name, flags, mode);
}

int fstat(int fd, struct stat *st) {
  if (kill_in_setup && is_mcoll_segment(fd)) die_in_setup("checking its size");
  return (int)syscall(SYS_fstat, fd, st);
}

void *mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset) {
  if (kill_in_setup && fd >= 0 && is_mcoll_segment(fd)) die_in_setup("mapping it");
  return (void *)syscall(SYS_mmap, addr, length, prot, flags, fd, offset);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long rss_kib(void) {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static const char *launcher_rank(void) {
  const char *r = getenv("OMPI_COMM_WORLD_RANK");
  if (!r) r = getenv("PMI_RANK");
  return r ? r : "0";
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "basic";
  if (!strcmp(mode, "layout") && argc > 4) setenv(argv[2], atoi(launcher_rank()) == 0 ? argv[3] : argv[4], 1);
  int provided = MPI_THREAD_SINGLE;
  if (!strcmp(mode, "threads")) {
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) {
      printf("test_resources: skipped, no MPI_THREAD_MULTIPLE\n");
      MPI_Finalize();
      return 0;
    }
  } else {
    MPI_Init(&argc, &argv);
  }
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  if (!strcmp(mode, "basic") || !strcmp(mode, "layout")) {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    for (int it = 0; it < 3; it++) run_collectives(comm, it, 1 << 20);
    run_collectives(MPI_COMM_WORLD, 7, 256 << 10);
    MPI_Comm_free(&comm);
  } else if (!strcmp(mode, "full")) {
    int ncomms = argc > 2 ? atoi(argv[2]) : 8;
    MPI_Comm *comms = calloc((size_t)ncomms, sizeof *comms);
    for (int i = 0; i < ncomms; i++) {
      MPI_Comm_dup(MPI_COMM_WORLD, &comms[i]);
      big_collectives(comms[i], i);
      if (rank == 0) fprintf(stderr, "test_resources: communicator %d done\n", i + 1);
    }
    for (int i = 0; i < ncomms; i++) MPI_Comm_free(&comms[i]);
    free(comms);
  } else if (!strcmp(mode, "threads")) {
    int nthreads = argc > 2 ? atoi(argv[2]) : 4, iters = argc > 3 ? atoi(argv[3]) : 20;
    pthread_t *threads = calloc((size_t)nthreads, sizeof *threads);
    struct thread_job *jobs = calloc((size_t)nthreads, sizeof *jobs);
    for (int t = 0; t < nthreads; t++) {
      MPI_Comm_dup(MPI_COMM_WORLD, &jobs[t].comm);
      jobs[t].index = t;
      jobs[t].iters = iters;
    }
    for (int t = 0; t < nthreads; t++) pthread_create(&threads[t], NULL, thread_main, &jobs[t]);
    for (int t = 0; t < nthreads; t++) pthread_join(threads[t], NULL);
    for (int t = 0; t < nthreads; t++) MPI_Comm_free(&jobs[t].comm);
    free(threads);
    free(jobs);
  } else if (!strcmp(mode, "killsetup")) {
    /* World rank 1 shares rank 0's node in the tests' single-machine runs. */
    kill_in_setup = rank == 1;
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    run_collectives(comm, 0, 64);
    MPI_Comm_free(&comm);
  } else if (!strcmp(mode, "cycles") || !strcmp(mode, "splitcycles")) {
    /* Rounds of n cycles, alternately through PMPI_* (native) and MPI_* (mcoll when
     * preloaded); the median round of each, slowest rank. splitcycles makes each
     * communicator by a split that reverses the ranks (a new group, never shared). */
    int split = !strcmp(mode, "splitcycles");
    int n = argc > 2 ? atoi(argv[2]) : 100, rounds = argc > 3 ? atoi(argv[3]) : 9;
    double times[2][64];
    if (rounds > 64) rounds = 64;
    double value = 1, sum = 0;
    for (int round = 0; round < 2 * rounds; round++) {
      int native = round % 2;
      MPI_Barrier(MPI_COMM_WORLD);
      double start = now_s();
      for (int i = 0; i < n; i++) {
        MPI_Comm comm;
        if (native) {
          if (split) PMPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &comm);
          else PMPI_Comm_dup(MPI_COMM_WORLD, &comm);
          PMPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, comm);
          PMPI_Comm_free(&comm);
        } else {
          if (split) MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &comm);
          else MPI_Comm_dup(MPI_COMM_WORLD, &comm);
          MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, comm);
          MPI_Comm_free(&comm);
        }
        check(sum == size, "allreduce on cycle %d: %g", i, sum);
      }
      double mine = (now_s() - start) / n, slowest = 0;
      MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      times[native][round / 2] = slowest;
    }
    for (int k = 0; k < 2; k++)
      for (int i = 0; i < rounds; i++)
        for (int j = i + 1; j < rounds; j++)
          if (times[k][j] < times[k][i]) {
            double t = times[k][i];
            times[k][i] = times[k][j];
            times[k][j] = t;
          }
    if (rank == 0)
      printf("test_resources: cycle %s+allreduce 8 B+free: mcoll %.1f us, native %.1f us (medians of %d rounds of %d)\n",
             split ? "split" : "dup", times[0][rounds / 2] * 1e6, times[1][rounds / 2] * 1e6, rounds, n);
  } else if (!strcmp(mode, "live") || !strcmp(mode, "maxlive") || !strcmp(mode, "splitlive") ||
             !strcmp(mode, "splitmaxlive")) {
    int split = !strncmp(mode, "split", 5);
    int n = argc > 2 ? atoi(argv[2]) : (strstr(mode, "maxlive") ? 100000 : 1000);
    MPI_Comm *comms = calloc((size_t)n, sizeof *comms);
    double value = 1, sum = 0;
    /* Memory per extra communicator: from the tenth on, so that what the first
     * ones set up once (the node segment) is not spread over the others. */
    const int first = 10;
    long rss_before = rss_kib();
    int made = 0;
    for (; made < n; made++) {
      int made_ok = split ? MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &comms[made])
                          : MPI_Comm_dup(MPI_COMM_WORLD, &comms[made]);
      if (made_ok != MPI_SUCCESS) break;
      MPI_Comm_set_errhandler(comms[made], MPI_ERRORS_RETURN);
      if (MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, comms[made]) != MPI_SUCCESS) {
        made++;
        break;
      }
      check(sum == size, "allreduce on communicator %d: %g", made, sum);
      if (made + 1 == first) rss_before = rss_kib();
    }
    long per_comm = made > first ? (rss_kib() - rss_before) / (made - first) : 0, most = 0;
    MPI_Reduce(&per_comm, &most, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
      printf("test_resources: %d live communicators, RSS %ld KiB per communicator (largest rank)\n", made, most);
    for (int i = 0; i < made; i++)
      if (comms[i] != MPI_COMM_NULL) MPI_Comm_free(&comms[i]);
    free(comms);
  } else {
    if (rank == 0) fprintf(stderr, "test_resources: unknown mode %s\n", mode);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  long all_checks = 0, all_errors = 0;
  MPI_Reduce(&checks, &all_checks, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&errors, &all_errors, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("test_resources: %ld checks, %ld errors\n", all_checks, all_errors);
  MPI_Finalize();
  return 0;
}
