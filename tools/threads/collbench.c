/* mcoll-collbench: time per call of small collectives (barrier, bcast 4 KiB,
 * allreduce 8 B and 4 KiB of doubles), the median over --rounds rounds of --iters calls.
 * Prints "name usec" lines at rank 0.
 * usage: mcoll-collbench [--iters N] [--rounds N] */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { KINDS = 4 };
static const char *const names[KINDS] = {"barrier", "bcast-4K", "allreduce-8B", "allreduce-4K"};

static int by_value(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void call(int kind, double *in, double *out)
{
  switch (kind) {
  case 0: MPI_Barrier(MPI_COMM_WORLD); break;
  case 1: MPI_Bcast(in, 512, MPI_DOUBLE, 0, MPI_COMM_WORLD); break;
  case 2: MPI_Allreduce(in, out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
  default: MPI_Allreduce(in, out, 512, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
  }
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int iters = 2000, rounds = 7, rank;
  for (int i = 1; i + 1 < argc; i++) {
    if (!strcmp(argv[i], "--iters"))
      iters = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--rounds"))
      rounds = atoi(argv[i + 1]);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double in[512], out[512], *times = malloc((size_t)rounds * sizeof *times);
  for (int i = 0; i < 512; i++)
    in[i] = i;
  for (int kind = 0; kind < KINDS; kind++) {
    for (int r = 0; r < rounds; r++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double start = MPI_Wtime();
      for (int i = 0; i < iters; i++)
        call(kind, in, out);
      times[r] = (MPI_Wtime() - start) / iters;
    }
    qsort(times, (size_t)rounds, sizeof *times, by_value);
    if (rank == 0)
      printf("%s %.3f\n", names[kind], times[rounds / 2] * 1e6);
  }
  free(times);
  MPI_Finalize();
  return 0;
}
