/* mcoll-bench's non-blocking mode (-m nbc) and idle mode (-m idle).
 *
 * Nbc: per (collective, size) and round, each side (native: PMPI_I<coll> and
 * PMPI_Wait; mcoll: MPI_I<coll> and MPI_Wait, whichever goes first alternating as in
 * the other modes) runs, each a block of the same number of calls with a barrier of
 * that side after every call and only the calls timed (latency mode's convention):
 *   blocking    the blocking call;
 *   post_wait   MPI_I<coll> then MPI_Wait at once ("pure" non-blocking latency);
 *   compute     the busy loop below alone, sized to this round's post_wait;
 *   total       MPI_I<coll>, the same busy loop, MPI_Wait (OSU's overlap loop), and
 *   compute_in  the busy loop's time inside it (compute and total take turns, call
 *               by call, in one block);
 *   start_wait  MPI_Start + MPI_Wait of a persistent request (MPI_<Coll>_init, made
 *               once per block, untimed) -- MPI 4 (MPICH 4) or Open MPI 4.1's MPIX_<Coll>_init.
 * Every block's time is the slowest rank's median per call (-a: average, as OSU); a
 * row reports medians over rounds, and overlap % = 100 (1 - (total - compute) /
 * post_wait) from them.
 * OSU subtracts the compute time measured inside the overlapped loop (compute_in,
 * reported as overlap_osu); this mode's main figure subtracts the loop's time alone,
 * so that a progress thread slowing the computation counts against the overlap.
 *
 * Idle: mcoll's context built by a few collectives, then every rank sleeps -I seconds
 * with nothing pending while its process CPU time (all threads: the MPI's, mcoll's
 * progress thread) is measured; then -r rounds of a fixed busy loop (-W iterations)
 * on every rank at once, the slowest rank's time each. The progress-thread setting is
 * read by mcoll at MPI_Init, so bench/run.sh alternates whole jobs with
 * MCOLL_PROGRESS_THREAD=0 and =1 and compares them. */
#include "bench.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The busy loop: a dependent chain of floating-point operations in registers. It
 * calls nothing (no MPI, no clock) and its work is fixed, so that a loop slowed down
 * (by a progress thread on the same core, say) takes longer. OSU's compute spins on
 * the clock to a wall-time target instead, which would hide that. */
static volatile double compute_sink = 1.0;

static void compute(long iters)
{
    double x = compute_sink;
    for (long i = 0; i < iters; i++)
        x = x * 0.999999 + 1e-6;
    compute_sink = x;
}

/* Iterations per second: the fastest of 5 timings of >= 5 ms each (preempted timings
 * are slower, never faster). Measured once per process. */
static double compute_rate(void)
{
    static double rate;
    if (rate > 0)
        return rate;
    long n = 1 << 14;
    for (;;) {
        double start = bench_now();
        compute(n);
        if (bench_now() - start >= 5e-3)
            break;
        n *= 2;
    }
    for (int k = 0; k < 5; k++) {
        double start = bench_now();
        compute(n);
        rate = fmax(rate, n / fmax(bench_now() - start, 1e-9));
    }
    return rate;
}

/* Iterations for `seconds` of the loop on this rank now: from the calibrated rate,
 * then corrected twice by the median of 5 timings (the rate can drift with the load
 * on the node and the core's clock). Nothing is pending while it runs. */
static long compute_iters_for(double seconds)
{
    long work = lround(seconds * compute_rate());
    for (int pass = 0; pass < 2 && work > 0; pass++) {
        double t[5];
        for (int k = 0; k < 5; k++) {
            double start = bench_now();
            compute(work);
            t[k] = bench_now() - start;
        }
        double measured = bench_median(t, 5);
        if (measured > 0)
            work = lround(work * seconds / measured);
    }
    return work < 1 ? 1 : work;
}

/* Quantities of one side's round, in this order in the sample arrays (Q_PROGRESS: the
 * progress thread's CPU share during the overlapped calls). */
enum { Q_BLOCKING, Q_POST_WAIT, Q_COMPUTE, Q_TOTAL, Q_COMPUTE_IN, Q_START_WAIT, Q_PROGRESS, NQ };

