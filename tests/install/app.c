/* An application built against an installed mcoll (tests/py/test_install.py):
 * allreduce and bcast in a loop, checked; prints "install_app: N checks, E errors". */
#include <mpi.h>
#include <stdio.h>

#ifdef WITH_MCOLL_H
#include <mcoll.h>
#endif

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  long checks = 0, errors = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int it = 0; it < 50; it++) {
    long in = rank + it, out = 0, want = 0;
    for (int r = 0; r < size; r++) want += r + it;
    MPI_Allreduce(&in, &out, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    checks++, errors += out != want;
    int data[100];
    for (int i = 0; i < 100; i++) data[i] = rank == it % size ? it * 1000 + i : -1;
    MPI_Bcast(data, 100, MPI_INT, it % size, MPI_COMM_WORLD);
    for (int i = 0; i < 100; i++) checks++, errors += data[i] != it * 1000 + i;
  }
#ifdef WITH_MCOLL_H
  if (rank == 0) printf("install_app: mcoll %s for %s\n", mcoll_version(), mcoll_flavour());
#endif
  long sums[2], mine[2] = {checks, errors};
  MPI_Reduce(mine, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("install_app: %ld checks, %ld errors\n", sums[0], sums[1]);
  MPI_Finalize();
  return 0;
}
