/* A persistent collective made on MPI_COMM_WORLD first, then blocking, MPI_I* + wait and
 * start + wait on WORLD (2 ranks): per rank medians of 2000 calls, median of 9 rounds;
 * post and wait timed apart. usage: world_first BYTES bcast|reduce|allreduce */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if MPI_VERSION < 4
#include <mpi-ext.h>
#define BINIT MPIX_Bcast_init
#define RINIT MPIX_Reduce_init
#define AINIT MPIX_Allreduce_init
#else
#define BINIT MPI_Bcast_init
#define RINIT MPI_Reduce_init
#define AINIT MPI_Allreduce_init
#endif
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
static double med(double *t, int n) { qsort(t, n, sizeof *t, cmp); return t[n / 2]; }
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, n = 2000, rounds = 9;
  int bytes = argc > 1 ? atoi(argv[1]) : 8;
  const char *coll = argc > 2 ? argv[2] : "bcast";
  int c = !strcmp(coll, "bcast") ? 0 : !strcmp(coll, "reduce") ? 1 : 2;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int cnt = bytes / 8;
  double *a = calloc(cnt + 1, 8), *b = calloc(cnt + 1, 8);
  MPI_Request p, q;
  if (c == 0) BINIT(a, cnt, MPI_DOUBLE, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &p);
  else if (c == 1) RINIT(a, b, cnt, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &p);
  else AINIT(a, b, cnt, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &p);
  const char *names[3] = {"blocking", "post+wait", "start+wait"};
  double m[3][3][9], m1[3][3][9];
  double *t = malloc(sizeof(double) * n), *tp = malloc(sizeof(double) * n), *tw = malloc(sizeof(double) * n);
  for (int r = 0; r < rounds; r++)
    for (int op = 0; op < 3; op++) {
      for (int i = 0; i < n + n / 10; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime(), t1;
        if (op == 0) {
          if (c == 0) MPI_Bcast(a, cnt, MPI_DOUBLE, 0, MPI_COMM_WORLD);
          else if (c == 1) MPI_Reduce(a, b, cnt, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
          else MPI_Allreduce(a, b, cnt, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
          t1 = MPI_Wtime();
        } else if (op == 1) {
          if (c == 0) MPI_Ibcast(a, cnt, MPI_DOUBLE, 0, MPI_COMM_WORLD, &q);
          else if (c == 1) MPI_Ireduce(a, b, cnt, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD, &q);
          else MPI_Iallreduce(a, b, cnt, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q);
          t1 = MPI_Wtime();
          MPI_Wait(&q, MPI_STATUS_IGNORE);
        } else {
          MPI_Start(&p);
          t1 = MPI_Wtime();
          MPI_Wait(&p, MPI_STATUS_IGNORE);
        }
        double t2 = MPI_Wtime();
        if (i >= n / 10) { t[i - n / 10] = t2 - t0; tp[i - n / 10] = t1 - t0; tw[i - n / 10] = t2 - t1; }
      }
      double v[3] = {med(t, n), med(tp, n), med(tw, n)}, all[6];
      MPI_Gather(v, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      for (int k = 0; k < 3; k++) { m[op][k][r] = all[k]; m1[op][k][r] = all[3 + k]; }
    }
  /* rank 0 and rank 1 medians over rounds (rank 1: rounds 0..7 only) */
  if (rank == 0) {
    printf("%s %d B   (us)        r0 total  r0 post  r0 wait | r1 total  r1 post  r1 wait\n", coll, bytes);
    for (int op = 0; op < 3; op++) {
      double x[3], y[3];
      for (int k = 0; k < 3; k++) { x[k] = med(m[op][k], rounds) * 1e6; y[k] = med(m1[op][k], rounds) * 1e6; }
      printf("%-12s %9.3f %8.3f %8.3f | %8.3f %8.3f %8.3f\n", names[op], x[0], x[1], x[2], y[0], y[1], y[2]);
    }
  }
  MPI_Request_free(&p);
  MPI_Finalize();
  return 0;
}
