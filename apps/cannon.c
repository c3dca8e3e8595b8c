/* cannon: Cannon's matrix multiply C = A x B on a q x q grid of ranks (q*q ranks, n a
 * multiple of q), in two variants that shift the blocks of A (left) and B (up) between
 * the block products:
 *   mpi   MPI_Sendrecv_replace of each block;
 *   smpi  ownership passing (MPIX_Smpi_send / MPIX_Smpi_recv, mcoll.h): between thread
 *         ranks of one process a block's buffer changes hands without a copy.
 * The variants alternate, repeat by repeat, inside one run, so that both see the same
 * machine. Every rank checks its block of C against a serial product (the entries are
 * small integers, so the comparison is exact).
 *
 * usage: cannon [n (default 256)] [mpi|smpi|both (default both)] [repeats (default 3)]
 * prints per variant the median seconds per multiply (slowest rank), then "verified". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcoll.h"

enum variant { PLAIN_MPI, SMPI };
static const char *const variant_names[] = {"mpi", "smpi"};

static double a_entry(int row, int col) { return (double)((row * 7 + col * 3) % 11 - 5); }
static double b_entry(int row, int col) { return (double)((row * 5 + col * 2) % 13 - 6); }

struct grid {
  MPI_Comm comm;
  int q, row, col, b; /* b: block edge */
};

static int rank_at(const struct grid *g, int row, int col)
{
  return ((row + g->q) % g->q) * g->q + (col + g->q) % g->q;
}

/* c += a x b for b x b blocks (row-major). */
static void block_product(double *c, const double *a, const double *b, int n)
{
  for (int i = 0; i < n; i++)
    for (int k = 0; k < n; k++) {
      double aik = a[(size_t)i * n + k];
      const double *brow = b + (size_t)k * n;
      double *crow = c + (size_t)i * n;
      for (int j = 0; j < n; j++)
        crow[j] += aik * brow[j];
    }
}

static void fill_blocks(const struct grid *g, double *a, double *b)
{
  for (int i = 0; i < g->b; i++)
    for (int j = 0; j < g->b; j++) {
      a[(size_t)i * g->b + j] = a_entry(g->row * g->b + i, g->col * g->b + j);
      b[(size_t)i * g->b + j] = b_entry(g->row * g->b + i, g->col * g->b + j);
    }
}

/* Moves block *buf to rank dst and takes the one rank src sends. */
static void shift(const struct grid *g, enum variant v, double **buf, int dst, int src, int tag)
{
  int count = g->b * g->b;
  if (v == PLAIN_MPI) {
    MPI_Sendrecv_replace(*buf, count, MPI_DOUBLE, dst, tag, src, tag, g->comm,
                         MPI_STATUS_IGNORE);
    return;
  }
  MPIX_Smpi_send(*buf, count, MPI_DOUBLE, dst, tag, g->comm); /* *buf is no longer ours */
  MPIX_Smpi_recv(buf, count, MPI_DOUBLE, src, tag, g->comm, MPI_STATUS_IGNORE);
}

/* One multiply into c; returns the seconds it took (blocks filled beforehand). */
static double multiply(const struct grid *g, enum variant v, double *c)
{
  size_t bytes = sizeof(double) * (size_t)g->b * g->b;
  double *a, *b;
  if (v == SMPI) {
    MPIX_Smpi_alloc((MPI_Aint)bytes, &a);
    MPIX_Smpi_alloc((MPI_Aint)bytes, &b);
  } else {
    a = malloc(bytes);
    b = malloc(bytes);
  }
  fill_blocks(g, a, b);
  memset(c, 0, bytes);
  MPI_Barrier(g->comm);
  double start = MPI_Wtime();
  /* Skew: row i of A moves i blocks left, column j of B j blocks up. */
  if (g->row)
    shift(g, v, &a, rank_at(g, g->row, g->col - g->row), rank_at(g, g->row, g->col + g->row), 0);
  if (g->col)
    shift(g, v, &b, rank_at(g, g->row - g->col, g->col), rank_at(g, g->row + g->col, g->col), 1);
  for (int step = 0; step < g->q; step++) {
    block_product(c, a, b, g->b);
    if (step + 1 == g->q)
      break;
    shift(g, v, &a, rank_at(g, g->row, g->col - 1), rank_at(g, g->row, g->col + 1), 0);
    shift(g, v, &b, rank_at(g, g->row - 1, g->col), rank_at(g, g->row + 1, g->col), 1);
  }
  double seconds = MPI_Wtime() - start, slowest;
  MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, g->comm);
  if (v == SMPI) {
    MPIX_Smpi_free(a);
    MPIX_Smpi_free(b);
  } else {
    free(a);
    free(b);
  }
  return slowest;
}

