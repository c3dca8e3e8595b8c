/* test_tnbc: T-NBC's hazards (tnbc/tnbc.h), one case per run, each checking the
 * received data against the values every rank computes itself (the reference: the
 * same program with MCOLL_TNBC=0 or natively must pass too).
 *
 * Every alltoall here overwrites its send buffer right after the call (T-NBC sends
 * from it in place, read-only: the write waits for the sends) and frees it.
 *
 * usage: test_tnbc CASE [--block BYTES]
 * cases:
 *   touch     alltoall, then the blocks read in order (and bcast, allgather, allreduce)
 *   late      alltoall, then the last block read first, after a short computation
 *   free      free() of the receive buffer right after the call (never read)
 *   realloc   realloc() to twice the size right after the call: the data moves along
 *   munmap    a buffer of its own mmap, munmap()ed right after the call
 *   next      the receive buffer as the next alltoall's send buffer, then in a
 *             point-to-point exchange with a neighbour (MPI_Sendrecv), then as
 *             the buffer of an MPI_Irecv
 *   read      read() from a file into the middle of the receive buffer, write() of
 *             another part to a file, fread() too: no EFAULT, bytes as expected
 *   thread    another thread memcpy()s the buffer while this one waits for it
 *   stack     the receive buffer on the stack (never protected)
 *   shared    the receive buffer in a MAP_SHARED mapping (never protected)
 *   handler   the application's own SIGSEGV handler, set after MPI_Init, still gets
 *             its own faults (chained), while T-NBC's are handled
 *   fork      a child forked right after the call reads the buffer
 *   exit      MPI_Finalize right after the call, buffer never read
 *   noncontig a receive type that is not contiguous (never protected; same protocol)
 *   colls     allgather and allreduce (SUM of doubles), each also in place
 *   alltoallv blocks of different sizes placed in reverse rank order with gaps, read
 *             in address order (gaps keep their bytes)
 *   compute   blocks of 64 KiB, 256 KiB and 1 MiB, each collective T-NBC takes (alltoall,
 *             alltoallv, allgather, allgatherv, bcast, allreduce): clear the receive
 *             buffer, the call, compute, read the result, allreduce of one double
 *             (across hosts over TCP: the host MPI's progress on any thread meets
 *             buffers T-NBC holds)
 *   threads   --threads N application threads (MPI_THREAD_MULTIPLE), each on its own
 *             duplicate of MPI_COMM_WORLD: blocking alltoalls and allreduces
 *   sigblock  a thread that blocks every signal reads the receive buffer
 *   syscalls  right after an alltoall: MPI_File_write_at of the receive buffer, pwrite(),
 *             sendmsg() from it, open() of a path received in it, pipe() with its fd
 *             array in it
 *   mprotect  the application makes the receive buffer read-only right after the call:
 *             the data is right and a write faults into its own handler
 */
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static int rank, size, errors;
static size_t block = 256 * 1024; /* bytes per alltoall block */
static int nthreads = 2;         /* case threads */
static int compute_spins = 3000000; /* case compute: the work between call and read */

#define FAIL(...)                                                                 \
  do {                                                                            \
    if (errors++ < 10) {                                                          \
      fprintf(stderr, "test_tnbc: FAIL rank %d: ", rank);                         \
      fprintf(stderr, __VA_ARGS__);                                               \
      fprintf(stderr, "\n");                                                      \
    }                                                                             \
  } while (0)

/* The word i of the block that src sends to dst in round iter. */
static uint32_t value(int src, int dst, size_t i, int iter) {
  return (uint32_t)(src * 7919 + dst * 104729 + iter * 13) ^ (uint32_t)(i * 2654435761u);
}

static void fill_send(uint32_t *send, int iter) {
  size_t words = block / 4;
  for (int dst = 0; dst < size; dst++)
    for (size_t i = 0; i < words; i++) send[dst * words + i] = value(rank, dst, i, iter);
}

/* Whether block src of buf holds the words from src to dst of round iter: the first
 * wrong word's index, or -1. */
static long first_wrong(const uint32_t *buf, int src, int dst, int iter) {
  size_t words = block / 4;
  for (size_t i = 0; i < words; i++)
    if (buf[src * words + i] != value(src, dst, i, iter)) return (long)i;
  return -1;
}

/* Checks every block of buf (from each source to dst). */
static void check_all_to(const uint32_t *buf, int dst, int iter, const char *what) {
  for (int src = 0; src < size; src++) {
    long i = first_wrong(buf, src, dst, iter);
    if (i >= 0)
      FAIL("%s: block %d word %ld is %08x, expected %08x", what, src, i, buf[src * (block / 4) + i],
           value(src, dst, (size_t)i, iter));
  }
}