/* CPU time (s) of this process's thread named mcoll-progress (mcoll's progress thread)
 * from its schedstat (ns on a CPU); NAN when there is none. */
static double progress_thread_cpu(void)
{
    static char path[320];
    if (!path[0]) {
        DIR *dir = opendir("/proc/self/task");
        if (!dir)
            return NAN;
        for (struct dirent *e; (e = readdir(dir)) != NULL;) {
            char comm_path[320], name[32] = "";
            snprintf(comm_path, sizeof comm_path, "/proc/self/task/%s/comm", e->d_name);
            FILE *f = fopen(comm_path, "r");
            if (!f)
                continue;
            if (fgets(name, sizeof name, f) && strncmp(name, "mcoll-progress", 14) == 0)
                snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
            fclose(f);
            if (path[0])
                break;
        }
        closedir(dir);
        if (!path[0])
            return NAN;
    }
    FILE *f = fopen(path, "r");
    unsigned long long ns = 0;
    int got = f ? fscanf(f, "%llu", &ns) : 0;
    if (f)
        fclose(f);
    if (got != 1) {
        path[0] = '\0'; /* the thread stopped: look again next time */
        return NAN;
    }
    return 1e-9 * (double)ns;
}

/* Per-call times of one block on this rank, and their summary: the median (default:
 * one preempted call on a loaded node moves an average by its whole slice, and the
 * overlap is a difference of such times) or, with -a, the average (OSU's). */
struct calls {
    double *t;
    int n;
};

static double calls_summary(const struct calls *c, const struct options *o)
{
    if (o->nbc_mean) {
        double sum = 0;
        for (int i = 0; i < c->n; i++)
            sum += c->t[i];
        return sum / c->n;
    }
    return bench_median(c->t, c->n);
}

static void blocking_block(const struct mpi_api *api, const struct row *r, int warmup,
                             struct calls *c)
{
    for (int i = 0; i < warmup; i++) {
        bench_run(api, r);
        api->barrier(r->comm);
    }
    for (int i = 0; i < c->n; i++) {
        double start = bench_now();
        bench_run(api, r);
        c->t[i] = bench_now() - start;
        api->barrier(r->comm);
    }
}

static void post_wait_block(const struct mpi_api *api, const struct row *r, int warmup,
                            struct calls *c)
{
    MPI_Request req;
    for (int i = 0; i < warmup; i++) {
        bench_post(api, r, &req);
        bench_wait(api, r, &req);
        api->barrier(r->comm);
    }
    for (int i = 0; i < c->n; i++) {
        double start = bench_now();
        bench_post(api, r, &req);
        bench_wait(api, r, &req);
        c->t[i] = bench_now() - start;
        api->barrier(r->comm);
    }
}

/* The loop alone (c[0]), post + loop + wait (c[1]) and the loop inside it (c[2]). The
 * loop alone and the overlapped call take turns, so that a change of load on the
 * node hits both alike. */
static double overlap_blocks(const struct mpi_api *api, const struct row *r, int warmup,
                             long work, struct calls c[3])
{
    MPI_Request req;
    for (int i = 0; i < warmup; i++) {
        bench_post(api, r, &req);
        compute(work);
        bench_wait(api, r, &req);
        api->barrier(r->comm);
    }
    /* The progress thread sleeps while nothing is pending (the loop alone, the
     * barriers), so its CPU time over the block is its time during the calls. */
    double cpu0 = progress_thread_cpu();
    for (int i = 0; i < c[0].n; i++) {
        double start = bench_now();
        compute(work);
        c[0].t[i] = bench_now() - start;
        api->barrier(r->comm);
        start = bench_now();
        bench_post(api, r, &req);
        double loop = bench_now();
        compute(work);
        c[2].t[i] = bench_now() - loop;
        bench_wait(api, r, &req);
        c[1].t[i] = bench_now() - start;
        api->barrier(r->comm);
    }
    double calls = 0;
    for (int i = 0; i < c[1].n; i++)
        calls += c[1].t[i];
    return 100 * (progress_thread_cpu() - cpu0) / calls;
}

