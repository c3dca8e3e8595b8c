/* The CP bcast (first_arrival) keeps the root's node free of the other nodes: with
 * every rank away from the root's node late by LATE_MS before each call, the root's
 * node-mates finish their bcast long before those ranks arrive (the root publishes
 * to its node before it waits for the other nodes' announcements). Run with
 * MCOLL_ALG_BCAST_INTER=first_arrival on 2 nodes (fake or real) that hold the ranks
 * in two blocks (ranks [0, n/2) with the root 0, the rest on the other node).
 * Prints "mate_ms MAX" (the slowest call of the root's node-mates) and "ok". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { CALLS = 4, LATE_MS = 300, BYTES = 4096 };

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int away = rank >= size / 2;
  char *buf = malloc(BYTES);
  double worst = 0;
  int bad = 0;
  for (int call = 0; call < CALLS; call++) {
    memset(buf, rank == 0 ? call + 1 : 0, BYTES);
    MPI_Barrier(MPI_COMM_WORLD);
    if (away) usleep(LATE_MS * 1000);
    double t = MPI_Wtime();
    MPI_Bcast(buf, BYTES, MPI_CHAR, 0, MPI_COMM_WORLD);
    t = MPI_Wtime() - t;
    for (int i = 0; i < BYTES; i++) bad += buf[i] != (char)(call + 1);
    if (!away && rank != 0 && t > worst) worst = t;
  }
  double mate_ms = 0;
  double mine = worst * 1e3;
  MPI_Reduce(&mine, &mate_ms, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  int all_bad = 0;
  MPI_Reduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("mate_ms %.1f late_ms %d\n", mate_ms, LATE_MS);
    if (all_bad) printf("wrong bytes: %d\n", all_bad);
    else printf("ok\n");
  }
  free(buf);
  MPI_Finalize();
  return all_bad != 0;
}
