/* test_nbc_args: what the arguments of a non-blocking collective (and some
 * erroneous blocking ones) may do, compared between a run without mcoll and one
 * with it. Rank 0 prints one line per case: its name and either what every rank
 * found ("ok", "N wrong") or the error class each rank got, so that the two runs
 * can be compared line by line.
 *
 *   freed_type      MPI_Iallgather / MPI_Ibcast with a derived datatype freed right
 *                   after the call (other types created meanwhile), then waited for
 *   freed_op        MPI_Iallreduce with a user op freed right after the call
 *   start_error     MPI_I* calls with invalid arguments on a communicator whose
 *                   handler is MPI_ERRORS_RETURN (MPI_COMM_WORLD's stays fatal)
 *   wait_error      the same behind a call in flight (rank 0 posts an MPI_Ibcast
 *                   whose root starts late, then the erroneous MPI_Iallreduce), and
 *                   the same waited for by MPI_Waitall: the error class, whether
 *                   the call or the wait returned it (mcoll may find at the wait
 *                   what the host finds at the call), through the communicator's
 *                   handler, not MPI_COMM_WORLD's fatal one
 *   wait_truncate   a truncating MPI_Ibcast (root 4000 B, readers 2000 B): only
 *                   when named (natively Open MPI aborts)
 *   intercomm       MPI_Ireduce_scatter, MPI_Iallreduce, MPI_Ibcast on an
 *                   intercommunicator of unequal groups (needs 3+ ranks)
 *   big_stack_op    MPI_Iallreduce with a user op that uses 2 MiB of stack
 *   bad_buffers     MPI_Bcast / MPI_Ibcast from MPI_IN_PLACE (Open MPI only: MPICH
 *                   crashes), MPI_Allgather with the send buffer as receive buffer
 *                   (errors, as the host MPI says)
 *
 * In the freed_* cases rank 0 starts late: the others' calls are in flight when
 * they free the datatype or op.
 *
 * usage: test_nbc_args [case ...]   (default: all)
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { TAG = 77, LATE_US = 200 * 1000 };

static int rank, size;

static const char *class_name(int rc)
{
    static char text[MPI_MAX_ERROR_STRING];
    int cls = MPI_SUCCESS, len = 0;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    MPI_Error_string(cls, text, &len);
    /* the class's own name: both MPIs print it first or alone */
    static const struct { int cls; const char *name; } names[] = {
        {MPI_SUCCESS, "MPI_SUCCESS"}, {MPI_ERR_BUFFER, "MPI_ERR_BUFFER"}, {MPI_ERR_COUNT, "MPI_ERR_COUNT"},
        {MPI_ERR_TYPE, "MPI_ERR_TYPE"}, {MPI_ERR_COMM, "MPI_ERR_COMM"}, {MPI_ERR_ROOT, "MPI_ERR_ROOT"},
        {MPI_ERR_OP, "MPI_ERR_OP"}, {MPI_ERR_ARG, "MPI_ERR_ARG"}, {MPI_ERR_OTHER, "MPI_ERR_OTHER"},
        {MPI_ERR_TRUNCATE, "MPI_ERR_TRUNCATE"}, {MPI_ERR_INTERN, "MPI_ERR_INTERN"}, {MPI_ERR_RANK, "MPI_ERR_RANK"},
    };
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (names[k].cls == cls) return names[k].name;
    snprintf(text, sizeof text, "class %d", cls);
    return text;
}

