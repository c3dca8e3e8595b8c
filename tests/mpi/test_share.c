/* test_share: communicators with identical groups share one mcoll context (segment
 * and sequence numbers). Checks that calls interleaved over several such
 * communicators, with roots that run ahead, still deliver the right data; that a
 * communicator freed in the middle leaves the others working; and that a split
 * with the ranks in another order (not identical) keeps its own context.
 * Node channels (segment and sequences) are shared more widely: by communicators
 * whose node holds the same processes in the same order (a subset that drops the
 * last rank, under a fake hierarchy of several nodes), and a channel freed with its
 * last communicator is reused by the next one over the same processes (cycles of a
 * rotated split).
 *
 * usage: test_share [iterations (default 300)] [multiple|single] [cycles (default 5)]
 *   multiple: MPI_Init_thread(MPI_THREAD_MULTIPLE), where no context is shared
 * Prints "test_share: N checks, E errors"; exits non-zero on errors.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long checks, errors;

static void expect(int ok, const char *what, int rank, long it) {
  checks++;
  if (!ok && errors++ < 10) fprintf(stderr, "test_share: rank %d: %s wrong at iteration %ld\n", rank, what, it);
}

static unsigned char pattern(long it, int root, size_t i) {
  return (unsigned char)(it * 31 + root * 7 + (long)i * 13);
}

/* A bcast whose root writes and leaves at once: the next call, on another
 * communicator of the same context, follows right behind it. */
static void bcast_check(MPI_Comm comm, unsigned char *buf, size_t bytes, int root, long it) {
  int rank;
  MPI_Comm_rank(comm, &rank);
  if (rank == root)
    for (size_t i = 0; i < bytes; i++) buf[i] = pattern(it, root, i);
  else
    memset(buf, 0xee, bytes);
  MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, comm);
  int ok = 1;
  for (size_t i = 0; i < bytes; i++) ok &= buf[i] == pattern(it, root, i);
  expect(ok, "bcast", rank, it);
}

static void allreduce_check(MPI_Comm comm, long it) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  long in[3] = {rank + it, 1, (long)rank * rank}, out[3];
  MPI_Allreduce(in, out, 3, MPI_LONG, MPI_SUM, comm);
  long sum = 0, sq = 0;
  for (int r = 0; r < size; r++) sum += r + it, sq += (long)r * r;
  expect(out[0] == sum && out[1] == size && out[2] == sq, "allreduce", rank, it);
}

static void allgather_check(MPI_Comm comm, long it) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int mine[5], *all = malloc(sizeof mine * (size_t)size);
  for (int i = 0; i < 5; i++) mine[i] = (int)(rank * 1000 + it * 5 + i);
  MPI_Allgather(mine, 5, MPI_INT, all, 5, MPI_INT, comm);
  int ok = 1;
  for (int r = 0; r < size; r++)
    for (int i = 0; i < 5; i++) ok &= all[r * 5 + i] == (int)(r * 1000 + it * 5 + i);
  expect(ok, "allgather", rank, it);
  free(all);
}

int main(int argc, char **argv) {
  int provided;
  if (argc > 2 && strcmp(argv[2], "multiple") == 0)
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  else
    MPI_Init(&argc, &argv);
  long iterations = argc > 1 ? atol(argv[1]) : 300;
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  enum { NDUPS = 3, MAX_BYTES = 300000 };
  MPI_Comm dup[NDUPS];
  for (int d = 0; d < NDUPS; d++) MPI_Comm_dup(MPI_COMM_WORLD, &dup[d]);
  /* Same members in reverse order: not identical, so not shared. */
  MPI_Comm reversed;
  MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &reversed);
  unsigned char *buf = malloc(MAX_BYTES);

  for (long it = 0; it < iterations; it++) {
    size_t bytes = it % 5 == 4 ? (size_t)(it * 7919 % MAX_BYTES) : (size_t)(it % 97 + 1);
    int root = (int)(it % size);
    bcast_check(dup[it % NDUPS], buf, bytes, root, it);
    bcast_check(dup[(it + 1) % NDUPS], buf, bytes / 2 + 1, (root + 1) % size, it);
    allreduce_check(dup[(it + 2) % NDUPS], it);
    bcast_check(reversed, buf, bytes, root, it);
    allgather_check(reversed, it);
    allgather_check(it % 2 ? MPI_COMM_WORLD : dup[0], it);
    if (it == iterations / 2) {
      /* Free the communicator the shared context was built for; make a new dup. */
      MPI_Comm_free(&dup[0]);
      MPI_Comm_dup(MPI_COMM_WORLD, &dup[0]);
    }
  }
  /* Without the last rank: another group; under a fake hierarchy the first node
   * still holds the same processes as in the world. */
  MPI_Comm subset;
  MPI_Comm_split(MPI_COMM_WORLD, rank == size - 1 && size > 1 ? MPI_UNDEFINED : 0, rank, &subset);
  for (long it = 0; it < iterations / 4; it++) {
    size_t bytes = (size_t)(it * 7919 % 70000 + 1);
    if (subset != MPI_COMM_NULL) {
      int subsize;
      MPI_Comm_size(subset, &subsize);
      bcast_check(subset, buf, bytes, (int)(it % subsize), it);
      allreduce_check(subset, it);
    }
    bcast_check(dup[1], buf, bytes / 3 + 1, (int)(it % size), it);
    if (subset != MPI_COMM_NULL) allgather_check(subset, it);
    allreduce_check(MPI_COMM_WORLD, it);
  }
  if (subset != MPI_COMM_NULL) MPI_Comm_free(&subset);

  /* Rotated splits made and freed in turn: the first makes a channel, the others
   * find it in the pool (the VERBOSE report's "channels made" does not grow with
   * the number of cycles). */
  long cycles = argc > 3 ? atol(argv[3]) : 5;
  for (long k = 0; k < cycles; k++) {
    MPI_Comm rotated;
    MPI_Comm_split(MPI_COMM_WORLD, 0, (rank + 1) % size, &rotated);
    for (long it = k * 7; it < k * 7 + 7; it++) {
      bcast_check(rotated, buf, (size_t)(it * 104729 % MAX_BYTES + 1), (int)(it % size), it);
      allreduce_check(rotated, it);
      bcast_check(reversed, buf, (size_t)(it % 300 + 1), 0, it);
    }
    MPI_Comm_free(&rotated);
  }

  for (int d = 0; d < NDUPS; d++) MPI_Comm_free(&dup[d]);
  MPI_Comm_free(&reversed);

  long totals[2] = {checks, errors}, sums[2];
  MPI_Reduce(totals, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("test_share: %ld checks, %ld errors\n", sums[0], sums[1]);
  free(buf);
  MPI_Finalize();
  return sums[1] != 0 && rank == 0;
}
