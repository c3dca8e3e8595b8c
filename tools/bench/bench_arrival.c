/* mcoll-bench's arrival mode (-m arrival): bcast under unbalanced process arrival
 * (the CP bcast's measurement, docs/architecture.md). Before every call each rank
 * waits its own delay (-D random:US: drawn per rank and call, uniform in [0, US); -D
 * late:RANK:US: that rank alone), then calls; the time that counts is from the LAST
 * arrival to the last completion, max(completion) - max(arrival), on the one clock
 * every rank of this machine shares (CLOCK_MONOTONIC: test hosts are namespaces of
 * one kernel). A barrier before every call.
 *
 * Four sides take turns in every round, in a rotating order: the host MPI's
 * MPI_Bcast, mcoll with the fixed leader between nodes (binomial: local rank 0 leads
 * a node that does not hold the root), mcoll with first_arrival (the node's first
 * rank to arrive leads) and mcoll with push (the root sends to every rank of the
 * other nodes), and first_arrival again with its waits' naps off (MCOLL_WAIT_NAP_US=0;
 * task/host.h). A row reports per side the median over rounds of the median
 * call. -A a,b (side names, e.g. -A fixed_leader,first_arrival): those two sides
 * alone, the others' columns nan. */
#include "bench.h"

#include <dlfcn.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SIDE_HOST, SIDE_FIXED, SIDE_FIRST, SIDE_PUSH, SIDE_FIRST_NO_NAP, NSIDES };
static const char *const side_names[NSIDES] = {"host", "fixed_leader", "first_arrival", "push",
                                               "first_arrival_no_nap"};
/* mcoll's algorithm between nodes of each mcoll side */
static const char *const side_algs[NSIDES] = {NULL, "binomial", "first_arrival", "push",
                                              "first_arrival"};

struct delays {
    enum { DELAY_RANDOM, DELAY_LATE } kind;
    double max, late; /* seconds */
    int late_rank;
};

static bool parse_delays(const char *spec, struct delays *d)
{
    int rank;
    double us;
    if (sscanf(spec, "random:%lf", &us) == 1 && us >= 0) {
        *d = (struct delays){DELAY_RANDOM, us * 1e-6, 0, -1};
        return true;
    }
    if (sscanf(spec, "late:%d:%lf", &rank, &us) == 2 && rank >= 0 && us >= 0) {
        *d = (struct delays){DELAY_LATE, 0, us * 1e-6, rank};
        return true;
    }
    return false;
}

/* xorshift64*: the same sequence on every run, a different one per rank. */
static double uniform01(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return (double)((x * 0x2545F4914F6CDD1DULL) >> 11) / 9007199254740992.0;
}

static double delay_of(const struct delays *d, int rank, uint64_t *rng)
{
    if (d->kind == DELAY_LATE)
        return rank == d->late_rank ? d->late : 0;
    return d->max * uniform01(rng);
}

/* Yields the core while waiting: ranks outnumber the cores here. */
static void wait_until(double t)
{
    while (bench_now() < t)
        sched_yield();
}

static const struct mpi_api *side_api(int side)
{
    if (side == SIDE_HOST)
        return &bench_native_api;
    static int (*set_algorithm)(const char *, const char *);
    if (!set_algorithm)
        set_algorithm = (int (*)(const char *, const char *))dlsym(RTLD_DEFAULT, "mcoll_set_algorithm");
    if (!set_algorithm ||
        set_algorithm("bcast.inter", side_algs[side]) != 0)
        bench_usage_exit("-m arrival: mcoll not loaded, or without first_arrival and push");
    /* first_arrival's waits without their naps (MCOLL_WAIT_NAP_US=0) on the last
     * side; the environment's value (else the default) on the others */
    static int (*set_param)(const char *, const char *);
    if (!set_param)
        set_param = (int (*)(const char *, const char *))dlsym(RTLD_DEFAULT, "mcoll_set_param");
    const char *nap = getenv("MCOLL_WAIT_NAP_US");
    if (set_param)
        set_param("WAIT_NAP_US", side == SIDE_FIRST_NO_NAP ? "0" : nap ? nap : "50");
    return &bench_mcoll_api;
}

/* -A a,b: the sides named there; else all of them. */
static bool side_wanted(const struct options *o, int side)
{
    if (!o->versus[0])
        return true;
    return !strcmp(o->versus[0], side_names[side]) || !strcmp(o->versus[1], side_names[side]);
}

