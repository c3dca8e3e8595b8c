/* callgrind probe: blocking vs MPI_I* + wait vs persistent start + wait */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#if MPI_VERSION < 4
#include <mpi-ext.h>
#define BINIT MPIX_Bcast_init
#define AINIT MPIX_Allreduce_init
#else
#define BINIT MPI_Bcast_init
#define AINIT MPI_Allreduce_init
#endif
__attribute__((noinline)) void loop_bcast(int n, char *b, int c) { for (int i = 0; i < n; i++) MPI_Bcast(b, c, MPI_BYTE, 0, MPI_COMM_WORLD); }
__attribute__((noinline)) void loop_ibcast(int n, char *b, int c) { MPI_Request r; for (int i = 0; i < n; i++) { MPI_Ibcast(b, c, MPI_BYTE, 0, MPI_COMM_WORLD, &r); MPI_Wait(&r, MPI_STATUS_IGNORE);} }
__attribute__((noinline)) void loop_pbcast(int n, MPI_Request *r) { for (int i = 0; i < n; i++) { MPI_Start(r); MPI_Wait(r, MPI_STATUS_IGNORE);} }
__attribute__((noinline)) void loop_allreduce(int n, int *s, int *d, int c) { for (int i = 0; i < n; i++) MPI_Allreduce(s, d, c, MPI_INT, MPI_SUM, MPI_COMM_WORLD); }
__attribute__((noinline)) void loop_iallreduce(int n, int *s, int *d, int c) { MPI_Request r; for (int i = 0; i < n; i++) { MPI_Iallreduce(s, d, c, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r); MPI_Wait(&r, MPI_STATUS_IGNORE);} }
__attribute__((noinline)) void loop_pallreduce(int n, MPI_Request *r) { for (int i = 0; i < n; i++) { MPI_Start(r); MPI_Wait(r, MPI_STATUS_IGNORE);} }
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int n = argc > 1 ? atoi(argv[1]) : 2000, bytes = argc > 2 ? atoi(argv[2]) : 8;
  char *b = calloc(bytes + 64, 1); int *s = calloc(bytes / 4 + 16, 4), *d = calloc(bytes / 4 + 16, 4);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Request pb, pa;
  BINIT(b, bytes, MPI_BYTE, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &pb);
  AINIT(s, d, bytes / 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &pa);
  for (int rep = 0; rep < 2; rep++) {
    loop_bcast(n, b, bytes); loop_ibcast(n, b, bytes); loop_pbcast(n, &pb);
    loop_allreduce(n, s, d, bytes / 4); loop_iallreduce(n, s, d, bytes / 4); loop_pallreduce(n, &pa);
  }
  MPI_Request_free(&pb); MPI_Request_free(&pa);
  MPI_Finalize();
  return 0;
}
