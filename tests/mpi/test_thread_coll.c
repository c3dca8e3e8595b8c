/* test_thread_coll: the edges of the thread ranks' in-process collectives
 * (src/threads/coll_local.c, where ranks read and write each other's buffers): in place,
 * non-commutative reductions long enough to be split into one segment per rank, uneven
 * and empty reduce_scatter blocks, a strided type on one side of gather, scatter, bcast
 * and alltoallw, on communicators inside one process and across processes (world,
 * halves, reversed, evens and odds, without rank 1 (uneven), and, with the ranks of
 * each process (same pid) interleaved, with and without the last rank). Across processes thread
 * ranks take two levels (src/threads/coll_hier.c): a commutative user operation and
 * sums at every root check the two-level reductions where processes interleave. Every
 * result is checked against the inputs' formula, also for the MPI_I* and persistent forms
 * (message schedules, a blocking two-level call between post and wait). Runs as processes too. Prints how many CPUs the ranks may run on together
 * and the most one rank may (thread ranks of one process must not share one core, and
 * are bound to one each when they fit). */
#include <mpi.h>
#include <unistd.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if MPI_VERSION >= 4
#define PERSISTENT(name) MPI_##name##_init
#elif defined(OPEN_MPI) && __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define PERSISTENT(name) MPIX_##name##_init
#endif
#endif

static long checks, errors;
static const char *where = "";

static void check(int ok, const char *what, int i)
{
  checks++;
  if (!ok && errors++ < 10)
    fprintf(stderr, "test_thread_coll: %s: %s wrong at %d\n", where, what, i);
}

/* An affine map x -> a x + b with a = +-1 and small b: exact in doubles, and
 * composition does not commute. */
struct affine {
  double a, b;
};

static struct affine input_of(int rank, int i)
{
  return (struct affine){(rank * 7 + i) % 3 == 0 ? -1 : 1, (rank * 13 + i * 5) % 11 - 5};
}

/* first, then second: x -> second(first(x)). */
static struct affine then(struct affine first, struct affine second)
{
  return (struct affine){second.a * first.a, second.a * first.b + second.b};
}

/* inout = in o inout, in from the lower ranks: apply in first. */
static void affine_fn(void *in, void *inout, int *len, MPI_Datatype *type)
{
  (void)type;
  struct affine *x = in, *y = inout;
  for (int i = 0; i < *len; i++)
    y[i] = then(x[i], y[i]);
}

static MPI_Datatype affine_type;
static MPI_Op affine_op;

/* Ranks [from, to) of comm folded in order, at element i. */
static struct affine fold(const int *world, int from, int to, int i)
{
  struct affine acc = {1, 0};
  for (int k = from; k < to; k++)
    acc = then(acc, input_of(world[k], i));
  return acc;
}

static int same(struct affine x, struct affine y)
{
  return x.a == y.a && x.b == y.b;
}

static void reductions(MPI_Comm comm, const int *world, int me, int n)
{
  const struct affine poison = {7, 7}; /* (what a result read from an output would show) */
  static const int counts[] = {1, 5, 255, 300, 20000};
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
    int count = counts[c];
    struct affine *in = malloc(sizeof *in * (size_t)count * (size_t)n);
    struct affine *out = malloc(sizeof *out * (size_t)count * (size_t)n);
    for (int in_place = 0; in_place < 2; in_place++) {
      for (int i = 0; i < count; i++)
        in[i] = input_of(world[me], i), out[i] = in_place ? in[i] : poison;
      MPI_Allreduce(in_place ? MPI_IN_PLACE : in, out, count, affine_type, affine_op, comm);
      for (int i = 0; i < count; i++)
        check(same(out[i], fold(world, 0, n, i)), in_place ? "allreduce in place" : "allreduce", i);
      for (int root = 0; root < n; root++) {
        for (int i = 0; i < count; i++)
          in[i] = input_of(world[me], i), out[i] = in_place ? in[i] : poison;
        int here = in_place && me == root;
        MPI_Reduce(here ? MPI_IN_PLACE : in, out, count, affine_type, affine_op, root, comm);
        for (int i = 0; me == root && i < count; i++)
          check(same(out[i], fold(world, 0, n, i)), "reduce", i);
      }
      for (int exclusive = 0; exclusive < 2; exclusive++) {
        for (int i = 0; i < count; i++)
          in[i] = input_of(world[me], i), out[i] = in_place ? in[i] : poison;
        void *send = in_place ? MPI_IN_PLACE : in;
        if (exclusive)
          MPI_Exscan(send, out, count, affine_type, affine_op, comm);
        else
          MPI_Scan(send, out, count, affine_type, affine_op, comm);
        for (int i = 0; i < count && (me > 0 || !exclusive); i++)
          check(same(out[i], fold(world, 0, me + !exclusive, i)), exclusive ? "exscan" : "scan", i);
      }
      /* reduce_scatter: block k of (k * 3) % 4 x count / 4 elements, some empty */
      int *blocks = malloc(sizeof(int) * (size_t)n), total = 0, first = 0;
      for (int k = 0; k < n; k++) {
        blocks[k] = (k * 3) % 4 * count / 4;
        first += k < me ? blocks[k] : 0;
        total += blocks[k];
      }
      for (int i = 0; i < total; i++)
        in[i] = input_of(world[me], i), out[i] = in_place ? in[i] : poison;
      MPI_Reduce_scatter(in_place ? MPI_IN_PLACE : in, out, blocks, affine_type, affine_op, comm);
      for (int i = 0; i < blocks[me]; i++)
        check(same(out[i], fold(world, 0, n, first + i)), "reduce_scatter", i);
      for (int i = 0; i < count * n; i++)
        in[i] = input_of(world[me], i), out[i] = in_place ? in[i] : poison;
      MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : in, out, count, affine_type, affine_op, comm);
      for (int i = 0; i < count; i++)
        check(same(out[i], fold(world, 0, n, me * count + i)), "reduce_scatter_block", i);
      free(blocks);
    }
    free(in);
    free(out);
  }
}

static int value(int from, int to, int i);
static MPI_Datatype strided(int count);
static int as_threads; /* (some ranks share a process) */

/* A commutative user operation (folded by the host's MPI_Reduce_local): wrapping sum of
 * squares' differences, exact in integers. */
