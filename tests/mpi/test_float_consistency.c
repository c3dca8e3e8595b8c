/* test_float_consistency: floating-point reductions must give every rank the same
 * bits. Floats and doubles of mixed magnitudes (1e8, 1, 1e-8, ... with random signs)
 * make a sum depend on the order of its terms, so a rank that folds the inputs in
 * its own order gets other bits than its peers. For each type and count (1 element
 * to --max-count), the program checks:
 *   - allreduce (separate buffers and MPI_IN_PLACE): every rank's result has the
 *     same bytes (a hash per rank, compared at rank 0; on a mismatch rank 0 counts
 *     the differing elements), and MPI_MAX over signed zeros likewise (a fold whose
 *     operand order depends on the rank keeps -0 on one rank and +0 on another);
 *   - reduce (at two roots), reduce_scatter_block, reduce_scatter (unequal blocks,
 *     also in place), scan and exscan: the same call made twice gives the same bytes;
 *   - every result lies within (p + 1) eps sum|x| of the exact sum (long double);
 *   - the data is order-sensitive: folding in rank order and from the last rank
 *     down differ somewhere, so the consistency checks have something to find.
 * Results move between ranks by MPI_Send/MPI_Recv only (mcoll never intercepts
 * point-to-point).
 *
 * usage: test_float_consistency [--max-count N] [--verbose]
 * prints "test_float_consistency: <checks> checks, <errors> errors" at rank 0. */
#include <mpi.h>

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TAG_HASH = 5151, TAG_VERDICT, TAG_DATA, TAG_SUM, MAX_REPORTS = 30 };

static int rank, size, verbose;
static uint64_t checks, errors, reports;

static void fail(const char *what, size_t count, const char *type, const char *fmt, ...) {
  errors++;
  if (reports++ < MAX_REPORTS) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rank %d: %s count=%zu %s: ", rank, what, count, type);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
  }
}

