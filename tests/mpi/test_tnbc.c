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
#include <sys/wait.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static int rank, size, errors;
static size_t block = 256 * 1024; /* bytes per alltoall block */

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

static uint32_t *alltoall_into(uint32_t *recv, int iter) {
  uint32_t *send = malloc(block * size);
  fill_send(send, iter);
  MPI_Alltoall(send, (int)(block / 4), MPI_UINT32_T, recv, (int)(block / 4), MPI_UINT32_T,
               MPI_COMM_WORLD);
  /* The send buffer may change at once (T-NBC copied it). */
  memset(send, 0xEE, block * size);
  free(send);
  return recv;
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

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *which = argc > 1 ? argv[1] : "touch";
  for (int i = 2; i + 1 < argc; i += 2)
    if (!strcmp(argv[i], "--block")) block = (size_t)atol(argv[i + 1]) & ~(size_t)3;
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
      {"openmp", case_openmp},
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
