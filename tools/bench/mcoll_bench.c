/* mcoll-bench: the host MPI's collectives (PMPI_*) against mcoll's (MPI_*, which mcoll
 * intercepts when preloaded), timed in one job, alternating, in the nccl-tests style.
 *
 * Sizes ("bytes"): the per-rank block for allgather(v), gather(v), scatter(v),
 * alltoall(v) and reduce_scatter(_block) -- what one rank contributes to, or receives
 * from, one peer; the whole buffer for bcast, reduce, allreduce, scan and exscan.
 * "total" is the size of the largest buffer on a rank (n blocks, or the whole buffer);
 * algorithm bandwidth is total / time, bus bandwidth applies the nccl-tests factor.
 * Reductions sum floats, so their sizes are rounded down to a multiple of 4 bytes.
 *
 * Each round runs a native and an mcoll block (which goes first alternates); a block is
 * warm-up calls, a barrier, then the timed calls. A round's time per call is the
 * maximum over ranks; a row reports the median over rounds.
 *
 * With -A a,b the two sides are mcoll's algorithms a and b of the one collective
 * (set through mcoll_set_algorithm before each block), e.g. tiled against untiled
 * alltoall; the columns keep their names, "native" standing for a. */
#include <ctype.h>
#include "bench.h"

#include <dlfcn.h>
#include <errno.h>
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
static double time_block(const struct mpi_api *api, const struct row *r, int warmup, int iters)
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
        double t = time_block(api, r, 0, n);
        if (t * n >= o->round_seconds / 4 || n >= o->max_iters)
            return fmin(t, time_block(api, r, 0, n));
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

/* memcpy GB/s by size, measured once per size in a job. */
struct memcpy_rates {
    int n, cap;
    size_t *bytes;
    double *gbs;
};

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

static double memcpy_gbs(struct memcpy_rates *mr, size_t bytes, const struct options *o,
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
    res->coll = r->name;
    res->bytes = r->block;
    res->total = r->total;
    res->count = r->count;
    res->iters = iters;
    res->warmup = warmup;
    res->busbw_factor = r->busbw_factor;
    res->native = bench_median(res->native_samples, o->rounds);
    res->mcoll = bench_median(res->mcoll_samples, o->rounds);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: mcoll-bench [-b min] [-e max] [-f factor] [-n iters] [-w warmup]\n"
            "                   [-r rounds] [-c] [-C colls] [-R root] [-o file.json]\n"
            "                   [-T block_ms] [-N max_iters] [-M max_buffer] [-A alg_a,alg_b] [-F|-X]\n"
            "                   [-m back2back|cold|latency|nbc|idle|tnbc|calibrate|burst|arrival] [-D delays] [-K calls] [-I s] [-W n] [-a] [-P]\n"
            "  -b, -e   size sweep in bytes, suffixes K M G (default 8 .. 16M)\n"
            "  -f       size factor (default 2)\n"
            "  -n       timed calls per block (default: adapted to -T, at most -N)\n"
            "  -w       warm-up calls per block (default iters/10)\n"
            "  -r       rounds, each one native and one mcoll block (default 9)\n"
            "  -c       check the results of every block, abort on a mismatch\n"
            "  -C       comma list of collectives, or all (default barrier,bcast)\n"
            "  -R       root of the rooted collectives (default 0)\n"
            "  -o       write the results as JSON\n"
            "  -T       milliseconds per block when adapting -n (default 2)\n"
            "  -N       most calls per block when adapting (default 10000)\n"
            "  -M       skip sizes whose largest buffer exceeds this (default 256M)\n"
            "  -A       mcoll's algorithm alg_a (the native columns) against alg_b (the\n"
            "           mcoll columns), for one collective (-C); arrival mode: those two\n"
            "           sides alone (e.g. -A fixed_leader,first_arrival)\n"
            "           (inter.NAME: its algorithm between nodes, e.g. -A inter.direct,inter.grid_rsend)\n"
            "  -V       NAME=a,b: mcoll with MCOLL_NAME=a (the native columns) against b\n"
            "           (ALG_<COLL>=a,b: that collective's algorithm, e.g. the barrier between\n"
            "           latency mode's calls: -V ALG_BARRIER=counter,dissemination)\n"
            "  -F       each round also times every mcoll algorithm forced (back2back and\n"
            "           latency), the round's blocks in an order shuffled per round: the\n"
            "           fastest and default/fastest per row\n"
            "  -X       -F over the algorithms between nodes (e.g. alltoall's direct and\n"
            "           grid_rsend), each one's median printed per row\n"
            "  -m       back2back (default): warm calls timed as a block; cold: each of\n"
            "           the first -K calls on a fresh communicator (MPI_Comm_dup), and\n"
            "           its first barrier (set-up); latency: a barrier after every call,\n"
            "           the calls alone timed, slowest rank's average (OSU's convention)\n"
            "           nbc: per side the blocking call, I<coll> + wait, a busy loop as\n"
            "           long alone and between I<coll> and wait (overlap %%, OSU's way),\n"
            "           persistent start + wait (MPI 4, MPIX); idle: -I s asleep with nothing\n"
            "           pending (process CPU time), then -r rounds of a busy loop;\n"
            "           tnbc: blocking alltoall/bcast of -e bytes, then unrelated (CURC)\n"
            "           and/or consuming (CRC) computation; host, T-NBC off and on\n"
            "           calibrate (also --calibrate): the performance model's machine\n"
            "           file (-o): ping-pong per level, flag hand-offs, memcpy, CMA,\n"
            "           1..n concurrent copiers (tools/bench/bench_calibrate.c)\n"
            "           burst: -K MPI_I<coll> in flight on one communicator, then\n"
            "           Waitall; host, mcoll one call after the other, side by side\n"
            "           arrival: bcast after per-rank delays (-D), timed from the last\n"
            "           arrival; host, mcoll fixed leader, first_arrival, push\n"
            "  -a       nbc mode: a block's time is its calls' average (OSU's), not median\n"
            "  -P       nbc mode: no persistent block (start + wait)\n"
            "  -K       cold mode: calls timed per fresh communicator (default 100);\n"
            "           burst mode: calls in flight (at most 64)\n"
            "  -D       arrival mode: random:US (per rank and call, uniform) or\n"
            "           late:RANK:US (default random:100)\n"
            "  -I       idle mode: seconds asleep (default 10)\n"
            "  -W       idle mode: busy-loop iterations per round (default 2^25)\n"
            "collectives:");
    for (int i = 0; i < BENCH_NCOLLS; i++)
        fprintf(stderr, " %s", bench_coll_name(i));
    fputc('\n', stderr);
}

