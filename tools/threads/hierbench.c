/* mcoll-hierbench: the thread ranks' two-level collectives (src/threads/coll_hier.c)
 * against the message path, alternating inside one job. Run with
 * MCOLL_THREADS_HIER=3: of two dups of world, the first (context 4) takes two levels,
 * the second (context 6) the message algorithms. Per collective and size, --rounds
 * rounds, each timing a batch of calls on A then on B; a batch's time is the slowest
 * rank's per call. Prints "coll bytes two_level_us message_us message/two_level" with
 * the medians at rank 0.
 * usage: mcoll-hierbench [--rounds N] [--budget MICROSECONDS_PER_BATCH] */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_value(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void call(int allreduce, char *in, char *out, int bytes, MPI_Comm comm)
{
  if (allreduce)
    MPI_Allreduce(in, out, bytes / 8, MPI_DOUBLE, MPI_SUM, comm);
  else
    MPI_Bcast(in, bytes, MPI_BYTE, 0, comm);
}

/* Seconds per call of a batch of iters calls, the slowest rank's. */
static double batch(int allreduce, char *in, char *out, int bytes, int iters, MPI_Comm comm)
{
  MPI_Barrier(comm);
  double start = MPI_Wtime();
  for (int i = 0; i < iters; i++)
    call(allreduce, in, out, bytes, comm);
  double mine = (MPI_Wtime() - start) / iters, slowest;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
  return slowest;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rounds = 9, rank;
  double budget = 20000; /* (microseconds of calls per batch) */
  for (int i = 1; i + 1 < argc; i++) {
    if (!strcmp(argv[i], "--rounds"))
      rounds = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--budget"))
      budget = atof(argv[i + 1]);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm paths[2]; /* two levels, messages */
  MPI_Comm_dup(MPI_COMM_WORLD, &paths[0]);
  MPI_Comm_dup(MPI_COMM_WORLD, &paths[1]);
  static const int sizes[] = {8, 65536, 1 << 20};
  static const char *const names[] = {"bcast", "allreduce"};
  char *in = calloc(1 << 20, 1), *out = calloc(1 << 20, 1);
  double *times = malloc(sizeof *times * (size_t)rounds * 2);
  if (rank == 0)
    printf("%-10s %8s %14s %14s %10s\n", "coll", "bytes", "two-level us", "messages us", "ratio");
  for (int allreduce = 0; allreduce < 2; allreduce++)
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      int bytes = sizes[s];
      /* (batch length from a warm-up of the slower path, the same for both) */
      double once = batch(allreduce, in, out, bytes, 3, paths[1]);
      batch(allreduce, in, out, bytes, 3, paths[0]);
      int iters = (int)(budget * 1e-6 / once);
      if (iters < 3)
        iters = 3;
      MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
      for (int r = 0; r < rounds; r++)
        for (int p = 0; p < 2; p++)
          times[p * rounds + r] = batch(allreduce, in, out, bytes, iters, paths[p]);
      qsort(times, (size_t)rounds, sizeof *times, by_value);
      qsort(times + rounds, (size_t)rounds, sizeof *times, by_value);
      double two = times[rounds / 2] * 1e6, msg = times[rounds + rounds / 2] * 1e6;
      if (rank == 0)
        printf("%-10s %8d %14.2f %14.2f %10.2f\n", names[allreduce], bytes, two, msg, msg / two);
    }
  MPI_Comm_free(&paths[0]);
  MPI_Comm_free(&paths[1]);
  free(in), free(out), free(times);
  MPI_Finalize();
  return 0;
}
