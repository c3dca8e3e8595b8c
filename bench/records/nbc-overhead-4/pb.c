/* which part of a persistent barrier's start + wait costs more than a blocking barrier:
 * a barrier on WORLD between calls, the calls alone timed (2 ranks) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#if MPI_VERSION < 4
#include <mpi-ext.h>
#define BARINIT MPIX_Barrier_init
#else
#define BARINIT MPI_Barrier_init
#endif
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, n = 2000, rounds = 9;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm dup; MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Barrier(dup);
  MPI_Request p, q; BARINIT(MPI_COMM_WORLD, MPI_INFO_NULL, &p);
  MPI_Ibarrier(MPI_COMM_WORLD, &q); MPI_Wait(&q, MPI_STATUS_IGNORE);
  MPI_Ibarrier(dup, &q); MPI_Wait(&q, MPI_STATUS_IGNORE);
  const char *names[5] = {"Barrier(world)", "Barrier(dup)", "Ibarrier(world)+Wait", "Ibarrier(dup)+Wait", "Start+Wait"};
  double med[5][9];
  double *t = malloc(sizeof(double) * n);
  for (int r = 0; r < rounds; r++)
    for (int op = 0; op < 5; op++) {
      for (int i = 0; i < n; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        switch (op) {
          case 0: MPI_Barrier(MPI_COMM_WORLD); break;
          case 1: MPI_Barrier(dup); break;
          case 2: MPI_Ibarrier(MPI_COMM_WORLD, &q); MPI_Wait(&q, MPI_STATUS_IGNORE); break;
          case 3: MPI_Ibarrier(dup, &q); MPI_Wait(&q, MPI_STATUS_IGNORE); break;
          default: MPI_Start(&p); MPI_Wait(&p, MPI_STATUS_IGNORE);
        }
        t[i] = MPI_Wtime() - t0;
      }
      qsort(t, n, sizeof *t, cmp);
      double m = t[n / 2], mx;
      MPI_Allreduce(&m, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      med[op][r] = mx;
    }
  if (rank == 0)
    for (int op = 0; op < 5; op++) {
      qsort(med[op], rounds, sizeof(double), cmp);
      printf("%-22s %.3f us\n", names[op], med[op][rounds / 2] * 1e6);
    }
  MPI_Request_free(&p); MPI_Comm_free(&dup); free(t);
  MPI_Finalize();
  return 0;
}
