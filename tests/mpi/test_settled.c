/* A small call's kept choice (src/coll/settled.h) must follow whatever changes it:
 * sizes in turn, datatypes and ops of the same size, roots, MPI_IN_PLACE,
 * communicators (one in reversed rank order), and algorithms forced or parameters
 * set at run time. Mode "check" (the default) runs gathers, reduces, allgathers and
 * alltoalls in such a mix, every result checked, and prints "ok". Mode "switch"
 * makes 8-byte calls in four phases of known lengths, for the caller to compare
 * mcoll's counts (MCOLL_VERBOSE=1): PLAIN calls, then FORCED ones under
 * mcoll_set_algorithm (gather and allgather: cma, reduce: hsra, alltoall:
 * shm_direct), then AUTO ones with the choice back to the rules, then PARAM ones
 * after mcoll_set_param (GATHER_CMA_MIN=1, ALLGATHER_CMA_MIN=1, RED_FLAT_MAX_LOWPAR=0
 * and RED_FLAT_MAX=0: single copy for gather and allgather, hsra for reduce). */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PLAIN = 40, FORCED = 30, AUTO = 20, PARAM = 10, REPEAT = 3 };

static int failures;

static void fail(const char *what, int size, int i, int root) {
  if (failures++ < 10) fprintf(stderr, "test_settled: %s wrong: %d B, call %d, root %d\n", what, size, i, root);
}

static unsigned char byte_of(int rank, int call, int j) { return (unsigned char)(rank * 37 + call * 11 + j + 1); }

static void gather_check(MPI_Comm comm, int bytes, int call) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int root = call % size, in_place = rank == root && call % 3 == 1;
  unsigned char *send = malloc((size_t)bytes), *recv = malloc((size_t)bytes * (size_t)size);
  for (int j = 0; j < bytes; j++) send[j] = byte_of(rank, call, j);
  memset(recv, 0, (size_t)bytes * (size_t)size);
  if (in_place) memcpy(recv + (size_t)root * (size_t)bytes, send, (size_t)bytes);
  MPI_Gather(in_place ? MPI_IN_PLACE : send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, root, comm);
  if (rank == root)
    for (int r = 0; r < size; r++)
      for (int j = 0; j < bytes; j++)
        if (recv[(size_t)r * (size_t)bytes + (size_t)j] != byte_of(r, call, j)) {
          fail("gather", bytes, call, root);
          r = size;
          break;
        }
  free(send);
  free(recv);
}

/* The same bytes as ints (sum), doubles (max) or shorts (sum). */
static void reduce_check(MPI_Comm comm, int bytes, int call) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int root = (call + 1) % size, kind = call % 3, in_place = rank == root && call % 4 == 2;
  MPI_Datatype type = kind == 0 ? MPI_INT : kind == 1 ? MPI_DOUBLE : MPI_SHORT;
  MPI_Op op = kind == 1 ? MPI_MAX : MPI_SUM;
  int elem = kind == 0 ? (int)sizeof(int) : kind == 1 ? (int)sizeof(double) : (int)sizeof(short);
  int count = bytes / elem;
  if (count == 0) return;
  void *in = malloc((size_t)count * (size_t)elem), *out = malloc((size_t)count * (size_t)elem);
  for (int j = 0; j < count; j++) {
    int v = (rank + 1) * (j % 7 + 1) + call % 5;
    if (kind == 0) ((int *)in)[j] = v;
    else if (kind == 1) ((double *)in)[j] = v + 0.5;
    else ((short *)in)[j] = (short)v;
  }
  if (in_place) memcpy(out, in, (size_t)count * (size_t)elem);
  MPI_Reduce(in_place ? MPI_IN_PLACE : in, out, count, type, op, root, comm);
  if (rank == root)
    for (int j = 0; j < count; j++) {
      long sum = 0;
      for (int r = 0; r < size; r++) sum += (r + 1) * (j % 7 + 1) + call % 5;
      double max = size * (j % 7 + 1) + call % 5 + 0.5;
      int ok = kind == 0 ? ((int *)out)[j] == sum
               : kind == 1 ? ((double *)out)[j] == max
                           : ((short *)out)[j] == (short)sum;
      if (!ok) {
        fail(kind == 0 ? "reduce int" : kind == 1 ? "reduce double" : "reduce short", bytes, call, root);
        break;
      }
    }
  free(in);
  free(out);
}

/* As bytes, shorts or ints (the same bytes per block); in place every third call. */
static void allgather_check(MPI_Comm comm, int bytes, int call) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int kind = call % 3, in_place = call % 3 == 2;
  MPI_Datatype type = kind == 0 ? MPI_BYTE : kind == 1 ? MPI_SHORT : MPI_INT;
  int elem = kind == 0 ? 1 : kind == 1 ? 2 : 4, count = bytes / elem;
  if (count == 0) return;
  size_t len = (size_t)count * (size_t)elem;
  unsigned char *send = malloc(len), *recv = malloc(len * (size_t)size);
  for (size_t j = 0; j < len; j++) send[j] = byte_of(rank, call, (int)j);
  memset(recv, 0, len * (size_t)size);
  if (in_place) memcpy(recv + (size_t)rank * len, send, len);
  MPI_Allgather(in_place ? MPI_IN_PLACE : send, count, type, recv, count, type, comm);
  for (int r = 0; r < size; r++)
    for (size_t j = 0; j < len; j++)
      if (recv[(size_t)r * len + j] != byte_of(r, call, (int)j)) {
        fail("allgather", bytes, call, -1);
        r = size;
        break;
      }
  free(send);
  free(recv);
}