/* Rank 0 prints name and what each rank reported (a short text). */
static void report(const char *name, const char *mine)
{
    char text[64];
    snprintf(text, sizeof text, "%s", mine);
    if (rank != 0) {
        MPI_Send(text, sizeof text, MPI_CHAR, 0, TAG, MPI_COMM_WORLD);
        return;
    }
    printf("%s: %s", name, text);
    for (int r = 1; r < size; r++) {
        char theirs[64];
        MPI_Recv(theirs, sizeof theirs, MPI_CHAR, r, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (strcmp(theirs, text) != 0) printf(" (rank %d: %s)", r, theirs);
    }
    printf("\n");
    fflush(stdout);
}

static void report_wrong(const char *name, long wrong)
{
    char text[64];
    if (wrong) snprintf(text, sizeof text, "%ld wrong", wrong);
    else snprintf(text, sizeof text, "ok");
    report(name, text);
}

static void start_late(void)
{
    if (rank == 0) usleep(LATE_US);
}

/* Types created after the free, so that a reused handle or struct holds another
 * layout than the freed one. */
enum { DECOYS = 8 };
static void make_decoys(MPI_Datatype decoys[DECOYS])
{
    for (int k = 0; k < DECOYS; k++) {
        MPI_Type_vector(3, 1, 5 + k, MPI_SHORT, &decoys[k]);
        MPI_Type_commit(&decoys[k]);
    }
}

static void free_decoys(MPI_Datatype decoys[DECOYS])
{
    for (int k = 0; k < DECOYS; k++) MPI_Type_free(&decoys[k]);
}

/* ---- freed_type ----------------------------------------------------------------- */
enum { BLOCK = 32768 }; /* ints per rank */

/* Pairs of ints, every other pair skipped: a derived type with holes. */
static MPI_Datatype pair_type(void)
{
    MPI_Datatype pair, spaced;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_create_resized(pair, 0, 4 * (MPI_Aint)sizeof(int), &spaced);
    MPI_Type_free(&pair);
    MPI_Type_commit(&spaced);
    return spaced;
}

static void case_freed_type(void)
{
    /* MPI_Iallgather: BLOCK/2 pairs per rank, spaced out in both buffers. */
    int n = BLOCK / 2;
    int *send = malloc(sizeof(int) * 4 * (size_t)n);
    int *recv = malloc(sizeof(int) * 4 * (size_t)n * (size_t)size);
    for (int i = 0; i < 4 * n; i++) send[i] = rank * 1000003 + i;
    for (long i = 0; i < 4L * n * size; i++) recv[i] = -1;
    MPI_Datatype type = pair_type(), decoys[DECOYS];
    MPI_Request req;
    start_late();
    MPI_Iallgather(send, n, type, recv, n, type, MPI_COMM_WORLD, &req);
    MPI_Type_free(&type);
    make_decoys(decoys);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    long wrong = 0;
    for (int r = 0; r < size; r++)
        for (int i = 0; i < 4 * n; i++) {
            int want = i % 4 < 2 ? r * 1000003 + i : -1;
            wrong += recv[(long)r * 4 * n + i] != want;
        }
    free_decoys(decoys);
    report_wrong("freed_type iallgather", wrong);

    /* MPI_Ibcast from rank 1 (rank 0 is late), the same type. */
    int root = size > 1 ? 1 : 0;
    for (long i = 0; i < 4L * n * size; i++) recv[i] = rank == root ? (int)i : -1;
    type = pair_type();
    start_late();
    MPI_Ibcast(recv, n * size, type, root, MPI_COMM_WORLD, &req);
    MPI_Type_free(&type);
    make_decoys(decoys);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    wrong = 0;
    for (long i = 0; i < 4L * n * size; i++) wrong += recv[i] != (i % 4 < 2 || rank == root ? (int)i : -1);
    free_decoys(decoys);
    report_wrong("freed_type ibcast", wrong);
    free(send);
    free(recv);
}

/* ---- freed_op ------------------------------------------------------------------- */
static void int_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[i] += a[i];
}

static void int_product(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[i] *= a[i];
}

