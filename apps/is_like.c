/* is_like: the communication pattern of NPB IS (bucket sort of integer keys): per
 * iteration, keys are counted per destination rank (key ranges), an MPI_Alltoall of
 * the counts, an MPI_Alltoallv of the keys, then the local ranking (a counting sort)
 * that reads the received keys in order. Verifies that every rank holds exactly its
 * key range, sorted, and that the number and sum of keys are conserved.
 *
 * usage: is_like [log2 keys per rank (default 20)] [iterations (default 5)]
 * prints: total seconds, seconds inside MPI_Alltoallv (the call), the phases around it
 * (counting and bucketing before; the histogram of the received keys and the
 * expansion after), and "verified". */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { KEY_BITS = 19 };

static uint32_t next_key(uint64_t *state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(*state >> 33) & ((1u << KEY_BITS) - 1);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, p;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  int log2n = argc > 1 ? atoi(argv[1]) : 20, iters = argc > 2 ? atoi(argv[2]) : 5;
  size_t nkeys = (size_t)1 << log2n;
  uint32_t range = ((1u << KEY_BITS) + (uint32_t)p - 1) / (uint32_t)p; /* keys per rank */
  uint32_t *keys = malloc(nkeys * sizeof *keys), *sendk = malloc(nkeys * sizeof *keys);
  size_t cap = 2 * nkeys + 1024;
  uint32_t *recvk = malloc(cap * sizeof *recvk), *sorted = malloc(cap * sizeof *recvk);
  int *scount = calloc((size_t)p, sizeof(int)), *sdispl = calloc((size_t)p, sizeof(int));
  int *rcount = calloc((size_t)p, sizeof(int)), *rdispl = calloc((size_t)p, sizeof(int));
  uint32_t *hist = malloc(range * sizeof *hist);
  double t_total = 0, t_a2av = 0, t_pre = 0, t_hist = 0, t_expand = 0;
  long bad = 0;
  for (int it = 0; it < iters; it++) {
    uint64_t state = (uint64_t)rank * 1000003u + (uint64_t)it * 7919u + 1;
    uint64_t sum = 0;
    for (size_t i = 0; i < nkeys; i++) sum += keys[i] = next_key(&state);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    memset(scount, 0, sizeof(int) * (size_t)p);
    for (size_t i = 0; i < nkeys; i++) scount[keys[i] / range]++;
    for (int d = 1; d < p; d++) sdispl[d] = sdispl[d - 1] + scount[d - 1];
    int *fill = calloc((size_t)p, sizeof(int));
    for (size_t i = 0; i < nkeys; i++) {
      int d = (int)(keys[i] / range);
      sendk[sdispl[d] + fill[d]++] = keys[i];
    }
    free(fill);
    MPI_Alltoall(scount, 1, MPI_INT, rcount, 1, MPI_INT, MPI_COMM_WORLD);
    size_t total = 0;
    for (int s = 0; s < p; s++) {
      rdispl[s] = (int)total;
      total += (size_t)rcount[s];
    }
    if (total > cap) {
      fprintf(stderr, "is_like: rank %d receives %zu keys, more than %zu\n", rank, total, cap);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    double t1 = MPI_Wtime();
    t_pre += t1 - t0;
    MPI_Alltoallv(sendk, scount, sdispl, MPI_UINT32_T, recvk, rcount, rdispl, MPI_UINT32_T,
                  MPI_COMM_WORLD);
    double t2 = MPI_Wtime();
    t_a2av += t2 - t1;
    /* ranking: a counting sort of the received keys, read in order */
    uint32_t base = (uint32_t)rank * range;
    memset(hist, 0, range * sizeof *hist);
    for (size_t i = 0; i < total; i++) hist[recvk[i] - base]++;
    double t3 = MPI_Wtime();
    t_hist += t3 - t2;
    size_t at = 0;
    for (uint32_t k = 0; k < range; k++)
      for (uint32_t c = 0; c < hist[k]; c++) sorted[at++] = base + k;
    double t4 = MPI_Wtime();
    t_expand += t4 - t3;
    t_total += t4 - t0;
    /* verification: own range, sorted, count and sum conserved */
    uint64_t mine = 0;
    for (size_t i = 0; i < total; i++) {
      mine += recvk[i];
      if (recvk[i] < base || recvk[i] >= base + range || (i && sorted[i] < sorted[i - 1])) bad++;
    }
    uint64_t in[2] = {nkeys, sum}, out[2] = {total, mine}, gin[2], gout[2];
    MPI_Allreduce(in, gin, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(out, gout, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (gin[0] != gout[0] || gin[1] != gout[1]) bad++;
  }
  long all_bad = 0;
  double times[5] = {t_total, t_a2av, t_pre, t_hist, t_expand}, slowest[5];
  MPI_Reduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(times, slowest, 5, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (!rank)
    printf("is_like: keys/rank=2^%d ranks=%d iters=%d total_s=%.6f alltoallv_call_s=%.6f "
           "pre_s=%.6f hist_s=%.6f expand_s=%.6f %s\n",
           log2n, p, iters, slowest[0], slowest[1], slowest[2], slowest[3], slowest[4],
           all_bad ? "FAILED" : "verified");
  fflush(stdout); /* seen even if the host MPI then hangs in MPI_Finalize */
  free(keys);
  free(sendk);
  free(recvk);
  free(sorted);
  free(scount);
  free(sdispl);
  free(rcount);
  free(rdispl);
  free(hist);
  MPI_Finalize();
  return all_bad != 0;
}
