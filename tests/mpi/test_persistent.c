/* test_persistent: persistent collectives (MPI-4's MPI_<Coll>_init, or Open MPI's
 * MPIX_<Coll>_init) in the situations where they differ from MPI_I* calls. One case
 * per run, named on the command line; rank 0 prints one line per result, the same
 * natively and under mcoll, so that the two runs can be compared line by line.
 *
 *   progress-<call>  the completion call <call> (test, testall, testany, testsome,
 *                    get_status) on a started persistent barrier must let the host
 *                    MPI progress: rank 1 is blocked in a 1 MiB MPI_Send to rank 0,
 *                    which posted the receive before and polls the barrier
 *   order            MPI_Bcast_init, then MPI_Barrier_init on one communicator;
 *                    rank 0 starts the bcast first, the others the barrier
 *                    (collectives match in the order of their initialisation)
 *   init-errors      MPI_<Coll>_init with invalid arguments (MPI_ERRORS_RETURN):
 *                    the class each returns at init
 *   truncate         a bcast whose root sends 32 KiB and the others expect 16 KiB:
 *                    the class MPI_Wait returns
 *   freed-comm       MPI_Allreduce_init on a duplicate of MPI_COMM_WORLD, which is
 *                    freed at once; then three start/wait with new inputs
 *   world-first      MPI_Bcast_init on MPI_COMM_WORLD as its first call, then
 *                    barriers, MPI_Ibcast, MPI_Iallreduce and starts on it
 *   reuse            requests of different collectives made, started, waited for
 *                    and freed in turn, so that the host hands freed handles out
 *                    again: each start runs its own call (mcoll remembers the
 *                    request a thread started last), with MPI_Wait, MPI_Test and
 *                    MPI_Waitall, and a small allreduce that ends when it starts
 *
 *   barrier-early    MPI_Ibarrier and a persistent barrier (mcoll runs both on the
 *                    caller's stack first, with a task only if a peer is late):
 *                    rounds completed by Wait, Test, Waitall, Testany and Waitsome
 *                    (index, count, MPI_REQUEST_NULL after); rank 0 posts, then
 *                    sends 1 MiB that rank 1 receives before it posts (the post
 *                    must not wait for the peer); rank 1 posts 300 ms late (rank
 *                    0's post returns at once, its wait ends after rank 1 posted)
 *
 *   rooted-early     MPI_Ibcast and MPI_Ireduce and their persistent forms (mcoll
 *                    runs small I-calls and bcast starts on the caller's stack when
 *                    the peers are there, persistent reduces as tasks):
 *                    every root, 1 and 100 elements, MPI_IN_PLACE at a reduce's root,
 *                    results checked; three calls in flight at once; each rank in
 *                    turn posts, then sends 1 MiB that the others receive before
 *                    they post; the last rank posts 300 ms late (rank 0's post
 *                    returns at once, its wait ends after the late rank posted)
 *
 * Every run has a deadline (--deadline seconds, default 30): SIGALRM ends a hung
 * job quickly. Ends with "test_persistent: <n> checks, <m> errors".
 *
 * usage: test_persistent [--deadline S] case
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* gcc takes MPI_STATUSES_IGNORE for an array of size 0 */
#pragma GCC diagnostic ignored "-Wstringop-overflow"

#if MPI_VERSION >= 4
#define PERSISTENT(name) MPI_##name##_init
#elif defined(OPEN_MPI) && __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define PERSISTENT(name) MPIX_##name##_init
#endif
#endif

enum { TAG = 5 };

static int rank, size;
static long checks, errors;

static void check(int ok, const char *what) {
  checks++;
  if (!ok) {
    errors++;
    fprintf(stderr, "test_persistent: rank %d: %s\n", rank, what);
  }
}

static const char *class_name(int rc) {
  static char other[32];
  int cls = MPI_SUCCESS;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
  switch (cls) {
  case MPI_SUCCESS: return "MPI_SUCCESS";
  case MPI_ERR_COUNT: return "MPI_ERR_COUNT";
  case MPI_ERR_TYPE: return "MPI_ERR_TYPE";
  case MPI_ERR_COMM: return "MPI_ERR_COMM";
  case MPI_ERR_ROOT: return "MPI_ERR_ROOT";
  case MPI_ERR_OP: return "MPI_ERR_OP";
  case MPI_ERR_ARG: return "MPI_ERR_ARG";
  case MPI_ERR_TRUNCATE: return "MPI_ERR_TRUNCATE";
  case MPI_ERR_OTHER: return "MPI_ERR_OTHER";
  case MPI_ERR_INTERN: return "MPI_ERR_INTERN";
  case MPI_ERR_IN_STATUS: return "MPI_ERR_IN_STATUS";
  default: snprintf(other, sizeof other, "class %d", cls); return other;
  }
}