static void case_freed_op(void)
{
    enum { N = 65536 };
    int *send = malloc(sizeof(int) * N), *recv = malloc(sizeof(int) * N);
    for (int i = 0; i < N; i++) send[i] = i + rank;
    MPI_Op op;
    MPI_Datatype decoys[DECOYS];
    MPI_Op_create(int_sum, 1, &op);
    MPI_Request req;
    start_late();
    MPI_Iallreduce(send, recv, N, MPI_INT, op, MPI_COMM_WORLD, &req);
    MPI_Op_free(&op);
    MPI_Op other[4]; /* (a reused op handle then holds another function) */
    for (int k = 0; k < 4; k++) MPI_Op_create(int_product, 1, &other[k]);
    make_decoys(decoys);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    long wrong = 0;
    for (int i = 0; i < N; i++) wrong += recv[i] != i * size + size * (size - 1) / 2;
    for (int k = 0; k < 4; k++) MPI_Op_free(&other[k]);
    free_decoys(decoys);
    report_wrong("freed_op iallreduce", wrong);
    free(send);
    free(recv);
}

/* ---- start_error ---------------------------------------------------------------- */
/* A communicator with MPI_ERRORS_RETURN (MPI_COMM_WORLD's stays fatal), after a
 * blocking and a non-blocking call: mcoll agrees at a communicator's first
 * non-blocking call after a blocking one whether its calls run as tasks (an erroneous
 * call made then, or behind a call in flight, is reported by the wait: see the
 * README). */
static MPI_Comm returning_comm(void)
{
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int one = 1, sum = 0;
    MPI_Request req;
    MPI_Barrier(comm);
    MPI_Iallreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    return comm;
}

static void report_start(const char *name, int rc, MPI_Request *req)
{
    /* A call that returned MPI_SUCCESS is waited for; its error is the wait's. */
    char text[MPI_MAX_ERROR_STRING + 32];
    if (rc == MPI_SUCCESS) {
        rc = MPI_Wait(req, MPI_STATUS_IGNORE);
        snprintf(text, sizeof text, "wait %s", class_name(rc));
    } else {
        snprintf(text, sizeof text, "call %s%s", class_name(rc),
                 *req == MPI_REQUEST_NULL ? "" : " (request set)");
    }
    report(name, text);
}

static void case_start_error(void)
{
    MPI_Comm comm = returning_comm();
    int send[8] = {0}, recv[8 * 64];
    MPI_Request req;
    req = MPI_REQUEST_NULL;
    report_start("start_error iallreduce op=MPI_OP_NULL",
                 MPI_Iallreduce(send, recv, 8, MPI_INT, MPI_OP_NULL, comm, &req), &req);
    req = MPI_REQUEST_NULL;
    report_start("start_error ibcast root=size", MPI_Ibcast(recv, 8, MPI_INT, size, comm, &req), &req);
    req = MPI_REQUEST_NULL;
    report_start("start_error iallgather type=MPI_DATATYPE_NULL",
                 MPI_Iallgather(send, 8, MPI_DATATYPE_NULL, recv, 8, MPI_DATATYPE_NULL, comm, &req), &req);
    MPI_Comm_free(&comm);
}

/* ---- wait_error ----------------------------------------------------------------- */
/* The error class of a call returned by the call itself or, if it succeeded, by
 * its wait. */
static const char *call_or_wait(int rc, MPI_Request *req)
{
    if (rc == MPI_SUCCESS) rc = MPI_Wait(req, MPI_STATUS_IGNORE);
    return class_name(rc);
}

