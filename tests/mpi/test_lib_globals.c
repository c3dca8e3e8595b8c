/* test_lib_globals: a program linking a library with mutable globals (lib_globals.c);
 * every rank updates them between barriers and must see its own updates only (each
 * thread rank has its own copy of the library). Prints "test_lib_globals: N errors". */
#include <mpi.h>

#include <stdio.h>
#include <string.h>

#include "lib_globals.h"

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, errors = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  long want = 0;
  char name[32];
  snprintf(name, sizeof name, "rank-%d", rank);
  for (int round = 0; round < 50; round++) {
    lib_globals_add(rank, rank + round);
    want += rank + round;
    MPI_Barrier(MPI_COMM_WORLD);
    if (lib_globals_total() != want || lib_globals_entries() != round + 1 ||
        lib_globals_calls != round + 1 || strcmp(lib_globals_last(), name) != 0)
      errors++;
  }
  int all;
  MPI_Reduce(&errors, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("test_lib_globals: %d errors\n", all);
  MPI_Finalize();
  return errors != 0;
}
