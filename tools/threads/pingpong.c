/* mcoll-pingpong: OSU-style point-to-point latency between ranks 0 and 1 (the others
 * wait): for each size from 8 B to --max bytes, the median over --rounds rounds of the
 * one-way time (round trip / 2) of a ping-pong loop. Prints "size usec MB/s" lines.
 * usage: mcoll-pingpong [--max BYTES] [--rounds N] */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_value(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  long max = 4L << 20;
  int rounds = 7, rank;
  for (int i = 1; i + 1 < argc; i++) {
    if (!strcmp(argv[i], "--max"))
      max = atol(argv[i + 1]);
    if (!strcmp(argv[i], "--rounds"))
      rounds = atoi(argv[i + 1]);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char *buf = malloc((size_t)max);
  memset(buf, 1, (size_t)max);
  double *times = malloc((size_t)rounds * sizeof *times);
  if (rank == 0)
    printf("# size usec MB/s\n");
  /* 8 B, x4 ..., and max itself where the series steps over it (4 MiB) */
  for (long size = 8; size <= max; size = size * 4 > max && size < max ? max : size * 4) {
    int iters = size <= 65536 ? 200 : size <= (1 << 20) ? 40 : 10;
    for (int r = 0; r < rounds; r++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double start = MPI_Wtime();
      for (int i = 0; i < iters && rank < 2; i++) {
        if (rank == 0) {
          MPI_Send(buf, (int)size, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
          MPI_Recv(buf, (int)size, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
          MPI_Recv(buf, (int)size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(buf, (int)size, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        }
      }
      times[r] = (MPI_Wtime() - start) / iters / 2;
    }
    qsort(times, (size_t)rounds, sizeof *times, by_value);
    double t = times[rounds / 2];
    if (rank == 0)
      printf("%ld %.3f %.1f\n", size, t * 1e6, (double)size / t / 1e6);
  }
  free(times);
  free(buf);
  MPI_Finalize();
  return 0;
}
