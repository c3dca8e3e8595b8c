/* mcoll-bench's rows: the clock and medians, how many calls a block times, each side's
 * calls (native, mcoll, or a forced algorithm), memcpy's rate for the table, the
 * result check, and the alternating rounds of a row (-A and -F: forced algorithms). */
#include <ctype.h>
#include "bench.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double *bench_alloc_doubles(int n)
{
    double *v = malloc(sizeof(double) * (size_t)n);
    if (!v)
        bench_die(MPI_COMM_WORLD, "out of memory");
    return v;
}

double bench_median(const double *v, int n)
{
    double *s = bench_alloc_doubles(n);
    memcpy(s, v, sizeof(double) * (size_t)n);
    for (int i = 1; i < n; i++) /* rounds are few: insertion sort */
        for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
            double t = s[j];
            s[j] = s[j - 1];
            s[j - 1] = t;
        }
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

/* Seconds per call of `iters` calls after `warmup` calls, the slowest rank's. The
 * block starts at a barrier, and how far apart the ranks leave it counts in the
 * block's time: MPI_Barrier, which is mcoll's when loaded, because MPICH's own
 * lets ranks leave milliseconds apart when oversubscribed. Both sides start and
 * end alike. */
double bench_time_block(const struct mpi_api *api, const struct row *r, int warmup, int iters)
{
    for (int i = 0; i < warmup; i++)
        bench_run(api, r);
    MPI_Barrier(r->comm);
    double start = bench_now();
    for (int i = 0; i < iters; i++)
        bench_run(api, r);
    double per_call = (bench_now() - start) / iters;
    /* mcoll's too, when loaded: in MPICH's own, ranks done early would spin and hold
     * the cores that the ranks still timing need (oversubscribed runs). */
    MPI_Allreduce(MPI_IN_PLACE, &per_call, 1, MPI_DOUBLE, MPI_MAX, r->comm);
    return per_call;
}

/* The API of side 0 ("native") or 1 ("mcoll"); with -A, mcoll set to that side's
 * algorithm first (the same on every rank). */