/* A receive buffer of this rank: block src, or all. */
static void check_block(const uint32_t *recv, int src, int iter, const char *what) {
  long i = first_wrong(recv, src, rank, iter);
  if (i >= 0) FAIL("%s: block %d word %ld", what, src, i);
}

static void check_all(const uint32_t *recv, int iter, const char *what) {
  check_all_to(recv, rank, iter, what);
}

/* For a child process (no MPI, no output): whether recv is all as received. */
static int all_right(const uint32_t *recv, int iter) {
  for (int src = 0; src < size; src++)
    if (first_wrong(recv, src, rank, iter) >= 0) return 0;
  return 1;
}

/* The block of a v collective that word i of the receive buffer lies in, or -1. */
static int source_of(size_t i, const int *counts, const int *displs) {
  for (int s = 0; s < size; s++)
    if (i >= (size_t)displs[s] && i < (size_t)(displs[s] + counts[s])) return s;
  return -1;
}

static uint32_t *alltoall_on(uint32_t *recv, int iter, MPI_Comm comm) {
  uint32_t *send = malloc(block * size);
  fill_send(send, iter);
  MPI_Alltoall(send, (int)(block / 4), MPI_UINT32_T, recv, (int)(block / 4), MPI_UINT32_T, comm);
  /* The send buffer may change at once (T-NBC copied it). */
  memset(send, 0xEE, block * size);
  free(send);
  return recv;
}

static uint32_t *alltoall_into(uint32_t *recv, int iter) {
  return alltoall_on(recv, iter, MPI_COMM_WORLD);
}

/* Unrelated work, so that the call is still in flight when the buffer is used. */
static double spin(int n) {
  volatile double x = 1;
  for (int i = 0; i < n; i++) x = x * 1.0000001 + 1e-9;
  return x;
}

