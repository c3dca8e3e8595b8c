/* test_progress: a collective must not starve the host MPI's point-to-point.
 * Pairs of ranks (2k, 2k+1): the even rank posts MPI_Irecv from the odd one, both
 * enter a collective, then the even rank waits for its receive; the odd rank sends
 * (blocking) before the collective. A rendezvous-size message can only complete
 * while the receiver is inside the collective if the collective lets the host MPI
 * progress; without it the job hangs. Bcasts are rooted at rank 1, a sender, so
 * that the receivers wait on it inside the bcast.
 *
 * Rank 0 prints "start <case>" before each case, so the last such line of a job
 * killed by its timeout names the case that hung.
 *
 * usage: test_progress [--thread single|funneled|serialized|multiple]
 *                      [--late-ms N] [--pending HOST-CALL] [case-substring ...]
 *   --late-ms N  senders sleep N ms before sending, so that the receivers are
 *                already asleep (futex) in the collective when the message comes
 *   --pending HOST-CALL  instead: an MPI_Iallreduce must progress while its rank is
 *                blocked in a call that only the host MPI runs (MPI's progress
 *                rule): rank 0 posts it, then makes HOST-CALL (sendrecv_replace,
 *                comm_dup, comm_split, win_fence, or all: each in turn) with the
 *                others, who wait for their MPI_Iallreduce first, which needs rank
 *                0's part; the application must be told the thread level it asked for
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { TAG = 7, MAX_COLL_DOUBLES = 1 << 17 /* 1 MiB */ };

static int rank, size, late_ms;
static long checks, errors;

