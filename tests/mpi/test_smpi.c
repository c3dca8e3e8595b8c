/* SMPI (MPIX_Smpi_*, mcoll.h): ownership passing between ranks.
 *
 * usage: test_smpi [threads per process (0: the ranks are processes)]
 * Knowing the layout, it checks that a buffer sent to a thread rank of the same process
 * arrives at the very address it was sent from (no copy), and that any other peer gets
 * the bytes. Also: rings of small and large messages in both directions with buffers
 * freed by the rank that received them (allocated by another), a send to itself, SMPI
 * sends received by MPI_Recv and MPI_Send received by MPIX_Smpi_recv, MPI_ANY_SOURCE,
 * MPI_PROC_NULL, and a message longer than the receive (MPI_ERR_TRUNCATE, whole buffer).
 * prints "test_smpi: N checks, M errors". */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcoll.h"

static int checks, errors;

#define CHECK(cond, ...)                                                                     \
  do {                                                                                       \
    checks++;                                                                                \
    if (!(cond)) {                                                                           \
      errors++;                                                                              \
      fprintf(stderr, "test_smpi rank %d: ", rank);                                          \
      fprintf(stderr, __VA_ARGS__);                                                          \
      fputc('\n', stderr);                                                                   \
    }                                                                                        \
  } while (0)

static int rank, size, threads;

/* A message of n words: its own address, its sender, then a pattern of (sender, round). */
static uint64_t *make(int n, int round)
{
  uint64_t *p;
  MPIX_Smpi_alloc((MPI_Aint)(n * sizeof *p), &p);
  p[0] = (uint64_t)(uintptr_t)p;
  p[1] = (uint64_t)rank;
  for (int i = 2; i < n; i++)
    p[i] = (uint64_t)rank * 1000003u + (uint64_t)round * 7919u + (uint64_t)i;
  return p;
}

static int same_process(int a, int b) { return threads > 0 && a / threads == b / threads; }

