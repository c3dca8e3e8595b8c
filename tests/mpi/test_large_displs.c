/* test_large_displs: large-count v collectives (MPI-4 _c forms) where only rank 0
 * places blocks above INT_MAX: 64 B blocks in a 4 GiB buffer mapped with
 * MAP_NORESERVE (only the touched pages cost memory); the other ranks use a small
 * buffer. A library that chooses its way by each rank's own displacements sends the
 * ranks different ways and hangs. MPI_Gatherv_c, MPI_Scatterv_c (root 0),
 * MPI_Allgatherv_c, MPI_Alltoallv_c, each also with MPI_IN_PLACE where it exists.
 * Prints "test_large_displs: N checks, M errors" (or "... skipped" before MPI 4). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static int rank, size;

#if MPI_VERSION >= 4
static long checks, errors;

static void check(int ok, const char *what) {
  checks++;
  if (!ok) {
    errors++;
    if (errors < 20) fprintf(stderr, "test_large_displs: rank %d: %s wrong\n", rank, what);
  }
}

enum { BLOCK = 64 };
static const MPI_Aint FAR = (MPI_Aint)3 << 30; /* 3 GiB: above INT_MAX */

static unsigned char value(int from, int to, int i) { return (unsigned char)(from * 31 + to * 7 + i); }

/* Rank 0: block r at FAR + r * 2 * BLOCK of a 4 GiB buffer; others: r * BLOCK. */
static unsigned char *buf;
static MPI_Aint place(int r) { return rank == 0 ? FAR + (MPI_Aint)r * 2 * BLOCK : (MPI_Aint)r * BLOCK; }

static void clear(void) {
  for (int r = 0; r < size; r++) memset(buf + place(r), 0, BLOCK);
}

static void run(void) {
  MPI_Count *counts = malloc(sizeof *counts * (size_t)size);
  MPI_Aint *displs = malloc(sizeof *displs * (size_t)size);
  for (int r = 0; r < size; r++) {
    counts[r] = BLOCK;
    displs[r] = place(r);
  }
  unsigned char mine[BLOCK], got[BLOCK];
  for (int in_place = 0; in_place < 2; in_place++) {
    /* gatherv to 0: rank 0's own block in place or sent */
    clear();
    for (int i = 0; i < BLOCK; i++) mine[i] = value(rank, 0, i);
    if (in_place && rank == 0) memcpy(buf + place(0), mine, BLOCK);
    MPI_Gatherv_c(in_place && rank == 0 ? MPI_IN_PLACE : mine, BLOCK, MPI_BYTE, buf, counts, displs,
                  MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank == 0)
      for (int r = 0; r < size; r++)
        for (int i = 0; i < BLOCK; i++) check(buf[place(r) + i] == value(r, 0, i), "gatherv_c");
    /* scatterv from 0 */
    if (rank == 0)
      for (int r = 0; r < size; r++)
        for (int i = 0; i < BLOCK; i++) buf[place(r) + i] = value(0, r, i);
    memset(got, 0, BLOCK);
    MPI_Scatterv_c(buf, counts, displs, MPI_BYTE, in_place && rank == 0 ? MPI_IN_PLACE : got, BLOCK,
                   MPI_BYTE, 0, MPI_COMM_WORLD);
    if (!(in_place && rank == 0))
      for (int i = 0; i < BLOCK; i++) check(got[i] == value(0, rank, i), "scatterv_c");
    /* allgatherv */
    clear();
    for (int i = 0; i < BLOCK; i++) mine[i] = value(rank, 0, i);
    if (in_place) memcpy(buf + place(rank), mine, BLOCK);
    MPI_Allgatherv_c(in_place ? MPI_IN_PLACE : mine, BLOCK, MPI_BYTE, buf, counts, displs, MPI_BYTE,
                     MPI_COMM_WORLD);
    for (int r = 0; r < size; r++)
      for (int i = 0; i < BLOCK; i++) check(buf[place(r) + i] == value(r, 0, i), "allgatherv_c");
    /* alltoallv: rank 0 sends from far blocks too (from the receive blocks in place),
     * of the same mapping seen from its second byte (no aliased buffer arguments) */
    unsigned char *send = malloc((size_t)size * BLOCK), *from = rank == 0 ? buf + 1 : send;
    MPI_Aint *sdispls = malloc(sizeof *sdispls * (size_t)size);
    for (int r = 0; r < size; r++) {
      sdispls[r] = rank == 0 ? FAR + ((MPI_Aint)1 << 29) + (MPI_Aint)r * BLOCK : (MPI_Aint)r * BLOCK;
      for (int i = 0; i < BLOCK; i++) {
        from[sdispls[r] + i] = value(rank, r, i);
        buf[place(r) + i] = in_place ? value(rank, r, i) : 0;
      }
    }
    MPI_Alltoallv_c(in_place ? MPI_IN_PLACE : from, counts, sdispls, MPI_BYTE, buf, counts, displs,
                    MPI_BYTE, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++)
      for (int i = 0; i < BLOCK; i++) check(buf[place(r) + i] == value(r, rank, i), "alltoallv_c");
    free(send);
    free(sdispls);
  }
  free(counts);
  free(displs);
}
#endif

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
#if MPI_VERSION >= 4
  size_t bytes = rank == 0 ? (size_t)4 << 30 : (size_t)size * BLOCK;
  buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (buf == MAP_FAILED) {
    perror("mmap");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  run();
  munmap(buf, bytes);
  long totals[2] = {checks, errors}, sums[2];
  MPI_Reduce(totals, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("test_large_displs: %ld checks, %ld errors\n", sums[0], sums[1]);
#else
  if (rank == 0) printf("test_large_displs: skipped (MPI %d: no _c functions)\n", MPI_VERSION);
#endif
  MPI_Finalize();
  return 0;
}
