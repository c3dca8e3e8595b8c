/* test_groups: groups and the communicators made from them, receives taken back by
 * MPI_Cancel, and matched probes (MPI_Mprobe/Improbe + MPI_Mrecv/Imrecv): calls a
 * thread-rank runtime (mcollrun --threads) must implement besides the collectives.
 * Each result is checked against what it must be, computed from the ranks alone.
 * Any rank count >= 1; prints "test_groups: N checks, 0 errors" at rank 0.
 * usage: test_groups */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;
static long checks, errors;

static void check(int ok, const char *what, long got, long want)
{
  checks++;
  if (!ok && errors++ < 20)
    fprintf(stderr, "rank %d: %s: got %ld, want %ld\n", rank, what, got, want);
}

#define CHECK_EQ(got, want, what) check((long)(got) == (long)(want), what, (long)(got), (long)(want))

/* ---- groups ---- */

static MPI_Group world_group;

static void check_members(MPI_Group g, int n, const int *world_ranks, const char *what)
{
  int gsize, *ranks = malloc((size_t)(n + 1) * sizeof *ranks), *in_world = malloc((size_t)(n + 1) * sizeof *ranks);
  MPI_Group_size(g, &gsize);
  CHECK_EQ(gsize, n, what);
  for (int i = 0; i < n; i++)
    ranks[i] = i;
  if (gsize == n && n > 0) {
    MPI_Group_translate_ranks(g, n, ranks, world_group, in_world);
    for (int i = 0; i < n; i++)
      CHECK_EQ(in_world[i], world_ranks[i], what);
  }
  int grank, want = MPI_UNDEFINED;
  for (int i = 0; i < n; i++)
    if (world_ranks[i] == rank)
      want = i;
  MPI_Group_rank(g, &grank);
  CHECK_EQ(grank, want, what);
  free(ranks);
  free(in_world);
}