/* Rank 0 prints "<what>: <class>" and the ranks whose class differs from its own. */
static void report(const char *what, int rc) {
  char mine[32], theirs[32];
  snprintf(mine, sizeof mine, "%s", class_name(rc));
  if (rank != 0) {
    MPI_Send(mine, sizeof mine, MPI_CHAR, 0, TAG, MPI_COMM_WORLD);
    return;
  }
  printf("%s: %s", what, mine);
  for (int r = 1; r < size; r++) {
    MPI_Recv(theirs, sizeof theirs, MPI_CHAR, r, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (strcmp(theirs, mine) != 0) printf(" (rank %d: %s)", r, theirs);
  }
  printf("\n");
  fflush(stdout);
}

#ifdef PERSISTENT
/* A blocking, a non-blocking and a blocking call on comm: under mcoll, comm then has
 * a context of its own that runs non-blocking calls (else the host MPI takes them). */
static void warm_up(MPI_Comm comm) {
  MPI_Request req;
  MPI_Barrier(comm);
  MPI_Ibarrier(comm, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  MPI_Barrier(comm);
}

/* ---- progress-<call> ------------------------------------------------------------- */
enum { MSG_BYTES = 1 << 20 };

/* One poll of the barrier's request req with the completion call named how. */
static int poll_once(const char *how, MPI_Request *req) {
  int flag = 0, index = -1, outcount = 0, indices[1];
  if (!strcmp(how, "test")) MPI_Test(req, &flag, MPI_STATUS_IGNORE);
  else if (!strcmp(how, "testall")) MPI_Testall(1, req, &flag, MPI_STATUSES_IGNORE);
  else if (!strcmp(how, "testany")) MPI_Testany(1, req, &index, &flag, MPI_STATUS_IGNORE);
  else if (!strcmp(how, "testsome")) {
    MPI_Testsome(1, req, &outcount, indices, MPI_STATUSES_IGNORE);
    flag = outcount == 1;
  } else if (!strcmp(how, "get_status")) {
    MPI_Request_get_status(*req, &flag, MPI_STATUS_IGNORE);
    if (flag) MPI_Wait(req, MPI_STATUS_IGNORE); /* (get_status leaves it active) */
  } else {
    fprintf(stderr, "test_persistent: unknown completion call %s\n", how);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return flag;
}

static void case_progress(const char *how) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  warm_up(comm);
  MPI_Request barrier, recv = MPI_REQUEST_NULL;
  PERSISTENT(Barrier)(comm, MPI_INFO_NULL, &barrier);
  char *msg = calloc(MSG_BYTES, 1);
  for (int round = 0; round < 3; round++) {
    if (rank == 0) MPI_Irecv(msg, MSG_BYTES, MPI_CHAR, 1, TAG, MPI_COMM_WORLD, &recv);
    MPI_Barrier(MPI_COMM_WORLD); /* the receive is posted before the send starts */
    if (rank == 1) {
      memset(msg, 'a' + round, MSG_BYTES);
      MPI_Send(msg, MSG_BYTES, MPI_CHAR, 0, TAG, MPI_COMM_WORLD);
    }
    MPI_Start(&barrier);
    if (rank == 0)
      while (!poll_once(how, &barrier)) {
      }
    else
      MPI_Wait(&barrier, MPI_STATUS_IGNORE);
    if (rank == 0) {
      MPI_Wait(&recv, MPI_STATUS_IGNORE);
      check(msg[0] == 'a' + round && msg[MSG_BYTES - 1] == 'a' + round, "received message wrong");
    }
  }
  MPI_Request_free(&barrier);
  free(msg);
  MPI_Comm_free(&comm);
  if (rank == 0) printf("progress-%s: done\n", how);
}

/* ---- order -------------------------------------------------------------------------- */
static void case_order(void) {
  enum { N = 4096 };
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  warm_up(comm);
  int *buf = malloc(N * sizeof *buf);
  MPI_Request reqs[2];
  PERSISTENT(Bcast)(buf, N, MPI_INT, 0, comm, MPI_INFO_NULL, &reqs[0]);
  PERSISTENT(Barrier)(comm, MPI_INFO_NULL, &reqs[1]);
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < N; i++) buf[i] = rank == 0 ? i * 3 + round : -1;
    if (rank == 0) {
      MPI_Start(&reqs[0]);
      MPI_Start(&reqs[1]);
    } else {
      MPI_Start(&reqs[1]);
      MPI_Start(&reqs[0]);
    }
    MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += buf[i] != i * 3 + round;
    check(bad == 0, "bcast started after the barrier: data wrong");
  }
  MPI_Request_free(&reqs[0]);
  MPI_Request_free(&reqs[1]);
  free(buf);
  MPI_Comm_free(&comm);
  if (rank == 0) printf("order: done\n");
}

