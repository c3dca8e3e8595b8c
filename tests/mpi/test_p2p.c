/* test_p2p: point-to-point semantics a thread-rank runtime must keep (mcollrun
 * --threads): blocking and non-blocking sends of small and large messages, wildcards
 * with their statuses, probe, Sendrecv(_replace), non-overtaking order, derived
 * datatypes on one side, persistent requests, and communicators (dup, split,
 * split_type) keeping messages apart, a storm of small any-source messages, messages
 * of sizes around the thread ranks' inline limit in a row, large messages of odd
 * sizes (the split copy); with --only overflow, sends that find a thread rank's ring
 * full (each rank pair in one process); with --only idle, every rank but 0 waits in a
 * barrier while rank 0 sleeps, and reports the CPU its thread used meanwhile (a thread
 * rank's wait must sleep: the caller compares). Any rank count >= 2; prints
 * "test_p2p: N checks, 0 errors" at rank 0.
 * usage: test_p2p [--max-bytes N] [--only eager|split|overflow|idle] */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* (RUSAGE_THREAD) */
#endif
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static int rank, size;
static long checks, errors;

static void check(int ok, const char *what, long a, long b)
{
  checks++;
  if (!ok && errors++ < 20)
    fprintf(stderr, "rank %d: %s: got %ld, want %ld\n", rank, what, a, b);
}

static int value(int src, int dst, long i)
{
  return (int)(src * 1000003L + dst * 7919L + i * 31L);
}

static void fill(int *buf, long n, int src, int dst)
{
  for (long i = 0; i < n; i++)
    buf[i] = value(src, dst, i);
}

static void check_buf(const int *buf, long n, int src, int dst, const char *what)
{
  long bad = -1;
  for (long i = 0; i < n && bad < 0; i++)
    if (buf[i] != value(src, dst, i))
      bad = i;
  check(bad < 0, what, bad, -1);
}

/* Ring: each rank sends to the next and receives from the previous, blocking
 * (odd ranks receive first) and non-blocking, for each size. */
static void ring(long max_ints)
{
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  int *out = malloc((size_t)max_ints * sizeof(int)), *in = malloc((size_t)max_ints * sizeof(int));
  for (long n = 1; n <= max_ints; n *= 16) {
    fill(out, n, rank, next);
    memset(in, 0, (size_t)n * sizeof(int));
    MPI_Status st;
    if (rank % 2 == 0) {
      MPI_Send(out, (int)n, MPI_INT, next, 7, MPI_COMM_WORLD);
      MPI_Recv(in, (int)n, MPI_INT, prev, 7, MPI_COMM_WORLD, &st);
    } else {
      MPI_Recv(in, (int)n, MPI_INT, prev, 7, MPI_COMM_WORLD, &st);
      MPI_Send(out, (int)n, MPI_INT, next, 7, MPI_COMM_WORLD);
    }
    check_buf(in, n, prev, rank, "ring blocking");
    int count;
    MPI_Get_count(&st, MPI_INT, &count);
    check(count == n && st.MPI_SOURCE == prev && st.MPI_TAG == 7, "ring status", count, n);

    MPI_Request reqs[2];
    memset(in, 0, (size_t)n * sizeof(int));
    MPI_Isend(out, (int)n, MPI_INT, next, 8, MPI_COMM_WORLD, &reqs[0]);
    MPI_Irecv(in, (int)n, MPI_INT, prev, 8, MPI_COMM_WORLD, &reqs[1]);
    MPI_Status statuses[4];
    MPI_Waitall(2, reqs, statuses);
    check_buf(in, n, prev, rank, "ring non-blocking");
    check(reqs[0] == MPI_REQUEST_NULL && reqs[1] == MPI_REQUEST_NULL, "requests freed", 0, 0);

    memset(in, 0, (size_t)n * sizeof(int));
    MPI_Sendrecv(out, (int)n, MPI_INT, next, 9, in, (int)n, MPI_INT, prev, 9, MPI_COMM_WORLD, &st);
    check_buf(in, n, prev, rank, "sendrecv");

    fill(in, n, rank, next);
    MPI_Sendrecv_replace(in, (int)n, MPI_INT, next, 10, prev, 10, MPI_COMM_WORLD, &st);
    check_buf(in, n, prev, rank, "sendrecv_replace");
  }
  free(out);
  free(in);
}

