/* The CP bcast (first_arrival) keeps the root's node free of the other nodes: with
 * every rank away from the root's node late by LATE_MS before each call, the root's
 * node-mates finish their bcast long before those ranks arrive (the root publishes
 * to its node before it waits for the other nodes' announcements). Run with
 * MCOLL_ALG_BCAST_INTER=first_arrival on 2 nodes (fake or real) that hold the ranks
 * in two blocks (ranks [0, n/2) with the root 0, the rest on the other node).
 * Prints "mate_ms MAX" (the slowest call of the root's node-mates) and "ok".
 *
 * With --random US [--calls N]: random arrival instead (across hosts, any layout).
 * Before each of N calls every rank waits its own delay, uniform in [0, US) and
 * drawn per rank and call; the root and the size change from call to call (one
 * byte to past the inter-node piece, so that pieced calls come too), and every rank
 * checks every byte. Prints "random checks C errors E" and "ok". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { CALLS = 4, LATE_MS = 300, BYTES = 4096 };

static unsigned char pattern(int call, size_t i) { return (unsigned char)(call * 131 + i * 7 + 1); }

/* xorshift64: one stream per rank */
static unsigned long long next_random(unsigned long long *state) {
  unsigned long long x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *state = x;
}

static int random_arrival(int rank, int size, long max_us, int calls) {
  static const size_t sizes[] = {1, 4096, 65536, 200000, (1 << 20) + 3};
  enum { NSIZES = sizeof sizes / sizeof sizes[0] };
  unsigned char *buf = malloc(sizes[NSIZES - 1]);
  unsigned long long state = 0x9E3779B97F4A7C15ULL * (unsigned long long)(rank + 1);
  long errors = 0, checks = 0;
  for (int call = 0; call < calls; call++) {
    size_t bytes = sizes[call % NSIZES];
    int root = (call / NSIZES) % size;
    for (size_t i = 0; i < bytes; i++) buf[i] = rank == root ? pattern(call, i) : 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (max_us > 0) usleep((useconds_t)(next_random(&state) % (unsigned long long)max_us));
    MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
    for (size_t i = 0; i < bytes; i++) errors += buf[i] != pattern(call, i);
    checks++;
  }
  long all[2] = {0, 0}, mine[2] = {checks, errors};
  MPI_Reduce(mine, all, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("random checks %ld errors %ld\n", all[0], all[1]);
    printf(all[1] || all[0] != (long)calls * size ? "wrong\n" : "ok\n");
  }
  free(buf);
  return all[1] != 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long max_us = -1;
  int calls = 40;
  for (int k = 1; k + 1 < argc; k += 2) {
    if (!strcmp(argv[k], "--random")) max_us = atol(argv[k + 1]);
    else if (!strcmp(argv[k], "--calls")) calls = atoi(argv[k + 1]);
  }
  if (max_us >= 0) {
    int bad = random_arrival(rank, size, max_us, calls);
    MPI_Finalize();
    return bad;
  }
  int away = rank >= size / 2;
  char *buf = malloc(BYTES);
  double worst = 0;
  int bad = 0;
  for (int call = 0; call < CALLS; call++) {
    memset(buf, rank == 0 ? call + 1 : 0, BYTES);
    MPI_Barrier(MPI_COMM_WORLD);
    if (away) usleep(LATE_MS * 1000);
    double t = MPI_Wtime();
    MPI_Bcast(buf, BYTES, MPI_CHAR, 0, MPI_COMM_WORLD);
    t = MPI_Wtime() - t;
    for (int i = 0; i < BYTES; i++) bad += buf[i] != (char)(call + 1);
    if (!away && rank != 0 && t > worst) worst = t;
  }
  double mate_ms = 0;
  double mine = worst * 1e3;
  MPI_Reduce(&mine, &mate_ms, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  int all_bad = 0;
  MPI_Reduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("mate_ms %.1f late_ms %d\n", mate_ms, LATE_MS);
    if (all_bad) printf("wrong bytes: %d\n", all_bad);
    else printf("ok\n");
  }
  free(buf);
  MPI_Finalize();
  return all_bad != 0;
}
