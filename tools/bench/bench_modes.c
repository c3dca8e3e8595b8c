/* mcoll-bench's cold and latency modes: what back-to-back warm blocks do not show.
 *
 * Cold (-m cold -K N): each round, each side gets a fresh communicator
 * (MPI_Comm_dup of the row's), times its first barrier ("set-up": mcoll builds its
 * context on the first collective), then each of the collective's first N calls
 * one by one, with a barrier of the host MPI on the row's communicator before each
 * (so the fresh one sees nothing but the calls measured). Then 2 x 128 untimed calls
 * (past every slot of mcoll's ring) and N calls timed the same way: "warm". Per call
 * index the slowest rank's time; medians over rounds per call index. Under mcoll a
 * dup shares its parent's (warm) context unless MCOLL_SHARE_CONTEXT=0, and takes a
 * pooled segment unless MCOLL_CHANNEL_POOL=0; bench/run.sh sets both for this mode:
 * then every fresh communicator builds its own, with a new segment.
 *
 * Latency (-m latency): OSU's convention. Every call is followed by a barrier of the
 * same side (MPI_Barrier of the host MPI for native, mcoll's for mcoll, as OSU run
 * natively or under mcoll); only the calls are timed; a rank's average per call,
 * the slowest rank's; medians over rounds. */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

enum { COLD_WARMING_CALLS = 256 };

static double *cold_rows_alloc(int rounds, int n)
{
    return bench_alloc_doubles(rounds * n);
}

/* One side's cold round: out[0] set-up, out[1..n] the first n calls, out[n+1..2n]
 * the same calls once warm; maxima over ranks. */
static void cold_block(const struct mpi_api *api, const struct row *r, const struct options *o,
                       int n, double *out)
{
    MPI_Comm fresh;
    if (PMPI_Comm_dup(r->comm, &fresh) != MPI_SUCCESS)
        bench_die(r->comm, "MPI_Comm_dup failed");
    struct row fr = *r;
    fr.comm = fresh;
    PMPI_Barrier(r->comm);
    double start = bench_now();
    api->barrier(fresh);
    out[0] = bench_now() - start;
    for (int i = 0; i < n; i++) {
        PMPI_Barrier(r->comm);
        start = bench_now();
        bench_run(api, &fr);
        out[1 + i] = bench_now() - start;
    }
    for (int i = 0; i < COLD_WARMING_CALLS; i++)
        bench_run(api, &fr);
    for (int i = 0; i < n; i++) {
        PMPI_Barrier(r->comm);
        start = bench_now();
        bench_run(api, &fr);
        out[1 + n + i] = bench_now() - start;
    }
    PMPI_Allreduce(MPI_IN_PLACE, out, 1 + 2 * n, MPI_DOUBLE, MPI_MAX, r->comm);
    if (o->check)
        bench_check_block(api, &fr);
    PMPI_Comm_free(&fresh);
}

/* Median over rounds of column `col` of rounds x width samples. */
static double column_median(const double *samples, int rounds, int width, int col)
{
    double *v = bench_alloc_doubles(rounds);
    for (int k = 0; k < rounds; k++)
        v[k] = samples[k * width + col];
    double m = bench_median(v, rounds);
    free(v);
    return m;
}

struct cold_side {
    double setup, first, first10, first_all, warm, *per_call, *round_medians;
};

static void cold_summary(const double *samples, int rounds, int n, struct cold_side *s)
{
    int width = 1 + 2 * n;
    s->setup = column_median(samples, rounds, width, 0);
    s->per_call = bench_alloc_doubles(n);
    for (int i = 0; i < n; i++)
        s->per_call[i] = column_median(samples, rounds, width, 1 + i);
    s->first = s->per_call[0];
    s->first10 = bench_median(s->per_call, n < 10 ? n : 10);
    s->first_all = bench_median(s->per_call, n);
    double *warm = bench_alloc_doubles(n);
    for (int i = 0; i < n; i++)
        warm[i] = column_median(samples, rounds, width, 1 + n + i);
    s->warm = bench_median(warm, n);
    free(warm);
    /* Per round: the median of its n cold calls (the JSON's samples). */
    s->round_medians = bench_alloc_doubles(rounds);
    for (int k = 0; k < rounds; k++)
        s->round_medians[k] = bench_median(samples + k * width + 1, n);
}

void bench_cold_row(const struct row *r, const struct options *o, struct result *res)
{
    int n = o->cold_calls;
    double *samples[2] = {cold_rows_alloc(o->rounds, 1 + 2 * n),
                          cold_rows_alloc(o->rounds, 1 + 2 * n)};
    for (int k = 0; k < o->rounds; k++)
        for (int turn = 0; turn < 2; turn++) {
            int side = (turn == 0) == (k % 2 == 0) ? 0 : 1;
            cold_block(bench_side_api(side, r, o), r, o, n, samples[side] + k * (1 + 2 * n));
        }
    struct cold_side s[2];
    for (int side = 0; side < 2; side++)
        cold_summary(samples[side], o->rounds, n, &s[side]);
    bench_result_of_row(res, r, n, 0);
    res->cold_calls = n;
    res->native = s[0].first_all;
    res->mcoll = s[1].first_all;
    res->native_samples = s[0].round_medians;
    res->mcoll_samples = s[1].round_medians;
    res->native_setup = s[0].setup;
    res->mcoll_setup = s[1].setup;
    res->native_first = s[0].first;
    res->mcoll_first = s[1].first;
    res->native_first10 = s[0].first10;
    res->mcoll_first10 = s[1].first10;
    res->native_warm = s[0].warm;
    res->mcoll_warm = s[1].warm;
    res->native_per_call = s[0].per_call;
    res->mcoll_per_call = s[1].per_call;
    free(samples[0]);
    free(samples[1]);
}

/* Seconds per call, the calls alone, a barrier of the same side after each. */
static double latency_block(const struct mpi_api *api, const struct row *r, int warmup,
                            int iters)
{
    for (int i = 0; i < warmup; i++) {
        bench_run(api, r);
        api->barrier(r->comm);
    }
    double sum = 0;
    for (int i = 0; i < iters; i++) {
        double start = bench_now();
        bench_run(api, r);
        sum += bench_now() - start;
        api->barrier(r->comm);
    }
    double per_call = sum / iters;
    PMPI_Allreduce(MPI_IN_PLACE, &per_call, 1, MPI_DOUBLE, MPI_MAX, r->comm);
    return per_call;
}

void bench_latency_row(const struct row *r, const struct options *o, struct result *res)
{
    bench_alternating_row(r, o, res, latency_block);
}