static void case_wait_error(void)
{
    MPI_Comm comm = returning_comm();
    enum { N = 1 << 18 };
    int *big = calloc(N, sizeof *big), send[8] = {0}, recv[8] = {0};
    /* Rank 0's erroneous call queues behind its bcast from a root that starts late. */
    int root = size - 1;
    if (rank == root) usleep(LATE_US);
    MPI_Request bcast = MPI_REQUEST_NULL, bad = MPI_REQUEST_NULL;
    int bcast_rc = MPI_Ibcast(big, N, MPI_INT, root, comm, &bcast);
    int bad_rc = MPI_Iallreduce(send, recv, 8, MPI_INT, MPI_OP_NULL, comm, &bad);
    char text[MPI_MAX_ERROR_STRING + 32];
    snprintf(text, sizeof text, "%s", call_or_wait(bad_rc, &bad));
    report("wait_error iallreduce op=MPI_OP_NULL behind an ibcast", text);
    report("wait_error the ibcast before it", call_or_wait(bcast_rc, &bcast));
    /* Waited for in an array call: the erroneous call's status says it. */
    if (rank == root) usleep(LATE_US);
    MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status statuses[2];
    bcast_rc = MPI_Ibcast(big, N, MPI_INT, root, comm, &reqs[0]);
    bad_rc = MPI_Iallreduce(send, recv, 8, MPI_INT, MPI_OP_NULL, comm, &reqs[1]);
    if (bad_rc != MPI_SUCCESS) {
        snprintf(text, sizeof text, "%s", class_name(bad_rc));
        MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
    } else {
        int rc = MPI_Waitall(2, reqs, statuses);
        snprintf(text, sizeof text, "%s", rc == MPI_ERR_IN_STATUS ? class_name(statuses[1].MPI_ERROR)
                                                                  : class_name(rc));
    }
    report("wait_error waitall: iallreduce op=MPI_OP_NULL behind an ibcast", text);
    free(big);
    MPI_Comm_free(&comm);
}

/* A truncation that the readers find while the call runs (natively Open MPI 4.1
 * raises it at the wait on MPI_COMM_WORLD, MPICH 4.0 returns MPI_ERR_OTHER through
 * the communicator's handler: run only when named). */
static void case_wait_truncate(void)
{
    MPI_Comm comm = returning_comm();
    int *buf = calloc(1000, sizeof *buf);
    MPI_Request req = MPI_REQUEST_NULL;
    int count = rank == 0 ? 1000 : 500;
    int rc = MPI_Ibcast(buf, count, MPI_INT, 0, comm, &req);
    report("wait_truncate ibcast root 4000 B readers 2000 B", call_or_wait(rc, &req));
    free(buf);
    MPI_Comm_free(&comm);
}

/* ---- intercomm ------------------------------------------------------------------ */
static void case_intercomm(void)
{
    if (size < 3) {
        if (rank == 0) printf("intercomm: skipped (needs 3 ranks)\n");
        return;
    }
    /* group A: rank 0; group B: the others (unequal sizes) */
    int in_a = rank == 0;
    MPI_Comm local, inter;
    MPI_Comm_split(MPI_COMM_WORLD, in_a, rank, &local);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, in_a ? 1 : 0, 12, &inter);
    int lsize, rsize;
    MPI_Comm_size(inter, &lsize);
    MPI_Comm_remote_size(inter, &rsize);
    int lrank;
    MPI_Comm_rank(inter, &lrank);

    /* MPI_Ireduce_scatter: each group reduces the other's vectors and scatters the
     * result by its own recvcounts (lsize entries, rsize elements each: both groups'
     * vectors are lsize * rsize long). */
    int *counts = malloc(sizeof(int) * (size_t)lsize), total = lsize * rsize;
    for (int i = 0; i < lsize; i++) counts[i] = rsize;
    int *send = malloc(sizeof(int) * (size_t)total), *recv = malloc(sizeof(int) * (size_t)rsize);
    for (int i = 0; i < total; i++) send[i] = 100 * i + lrank + 1;
    MPI_Request req;
    MPI_Ireduce_scatter(send, recv, counts, MPI_INT, MPI_SUM, inter, &req);
    int rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    /* the other group's ranks each sent 100 * i + (their rank + 1) */
    long wrong = rc != MPI_SUCCESS;
    for (int k = 0; k < rsize; k++)
        wrong += recv[k] != 100 * (lrank * rsize + k) * rsize + rsize * (rsize + 1) / 2;
    report_wrong("intercomm ireduce_scatter", wrong);
    free(counts);
    free(send);
    free(recv);

    int mine = lrank + 1, theirs = 0;
    rc = MPI_Iallreduce(&mine, &theirs, 1, MPI_INT, MPI_SUM, inter, &req);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    report_wrong("intercomm iallreduce", rc != MPI_SUCCESS || theirs != rsize * (rsize + 1) / 2);

    int value = in_a ? 4242 : 0, root = in_a ? MPI_ROOT : 0;
    rc = MPI_Ibcast(&value, 1, MPI_INT, root, inter, &req);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    report_wrong("intercomm ibcast", rc != MPI_SUCCESS || value != 4242);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&local);
}