/* MPICH 4.0's own persistent scatter fails at 3 ranks or more: MPI_Wait of its second
 * start reports "Invalid communicator" from its schedule (a standalone program of
 * MPI_Scatter_init and a few starts does too; mcoll's runs). The host's side skips that
 * block there, which reports no s+w rather than ending the job. */
static bool host_persistent_broken(const struct mpi_api *api, const struct row *r)
{
    static int mpich40 = -1;
    if (mpich40 < 0) {
        char version[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0, major = 0, minor = 0;
        PMPI_Get_library_version(version, &len);
        const char *at = strstr(version, "MPICH Version:");
        mpich40 = at && sscanf(at, "MPICH Version: %d.%d", &major, &minor) == 2 && major == 4 && minor == 0;
    }
    return mpich40 && api == &bench_native_api && !strcmp(r->name, "scatter") && r->nprocs >= 3;
}

/* MPI_Start + MPI_Wait; false without persistent collectives. Under ASan, MPICH
 * 4.0.2's own MPI_Allgather_init reads past the end of a buffer (a standalone 8-byte
 * allgather does too: not this program's); the results are right (-c). */
static bool start_wait_block(const struct mpi_api *api, const struct row *r, int warmup,
                             struct calls *c)
{
#if BENCH_PERSISTENT
    if (host_persistent_broken(api, r))
        return false;
    MPI_Request req;
    bench_persistent_init(api, r, &req);
    for (int i = 0; i < warmup + 1; i++) { /* + 1: a first start may set things up */
        api->start(&req);
        bench_wait(api, r, &req);
        api->barrier(r->comm);
    }
    for (int i = 0; i < c->n; i++) {
        double start = bench_now();
        if (api->start(&req) != MPI_SUCCESS)
            bench_die(r->comm, "MPI_Start failed");
        bench_wait(api, r, &req);
        c->t[i] = bench_now() - start;
        api->barrier(r->comm);
    }
    api->request_free(&req);
    return true;
#else
    (void)api, (void)r, (void)warmup, (void)c;
    return false;
#endif
}

static void poison(const struct row *r, const struct options *o)
{
    if (o->check) /* a collective that writes nothing must not pass */
        memset(r->recv, 0xA5, r->recv_bytes);
}

static void check(const struct mpi_api *api, const struct row *r, const struct options *o)
{
    if (o->check)
        bench_check_block(api, r);
}

/* One side's round: out[NQ], each the slowest rank's summary per call. */
static void nbc_round(const struct mpi_api *api, const struct row *r, const struct options *o,
                      int warmup, int iters, double out[NQ])
{
    struct calls c[NQ];
    double *store = bench_alloc_doubles(NQ * iters);
    for (int q = 0; q < NQ; q++)
        c[q] = (struct calls){store + q * iters, iters};
    double v[NQ];
    poison(r, o);
    blocking_block(api, r, warmup, &c[Q_BLOCKING]);
    check(api, r, o);
    poison(r, o);
    post_wait_block(api, r, warmup, &c[Q_POST_WAIT]);
    check(api, r, o);
    v[Q_BLOCKING] = calls_summary(&c[Q_BLOCKING], o);
    v[Q_POST_WAIT] = calls_summary(&c[Q_POST_WAIT], o);
    /* The same work on every rank: sized to the slowest rank's post + wait. */
    PMPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_MAX, r->comm);
    long work = compute_iters_for(v[Q_POST_WAIT]);
    poison(r, o);
    double progress = overlap_blocks(api, r, warmup, work, &c[Q_COMPUTE]); /* Q_COMPUTE, Q_TOTAL, Q_COMPUTE_IN */
    check(api, r, o);
    poison(r, o);
    bool persistent = !o->no_persistent && start_wait_block(api, r, warmup, &c[Q_START_WAIT]);
    if (persistent)
        check(api, r, o);
    for (int q = Q_COMPUTE; q < Q_PROGRESS; q++)
        v[q] = q == Q_START_WAIT && !persistent ? NAN : calls_summary(&c[q], o);
    v[Q_PROGRESS] = isnan(progress) ? -1 : progress; /* (MAX over ranks: -1 is none) */
    PMPI_Allreduce(MPI_IN_PLACE, v + Q_COMPUTE, NQ - Q_COMPUTE, MPI_DOUBLE, MPI_MAX, r->comm);
    memcpy(out, v, sizeof v);
    free(store);
}