static void mix_fn(void *in, void *inout, int *len, MPI_Datatype *type)
{
  (void)type;
  const long *x = in;
  long *y = inout;
  for (int i = 0; i < *len; i++)
    y[i] = (long)((unsigned long)x[i] + (unsigned long)y[i]);
}

static long mix_input(int rank, int i)
{
  return (long)rank * 1000003L + (long)i * 7919L - 5000L;
}

/* Gatherv and scatterv at a root: rank j's block (j * 5 + root) % 4 x count / 3 ints
 * (some empty), blocks in reverse rank order with a gap of 3 after each; in place at
 * the root when asked; outputs (and the gaps) poisoned. */
static void vectors(MPI_Comm comm, const int *world, int me, int n, int root, int count,
                    int in_place)
{
  int *counts = malloc(sizeof(int) * (size_t)n * 2), *displs = counts + n, total = 0;
  for (int j = n - 1; j >= 0; j--)
    counts[j] = (j * 5 + root) % 4 * count / 3, displs[j] = total, total += counts[j] + 3;
  int here = in_place && me == root;
  int *all = malloc(sizeof(int) * ((size_t)total + 1)), *one = malloc(sizeof(int) * ((size_t)count + 1));
  for (int j = 0; j < total; j++)
    all[j] = -7;
  for (int i = 0; i < counts[me]; i++) {
    one[i] = value(world[me], 5, i);
    if (here)
      all[displs[me] + i] = one[i];
  }
  MPI_Gatherv(here ? MPI_IN_PLACE : one, counts[me], MPI_INT, all, counts, displs, MPI_INT,
              root, comm);
  for (int j = 0; j < n; j++) {
    for (int i = 0; i < counts[j]; i++)
      check(me == root ? all[displs[j] + i] == value(world[j], 5, i) : all[displs[j] + i] == -7,
            "gatherv, every root", i);
    for (int i = 0; i < 3; i++)
      check(all[displs[j] + counts[j] + i] == -7, "gatherv, gap", i);
  }
  for (int j = 0; j < total; j++)
    all[j] = -7;
  for (int j = 0; j < n && me == root; j++)
    for (int i = 0; i < counts[j]; i++)
      all[displs[j] + i] = value(world[root], world[j], i);
  for (int i = 0; i <= count; i++)
    one[i] = here && i < counts[me] ? all[displs[me] + i] : -7;
  MPI_Scatterv(all, counts, displs, MPI_INT, here ? MPI_IN_PLACE : one, counts[me], MPI_INT,
               root, comm);
  for (int i = 0; i < counts[me]; i++)
    check(one[i] == value(world[root], world[me], i), "scatterv, every root", i);
  check(one[counts[me]] == -7, "scatterv, past the block", counts[me]);
  free(counts), free(all), free(one);
}

/* Alltoall of count ints per block and of none. */
static void alltoall_sizes(MPI_Comm comm, const int *world, int me, int n, int count,
                           int in_place)
{
  size_t all = (size_t)count * (size_t)n;
  int *send = malloc(sizeof(int) * (all + 1)), *recv = malloc(sizeof(int) * (all + 1));
  for (int j = 0; j < n; j++)
    for (int i = 0; i < count; i++)
      send[j * count + i] = value(world[me], world[j], i),
      recv[j * count + i] = in_place ? send[j * count + i] : -7;
  recv[all] = -7;
  MPI_Alltoall(in_place ? MPI_IN_PLACE : send, count, MPI_INT, recv, count, MPI_INT, comm);
  for (int j = 0; j < n; j++)
    for (int i = 0; i < count; i++)
      check(recv[j * count + i] == value(world[j], world[me], i), "alltoall, sizes", i);
  check(recv[all] == -7, "alltoall, past the end", 0);
  recv[0] = -7;
  MPI_Alltoall(in_place ? MPI_IN_PLACE : send, 0, MPI_INT, recv, 0, MPI_INT, comm);
  check(recv[0] == -7, "alltoall of none", 0);
  free(send), free(recv);
}

/* Ints of a block from comm rank a to comm rank b: some empty, uneven; symmetric in
 * place (rank a's block for b and b's for a share the receive layout's slot). */
static int v_ints(int a, int b, int count, int in_place)
{
  return (in_place ? (a + b) * 3 + 1 : a * 3 + b * 5 + 2) % 4 * count / 3;
}

/* Alltoallv and alltoallw, uneven and empty blocks with gaps of 2 ints, displacements
 * out of order (send blocks in reverse rank order, receive blocks rotated); alltoallw
 * with every other int (a strided type) for blocks to odd and from even ranks and byte
 * displacements; in place (the receive layout both ways); gaps and the strided holes
 * poisoned and checked. */