static bool parse_bytes(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    double unit = 1;
    switch (*end) {
    case 'k': case 'K': unit = 1024.0; end++; break;
    case 'm': case 'M': unit = 1024.0 * 1024; end++; break;
    case 'g': case 'G': unit = 1024.0 * 1024 * 1024; end++; break;
    default: break;
    }
    if (errno || end == s || *end || v < 0)
        return false;
    *out = (size_t)(v * unit);
    return true;
}

static bool parse_colls(const char *list, bool want[BENCH_NCOLLS])
{
    bool all = strcmp(list, "all") == 0;
    for (int i = 0; i < BENCH_NCOLLS; i++)
        want[i] = all;
    if (all)
        return true;
    char *copy = strdup(list), *save = NULL;
    bool ok = copy != NULL;
    for (char *name = ok ? strtok_r(copy, ",", &save) : NULL; name && ok;
         name = strtok_r(NULL, ",", &save)) {
        int i = bench_coll_index(name);
        if (i < 0)
            fprintf(stderr, "mcoll-bench: unknown collective '%s'\n", name);
        else
            want[i] = true;
        ok = i >= 0;
    }
    free(copy);
    return ok;
}

static bool parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.min_bytes = 8, .max_bytes = 16 << 20, .max_buffer = 256 << 20,
                          .factor = 2, .warmup = -1, .rounds = 9, .max_iters = 10000,
                          .round_seconds = 2e-3, .cold_calls = 100, .idle_seconds = 10,
                          .compute_work = 1L << 25};
    parse_colls("barrier,bcast", o->want);
    static char calibrate[] = "-mcalibrate"; /* --calibrate, the long name of -m calibrate */
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--calibrate") == 0)
            argv[i] = calibrate;
    int opt;
    bool ok = true;
    while (ok && (opt = getopt(argc, argv, "b:e:f:n:w:r:cC:R:o:T:N:M:A:V:m:K:I:W:D:aPFXh")) != -1) {
        switch (opt) {
        case 'b': ok = parse_bytes(optarg, &o->min_bytes); break;
        case 'e': ok = parse_bytes(optarg, &o->max_bytes); break;
        case 'M': ok = parse_bytes(optarg, &o->max_buffer); break;
        case 'f': o->factor = atof(optarg); ok = o->factor > 1; break;
        case 'n': o->iters = atoi(optarg); ok = o->iters > 0; break;
        case 'w': o->warmup = atoi(optarg); ok = o->warmup >= 0; break;
        case 'r': o->rounds = atoi(optarg); ok = o->rounds > 0; break;
        case 'N': o->max_iters = atoi(optarg); ok = o->max_iters > 0; break;
        case 'T': o->round_seconds = atof(optarg) / 1e3; ok = o->round_seconds > 0; break;
        case 'c': o->check = true; break;
        case 'a': o->nbc_mean = true; break;
        case 'P': o->no_persistent = true; break;
        case 'C': ok = parse_colls(optarg, o->want); break;
        case 'R': o->root = atoi(optarg); break;
        case 'o': o->json_path = optarg; break;
        case 'K': o->cold_calls = atoi(optarg); ok = o->cold_calls > 0; break;
        case 'D': o->arrival = optarg; break;
        case 'I': o->idle_seconds = atof(optarg); ok = o->idle_seconds > 0; break;
        case 'W': o->compute_work = atol(optarg); ok = o->compute_work > 0; break;
        case 'm':
            if (strcmp(optarg, "back2back") == 0)
                o->mode = MODE_BACK_TO_BACK;
            else if (strcmp(optarg, "cold") == 0)
                o->mode = MODE_COLD;
            else if (strcmp(optarg, "latency") == 0)
                o->mode = MODE_LATENCY;
            else if (strcmp(optarg, "nbc") == 0)
                o->mode = MODE_NBC;
            else if (strcmp(optarg, "idle") == 0)
                o->mode = MODE_IDLE;
            else if (strcmp(optarg, "tnbc") == 0)
                o->mode = MODE_TNBC;
            else if (strcmp(optarg, "calibrate") == 0)
                o->mode = MODE_CALIBRATE;
            else if (strcmp(optarg, "burst") == 0)
                o->mode = MODE_BURST;
            else if (strcmp(optarg, "arrival") == 0)
                o->mode = MODE_ARRIVAL;
            else
                ok = false;
            break;
        case 'F':
            o->forced_sweep = true;
            break;
        case 'X':
            o->forced_sweep = o->forced_inter = true;
            break;
        case 'A': {
            char *comma = strchr(optarg, ',');
            ok = comma && comma != optarg && comma[1];
            if (ok) {
                *comma = '\0';
                o->versus[0] = optarg;
                o->versus[1] = comma + 1;
            }
            break;
        }
        case 'V': { /* NAME=a,b */
            char *eq = strchr(optarg, '='), *comma = eq ? strchr(eq, ',') : NULL;
            ok = eq && eq != optarg && comma && comma != eq + 1 && comma[1];
            if (ok) {
                *eq = *comma = '\0';
                o->vary_param = optarg;
                o->vary[0] = eq + 1;
                o->vary[1] = comma + 1;
            }
            break;
        }
        default: ok = false; break;
        }
    }
    return ok && optind == argc && o->min_bytes <= o->max_bytes;
}

