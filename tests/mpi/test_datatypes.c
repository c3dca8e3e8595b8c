/* test_datatypes: collectives whose datatypes mcoll must not take for plain bytes,
 * datatypes beyond INT_MAX bytes, and erroneous op/type pairs of the reductions.
 *
 * usage: test_datatypes CASE
 *   layouts   reordered struct and overlapping typemaps in bcast, gather, allgather,
 *             scatter, alltoall; alltoall of plain types with a lower bound or spaced; bcast and MPI_Ibcast in a row with a strided vector
 *             on the root's side or the others' (any rank count)
 *   bottom    bcast of MPI_BOTTOM with an absolute-address struct (any rank count)
 *   bigtype   bcast of one contiguous type of 2 GiB + 1 MiB (2 ranks: ~4.1 GiB)
 *   bigpack   gather of 2 x hvector of 1025 MiB per rank, root in place with a
 *             contiguous type (2 ranks only: ~6.1 GiB, ~8.2 GiB if a rank packs)
 *   zerocopy  derived types whose data is plain bytes in order move without packing,
 *             the others are packed (counted by interposing PMPI_Pack at the root)
 *   ops       erroneous op/type pairs in every reduction collective on a
 *             communicator with MPI_ERRORS_RETURN: rank 0 prints one line per call
 *             with each rank's error class, for comparison with a native run
 * Ends with "test_datatypes: N checks, E errors".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TAG = 77 };

static int rank, size;
static long checks, errors;

static void check(int ok, const char *what, long index, long got, long want) {
  checks++;
  if (ok) return;
  if (errors++ < 20)
    fprintf(stderr, "rank %d: %s [%ld]: got %ld, want %ld\n", rank, what, index, got, want);
}

static void check_ints(const char *what, const int *got, const int *want, int n) {
  for (int i = 0; i < n; i++) check(got[i] == want[i], what, i, got[i], want[i]);
}

/* Two ints stored swapped: element data {x at +4, y at +0}. */
static MPI_Datatype swapped_pair(void) {
  MPI_Datatype t;
  int lens[2] = {1, 1};
  MPI_Aint displs[2] = {4, 0};
  MPI_Datatype types[2] = {MPI_INT, MPI_INT};
  MPI_Type_create_struct(2, lens, displs, types, &t);
  MPI_Type_commit(&t);
  return t;
}

/* Three ints at {0, 0, 2}: reads ints 0, 0, 2 (true extent = size = 12 bytes). */
static MPI_Datatype overlapping_three(void) {
  MPI_Datatype t;
  int displs[3] = {0, 0, 2};
  MPI_Type_create_indexed_block(3, 1, displs, MPI_INT, &t);
  MPI_Type_commit(&t);
  return t;
}

/* Bcast in a row, blocking and MPI_Ibcast, every root: one side (the root, or the
 * others) strided, the other contiguous with the same signature. A call on the
 * caller's stack may take only a contiguous buffer, so here the root meets while its
 * readers try, or the other way round: every rank must still end with the root's
 * data. One check per call and rank. */