static void alltoall_v_w(MPI_Comm comm, const int *world, int me, int n, int count,
                         int in_place)
{
  size_t room = (size_t)n * ((size_t)count * 2 + 2) + 1;
  int *send = malloc(sizeof(int) * room), *recv = malloc(sizeof(int) * room);
  int *sc = malloc(sizeof(int) * (size_t)n * 4), *sd = sc + n, *rc = sd + n, *rd = rc + n;
  MPI_Datatype pair, every_other, *st = malloc(sizeof(MPI_Datatype) * (size_t)n * 2), *rt = st + n;
  MPI_Type_vector(1, 1, 2, MPI_INT, &pair);
  MPI_Type_create_resized(pair, 0, (MPI_Aint)sizeof(int) * 2, &every_other);
  MPI_Type_commit(&every_other);
  MPI_Type_free(&pair);
  for (int w = 0; w < 2; w++) {
    int at = 0, rat = 0;
    for (int k = 0; k < n; k++) {
      int j = n - 1 - k, s_wide = w && j % 2, r = (me + k) % n, r_wide = w && r % 2 == 0;
      sc[j] = v_ints(me, j, count, in_place), st[j] = s_wide ? every_other : MPI_INT;
      sd[j] = w ? at * (int)sizeof(int) : at, at += sc[j] * (s_wide ? 2 : 1) + 2;
      rc[r] = v_ints(r, me, count, in_place), rt[r] = r_wide ? every_other : MPI_INT;
      rd[r] = w ? rat * (int)sizeof(int) : rat, rat += rc[r] * (r_wide ? 2 : 1) + 2;
    }
    for (size_t i = 0; i < room; i++)
      send[i] = -5, recv[i] = -7;
    for (int j = 0; j < n; j++) { /* (in place: the receive layout, rank j's slot) */
      int wide = in_place ? rt[j] == every_other : st[j] == every_other;
      int *block = in_place ? recv + (w ? rd[j] / (int)sizeof(int) : rd[j])
                            : send + (w ? sd[j] / (int)sizeof(int) : sd[j]);
      for (int i = 0; i < (in_place ? rc[j] : sc[j]); i++)
        block[wide ? 2 * i : i] = value(world[me], world[j], i);
    }
    if (w)
      MPI_Alltoallw(in_place ? MPI_IN_PLACE : send, sc, sd, st, recv, rc, rd, rt, comm);
    else
      MPI_Alltoallv(in_place ? MPI_IN_PLACE : send, sc, sd, MPI_INT, recv, rc, rd, MPI_INT, comm);
    const char *what = w ? "alltoallw, uneven" : "alltoallv, uneven";
    int *seen = calloc(room, sizeof(int));
    for (int j = 0; j < n; j++) {
      int wide = rt[j] == every_other, *block = recv + (w ? rd[j] / (int)sizeof(int) : rd[j]);
      for (int i = 0; i < rc[j]; i++) {
        check(block[wide ? 2 * i : i] == value(world[j], world[me], i), what, i);
        seen[block - recv + (wide ? 2 * i : i)] = 1;
      }
    }
    for (size_t i = 0; i < room; i++)
      if (!seen[i])
        check(recv[i] == -7, w ? "alltoallw, gaps" : "alltoallv, gaps", (int)i);
    free(seen);
  }
  MPI_Type_free(&every_other);
  free(send), free(recv), free(sc), free(st);
}

/* Bcast of 2 x count ints from the middle rank, strided at it and at every odd rank,
 * contiguous at the others (long enough to be pipelined across processes). */
/* Eager slots (coll_eager.c): many small calls back to back, a root that runs ahead of
 * slow readers (the slots are reused while readers lag), slow roots with fast
 * contributors, and sizes that switch between the slots and the in-place path. */
static void eager_runs(MPI_Comm comm, int me, int n)
{
  where = "eager slots";
  enum { CALLS = 1000, MAXI = 1100 };
  static const int sizes[] = {0, 1, 7, 1023, 1100, 2};
  int *buf = malloc((MAXI + 1) * sizeof(int)), *all = malloc((size_t)n * 8 * sizeof(int));
  for (int c = 0; c < CALLS; c++) { /* every root in turn, sizes in turn */
    int root = c % n, count = sizes[c % 6];
    for (int i = 0; i <= MAXI; i++)
      buf[i] = me == root ? c * 31 + i : -7;
    MPI_Bcast(buf, count, MPI_INT, root, comm);
    for (int i = 0; i < count; i++)
      check(buf[i] == c * 31 + i, "bcast, roots in turn", c);
    check(buf[count] == (me == root ? c * 31 + count : -7), "bcast, past the end", c);
  }
  for (int c = 0; c < 300; c++) { /* a fast root, readers that sleep now and then */
    if (me != 0 && c % 50 == me % 50)
      usleep(2000);
    for (int i = 0; i < 8; i++)
      buf[i] = me == 0 ? c + i : -7;
    MPI_Bcast(buf, 8, MPI_INT, 0, comm);
    for (int i = 0; i < 8; i++)
      check(buf[i] == c + i, "bcast, slow readers", c);
  }
  for (int c = 0; c < 300; c++) { /* fast contributors, a root that sleeps now and then */
    int root = n - 1, mine[2] = {me + c, me * c}, sum[2] = {-7, -7};
    if (me == root && c % 60 == 0)
      usleep(3000);
    MPI_Reduce(mine, sum, 2, MPI_INT, MPI_SUM, root, comm);
    MPI_Gather(mine, 2, MPI_INT, all, 2, MPI_INT, root, comm);
    if (me == root) {
      check(sum[0] == n * (n - 1) / 2 + n * c && sum[1] == c * n * (n - 1) / 2, "reduce, slow root", c);
      for (int j = 0; j < n; j++)
        check(all[2 * j] == j + c && all[2 * j + 1] == j * c, "gather, slow root", c);
    }
    int pre = -7, before = n * 1000;
    if (me == c % n)
      usleep(500);
    MPI_Scan(&mine[0], &pre, 1, MPI_INT, MPI_SUM, comm);
    check(pre == me * (me + 1) / 2 + (me + 1) * c, "scan, in a row", c);
    MPI_Exscan(&mine[0], &before, 1, MPI_INT, MPI_SUM, comm);
    check(me == 0 || before == (me - 1) * me / 2 + me * c, "exscan, in a row", c);
    int one = -7;
    int *blocks = all;
    for (int j = 0; j < n; j++)
      blocks[j] = me == 0 ? j * 100 + c : -1;
    MPI_Scatter(blocks, 1, MPI_INT, &one, 1, MPI_INT, 0, comm);
    check(one == me * 100 + c, "scatter, in a row", c);
  }
  free(buf);
  free(all);
}

/* Resident memory of this process in KiB (0 where /proc cannot tell). */
static long resident_kib(void)
{
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
      break;
  if (f)
    fclose(f);
  return kib;
}

/* Many communicators alive at once, each with small calls (eager slots, coll_eager.c):
 * their slots stay within a budget, so the process does not grow with their number. */
static void many_communicators(int me, int n)
{
  where = "many communicators";
  enum { COMMS = 300 };
  MPI_Comm *comms = malloc(COMMS * sizeof *comms);
  MPI_Barrier(MPI_COMM_WORLD);
  long before = resident_kib();
  for (int c = 0; c < COMMS; c++) {
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[c]);
    int buf[8], sum = -7, mine = me + c;
    for (int i = 0; i < 8; i++)
      buf[i] = me == c % n ? c + i : -7;
    MPI_Bcast(buf, 8, MPI_INT, c % n, comms[c]);
    for (int i = 0; i < 8; i++)
      check(buf[i] == c + i, "bcast on a fresh communicator", c);
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, comms[c]);
    check(sum == n * (n - 1) / 2 + n * c, "allreduce on a fresh communicator", c);
  }
  for (int c = 0; c < COMMS; c++) { /* all of them again, in the other order */
    int mine = me * c, sum = -7;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, comms[COMMS - 1 - c]);
    check(sum == c * n * (n - 1) / 2, "allreduce on many communicators", c);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  long grown = resident_kib() - before, most;
  MPI_Reduce(&grown, &most, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
  if (me == 0)
    printf("test_thread_coll: %d communicators, grown by %ld KiB\n", COMMS, most);
  check(grown < 96 * 1024, "memory of many communicators", (int)(grown / 1024));
  for (int c = 0; c < COMMS; c++)
    MPI_Comm_free(&comms[c]);
  free(comms);
}