static const char *flavour_of(const char *mpi_version)
{
    if (strstr(mpi_version, "Open MPI"))
        return "openmpi";
    if (strstr(mpi_version, "MPICH"))
        return "mpich";
    return "unknown";
}

static void run_info_init(struct run_info *ri, int argc, char **argv, const char *mpi_version,
                          int nprocs)
{
    *ri = (struct run_info){.argc = argc, .argv = argv, .mpi_version = mpi_version,
                            .flavour = flavour_of(mpi_version), .nprocs = nprocs};
    /* Without mcoll preloaded the symbol is absent and MPI_* is the host MPI. */
    const char *(*version)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "mcoll_version");
    ri->mcoll_version = version ? version() : NULL;
    ri->progress_thread = getenv("MCOLL_PROGRESS_THREAD");
    if (gethostname(ri->hostname, sizeof ri->hostname) != 0)
        strcpy(ri->hostname, "unknown");
    ri->hostname[sizeof ri->hostname - 1] = '\0';
    time_t t = time(NULL);
    strftime(ri->date, sizeof ri->date, "%Y-%m-%dT%H:%M:%S%z", localtime(&t));
}

static size_t next_size(size_t bytes, double factor)
{
    size_t next = (size_t)((double)bytes * factor);
    return next > bytes ? next : bytes + 1;
}