/* ---- init-errors -------------------------------------------------------------------- */
static void case_init_errors(void) {
  enum { N = 8 };
  int in[N] = {0}, out[N];
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN); /* (MPI_COMM_NULL's errors) */
  struct {
    const char *name;
    int rc;
    MPI_Request req;
  } cases[6];
  int n = 0;
#define INIT_CASE(label, call)                                                                     \
  do {                                                                                             \
    cases[n].name = label;                                                                         \
    cases[n].req = MPI_REQUEST_NULL;                                                               \
    cases[n].rc = call;                                                                            \
    n++;                                                                                           \
  } while (0)
  INIT_CASE("allreduce_init op=MPI_OP_NULL",
            PERSISTENT(Allreduce)(in, out, N, MPI_INT, MPI_OP_NULL, comm, MPI_INFO_NULL, &cases[n].req));
  INIT_CASE("allreduce_init count=-1",
            PERSISTENT(Allreduce)(in, out, -1, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL, &cases[n].req));
  INIT_CASE("allreduce_init comm=MPI_COMM_NULL",
            PERSISTENT(Allreduce)(in, out, N, MPI_INT, MPI_SUM, MPI_COMM_NULL, MPI_INFO_NULL,
                                  &cases[n].req));
  INIT_CASE("allreduce_init type=MPI_DATATYPE_NULL",
            PERSISTENT(Allreduce)(in, out, N, MPI_DATATYPE_NULL, MPI_SUM, comm, MPI_INFO_NULL,
                                  &cases[n].req));
  INIT_CASE("bcast_init root=size",
            PERSISTENT(Bcast)(out, N, MPI_INT, size, comm, MPI_INFO_NULL, &cases[n].req));
  INIT_CASE("barrier_init comm=MPI_COMM_NULL",
            PERSISTENT(Barrier)(MPI_COMM_NULL, MPI_INFO_NULL, &cases[n].req));
#undef INIT_CASE
  for (int k = 0; k < n; k++) {
    report(cases[k].name, cases[k].rc);
    /* (an init that wrongly succeeded leaves a request, which must go) */
    if (cases[k].req != MPI_REQUEST_NULL) MPI_Request_free(&cases[k].req);
  }
  MPI_Comm_free(&comm);
}

/* ---- truncate ----------------------------------------------------------------------- */
static void case_truncate(void) {
  enum { ROOT_BYTES = 32 * 1024, READER_BYTES = 16 * 1024 };
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  char *buf = calloc(ROOT_BYTES, 1);
  MPI_Request req;
  int rc = PERSISTENT(Bcast)(buf, rank == 0 ? ROOT_BYTES : READER_BYTES, MPI_BYTE, 0, comm,
                             MPI_INFO_NULL, &req);
  report("truncate: init", rc);
  if (rc == MPI_SUCCESS) {
    rc = MPI_Start(&req);
    report("truncate: start", rc);
    rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    report("truncate: wait", rc);
    MPI_Request_free(&req);
  }
  free(buf);
  MPI_Comm_free(&comm);
}