static void bcast_strided(MPI_Comm comm, const int *world, int me, int n, int count)
{
  int root = n / 2, ints = 2 * count, wide = me == root || me % 2;
  int *buf = malloc(sizeof(int) * ((size_t)ints * 2 + 1));
  MPI_Datatype strided_type = strided(ints);
  for (int i = 0; i < ints * 2 + 1; i++)
    buf[i] = me == root ? (i % 2 ? -5 : value(world[root], 6, i / 2)) : -7;
  MPI_Bcast(buf, wide ? 1 : ints, wide ? strided_type : MPI_INT, root, comm);
  for (int i = 0; i < ints; i++)
    check(buf[wide ? 2 * i : i] == value(world[root], 6, i), "bcast, strided", i);
  for (int i = 0; wide && i < ints; i++)
    check(buf[2 * i + 1] == (me == root ? -5 : -7), "bcast, strided gaps", i);
  check(me == root || buf[wide ? ints * 2 : ints] == -7, "bcast, past the end", 0);
  MPI_Type_free(&strided_type);
  free(buf);
}

/* Commutative reductions, bcast, gather and scatter from every root: the two-level paths run on every
 * communicator across processes, interleaved or not; outputs poisoned first. */
static void commutative(MPI_Comm comm, const int *world, int me, int n)
{
  static const int counts[] = {1, 7, 3000, 40000};
  MPI_Op mix;
  MPI_Op_create(mix_fn, 1, &mix);
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
    int count = counts[c];
    long *in = malloc(sizeof *in * (size_t)count), *out = malloc(sizeof *out * (size_t)count);
    double *din = malloc(sizeof *din * (size_t)count), *dout = malloc(sizeof *dout * (size_t)count);
    long *want = malloc(sizeof *want * (size_t)count);
    for (int i = 0; i < count; i++) {
      want[i] = 0;
      for (int k = 0; k < n; k++)
        want[i] = (long)((unsigned long)want[i] + (unsigned long)mix_input(world[k], i));
    }
    for (int in_place = 0; in_place < 2; in_place++) {
      for (int i = 0; i < count; i++)
        in[i] = mix_input(world[me], i), out[i] = in_place ? in[i] : -7;
      MPI_Allreduce(in_place ? MPI_IN_PLACE : in, out, count, MPI_LONG, mix, comm);
      for (int i = 0; i < count; i++)
        check(out[i] == want[i], "allreduce, commutative", i);
      for (int i = 0; i < count; i++)
        din[i] = world[me] + i % 5, dout[i] = in_place ? din[i] : -7;
      MPI_Allreduce(in_place ? MPI_IN_PLACE : din, dout, count, MPI_DOUBLE, MPI_SUM, comm);
      for (int i = 0; i < count; i++) {
        double sum = 0;
        for (int k = 0; k < n; k++)
          sum += world[k] + i % 5;
        check(dout[i] == sum, "allreduce, sum", i);
      }
      for (int root = 0; root < n; root++) {
        /* (MPICH 4.0.2's own MPI_Reduce faults in place at a root other than 0 with a
         * user operation from 3000 longs on: in place only at 0 when run as processes) */
        int here = in_place && me == root && (root == 0 || as_threads);
        for (int i = 0; i < count; i++)
          in[i] = mix_input(world[me], i), out[i] = here ? in[i] : -7;
        MPI_Reduce(here ? MPI_IN_PLACE : in, out, count, MPI_LONG, mix, root, comm);
        for (int i = 0; i < count; i++)
          check(me == root ? out[i] == want[i] : out[i] == -7, "reduce, commutative", i);
        for (int i = 0; i < count; i++)
          out[i] = me == root ? mix_input(world[root], i) + root : -7;
        MPI_Bcast(out, count, MPI_LONG, root, comm);
        for (int i = 0; i < count; i++)
          check(out[i] == mix_input(world[root], i) + root, "bcast, every root", i);
        /* gather and scatter of count ints per rank at every root */
        int *all = malloc(sizeof(int) * (size_t)count * (size_t)n), *one = (int *)din;
        for (int j = 0; j < count * n; j++)
          all[j] = me == root && here ? (j / count == me ? value(world[me], 4, j % count) : -7) : -7;
        for (int i = 0; i < count; i++)
          one[i] = value(world[me], 4, i);
        MPI_Gather(here ? MPI_IN_PLACE : one, count, MPI_INT, all, count, MPI_INT, root, comm);
        for (int j = 0; j < count * n; j++)
          check(me == root ? all[j] == value(world[j / count], 4, j % count) : all[j] == -7,
                "gather, every root", j);
        for (int j = 0; j < count * n; j++)
          all[j] = me == root ? value(world[root], world[j / count], j % count) : -7;
        for (int i = 0; i < count; i++)
          one[i] = here ? all[me * count + i] : -7;
        MPI_Scatter(all, count, MPI_INT, here ? MPI_IN_PLACE : one, count, MPI_INT, root, comm);
        for (int i = 0; i < count; i++)
          check(one[i] == value(world[root], world[me], i), "scatter, every root", i);
        vectors(comm, world, me, n, root, count, in_place);
        free(all);
      }
      alltoall_sizes(comm, world, me, n, count, in_place);
      alltoall_v_w(comm, world, me, n, count, in_place);
      if (!in_place)
        bcast_strided(comm, world, me, n, count);
    }
    free(in), free(out), free(din), free(dout), free(want);
  }
  MPI_Op_free(&mix);
}

/* count ints, every other one: the root's side of gather, scatter and bcast. */
static MPI_Datatype strided(int count)
{
  MPI_Datatype vector, resized;
  MPI_Type_vector(count, 1, 2, MPI_INT, &vector);
  MPI_Type_create_resized(vector, 0, (MPI_Aint)sizeof(int) * 2 * count, &resized);
  MPI_Type_commit(&resized);
  MPI_Type_free(&vector);
  return resized;
}