static double overlap_pct(double total, double compute_time, double pure)
{
    return 100.0 * (1.0 - (total - compute_time) / pure);
}

void bench_nbc_row(const struct row *r, const struct options *o, struct result *res)
{
    compute_rate();
    for (int side = 0; side < 2; side++) { /* first calls set things up: never timed */
        const struct mpi_api *api = bench_side_api(side, r, o);
        MPI_Request req;
        bench_run(api, r);
        bench_post(api, r, &req);
        bench_wait(api, r, &req);
    }
    int iters = bench_choose_iters(r, o);
    int warmup = o->warmup >= 0 ? o->warmup : iters / 10;
    double *samples = bench_alloc_doubles(2 * NQ * o->rounds); /* [side][q][round] */
    for (int k = 0; k < o->rounds; k++) {
        for (int turn = 0; turn < 2; turn++) {
            int side = (turn == 0) == (k % 2 == 0) ? 0 : 1;
            double out[NQ];
            nbc_round(bench_side_api(side, r, o), r, o, warmup, iters, out);
            for (int q = 0; q < NQ; q++)
                samples[(side * NQ + q) * o->rounds + k] = out[q];
        }
    }
    bench_result_of_row(res, r, iters, warmup);
    res->nbc = true;
    res->native_samples = bench_alloc_doubles(o->rounds);
    res->mcoll_samples = bench_alloc_doubles(o->rounds);
    for (int side = 0; side < 2; side++) {
        double m[NQ];
        for (int q = 0; q < NQ; q++)
            m[q] = (BENCH_PERSISTENT && !o->no_persistent) || q != Q_START_WAIT
                       ? bench_median(samples + (side * NQ + q) * o->rounds, o->rounds)
                       : NAN;
        res->blocking[side] = m[Q_BLOCKING];
        res->post_wait[side] = m[Q_POST_WAIT];
        res->compute[side] = m[Q_COMPUTE];
        res->with_compute[side] = m[Q_TOTAL];
        res->compute_in[side] = m[Q_COMPUTE_IN];
        res->start_wait[side] = m[Q_START_WAIT];
        res->overlap[side] = overlap_pct(m[Q_TOTAL], m[Q_COMPUTE], m[Q_POST_WAIT]);
        res->overlap_osu[side] = overlap_pct(m[Q_TOTAL], m[Q_COMPUTE_IN], m[Q_POST_WAIT]);
        res->progress_pct[side] = m[Q_PROGRESS] < 0 ? NAN : m[Q_PROGRESS];
        memcpy(side ? res->mcoll_samples : res->native_samples,
               samples + (side * NQ + Q_POST_WAIT) * o->rounds, sizeof(double) * o->rounds);
    }
    res->native = res->post_wait[0];
    res->mcoll = res->post_wait[1];
    free(samples);
}