static void check(int ok, const char *what, const char *name) {
  checks++;
  if (!ok) {
    errors++;
    if (errors < 20) fprintf(stderr, "test_progress: rank %d: %s: %s wrong\n", rank, name, what);
  }
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

enum coll { BARRIER, ALLREDUCE, BCAST, ALLGATHER, REDUCE };
static const char *coll_names[] = {"barrier", "allreduce", "bcast", "allgather", "reduce"};

/* One case: p2p of msg_bytes between the pair, and collective coll of coll_bytes. */
static void run_case(enum coll coll, size_t msg_bytes, size_t coll_bytes) {
  char name[96];
  snprintf(name, sizeof name, "%s %zu B with p2p %zu B%s", coll_names[coll], coll_bytes, msg_bytes,
           late_ms ? " (late sender)" : "");
  if (rank == 0) {
    printf("start %s\n", name);
    fflush(stdout);
  }
  int partner = rank % 2 == 0 ? rank + 1 : rank - 1;
  int receiver = rank % 2 == 0 && partner < size;
  int sender = rank % 2 == 1;
  unsigned char *msg = malloc(msg_bytes);
  for (size_t i = 0; i < msg_bytes; i++) msg[i] = sender ? (unsigned char)(i * 7 + partner) : 0;

  size_t n = coll_bytes / sizeof(double);
  double *in = malloc((n ? n : 1) * sizeof(double));
  double *out = malloc((n ? n : 1) * sizeof(double) * (coll == ALLGATHER ? (size_t)size : 1));
  for (size_t i = 0; i < n; i++) in[i] = (double)(rank + 1) * (double)(i % 1000 + 1);

  MPI_Request rq = MPI_REQUEST_NULL;
  if (receiver) MPI_Irecv(msg, (int)msg_bytes, MPI_CHAR, partner, TAG, MPI_COMM_WORLD, &rq);
  MPI_Barrier(MPI_COMM_WORLD); /* the receive is posted before any send starts */
  if (sender) {
    if (late_ms) sleep_ms(late_ms);
    MPI_Send(msg, (int)msg_bytes, MPI_CHAR, partner, TAG, MPI_COMM_WORLD);
  }

  int root = size > 1 ? 1 : 0;
  double sum_ranks = (double)size * (size + 1) / 2;
  size_t bad = 0;
  switch (coll) {
  case BARRIER:
    MPI_Barrier(MPI_COMM_WORLD);
    break;
  case ALLREDUCE:
    MPI_Allreduce(in, out, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (size_t i = 0; i < n; i++) bad += out[i] != sum_ranks * (double)(i % 1000 + 1);
    check(bad == 0, "allreduce result", name);
    break;
  case REDUCE:
    MPI_Reduce(in, out, (int)n, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD);
    if (rank == root) {
      for (size_t i = 0; i < n; i++) bad += out[i] != sum_ranks * (double)(i % 1000 + 1);
      check(bad == 0, "reduce result", name);
    }
    break;
  case BCAST:
    MPI_Bcast(in, (int)n, MPI_DOUBLE, root, MPI_COMM_WORLD);
    for (size_t i = 0; i < n; i++) bad += in[i] != (double)(root + 1) * (double)(i % 1000 + 1);
    check(bad == 0, "bcast data", name);
    break;
  case ALLGATHER:
    MPI_Allgather(in, (int)n, MPI_DOUBLE, out, (int)n, MPI_DOUBLE, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++)
      for (size_t i = 0; i < n; i++) bad += out[(size_t)r * n + i] != (double)(r + 1) * (double)(i % 1000 + 1);
    check(bad == 0, "allgather data", name);
    break;
  }

  if (receiver) {
    MPI_Status st;
    MPI_Wait(&rq, &st);
    int got;
    MPI_Get_count(&st, MPI_CHAR, &got);
    check(got == (int)msg_bytes, "received count", name);
    bad = 0;
    for (size_t i = 0; i < msg_bytes; i++) bad += msg[i] != (unsigned char)(i * 7 + rank);
    check(bad == 0, "received message", name);
  }
  free(msg);
  free(in);
  free(out);
}

/* --pending: rank 0 has its MPI_Iallreduce in flight while it makes host_call, which
 * the others make only once their own MPI_Iallreduce has completed. A token from
 * rank 0 (sent after its post) makes the others post after it, so that rank 0's
 * part cannot be done at its post. */
static void run_pending(const char *host_call, MPI_Win win) {
  enum { N = 1 << 17 /* 1 MiB */ };
  if (rank == 0) {
    printf("start pending iallreduce across %s\n", host_call);
    fflush(stdout);
  }
  double *in = malloc(N * sizeof(double)), *out = malloc(N * sizeof(double));
  for (int i = 0; i < N; i++) in[i] = (double)(rank + 1) * (double)(i % 1000 + 1);
  /* On its own communicator, which a first matched call has set up (mcoll hands a
   * first non-blocking call on a communicator to the host MPI). */
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Allreduce(in, out, N, MPI_DOUBLE, MPI_SUM, comm);
  MPI_Request rq;
  int token = 1;
  if (rank == 0) {
    MPI_Iallreduce(in, out, N, MPI_DOUBLE, MPI_SUM, comm, &rq);
    for (int r = 1; r < size; r++) MPI_Send(&token, 1, MPI_INT, r, TAG, MPI_COMM_WORLD);
  } else {
    MPI_Recv(&token, 1, MPI_INT, 0, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Iallreduce(in, out, N, MPI_DOUBLE, MPI_SUM, comm, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
  }
  if (!strcmp(host_call, "sendrecv_replace")) {
    int partner = rank == 0 ? 1 : rank == 1 ? 0 : -1, value = rank;
    if (partner >= 0) {
      MPI_Sendrecv_replace(&value, 1, MPI_INT, partner, TAG, partner, TAG, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE);
      check(value == partner, "sendrecv_replace value", host_call);
    }
  } else if (!strcmp(host_call, "comm_dup") || !strcmp(host_call, "comm_split")) {
    MPI_Comm made;
    if (!strcmp(host_call, "comm_dup")) MPI_Comm_dup(MPI_COMM_WORLD, &made);
    else MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &made);
    int made_size = 0;
    MPI_Comm_size(made, &made_size);
    check(made_size == size, "new communicator's size", host_call);
    MPI_Comm_free(&made);
  } else {
    MPI_Win_fence(0, win);
  }
  if (rank == 0) MPI_Wait(&rq, MPI_STATUS_IGNORE);
  double sum_ranks = (double)size * (size + 1) / 2;
  size_t bad = 0;
  for (int i = 0; i < N; i++) bad += out[i] != sum_ranks * (double)(i % 1000 + 1);
  check(bad == 0, "iallreduce result", host_call);
  MPI_Comm_free(&comm);
  free(in);
  free(out);
}

static int nfilters;
static char **filters;

static int wanted(enum coll coll) {
  if (nfilters == 0) return 1;
  for (int k = 0; k < nfilters; k++)
    if (strstr(coll_names[coll], filters[k])) return 1;
  return 0;
}

int main(int argc, char **argv) {
  int required = MPI_THREAD_SINGLE;
  const char *pending_call = NULL;
  filters = calloc((size_t)argc, sizeof *filters);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--thread") && i + 1 < argc) {
      const char *t = argv[++i];
      required = !strcmp(t, "multiple")     ? MPI_THREAD_MULTIPLE
                 : !strcmp(t, "serialized") ? MPI_THREAD_SERIALIZED
                 : !strcmp(t, "funneled")   ? MPI_THREAD_FUNNELED
                                            : MPI_THREAD_SINGLE;
    } else if (!strcmp(argv[i], "--late-ms") && i + 1 < argc) {
      late_ms = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--pending") && i + 1 < argc) {
      pending_call = argv[++i];
    } else {
      filters[nfilters++] = argv[i];
    }
  }
  int provided;
  MPI_Init_thread(&argc, &argv, required, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  if (pending_call) {
    check(provided == required, "thread level provided", "init");
    /* The window exists before the call in flight (its creation is collective too). */
    MPI_Win win;
    static int exposed;
    MPI_Win_create(&exposed, sizeof exposed, sizeof exposed, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    static const char *const host_calls[] = {"sendrecv_replace", "comm_dup", "comm_split",
                                             "win_fence"};
    for (size_t k = 0; k < sizeof host_calls / sizeof host_calls[0]; k++)
      if (!strcmp(pending_call, "all") || !strcmp(pending_call, host_calls[k]))
        run_pending(host_calls[k], win);
    MPI_Win_free(&win);
    nfilters = -1; /* (no p2p cases) */
  }

  /* From below the hosts' eager limits to well above them (rendezvous). */
  static const size_t msg_sizes[] = {512, 4096, 16384, 65536, 1 << 20};
  static const struct {
    enum coll coll;
    size_t bytes;
  } colls[] = {{BARRIER, 0},          {ALLREDUCE, 64},           {BCAST, 64},
               {REDUCE, 64},          {BCAST, 1 << 20},          {ALLREDUCE, 1 << 20},
               {ALLGATHER, 64 << 10}};
  for (size_t c = 0; nfilters >= 0 && c < sizeof colls / sizeof colls[0]; c++) {
    if (!wanted(colls[c].coll)) continue;
    for (size_t m = 0; m < sizeof msg_sizes / sizeof msg_sizes[0]; m++) run_case(colls[c].coll, msg_sizes[m], colls[c].bytes);
  }

  long totals[2] = {checks, errors}, sums[2];
  MPI_Reduce(totals, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("test_progress: %ld checks, %ld errors\n", sums[0], sums[1]);
  MPI_Finalize();
  free(filters);
  return 0;
}