/* What a block never written shows. */
static void poison(int *buf, size_t bytes)
{
  memset(buf, 0xff, bytes);
}

static int value(int from, int to, int i)
{
  return from * 100000 + to * 1000 + i;
}

static void movements(MPI_Comm comm, const int *world, int me, int n)
{
  static const int counts[] = {1, 7, 1500};
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
    int count = counts[c];
    size_t all = (size_t)count * (size_t)n;
    size_t room = sizeof(int) * (all * 2 + 2 * (size_t)n); /* (strided: every other int) */
    int *send = malloc(room), *recv = malloc(room);
    MPI_Datatype wide = strided(count);
    for (int in_place = 0; in_place < 2; in_place++) {
      poison(recv, room);
      /* alltoall: block j of rank me's input is value(me, j, i) */
      for (int j = 0; j < n; j++)
        for (int i = 0; i < count; i++)
          send[j * count + i] = value(world[me], world[j], i),
          recv[j * count + i] = in_place ? send[j * count + i] : -1;
      MPI_Alltoall(in_place ? MPI_IN_PLACE : send, count, MPI_INT, recv, count, MPI_INT, comm);
      for (int j = 0; j < n; j++)
        for (int i = 0; i < count; i++)
          check(recv[j * count + i] == value(world[j], world[me], i), "alltoall", i);
      /* alltoall sent strided (one wide per block), received as count ints */
      for (int j = 0; j < n; j++)
        for (int i = 0; i < count; i++)
          send[j * count * 2 + 2 * i] = value(world[me], world[j], i);
      poison(recv, room);
      MPI_Alltoall(send, 1, wide, recv, count, MPI_INT, comm);
      for (int j = 0; j < n; j++)
        for (int i = 0; i < count; i++)
          check(recv[j * count + i] == value(world[j], world[me], i), "alltoall, strided", i);
      /* alltoallv: (j + me) % 3 x count / 2 from me to j, blocks in reverse order */
      int *sc = malloc(sizeof(int) * (size_t)n * 4), *sd = sc + n, *rc = sd + n, *rd = rc + n;
      int at = 0, rat = 0;
      for (int j = n - 1; j >= 0; j--) {
        sc[j] = (j + me) % 3 * count / 2, sd[j] = at, at += sc[j];
        rc[j] = (me + j) % 3 * count / 2, rd[j] = rat, rat += rc[j];
      }
      for (int j = 0; j < n; j++)
        for (int i = 0; i < sc[j]; i++)
          send[sd[j] + i] = value(world[me], world[j], i);
      poison(recv, room);
      if (in_place)
        memcpy(recv, send, sizeof(int) * (size_t)at), memcpy(rc, sc, sizeof(int) * 2 * (size_t)n);
      MPI_Alltoallv(in_place ? MPI_IN_PLACE : send, sc, sd, MPI_INT, recv, rc, rd, MPI_INT, comm);
      for (int j = 0; j < n; j++)
        for (int i = 0; i < rc[j]; i++)
          check(recv[rd[j] + i] == value(world[j], world[me], i), "alltoallv", i);
      /* alltoallw: sent as count ints, received strided (byte displacements) */
      MPI_Datatype *st = malloc(sizeof(MPI_Datatype) * (size_t)n * 2), *rt = st + n;
      for (int j = 0; j < n; j++) {
        sc[j] = count, sd[j] = j * count * (int)sizeof(int), st[j] = MPI_INT;
        rc[j] = 1, rd[j] = j * count * 2 * (int)sizeof(int), rt[j] = wide;
        for (int i = 0; i < count; i++)
          send[j * count + i] = value(world[me], world[j], i);
      }
      poison(recv, room);
      if (in_place) /* (strided both ways) */
        for (int j = 0; j < n; j++)
          for (int i = 0; i < count; i++)
            recv[j * count * 2 + 2 * i] = value(world[me], world[j], i);
      MPI_Alltoallw(in_place ? MPI_IN_PLACE : send, sc, sd, st, recv, rc, rd, rt, comm);
      for (int j = 0; j < n; j++)
        for (int i = 0; i < count; i++)
          check(recv[j * count * 2 + 2 * i] == value(world[j], world[me], i), "alltoallw", i);
      free(st);
      /* allgather(v), rank j's block j x count / 2 + 1 long */
      for (int j = 0, d = 0; j < n; j++)
        rc[j] = j % 3 * count / 2 + 1, rd[j] = d, d += rc[j] + 1;
      poison(recv, room);
      for (int i = 0; i < rc[me]; i++)
        send[i] = value(world[me], 0, i), recv[rd[me] + i] = in_place ? send[i] : -1;
      MPI_Allgatherv(in_place ? MPI_IN_PLACE : send, rc[me], MPI_INT, recv, rc, rd, MPI_INT, comm);
      for (int j = 0; j < n; j++)
        for (int i = 0; i < rc[j]; i++)
          check(recv[rd[j] + i] == value(world[j], 0, i), "allgatherv", i);
      poison(recv, room);
      for (int i = 0; i < count; i++)
        send[i] = value(world[me], 1, i), recv[me * count + i] = in_place ? send[i] : -1;
      MPI_Allgather(in_place ? MPI_IN_PLACE : send, count, MPI_INT, recv, count, MPI_INT, comm);
      for (int j = 0; j < n; j++)
        for (int i = 0; i < count; i++)
          check(recv[j * count + i] == value(world[j], 1, i), "allgather", i);
      /* gather and scatter to the last rank, strided there */
      int root = n - 1, mine = me == root && in_place;
      poison(recv, room);
      for (int i = 0; i < count; i++)
        send[i] = value(world[me], 2, i), recv[me * count * 2 + 2 * i] = mine ? send[i] : -1;
      MPI_Gather(mine ? MPI_IN_PLACE : send, count, MPI_INT, recv, me == root ? 1 : count,
                 me == root ? wide : MPI_INT, root, comm);
      for (int j = 0; me == root && j < n; j++)
        for (int i = 0; i < count; i++)
          check(recv[j * count * 2 + 2 * i] == value(world[j], 2, i), "gather", i);
      for (int j = 0; j < n; j++)
        for (int i = 0; i < count; i++)
          send[j * count * 2 + 2 * i] = value(world[root], world[j], i);
      for (int i = 0; i < count; i++)
        recv[i] = me == root ? value(world[root], world[me], i) : -1;
      MPI_Scatter(send, me == root ? 1 : 0, wide, mine ? MPI_IN_PLACE : recv, count, MPI_INT,
                  root, comm);
      for (int i = 0; i < count; i++)
        check(recv[i] == value(world[root], world[me], i), "scatter", i);
      /* bcast from the root's strided buffer into contiguous ones */
      for (int i = 0; i < count; i++)
        send[2 * i] = value(world[root], 3, i), recv[i] = -1;
      MPI_Bcast(me == root ? (void *)send : recv, me == root ? 1 : count,
                me == root ? wide : MPI_INT, root, comm);
      for (int i = 0; me != root && i < count; i++)
        check(recv[i] == value(world[root], 3, i), "bcast", i);
      free(sc);
    }
    MPI_Type_free(&wide);
    free(send);
    free(recv);
  }
}