static double cpu_seconds(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sleeps until `seconds` have passed (nanosleep may return early on a signal). */
static void sleep_for(double seconds)
{
    double end = bench_now() + seconds;
    for (double left; (left = end - bench_now()) > 0;) {
        struct timespec ts = {(time_t)left, (long)((left - floor(left)) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

static void json_array(FILE *f, const char *key, const double *v, int n, double scale)
{
    fprintf(f, "    \"%s\": [", key);
    for (int i = 0; i < n; i++) {
        fputs(i ? ", " : "", f);
        bench_json_number(f, v[i] * scale);
    }
    fputs("],\n", f);
}

struct idle_result {
    int nprocs, rounds;
    double *per_rank; /* [nprocs][3]: cpu seconds, the main thread's excluded, wall */
    double *compute;  /* [rounds] seconds, slowest rank */
    long work;
};

static void idle_write_json(const char *path, const struct run_info *ri,
                            const struct options *o, const struct idle_result *ir)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "mcoll-bench: cannot write %s\n", tmp);
        return;
    }
    bench_json_head(f, ri, o, true);
    int n = ir->nprocs;
    double *cpu = bench_alloc_doubles(3 * n);
    double max_pct = 0, max_bg = 0;
    for (int i = 0; i < n; i++) {
        double wall = ir->per_rank[3 * i + 2];
        cpu[i] = ir->per_rank[3 * i];
        cpu[n + i] = 100 * ir->per_rank[3 * i] / wall;
        cpu[2 * n + i] = 100 * ir->per_rank[3 * i + 1] / wall;
        max_pct = fmax(max_pct, cpu[n + i]);
        max_bg = fmax(max_bg, cpu[2 * n + i]);
    }
    fputs("  \"idle\": {\n", f);
    fprintf(f, "    \"seconds\": %g,\n", o->idle_seconds);
    json_array(f, "cpu_seconds", cpu, n, 1);
    json_array(f, "cpu_pct", cpu + n, n, 1);
    json_array(f, "background_cpu_pct", cpu + 2 * n, n, 1);
    fputs("    \"max_cpu_pct\": ", f);
    bench_json_number(f, max_pct);
    fputs(",\n    \"max_background_cpu_pct\": ", f);
    bench_json_number(f, max_bg);
    fprintf(f, ",\n    \"compute_work\": %ld,\n", ir->work);
    json_array(f, "compute_samples_ms", ir->compute, ir->rounds, 1e3);
    fputs("    \"compute_ms\": ", f);
    bench_json_number(f, bench_median(ir->compute, ir->rounds) * 1e3);
    fputs("\n  },\n  \"results\": []\n}\n", f);
    free(cpu);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        fprintf(stderr, "mcoll-bench: error writing %s\n", path);
}

void bench_idle(const struct run_info *ri, const struct options *o, MPI_Comm comm)
{
    int rank, nprocs;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &nprocs);
    /* mcoll's context (and whatever it starts with it) built by calls of its own, a
     * non-blocking one completed too; then nothing is pending. */
    float one = 1;
    for (int i = 0; i < 4; i++) {
        MPI_Barrier(comm);
        MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_FLOAT, MPI_SUM, comm);
    }
    MPI_Request req;
    MPI_Ibarrier(comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    PMPI_Barrier(comm);

    double cpu0 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
    double main0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    double wall0 = bench_now();
    sleep_for(o->idle_seconds);
    /* The main thread's interval inside the process's: the difference is the other
     * threads' time, never negative. */
    double main_thread = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - main0;
    double cpu = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    double mine[3] = {cpu, fmax(0, cpu - main_thread), bench_now() - wall0};
    struct idle_result ir = {.nprocs = nprocs, .rounds = o->rounds, .work = o->compute_work};
    ir.per_rank = bench_alloc_doubles(3 * nprocs);
    PMPI_Gather(mine, 3, MPI_DOUBLE, ir.per_rank, 3, MPI_DOUBLE, 0, comm);

    ir.compute = bench_alloc_doubles(o->rounds);
    compute(ir.work / 16); /* warm */
    for (int k = 0; k < o->rounds; k++) {
        PMPI_Barrier(comm);
        double start = bench_now();
        compute(ir.work);
        ir.compute[k] = bench_now() - start;
        PMPI_Allreduce(MPI_IN_PLACE, &ir.compute[k], 1, MPI_DOUBLE, MPI_MAX, comm);
    }
    if (rank == 0) {
        printf("# idle: %g s asleep with nothing pending, process CPU time (all threads)\n",
               o->idle_seconds);
        printf("# %6s %10s %10s %8s %13s\n", "rank", "wall_s", "cpu_s", "cpu_%", "not_main_%");
        for (int i = 0; i < nprocs; i++) {
            const double *p = ir.per_rank + 3 * i;
            printf("  %6d %10.3f %10.6f %8.3f %13.3f\n", i, p[2], p[0], 100 * p[0] / p[2],
                   100 * p[1] / p[2]);
        }
        printf("# compute loop: %ld iterations on every rank at once, slowest rank's ms per "
               "round\n  compute_ms median %.3f, rounds:",
               ir.work, bench_median(ir.compute, o->rounds) * 1e3);
        for (int k = 0; k < o->rounds; k++)
            printf(" %.3f", ir.compute[k] * 1e3);
        printf("\n");
        fflush(stdout);
        if (o->json_path)
            idle_write_json(o->json_path, ri, o, &ir);
    }
    free(ir.per_rank);
    free(ir.compute);
}
