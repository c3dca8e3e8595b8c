/* Cold start: the first calls on a fresh communicator must not take page faults in
 * mcoll's segment (issue 8, defect 11). Each of the first 128 calls used to fault in
 * a fresh ring or area slot in every rank (2 ranks: bcast 8 B 3.5 us instead of
 * 0.45). For each case: MPI_Comm_dup, a barrier (mcoll's set-up), then the page
 * faults (getrusage ru_minflt) of this rank over COLD_CALLS calls whose buffers are
 * already touched, and the results checked.
 *
 * usage: mcoll-test-coldstart [--max-faults N]   (default 16 per case and rank)
 * prints "test_coldstart: <checks> checks, <errors> errors" on rank 0. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

enum { COLD_CALLS = 100 };

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

enum coll { BCAST, ALLREDUCE, REDUCE, ALLGATHER, GATHER, SCATTER, ALLTOALL };
static const char *const coll_names[] = {"bcast", "allreduce", "reduce", "allgather",
                                         "gather", "scatter", "alltoall"};

struct cold_case {
    enum coll coll;
    int bytes; /* whole buffer (bcast, reductions) or per-rank block */
};

static const struct cold_case cases[] = {
    {BCAST, 8}, {BCAST, 512}, {BCAST, 4096}, {BCAST, 32768}, {BCAST, 65536},
    {ALLREDUCE, 8}, {ALLREDUCE, 4096}, {ALLREDUCE, 8192}, {REDUCE, 8}, {REDUCE, 4096},
    {REDUCE, 16384}, {ALLGATHER, 8}, {ALLGATHER, 1024}, {ALLGATHER, 8192}, {GATHER, 8}, {SCATTER, 8}, {ALLTOALL, 8},
};

/* One call; `round` varies the data so that a stale slot cannot pass. */
static void call(const struct cold_case *cc, MPI_Comm comm, int rank, int n, int round,
                 int *send, int *recv)
{
    int count = cc->bytes / (int)sizeof(int);
    switch (cc->coll) {
    case BCAST:
        for (int i = 0; i < count && rank == 0; i++)
            recv[i] = round * 1000 + i;
        MPI_Bcast(recv, count, MPI_INT, 0, comm);
        break;
    case ALLREDUCE:
    case REDUCE:
        for (int i = 0; i < count; i++)
            send[i] = round + rank + i;
        if (cc->coll == ALLREDUCE)
            MPI_Allreduce(send, recv, count, MPI_INT, MPI_SUM, comm);
        else
            MPI_Reduce(send, recv, count, MPI_INT, MPI_SUM, 0, comm);
        break;
    case ALLGATHER:
    case GATHER:
        for (int i = 0; i < count; i++)
            send[i] = round * 1000 + rank * 100 + i;
        if (cc->coll == ALLGATHER)
            MPI_Allgather(send, count, MPI_INT, recv, count, MPI_INT, comm);
        else
            MPI_Gather(send, count, MPI_INT, recv, count, MPI_INT, 0, comm);
        break;
    case SCATTER:
        for (int i = 0; i < count * n; i++)
            send[i] = round * 1000 + i;
        MPI_Scatter(send, count, MPI_INT, recv, count, MPI_INT, 0, comm);
        break;
    case ALLTOALL:
        for (int i = 0; i < count * n; i++)
            send[i] = round * 1000 + rank * 100 + i;
        MPI_Alltoall(send, count, MPI_INT, recv, count, MPI_INT, comm);
        break;
    }
}

/* Wrong elements of the last call (round) on this rank. */
static long check(const struct cold_case *cc, int rank, int n, int round, const int *recv)
{
    int count = cc->bytes / (int)sizeof(int);
    long wrong = 0;
    switch (cc->coll) {
    case BCAST:
        for (int i = 0; i < count; i++)
            wrong += recv[i] != round * 1000 + i;
        break;
    case ALLREDUCE:
    case REDUCE:
        for (int i = 0; i < count && (cc->coll == ALLREDUCE || rank == 0); i++)
            wrong += recv[i] != n * (round + i) + n * (n - 1) / 2;
        break;
    case ALLGATHER:
    case GATHER:
        for (int r = 0; r < n && (cc->coll == ALLGATHER || rank == 0); r++)
            for (int i = 0; i < count; i++)
                wrong += recv[r * count + i] != round * 1000 + r * 100 + i;
        break;
    case SCATTER:
        for (int i = 0; i < count; i++)
            wrong += recv[i] != round * 1000 + rank * count + i;
        break;
    case ALLTOALL:
        for (int r = 0; r < n; r++)
            for (int i = 0; i < count; i++)
                wrong += recv[r * count + i] != round * 1000 + r * 100 + rank * count + i;
        break;
    }
    return wrong;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    long max_faults = 16;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--max-faults") == 0)
            max_faults = atol(argv[++i]);

    long checks = 0, errors = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const struct cold_case *cc = &cases[k];
        size_t bytes = (size_t)cc->bytes * (size_t)n;
        int *send = calloc(bytes, 1), *recv = calloc(bytes, 1);
        if (!send || !recv)
            MPI_Abort(MPI_COMM_WORLD, 1);
        memset(send, 1, bytes); /* touched: their faults are not mcoll's */
        memset(recv, 1, bytes);
        MPI_Comm fresh;
        MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
        MPI_Barrier(fresh); /* set-up: not counted */
        long before = minor_faults();
        for (int round = 0; round < COLD_CALLS; round++)
            call(cc, fresh, rank, n, round, send, recv);
        long faults = minor_faults() - before;
        long wrong = check(cc, rank, n, COLD_CALLS - 1, recv);
        long most = 0;
        MPI_Allreduce(&faults, &most, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        checks += 2;
        if (rank == 0) {
            printf("%-10s %6d B: %3ld page faults in the first %d calls (most on a rank)%s\n",
                   coll_names[cc->coll], cc->bytes, most, COLD_CALLS,
                   most > max_faults ? "  <- too many" : "");
            if (wrong)
                printf("%-10s %6d B: %ld wrong elements\n", coll_names[cc->coll], cc->bytes,
                       wrong);
        }
        errors += (most > max_faults) + (wrong != 0);
        MPI_Comm_free(&fresh);
        free(send);
        free(recv);
    }
    if (rank == 0)
        printf("test_coldstart: %ld checks, %ld errors\n", checks, errors);
    MPI_Finalize();
    return 0;
}
