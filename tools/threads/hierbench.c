/* mcoll-hierbench: the thread ranks' two-level collectives (src/threads/coll_hier.c)
 * against the message path, alternating inside one job. Run with
 * MCOLL_THREADS_HIER=3: of two dups of world, the first (context 4) takes two levels,
 * the second (context 6) the message algorithms. Per collective and size, --rounds
 * rounds, each timing a batch of calls on A then on B; a batch's time is the slowest
 * rank's per call. Prints "coll bytes two_level_us message_us message/two_level" with
 * the medians at rank 0. Bytes are the whole vector of bcast, reduce, allreduce, scan and
 * exscan (doubles, MPI_SUM), each rank's block of allgather(v), gather(v) and scatter(v)
 * (root 0), each block of alltoall(v,w); barrier runs at the first size only. Under
 * process ranks both communicators take the same path (a reference for the same calls).
 * usage: mcoll-hierbench [--rounds N] [--budget MICROSECONDS_PER_BATCH]
 *                        [--colls bcast,allreduce,...|all] [--sizes 8,65536,...] */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_value(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static const char *const names[] = {"bcast",     "allreduce", "gatherv",   "scatterv",
                                    "alltoall",  "scan",      "barrier",   "reduce",
                                    "allgather", "allgatherv", "gather",   "scatter",
                                    "alltoallv", "alltoallw", "exscan"};
enum { NCOLLS = sizeof names / sizeof names[0] };
static int *counts, *displs; /* (the v calls: bytes each, in rank order) */
static MPI_Datatype *types;  /* (alltoallw: MPI_BYTE each) */

/* Whether the comma-separated list names coll exactly (or is "all"). */
static int listed(const char *list, const char *name)
{
  size_t len = strlen(name);
  if (!strcmp(list, "all"))
    return 1;
  for (const char *at = list; at && *at; at = strchr(at, ',') ? strchr(at, ',') + 1 : NULL)
    if (!strncmp(at, name, len) && (at[len] == ',' || at[len] == 0))
      return 1;
  return 0;
}

static void call(int coll, char *in, char *out, int bytes, MPI_Comm comm)
{
  int n;
  MPI_Comm_size(comm, &n);
  for (int i = 0; i < n; i++)
    counts[i] = bytes, displs[i] = i * bytes, types[i] = MPI_BYTE;
  if (coll == 0)
    MPI_Bcast(in, bytes, MPI_BYTE, 0, comm);
  else if (coll == 1)
    MPI_Allreduce(in, out, bytes / 8, MPI_DOUBLE, MPI_SUM, comm);
  else if (coll == 2)
    MPI_Gatherv(in, bytes, MPI_BYTE, out, counts, displs, MPI_BYTE, 0, comm);
  else if (coll == 3)
    MPI_Scatterv(in, counts, displs, MPI_BYTE, out, bytes, MPI_BYTE, 0, comm);
  else if (coll == 4)
    MPI_Alltoall(in, bytes, MPI_BYTE, out, bytes, MPI_BYTE, comm);
  else if (coll == 5)
    MPI_Scan(in, out, bytes / 8, MPI_DOUBLE, MPI_SUM, comm);
  else if (coll == 6)
    MPI_Barrier(comm);
  else if (coll == 7)
    MPI_Reduce(in, out, bytes / 8, MPI_DOUBLE, MPI_SUM, 0, comm);
  else if (coll == 8)
    MPI_Allgather(in, bytes, MPI_BYTE, out, bytes, MPI_BYTE, comm);
  else if (coll == 9)
    MPI_Allgatherv(in, bytes, MPI_BYTE, out, counts, displs, MPI_BYTE, comm);
  else if (coll == 10)
    MPI_Gather(in, bytes, MPI_BYTE, out, bytes, MPI_BYTE, 0, comm);
  else if (coll == 11)
    MPI_Scatter(in, bytes, MPI_BYTE, out, bytes, MPI_BYTE, 0, comm);
  else if (coll == 12)
    MPI_Alltoallv(in, counts, displs, MPI_BYTE, out, counts, displs, MPI_BYTE, comm);
  else if (coll == 13)
    MPI_Alltoallw(in, counts, displs, types, out, counts, displs, types, comm);
  else
    MPI_Exscan(in, out, bytes / 8, MPI_DOUBLE, MPI_SUM, comm);
}

/* Seconds per call of a batch of iters calls, the slowest rank's. */
static double batch(int coll, char *in, char *out, int bytes, int iters, MPI_Comm comm)
{
  MPI_Barrier(comm);
  double start = MPI_Wtime();
  for (int i = 0; i < iters; i++)
    call(coll, in, out, bytes, comm);
  double mine = (MPI_Wtime() - start) / iters, slowest;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
  return slowest;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rounds = 9, rank, size, nsizes = 0, sizes[16], wanted[NCOLLS] = {1, 1};
  double budget = 20000; /* (microseconds of calls per batch) */
  for (int i = 1; i + 1 < argc; i++) {
    if (!strcmp(argv[i], "--rounds"))
      rounds = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--budget"))
      budget = atof(argv[i + 1]);
    if (!strcmp(argv[i], "--colls"))
      for (int c = 0; c < NCOLLS; c++)
        wanted[c] = listed(argv[i + 1], names[c]);
    if (!strcmp(argv[i], "--sizes"))
      for (char *at = argv[i + 1]; *at && nsizes < 16; at += *at == ',')
        sizes[nsizes++] = (int)strtol(at, &at, 10);
  }
  if (nsizes == 0)
    sizes[0] = 8, sizes[1] = 65536, sizes[2] = 1 << 20, nsizes = 3;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  counts = malloc(sizeof(int) * (size_t)size * 2), displs = counts + size;
  types = malloc(sizeof *types * (size_t)size);
  size_t room = 1;
  for (int s = 0; s < nsizes; s++)
    if ((size_t)sizes[s] * (size_t)size > room)
      room = (size_t)sizes[s] * (size_t)size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm paths[2]; /* two levels, messages */
  MPI_Comm_dup(MPI_COMM_WORLD, &paths[0]);
  MPI_Comm_dup(MPI_COMM_WORLD, &paths[1]);
  char *in = calloc(room, 1), *out = calloc(room, 1);
  double *times = malloc(sizeof *times * (size_t)rounds * 2);
  if (rank == 0)
    printf("%-10s %8s %14s %14s %10s\n", "coll", "bytes", "two-level us", "messages us", "ratio");
  for (int coll = 0; coll < NCOLLS; coll++)
    for (int s = 0; s < (coll == 6 ? 1 : nsizes) && wanted[coll]; s++) {
      int bytes = sizes[s];
      /* (batch length from a warm-up of the slower path, the same for both) */
      double once = batch(coll, in, out, bytes, 3, paths[1]);
      batch(coll, in, out, bytes, 3, paths[0]);
      int iters = (int)(budget * 1e-6 / once);
      if (iters < 3)
        iters = 3;
      MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
      for (int r = 0; r < rounds; r++)
        for (int p = 0; p < 2; p++)
          times[p * rounds + r] = batch(coll, in, out, bytes, iters, paths[p]);
      qsort(times, (size_t)rounds, sizeof *times, by_value);
      qsort(times + rounds, (size_t)rounds, sizeof *times, by_value);
      double two = times[rounds / 2] * 1e6, msg = times[rounds + rounds / 2] * 1e6;
      if (rank == 0)
        printf("%-10s %8d %14.2f %14.2f %10.2f\n", names[coll], bytes, two, msg, msg / two);
    }
  MPI_Comm_free(&paths[0]);
  MPI_Comm_free(&paths[1]);
  free(in), free(out), free(times), free(counts), free(types);
  MPI_Finalize();
  return 0;
}
