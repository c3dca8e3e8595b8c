/* callgrind probe: barrier blocking vs MPI_Ibarrier + wait vs persistent start + wait */
#include <mpi.h>
#include <stdlib.h>
#if MPI_VERSION < 4
#include <mpi-ext.h>
#define BARINIT MPIX_Barrier_init
#else
#define BARINIT MPI_Barrier_init
#endif
__attribute__((noinline)) void loop_barrier(int n) { for (int i = 0; i < n; i++) MPI_Barrier(MPI_COMM_WORLD); }
__attribute__((noinline)) void loop_ibarrier(int n) { MPI_Request r; for (int i = 0; i < n; i++) { MPI_Ibarrier(MPI_COMM_WORLD, &r); MPI_Wait(&r, MPI_STATUS_IGNORE);} }
__attribute__((noinline)) void loop_pbarrier(int n, MPI_Request *r) { for (int i = 0; i < n; i++) { MPI_Start(r); MPI_Wait(r, MPI_STATUS_IGNORE);} }
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int n = argc > 1 ? atoi(argv[1]) : 2000;
  MPI_Request pb;
  MPI_Barrier(MPI_COMM_WORLD);
  BARINIT(MPI_COMM_WORLD, MPI_INFO_NULL, &pb);
  for (int rep = 0; rep < 2; rep++) { loop_barrier(n); loop_ibarrier(n); loop_pbarrier(n, &pb); }
  MPI_Request_free(&pb);
  MPI_Finalize();
  return 0;
}