/* The median call's time from the last arrival to the last completion. */
static double time_calls(const struct mpi_api *api, const struct row *r, const struct delays *d,
                         int warmup, int iters, uint64_t *rng)
{
    double *t = bench_alloc_doubles(iters);
    for (int i = -warmup; i < iters; i++) {
        api->barrier(r->comm);
        double arrive = bench_now() + delay_of(d, r->rank, rng);
        wait_until(arrive);
        bench_run(api, r);
        double times[2] = {arrive, bench_now()}, last[2];
        /* mcoll's, which yields the core: an MPI that spins in its own would hold the
         * cores that the late ranks need, on every side alike. */
        MPI_Allreduce(times, last, 2, MPI_DOUBLE, MPI_MAX, r->comm);
        if (i >= 0)
            t[i] = last[1] - last[0];
    }
    double median = bench_median(t, iters);
    free(t);
    return median;
}

void bench_arrival(const struct run_info *ri, const struct options *o, MPI_Comm comm)
{
    int rank, p;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &p);
    struct delays d;
    if (!parse_delays(o->arrival ? o->arrival : "random:100", &d))
        bench_usage_exit("-D: random:US or late:RANK:US");
    int nwanted = 0;
    for (int s = 0; s < NSIDES; s++)
        nwanted += side_wanted(o, s);
    if (o->versus[0] && nwanted != 2)
        bench_usage_exit("-A in arrival mode: two of host, fixed_leader, first_arrival, push, "
                         "first_arrival_no_nap");
    uint64_t rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(rank + 1);
    int iters = o->iters > 0 ? o->iters : 50, warmup = o->warmup >= 0 ? o->warmup : 5;
    FILE *json = rank == 0 && o->json_path ? fopen(o->json_path, "w") : NULL;
    if (json)
        fprintf(json, "{\"mode\": \"arrival\", \"nprocs\": %d, \"mpi\": \"%s\", \"host\": \"%s\", "
                      "\"date\": \"%s\", \"rounds\": %d, \"iters\": %d, \"delays\": \"%s\", \"rows\": [\n",
                p, ri->flavour ? ri->flavour : "", ri->hostname, ri->date, o->rounds, iters,
                o->arrival ? o->arrival : "random:100");
    if (rank == 0)
        printf("# arrival: bcast, %d ranks, delays %s, root %d; time from the last arrival to the "
               "last completion, us (median call, median of %d rounds)\n"
               "# %10s %10s %14s %14s %12s %14s %12s %14s %12s\n",
               p, o->arrival ? o->arrival : "random:100", o->root, o->rounds, "bytes", "host_us",
               "fixed_us", "first_us", "fixed/first", "push_us", "fixed/push", "first_nonap_us",
               "nonap/first");
    int first = 1;
    for (size_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes = (size_t)(bytes * o->factor)) {
        struct row r;
        if (!bench_row_init(&r, bench_coll_index("bcast"), bytes, comm, o->root))
            break;
        bench_row_alloc(&r, false);
        double *samples = bench_alloc_doubles(NSIDES * o->rounds);
        for (int round = 0; round < o->rounds; round++)
            for (int turn = 0; turn < NSIDES; turn++) {
                int side = (turn + round) % NSIDES;
                samples[side * o->rounds + round] =
                    side_wanted(o, side) ? time_calls(side_api(side), &r, &d, warmup, iters, &rng) : NAN;
            }
        double med[NSIDES];
        for (int s = 0; s < NSIDES; s++)
            med[s] = bench_median(samples + s * o->rounds, o->rounds);
        if (rank == 0)
            printf("  %10zu %10.2f %14.2f %14.2f %12.2f %14.2f %12.2f %14.2f %12.2f\n", r.block,
                   med[0] * 1e6, med[1] * 1e6, med[2] * 1e6, med[1] / med[2], med[3] * 1e6,
                   med[1] / med[3], med[4] * 1e6, med[4] / med[2]);
        if (json) {
            fprintf(json, "%s  {\"bytes\": %zu", first ? "" : ",\n", r.block);
            for (int s = 0; s < NSIDES; s++) {
                if (!side_wanted(o, s))
                    continue;
                fprintf(json, ", \"%s_us\": %.4f, \"%s_samples_us\": [", side_names[s], med[s] * 1e6,
                        side_names[s]);
                for (int round = 0; round < o->rounds; round++)
                    fprintf(json, "%s%.4f", round ? ", " : "", samples[s * o->rounds + round] * 1e6);
                fputc(']', json);
            }
            fputc('}', json);
            first = 0;
        }
        free(samples);
        bench_row_free(&r);
        if (o->factor <= 1)
            break;
    }
    if (json) {
        fputs("\n]}\n", json);
        fclose(json);
    }
}