/* MPI_I* and persistent collectives on the same communicators (across processes they
 * keep the message schedules of src/threads/coll_nbc.c, never two levels): two in flight
 * with a blocking (two-level) collective between post and wait, waited in reverse order;
 * the non-commutative allreduce, reduce at every root, scan and exscan; bcast, gather,
 * scatter, allgather and alltoall from every root; a persistent allreduce and bcast
 * started twice with new inputs. Outputs poisoned first. */
static void nonblocking(MPI_Comm comm, const int *world, int me, int n)
{
  static const int counts[] = {1, 300, 20000};
  const struct affine poisoned = {7, 7};
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
    int count = counts[c];
    struct affine *in = malloc(sizeof *in * (size_t)count), *out = malloc(sizeof *out * (size_t)count);
    double *din = malloc(sizeof *din * (size_t)count), *dout = malloc(sizeof *dout * (size_t)count);
    int *one = malloc(sizeof(int) * (size_t)count), *all = malloc(sizeof(int) * (size_t)count * (size_t)n);
    MPI_Request reqs[2];
    MPI_Status statuses[2];
    for (int i = 0; i < count; i++) {
      in[i] = input_of(world[me], i), out[i] = poisoned;
      din[i] = world[me] + i % 5, dout[i] = -7;
    }
    MPI_Iallreduce(in, out, count, affine_type, affine_op, comm, &reqs[0]);
    MPI_Iallreduce(din, dout, count, MPI_DOUBLE, MPI_SUM, comm, &reqs[1]);
    int token = me == 0 ? 1234 + count : -1;
    MPI_Bcast(&token, 1, MPI_INT, 0, comm); /* (blocking, while both are in flight) */
    check(token == 1234 + count, "bcast between iallreduce and wait", 0);
    MPI_Wait(&reqs[1], MPI_STATUS_IGNORE);
    MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
    for (int i = 0; i < count; i++) {
      double sum = 0;
      for (int k = 0; k < n; k++)
        sum += world[k] + i % 5;
      check(same(out[i], fold(world, 0, n, i)), "iallreduce", i);
      check(dout[i] == sum, "iallreduce, sum", i);
    }
    for (int root = 0; root < n; root++) {
      for (int i = 0; i < count; i++)
        out[i] = poisoned;
      MPI_Ireduce(in, out, count, affine_type, affine_op, root, comm, &reqs[0]);
      for (int i = 0; i < count; i++)
        one[i] = me == root ? value(world[root], 9, i) : -7;
      MPI_Ibcast(one, count, MPI_INT, root, comm, &reqs[1]);
      MPI_Waitall(2, reqs, statuses);
      for (int i = 0; i < count; i++) {
        check(me == root ? same(out[i], fold(world, 0, n, i)) : same(out[i], poisoned), "ireduce", i);
        check(one[i] == value(world[root], 9, i), "ibcast", i);
      }
      for (int i = 0; i < count; i++)
        one[i] = value(world[me], 4, i);
      poison(all, sizeof(int) * (size_t)count * (size_t)n);
      MPI_Igather(one, count, MPI_INT, all, count, MPI_INT, root, comm, &reqs[0]);
      MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
      for (int j = 0; me == root && j < count * n; j++)
        check(all[j] == value(world[j / count], 4, j % count), "igather", j);
      for (int j = 0; j < count * n; j++)
        all[j] = me == root ? value(world[root], world[j / count], j % count) : -7;
      poison(one, sizeof(int) * (size_t)count);
      MPI_Iscatter(all, count, MPI_INT, one, count, MPI_INT, root, comm, &reqs[0]);
      MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
      for (int i = 0; i < count; i++)
        check(one[i] == value(world[root], world[me], i), "iscatter", i);
    }
    for (int exclusive = 0; exclusive < 2; exclusive++) {
      for (int i = 0; i < count; i++)
        out[i] = poisoned;
      if (exclusive)
        MPI_Iexscan(in, out, count, affine_type, affine_op, comm, &reqs[0]);
      else
        MPI_Iscan(in, out, count, affine_type, affine_op, comm, &reqs[0]);
      MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
      for (int i = 0; i < count && (me > 0 || !exclusive); i++)
        check(same(out[i], fold(world, 0, me + !exclusive, i)), exclusive ? "iexscan" : "iscan", i);
    }
    for (int i = 0; i < count; i++)
      one[i] = value(world[me], 5, i);
    poison(all, sizeof(int) * (size_t)count * (size_t)n);
    MPI_Iallgather(one, count, MPI_INT, all, count, MPI_INT, comm, &reqs[0]);
    MPI_Ibarrier(comm, &reqs[1]);
    MPI_Waitall(2, reqs, statuses);
    for (int j = 0; j < count * n; j++)
      check(all[j] == value(world[j / count], 5, j % count), "iallgather", j);
    if (count <= 300) { /* (n x count ints each way) */
      int *sent = malloc(sizeof(int) * (size_t)count * (size_t)n);
      for (int j = 0; j < count * n; j++)
        sent[j] = value(world[me], world[j / count], j % count);
      poison(all, sizeof(int) * (size_t)count * (size_t)n);
      MPI_Ialltoall(sent, count, MPI_INT, all, count, MPI_INT, comm, &reqs[0]);
      MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
      for (int j = 0; j < count * n; j++)
        check(all[j] == value(world[j / count], world[me], j % count), "ialltoall", j);
      free(sent);
    }
#ifdef PERSISTENT
    /* started twice: the second start reads the new inputs */
    MPI_Request persistent[2];
    PERSISTENT(Allreduce)(din, dout, count, MPI_DOUBLE, MPI_SUM, comm, MPI_INFO_NULL, &persistent[0]);
    PERSISTENT(Bcast)(one, count, MPI_INT, n - 1, comm, MPI_INFO_NULL, &persistent[1]);
    for (int start = 0; start < 2; start++) {
      for (int i = 0; i < count; i++) {
        din[i] = world[me] * (start + 1) + i % 5, dout[i] = -7;
        one[i] = me == n - 1 ? value(world[me], start, i) : -7;
      }
      MPI_Startall(2, persistent);
      MPI_Wait(&persistent[1], MPI_STATUS_IGNORE);
      MPI_Wait(&persistent[0], MPI_STATUS_IGNORE);
      for (int i = 0; i < count; i++) {
        double sum = 0;
        for (int k = 0; k < n; k++)
          sum += world[k] * (start + 1) + i % 5;
        check(dout[i] == sum, "persistent allreduce", i);
        check(one[i] == value(world[n - 1], start, i), "persistent bcast", i);
      }
    }
    MPI_Request_free(&persistent[0]);
    MPI_Request_free(&persistent[1]);
#endif
    free(in), free(out), free(din), free(dout), free(one), free(all);
  }
}

