/* mcoll-info: the parameters, the algorithms, and the hierarchy mcoll finds. */
#include <mpi.h>
#include <stdio.h>

#include "mcoll.h"

int main(int argc, char **argv) {
  int rank;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    printf("mcoll %s for %s\n\n", mcoll_version(), mcoll_flavour());
    mcoll_print_params(stdout);
    mcoll_print_algorithms(stdout);
    mcoll_print_rules(stdout);
    printf("\n");
    fflush(stdout);
  }
  mcoll_print_hierarchy(stdout);
  MPI_Finalize();
  return 0;
}