/* Entries of this rank's block of C that differ from the serial product. */
static long check(const struct grid *g, const double *c, int n)
{
  long wrong = 0;
  for (int i = 0; i < g->b; i++)
    for (int j = 0; j < g->b; j++) {
      int row = g->row * g->b + i, col = g->col * g->b + j;
      double sum = 0;
      for (int k = 0; k < n; k++)
        sum += a_entry(row, k) * b_entry(k, col);
      wrong += sum != c[(size_t)i * g->b + j];
    }
  return wrong;
}

static int compare_doubles(const void *x, const void *y)
{
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int n = argc > 1 ? atoi(argv[1]) : 256;
  const char *which = argc > 2 ? argv[2] : "both";
  int repeats = argc > 3 ? atoi(argv[3]) : 3;
  struct grid g = {.comm = MPI_COMM_WORLD};
  int size, rank;
  MPI_Comm_size(g.comm, &size);
  MPI_Comm_rank(g.comm, &rank);
  while ((g.q + 1) * (g.q + 1) <= size)
    g.q++;
  if (g.q * g.q != size || n <= 0 || n % g.q || repeats < 1) {
    if (rank == 0)
      fprintf(stderr, "cannon: needs a square number of ranks (not %d) dividing n = %d\n",
              size, n);
    MPI_Abort(g.comm, 2);
  }
  g.row = rank / g.q;
  g.col = rank % g.q;
  g.b = n / g.q;
  int run[2] = {strcmp(which, "smpi") != 0, strcmp(which, "mpi") != 0};
  if (run[SMPI] && !MPIX_Smpi_send) {
    if (rank == 0)
      fprintf(stderr, "cannon: MPIX_Smpi_* not loaded (run under mcollrun or link -lmcoll)\n");
    MPI_Abort(g.comm, 2);
  }
  double *c = malloc(sizeof(double) * (size_t)g.b * g.b);
  double *times[2] = {calloc((size_t)repeats, sizeof(double)),
                      calloc((size_t)repeats, sizeof(double))};
  long wrong = 0;
  for (int r = 0; r < repeats; r++)
    for (int v = 0; v < 2; v++) {
      /* (alternating which variant goes first evens out warm-up and drift) */
      enum variant variant = (enum variant)((v + r) % 2);
      if (!run[variant])
        continue;
      times[variant][r] = multiply(&g, variant, c);
      if (r == 0)
        wrong += check(&g, c, n);
    }
  long wrong_total;
  MPI_Reduce(&wrong, &wrong_total, 1, MPI_LONG, MPI_SUM, 0, g.comm);
  if (rank == 0) {
    double median[2] = {0, 0};
    for (int v = 0; v < 2; v++) {
      if (!run[v])
        continue;
      qsort(times[v], (size_t)repeats, sizeof(double), compare_doubles);
      median[v] = times[v][repeats / 2];
      printf("cannon n=%d ranks=%d %s %.6f s per multiply\n", n, size, variant_names[v],
             median[v]);
    }
    if (run[PLAIN_MPI] && run[SMPI])
      printf("cannon smpi speedup x%.3f\n", median[PLAIN_MPI] / median[SMPI]);
    if (wrong_total)
      printf("cannon: %ld entries of C wrong\n", wrong_total);
    else
      printf("verified\n");
  }
  free(c);
  free(times[0]);
  free(times[1]);
  MPI_Finalize();
  return rank == 0 && wrong_total != 0;
}