/* Rank 0 receives one message from every other rank with MPI_ANY_SOURCE and
 * MPI_ANY_TAG, after probing it; the status tells which it was. */
static void wildcards(void)
{
  if (rank != 0) {
    int n = rank * 3, *buf = malloc((size_t)n * sizeof(int));
    fill(buf, n, rank, 0);
    MPI_Send(buf, n, MPI_INT, 0, 100 + rank, MPI_COMM_WORLD);
    free(buf);
    return;
  }
  int *seen = calloc((size_t)size, sizeof(int));
  for (int k = 1; k < size; k++) {
    MPI_Status st;
    int count, flag = 0;
    if (k % 2) {
      MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    } else {
      while (!flag)
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
    }
    MPI_Get_count(&st, MPI_INT, &count);
    int src = st.MPI_SOURCE;
    check(src > 0 && src < size && !seen[src], "probe source", src, -1);
    check(st.MPI_TAG == 100 + src, "probe tag", st.MPI_TAG, 100 + src);
    check(count == src * 3, "probe count", count, src * 3);
    int *buf = malloc((size_t)count * sizeof(int) + 1);
    MPI_Recv(buf, count, MPI_INT, src, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    check_buf(buf, count, src, 0, "wildcard data");
    seen[src] = 1;
    free(buf);
  }
  free(seen);
}

/* Non-overtaking: messages of one sender to one receiver arrive in send order, also
 * for MPI_ANY_TAG and mixed sizes (a large message is not overtaken by a small one). */
static void order(long max_ints)
{
  enum { MESSAGES = 40 };
  int *buf = malloc((size_t)max_ints * sizeof(int));
  if (rank == 1) {
    for (int m = 0; m < MESSAGES; m++) {
      long n = m % 5 == 0 ? max_ints : m + 1;
      fill(buf, n, m, 0);
      MPI_Send(buf, (int)n, MPI_INT, 0, m % 3, MPI_COMM_WORLD);
    }
  } else if (rank == 0) {
    for (int m = 0; m < MESSAGES; m++) {
      MPI_Status st;
      MPI_Recv(buf, (int)max_ints, MPI_INT, 1, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
      int count;
      MPI_Get_count(&st, MPI_INT, &count);
      check(st.MPI_TAG == m % 3, "order tag", st.MPI_TAG, m % 3);
      check(count == (m % 5 == 0 ? max_ints : m + 1), "order count", count, m);
      check_buf(buf, count, m, 0, "order data");
    }
  }
  free(buf);
}

/* Many small messages in a row: every other rank sends STORM messages of 1-4 ints to
 * rank 0 (blocking and Isend + Wait in turn, tags cycling), which takes them with
 * MPI_ANY_SOURCE and MPI_ANY_TAG and checks each sender's order and bytes; then rank 0
 * answers each rank in a ping-pong of any-source receives. Run with every wait forced to
 * sleep (tests/py/test_thread_ranks.py), a wake-up lost between a message and its
 * waiter shows as a stall. */
static void storm(void)
{
  enum { STORM = 1500, PINGS = 300 };
  int buf[4];
  if (rank != 0) {
    for (int m = 0; m < STORM; m++) {
      int n = 1 + m % 4;
      fill(buf, n, rank, m);
      if (m % 2) {
        MPI_Send(buf, n, MPI_INT, 0, m % 7, MPI_COMM_WORLD);
      } else {
        MPI_Request req;
        MPI_Isend(buf, n, MPI_INT, 0, m % 7, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
      }
    }
    MPI_Barrier(MPI_COMM_WORLD); /* (a ping must not meet rank 0's any-tag receives) */
    for (int m = 0; m < PINGS; m++) {
      MPI_Send(&m, 1, MPI_INT, 0, 9, MPI_COMM_WORLD);
      int back = -1;
      MPI_Recv(&back, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      check(back == m + rank, "storm ping reply", back, m + rank);
    }
    return;
  }
  int *next = calloc((size_t)size, sizeof(int));
  for (long k = 0; k < (long)STORM * (size - 1); k++) {
    MPI_Status st;
    int count;
    MPI_Recv(buf, 4, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_INT, &count);
    int src = st.MPI_SOURCE;
    if (src <= 0 || src >= size) {
      check(0, "storm source", src, -1);
      continue;
    }
    int m = next[src]++;
    check(st.MPI_TAG == m % 7, "storm tag (order)", st.MPI_TAG, m % 7);
    check(count == 1 + m % 4, "storm count", count, 1 + m % 4);
    check_buf(buf, count, src, m, "storm data");
  }
  for (int src = 1; src < size; src++)
    check(next[src] == STORM, "storm messages", next[src], STORM);
  MPI_Barrier(MPI_COMM_WORLD);
  for (long k = 0; k < (long)PINGS * (size - 1); k++) {
    MPI_Status st;
    int m;
    MPI_Recv(&m, 1, MPI_INT, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &st);
    int back = m + st.MPI_SOURCE;
    MPI_Send(&back, 1, MPI_INT, st.MPI_SOURCE, 9, MPI_COMM_WORLD);
  }
  free(next);
}

/* A large send posted before its receive, receives posted in reverse tag order. */
static void late_receives(long max_ints)
{
  int peer = rank ^ 1;
  if (peer >= size) {
    MPI_Barrier(MPI_COMM_WORLD);
    return;
  }
  int *out = malloc((size_t)max_ints * sizeof(int) * 2), *in = malloc((size_t)max_ints * sizeof(int) * 2);
  MPI_Request sends[2], recvs[2];
  fill(out, max_ints, rank, peer);
  fill(out + max_ints, max_ints, peer, rank);
  MPI_Isend(out, (int)max_ints, MPI_INT, peer, 1, MPI_COMM_WORLD, &sends[0]);
  MPI_Isend(out + max_ints, (int)max_ints, MPI_INT, peer, 2, MPI_COMM_WORLD, &sends[1]);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Irecv(in + max_ints, (int)max_ints, MPI_INT, peer, 2, MPI_COMM_WORLD, &recvs[1]);
  MPI_Irecv(in, (int)max_ints, MPI_INT, peer, 1, MPI_COMM_WORLD, &recvs[0]);
  int index, done = 0;
  while (done < 2) {
    MPI_Waitany(2, recvs, &index, MPI_STATUS_IGNORE);
    done++;
  }
  int flag = 0;
  MPI_Status statuses[2];
  while (!flag)
    MPI_Testall(2, sends, &flag, statuses);
  check_buf(in, max_ints, peer, rank, "late receive 1");
  check_buf(in + max_ints, max_ints, rank, peer, "late receive 2");
  free(out);
  free(in);
}

/* A strided datatype on the sender, contiguous ints at the receiver, and back. */
static void datatypes(void)
{
  enum { N = 100 };
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  MPI_Datatype every_other;
  MPI_Type_vector(N, 1, 2, MPI_INT, &every_other);
  MPI_Type_commit(&every_other);
  int strided[2 * N], flat[N], want[N];
  fill(want, N, rank, next);
  for (int i = 0; i < N; i++) {
    strided[2 * i] = want[i];
    strided[2 * i + 1] = -1;
  }
  MPI_Sendrecv(strided, 1, every_other, next, 20, flat, N, MPI_INT, prev, 20, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  check_buf(flat, N, prev, rank, "vector to ints");
  memset(strided, 0, sizeof strided);
  MPI_Sendrecv(want, N, MPI_INT, next, 21, strided, 1, every_other, prev, 21, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  long bad = -1;
  for (int i = 0; i < N && bad < 0; i++)
    if (strided[2 * i] != value(prev, rank, i) || strided[2 * i + 1] != 0)
      bad = i;
  check(bad < 0, "ints to vector", bad, -1);
  MPI_Type_free(&every_other);
}

/* Messages on a duplicate never match receives on the original; split halves. */
static void communicators(void)
{
  MPI_Comm dup, half;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  int next = (rank + 1) % size, prev = (rank + size - 1) % size, a = rank, b = -rank, x = -1, y = -1;
  MPI_Request reqs[4];
  MPI_Irecv(&x, 1, MPI_INT, prev, 5, MPI_COMM_WORLD, &reqs[0]);
  MPI_Irecv(&y, 1, MPI_INT, prev, 5, dup, &reqs[1]);
  MPI_Isend(&b, 1, MPI_INT, next, 5, dup, &reqs[2]);
  MPI_Isend(&a, 1, MPI_INT, next, 5, MPI_COMM_WORLD, &reqs[3]);
  MPI_Status statuses[4];
  MPI_Waitall(4, reqs, statuses);
  check(x == prev && y == -prev, "dup keeps messages apart", x, prev);

  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
  int hrank, hsize;
  MPI_Comm_rank(half, &hrank);
  MPI_Comm_size(half, &hsize);
  check(hsize == (size + 1 - rank % 2) / 2, "split size", hsize, (size + 1 - rank % 2) / 2);
  int sum = 0;
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, half);
  int want = 0;
  for (int i = rank % 2; i < size; i += 2)
    want += i;
  check(sum == want, "split allreduce", sum, want);
  /* Key -rank: the highest world rank is rank 0 of its half. */
  int top;
  MPI_Bcast(&rank, 0, MPI_INT, 0, half);
  top = rank;
  MPI_Bcast(&top, 1, MPI_INT, 0, half);
  int want_top = (size - 1) - ((size - 1) % 2 != rank % 2);
  check(top == want_top, "split order by key", top, want_top);
  MPI_Comm_free(&half);
  MPI_Comm_free(&dup);
  check(dup == MPI_COMM_NULL, "comm freed", 0, 0);
}

/* Persistent send and receive around the ring, started three times. */
static void persistent(void)
{
  enum { N = 1000 };
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  static int out[N], in[N];
  MPI_Request reqs[2];
  MPI_Recv_init(in, N, MPI_INT, prev, 30, MPI_COMM_WORLD, &reqs[0]);
  MPI_Send_init(out, N, MPI_INT, next, 30, MPI_COMM_WORLD, &reqs[1]);
  for (int round = 0; round < 3; round++) {
    fill(out, N, rank + round, next);
    MPI_Startall(2, reqs);
    MPI_Status statuses[2];
    MPI_Waitall(2, reqs, statuses);
    check(reqs[0] != MPI_REQUEST_NULL, "persistent request kept", 0, 0);
    check_buf(in, N, prev + round, rank, "persistent");
    check(statuses[0].MPI_SOURCE == prev, "persistent source", statuses[0].MPI_SOURCE, prev);
  }
  MPI_Request_free(&reqs[0]);
  MPI_Request_free(&reqs[1]);
}

/* A send freed while active (MPI_Request_free) completes on its own: around the ring
 * every rank frees its send before it receives, so a free that waited for the receive
 * would wait forever. 256 KiB: past the eager sizes. */
static void freed_send(void)
{
  enum { N = 65536 };
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  int *out = malloc(N * sizeof *out), *in = malloc(N * sizeof *in);
  fill(out, N, rank, next);
  MPI_Request req;
  MPI_Isend(out, N, MPI_INT, next, 31, MPI_COMM_WORLD, &req);
  MPI_Request_free(&req);
  check(req == MPI_REQUEST_NULL, "freed send's handle", 0, 0);
  MPI_Recv(in, N, MPI_INT, prev, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  check_buf(in, N, prev, rank, "freed send");
  MPI_Barrier(MPI_COMM_WORLD); /* (every receive is done: the buffers are free) */
  free(out);
  free(in);
}

/* MPI_COMM_TYPE_SHARED groups the ranks with the same processor name. */
static void shared_node(void)
{
  char name[MPI_MAX_PROCESSOR_NAME] = "", *names = calloc((size_t)size, sizeof name);
  int len, node_size, same = 0;
  MPI_Get_processor_name(name, &len);
  MPI_Allgather(name, sizeof name, MPI_CHAR, names, sizeof name, MPI_CHAR, MPI_COMM_WORLD);
  for (int i = 0; i < size; i++)
    same += strcmp(names + (size_t)i * sizeof name, name) == 0;
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &node_size);
  check(node_size == same, "split_type shared size", node_size, same);
  MPI_Comm_free(&node);
  free(names);
}

/* The byte j of message m from src: every byte differs from its neighbours. */
static unsigned char byte_of(int src, int m, long j)
{
  return (unsigned char)(src * 37 + m * 131 + j * 7 + (j >> 8));
}

static long bad_byte(const unsigned char *buf, long n, int src, int m)
{
  for (long j = 0; j < n; j++)
    if (buf[j] != byte_of(src, m, j))
      return j;
  return -1;
}

/* Sizes around the thread ranks' slot (480 bytes inline), their inline limit (3 slots,
 * 1440 bytes), the eager copy and the split copy (16 KiB), and the split's whole chunks
 * (128 KiB). */
static const long EDGE_SIZES[] = {0, 1, 7, 8, 223, 224, 225, 479, 480, 481, 511, 512, 513,
                                  1439, 1440, 1441, 4095, 16383, 16384, 16385, 131071, 131073};
enum { EDGES = sizeof EDGE_SIZES / sizeof EDGE_SIZES[0], EDGE_ROUNDS = 4,
       EDGE_MESSAGES = EDGES * EDGE_ROUNDS };

/* The eager path between thread ranks: each rank pair (2k, 2k+1) in both directions,
 * EDGE_MESSAGES messages in a row (more than a ring's 32 slots hold), sizes around the limits,
 * tags cycling; first with every send done before the receives are posted (a full
 * ring, unexpected messages), then with any-source, any-tag receives posted before the
 * sends. Each receive checks order (tag, count) and every byte. */
static void eager_edges(void)
{
  int peer = rank ^ 1;
  long total = 0;
  for (int m = 0; m < EDGE_MESSAGES; m++)
    total += EDGE_SIZES[m % EDGES];
  unsigned char *out = malloc((size_t)total), *in = malloc((size_t)total + EDGE_MESSAGES);
  MPI_Request *reqs = malloc(2 * EDGE_MESSAGES * sizeof *reqs);
  MPI_Status *statuses = malloc(2 * EDGE_MESSAGES * sizeof *statuses);
  for (int phase = 0; phase < 2; phase++) {
    if (peer >= size) {
      MPI_Barrier(MPI_COMM_WORLD);
      MPI_Barrier(MPI_COMM_WORLD);
      continue;
    }
    long at = 0;
    for (int m = 0; m < EDGE_MESSAGES; m++) {
      long n = EDGE_SIZES[m % EDGES];
      for (long j = 0; j < n; j++)
        out[at + j] = byte_of(rank, m, j);
      at += n;
    }
    int nreqs = 0;
    long in_at = 0;
    if (phase == 1) { /* receives first: any source, any tag, one byte more than sent */
      for (int m = 0; m < EDGE_MESSAGES; m++) {
        long n = EDGE_SIZES[m % EDGES];
        MPI_Irecv(in + in_at, (int)n + 1, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
                  MPI_COMM_WORLD, &reqs[nreqs++]);
        in_at += n + 1;
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    at = 0;
    for (int m = 0; m < EDGE_MESSAGES; m++) {
      long n = EDGE_SIZES[m % EDGES];
      MPI_Isend(out + at, (int)n, MPI_BYTE, peer, m % 5, MPI_COMM_WORLD, &reqs[nreqs++]);
      at += n;
    }
    if (phase == 0) {
      MPI_Barrier(MPI_COMM_WORLD); /* (every send issued before any receive) */
      for (int m = 0; m < EDGE_MESSAGES; m++) {
        long n = EDGE_SIZES[m % EDGES];
        MPI_Status st;
        int count = -1;
        memset(in, 0, (size_t)n + 1);
        MPI_Recv(in, (int)n + 1, MPI_BYTE, m % 2 ? MPI_ANY_SOURCE : peer, MPI_ANY_TAG,
                 MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        check(st.MPI_TAG == m % 5, "eager tag (order)", st.MPI_TAG, m % 5);
        check(st.MPI_SOURCE == peer, "eager source", st.MPI_SOURCE, peer);
        check(count == n, "eager count", count, n);
        check(bad_byte(in, n, peer, m) < 0, "eager bytes (first bad)", bad_byte(in, n, peer, m), -1);
        check(in[n] == 0, "eager byte past the message", in[n], 0);
      }
      MPI_Waitall(nreqs, reqs, statuses);
    } else {
      MPI_Status *st = statuses;
      MPI_Waitall(nreqs, reqs, st);
      in_at = 0;
      for (int m = 0; m < EDGE_MESSAGES; m++) {
        long n = EDGE_SIZES[m % EDGES];
        int count = -1;
        MPI_Get_count(&st[m], MPI_BYTE, &count);
        check(st[m].MPI_TAG == m % 5, "eager posted tag (order)", st[m].MPI_TAG, m % 5);
        check(st[m].MPI_SOURCE == peer, "eager posted source", st[m].MPI_SOURCE, peer);
        check(count == n, "eager posted count", count, n);
        check(bad_byte(in + in_at, n, peer, m) < 0, "eager posted bytes (first bad)",
              bad_byte(in + in_at, n, peer, m), -1);
        in_at += n + 1;
      }
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }
  free(statuses);
  free(reqs);
  free(out);
  free(in);
}

/* Sends that find their ring full (thread ranks: a ring holds 32 slots of 480 B) do not
 * wait for the receiver: rank 2k Isends OVERFLOW_MESSAGES messages in a row to 2k+1 while
 * 2k+1 stays out of MPI (it sleeps OVERFLOW_SLEEP_S), in less than half that time, and
 * the sends up to the inline limit (1440 B) are complete at once. Then 2k+1 receives
 * them in order (every other one any source, any tag; the ring's and the overflow's
 * messages in one sequence), every byte checked; then a message one byte larger than
 * its receive (MPI_ERR_TRUNCATE, the bytes that fit); then, the overflow taken, more
 * messages through the ring again, in order. */
static const long OVERFLOW_SIZES[] = {0, 8, 479, 480, 481, 1000, 1440, 1441, 4000, 20000};
enum { OVERFLOW_NSIZES = sizeof OVERFLOW_SIZES / sizeof OVERFLOW_SIZES[0],
       OVERFLOW_MESSAGES = 6 * OVERFLOW_NSIZES, OVERFLOW_AFTER = 40, OVERFLOW_INLINE = 1440 };
#define OVERFLOW_SLEEP_S 0.4

static void overflow_receive(MPI_Comm comm, unsigned char *in, int peer, int m, long n,
                             int any)
{
  MPI_Status st;
  int count = -1;
  memset(in, 0, (size_t)n + 1);
  MPI_Recv(in, (int)n + 1, MPI_BYTE, any ? MPI_ANY_SOURCE : peer, any ? MPI_ANY_TAG : m % 7,
           comm, &st);
  MPI_Get_count(&st, MPI_BYTE, &count);
  check(st.MPI_TAG == m % 7, "overflow tag (order)", st.MPI_TAG, m % 7);
  check(st.MPI_SOURCE == peer, "overflow source", st.MPI_SOURCE, peer);
  check(count == n, "overflow count", count, n);
  check(bad_byte(in, n, peer, m) < 0 && in[n] == 0, "overflow bytes (first bad)",
        bad_byte(in, n, peer, m), -1);
}

static void overflow(void)
{
  int peer = rank ^ 1;
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  long total = 0, most = 20001;
  for (int m = 0; m < OVERFLOW_MESSAGES + 1 + OVERFLOW_AFTER; m++)
    total += m < OVERFLOW_MESSAGES ? OVERFLOW_SIZES[m % OVERFLOW_NSIZES] : most;
  unsigned char *out = malloc((size_t)total), *in = malloc((size_t)most + 1);
  MPI_Request *reqs = malloc((OVERFLOW_MESSAGES + 1) * sizeof *reqs);
  MPI_Status *statuses = malloc((OVERFLOW_MESSAGES + 1) * sizeof *statuses);
  MPI_Barrier(comm);
  if (peer < size && rank % 2 == 0) {
    long at = 0;
    int inline_done = 1;
    double start = MPI_Wtime();
    for (int m = 0; m < OVERFLOW_MESSAGES; m++) {
      long n = OVERFLOW_SIZES[m % OVERFLOW_NSIZES];
      for (long j = 0; j < n; j++)
        out[at + j] = byte_of(rank, m, j);
      MPI_Isend(out + at, (int)n, MPI_BYTE, peer, m % 7, comm, &reqs[m]);
      at += n;
    }
    double took = MPI_Wtime() - start;
    check(took < OVERFLOW_SLEEP_S / 2, "overflow sends' time (ms)", (long)(took * 1e3),
          (long)(OVERFLOW_SLEEP_S / 2 * 1e3));
    for (int m = 0; m < OVERFLOW_MESSAGES; m++)
      if (OVERFLOW_SIZES[m % OVERFLOW_NSIZES] <= OVERFLOW_INLINE) {
        int flag = 0;
        MPI_Test(&reqs[m], &flag, MPI_STATUS_IGNORE);
        inline_done &= flag;
      }
    check(inline_done, "overflow inline sends complete at once", inline_done, 1);
    int m = OVERFLOW_MESSAGES; /* one byte too many for its receive */
    for (long j = 0; j < 1001; j++)
      out[at + j] = byte_of(rank, m, j);
    MPI_Isend(out + at, 1001, MPI_BYTE, peer, m % 7, comm, &reqs[m]);
    MPI_Waitall(OVERFLOW_MESSAGES + 1, reqs, statuses);
    MPI_Barrier(comm); /* (the overflow taken) */
    for (m = OVERFLOW_MESSAGES + 1; m < OVERFLOW_MESSAGES + 1 + OVERFLOW_AFTER; m++) {
      long n = OVERFLOW_SIZES[m % OVERFLOW_NSIZES];
      for (long j = 0; j < n; j++)
        out[j] = byte_of(rank, m, j);
      MPI_Send(out, (int)n, MPI_BYTE, peer, m % 7, comm);
    }
  } else if (peer < size) {
    double until = MPI_Wtime() + OVERFLOW_SLEEP_S;
    while (MPI_Wtime() < until) /* (out of MPI: MPI_Wtime does not progress) */
      ;
    for (int m = 0; m < OVERFLOW_MESSAGES; m++)
      overflow_receive(comm, in, peer, m, OVERFLOW_SIZES[m % OVERFLOW_NSIZES], m % 2);
    int m = OVERFLOW_MESSAGES, count = -1, class = -1;
    MPI_Status st;
    memset(in, 0, 1001);
    int err = MPI_Recv(in, 1000, MPI_BYTE, peer, m % 7, comm, &st);
    MPI_Error_class(err, &class);
    MPI_Get_count(&st, MPI_BYTE, &count);
    check(class == MPI_ERR_TRUNCATE, "overflow truncated receive's error class", class,
          MPI_ERR_TRUNCATE);
    check(bad_byte(in, 1000, peer, m) < 0 && in[1000] == 0, "overflow truncated bytes",
          bad_byte(in, 1000, peer, m), -1);
    MPI_Barrier(comm);
    for (m = OVERFLOW_MESSAGES + 1; m < OVERFLOW_MESSAGES + 1 + OVERFLOW_AFTER; m++)
      overflow_receive(comm, in, peer, m, OVERFLOW_SIZES[m % OVERFLOW_NSIZES], m % 2);
  } else {
    MPI_Barrier(comm);
  }
  MPI_Comm_free(&comm);
  free(statuses);
  free(reqs);
  free(out);
  free(in);
}

/* Large messages of odd sizes between rank pairs, the receive posted first (a blocking
 * send) and the send first (Isend, then Wait): the sender waits, and may copy a part of
 * the message; into a buffer larger
 * than the message: every byte, the count, and the bytes past the message untouched. */
static void split_sizes(void)
{
  static const long SIZES[] = {131072 + 1, 3 * 65536 + 3, (1L << 20) + 7, (2L << 20) - 5};
  enum { NSIZES = sizeof SIZES / sizeof SIZES[0], GUARD = 64 };
  int peer = rank ^ 1;
  long max = SIZES[NSIZES - 1];
  unsigned char *out = malloc((size_t)max), *in = malloc((size_t)max + GUARD);
  for (int k = 0; k < 2 * NSIZES; k++) {
    long n = SIZES[k % NSIZES];
    int recv_first = k < NSIZES;
    if (peer >= size) {
      MPI_Barrier(MPI_COMM_WORLD);
      continue;
    }
    int sender = rank % 2 == k % 2;
    if (sender) {
      for (long j = 0; j < n; j++)
        out[j] = byte_of(rank, k, j);
      if (recv_first) {
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Send(out, (int)n, MPI_BYTE, peer, 40 + k, MPI_COMM_WORLD);
      } else {
        MPI_Request req;
        MPI_Isend(out, (int)n, MPI_BYTE, peer, 40 + k, MPI_COMM_WORLD, &req);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
      }
    } else {
      memset(in, 0xa5, (size_t)n + GUARD);
      MPI_Request req = MPI_REQUEST_NULL;
      MPI_Status st;
      if (recv_first) {
        MPI_Irecv(in, (int)(n + GUARD), MPI_BYTE, peer, 40 + k, MPI_COMM_WORLD, &req);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Wait(&req, &st);
      } else {
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Recv(in, (int)(n + GUARD), MPI_BYTE, peer, 40 + k, MPI_COMM_WORLD, &st);
      }
      int count = -1;
      MPI_Get_count(&st, MPI_BYTE, &count);
      check(count == n, "split count", count, n);
      check(bad_byte(in, n, peer, k) < 0, "split bytes (first bad)", bad_byte(in, n, peer, k), -1);
      long past = -1;
      for (long j = n; j < n + GUARD && past < 0; j++)
        if (in[j] != 0xa5)
          past = j;
      check(past < 0, "split bytes past the message", past, -1);
    }
  }
  free(out);
  free(in);
}

static double thread_cpu_ms(void)
{
  struct rusage u;
  getrusage(RUSAGE_THREAD, &u);
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
         (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

/* Rank 0 sleeps IDLE_MS before the barrier; the others print how long they waited in it
 * and the CPU their thread used meanwhile ("idle: rank R waited W ms, used C ms"). A
 * second barrier after the report checks that the sleepers are woken again. */
enum { IDLE_MS = 400 };
static void idle(void)
{
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime(), cpu = thread_cpu_ms();
  if (rank == 0) {
    struct timespec nap = {IDLE_MS / 1000, (IDLE_MS % 1000) * 1000000L};
    nanosleep(&nap, NULL);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  double waited = (MPI_Wtime() - start) * 1e3, used = thread_cpu_ms() - cpu;
  /* (at least half: a rank that left the first barrier late waits less) */
  check(rank == 0 || waited >= IDLE_MS * 0.5, "idle: ms waited for rank 0", (long)waited, IDLE_MS);
  if (rank != 0)
    fprintf(stderr, "idle: rank %d waited %.1f ms, used %.1f ms\n", rank, waited, used);
  MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long max_ints = 1 << 18; /* 1 MiB */
  const char *only = NULL;
  for (int i = 1; i + 1 < argc; i++) {
    if (!strcmp(argv[i], "--max-bytes"))
      max_ints = atol(argv[i + 1]) / (long)sizeof(int);
    if (!strcmp(argv[i], "--only"))
      only = argv[i + 1];
  }
  if (size < 2) {
    fprintf(stderr, "test_p2p: needs 2 ranks or more\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (only) {
    if (!strcmp(only, "eager"))
      eager_edges();
    else if (!strcmp(only, "split"))
      split_sizes();
    else if (!strcmp(only, "overflow"))
      overflow();
    else if (!strcmp(only, "idle"))
      idle();
    else
      MPI_Abort(MPI_COMM_WORLD, 2);
  } else {
    ring(max_ints);
    wildcards();
    MPI_Barrier(MPI_COMM_WORLD); /* (order's messages must not meet wildcards' probes) */
    order(max_ints);
    late_receives(max_ints);
    storm();
    datatypes();
    communicators();
    persistent();
    freed_send();
    shared_node();
    eager_edges();
    split_sizes();
  }
  long totals[2] = {checks, errors}, all[2];
  MPI_Reduce(totals, all, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("test_p2p: %ld checks, %ld errors\n", all[0], all[1]);
  MPI_Finalize();
  return errors ? 1 : 0;
}