const struct mpi_api *bench_side_api(int side, const struct row *r, const struct options *o)
{
    if (o->vary_param && !strncmp(o->vary_param, "ALG_", 4)) {
        /* ALG_<COLL>=a,b: that collective's algorithm forced per side (e.g. the barrier
         * between the calls of another collective in latency mode) */
        static int (*set_alg)(const char *, const char *);
        if (!set_alg)
            set_alg = (int (*)(const char *, const char *))dlsym(RTLD_DEFAULT, "mcoll_set_algorithm");
        char coll[64];
        snprintf(coll, sizeof coll, "%s", o->vary_param + 4);
        for (char *p = coll; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        if (!set_alg || set_alg(coll, o->vary[side]) != 0)
            bench_usage_exit("-V ALG_<COLL>: mcoll not loaded, or no such algorithm of that collective");
        return &bench_mcoll_api;
    }
    if (o->vary_param) {
        static int (*set_param)(const char *, const char *);
        if (!set_param)
            set_param = (int (*)(const char *, const char *))dlsym(RTLD_DEFAULT, "mcoll_set_param");
        if (!set_param || set_param(o->vary_param, o->vary[side]) != 0)
            bench_usage_exit("-V: mcoll not loaded, or not a parameter it can change while running");
        return &bench_mcoll_api;
    }
    if (!o->versus[0])
        return side == 0 ? &bench_native_api : &bench_mcoll_api;
    static int (*set_algorithm)(const char *, const char *);
    if (!set_algorithm)
        set_algorithm = (int (*)(const char *, const char *))dlsym(RTLD_DEFAULT, "mcoll_set_algorithm");
    /* "inter.NAME": the collective's algorithm between nodes (<coll>.inter) */
    const char *alg = o->versus[side];
    char coll[64];
    snprintf(coll, sizeof coll, "%s%s", r->name, strncmp(alg, "inter.", 6) ? "" : ".inter");
    if (!strncmp(alg, "inter.", 6))
        alg += 6;
    if (!set_algorithm || set_algorithm(coll, alg) != 0)
        bench_usage_exit("-A: mcoll not loaded, or no such algorithm of this collective");
    return &bench_mcoll_api;
}

/* Per-call time, over blocks of 4x more calls until one is long enough to trust; the
 * last block runs twice, so that one preempted block cannot shrink the count. */
static double probe_call_seconds(const struct mpi_api *api, const struct row *r,
                                 const struct options *o)
{
    for (int n = 1;; n *= 4) {
        double t = bench_time_block(api, r, 0, n);
        if (t * n >= o->round_seconds / 4 || n >= o->max_iters)
            return fmin(t, bench_time_block(api, r, 0, n));
    }
}

/* The same on every rank, as the probed times are maxima over ranks. The faster side
 * sets the count; a much slower side may not stretch its blocks past 4x the target. */
enum { MIN_ITERS = 8 };

int bench_choose_iters(const struct row *r, const struct options *o)
{
    if (o->iters > 0)
        return o->iters;
    double t_native = probe_call_seconds(bench_side_api(0, r, o), r, o);
    double t_mcoll = probe_call_seconds(bench_side_api(1, r, o), r, o);
    double fast = fmax(fmin(t_native, t_mcoll), 1e-9);
    double slow = fmax(fmax(t_native, t_mcoll), 1e-9);
    double n = fmin(ceil(o->round_seconds / fast), ceil(4 * o->round_seconds / slow));
    /* A few calls at least, so that the start of a block weighs little; unless the
     * slow side would then take over half a second per block. */
    n = fmax(n, fmin(MIN_ITERS, floor(0.5 / slow)));
    n = fmin(n, o->max_iters);
    return n < 1 ? 1 : (int)n;
}

/* Through a volatile pointer, so that the compiler keeps copies nobody reads. */
static void *(*volatile copy_bytes)(void *, const void *, size_t) = memcpy;

/* Median seconds per single-thread memcpy of `bytes`. */
static double memcpy_seconds(size_t bytes, const struct options *o)
{
    uint8_t *src = bench_alloc_pages(bytes), *dst = bench_alloc_pages(bytes);
    memset(src, 1, bytes);
    memset(dst, 0, bytes);
    double start = bench_now();
    copy_bytes(dst, src, bytes);
    double once = fmax(bench_now() - start, 1e-9);
    int reps = (int)fmin(fmax(ceil(o->round_seconds / 2 / once), 1), 1e6);
    double *samples = bench_alloc_doubles(o->rounds);
    for (int k = 0; k < o->rounds; k++) {
        start = bench_now();
        for (int i = 0; i < reps; i++)
            copy_bytes(dst, src, bytes);
        samples[k] = (bench_now() - start) / reps;
    }
    double m = bench_median(samples, o->rounds);
    free(samples);
    free(src);
    free(dst);
    return m;
}

/* Collective: rank 0 measures while the others sleep rather than spin in MPI, so that
 * it has a core to itself. The rate is only meaningful on rank 0. */
void bench_sleepy_barrier(MPI_Comm comm)
{
    MPI_Request req;
    PMPI_Ibarrier(comm, &req);
    for (int done = 0; !done;) {
        PMPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (!done)
            nanosleep(&(struct timespec){0, 200000}, NULL);
    }
}

double bench_memcpy_gbs(struct memcpy_rates *mr, size_t bytes, const struct options *o,
                        MPI_Comm comm, int rank)
{
    for (int i = 0; i < mr->n; i++)
        if (mr->bytes[i] == bytes)
            return mr->gbs[i];
    if (mr->n == mr->cap) {
        mr->cap = mr->cap ? 2 * mr->cap : 32;
        mr->bytes = realloc(mr->bytes, sizeof *mr->bytes * (size_t)mr->cap);
        mr->gbs = realloc(mr->gbs, sizeof *mr->gbs * (size_t)mr->cap);
        if (!mr->bytes || !mr->gbs)
            bench_die(comm, "out of memory");
    }
    double gbs = rank == 0 ? bytes / memcpy_seconds(bytes, o) / 1e9 : 0;
    bench_sleepy_barrier(comm);
    mr->bytes[mr->n] = bytes;
    mr->gbs[mr->n++] = gbs;
    return gbs;
}

void bench_check_block(const struct mpi_api *api, const struct row *r)
{
    long wrong = bench_check_result(r, api->label);
    PMPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG, MPI_SUM, r->comm);
    if (wrong) {
        if (r->rank == 0)
            fprintf(stderr, "mcoll-bench: %s %s %zu B: %ld wrong elements in all\n",
                    api->label, r->name, r->block, wrong);
        bench_die(r->comm, "aborting on wrong results");
    }
}

/* -F: every algorithm of mcoll forced in turn, a block each per round, beside the
 * default's block: a wrong default choice shows as a number. */
static const char *(*algorithm_name)(const char *, int);
static int (*set_algorithm_fn)(const char *, const char *);