static void case_touch(void) {
  uint32_t *recv = malloc(block * size);
  for (int iter = 0; iter < 3; iter++) {
    alltoall_into(recv, iter);
    check_all(recv, iter, "alltoall touch");
  }
  free(recv);
  /* bcast of 1 MiB + 123 bytes (partial last page) from each root */
  size_t n = (1 << 20) + 123;
  unsigned char *b = malloc(n);
  for (int root = 0; root < size; root++) {
    for (size_t i = 0; i < n; i++) b[i] = rank == root ? (unsigned char)(i * 31 + root) : 0;
    MPI_Bcast(b, (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
    if (rank == root) memset(b, 0, n); /* the root's buffer is free at once */
    else
      for (size_t i = 0; i < n; i++)
        if (b[i] != (unsigned char)(i * 31 + root)) {
          FAIL("bcast root %d byte %zu", root, i);
          break;
        }
  }
  free(b);
}

/* The order case_order reads its blocks in: reversed, the first two swapped when
 * there are more than 2 (2 ranks: 1,0; 3: 1,2,0; 4: 2,3,1,0). */
static int read_order(int k) {
  int src = size - 1 - k;
  if (size > 2 && k < 2) src = size - 2 + k;
  return src;
}

/* MCOLL_TNBC_TRACE (tests/py/test_tnbc_trace.py): two calls from one site, each
 * followed by reading one word in the middle of every block in read_order. */
static void case_order(void) {
  size_t words = block / 4;
  uint32_t *recv = malloc(block * size);
  uint32_t sum = 0;
  for (int iter = 0; iter < 2; iter++) {
    alltoall_into(recv, iter);
    for (int k = 0; k < size; k++) {
      int src = read_order(k);
      uint32_t got = recv[src * words + words / 2];
      if (got != value(src, rank, words / 2, iter)) FAIL("order: block %d is %08x", src, got);
      sum += got;
    }
    check_all(recv, iter, "order");
  }
  if (rank == 0) {
    printf("test_tnbc: read order");
    for (int k = 0; k < size; k++) printf(k ? ",%d" : " %d", read_order(k));
    printf(" (sum %08x)\n", sum);
  }
  free(recv);
}

static void case_late(void) {
  uint32_t *recv = malloc(block * size);
  alltoall_into(recv, 1);
  spin(200000);
  for (int src = size - 1; src >= 0; src--) check_block(recv, src, 1, "late");
  free(recv);
}

static void case_free(void) {
  for (int iter = 0; iter < 4; iter++) {
    uint32_t *recv = malloc(block * size);
    alltoall_into(recv, iter);
    free(recv);
  }
  /* still right afterwards */
  uint32_t *recv = malloc(block * size);
  alltoall_into(recv, 9);
  check_all(recv, 9, "after free");
  free(recv);
}

static void case_realloc(void) {
  uint32_t *recv = malloc(block * size);
  alltoall_into(recv, 2);
  recv = realloc(recv, 2 * block * size);
  check_all(recv, 2, "realloc");
  free(recv);
}

static void case_munmap(void) {
  for (int iter = 0; iter < 3; iter++) {
    uint32_t *recv = mmap(NULL, block * size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    alltoall_into(recv, iter);
    if (iter == 2) check_all(recv, iter, "munmap");
    if (munmap(recv, block * size) != 0) FAIL("munmap: %s", strerror(errno));
  }
}

static void case_next(void) {
  uint32_t *a = malloc(block * size), *b = malloc(block * size);
  alltoall_into(a, 3);
  /* a as the next send buffer: rank r's block for d is what d... sent to r; back again */
  MPI_Alltoall(a, (int)(block / 4), MPI_UINT32_T, b, (int)(block / 4), MPI_UINT32_T, MPI_COMM_WORLD);
  size_t words = block / 4;
  for (int src = 0; src < size && !errors; src++)
    for (size_t i = 0; i < words; i++)
      if (b[src * words + i] != value(rank, src, i, 3)) {
        FAIL("next alltoall: block %d word %zu", src, i);
        break;
      }
  /* a (again protected) straight into point-to-point */
  alltoall_into(a, 4);
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  MPI_Sendrecv(a, (int)(block * size / 4), MPI_UINT32_T, right, 5, b, (int)(block * size / 4),
               MPI_UINT32_T, left, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  check_all_to(b, left, 4, "sendrecv");
  /* b protected, then received into by MPI_Irecv (the host may write it by single copy) */
  alltoall_into(b, 5);
  MPI_Request reqs[2];
  MPI_Irecv(b, (int)(block * size / 4), MPI_UINT32_T, left, 6, MPI_COMM_WORLD, &reqs[0]);
  MPI_Isend(a, (int)(block * size / 4), MPI_UINT32_T, right, 6, MPI_COMM_WORLD, &reqs[1]);
  MPI_Status statuses[2];
  MPI_Waitall(2, reqs, statuses);
  check_all_to(b, left, 4, "irecv");
  free(a);
  free(b);
}

static void case_read(void) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/test_tnbc_%d_%d", (int)getpid(), rank);
  size_t n = block; /* into the middle of the buffer, across blocks */
  unsigned char *pattern = malloc(n);
  for (size_t i = 0; i < n; i++) pattern[i] = (unsigned char)(i * 7 + 1);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || write(fd, pattern, n) != (ssize_t)n) FAIL("writing %s", path);
  uint32_t *recv = malloc(block * size);
  size_t at = block / 2;
  alltoall_into(recv, 5);
  /* write() from the buffer first (its bytes must be the received ones) */
  int out = open(path, O_RDWR), out2;
  char path2[80];
  snprintf(path2, sizeof path2, "%s.out", path);
  out2 = open(path2, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (write(out2, recv, block * size) != (ssize_t)(block * size)) FAIL("write: %s", strerror(errno));
  uint32_t *back = malloc(block * size);
  if (pread(out2, back, block * size, 0) != (ssize_t)(block * size)) FAIL("pread back");
  check_all(back, 5, "write from the buffer");
  close(out2);
  unlink(path2);
  /* read() into it, after a new call */
  alltoall_into(recv, 6);
  ssize_t got = read(out, (char *)recv + at, n);
  if (got != (ssize_t)n) FAIL("read into the buffer: %zd (%s)", got, strerror(errno));
  else if (memcmp((char *)recv + at, pattern, n) != 0) FAIL("read: wrong bytes");
  /* the rest as received */
  size_t words = block / 4;
  for (size_t w = 0; w < words * size; w++) {
    if (w * 4 >= at && w * 4 < at + n) continue;
    int src = (int)(w / words);
    if (recv[w] != value(src, rank, w % words, 6)) {
      FAIL("read: word %zu not as received", w);
      break;
    }
  }
  /* fread() into it */
  alltoall_into(recv, 7);
  FILE *f = fopen(path, "rb");
  if (!f || fread((char *)recv + at, 1, n, f) != n) FAIL("fread into the buffer");
  else if (memcmp((char *)recv + at, pattern, n) != 0) FAIL("fread: wrong bytes");
  if (f) fclose(f);
  close(out);
  close(fd);
  unlink(path);
  free(back);
  free(recv);
  free(pattern);
}

static uint32_t *thread_src, *thread_dst;
static void *copier(void *arg) {
  (void)arg;
  memcpy(thread_dst, thread_src, block * size);
  return NULL;
}

static void case_thread(void) {
  thread_src = malloc(block * size);
  thread_dst = malloc(block * size);
  alltoall_into(thread_src, 8);
  pthread_t t;
  pthread_create(&t, NULL, copier, NULL);
  pthread_join(t, NULL);
  check_all(thread_dst, 8, "thread copy");
  free(thread_src);
  free(thread_dst);
}

static void case_stack(void) {
  if (block * size > 2 << 20) return;
  uint32_t recv[(2 << 20) / 4];
  alltoall_into(recv, 10);
  check_all(recv, 10, "stack");
}

static void case_shared(void) {
  uint32_t *recv = mmap(NULL, block * size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  alltoall_into(recv, 11);
  /* a child sees the data too (a shared mapping is never protected) */
  pid_t pid = fork();
  if (pid == 0) _exit(all_right(recv, 11) ? 0 : 3);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) FAIL("shared: the child saw other data");
  check_all(recv, 11, "shared");
  munmap(recv, block * size);
}

static sigjmp_buf handler_jump;
static volatile sig_atomic_t app_faults;
static void app_handler(int sig, siginfo_t *si, void *uc) {
  (void)sig, (void)si, (void)uc;
  app_faults++;
  siglongjmp(handler_jump, 1);
}

static void case_handler(void) {
  struct sigaction sa = {.sa_sigaction = app_handler, .sa_flags = SA_SIGINFO}, old;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &old);
  struct sigaction now;
  sigaction(SIGSEGV, NULL, &now);
  if (now.sa_sigaction != app_handler) FAIL("handler: sigaction does not report the application's");
  uint32_t *recv = malloc(block * size);
  alltoall_into(recv, 12);
  check_all(recv, 12, "handler");
  /* a fault of its own: the application's handler gets it */
  char *guard = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (sigsetjmp(handler_jump, 1) == 0) {
    volatile char c = guard[10];
    (void)c;
    FAIL("handler: no fault");
  }
  if (app_faults != 1) FAIL("handler: the application's handler ran %d times", (int)app_faults);
  munmap(guard, 4096);
  alltoall_into(recv, 13);
  check_all(recv, 13, "handler after");
  free(recv);
  sigaction(SIGSEGV, &old, NULL);
}

static void case_fork(void) {
  uint32_t *recv = malloc(block * size);
  alltoall_into(recv, 14);
  pid_t pid = fork();
  if (pid == 0) _exit(all_right(recv, 14) ? 0 : 3);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) FAIL("fork: the child saw other data (status %d)", status);
  check_all(recv, 14, "fork parent");
  free(recv);
}

static void case_noncontig(void) {
  /* every other word: a vector type on the receive side, plain words on the send side */
  MPI_Datatype every_other, resized;
  MPI_Type_vector((int)(block / 4), 1, 2, MPI_UINT32_T, &every_other);
  MPI_Type_create_resized(every_other, 0, (MPI_Aint)(block * 2), &resized);
  MPI_Type_commit(&resized);
  uint32_t *send = malloc(block * size), *recv = calloc(1, 2 * block * size);
  fill_send(send, 15);
  MPI_Alltoall(send, (int)(block / 4), MPI_UINT32_T, recv, 1, resized, MPI_COMM_WORLD);
  size_t words = block / 4;
  for (int src = 0; src < size && !errors; src++)
    for (size_t i = 0; i < words; i++)
      if (recv[src * 2 * words + 2 * i] != value(src, rank, i, 15)) {
        FAIL("noncontig: block %d word %zu", src, i);
        break;
      }
  MPI_Type_free(&resized);
  MPI_Type_free(&every_other);
  free(send);
  free(recv);
}

static void case_colls(void) {
  size_t words = block / 4;
  uint32_t *mine = malloc(block), *all = malloc(block * size);
  for (int inplace = 0; inplace < 2; inplace++) {
    for (size_t i = 0; i < words; i++) mine[i] = value(rank, 0, i, 20 + inplace);
    if (inplace) memcpy(all + rank * words, mine, block);
    MPI_Allgather(inplace ? MPI_IN_PLACE : mine, (int)words, MPI_UINT32_T, all, (int)words,
                  MPI_UINT32_T, MPI_COMM_WORLD);
    memset(mine, 0, block);
    check_all_to(all, 0, 20 + inplace, inplace ? "allgather in place" : "allgather");
  }
  size_t n = block / 8 * 3 + 5; /* doubles, a partial last page */
  double *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
  for (int inplace = 0; inplace < 2; inplace++) {
    for (size_t i = 0; i < n; i++) (inplace ? out : in)[i] = (double)(rank + 1) * (double)(i % 1000);
    MPI_Allreduce(inplace ? MPI_IN_PLACE : in, out, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double ranks = (double)size * (size + 1) / 2;
    for (size_t i = 0; i < n; i++)
      if (out[i] != ranks * (double)(i % 1000)) {
        FAIL("allreduce%s: element %zu is %g", inplace ? " in place" : "", i, out[i]);
        break;
      }
  }
  free(in);
  free(out);
  free(mine);
  free(all);
}

/* Words from src to dst in the alltoallv case: 0.5 to 1.5 blocks. */
static size_t v_words(int src, int dst) { return block / 8 * (size_t)(1 + (src + 2 * dst) % 3); }

static void case_alltoallv(void) {
  int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size);
  int *rc = malloc(sizeof(int) * size), *rd = malloc(sizeof(int) * size);
  size_t at = 0;
  for (int d = 0; d < size; d++) {
    sc[d] = (int)v_words(rank, d);
    sd[d] = (int)at;
    at += (size_t)sc[d];
  }
  uint32_t *send = malloc(at * 4);
  for (int d = 0; d < size; d++)
    for (int i = 0; i < sc[d]; i++) send[sd[d] + i] = value(rank, d, (size_t)i, 30);
  /* receive blocks from the last source first, 1000 words apart */
  at = 1000;
  for (int s = size - 1; s >= 0; s--) {
    rc[s] = (int)v_words(s, rank);
    rd[s] = (int)at;
    at += (size_t)rc[s] + 1000;
  }
  uint32_t *recv = malloc(at * 4);
  for (size_t i = 0; i < at; i++) recv[i] = 0xABCD1234u;
  MPI_Alltoallv(send, sc, sd, MPI_UINT32_T, recv, rc, rd, MPI_UINT32_T, MPI_COMM_WORLD);
  memset(send, 0, (size_t)(sd[size - 1] + sc[size - 1]) * 4);
  for (size_t i = 0; i < at && !errors; i++) { /* address order, gaps kept */
    int src = source_of(i, rc, rd);
    uint32_t want = src < 0 ? 0xABCD1234u : value(src, rank, i - (size_t)rd[src], 30);
    if (recv[i] != want) FAIL("alltoallv: word %zu (source %d) is %08x, expected %08x", i, src, recv[i], want);
  }
  free(send);
  free(recv);
  free(sc);
  free(sd);
  free(rc);
  free(rd);
}

/* allgatherv: blocks of different sizes, not page-aligned, placed from the last
 * source first with gaps; sent from a buffer and in place. */
static void case_allgatherv(void) {
  int *rc = malloc(sizeof(int) * size), *rd = malloc(sizeof(int) * size);
  size_t at = 1000;
  for (int s = size - 1; s >= 0; s--) {
    rc[s] = (int)(block / 8 * (size_t)(1 + s % 3) + 17 * (size_t)s);
    rd[s] = (int)at;
    at += (size_t)rc[s] + 1000;
  }
  uint32_t *mine = malloc((size_t)rc[rank] * 4), *recv = malloc(at * 4);
  for (int inplace = 0; inplace < 2; inplace++) {
    int iter = 40 + inplace;
    for (size_t i = 0; i < at; i++) recv[i] = 0xABCD1234u;
    for (int i = 0; i < rc[rank]; i++) mine[i] = value(rank, 0, (size_t)i, iter);
    if (inplace) memcpy(recv + rd[rank], mine, (size_t)rc[rank] * 4);
    MPI_Allgatherv(inplace ? MPI_IN_PLACE : mine, rc[rank], MPI_UINT32_T, recv, rc, rd,
                   MPI_UINT32_T, MPI_COMM_WORLD);
    memset(mine, 0, (size_t)rc[rank] * 4);
    for (size_t i = at; i-- > 0 && !errors;) { /* from the end, gaps kept */
      int src = source_of(i, rc, rd);
      uint32_t want = src < 0 ? 0xABCD1234u : value(src, 0, i - (size_t)rd[src], iter);
      if (recv[i] != want)
        FAIL("allgatherv%s: word %zu (source %d) is %08x, expected %08x", inplace ? " in place" : "",
             i, src, recv[i], want);
    }
  }
  free(mine);
  free(recv);
  free(rc);
  free(rd);
}

/* OpenMP threads read the received buffer while it is still protected, each from a
 * different place (dynamic chunks from the end), rank 0's faulting as the others
 * join the call late; rank 0 prints
 * a checksum that must equal T-NBC off's. */
static void case_openmp(void) {
#ifndef _OPENMP
  FAIL("openmp: test_tnbc was built without OpenMP");
#else
  size_t words = block / 4;
  uint32_t *recv = malloc(block * size);
  uint64_t sum = 0;
  int threads = 0;
  for (int iter = 0; iter < 3; iter++) {
    if (rank != 0) spin(2000000); /* (rank 0's threads find its blocks missing) */
    alltoall_into(recv, 50 + iter);
    long bad = 0;
    uint64_t part = 0;
#pragma omp parallel reduction(+ : bad, part)
    {
#pragma omp single
      threads = omp_get_num_threads();
#pragma omp for schedule(dynamic, 4096)
      for (long i = (long)(words * size) - 1; i >= 0; i--) {
        int src = (int)((size_t)i / words);
        uint32_t got = recv[i];
        bad += got != value(src, rank, (size_t)i % words, 50 + iter);
        part += got;
      }
    }
    if (bad) FAIL("openmp: %ld wrong words in round %d", bad, iter);
    sum += part;
  }
  if (threads < 2) FAIL("openmp: only %d thread", threads);
  uint64_t total = 0;
  MPI_Reduce(&sum, &total, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("test_tnbc: openmp threads %d checksum %016llx\n", threads, (unsigned long long)total);
  free(recv);
#endif
}

/* One call of case_compute: coll on buffers of block bytes per rank, receive buffer
 * cleared first, then unrelated work, then the result read and checked. */
static void compute_one(const char *coll, uint32_t *send, uint32_t *recv, int iter) {
  size_t words = block / 4;
  int *counts = malloc(sizeof(int) * size), *displs = malloc(sizeof(int) * size);
  for (int r = 0; r < size; r++) counts[r] = (int)words, displs[r] = r * (int)words;
  int gathered = strcmp(coll, "alltoall") && strcmp(coll, "alltoallv"); /* (blocks from rank to 0) */
  if (gathered)
    for (size_t i = 0; i < words; i++) send[i] = value(rank, 0, i, iter);
  else
    fill_send(send, iter);
  memset(recv, 0, block * size);
  if (!strcmp(coll, "alltoall"))
    MPI_Alltoall(send, (int)words, MPI_UINT32_T, recv, (int)words, MPI_UINT32_T, MPI_COMM_WORLD);
  else if (!strcmp(coll, "alltoallv"))
    MPI_Alltoallv(send, counts, displs, MPI_UINT32_T, recv, counts, displs, MPI_UINT32_T,
                  MPI_COMM_WORLD);
  else if (!strcmp(coll, "allgather"))
    MPI_Allgather(send, (int)words, MPI_UINT32_T, recv, (int)words, MPI_UINT32_T, MPI_COMM_WORLD);
  else if (!strcmp(coll, "allgatherv"))
    MPI_Allgatherv(send, (int)words, MPI_UINT32_T, recv, counts, displs, MPI_UINT32_T,
                   MPI_COMM_WORLD);
  else if (!strcmp(coll, "bcast")) { /* the root's buffer holds every block */
    if (rank == 0)
      for (int s = 0; s < size; s++)
        for (size_t i = 0; i < words; i++) recv[s * words + i] = value(s, 0, i, iter);
    MPI_Bcast(recv, (int)(words * size), MPI_UINT32_T, 0, MPI_COMM_WORLD);
  } else { /* allreduce: SUM of the words as doubles, exact */
    double *in = (double *)send, *out = (double *)recv;
    size_t n = block * size / sizeof(double);
    for (size_t i = 0; i < n; i++) in[i] = (double)(rank + 1) * (double)(i % 4096);
    MPI_Allreduce(in, out, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    spin(compute_spins);
    double ranks = (double)size * (size + 1) / 2;
    for (size_t i = 0; i < n; i++)
      if (out[i] != ranks * (double)(i % 4096)) {
        FAIL("compute %s: element %zu is %g", coll, i, out[i]);
        break;
      }
  }
  if (strcmp(coll, "allreduce")) {
    spin(compute_spins);
    if (gathered) check_all_to(recv, 0, iter, coll);
    else check_all(recv, iter, coll);
  }
  free(counts);
  free(displs);
}

static void case_compute(void) {
  static const char *const colls[] = {"alltoall", "alltoallv", "allgather", "allgatherv", "bcast",
                                      "allreduce"};
  size_t saved = block;
  for (block = 64 * 1024; block <= 1024 * 1024; block *= 4) {
    uint32_t *recv = malloc(block * size), *send = malloc(block * size);
    for (int iter = 0; iter < 2; iter++)
      for (size_t c = 0; c < sizeof colls / sizeof colls[0]; c++) {
        /* (the send buffer stays as it is: its blocks may still be going out in the
         * allreduce) */
        compute_one(colls[c], send, recv, 80 + iter);
        double mine = rank + 1.0, sum = 0;
        MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (sum != size * (size + 1) / 2.0) FAIL("compute: allreduce gave %g", sum);
      }
    free(send);
    free(recv);
  }
  block = saved;
}

/* One application thread of case_threads: blocking calls on its own communicator. */
static MPI_Comm thread_comms[64];
static int thread_iters = 4;
static void *thread_calls(void *arg) {
  int t = (int)(intptr_t)arg;
  uint32_t *recv = malloc(block * size);
  for (int k = 0; k < thread_iters; k++) {
    int iter = 100 + t * 64 + k;
    alltoall_on(recv, iter, thread_comms[t]);
    check_all(recv, iter, "threads");
    double mine = rank + t, sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, thread_comms[t]);
    if (sum != size * (size - 1) / 2.0 + (double)size * t) FAIL("threads: allreduce %d gave %g", t, sum);
  }
  free(recv);
  return NULL;
}

static void case_threads(void) {
  int provided;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    FAIL("threads: MPI_THREAD_MULTIPLE not provided (%d)", provided);
    return;
  }
  if (nthreads > 64) nthreads = 64;
  for (int t = 0; t < nthreads; t++) MPI_Comm_dup(MPI_COMM_WORLD, &thread_comms[t]);
  pthread_t th[64];
  for (int t = 0; t < nthreads; t++) pthread_create(&th[t], NULL, thread_calls, (void *)(intptr_t)t);
  for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
  for (int t = 0; t < nthreads; t++) MPI_Comm_free(&thread_comms[t]);
}

/* A helper thread that blocks every signal (as thread pools do) reads the buffer. */
static pthread_mutex_t go_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go_cond = PTHREAD_COND_INITIALIZER;
static uint32_t *go_buf;
static int go_iter = -1;
static void *blocked_reader(void *arg) {
  (void)arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  pthread_mutex_lock(&go_lock);
  while (go_iter < 0) pthread_cond_wait(&go_cond, &go_lock);
  pthread_mutex_unlock(&go_lock);
  check_all(go_buf, go_iter, "sigblock");
  return NULL;
}

static void case_sigblock(void) {
  uint32_t *recv = malloc(block * size);
  pthread_t t;
  pthread_create(&t, NULL, blocked_reader, NULL);
  alltoall_into(recv, 90);
  pthread_mutex_lock(&go_lock);
  go_buf = recv;
  go_iter = 90;
  pthread_cond_signal(&go_cond);
  pthread_mutex_unlock(&go_lock);
  pthread_join(t, NULL);
  free(recv);
}

/* System calls and MPI-IO on a receive buffer right after the call. */
static void case_syscalls(void) {
  size_t bytes = block * size, words = block / 4;
  uint32_t *recv = malloc(bytes), *back = malloc(bytes);
  char path[64];
  snprintf(path, sizeof path, "/tmp/test_tnbc_sys_%d_%d", (int)getpid(), rank);
  /* MPI_File_write_at */
  MPI_File fh;
  if (MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh) != MPI_SUCCESS) {
    FAIL("syscalls: MPI_File_open %s", path);
    return;
  }
  alltoall_into(recv, 60);
  MPI_Status st;
  int count = -1, err = MPI_File_write_at(fh, 0, recv, (int)bytes, MPI_BYTE, &st);
  MPI_Get_count(&st, MPI_BYTE, &count);
  if (err != MPI_SUCCESS || count != (int)bytes) FAIL("syscalls: MPI_File_write_at: error %d, %d of %zu bytes", err, count, bytes);
  memset(back, 0, bytes);
  MPI_File_read_at(fh, 0, back, (int)bytes, MPI_BYTE, &st);
  check_all(back, 60, "MPI_File_write_at");
  MPI_File_close(&fh);
  /* pwrite */
  int fd = open(path, O_RDWR);
  alltoall_into(recv, 61);
  ssize_t n = pwrite(fd, recv, bytes, 0);
  if (n != (ssize_t)bytes) FAIL("syscalls: pwrite: %zd of %zu bytes (%s)", n, bytes, strerror(errno));
  memset(back, 0, bytes);
  if (pread(fd, back, bytes, 0) != (ssize_t)bytes) FAIL("syscalls: pread back");
  check_all(back, 61, "pwrite");
  close(fd);
  unlink(path);
  /* sendmsg from the middle of the last block */
  int sv[2];
  socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  alltoall_into(recv, 62);
  size_t part = 16384, from = (size_t)(size - 1) * words + words / 2;
  struct iovec iov = {.iov_base = recv + from, .iov_len = part};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  n = sendmsg(sv[0], &msg, 0);
  if (n != (ssize_t)part) FAIL("syscalls: sendmsg: %zd (%s)", n, strerror(errno));
  else if (recvfrom(sv[1], back, part, MSG_WAITALL, NULL, NULL) != (ssize_t)part) FAIL("syscalls: recv of the sendmsg");
  else
    for (size_t i = 0; i < part / 4; i++)
      if (back[i] != value(size - 1, rank, words / 2 + i, 62)) {
        FAIL("syscalls: sendmsg word %zu", i);
        break;
      }
  close(sv[0]);
  close(sv[1]);
  /* open() of a path each sender put in the middle of its block */
  uint32_t *send = malloc(bytes);
  fill_send(send, 63);
  for (int d = 0; d < size; d++) strcpy((char *)(send + d * words + words / 2), "/dev/null");
  MPI_Alltoall(send, (int)words, MPI_UINT32_T, recv, (int)words, MPI_UINT32_T, MPI_COMM_WORLD);
  free(send);
  fd = open((char *)(recv + (size_t)(size - 1) * words + words / 2), O_RDONLY);
  if (fd < 0) FAIL("syscalls: open of a received path: %s", strerror(errno));
  else close(fd);
  /* pipe() with its fd array in the middle of the last block */
  alltoall_into(recv, 64);
  int *fds = (int *)(recv + (size_t)(size - 1) * words + words / 2);
  if (pipe(fds) != 0) FAIL("syscalls: pipe: %s", strerror(errno));
  else {
    close(fds[0]);
    close(fds[1]);
  }
  for (size_t i = 0; i < words; i++)
    if ((i < words / 2 || i >= words / 2 + 2) && recv[(size_t)(size - 1) * words + i] != value(size - 1, rank, i, 64)) {
      FAIL("syscalls: pipe: word %zu of the last block", i);
      break;
    }
  free(back);
  free(recv);
}