static void groups(void)
{
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  int *all = malloc((size_t)size * sizeof *all), *reversed = malloc((size_t)size * sizeof *all);
  int *evens = malloc((size_t)size * sizeof *all), *odds = malloc((size_t)size * sizeof *all);
  int neven = 0, nodd = 0;
  for (int i = 0; i < size; i++) {
    all[i] = i;
    reversed[i] = size - 1 - i;
    if (i % 2)
      odds[nodd++] = i;
    else
      evens[neven++] = i;
  }
  check_members(world_group, size, all, "world group");

  MPI_Group rev, even, odd, even_range, odd_range, u, inter, diff, none;
  MPI_Group_incl(world_group, size, reversed, &rev);
  check_members(rev, size, reversed, "incl reversed");
  MPI_Group_excl(world_group, nodd, odds, &even);
  check_members(even, neven, evens, "excl odds");
  MPI_Group_incl(world_group, nodd, odds, &odd);
  check_members(odd, nodd, odds, "incl odds");
  int range[1][3] = {{0, size - 1, 2}};
  MPI_Group_range_incl(world_group, 1, range, &even_range);
  check_members(even_range, neven, evens, "range_incl 0..n-1 step 2");
  MPI_Group_range_excl(world_group, 1, range, &odd_range);
  check_members(odd_range, nodd, odds, "range_excl 0..n-1 step 2");

  int result;
  MPI_Group_compare(even, even_range, &result);
  CHECK_EQ(result, MPI_IDENT, "compare evens, evens by range");
  MPI_Group_compare(world_group, rev, &result);
  CHECK_EQ(result, size > 1 ? MPI_SIMILAR : MPI_IDENT, "compare world, reversed");
  MPI_Group_compare(world_group, even, &result);
  CHECK_EQ(result, size > 1 ? MPI_UNEQUAL : MPI_IDENT, "compare world, evens");

  /* union: the evens, then the odds (world order only up to 2 ranks) */
  int *evens_then_odds = malloc((size_t)size * sizeof *all);
  memcpy(evens_then_odds, evens, (size_t)neven * sizeof *evens);
  memcpy(evens_then_odds + neven, odds, (size_t)nodd * sizeof *odds);
  MPI_Group_union(even, odd, &u);
  check_members(u, size, evens_then_odds, "union evens, odds");
  MPI_Group_compare(u, world_group, &result);
  CHECK_EQ(result, size > 2 ? MPI_SIMILAR : MPI_IDENT, "compare union, world");
  MPI_Group_intersection(rev, even, &inter); /* in the reversed order */
  int *rev_evens = malloc((size_t)size * sizeof *all), nrev = 0;
  for (int i = size - 1; i >= 0; i--)
    if (i % 2 == 0)
      rev_evens[nrev++] = i;
  check_members(inter, nrev, rev_evens, "intersection reversed, evens");
  MPI_Group_difference(world_group, even, &diff);
  check_members(diff, nodd, odds, "difference world, evens");
  MPI_Group_intersection(even, odd, &none);
  check(none == MPI_GROUP_EMPTY, "intersection evens, odds is MPI_GROUP_EMPTY", 0, 0);
  int none_size = -1;
  MPI_Group_size(MPI_GROUP_EMPTY, &none_size);
  CHECK_EQ(none_size, 0, "size of MPI_GROUP_EMPTY");

  int from[2] = {MPI_PROC_NULL, 0}, to[2];
  MPI_Group_translate_ranks(world_group, 2 <= size ? 2 : 1, from, rev, to);
  CHECK_EQ(to[0], MPI_PROC_NULL, "translate MPI_PROC_NULL");
  if (size >= 2)
    CHECK_EQ(to[1], size - 1, "translate world 0 into reversed");

  /* MPI_Comm_create: the evens only, then evens and odds apart (disjoint groups) */
  MPI_Comm evens_comm, halves;
  MPI_Comm_create(MPI_COMM_WORLD, even, &evens_comm);
  if (rank % 2) {
    check(evens_comm == MPI_COMM_NULL, "MPI_Comm_create outside the group gives MPI_COMM_NULL", 0, 0);
  } else {
    int crank, csize, sum;
    MPI_Comm_rank(evens_comm, &crank);
    MPI_Comm_size(evens_comm, &csize);
    CHECK_EQ(crank, rank / 2, "rank in the evens' communicator");
    CHECK_EQ(csize, neven, "size of the evens' communicator");
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, evens_comm);
    CHECK_EQ(sum, (neven - 1) * neven, "allreduce over the evens");
    MPI_Group g;
    MPI_Comm_group(evens_comm, &g);
    MPI_Group_compare(g, even, &result);
    CHECK_EQ(result, MPI_IDENT, "the group of the evens' communicator");
    MPI_Group_free(&g);
    MPI_Comm_free(&evens_comm);
  }
  MPI_Comm_create(MPI_COMM_WORLD, rank % 2 ? odd : even, &halves);
  {
    int sum, want = 0;
    for (int i = rank % 2; i < size; i += 2)
      want += i;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, halves);
    CHECK_EQ(sum, want, "allreduce over each half (disjoint groups)");
    MPI_Comm_free(&halves);
  }

  /* MPI_Comm_create_group: only the odds, in reversed order, call it */
  if (rank % 2) {
    MPI_Group rev_odds;
    MPI_Group_intersection(rev, odd, &rev_odds);
    MPI_Comm c;
    MPI_Comm_create_group(MPI_COMM_WORLD, rev_odds, 5, &c);
    int crank, csize, top = -1;
    MPI_Comm_rank(c, &crank);
    MPI_Comm_size(c, &csize);
    CHECK_EQ(csize, nodd, "size of the reversed odds' communicator");
    CHECK_EQ(crank, (nodd - 1) - rank / 2, "rank in the reversed odds' communicator");
    if (crank == 0)
      top = rank;
    MPI_Bcast(&top, 1, MPI_INT, 0, c);
    CHECK_EQ(top, odds[nodd - 1], "bcast from the highest odd rank");
    MPI_Comm_free(&c);
    MPI_Group_free(&rev_odds);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  MPI_Group *frees[] = {&rev, &even, &odd, &even_range, &odd_range, &u, &inter, &diff, &none,
                        &world_group};
  for (size_t i = 0; i < sizeof frees / sizeof *frees; i++) {
    MPI_Group_free(frees[i]);
    check(*frees[i] == MPI_GROUP_NULL, "MPI_Group_free sets MPI_GROUP_NULL", 0, 0);
  }
  free(all), free(reversed), free(evens), free(odds), free(evens_then_odds), free(rev_evens);
}

/* ---- MPI_Cancel of receives ---- */

static void cancel(void)
{
  int buf = -1, flag = 0;
  MPI_Request req;
  MPI_Status st;
  /* nobody sends this tag: the receive is cancelled */
  MPI_Irecv(&buf, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &req);
  MPI_Cancel(&req);
  MPI_Wait(&req, &st);
  MPI_Test_cancelled(&st, &flag);
  CHECK_EQ(flag, 1, "a posted receive is cancelled");
  CHECK_EQ(req == MPI_REQUEST_NULL, 1, "the cancelled request is MPI_REQUEST_NULL after MPI_Wait");
  CHECK_EQ(buf, -1, "a cancelled receive leaves its buffer");

  /* a receive already matched completes as it is */
  int value = 4242 + rank, got = -1;
  MPI_Request send;
  MPI_Isend(&value, 1, MPI_INT, rank, 998, MPI_COMM_WORLD, &send);
  MPI_Irecv(&got, 1, MPI_INT, rank, 998, MPI_COMM_WORLD, &req);
  MPI_Wait(&send, MPI_STATUS_IGNORE);
  for (int done = 0; !done;)
    MPI_Request_get_status(req, &done, MPI_STATUS_IGNORE);
  MPI_Cancel(&req);
  MPI_Wait(&req, &st);
  MPI_Test_cancelled(&st, &flag);
  CHECK_EQ(flag, 0, "a completed receive is not cancelled");
  CHECK_EQ(got, value, "the completed receive's data");

  /* a persistent receive: cancelled once, then started again and matched */
  MPI_Recv_init(&got, 1, MPI_INT, rank, 997, MPI_COMM_WORLD, &req);
  MPI_Start(&req);
  MPI_Cancel(&req);
  MPI_Wait(&req, &st);
  MPI_Test_cancelled(&st, &flag);
  CHECK_EQ(flag, 1, "a started persistent receive is cancelled");
  MPI_Start(&req);
  value = 777 + rank;
  MPI_Send(&value, 1, MPI_INT, rank, 997, MPI_COMM_WORLD);
  MPI_Wait(&req, &st);
  MPI_Test_cancelled(&st, &flag);
  CHECK_EQ(flag, 0, "the restarted persistent receive is not cancelled");
  CHECK_EQ(got, value, "the restarted persistent receive's data");
  MPI_Request_free(&req);
}