/* The message p of n words from rank src: its bytes, and whether it came without a copy. */
static void check_message(const uint64_t *p, int n, int src, int round, const char *what)
{
  CHECK(p != NULL, "%s: no buffer", what);
  if (!p)
    return;
  int intact = p[1] == (uint64_t)src;
  for (int i = 2; i < n && intact; i++)
    intact = p[i] == (uint64_t)src * 1000003u + (uint64_t)round * 7919u + (uint64_t)i;
  CHECK(intact, "%s: %d words from rank %d round %d wrong", what, n, src, round);
  int handed = p[0] == (uint64_t)(uintptr_t)p;
  /* (a process's copy of its own message may reuse the address of its freed original) */
  if (src == rank && !threads)
    return;
  CHECK(handed == same_process(src, rank), "%s from rank %d: %s, expected %s", what, src,
        handed ? "the sender's buffer" : "a copy",
        same_process(src, rank) ? "the sender's buffer" : "a copy");
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  threads = argc > 1 ? atoi(argv[1]) : 0;
  if (!MPIX_Smpi_send) {
    fprintf(stderr, "test_smpi: MPIX_Smpi_* not loaded\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  const int sizes[] = {2, 3, 64, 2048, 2049, 100000};
  int round = 0;
  /* Rings both ways: send first, then receive (an SMPI send never waits for its receive). */
  for (int s = 0; s < (int)(sizeof sizes / sizeof *sizes); s++)
    for (int dir = 0; dir < 2; dir++, round++) {
      int n = sizes[s], to = dir ? left : right, from = dir ? right : left;
      MPIX_Smpi_send(make(n, round), n, MPI_UINT64_T, to, round, MPI_COMM_WORLD);
      uint64_t *got;
      MPI_Status status;
      MPIX_Smpi_recv(&got, n, MPI_UINT64_T, from, round, MPI_COMM_WORLD, &status);
      int count;
      MPI_Get_count(&status, MPI_UINT64_T, &count);
      CHECK(count == n && status.MPI_SOURCE == from && status.MPI_TAG == round,
            "ring status: count %d source %d tag %d", count, status.MPI_SOURCE, status.MPI_TAG);
      check_message(got, n, from, round, "ring");
      MPIX_Smpi_free(got);
    }

  /* To itself. */
  MPIX_Smpi_send(make(300, round), 300, MPI_UINT64_T, rank, 99, MPI_COMM_WORLD);
  uint64_t *got;
  MPIX_Smpi_recv(&got, 300, MPI_UINT64_T, rank, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  check_message(got, 300, rank, round, "self");
  MPIX_Smpi_free(got);
  round++;

  /* Interplay with plain point-to-point: an SMPI send into MPI_Recv, MPI_Send into an
   * SMPI receive (always a copy: the sender keeps its buffer). */
  uint64_t plain[500];
  MPIX_Smpi_send(make(500, round), 500, MPI_UINT64_T, right, 100, MPI_COMM_WORLD);
  MPI_Recv(plain, 500, MPI_UINT64_T, left, 100, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  int intact = plain[1] == (uint64_t)left && plain[499] == (uint64_t)left * 1000003u +
                                                                (uint64_t)round * 7919u + 499u;
  CHECK(intact, "SMPI send into MPI_Recv: wrong bytes");
  for (int i = 0; i < 500; i++)
    plain[i] = (uint64_t)rank * 31u + (uint64_t)i;
  MPI_Request req;
  MPI_Isend(plain, 500, MPI_UINT64_T, right, 101, MPI_COMM_WORLD, &req);
  MPIX_Smpi_recv(&got, 500, MPI_UINT64_T, left, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  intact = got != NULL;
  for (int i = 0; i < 500 && intact; i++)
    intact = got[i] == (uint64_t)left * 31u + (uint64_t)i;
  CHECK(intact, "MPI_Send into an SMPI receive: wrong bytes");
  MPIX_Smpi_free(got);
  round++;

  /* Everyone sends to rank 0, which receives from MPI_ANY_SOURCE. */
  MPIX_Smpi_send(make(1000, round), 1000, MPI_UINT64_T, 0, 102, MPI_COMM_WORLD);
  if (rank == 0) {
    int seen = 0;
    for (int i = 0; i < size; i++) {
      MPI_Status status;
      MPIX_Smpi_recv(&got, 1000, MPI_UINT64_T, MPI_ANY_SOURCE, 102, MPI_COMM_WORLD, &status);
      check_message(got, 1000, status.MPI_SOURCE, round, "any source");
      seen |= 1 << (status.MPI_SOURCE % 30);
      MPIX_Smpi_free(got);
    }
    CHECK(size > 30 || seen == (1 << size) - 1, "any source: senders seen %#x", seen);
  }
  round++;

  /* MPI_PROC_NULL, and a message longer than the receive. */
  got = (uint64_t *)&plain;
  int err = MPIX_Smpi_recv(&got, 10, MPI_UINT64_T, MPI_PROC_NULL, 0, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE);
  CHECK(err == MPI_SUCCESS && got == NULL, "MPI_PROC_NULL: error %d, buffer %p", err,
        (void *)got);
  MPIX_Smpi_send(make(64, round), 64, MPI_UINT64_T, right, 103, MPI_COMM_WORLD);
  err = MPIX_Smpi_recv(&got, 16, MPI_UINT64_T, left, 103, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  CHECK(err == MPI_ERR_TRUNCATE, "longer message: error %d, not MPI_ERR_TRUNCATE", err);
  check_message(got, 64, left, round, "longer message");
  MPIX_Smpi_free(got);

  int totals[2] = {checks, errors}, sums[2];
  MPI_Reduce(totals, sums, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("test_smpi: %d checks, %d errors\n", sums[0], sums[1]);
  MPI_Finalize();
  return errors != 0;
}