/* Whether writing at faults into the application's handler. */
static int write_faults(volatile char *at) {
  int faults = (int)app_faults;
  if (sigsetjmp(handler_jump, 1) == 0) *at = 1;
  return (int)app_faults != faults;
}

/* The application's own mprotect of a receive buffer still in flight holds. */
static void case_mprotect(void) {
  struct sigaction sa = {.sa_sigaction = app_handler, .sa_flags = SA_SIGINFO}, old;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &old);
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  for (int iter = 0; iter < 3; iter++) {
    uint32_t *recv = malloc(block * size);
    uintptr_t lo = ((uintptr_t)recv + page - 1) & ~(page - 1);
    uintptr_t hi = ((uintptr_t)recv + block * size) & ~(page - 1);
    alltoall_into(recv, 70 + iter);
    if (mprotect((void *)lo, hi - lo, PROT_READ) != 0) FAIL("mprotect: %s", strerror(errno));
    check_all(recv, 70 + iter, "mprotect");
    /* writes into the read-only pages fault into the application's handler */
    for (uintptr_t at = lo; at < hi; at += (hi - lo) / 4 & ~(page - 1))
      if (!write_faults((volatile char *)at)) {
        FAIL("mprotect: page at offset %zu writable in round %d", (size_t)(at - (uintptr_t)recv), iter);
        break;
      }
    check_all(recv, 70 + iter, "mprotect after");
    mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE);
    free(recv);
  }
  sigaction(SIGSEGV, &old, NULL);
}

