#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(OPEN_MPI) && !defined(MPI_VERSION_4)
#include <mpi-ext.h>
#define Allreduce_init MPIX_Allreduce_init
#define Bcast_init MPIX_Bcast_init
#else
#define Allreduce_init MPI_Allreduce_init
#define Bcast_init MPI_Bcast_init
#endif
/* Back-to-back calls on a duplicate of WORLD: mode 0 blocking, 1 MPI_I* + wait,
 * 2 persistent start + wait; argv: mode calls [allreduce|bcast]; 8 B of doubles.
 * Rank 0 prints the time per call over the last 90% of the calls. */
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int mode = atoi(argv[1]); long n = atol(argv[2]);
  const char *coll = argc > 3 ? argv[3] : "allreduce";
  double in[128] = {1}, out[256];
  MPI_Comm c; MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Request r;
  MPI_Request p = MPI_REQUEST_NULL;
  int ar = !strcmp(coll, "allreduce");
  if (mode == 2) { if (ar) Allreduce_init(in, out, 1, MPI_DOUBLE, MPI_SUM, c, MPI_INFO_NULL, &p); else Bcast_init(in, 1, MPI_DOUBLE, 0, c, MPI_INFO_NULL, &p); }
  double t0 = 0;
  for (long i = 0; i < n; i++) {
    if (i == n / 10) { MPI_Barrier(c); t0 = MPI_Wtime(); }
    if (mode == 0) { if (ar) MPI_Allreduce(in, out, 1, MPI_DOUBLE, MPI_SUM, c); else MPI_Bcast(in, 1, MPI_DOUBLE, 0, c); }
    else if (mode == 1) { if (ar) MPI_Iallreduce(in, out, 1, MPI_DOUBLE, MPI_SUM, c, &r); else MPI_Ibcast(in, 1, MPI_DOUBLE, 0, c, &r); MPI_Wait(&r, MPI_STATUS_IGNORE); }
    else { MPI_Start(&p); MPI_Wait(&p, MPI_STATUS_IGNORE); }
  }
  double t = MPI_Wtime() - t0;
  if (rank == 0) printf("%s mode %d: %.3f us/call\n", coll, mode, t / (n - n / 10) * 1e6);
  if (p != MPI_REQUEST_NULL) MPI_Request_free(&p);
  MPI_Comm_free(&c);
  MPI_Finalize();
}