/* Predefined ops on predefined types (the thread ranks fold them with mcoll's kernels,
 * the pairs with the host's MPI_Reduce_local): reduce to the first and the last rank,
 * with and without MPI_IN_PLACE at the root, allreduce both ways, and scan of the
 * integers, at counts that take the eager slots, the whole-vector fold and the
 * segments. Inputs are small integers (floats: quarters), exact in any fold order. */
#define FOLD_CHECK(T, MT, OP, NAME, SCANS, INPUT, COMBINE)                                 \
  for (int c = 0; c < 4; c++) {                                                            \
    int count = counts[c];                                                                 \
    T *in = malloc(sizeof(T) * (size_t)count), *out = malloc(sizeof(T) * (size_t)count),   \
      *want = malloc(sizeof(T) * (size_t)count), *pre = malloc(sizeof(T) * (size_t)count);  \
    for (int i = 0; i < count; i++) {                                                      \
      int r_ = n - 1;                                                                      \
      T a, b = (T)(INPUT);                                                                 \
      for (r_ = n - 2; r_ >= 0; r_--) {                                                    \
        a = (T)(INPUT);                                                                    \
        b = (T)(COMBINE);                                                                  \
      }                                                                                    \
      want[i] = b;                                                                         \
      r_ = 0;                                                                              \
      b = (T)(INPUT);                                                                      \
      for (r_ = 1; r_ <= me; r_++) {                                                       \
        a = b;                                                                             \
        b = (T)(INPUT);                                                                    \
        b = (T)(COMBINE);                                                                  \
      }                                                                                    \
      pre[i] = b;                                                                          \
    }                                                                                      \
    for (int root = 0; root < n; root += n - 1 > 0 ? n - 1 : 1) {                          \
      /* (in place at root 0 only: MPICH's own reduce of 700 ints in place at rank 2 of 3 \
       * faults, where this program runs as plain processes) */                          \
      for (int in_place = 0; in_place < 2 - (root > 0); in_place++) {                      \
        int r_ = me;                                                                       \
        for (int i = 0; i < count; i++)                                                    \
          in[i] = (T)(INPUT), out[i] = in_place && me == root ? in[i] : (T)0;              \
        MPI_Reduce(in_place && me == root ? MPI_IN_PLACE : in, out, count, MT, OP, root,   \
                   comm);                                                                  \
        if (me == root)                                                                    \
          for (int i = 0; i < count; i++)                                                  \
            check(out[i] == want[i], NAME " reduce", i);                                   \
      }                                                                                    \
      if (n == 1)                                                                          \
        break;                                                                             \
    }                                                                                      \
    for (int in_place = 0; in_place < 2; in_place++) {                                     \
      int r_ = me;                                                                         \
      for (int i = 0; i < count; i++)                                                      \
        in[i] = (T)(INPUT), out[i] = in_place ? in[i] : (T)0;                              \
      MPI_Allreduce(in_place ? MPI_IN_PLACE : in, out, count, MT, OP, comm);               \
      for (int i = 0; i < count; i++)                                                      \
        check(out[i] == want[i], NAME " allreduce", i);                                    \
      if (SCANS) {                                                                         \
        for (int i = 0; i < count; i++)                                                    \
          out[i] = in_place ? in[i] : (T)0;                                                \
        MPI_Scan(in_place ? MPI_IN_PLACE : in, out, count, MT, OP, comm);                  \
        for (int i = 0; i < count; i++)                                                    \
          check(out[i] == pre[i], NAME " scan", i);                                        \
      }                                                                                    \
    }                                                                                      \
    free(in), free(out), free(want), free(pre);                                            \
  }

struct int_pair {
  int v, k;
};