/* ---- matched probes ---- */

static int datum(int src, int tag, int i)
{
  return src * 100003 + tag * 1009 + i;
}

static void matched_probes(void)
{
  enum { SMALL = 16, LARGE = 64 * 1024 }; /* ints; LARGE is beyond any eager size */
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  int *out[3], *in = malloc(LARGE * sizeof *in);
  int counts[3] = {SMALL, LARGE, SMALL + 1};
  MPI_Request sends[3];
  for (int t = 0; t < 3; t++) {
    out[t] = malloc((size_t)counts[t] * sizeof *out[t]);
    for (int i = 0; i < counts[t]; i++)
      out[t][i] = datum(rank, t + 1, i);
    MPI_Isend(out[t], counts[t], MPI_INT, next, t + 1, MPI_COMM_WORLD, &sends[t]);
  }
  /* tag 2 first (MPI_Mprobe, any source), then tag 3 (MPI_Improbe, MPI_Imrecv), then tag 1
   * by a plain receive: each message is received once, by its own call */
  MPI_Message msg;
  MPI_Status st;
  int count;
  MPI_Mprobe(MPI_ANY_SOURCE, 2, MPI_COMM_WORLD, &msg, &st);
  MPI_Get_count(&st, MPI_INT, &count);
  CHECK_EQ(st.MPI_SOURCE, prev, "MPI_Mprobe source");
  CHECK_EQ(count, LARGE, "MPI_Mprobe count");
  memset(in, 0, LARGE * sizeof *in);
  MPI_Mrecv(in, count, MPI_INT, &msg, &st);
  check(msg == MPI_MESSAGE_NULL, "MPI_Mrecv sets MPI_MESSAGE_NULL", 0, 0);
  CHECK_EQ(st.MPI_TAG, 2, "MPI_Mrecv tag");
  for (int i = 0; i < LARGE; i++)
    if (in[i] != datum(prev, 2, i)) {
      CHECK_EQ(in[i], datum(prev, 2, i), "MPI_Mrecv data");
      break;
    }
  int flag = 0;
  while (!flag)
    MPI_Improbe(prev, 3, MPI_COMM_WORLD, &flag, &msg, &st);
  MPI_Get_count(&st, MPI_INT, &count);
  CHECK_EQ(count, SMALL + 1, "MPI_Improbe count");
  MPI_Request req;
  MPI_Imrecv(in, count, MPI_INT, &msg, &req);
  MPI_Wait(&req, &st);
  CHECK_EQ(st.MPI_SOURCE, prev, "MPI_Imrecv source");
  CHECK_EQ(in[SMALL], datum(prev, 3, SMALL), "MPI_Imrecv data");
  MPI_Improbe(prev, 3, MPI_COMM_WORLD, &flag, &msg, &st);
  CHECK_EQ(flag, 0, "a matched message is gone from the queue");
  MPI_Recv(in, SMALL, MPI_INT, prev, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
  CHECK_EQ(st.MPI_TAG, 1, "the plain receive gets the message left");
  CHECK_EQ(in[SMALL - 1], datum(prev, 1, SMALL - 1), "the plain receive's data");
  MPI_Status send_statuses[3];
  MPI_Waitall(3, sends, send_statuses);

  MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &msg, &st);
  check(msg == MPI_MESSAGE_NO_PROC, "MPI_Mprobe from MPI_PROC_NULL gives MPI_MESSAGE_NO_PROC", 0, 0);
  MPI_Mrecv(in, 1, MPI_INT, &msg, &st);
  CHECK_EQ(st.MPI_SOURCE, MPI_PROC_NULL, "MPI_Mrecv of MPI_MESSAGE_NO_PROC");
  for (int t = 0; t < 3; t++)
    free(out[t]);
  free(in);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  groups();
  cancel();
  matched_probes();
  long totals[2] = {checks, errors}, sums[2];
  MPI_Reduce(totals, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("test_groups: %ld checks, %ld errors\n", sums[0], sums[1]);
  MPI_Finalize();
  return rank == 0 && sums[1] ? 1 : 0;
}