static void forced_begin(const struct row *r, const struct options *o, struct result *res,
                         double **samples)
{
    if (!algorithm_name) {
        algorithm_name = (const char *(*)(const char *, int))dlsym(RTLD_DEFAULT, "mcoll_algorithm_name");
        set_algorithm_fn = (int (*)(const char *, const char *))dlsym(RTLD_DEFAULT, "mcoll_set_algorithm");
    }
    if (!algorithm_name || !set_algorithm_fn)
        bench_usage_exit("-F: mcoll not loaded");
    char coll[64]; /* -X: the collective's algorithms between nodes */
    snprintf(coll, sizeof coll, "%s%s", r->name, o->forced_inter ? ".inter" : "");
    int n = 0;
    for (const char *name; n < 8 && (name = algorithm_name(coll, n)); n++) {
        res->forced_alg[n] = name;
        samples[n] = bench_alloc_doubles(o->rounds);
    }
    res->forced_n = n;
    res->forced_inter = o->forced_inter;
}

static double forced_block(const struct row *r, const struct options *o, const char *alg,
                           bench_block_timer timer, int warmup, int iters)
{
    char coll[64];
    snprintf(coll, sizeof coll, "%s%s", r->name, o->forced_inter ? ".inter" : "");
    set_algorithm_fn(coll, alg); /* the same on every rank, between two calls */
    if (o->check)
        memset(r->recv, 0xA5, r->recv_bytes);
    double t = timer(&bench_mcoll_api, r, warmup, iters);
    if (o->check)
        bench_check_block(&bench_mcoll_api, r);
    set_algorithm_fn(coll, "auto");
    return t;
}

static void forced_end(struct result *res, const struct options *o, double **samples)
{
    res->forced_best = -1;
    for (int a = 0; a < res->forced_n; a++) {
        res->forced[a] = bench_median(samples[a], o->rounds);
        free(samples[a]);
        if (res->forced_best < 0 || res->forced[a] < res->forced[res->forced_best])
            res->forced_best = a;
    }
}

/* The order of round k's blocks: 0 native, 1 mcoll's default, 2.. the forced
 * algorithms (-F). Two blocks: they alternate. More: a shuffle drawn from k alone (the
 * same on every rank), so that no block always follows the same one: a block runs
 * faster after some algorithms than after others (the lines and pages they leave),
 * and a fixed order gave the default a predecessor its forced twin never had. */
static void block_order(int *order, int n, int k)
{
    for (int i = 0; i < n; i++)
        order[i] = i;
    if (n == 2) {
        if (k % 2)
            order[0] = 1, order[1] = 0;
        return;
    }
    uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(k + 1);
    for (int i = n - 1; i > 0; i--) {
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdULL;
        x ^= x >> 33;
        int j = (int)(x % (uint64_t)(i + 1));
        int tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
}

void bench_result_of_row(struct result *res, const struct row *r, int iters, int warmup)
{
    res->coll = r->name;
    res->bytes = r->block;
    res->total = r->total;
    res->count = r->count;
    res->iters = iters;
    res->warmup = warmup;
    res->busbw_factor = r->busbw_factor;
}
/* One row: native and mcoll alternate, `rounds` times each, each a block timed by
 * `timer` (back-to-back or latency mode); with -F the forced algorithms' blocks too,
 * all in an order shuffled per round (block_order); medians. */
void bench_alternating_row(const struct row *r, const struct options *o, struct result *res,
                           bench_block_timer timer)
{
    bench_run(bench_side_api(0, r, o), r); /* first calls set things up: never timed */
    bench_run(bench_side_api(1, r, o), r);
    int iters = bench_choose_iters(r, o);
    int warmup = o->warmup >= 0 ? o->warmup : iters / 10;
    res->native_samples = bench_alloc_doubles(o->rounds);
    res->mcoll_samples = bench_alloc_doubles(o->rounds);
    double *forced_samples[8] = {0};
    if (o->forced_sweep)
        forced_begin(r, o, res, forced_samples);
    int blocks = 2 + res->forced_n, order[10];
    for (int k = 0; k < o->rounds; k++) {
        block_order(order, blocks, k);
        for (int b = 0; b < blocks; b++) {
            int which = order[b];
            if (which >= 2) {
                int a = which - 2;
                forced_samples[a][k] = forced_block(r, o, res->forced_alg[a], timer, warmup, iters);
                continue;
            }
            bool native = which == 0;
            const struct mpi_api *api = bench_side_api(native ? 0 : 1, r, o);
            if (o->check) /* a collective that writes nothing must not pass */
                memset(r->recv, 0xA5, r->recv_bytes);
            double t = timer(api, r, warmup, iters);
            (native ? res->native_samples : res->mcoll_samples)[k] = t;
            if (o->check)
                bench_check_block(api, r);
        }
    }
    forced_end(res, o, forced_samples);
    bench_result_of_row(res, r, iters, warmup);
    res->native = bench_median(res->native_samples, o->rounds);
    res->mcoll = bench_median(res->mcoll_samples, o->rounds);
}