static void predefined_folds(MPI_Comm comm, int me, int n)
{
  /* (one element; eager; whole-vector and segments of ints in place beyond the slots) */
  static const int counts[] = {1, 37, 700, 1500};
  FOLD_CHECK(int, MPI_INT, MPI_SUM, "int sum", 1, (r_ * 7 + i * 3) % 11 - 5, a + b)
  FOLD_CHECK(int, MPI_INT, MPI_PROD, "int prod", 1, (r_ + i) % 3 - 1, a * b)
  FOLD_CHECK(int, MPI_INT, MPI_MAX, "int max", 1, (r_ * 5 + i) % 13 - 6, a > b ? a : b)
  FOLD_CHECK(int, MPI_INT, MPI_MIN, "int min", 1, (r_ * 5 + i) % 13 - 6, a < b ? a : b)
  FOLD_CHECK(unsigned, MPI_UNSIGNED, MPI_BXOR, "unsigned bxor", 1, (unsigned)(r_ * 2654435761u + (unsigned)i),
             a ^ b)
  FOLD_CHECK(unsigned, MPI_UNSIGNED, MPI_BOR, "unsigned bor", 1, 1u << ((r_ + i) % 32), a | b)
  FOLD_CHECK(short, MPI_SHORT, MPI_LAND, "short land", 1, (r_ + i) % 5 != 0, a && b)
  FOLD_CHECK(short, MPI_SHORT, MPI_LOR, "short lor", 1, (r_ * 3 + i) % 7 == 0, a || b)
  FOLD_CHECK(long long, MPI_LONG_LONG, MPI_SUM, "long long sum", 1, (long long)(r_ + 1) << 33 | i,
             a + b)
  FOLD_CHECK(float, MPI_FLOAT, MPI_SUM, "float sum", 0, ((r_ * 7 + i) % 17 - 8) * 0.25f, a + b)
  FOLD_CHECK(double, MPI_DOUBLE, MPI_SUM, "double sum", 0, ((r_ * 7 + i) % 17 - 8) * 0.25, a + b)
  FOLD_CHECK(double, MPI_DOUBLE, MPI_MAX, "double max", 1, ((r_ * 5 + i) % 13 - 6) * 0.5,
             a > b ? a : b)
  FOLD_CHECK(double, MPI_DOUBLE, MPI_MIN, "double min", 1, ((r_ * 5 + i) % 13 - 6) * 0.5,
             a < b ? a : b)
  /* (a pair type: the host's fold) */
  int count = 700;
  struct int_pair *in = malloc(sizeof *in * (size_t)count), *out = malloc(sizeof *out * (size_t)count);
  for (int i = 0; i < count; i++)
    in[i] = (struct int_pair){(me * 5 + i) % 7, me};
  MPI_Allreduce(in, out, count, MPI_2INT, MPI_MAXLOC, comm);
  for (int i = 0; i < count; i++) {
    int best = -1, at = 0;
    for (int r = 0; r < n; r++)
      if ((r * 5 + i) % 7 > best)
        best = (r * 5 + i) % 7, at = r;
    check(out[i].v == best && out[i].k == at, "2int maxloc allreduce", i);
  }
  free(in), free(out);
}

static void on(MPI_Comm comm, const char *name)
{
  int me, n;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &n);
  int world_rank, *world = malloc(sizeof(int) * (size_t)n);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Allgather(&world_rank, 1, MPI_INT, world, 1, MPI_INT, comm);
  where = name;
  reductions(comm, world, me, n);
  predefined_folds(comm, me, n);
  commutative(comm, world, me, n);
  movements(comm, world, me, n);
  nonblocking(comm, world, me, n);
  MPI_Barrier(comm);
  free(world);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Type_contiguous(2, MPI_DOUBLE, &affine_type);
  MPI_Type_commit(&affine_type);
  MPI_Op_create(affine_fn, 0, &affine_op);
  cpu_set_t cpus;
  unsigned long long mask = 0, all_ranks; /* (the first 64 CPUs) */
  int ncpus = 0, most;
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0)
    for (int cpu = 0; cpu < 64; cpu++)
      if (CPU_ISSET(cpu, &cpus))
        mask |= 1ull << cpu, ncpus++;
  MPI_Reduce(&mask, &all_ranks, 1, MPI_UNSIGNED_LONG_LONG, MPI_BOR, 0, MPI_COMM_WORLD);
  MPI_Reduce(&ncpus, &most, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("test_thread_coll: cpus %d, per rank %d\n", __builtin_popcountll(all_ranks), most);

  MPI_Comm halves, reversed, parity, uneven, interleaved, interleaved_uneven;
  MPI_Comm_split(MPI_COMM_WORLD, rank < size / 2, rank, &halves);
  MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &reversed);
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &parity);
  MPI_Comm_split(MPI_COMM_WORLD, rank == 1 ? MPI_UNDEFINED : 0, rank, &uneven);
  /* Thread ranks of one process share the pid: order by (index in process, process). */
  int pid = (int)getpid(), *pids = malloc(sizeof(int) * (size_t)size), index = 0, process = 0;
  MPI_Allgather(&pid, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);
  for (int k = 0; k < rank; k++)
    index += pids[k] == pid;
  for (int k = 0; k < size; k++) {
    int first = 1;
    for (int j = 0; j < k; j++)
      first &= pids[j] != pids[k];
    if (first && pids[k] == pid)
      break;
    process += first;
  }
  free(pids);
  int processes_before = process; /* (the last rank's process: how many there are, - 1) */
  MPI_Bcast(&processes_before, 1, MPI_INT, size - 1, MPI_COMM_WORLD);
  as_threads = processes_before + 1 < size;
  MPI_Comm_split(MPI_COMM_WORLD, 0, index * size + process, &interleaved);
  MPI_Comm_split(MPI_COMM_WORLD, rank == size - 1 ? MPI_UNDEFINED : 0, index * size + process,
                 &interleaved_uneven);
  eager_runs(MPI_COMM_WORLD, rank, size);
  many_communicators(rank, size);
  eager_runs(reversed, size - 1 - rank, size);
  eager_runs(halves, rank < size / 2 ? rank : rank - size / 2, rank < size / 2 ? size / 2 : size - size / 2);
  on(MPI_COMM_WORLD, "world");
  on(halves, "halves");
  on(reversed, "reversed");
  on(parity, "evens and odds");
  if (uneven != MPI_COMM_NULL)
    on(uneven, "without rank 1");
  on(interleaved, "processes interleaved");
  if (interleaved_uneven != MPI_COMM_NULL)
    on(interleaved_uneven, "processes interleaved, without the last rank");
  MPI_Comm_free(&halves);
  MPI_Comm_free(&reversed);
  MPI_Comm_free(&parity);
  if (uneven != MPI_COMM_NULL)
    MPI_Comm_free(&uneven);
  MPI_Comm_free(&interleaved);
  if (interleaved_uneven != MPI_COMM_NULL)
    MPI_Comm_free(&interleaved_uneven);

  long totals[2] = {checks, errors}, sums[2];
  MPI_Reduce(totals, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("test_thread_coll: %ld checks, %ld errors\n", sums[0], sums[1]);
  MPI_Op_free(&affine_op);
  MPI_Type_free(&affine_type);
  MPI_Finalize();
  return rank == 0 && sums[1] != 0;
}