/* ---- freed-comm --------------------------------------------------------------------- */
static void case_freed_comm(void) {
  enum { N = 1000 };
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int *in = malloc(N * sizeof *in), *out = malloc(N * sizeof *out);
  MPI_Request req;
  PERSISTENT(Allreduce)(in, out, N, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL, &req);
  MPI_Comm_free(&comm); /* legal: the request keeps what it needs */
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < N; i++) {
      in[i] = (rank + 1) * (i + round);
      out[i] = -1;
    }
    MPI_Start(&req);
    int rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    check(rc == MPI_SUCCESS, "wait failed");
    int bad = 0;
    for (int i = 0; i < N; i++) bad += out[i] != size * (size + 1) / 2 * (i + round);
    check(bad == 0, "allreduce on a freed communicator: result wrong");
  }
  MPI_Request_free(&req);
  free(in);
  free(out);
  if (rank == 0) printf("freed-comm: done\n");
}

/* ---- world-first ------------------------------------------------------------------------ */
/* A persistent bcast made on MPI_COMM_WORLD before any other call there, then blocking
 * barriers, MPI_Ibcast, MPI_Iallreduce and starts on MPI_COMM_WORLD itself. */
static void case_world_first(void) {
  enum { N = 100 };
  int data[N], in[N], sum[N];
  MPI_Request persistent, req;
  PERSISTENT(Bcast)(data, N, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &persistent);
  for (int round = 0; round < 20; round++) {
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < N; i++) {
      data[i] = rank == 0 ? round * N + i : -1;
      in[i] = (rank + 1) * (i + round);
      sum[i] = -1;
    }
    int rc;
    if (round % 2) {
      MPI_Start(&persistent);
      rc = MPI_Wait(&persistent, MPI_STATUS_IGNORE);
    } else {
      MPI_Ibcast(data, N, MPI_INT, 0, MPI_COMM_WORLD, &req);
      rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    check(rc == MPI_SUCCESS, "bcast wait failed");
    MPI_Iallreduce(in, sum, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
    check(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS, "allreduce wait failed");
    int bad = 0;
    for (int i = 0; i < N; i++)
      bad += data[i] != round * N + i || sum[i] != size * (size + 1) / 2 * (i + round);
    check(bad == 0, "world-first: result wrong");
  }
  MPI_Request_free(&persistent);
  if (rank == 0) printf("world-first: done\n");
}

/* ---- reuse ------------------------------------------------------------------------------ */
static void reuse_complete(MPI_Request *req, int round) {
  int flag = 0;
  switch (round % 3) {
    case 0: check(MPI_Wait(req, MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait failed"); break;
    case 1:
      while (!flag) check(MPI_Test(req, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS, "test failed");
      break;
    default: check(MPI_Waitall(1, req, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "waitall failed");
  }
  check(*req != MPI_REQUEST_NULL, "a persistent request became MPI_REQUEST_NULL");
}

static void case_reuse(void) {
  enum { N = 8, ROUNDS = 30 };
  int in[N], sum[N], bc[N];
  for (int round = 0; round < ROUNDS; round++) {
    MPI_Request a, b;
    PERSISTENT(Allreduce)(in, sum, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &a);
    for (int k = 0; k < 2; k++) {
      for (int i = 0; i < N; i++) in[i] = (rank + 1) * (i + round + k), sum[i] = -1;
      MPI_Start(&a);
      reuse_complete(&a, round + k);
      int bad = 0;
      for (int i = 0; i < N; i++) bad += sum[i] != size * (size + 1) / 2 * (i + round + k);
      check(bad == 0, "reuse: allreduce result wrong");
    }
    MPI_Request_free(&a); /* (a's handle may come back as b's) */
    int root = round % size;
    PERSISTENT(Bcast)(bc, N, MPI_INT, root, MPI_COMM_WORLD, MPI_INFO_NULL, &b);
    for (int i = 0; i < N; i++) bc[i] = rank == root ? 100 * round + i : -1;
    MPI_Start(&b);
    reuse_complete(&b, round);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += bc[i] != 100 * round + i;
    check(bad == 0, "reuse: bcast after a freed allreduce ran the wrong call");
    MPI_Request_free(&b);
    check(a == MPI_REQUEST_NULL && b == MPI_REQUEST_NULL, "freed requests not MPI_REQUEST_NULL");
  }
  if (rank == 0) printf("reuse: done\n");
}

/* ---- barrier-early ------------------------------------------------------------------- */
static double now_s(void) { return MPI_Wtime(); }

/* Completes req (a barrier's) with the call chosen by round; checks what the call
 * reports. */
static void early_complete(MPI_Request *req, int round, int persistent) {
  int flag = 0, index = -1, count = 0, indices[1];
  MPI_Status st;
  switch (round % 5) {
    case 0: check(MPI_Wait(req, &st) == MPI_SUCCESS, "barrier-early: wait failed"); break;
    case 1:
      while (!flag) check(MPI_Test(req, &flag, &st) == MPI_SUCCESS, "barrier-early: test failed");
      break;
    case 2:
      check(MPI_Waitall(1, req, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "barrier-early: waitall failed");
      break;
    case 3:
      while (!flag)
        check(MPI_Testany(1, req, &index, &flag, &st) == MPI_SUCCESS, "barrier-early: testany failed");
      check(index == 0, "barrier-early: testany index not 0");
      break;
    default:
      check(MPI_Waitsome(1, req, &count, indices, MPI_STATUSES_IGNORE) == MPI_SUCCESS,
            "barrier-early: waitsome failed");
      check(count == 1 && indices[0] == 0, "barrier-early: waitsome count or index wrong");
  }
  if (persistent) check(*req != MPI_REQUEST_NULL, "barrier-early: persistent request freed");
  else check(*req == MPI_REQUEST_NULL, "barrier-early: completed request not MPI_REQUEST_NULL");
}

static void early_post(MPI_Request *req, MPI_Request *persistent) {
  if (persistent) {
    check(MPI_Start(persistent) == MPI_SUCCESS, "barrier-early: start failed");
    *req = *persistent;
  } else {
    check(MPI_Ibarrier(MPI_COMM_WORLD, req) == MPI_SUCCESS, "barrier-early: ibarrier failed");
  }
}

static void case_barrier_early(void) {
  enum { ROUNDS = 200, SENDS = 20 };
  warm_up(MPI_COMM_WORLD);
  MPI_Request preq, *pers;
  PERSISTENT(Barrier)(MPI_COMM_WORLD, MPI_INFO_NULL, &preq);
  char *msg = calloc(MSG_BYTES, 1);
  for (int form = 0; form < 2; form++) {
    pers = form ? &preq : NULL;
    MPI_Request req;
    for (int round = 0; round < ROUNDS; round++) {
      early_post(&req, pers);
      early_complete(pers ? pers : &req, round, form);
    }
    /* rank 0 posts, then its send needs rank 1's receive, made before rank 1 posts */
    for (int round = 0; round < SENDS; round++) {
      if (rank == 0) {
        early_post(&req, pers);
        for (int r = 1; r < size; r++) MPI_Send(msg, MSG_BYTES, MPI_CHAR, r, TAG, MPI_COMM_WORLD);
      } else {
        MPI_Recv(msg, MSG_BYTES, MPI_CHAR, 0, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        early_post(&req, pers);
      }
      early_complete(pers ? pers : &req, round, form);
    }
    /* the last rank posts late */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_s();
    if (rank == size - 1) usleep(300 * 1000);
    early_post(&req, pers);
    double posted = now_s() - t0;
    early_complete(pers ? pers : &req, 0, form);
    double done = now_s() - t0;
    if (rank == 0) {
      check(posted < 0.15, "barrier-early: the post waited for the late rank");
      check(done > 0.25, "barrier-early: the wait ended before the late rank posted");
      printf("barrier-early: %s: post %s, wait %s\n", form ? "persistent" : "ibarrier",
             posted < 0.15 ? "returned before the late rank" : "waited",
             done > 0.25 ? "ended after it" : "ended early");
    }
  }
  MPI_Request_free(&preq);
  free(msg);
  if (rank == 0) printf("barrier-early: done\n");
}

/* ---- rooted-early -------------------------------------------------------------------- */
enum { ROOTED_MAX = 100 };

/* One bcast or reduce of n longs from root, as an MPI_I* call (pers NULL) or a start
 * of pers[root]; in_place: the reduce's root gives MPI_IN_PLACE (pers: a request
 * made so). Posts only; the caller completes req. */
struct rooted {
  long bbuf[ROOTED_MAX], in[ROOTED_MAX], out[ROOTED_MAX];
  MPI_Request *pbcast[2], *preduce[2], *preduce_ip[2]; /* [size index][root]: n = 1, 100 */
};

static int count_of(int which) { return which ? ROOTED_MAX : 1; }

static void rooted_fill(struct rooted *R, int n, int root, int round, int in_place) {
  for (int i = 0; i < n; i++) {
    R->bbuf[i] = rank == root ? 1000L * round + 10 * root + i : -1;
    R->in[i] = rank + round + i;
    R->out[i] = rank == root && in_place ? R->in[i] : -1;
  }
}

static void rooted_post(struct rooted *R, int reduce, int which, int root, int in_place, int pers,
                        MPI_Request *req) {
  int n = count_of(which);
  if (pers) {
    MPI_Request *p = reduce ? (in_place ? &R->preduce_ip[which][root] : &R->preduce[which][root])
                            : &R->pbcast[which][root];
    check(MPI_Start(p) == MPI_SUCCESS, "rooted-early: start failed");
    *req = *p;
  } else if (reduce) {
    const void *sb = rank == root && in_place ? MPI_IN_PLACE : (const void *)R->in;
    check(MPI_Ireduce(sb, R->out, n, MPI_LONG, MPI_SUM, root, MPI_COMM_WORLD, req) == MPI_SUCCESS,
          "rooted-early: ireduce failed");
  } else {
    check(MPI_Ibcast(R->bbuf, n, MPI_LONG, root, MPI_COMM_WORLD, req) == MPI_SUCCESS,
          "rooted-early: ibcast failed");
  }
}

static void rooted_check(const struct rooted *R, int reduce, int n, int root, int round) {
  int bad = 0;
  for (int i = 0; i < n; i++) {
    if (!reduce) bad += R->bbuf[i] != 1000L * round + 10 * root + i;
    else if (rank == root) bad += R->out[i] != (long)size * (round + i) + (long)size * (size - 1) / 2;
  }
  check(bad == 0, reduce ? "rooted-early: wrong reduce result" : "rooted-early: wrong bcast data");
}

static void rooted_requests(struct rooted *R, int make) {
  for (int which = 0; which < 2; which++) {
    int n = count_of(which);
    if (make) {
      R->pbcast[which] = malloc(sizeof(MPI_Request) * (size_t)size);
      R->preduce[which] = malloc(sizeof(MPI_Request) * (size_t)size);
      R->preduce_ip[which] = malloc(sizeof(MPI_Request) * (size_t)size);
    }
    for (int root = 0; root < size; root++) {
      if (!make) {
        MPI_Request_free(&R->pbcast[which][root]);
        MPI_Request_free(&R->preduce[which][root]);
        MPI_Request_free(&R->preduce_ip[which][root]);
        continue;
      }
      PERSISTENT(Bcast)(R->bbuf, n, MPI_LONG, root, MPI_COMM_WORLD, MPI_INFO_NULL, &R->pbcast[which][root]);
      PERSISTENT(Reduce)(R->in, R->out, n, MPI_LONG, MPI_SUM, root, MPI_COMM_WORLD, MPI_INFO_NULL,
                         &R->preduce[which][root]);
      PERSISTENT(Reduce)(rank == root ? MPI_IN_PLACE : (const void *)R->in, R->out, n, MPI_LONG,
                         MPI_SUM, root, MPI_COMM_WORLD, MPI_INFO_NULL, &R->preduce_ip[which][root]);
    }
    if (!make) {
      free(R->pbcast[which]);
      free(R->preduce[which]);
      free(R->preduce_ip[which]);
    }
  }
}

static void case_rooted_early(void) {
  enum { ROUNDS = 120 };
  warm_up(MPI_COMM_WORLD);
  struct rooted *R = calloc(1, sizeof *R);
  rooted_requests(R, 1);
  char *msg = calloc(MSG_BYTES, 1);
  MPI_Request req, three[3];
  for (int pers = 0; pers < 2; pers++) {
    for (int round = 0; round < ROUNDS; round++) {
      int root = round % size, which = round / size % 2, n = count_of(which);
      int reduce = round / (2 * size) % 2, in_place = reduce && round / (4 * size) % 2;
      rooted_fill(R, n, root, round, in_place);
      rooted_post(R, reduce, which, root, in_place, pers, &req);
      early_complete(&req, round, pers);
      rooted_check(R, reduce, n, root, round);
    }
    /* in flight together: a bcast, a reduce, a barrier, completed in one Waitall */
    for (int round = 0; round < ROUNDS / 4; round++) {
      int root = round % size, n = count_of(round % 2);
      rooted_fill(R, n, root, round, 0);
      rooted_post(R, 0, round % 2, root, 0, pers, &three[0]);
      rooted_post(R, 1, round % 2, (root + 1) % size, 0, pers, &three[1]);
      check(MPI_Ibarrier(MPI_COMM_WORLD, &three[2]) == MPI_SUCCESS, "rooted-early: ibarrier failed");
      check(MPI_Waitall(3, three, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "rooted-early: waitall failed");
      rooted_check(R, 0, n, root, round);
      rooted_check(R, 1, n, (root + 1) % size, round);
    }
    /* each rank in turn posts first, then sends what the others receive before posting */
    for (int round = 0; round < 4 * size; round++) {
      int poster = round % size, reduce = round / size % 2, root = round / (2 * size) % 2 ? poster : (poster + 1) % size;
      rooted_fill(R, 1, root, round, 0);
      if (rank == poster) {
        rooted_post(R, reduce, 0, root, 0, pers, &req);
        for (int r = 0; r < size; r++)
          if (r != poster) MPI_Send(msg, MSG_BYTES, MPI_CHAR, r, TAG, MPI_COMM_WORLD);
      } else {
        MPI_Recv(msg, MSG_BYTES, MPI_CHAR, poster, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        rooted_post(R, reduce, 0, root, 0, pers, &req);
      }
      early_complete(&req, round, pers);
      rooted_check(R, reduce, 1, root, round);
    }
    /* the last rank posts late: the bcast's root, a contributor of the reduce to 0 */
    for (int reduce = 0; reduce < 2; reduce++) {
      int root = reduce ? 0 : size - 1;
      rooted_fill(R, 1, root, 7, 0);
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = now_s();
      if (rank == size - 1) usleep(300 * 1000);
      rooted_post(R, reduce, 0, root, 0, pers, &req);
      double posted = now_s() - t0;
      early_complete(&req, 0, pers);
      double done = now_s() - t0;
      rooted_check(R, reduce, 1, root, 7);
      if (rank == 0) {
        check(posted < 0.15, "rooted-early: the post waited for the late rank");
        check(done > 0.25, "rooted-early: the wait ended before the late rank posted");
        printf("rooted-early: %s %s: post %s, wait %s\n", pers ? "persistent" : "nonblocking",
               reduce ? "reduce" : "bcast", posted < 0.15 ? "returned before the late rank" : "waited",
               done > 0.25 ? "ended after it" : "ended early");
      }
    }
  }
  rooted_requests(R, 0);
  free(msg);
  free(R);
  if (rank == 0) printf("rooted-early: done\n");
}
#endif

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int deadline = 30, arg = 1;
  if (arg + 1 < argc && !strcmp(argv[arg], "--deadline")) {
    deadline = atoi(argv[arg + 1]);
    arg += 2;
  }
  if (arg >= argc) {
    if (rank == 0) fprintf(stderr, "usage: test_persistent [--deadline S] case\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char *name = argv[arg];
  alarm((unsigned)deadline); /* (SIGALRM ends a hung rank, and mpiexec the job) */
#ifdef PERSISTENT
  if (!strncmp(name, "progress-", 9)) {
    if (size < 2) {
      if (rank == 0) fprintf(stderr, "test_persistent: progress needs 2 ranks\n");
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    case_progress(name + 9);
  } else if (!strcmp(name, "order")) {
    case_order();
  } else if (!strcmp(name, "init-errors")) {
    case_init_errors();
  } else if (!strcmp(name, "truncate")) {
    case_truncate();
  } else if (!strcmp(name, "freed-comm")) {
    case_freed_comm();
  } else if (!strcmp(name, "world-first")) {
    case_world_first();
  } else if (!strcmp(name, "reuse")) {
    case_reuse();
  } else if (!strcmp(name, "barrier-early")) {
    case_barrier_early();
  } else if (!strcmp(name, "rooted-early")) {
    case_rooted_early();
  } else {
    if (rank == 0) fprintf(stderr, "test_persistent: unknown case %s\n", name);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
#else
  if (rank == 0) printf("test_persistent: no persistent collectives in this MPI\n");
  (void)name;
#endif
  long totals[2] = {checks, errors}, sums[2];
  MPI_Reduce(totals, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("test_persistent: %ld checks, %ld errors\n", sums[0], sums[1]);
  MPI_Finalize();
  return 0;
}