static struct result *append_result(struct result **res, int *n, int *cap)
{
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        *res = realloc(*res, sizeof **res * (size_t)*cap);
        if (!*res)
            bench_die(MPI_COMM_WORLD, "out of memory");
    }
    (*res)[*n] = (struct result){0};
    return &(*res)[(*n)++];
}

/* The last words before MPI_Finalize: the cluster benchmark (bench/hosts.sh) takes a job
 * that printed them as finished even if the host MPI then hangs in its finalize (MPICH
 * over UCX's TCP transport does, natively too: openucx/ucx#8738). */
static void finish(int rank)
{
    if (rank == 0) {
        printf("# mcoll-bench: done\n");
        fflush(stdout);
    }
    MPI_Finalize();
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm comm = MPI_COMM_WORLD;
    int rank, nprocs;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &nprocs);

    struct options o;
    if (!parse_options(argc, argv, &o) || o.root < 0 || o.root >= nprocs) {
        if (rank == 0)
            usage();
        MPI_Finalize();
        return 2;
    }
    if (rank == 0 && o.rounds < 7)
        fprintf(stderr, "mcoll-bench: warning: %d rounds; medians want at least 7\n",
                o.rounds);

    char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    PMPI_Get_library_version(mpi_version, &len);
    struct run_info ri;
    run_info_init(&ri, argc, argv, mpi_version, nprocs);
    if (rank == 0)
        bench_print_header(&ri, &o);
    if (o.mode == MODE_IDLE || o.mode == MODE_CALIBRATE) {
        (o.mode == MODE_IDLE ? bench_idle : bench_calibrate)(&ri, &o, comm);
        finish(rank);
        return 0;
    }
    if (o.mode == MODE_TNBC || o.mode == MODE_BURST || o.mode == MODE_ARRIVAL) {
        (o.mode == MODE_TNBC    ? bench_tnbc
         : o.mode == MODE_BURST ? bench_burst
                                : bench_arrival)(&ri, &o, comm);
        finish(rank);
        return 0;
    }

    struct result *results = NULL;
    int nres = 0, cap = 0;
    struct memcpy_rates rates = {0};
    for (int c = 0; c < BENCH_NCOLLS; c++) {
        if (!o.want[c])
            continue;
        size_t last_block = SIZE_MAX;
        for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes = next_size(bytes, o.factor)) {
            struct row r;
            if (!bench_row_init(&r, c, bytes, comm, o.root) || r.block == last_block ||
                r.total > o.max_buffer)
                continue;
            last_block = r.block;
            struct result *res = append_result(&results, &nres, &cap);
            if (r.total)
                res->memcpy_gbs = memcpy_gbs(&rates, r.total, &o, comm, rank);
            bench_row_alloc(&r, o.check);
            if (o.mode == MODE_COLD)
                bench_cold_row(&r, &o, res);
            else if (o.mode == MODE_LATENCY)
                bench_latency_row(&r, &o, res);
            else if (o.mode == MODE_NBC)
                bench_nbc_row(&r, &o, res);
            else
                bench_alternating_row(&r, &o, res, time_block);
            bench_row_free(&r);
            if (rank == 0)
                bench_print_result(res);
            if (rank == 0 && o.json_path)
                bench_write_json(o.json_path, &ri, &o, results, nres, false);
            if (r.total == 0) /* barrier: one row */
                break;
        }
    }
    if (rank == 0 && o.json_path)
        bench_write_json(o.json_path, &ri, &o, results, nres, true);

    for (int i = 0; i < nres; i++) {
        free(results[i].native_samples);
        free(results[i].mcoll_samples);
        free(results[i].native_per_call);
        free(results[i].mcoll_per_call);
    }
    free(results);
    free(rates.bytes);
    free(rates.gbs);
    finish(rank);
    return 0;
}