/* ---- big_stack_op --------------------------------------------------------------- */
enum { OP_STACK = 2 << 20 };

static void __attribute__((noinline)) stack_hungry_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    volatile char scratch[OP_STACK]; /* touched end to end: the whole stack is used */
    for (size_t k = 0; k < sizeof scratch; k += 4096) scratch[k] = (char)k;
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[i] += a[i] + (scratch[0] & 0);
}

static void case_big_stack_op(void)
{
    int send[16], recv[16];
    for (int i = 0; i < 16; i++) send[i] = i + rank;
    MPI_Op op;
    MPI_Op_create(stack_hungry_sum, 1, &op);
    MPI_Request req;
    MPI_Iallreduce(send, recv, 16, MPI_INT, op, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    long wrong = 0;
    for (int i = 0; i < 16; i++) wrong += recv[i] != i * size + size * (size - 1) / 2;
    MPI_Op_free(&op);
    report_wrong("big_stack_op iallreduce", wrong);
}

/* ---- bad_buffers ---------------------------------------------------------------- */
static void case_bad_buffers(void)
{
    MPI_Comm comm = returning_comm();
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    MPI_Get_library_version(version, &len);
    if (strstr(version, "MPICH")) { /* (MPICH 4.0 itself crashes on these) */
        if (rank == 0) printf("bad_buffers bcast from MPI_IN_PLACE: skipped\n");
    } else {
        report("bad_buffers bcast from MPI_IN_PLACE", class_name(MPI_Bcast(MPI_IN_PLACE, 4, MPI_INT, 0, comm)));
        MPI_Request req = MPI_REQUEST_NULL;
        report_start("bad_buffers ibcast from MPI_IN_PLACE",
                     MPI_Ibcast(MPI_IN_PLACE, 4, MPI_INT, 0, comm, &req), &req);
    }
    MPI_Comm_free(&comm);
    /* On a communicator of one rank: MPICH hangs on more (the ranks disagree) */
    MPI_Comm self;
    MPI_Comm_dup(MPI_COMM_SELF, &self);
    MPI_Comm_set_errhandler(self, MPI_ERRORS_RETURN);
    MPI_Barrier(self);
    int buf[4] = {0};
    report("bad_buffers allgather sendbuf=recvbuf",
           class_name(MPI_Allgather(buf, 4, MPI_INT, buf, 4, MPI_INT, self)));
    MPI_Comm_free(&self);
}

static const struct {
    const char *name;
    void (*run)(void);
    int named_only; /* not part of the default run */
} cases[] = {
    {"freed_type", case_freed_type, 0}, {"freed_op", case_freed_op, 0}, {"start_error", case_start_error, 0},
    {"wait_error", case_wait_error, 0}, {"wait_truncate", case_wait_truncate, 1},
    {"intercomm", case_intercomm, 0}, {"big_stack_op", case_big_stack_op, 0}, {"bad_buffers", case_bad_buffers, 0},
};

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* MPI_COMM_WORLD as a program uses it: after a blocking and a non-blocking call
     * (mcoll decides at those whether its calls run as tasks) */
    int one = 1, sum = 0;
    MPI_Request req;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Iallreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int wanted = argc == 1 && !cases[k].named_only;
        for (int a = 1; a < argc; a++) wanted |= strcmp(argv[a], cases[k].name) == 0;
        if (wanted) cases[k].run();
    }
    if (rank == 0) printf("test_nbc_args: done\n");
    MPI_Finalize();
    return 0;
}