static void bcast_strided_one_side(void) {
  enum { CALLS = 24, MAX_N = 41 };
  int buf[2 * MAX_N];
  for (int k = 0; k < CALLS; k++) {
    int n = 1 + (k * 5) % MAX_N, root = k % size;
    int root_strided = (k / 2) % 2, strided = (rank == root) == root_strided;
    MPI_Datatype vec;
    MPI_Type_vector(n, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    for (int i = 0; i < 2 * n; i++) buf[i] = rank == root ? -7 : -1;
    for (int i = 0; i < n && rank == root; i++) buf[strided ? 2 * i : i] = 1000 * k + i;
    MPI_Request req;
    if (k % 2) {
      MPI_Ibcast(buf, strided ? 1 : n, strided ? vec : MPI_INT, root, MPI_COMM_WORLD, &req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
      MPI_Bcast(buf, strided ? 1 : n, strided ? vec : MPI_INT, root, MPI_COMM_WORLD);
    }
    int bad = -1;
    for (int i = 0; i < n && bad < 0; i++)
      if (buf[strided ? 2 * i : i] != 1000 * k + i) bad = i;
    /* the gaps of a strided buffer stay untouched */
    for (int i = 0; i < n && bad < 0 && strided; i++)
      if (buf[2 * i + 1] != (rank == root ? -7 : -1)) bad = n + i;
    check(bad < 0, "bcast strided on one side", k, bad, -1);
    MPI_Type_free(&vec);
  }
}

/* Alltoall with types whose blocks are plain bytes elsewhere than at j·count·size:
 * "shifted" (two ints 8 bytes past the buffer: lb = true lb = 8, extent = size) and
 * "spaced" (one int in 12 bytes: one element per block is plain, two are not). Block
 * j from rank r carries {100r + j, -(100r + j)}. */
static void alltoall_plain_types(void) {
  MPI_Datatype shifted, spaced;
  int two = 2;
  MPI_Aint eight = 8;
  MPI_Datatype one_int = MPI_INT;
  MPI_Type_create_struct(1, &two, &eight, &one_int, &shifted);
  MPI_Type_commit(&shifted);
  MPI_Type_create_resized(MPI_INT, 0, 3 * sizeof(int), &spaced);
  MPI_Type_commit(&spaced);
  int n = 2 * size + 2;
  int *sbuf = malloc(sizeof(int) * (size_t)(3 * n)), *rbuf = malloc(sizeof(int) * (size_t)(3 * n));
  int *want = malloc(sizeof(int) * (size_t)(3 * n)), *flat = malloc(sizeof(int) * (size_t)n);

  /* shifted, one per block, into plain ints */
  for (int j = 0; j < size; j++) sbuf[2 + 2 * j] = 100 * rank + j, sbuf[3 + 2 * j] = -(100 * rank + j);
  for (int r = 0; r < size; r++) want[2 * r] = 100 * r + rank, want[2 * r + 1] = -(100 * r + rank);
  memset(rbuf, 0xff, sizeof(int) * (size_t)(3 * n));
  MPI_Alltoall(sbuf, 1, shifted, rbuf, 2, MPI_INT, MPI_COMM_WORLD);
  check_ints("alltoall from shifted", rbuf, want, 2 * size);

  /* plain ints into shifted */
  for (int j = 0; j < size; j++) flat[2 * j] = 100 * rank + j, flat[2 * j + 1] = -(100 * rank + j);
  memset(rbuf, 0xff, sizeof(int) * (size_t)(3 * n));
  MPI_Alltoall(flat, 2, MPI_INT, rbuf, 1, shifted, MPI_COMM_WORLD);
  check_ints("alltoall into shifted", rbuf + 2, want, 2 * size);
  check(rbuf[0] == -1 && rbuf[1] == -1, "alltoall into shifted: before", 0, rbuf[0], -1);

  /* spaced, one per block, both sides: block j at 12·j bytes */
  for (int j = 0; j < size; j++) sbuf[3 * j] = 100 * rank + j, sbuf[3 * j + 1] = sbuf[3 * j + 2] = 7;
  memset(rbuf, 0xff, sizeof(int) * (size_t)(3 * n));
  MPI_Alltoall(sbuf, 1, spaced, rbuf, 1, spaced, MPI_COMM_WORLD);
  for (int r = 0; r < size; r++) {
    check(rbuf[3 * r] == 100 * r + rank, "alltoall spaced", r, rbuf[3 * r], 100 * r + rank);
    check(rbuf[3 * r + 1] == -1 && rbuf[3 * r + 2] == -1, "alltoall spaced: holes", r, rbuf[3 * r + 1], -1);
  }

  /* spaced, two per block (packed), into shifted */
  int *big = calloc((size_t)(6 * size), sizeof(int)), *bigr = malloc(sizeof(int) * (size_t)n);
  for (int j = 0; j < size; j++) big[6 * j] = 100 * rank + j, big[6 * j + 3] = -(100 * rank + j);
  memset(bigr, 0xff, sizeof(int) * (size_t)n);
  MPI_Alltoall(big, 2, spaced, bigr, 1, shifted, MPI_COMM_WORLD);
  check_ints("alltoall spaced pairs into shifted", bigr + 2, want, 2 * size);

  /* zero elements of a type with holes */
  MPI_Alltoall(sbuf, 0, spaced, rbuf, 0, shifted, MPI_COMM_WORLD);
  check(1, "alltoall of nothing", 0, 0, 0);

  free(big), free(bigr), free(sbuf), free(rbuf), free(want), free(flat);
  MPI_Type_free(&shifted);
  MPI_Type_free(&spaced);
}

static void case_layouts(void) {
  MPI_Datatype swapped = swapped_pair(), overlap = overlapping_three();
  int *all = calloc((size_t)size * 3, sizeof(int)), *want = calloc((size_t)size * 3, sizeof(int));

  /* bcast: the root sends with the swapped type, the peers receive 2 x MPI_INT. */
  int pair[2] = {111, 222};
  if (rank != 0) pair[0] = pair[1] = -1;
  MPI_Bcast(pair, rank == 0 ? 1 : 2, rank == 0 ? swapped : MPI_INT, 0, MPI_COMM_WORLD);
  int bcast_want[2] = {rank == 0 ? 111 : 222, rank == 0 ? 222 : 111};
  check_ints("bcast swapped root", pair, bcast_want, 2);

  /* bcast the other way: the root sends 2 x MPI_INT, the peers receive swapped. */
  pair[0] = rank == 0 ? 111 : -1, pair[1] = rank == 0 ? 222 : -1;
  MPI_Bcast(pair, rank == 0 ? 2 : 1, rank == 0 ? MPI_INT : swapped, 0, MPI_COMM_WORLD);
  int bcast2_want[2] = {rank == 0 ? 111 : 222, rank == 0 ? 222 : 111};
  check_ints("bcast swapped peers", pair, bcast2_want, 2);

  /* gather: the root receives every rank's {10r, 10r+1} with the swapped type. */
  int mine[3] = {10 * rank, 10 * rank + 1, 10 * rank + 2};
  for (int r = 0; r < size; r++) want[2 * r] = 10 * r + 1, want[2 * r + 1] = 10 * r;
  memset(all, 0xff, sizeof(int) * (size_t)size * 3);
  MPI_Gather(mine, 2, MPI_INT, all, 1, swapped, 0, MPI_COMM_WORLD);
  if (rank == 0) check_ints("gather into swapped", all, want, 2 * size);

  /* allgather: every rank receives with the swapped type. */
  memset(all, 0xff, sizeof(int) * (size_t)size * 3);
  MPI_Allgather(mine, 2, MPI_INT, all, 1, swapped, MPI_COMM_WORLD);
  check_ints("allgather into swapped", all, want, 2 * size);

  /* allgather: every rank sends {mine[0], mine[0], mine[2]} with the overlapping type. */
  for (int r = 0; r < size; r++)
    want[3 * r] = want[3 * r + 1] = 10 * r, want[3 * r + 2] = 10 * r + 2;
  memset(all, 0xff, sizeof(int) * (size_t)size * 3);
  MPI_Allgather(mine, 1, overlap, all, 3, MPI_INT, MPI_COMM_WORLD);
  check_ints("allgather from overlapping", all, want, 3 * size);

  /* scatter: the root sends with the swapped type, everyone receives 2 x MPI_INT. */
  for (int r = 0; r < size; r++) all[2 * r] = 10 * r, all[2 * r + 1] = 10 * r + 1;
  int got[2] = {-1, -1}, scatter_want[2] = {10 * rank + 1, 10 * rank};
  MPI_Scatter(all, 1, swapped, got, 2, MPI_INT, 0, MPI_COMM_WORLD);
  check_ints("scatter from swapped", got, scatter_want, 2);

  /* alltoall: send swapped, receive plain. */
  for (int r = 0; r < size; r++) all[2 * r] = 100 * rank + r, all[2 * r + 1] = -(100 * rank + r);
  int *recv = calloc((size_t)size * 2, sizeof(int));
  for (int r = 0; r < size; r++) want[2 * r] = -(100 * r + rank), want[2 * r + 1] = 100 * r + rank;
  MPI_Alltoall(all, 1, swapped, recv, 2, MPI_INT, MPI_COMM_WORLD);
  check_ints("alltoall from swapped", recv, want, 2 * size);

  free(recv);
  free(all);
  free(want);
  MPI_Type_free(&swapped);
  MPI_Type_free(&overlap);
  alltoall_plain_types();
  bcast_strided_one_side();
}

static void case_bottom(void) {
  /* Two arrays in separate allocations, described by absolute addresses, the later
   * allocation first. */
  int *first = malloc(3 * sizeof(int)), *second = malloc(5 * sizeof(int));
  MPI_Aint at_first, at_second;
  MPI_Get_address(first, &at_first);
  MPI_Get_address(second, &at_second);
  int lens[2] = {2, 3};
  MPI_Aint displs[2] = {at_second, at_first};
  MPI_Datatype types[2] = {MPI_INT, MPI_INT}, absolute;
  MPI_Type_create_struct(2, lens, displs, types, &absolute);
  MPI_Type_commit(&absolute);
  for (int i = 0; i < 3; i++) first[i] = rank == 0 ? 30 + i : -1;
  for (int i = 0; i < 5; i++) second[i] = rank == 0 ? 50 + i : -1;
  MPI_Bcast(MPI_BOTTOM, 1, absolute, 0, MPI_COMM_WORLD);
  int want_first[3] = {30, 31, 32}, want_second[2] = {50, 51};
  check_ints("bcast MPI_BOTTOM first", first, want_first, 3);
  check_ints("bcast MPI_BOTTOM second", second, want_second, 2);
  check(second[2] == (rank == 0 ? 52 : -1), "bcast MPI_BOTTOM untouched", 2, second[2], 52);
  /* The same bytes into a plain buffer on the peers. */
  int plain[5] = {-1, -1, -1, -1, -1}, plain_want[5] = {50, 51, 30, 31, 32};
  if (rank == 0) MPI_Bcast(MPI_BOTTOM, 1, absolute, 0, MPI_COMM_WORLD);
  else MPI_Bcast(plain, 5, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank != 0) check_ints("bcast MPI_BOTTOM to plain", plain, plain_want, 5);
  MPI_Type_free(&absolute);
  free(first);
  free(second);
}

static void case_bigtype(void) {
  const size_t n = ((size_t)1 << 28) + ((size_t)1 << 17);
  MPI_Datatype big;
  MPI_Type_contiguous((int)n, MPI_DOUBLE, &big);
  MPI_Type_commit(&big);
  double *buf = malloc(n * sizeof(double));
  if (!buf) MPI_Abort(MPI_COMM_WORLD, 2);
  for (size_t i = 0; i < n; i++) buf[i] = rank == 0 ? (double)i : -1.0;
  int rc = MPI_Bcast(buf, 1, big, 0, MPI_COMM_WORLD);
  check(rc == MPI_SUCCESS, "bigtype bcast rc", 0, rc, MPI_SUCCESS);
  for (size_t i = 0; i < n; i += 4093) check(buf[i] == (double)i, "bigtype bcast", (long)i, (long)buf[i], (long)i);
  check(buf[n - 1] == (double)(n - 1), "bigtype bcast last", (long)n - 1, (long)buf[n - 1], (long)n - 1);
  free(buf);
  MPI_Type_free(&big);
}

/* One element: 1025 blocks of 1 MiB, 1 MiB + 4 KiB apart. */
enum { MIB = 1 << 20, HV_BLOCKS = 1025, HV_GAP = 4096 };

static unsigned char block_value(int r, int e, int b) { return (unsigned char)((r * 97 + e * 1025 + b) % 251 + 1); }

static void case_bigpack(void) {
  MPI_Datatype hv, plain;
  MPI_Type_create_hvector(HV_BLOCKS, MIB, (MPI_Aint)MIB + HV_GAP, MPI_BYTE, &hv);
  MPI_Type_contiguous(HV_BLOCKS * MIB, MPI_BYTE, &plain);
  MPI_Type_commit(&hv);
  MPI_Type_commit(&plain);
  const size_t elem = (size_t)HV_BLOCKS * MIB, stride = (size_t)MIB + HV_GAP;
  int rc;
  if (rank == 0) {
    /* In place: the root's own block is already in its receive buffer. */
    /* Fresh pages read as zero: no memset (it would double the runtime). */
    unsigned char *all = calloc((size_t)size * 2, elem);
    if (!all) MPI_Abort(MPI_COMM_WORLD, 2);
    rc = MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 2, plain, 0, MPI_COMM_WORLD);
    for (int r = 1; r < size; r++)
      for (int e = 0; e < 2; e++)
        for (int b = 0; b < HV_BLOCKS; b++) {
          const unsigned char *blk = all + ((size_t)r * 2 + (size_t)e) * elem + (size_t)b * MIB;
          unsigned char want = block_value(r, e, b);
          check(blk[0] == want && blk[MIB / 2] == want && blk[MIB - 1] == want, "bigpack gather",
                (long)((r * 2 + e) * HV_BLOCKS + b), blk[MIB / 2], want);
        }
    free(all);
  } else {
    size_t extent = (HV_BLOCKS - 1) * stride + MIB;
    unsigned char *send = malloc(2 * extent);
    if (!send) MPI_Abort(MPI_COMM_WORLD, 2);
    for (int e = 0; e < 2; e++)
      for (int b = 0; b < HV_BLOCKS; b++)
        memset(send + (size_t)e * extent + (size_t)b * stride, block_value(rank, e, b), MIB);
    rc = MPI_Gather(send, 2, hv, NULL, 0, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD);
    free(send);
  }
  check(rc == MPI_SUCCESS, "bigpack gather rc", 0, rc, MPI_SUCCESS);
  MPI_Type_free(&hv);
  MPI_Type_free(&plain);
}

/* The program's own PMPI_Pack comes first in symbol lookup, so mcoll's calls land
 * here; the host MPI's follows. */
static int pmpi_packs;
int PMPI_Pack(const void *inbuf, int incount, MPI_Datatype type, void *outbuf, int outsize,
              int *position, MPI_Comm comm) {
  typedef int (*pack_fn)(const void *, int, MPI_Datatype, void *, int, int *, MPI_Comm);
  static pack_fn host_pack;
  if (!host_pack) host_pack = (pack_fn)dlsym(RTLD_NEXT, "PMPI_Pack");
  pmpi_packs++;
  return host_pack(inbuf, incount, type, outbuf, outsize, position, comm);
}

/* Bcast of count elements of t (freed) from rank 0; checks at the root whether the
 * data was packed. */
static void bcast_packs(const char *name, MPI_Datatype t, int count, int want_packed) {
  static int buf[4096];
  MPI_Type_commit(&t);
  int before = pmpi_packs;
  MPI_Bcast(buf, count, t, 0, MPI_COMM_WORLD);
  if (rank == 0) check((pmpi_packs > before) == want_packed, name, 0, pmpi_packs > before, want_packed);
  MPI_Type_free(&t);
}

static void case_zerocopy(void) {
  MPI_Datatype t, inner;
  int lens[2] = {2, 3}, in_order[2] = {0, 2}, reversed[2] = {3, 0};
  MPI_Type_contiguous(4, MPI_INT, &t);
  bcast_packs("contiguous", t, 3, 0);
  MPI_Type_vector(3, 2, 2, MPI_INT, &t);
  bcast_packs("vector without gaps", t, 2, 0);
  MPI_Type_vector(3, 1, 2, MPI_INT, &t);
  bcast_packs("vector with gaps", t, 1, 1);
  MPI_Type_create_hvector(3, 2, 2 * sizeof(int), MPI_INT, &t);
  bcast_packs("hvector without gaps", t, 2, 0);
  MPI_Type_indexed(2, lens, in_order, MPI_INT, &t);
  bcast_packs("indexed in order", t, 1, 0);
  MPI_Type_indexed(2, lens, reversed, MPI_INT, &t);
  bcast_packs("indexed reversed", t, 1, 1);
  MPI_Type_dup(MPI_DOUBLE, &t);
  bcast_packs("dup", t, 5, 0);
  MPI_Type_contiguous(3, MPI_INT, &inner);
  MPI_Type_contiguous(2, inner, &t);
  MPI_Type_free(&inner);
  bcast_packs("nested contiguous", t, 2, 0);
  MPI_Type_contiguous(2, MPI_DOUBLE, &inner);
  MPI_Type_create_resized(inner, 0, 24, &t);
  MPI_Type_free(&inner);
  bcast_packs("resized, one element", t, 1, 0);
  MPI_Type_contiguous(2, MPI_DOUBLE, &inner);
  MPI_Type_create_resized(inner, 0, 24, &t);
  MPI_Type_free(&inner);
  bcast_packs("resized, two elements", t, 2, 1);
  int one[2] = {1, 1};
  MPI_Aint packed_displs[2] = {0, sizeof(int)};
  MPI_Datatype int_float[2] = {MPI_INT, MPI_FLOAT};
  MPI_Type_create_struct(2, one, packed_displs, int_float, &t);
  bcast_packs("struct int, float", t, 3, 0);
  bcast_packs("swapped struct", swapped_pair(), 1, 1);
  bcast_packs("overlapping indexed block", overlapping_three(), 1, 1);
}

/* ---- erroneous op/type pairs ---------------------------------------------------- */

static void report(const char *name, int rc) {
  int cls = MPI_SUCCESS;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
  if (rank != 0) {
    MPI_Send(&cls, 1, MPI_INT, 0, TAG, MPI_COMM_WORLD);
    return;
  }
  printf("%s: rank 0 class %d", name, cls);
  for (int r = 1; r < size; r++) {
    int theirs;
    MPI_Recv(&theirs, 1, MPI_INT, r, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf(", rank %d class %d", r, theirs);
  }
  printf("\n");
  fflush(stdout);
}

static void case_ops(void) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Datatype int_pair;
  MPI_Type_contiguous(2, MPI_INT, &int_pair);
  MPI_Type_commit(&int_pair);
  const struct {
    const char *name;
    MPI_Op op;
    MPI_Datatype type;
  } pairs[] = {
      {"band-double", MPI_BAND, MPI_DOUBLE},   {"sum-contig2int", MPI_SUM, int_pair},
      {"bxor-float", MPI_BXOR, MPI_FLOAT},     {"maxloc-int", MPI_MAXLOC, MPI_INT},
      {"bor-double", MPI_BOR, MPI_DOUBLE},     {"sum-2int", MPI_SUM, MPI_2INT},
  };
  enum { COUNT = 4 };
  double sbuf[64], rbuf[64];
  int counts[64];
  for (int i = 0; i < 64; i++) sbuf[i] = rank + i, counts[i] = 1;
  for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
    MPI_Op op = pairs[p].op;
    MPI_Datatype type = pairs[p].type;
    char name[96];
#define RUN(coll, call)                                                 \
  snprintf(name, sizeof name, "%s %s", coll, pairs[p].name);           \
  report(name, call)
    RUN("reduce", MPI_Reduce(sbuf, rbuf, COUNT, type, op, 0, comm));
    RUN("allreduce", MPI_Allreduce(sbuf, rbuf, COUNT, type, op, comm));
    RUN("reduce_scatter", MPI_Reduce_scatter(sbuf, rbuf, counts, type, op, comm));
    RUN("reduce_scatter_block", MPI_Reduce_scatter_block(sbuf, rbuf, 1, type, op, comm));
    RUN("scan", MPI_Scan(sbuf, rbuf, COUNT, type, op, comm));
    RUN("exscan", MPI_Exscan(sbuf, rbuf, COUNT, type, op, comm));
#undef RUN
  }
  /* A valid reduction afterwards: the communicator still works. */
  int one = 1, sum = 0;
  int rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm);
  check(rc == MPI_SUCCESS && sum == size, "allreduce after errors", 0, sum, size);
  MPI_Type_free(&int_pair);
  MPI_Comm_free(&comm);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *which = argc > 1 ? argv[1] : "layouts";
  if (!strcmp(which, "layouts")) case_layouts();
  else if (!strcmp(which, "bottom")) case_bottom();
  else if (!strcmp(which, "bigtype")) case_bigtype();
  else if (!strcmp(which, "bigpack")) case_bigpack();
  else if (!strcmp(which, "ops")) case_ops();
  else if (!strcmp(which, "zerocopy")) case_zerocopy();
  else {
    if (rank == 0) fprintf(stderr, "test_datatypes: unknown case %s\n", which);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long totals[2] = {checks, errors}, sums[2];
  MPI_Reduce(totals, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("test_datatypes: %ld checks, %ld errors\n", sums[0], sums[1]);
  MPI_Finalize();
  return 0;
}
