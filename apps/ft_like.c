/* ft_like: the communication pattern of NPB FT (a 3-D FFT on z-slabs): per
 * iteration, 2-D FFTs of the rank's z-planes, an MPI_Alltoall transpose to y-slabs,
 * then computation that reads the received blocks in order (unpacking them, source
 * by source, into z-lines) and the FFTs along z. Verifies every element against a
 * serial 3-D FFT of the same field computed by each rank.
 *
 * usage: ft_like [N (power of 2, default 64)] [iterations (default 5)]
 * prints: total seconds, seconds inside MPI_Alltoall (the call), the phases around it
 * (2-D FFTs and packing before; unpacking the received blocks, FFTs along z after),
 * and "verified". */
#include <complex.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef double complex cplx;

static double now(void) { return MPI_Wtime(); }

/* In-place radix-2 FFT of n points with stride s. */
static void fft(cplx *a, int n, int s) {
  for (int i = 1, j = 0; i < n; i++) {
    int bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      cplx t = a[i * s];
      a[i * s] = a[j * s];
      a[j * s] = t;
    }
  }
  for (int len = 2; len <= n; len <<= 1) {
    double ang = -2 * M_PI / len;
    cplx wl = cos(ang) + I * sin(ang);
    for (int i = 0; i < n; i += len) {
      cplx w = 1;
      for (int k = 0; k < len / 2; k++) {
        cplx u = a[(i + k) * s], v = a[(i + k + len / 2) * s] * w;
        a[(i + k) * s] = u + v;
        a[(i + k + len / 2) * s] = u - v;
        w *= wl;
      }
    }
  }
}

static cplx field(int z, int y, int x) {
  unsigned h = (unsigned)(z * 73856093) ^ (unsigned)(y * 19349663) ^ (unsigned)(x * 83492791);
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  return (double)(h & 0xffff) / 65536.0 + I * (double)((h >> 16) & 0xffff) / 65536.0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, p;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  int n = argc > 1 ? atoi(argv[1]) : 64, iters = argc > 2 ? atoi(argv[2]) : 5;
  if (n % p || (n & (n - 1))) {
    if (!rank) fprintf(stderr, "ft_like: N must be a power of 2 divisible by the ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int nz = n / p, ny = n / p;
  size_t plane = (size_t)n * n, slab = (size_t)nz * plane, blk = (size_t)nz * ny * n;
  cplx *a = malloc(slab * sizeof *a);      /* [zl][y][x] */
  cplx *send = malloc(slab * sizeof *a);   /* [dest][zl][yl][x] */
  cplx *recv = malloc(slab * sizeof *a);   /* [src][zl][yl][x] */
  cplx *b = malloc(slab * sizeof *a);      /* [yl][x][z] */
  /* the reference: the whole field, FFT along x, y, z */
  cplx *ref = malloc((size_t)n * plane * sizeof *ref);
  for (int z = 0; z < n; z++)
    for (int y = 0; y < n; y++)
      for (int x = 0; x < n; x++) ref[(size_t)z * plane + (size_t)y * n + x] = field(z, y, x);
  for (int z = 0; z < n; z++)
    for (int y = 0; y < n; y++) fft(ref + (size_t)z * plane + (size_t)y * n, n, 1);
  for (int z = 0; z < n; z++)
    for (int x = 0; x < n; x++) fft(ref + (size_t)z * plane + x, n, n);
  for (int y = 0; y < n; y++)
    for (int x = 0; x < n; x++) fft(ref + (size_t)y * n + x, n, (int)plane);

  double t_total = 0, t_a2a = 0, t_pre = 0, t_unpack = 0, t_zfft = 0;
  long bad = 0;
  for (int it = 0; it < iters; it++) {
    for (int zl = 0; zl < nz; zl++)
      for (int y = 0; y < n; y++)
        for (int x = 0; x < n; x++) a[(size_t)zl * plane + (size_t)y * n + x] = field(rank * nz + zl, y, x);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    /* 2-D FFTs of the rank's planes */
    for (int zl = 0; zl < nz; zl++) {
      for (int y = 0; y < n; y++) fft(a + (size_t)zl * plane + (size_t)y * n, n, 1);
      for (int x = 0; x < n; x++) fft(a + (size_t)zl * plane + x, n, n);
    }
    for (int d = 0; d < p; d++)
      for (int zl = 0; zl < nz; zl++)
        memcpy(send + (size_t)d * blk + (size_t)zl * ny * n, a + (size_t)zl * plane + (size_t)d * ny * n,
               (size_t)ny * n * sizeof *a);
    double t1 = now();
    t_pre += t1 - t0;
    MPI_Alltoall(send, (int)(blk * 2), MPI_DOUBLE, recv, (int)(blk * 2), MPI_DOUBLE, MPI_COMM_WORLD);
    double t2 = now();
    t_a2a += t2 - t1;
    /* the received blocks in order: block s holds z in s's range */
    for (int s = 0; s < p; s++)
      for (int zl = 0; zl < nz; zl++)
        for (int yl = 0; yl < ny; yl++)
          for (int x = 0; x < n; x++)
            b[((size_t)yl * n + x) * n + (size_t)s * nz + zl] =
                recv[(size_t)s * blk + ((size_t)zl * ny + yl) * n + x];
    double t3 = now();
    t_unpack += t3 - t2;
    for (size_t line = 0; line < (size_t)ny * n; line++) fft(b + line * n, n, 1);
    double t4 = now();
    t_zfft += t4 - t3;
    t_total += t4 - t0;
    for (int yl = 0; yl < ny; yl++)
      for (int x = 0; x < n; x++)
        for (int z = 0; z < n; z++) {
          cplx got = b[((size_t)yl * n + x) * n + z];
          cplx want = ref[(size_t)z * plane + (size_t)(rank * ny + yl) * n + x];
          if (cabs(got - want) > 1e-9 * (1 + cabs(want))) bad++;
        }
  }
  long all_bad = 0;
  double times[5] = {t_total, t_a2a, t_pre, t_unpack, t_zfft}, slowest[5];
  MPI_Reduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(times, slowest, 5, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (!rank)
    printf("ft_like: N=%d ranks=%d iters=%d total_s=%.6f alltoall_call_s=%.6f pre_s=%.6f "
           "unpack_s=%.6f zfft_s=%.6f %s\n",
           n, p, iters, slowest[0], slowest[1], slowest[2], slowest[3], slowest[4],
           all_bad ? "FAILED" : "verified");
  fflush(stdout); /* seen even if the host MPI then hangs in MPI_Finalize */
  free(a);
  free(send);
  free(recv);
  free(b);
  free(ref);
  MPI_Finalize();
  return all_bad != 0;
}