static uint64_t mix(uint64_t z) { /* splitmix64's finaliser */
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Input element i of rank r in case `seed`: a magnitude from far apart decades,
 * a few significant bits of jitter, a random sign. */
static double value_of(uint64_t seed, int r, size_t i) {
  static const double decades[] = {1e8, 1.0, 1e-8, 3.0e4, 7.0e-3, 1e8};
  uint64_t h = mix(seed ^ mix(((uint64_t)r << 40) ^ i));
  double v = decades[h % 6] * (1.0 + (double)((h >> 8) & 0xff) / 256.0);
  return (h >> 20) & 1 ? -v : v;
}

/* Signed zeros, and now and then a 1, for MPI_MAX. */
static double zero_of(uint64_t seed, int r, size_t i) {
  uint64_t h = mix(seed ^ mix(((uint64_t)r << 40) ^ i ^ 0x5A5A5A5Aull));
  if (h % 17 == 0) return 1.0;
  return (h >> 20) & 1 ? -0.0 : 0.0;
}

struct vec {
  int is_float;
  MPI_Datatype type;
  size_t elem;
  const char *name;
};

static double get(const struct vec *v, const void *buf, size_t i) {
  return v->is_float ? (double)((const float *)buf)[i] : ((const double *)buf)[i];
}

static void put(const struct vec *v, void *buf, size_t i, double x) {
  if (v->is_float) ((float *)buf)[i] = (float)x;
  else ((double *)buf)[i] = x;
}

static void fill(const struct vec *v, void *buf, uint64_t seed, int r, size_t first, size_t n) {
  for (size_t i = 0; i < n; i++) put(v, buf, i, value_of(seed, r, first + i));
}

static uint64_t hash_bytes(const void *p, size_t n) { /* FNV-1a */
  const unsigned char *b = p;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

/* Every rank's buf (n elements) must have the same bytes. */
static void check_same_everywhere(const struct vec *v, const void *buf, size_t n,
                                  const char *what) {
  size_t bytes = n * v->elem;
  uint64_t h = hash_bytes(buf, bytes);
  int differ = 0;
  checks++;
  if (rank == 0) {
    for (int r = 1; r < size; r++) {
      uint64_t theirs;
      MPI_Recv(&theirs, 1, MPI_UINT64_T, r, TAG_HASH, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      differ |= theirs != h;
    }
    for (int r = 1; r < size; r++) MPI_Send(&differ, 1, MPI_INT, r, TAG_VERDICT, MPI_COMM_WORLD);
  } else {
    MPI_Send(&h, 1, MPI_UINT64_T, 0, TAG_HASH, MPI_COMM_WORLD);
    MPI_Recv(&differ, 1, MPI_INT, 0, TAG_VERDICT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  if (!differ) return;
  /* Count the elements that differ from rank 0's, rank by rank. */
  if (rank != 0) {
    MPI_Send(buf, (int)n, v->type, 0, TAG_DATA, MPI_COMM_WORLD);
    return;
  }
  unsigned char *theirs = malloc(bytes ? bytes : 1);
  for (int r = 1; r < size; r++) {
    MPI_Recv(theirs, (int)n, v->type, r, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    long mismatches = 0;
    for (size_t i = 0; i < n; i++)
      mismatches += memcmp(theirs + i * v->elem, (const char *)buf + i * v->elem, v->elem) != 0;
    if (mismatches)
      fail(what, n, v->name, "%ld elements differ from rank 0's on rank %d", mismatches, r);
  }
  free(theirs);
}

/* Every element of result (n elements, starting at vector element first) within
 * (p + 1) eps sum|x| of the exact fold of ranks [lo, hi). */
static void check_close(const struct vec *v, const void *result, uint64_t seed, size_t first,
                        size_t n, int lo, int hi, const char *what, size_t count) {
  double eps = v->is_float ? FLT_EPSILON : DBL_EPSILON;
  size_t stride = n > 4096 ? n / 4096 : 1; /* a sample of the long vectors */
  long bad = 0, where = -1;
  checks++;
  for (size_t i = 0; i < n; i += stride) {
    long double exact = 0, magnitude = 0;
    for (int r = lo; r < hi; r++) {
      /* The terms as the type holds them. */
      double x = v->is_float ? (double)(float)value_of(seed, r, first + i)
                             : value_of(seed, r, first + i);
      exact += x;
      magnitude += fabs(x);
    }
    long double diff = fabsl((long double)get(v, result, i) - exact);
    if (diff > (long double)(size + 1) * eps * magnitude + (long double)FLT_MIN) {
      if (where < 0) where = (long)(first + i);
      bad++;
    }
  }
  if (bad)
    fail(what, count, v->name, "%ld sampled elements off the exact sum (first: element %ld)", bad,
         where);
}

/* The data must make the order matter: ranks folded upwards and downwards differ
 * somewhere (rank 0 checks, with p >= 3 and enough elements to be sure). */
static void check_order_sensitive(const struct vec *v, uint64_t seed, size_t count) {
  if (rank != 0 || size < 3 || count < 256) return;
  checks++;
  long differ = 0;
  for (size_t i = 0; i < count && i < 4096; i++) {
    double up = 0, down = 0;
    for (int r = 0; r < size; r++) {
      double x = value_of(seed, r, i), y = value_of(seed, size - 1 - r, i);
      if (v->is_float) {
        up = (double)((float)up + (float)x);
        down = (double)((float)down + (float)y);
      } else {
        up += x;
        down += y;
      }
    }
    differ += up != down;
  }
  if (!differ) fail("data", count, v->name, "no element's sum depends on the order");
}

static void check_same_bytes(const void *a, const void *b, size_t bytes, const char *what,
                             const struct vec *v, size_t count) {
  checks++;
  if (memcmp(a, b, bytes)) fail(what, count, v->name, "called twice, different bytes");
}

static int block_of(size_t count, int r) { /* unequal blocks summing to count */
  size_t weight = (size_t)r + 1, total = (size_t)size * (size + 1) / 2;
  size_t lo = count * (weight * (weight - 1) / 2) / total, hi = count * (weight * (weight + 1) / 2) / total;
  return (int)(hi - lo);
}

static void run_case(const struct vec *v, size_t count, uint64_t seed) {
  size_t bytes = count * v->elem;
  char *in = malloc(bytes), *out = malloc(bytes), *again = malloc(bytes);
  fill(v, in, seed, rank, 0, count);
  check_order_sensitive(v, seed, count);

  /* allreduce */
  MPI_Allreduce(in, out, (int)count, v->type, MPI_SUM, MPI_COMM_WORLD);
  check_same_everywhere(v, out, count, "allreduce");
  check_close(v, out, seed, 0, count, 0, size, "allreduce", count);
  memcpy(again, in, bytes);
  MPI_Allreduce(MPI_IN_PLACE, again, (int)count, v->type, MPI_SUM, MPI_COMM_WORLD);
  check_same_everywhere(v, again, count, "allreduce in place");
  check_close(v, again, seed, 0, count, 0, size, "allreduce in place", count);

  /* allreduce MPI_MAX over signed zeros */
  for (size_t i = 0; i < count; i++) put(v, again, i, zero_of(seed, rank, i));
  MPI_Allreduce(MPI_IN_PLACE, again, (int)count, v->type, MPI_MAX, MPI_COMM_WORLD);
  check_same_everywhere(v, again, count, "allreduce max of signed zeros");

  /* reduce at the last rank and at rank 0, twice each */
  for (int k = 0; k < 2; k++) {
    int root = k == 0 ? size - 1 : 0;
    MPI_Reduce(in, out, (int)count, v->type, MPI_SUM, root, MPI_COMM_WORLD);
    if (rank == root) memcpy(again, in, bytes);
    MPI_Reduce(rank == root ? MPI_IN_PLACE : in, again, (int)count, v->type, MPI_SUM, root,
               MPI_COMM_WORLD);
    if (rank == root) {
      check_same_bytes(out, again, bytes, k ? "reduce root 0 (then in place)"
                                            : "reduce root p-1 (then in place)", v, count);
      check_close(v, out, seed, 0, count, 0, size, "reduce", count);
    }
  }

  /* reduce_scatter_block: blocks of count / p */
  size_t block = count / (size_t)size;
  if (block > 0) {
    MPI_Reduce_scatter_block(in, out, (int)block, v->type, MPI_SUM, MPI_COMM_WORLD);
    MPI_Reduce_scatter_block(in, again, (int)block, v->type, MPI_SUM, MPI_COMM_WORLD);
    check_same_bytes(out, again, block * v->elem, "reduce_scatter_block", v, count);
    check_close(v, out, seed, block * (size_t)rank, block, 0, size, "reduce_scatter_block", count);
  }

  /* reduce_scatter: unequal blocks, then in place */
  int *counts = malloc(sizeof(int) * (size_t)size);
  size_t displ = 0;
  for (int r = 0; r < size; r++) {
    counts[r] = block_of(count, r);
    if (r < rank) displ += (size_t)counts[r];
  }
  MPI_Reduce_scatter(in, out, counts, v->type, MPI_SUM, MPI_COMM_WORLD);
  memcpy(again, in, bytes);
  MPI_Reduce_scatter(MPI_IN_PLACE, again, counts, v->type, MPI_SUM, MPI_COMM_WORLD);
  check_same_bytes(out, again, (size_t)counts[rank] * v->elem, "reduce_scatter (then in place)",
                   v, count);
  check_close(v, out, seed, displ, (size_t)counts[rank], 0, size, "reduce_scatter", count);
  free(counts);

  /* scan and exscan, twice each */
  MPI_Scan(in, out, (int)count, v->type, MPI_SUM, MPI_COMM_WORLD);
  memcpy(again, in, bytes);
  MPI_Scan(MPI_IN_PLACE, again, (int)count, v->type, MPI_SUM, MPI_COMM_WORLD);
  check_same_bytes(out, again, bytes, "scan (then in place)", v, count);
  check_close(v, out, seed, 0, count, 0, rank + 1, "scan", count);
  MPI_Exscan(in, out, (int)count, v->type, MPI_SUM, MPI_COMM_WORLD);
  MPI_Exscan(in, again, (int)count, v->type, MPI_SUM, MPI_COMM_WORLD);
  if (rank > 0) {
    check_same_bytes(out, again, bytes, "exscan", v, count);
    check_close(v, out, seed, 0, count, 0, rank, "exscan", count);
  }
  free(in);
  free(out);
  free(again);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t max_count = (size_t)1 << 20;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--max-count") && i + 1 < argc) max_count = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--verbose")) verbose = 1;
  }
  /* Every size regime: a few elements (slots), flat, HSRA, single copy, the ring. */
  static const size_t counts[] = {1, 2, 3, 7, 33, 100, 255, 1000, 4099, 9000, 33333,
                                  100003, 300000, (size_t)1 << 20};
  const struct vec types[] = {{1, MPI_FLOAT, sizeof(float), "float"},
                              {0, MPI_DOUBLE, sizeof(double), "double"}};
  uint64_t seed = 1;
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
    if (counts[c] > max_count) break;
    for (int k = 0; k < 2; k++) {
      if (verbose && rank == 0) fprintf(stderr, "%s count=%zu\n", types[k].name, counts[c]);
      run_case(&types[k], counts[c], seed++);
    }
  }
  /* Totals at rank 0. */
  uint64_t mine[2] = {checks, errors};
  if (rank == 0) {
    for (int r = 1; r < size; r++) {
      uint64_t theirs[2];
      MPI_Recv(theirs, 2, MPI_UINT64_T, r, TAG_SUM, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      mine[0] += theirs[0];
      mine[1] += theirs[1];
    }
    printf("test_float_consistency: %" PRIu64 " checks, %" PRIu64 " errors\n", mine[0], mine[1]);
  } else {
    MPI_Send(mine, 2, MPI_UINT64_T, 0, TAG_SUM, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
