/* A non-blocking call that one rank runs whole on its own stack (its try) while
 * another rank runs it as a task must run the same algorithm on both. Forced here:
 * before each MPI_Ibcast / MPI_Ireduce, one rank that is not the root (the busy
 * rank) starts an MPI_Ibcast from the root on a second communicator that the
 * root starts only once the busy rank has made its call, so that its data is not
 * there yet and the busy rank's call becomes a task, while the root finds nothing
 * in flight and tries at once. The communicator's adaptive choice has state (a blocking bcast
 * and reduce of a long size class ran on it first), and the sizes lie below and
 * above the adaptive choice's smallest class. Prints "ok", or the wrong results; a
 * disagreement between the ranks may also hang (the caller's timeout). First,
 * communicators that share a context start their first non-blocking calls side by
 * side, as the ranks' agreement to run a communicator's calls as tasks once raced;
 * last, a blocking call that the host MPI takes while only one rank has a task
 * pending. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROUNDS = 3, LONG_BYTES = 64 << 10, PAIRS = 8 };

static unsigned char pattern(int root, int round, size_t i) {
  return (unsigned char)(root * 31 + round * 7 + (int)(i % 251) + 1);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm comm, other;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_dup(MPI_COMM_WORLD, &other);

  /* Pairs of fresh communicators whose contexts are shared (the same group) start
   * their first non-blocking calls together: each agrees on its own whether its
   * calls may run as tasks, whichever agreement ends first on each rank. */
  MPI_Request req[2];
  MPI_Status st[2]; /* (not MPI_STATUSES_IGNORE: MPICH's mpi.h makes gcc warn of a zero-size region) */
  for (int pair = 0; pair < PAIRS; pair++) {
    MPI_Comm a, b;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    MPI_Barrier(a);
    MPI_Barrier(b);
    MPI_Ibarrier(a, &req[0]);
    MPI_Ibarrier(b, &req[1]);
    MPI_Waitall(2, req, st);
    MPI_Comm_free(&a);
    MPI_Comm_free(&b);
  }

  /* comm and other get contexts of their own (a first non-blocking call asks for
   * them, the next blocking call builds them) on which calls run as tasks; blocking
   * calls of a long class give comm's adaptive choice its state. */
  for (int pass = 0; pass < 2; pass++) {
    MPI_Barrier(comm);
    MPI_Barrier(other);
    MPI_Ibarrier(comm, &req[0]);
    MPI_Wait(&req[0], MPI_STATUS_IGNORE);
    MPI_Ibarrier(other, &req[1]);
    MPI_Wait(&req[1], MPI_STATUS_IGNORE);
  }
  unsigned char *big = calloc(LONG_BYTES, 1);
  int *ibig = calloc(LONG_BYTES / sizeof(int), sizeof(int)), *ibig_out = calloc(LONG_BYTES / sizeof(int), sizeof(int));
  MPI_Bcast(big, LONG_BYTES, MPI_BYTE, 0, comm);
  MPI_Reduce(ibig, ibig_out, LONG_BYTES / (int)sizeof(int), MPI_INT, MPI_SUM, 0, comm);

  static const size_t sizes[] = {8, 508, 1500, 4000, 20000};
  enum { NSIZES = sizeof sizes / sizeof sizes[0] };
  size_t max = sizes[NSIZES - 1];
  unsigned char *buf = malloc(max);
  int *in = malloc(max * sizeof(int)), *out = malloc(max * sizeof(int));
  long wrong = 0, calls = 0;
  for (int round = 0; round < ROUNDS; round++)
    for (int root = 0; root < size; root++)
      for (int s = 0; s < NSIZES; s++)
        for (int coll = 0; coll < 2; coll++) {
          size_t n = sizes[s];
          int busy = size > 1 && rank == (root + 1) % size;
          int token = rank == root ? round + 1 : 0;
          if (busy) MPI_Ibcast(&token, 1, MPI_INT, root, other, &req[1]);
          if (coll == 0) {
            for (size_t i = 0; i < n; i++) buf[i] = rank == root ? pattern(root, round, i) : 0;
            MPI_Ibcast(buf, (int)n, MPI_BYTE, root, comm, &req[0]);
          } else {
            for (size_t i = 0; i < n; i++) in[i] = (int)(i % 97) + rank * round + 1;
            memset(out, 0, n * sizeof(int));
            MPI_Ireduce(in, out, (int)n, MPI_INT, MPI_SUM, root, comm, &req[0]);
          }
          /* (the root starts the second bcast once the busy rank's call is made) */
          int busy_rank = (root + 1) % size, ping = 0;
          if (busy) MPI_Send(&ping, 1, MPI_INT, root, 7, MPI_COMM_WORLD);
          if (rank == root && size > 1) MPI_Recv(&ping, 1, MPI_INT, busy_rank, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          if (!busy && size > 1) MPI_Ibcast(&token, 1, MPI_INT, root, other, &req[1]);
          MPI_Waitall(size > 1 ? 2 : 1, req, st);
          if (size > 1 && token != round + 1) wrong++;
          calls++;
          long bad = 0;
          if (coll == 0) {
            for (size_t i = 0; i < n; i++) bad += buf[i] != pattern(root, round, i);
          } else if (rank == root) {
            for (size_t i = 0; i < n; i++) {
              long expect = (long)size * ((long)(i % 97) + 1) + (long)round * size * (size - 1) / 2;
              bad += out[i] != (int)expect;
            }
          }
          if (bad && wrong < 20)
            printf("rank %d: %s of %zu B, root %d, round %d: %ld wrong elements\n", rank,
                   coll ? "reduce" : "bcast", n, root, round, bad);
          wrong += bad;
        }
  /* A blocking collective that the host MPI runs (an intercommunicator's) while
   * rank 0 has a task pending and the others have none: the host's blocking and
   * non-blocking collectives do not match each other, so every rank must call
   * the same form. */
  if (size > 1) {
    MPI_Comm half, inter;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 5, &inter);
    for (int it = 0; it < 10; it++) {
      int v = rank == 1 ? it + 1 : 0, w = rank == 0 ? 100 + it : 0;
      if (rank == 0) MPI_Ibcast(&v, 1, MPI_INT, 1, comm, &req[0]); /* (the root comes later) */
      int root = rank % 2 ? 0 : rank == 0 ? MPI_ROOT : MPI_PROC_NULL;
      MPI_Bcast(&w, 1, MPI_INT, root, inter);
      if (rank != 0) MPI_Ibcast(&v, 1, MPI_INT, 1, comm, &req[0]);
      MPI_Wait(&req[0], &st[0]);
      calls++;
      long bad = (v != it + 1) + (rank % 2 && w != 100 + it);
      if (bad && wrong < 20) printf("rank %d: bcast on an intercommunicator beside a task, call %d: wrong\n", rank, it);
      wrong += bad;
    }
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
  }

  long all_wrong = 0;
  MPI_Reduce(&wrong, &all_wrong, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("calls %ld per rank, wrong elements %ld\n", calls, all_wrong);
    if (!all_wrong) printf("ok\n");
  }
  free(big);
  free(ibig);
  free(ibig_out);
  free(buf);
  free(in);
  free(out);
  MPI_Comm_free(&comm);
  MPI_Comm_free(&other);
  MPI_Finalize();
  return all_wrong != 0;
}
