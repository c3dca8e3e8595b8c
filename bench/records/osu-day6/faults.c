// Page faults and time per call of one collective, OSU's way (bench/records/osu-day6):
// sizes 8 B..MAX by 2, OSU's counts (100 + 1000 calls up to 8 KiB, 10 + 100 above),
// a barrier before every call. Per size: the average over the timed calls (the
// slowest rank's per call), and the minor page faults (getrusage, summed over the
// ranks) in the warm-up and in the timed calls; -t SIZE: every call of that size.
// Build: mpicc -O2 -o faults faults.c   usage: faults alltoall|allgather [MAX] [-t SIZE]
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static long minflt(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *coll = argc > 1 ? argv[1] : "alltoall";
  long max = argc > 2 ? atol(argv[2]) : 1 << 20, trace = 0;
  for (int i = 3; i + 1 < argc; i++)
    if (!strcmp(argv[i], "-t")) trace = atol(argv[i + 1]);
  int a2a = !strcmp(coll, "alltoall");
  char *send = malloc((size_t)max * size), *recv = malloc((size_t)max * size);
  memset(send, rank + 1, (size_t)max * size);
  memset(recv, 0, (size_t)max * size);
  if (!rank) printf("# %s size avg_us faults_warmup faults_timed (minor, all ranks)\n", coll);
  for (long bytes = 8; bytes <= max; bytes *= 2) {
    int skip = bytes > 8192 ? 10 : 100, iters = bytes > 8192 ? 100 : 1000;
    double sum = 0, t[1100];
    long f[1100];
    long f0 = minflt(), fw = 0;
    for (int i = 0; i < skip + iters; i++) {
      MPI_Barrier(MPI_COMM_WORLD);
      long fa = minflt();
      double t0 = MPI_Wtime();
      if (a2a) MPI_Alltoall(send, (int)bytes, MPI_CHAR, recv, (int)bytes, MPI_CHAR, MPI_COMM_WORLD);
      else MPI_Allgather(send, (int)bytes, MPI_CHAR, recv, (int)bytes, MPI_CHAR, MPI_COMM_WORLD);
      t[i] = (MPI_Wtime() - t0) * 1e6;
      f[i] = minflt() - fa;
      if (i == skip - 1) fw = minflt() - f0;
    }
    MPI_Allreduce(MPI_IN_PLACE, t, skip + iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, f, skip + iters, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    long ft = 0;
    for (int i = skip; i < skip + iters; i++) sum += t[i], ft += f[i];
    MPI_Allreduce(MPI_IN_PLACE, &fw, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (!rank) printf("%ld %.2f %ld %ld\n", bytes, sum / iters, fw, ft);
    if (!rank && bytes == trace)
      for (int i = 0; i < skip + iters; i++) printf("# call %d %.1f us %ld faults\n", i + 1, t[i], f[i]);
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