/* Block r of rank q's send buffer: bytes of (q, r); as bytes or ints; in place every
 * fourth call. */
static void alltoall_check(MPI_Comm comm, int bytes, int call) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int ints = call % 2 == 1 && bytes % 4 == 0, in_place = call % 4 == 3;
  int count = ints ? bytes / 4 : bytes;
  size_t len = (size_t)bytes;
  unsigned char *send = malloc(len * (size_t)size), *recv = malloc(len * (size_t)size);
  for (int r = 0; r < size; r++)
    for (size_t j = 0; j < len; j++) send[(size_t)r * len + j] = byte_of(rank * size + r, call, (int)j);
  if (in_place) memcpy(recv, send, len * (size_t)size);
  else memset(recv, 0, len * (size_t)size);
  MPI_Alltoall(in_place ? MPI_IN_PLACE : send, count, ints ? MPI_INT : MPI_BYTE, recv, count,
               ints ? MPI_INT : MPI_BYTE, comm);
  for (int q = 0; q < size; q++)
    for (size_t j = 0; j < len; j++)
      if (recv[(size_t)q * len + j] != byte_of(q * size + rank, call, (int)j)) {
        fail("alltoall", bytes, call, -1);
        q = size;
        break;
      }
  free(send);
  free(recv);
}

static int (*set_algorithm)(const char *, const char *);
static int (*set_param)(const char *, const char *);

static void calls(MPI_Comm comm, int n, int *call) {
  for (int i = 0; i < n; i++, (*call)++) {
    gather_check(comm, 8, *call);
    int rank;
    MPI_Comm_rank(comm, &rank);
    int in[2] = {rank, 1}, out[2] = {0, 0}, size;
    MPI_Comm_size(comm, &size);
    MPI_Reduce(in, out, 2, MPI_INT, MPI_SUM, 0, comm);
    if (rank == 0 && (out[0] != size * (size - 1) / 2 || out[1] != size)) fail("reduce 2 ints", 8, *call, 0);
    allgather_check(comm, 8, *call);
    alltoall_check(comm, 8, *call);
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *mode = argc > 1 ? argv[1] : "check";
  int call = 0;
  if (!strcmp(mode, "switch")) {
    set_algorithm = (int (*)(const char *, const char *))dlsym(RTLD_DEFAULT, "mcoll_set_algorithm");
    set_param = (int (*)(const char *, const char *))dlsym(RTLD_DEFAULT, "mcoll_set_param");
    if (!set_algorithm || !set_param) {
      if (rank == 0) printf("test_settled: mcoll not loaded\n");
      MPI_Finalize();
      return 1;
    }
    calls(MPI_COMM_WORLD, PLAIN, &call);
    if (set_algorithm("gather", "cma") || set_algorithm("reduce", "hsra") ||
        set_algorithm("allgather", "cma") || set_algorithm("alltoall", "shm_direct"))
      fail("set_algorithm", 0, 0, 0);
    calls(MPI_COMM_WORLD, FORCED, &call);
    const char *names[] = {"gather", "reduce", "allgather", "alltoall"};
    for (int k = 0; k < 4; k++) set_algorithm(names[k], "auto");
    calls(MPI_COMM_WORLD, AUTO, &call);
    if (set_param("GATHER_CMA_MIN", "1") || set_param("RED_FLAT_MAX_LOWPAR", "0") ||
        set_param("RED_FLAT_MAX", "0") || set_param("ALLGATHER_CMA_MIN", "1"))
      fail("set_param", 0, 0, 0);
    calls(MPI_COMM_WORLD, PARAM, &call);
  } else {
    MPI_Comm comms[3];
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[0]);
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &comms[1]); /* reversed order */
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[2]);
    const int sizes[] = {8, 16, 8, 4, 256, 8, 24, 1000, 3000, 8, 65536, 8, 1 << 20, 8};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
      for (int rep = 0; rep < REPEAT; rep++)
        for (int k = 0; k < 3; k++, call++) {
          gather_check(comms[k], sizes[s], call);
          reduce_check(comms[k], sizes[s], call);
          allgather_check(comms[k], sizes[s], call);
          alltoall_check(comms[k], sizes[s], call);
        }
    for (int k = 0; k < 3; k++) MPI_Comm_free(&comms[k]);
  }
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf(all ? "test_settled: %d wrong\n" : "ok\n", all);
  MPI_Finalize();
  return all != 0;
}