int main(int argc, char **argv) {
  const char *which = argc > 1 ? argv[1] : "touch";
  if (!strcmp(which, "threads")) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  } else {
    MPI_Init(&argc, &argv);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--block")) block = (size_t)atol(argv[i + 1]) & ~(size_t)3;
    if (!strcmp(argv[i], "--threads")) nthreads = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--iters")) thread_iters = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--spin")) compute_spins = atoi(argv[i + 1]);
  }
  if (!strcmp(which, "exit")) {
    uint32_t *recv = malloc(block * size);
    alltoall_into(recv, 16);
    MPI_Finalize(); /* settles; the buffer is never read */
    if (rank == 0) printf("test_tnbc: passed (exit)\n");
    return 0;
  }
  static const struct { const char *name; void (*run)(void); } cases[] = {
      {"touch", case_touch},   {"late", case_late},       {"free", case_free},
      {"realloc", case_realloc}, {"munmap", case_munmap}, {"next", case_next},
      {"read", case_read},     {"thread", case_thread},   {"stack", case_stack},
      {"shared", case_shared}, {"handler", case_handler}, {"fork", case_fork},
      {"noncontig", case_noncontig}, {"colls", case_colls},
      {"alltoallv", case_alltoallv}, {"order", case_order}, {"allgatherv", case_allgatherv},
      {"openmp", case_openmp}, {"compute", case_compute}, {"threads", case_threads},
      {"sigblock", case_sigblock}, {"syscalls", case_syscalls}, {"mprotect", case_mprotect},
  };
  int found = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (!strcmp(which, cases[i].name)) {
      cases[i].run();
      found = 1;
    }
  if (!found) FAIL("unknown case %s", which);
  int all = 0;
  MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf(all ? "test_tnbc: FAILED (%s)\n" : "test_tnbc: passed (%s)\n", which);
  MPI_Finalize();
  return all != 0;
}
