/* mcoll-bench --calibrate (-m calibrate): the machine parameters of the performance
 * model (tools/py/mcoll_model/machine.py documents the JSON), measured here and written
 * as a machine file with -o. Needs no mcoll (run it natively); ranks 0 and 1 do the
 * pair measurements, the others sleep (never spin) until the concurrent-copy curve,
 * where 1..n ranks copy at once.
 *
 *   levels.core / levels.cache  host MPI ping-pong, both ranks pinned to one core / to
 *                               two cores (sched_setaffinity): alpha = half the round
 *                               trip of 8 B, bandwidth from the slope 256 KiB .. 4 MiB
 *   net                         the same ping-pong unpinned: between fake nodes
 *                               (MCOLL_TOPO) mcoll's inter-node phases use this host
 *                               point-to-point; when the job spans several hosts (test
 *                               hosts, a cluster: host names differ), the link
 *                               between rank 0 and the first rank of another host
 *                               instead: ping-pong by size (latency from 8-512 B),
 *                               messages sent back to back by size (the rate: their
 *                               slope from 32 KiB, past a shaped link's burst), an 8 B
 *                               exchange timed as latency mode times a call; the node
 *                               measurements then run on rank 0's host only
 *   node.sync_us                a flag hand-off through a shared cache line, two cores
 *   node.sched_turn_us          the same on one core, yielding while waiting
 *   node.xfer_curve             by size: write a buffer, hand it over, the other core
 *                               copies it out (lines crossing modified, as out of an area)
 *   node.memcpy_GBps etc.       memcpy by size (in cache, beyond), process_vm_readv by
 *                               size (call cost, bandwidth), a reduction's fold
 *   node.cma_pair_slowdown      a 1 MiB read with both ranks reading each other at once,
 *                               against one reading alone
 *   node.mem_GBps               aggregate copy bandwidth with 1..n ranks copying at once
 *
 * Noise: each quantity is -r rounds (at least 7 wanted); inside a round the sizes run
 * forward in even rounds and backward in odd ones, and the pinned levels alternate
 * which goes first, so that a slow phase of the host does not land on one size or one
 * level; a sample more than 3 scaled MADs from the median is rejected and the median
 * of the rest reported (the rejections are counted in the JSON). */
#include "bench.h"

#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum { NPP_SIZES = 9, NCOPY_SIZES = 8, NCMA_SIZES = 7 };
/* The link between hosts by size: denser than pp_sizes around a shaped link's burst
 * (32 KiB) and the host MPIs' eager limits (Open MPI's TCP: 64 KiB). Its points:
 * ping-pong by size, stream by size, the step. */
enum { NLINK_SIZES = 14, LINK_POINTS = 2 * NLINK_SIZES + 1 };
static const size_t link_sizes[NLINK_SIZES] = {8, 64, 512, 2048, 4096, 8192, 16384, 32768,
                                               65536, 131072, 262144, 1 << 20, 2 << 20, 4 << 20};
static const size_t pp_sizes[NPP_SIZES] = {8, 64, 512, 4096, 32768, 262144, 1 << 20,
                                           2 << 20, 4 << 20};
static const size_t copy_sizes[NCOPY_SIZES] = {4096, 32768, 262144, 1 << 20, 4 << 20,
                                               16 << 20, 64 << 20, 128 << 20};
static const size_t cma_sizes[NCMA_SIZES] = {8, 4096, 65536, 262144, 1 << 20, 4 << 20,
                                             16 << 20};
enum { COPIERS_BYTES = 64 << 20 };

struct robust {
    double median;
    int rejected;
};

/* Median of the samples within 3 scaled MADs of their median. */
static struct robust robust_median(const double *v, int n)
{
    double med = bench_median(v, n);
    double *dev = bench_alloc_doubles(n), *kept = bench_alloc_doubles(n);
    for (int i = 0; i < n; i++)
        dev[i] = fabs(v[i] - med);
    double mad = 1.4826 * bench_median(dev, n);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (mad == 0 || dev[i] <= 3 * mad)
            kept[m++] = v[i];
    struct robust r = {bench_median(kept, m), n - m};
    free(dev);
    free(kept);
    return r;
}

/* One sample of point i of a measurement (its repetitions included). */
typedef double (*sample_fn)(void *ctx, int i);

/* The measurement loop every quantity shares: o->rounds samples of each of n points,
 * the points forward in even rounds and backward in odd ones (a slow phase of the host
 * lands on no point in particular); out[i] is point i's robust median, NAN where its
 * samples are NAN (not measured here). */
static void alternate_rounds(const struct options *o, int n, sample_fn sample, void *ctx,
                             double *out, int *rejected)
{
    double *s = bench_alloc_doubles(n * o->rounds);
    for (int k = 0; k < o->rounds; k++)
        for (int j = 0; j < n; j++) {
            int i = k % 2 ? n - 1 - j : j;
            s[i * o->rounds + k] = sample(ctx, i);
        }
    for (int i = 0; i < n; i++) {
        if (isnan(s[i * o->rounds])) {
            out[i] = NAN;
            continue;
        }
        struct robust r = robust_median(s + i * o->rounds, o->rounds);
        out[i] = r.median;
        *rejected += r.rejected;
    }
    free(s);
}

/* The machine's online cpus: mpiexec may have bound each rank to one of them. */
static int ncpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n < CPU_SETSIZE ? (int)n : 1;
}

/* Pins this process to online cpu `which` (-1: back to `saved`, mpiexec's binding). */
static void pin(int which, const cpu_set_t *saved)
{
    if (which < 0) {
        sched_setaffinity(0, sizeof *saved, saved);
        return;
    }
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(which % ncpus(), &one);
    sched_setaffinity(0, sizeof one, &one);
}

/* --- ping-pong over the host MPI between ranks 0 and 1 -------------------------- */

static double pingpong_once(MPI_Comm comm, int rank, char *buf, size_t bytes, int reps)
{
    PMPI_Barrier(comm);
    double start = bench_now();
    for (int i = 0; i < reps; i++) {
        if (rank == 0) {
            PMPI_Send(buf, (int)bytes, MPI_BYTE, 1, 7, comm);
            PMPI_Recv(buf, (int)bytes, MPI_BYTE, 1, 7, comm, MPI_STATUS_IGNORE);
        } else {
            PMPI_Recv(buf, (int)bytes, MPI_BYTE, 0, 7, comm, MPI_STATUS_IGNORE);
            PMPI_Send(buf, (int)bytes, MPI_BYTE, 0, 7, comm);
        }
    }
    double t = (bench_now() - start) / reps / 2;
    PMPI_Bcast(&t, 1, MPI_DOUBLE, 0, comm);
    return t;
}

/* Repetitions that fill about one block (-T), the same on both ranks. */
static int reps_for(double once, const struct options *o)
{
    double n = ceil(o->round_seconds / fmax(2 * once, 1e-9));
    return (int)fmin(fmax(n, 1), o->max_iters);
}

struct pingpong_ctx {
    MPI_Comm pair;
    int rank, cpus, pinned; /* pinned: the level pinned now, -1 none */
    cpu_set_t saved;
    char *buf;
    int reps[3][NPP_SIZES];
};

/* Pins for level lv (0 one core, 1 two cores, 2 unpinned) unless pinned so already. */
static void pin_level(struct pingpong_ctx *c, int lv)
{
    if (c->pinned != lv)
        pin(lv == 0 ? 0 : lv == 1 ? c->rank : -1, &c->saved);
    c->pinned = lv;
}

/* Point p: level p / NPP_SIZES, size p % NPP_SIZES (odd rounds run levels and sizes
 * backward). */
static double pingpong_sample(void *ctx, int p)
{
    struct pingpong_ctx *c = ctx;
    int lv = p / NPP_SIZES, i = p % NPP_SIZES;
    if (lv == 1 && c->cpus < 2)
        return NAN;
    pin_level(c, lv);
    return pingpong_once(c->pair, c->rank, c->buf, pp_sizes[i], c->reps[lv][i]);
}

/* pp[level][size] robust medians, seconds one way. Levels: 0 one core, 1 two cores,
 * 2 unpinned. */
static void measure_pingpong(MPI_Comm pair, int rank, const struct options *o, int cpus,
                             double pp[3][NPP_SIZES], int *rejected)
{
    struct pingpong_ctx c = {.pair = pair, .rank = rank, .cpus = cpus, .pinned = -1};
    sched_getaffinity(0, sizeof c.saved, &c.saved);
    c.buf = bench_alloc_pages(pp_sizes[NPP_SIZES - 1]);
    memset(c.buf, 1, pp_sizes[NPP_SIZES - 1]);
    for (int lv = 0; lv < 3; lv++) {
        if (lv == 1 && cpus < 2)
            continue;
        pin_level(&c, lv);
        for (int i = 0; i < NPP_SIZES; i++) {
            pingpong_once(pair, rank, c.buf, pp_sizes[i], 1); /* warm */
            c.reps[lv][i] = reps_for(pingpong_once(pair, rank, c.buf, pp_sizes[i], 1), o);
        }
    }
    alternate_rounds(o, 3 * NPP_SIZES, pingpong_sample, &c, &pp[0][0], rejected);
    pin(-1, &c.saved);
    free(c.buf);
}

/* Through a volatile pointer, so that the compiler keeps copies nobody reads. */
static void *(*volatile copy_bytes)(void *, const void *, size_t) = memcpy;

/* --- a flag hand-off through shared memory --------------------------------------- */

/* Seconds one way of `reps` round trips on two cache lines (ping, pong) of a window
 * shared by ranks 0 and 1; with yield, a waiting rank gives up its core every poll. */
static double handoff_once(MPI_Comm pair, int rank, volatile uint64_t *ping,
                           volatile uint64_t *pong, int reps, bool yield, uint64_t *seq)
{
    PMPI_Barrier(pair);
    double start = bench_now();
    for (int i = 0; i < reps; i++) {
        uint64_t want = ++*seq;
        if (rank == 0) {
            __atomic_store_n(ping, want, __ATOMIC_RELEASE);
            while (__atomic_load_n(pong, __ATOMIC_ACQUIRE) != want)
                if (yield)
                    sched_yield();
        } else {
            while (__atomic_load_n(ping, __ATOMIC_ACQUIRE) != want)
                if (yield)
                    sched_yield();
            __atomic_store_n(pong, want, __ATOMIC_RELEASE);
        }
    }
    double t = (bench_now() - start) / reps / 2;
    PMPI_Bcast(&t, 1, MPI_DOUBLE, 0, pair);
    return t;
}

enum { NXFER_SIZES = 9 };
static const size_t xfer_sizes[NXFER_SIZES] = {0, 64, 512, 2048, 8192, 32768, 131072, 524288,
                                               2097152};

/* Seconds one way of `reps` round trips in which each side writes `bytes` into a shared
 * buffer, hands it over with the flag, and the other copies them out: the lines cross
 * the cores modified, as they do when a peer copies out of a rank's area. */
static double xfer_once(MPI_Comm pair, int rank, volatile uint64_t *ping,
                        volatile uint64_t *pong, char *shared, char *mine, size_t bytes,
                        int reps, uint64_t *seq)
{
    PMPI_Barrier(pair);
    double start = bench_now();
    for (int i = 0; i < reps; i++) {
        uint64_t want = ++*seq;
        if (rank == 0) {
            memset(shared, (int)want, bytes);
            __atomic_store_n(ping, want, __ATOMIC_RELEASE);
            while (__atomic_load_n(pong, __ATOMIC_ACQUIRE) != want)
                ;
            copy_bytes(mine, shared, bytes);
        } else {
            while (__atomic_load_n(ping, __ATOMIC_ACQUIRE) != want)
                ;
            copy_bytes(mine, shared, bytes);
            memset(shared, (int)want + 1, bytes);
            __atomic_store_n(pong, want, __ATOMIC_RELEASE);
        }
    }
    double t = (bench_now() - start) / reps / 2;
    PMPI_Bcast(&t, 1, MPI_DOUBLE, 0, pair);
    return t;
}

struct handoff_ctx {
    MPI_Comm pair;
    int rank, cpus, reps[2], xreps[NXFER_SIZES];
    volatile uint64_t *ping, *pong;
    char *shared, *mine;
    uint64_t seq;
    cpu_set_t saved;
};

/* Mode m: 0 two cores spinning, 1 one core yielding. */
static double handoff_sample(void *ctx, int m)
{
    struct handoff_ctx *c = ctx;
    pin(m == 0 ? (c->cpus < 2 ? -1 : c->rank) : 0, &c->saved);
    return handoff_once(c->pair, c->rank, c->ping, c->pong, c->reps[m], m == 1, &c->seq);
}

static double xfer_sample(void *ctx, int i)
{
    struct handoff_ctx *c = ctx;
    return xfer_once(c->pair, c->rank, c->ping, c->pong, c->shared, c->mine, xfer_sizes[i],
                     c->xreps[i], &c->seq);
}

/* out[0]: two cores, spinning; out[1]: one core, yielding (a scheduler turn); xfer[]:
 * xfer_once by size on two cores. */
static void measure_handoff(MPI_Comm pair, int rank, const struct options *o, int cpus,
                            double out[2], double xfer[NXFER_SIZES], int *rejected)
{
    MPI_Win win;
    uint64_t *base;
    size_t max = xfer_sizes[NXFER_SIZES - 1];
    PMPI_Win_allocate_shared(rank == 0 ? 256 + (MPI_Aint)max : 0, 1, MPI_INFO_NULL, pair, &base,
                             &win);
    MPI_Aint size;
    int disp;
    PMPI_Win_shared_query(win, 0, &size, &disp, &base);
    struct handoff_ctx c = {.pair = pair, .rank = rank, .cpus = cpus};
    c.ping = base, c.pong = base + 16; /* 128 B apart */
    if (rank == 0)
        *c.ping = *c.pong = 0;
    PMPI_Barrier(pair);
    sched_getaffinity(0, sizeof c.saved, &c.saved);
    for (int m = 0; m < 2; m++) {
        pin(m == 0 ? (cpus < 2 ? -1 : rank) : 0, &c.saved);
        handoff_once(pair, rank, c.ping, c.pong, 8, m == 1, &c.seq);
        c.reps[m] = reps_for(handoff_once(pair, rank, c.ping, c.pong, 64, m == 1, &c.seq), o);
    }
    alternate_rounds(o, 2, handoff_sample, &c, out, rejected);

    c.shared = (char *)base + 256, c.mine = bench_alloc_pages(max);
    memset(c.mine, 0, max);
    pin(cpus < 2 ? -1 : rank, &c.saved);
    for (int i = 0; i < NXFER_SIZES; i++) {
        xfer_once(pair, rank, c.ping, c.pong, c.shared, c.mine, xfer_sizes[i], 2, &c.seq);
        c.xreps[i] = reps_for(xfer_once(pair, rank, c.ping, c.pong, c.shared, c.mine,
                                        xfer_sizes[i], 4, &c.seq), o);
    }
    alternate_rounds(o, NXFER_SIZES, xfer_sample, &c, xfer, rejected);
    pin(-1, &c.saved);
    free(c.mine);
    PMPI_Win_free(&win);
}

/* --- copies on one rank ------------------------------------------------------------ */

static double copy_once(char *dst, const char *src, size_t bytes, int reps)
{
    double start = bench_now();
    for (int i = 0; i < reps; i++)
        copy_bytes(dst, src, bytes);
    return (bench_now() - start) / reps;
}

struct memcpy_ctx {
    char *src, *dst;
    int reps[NCOPY_SIZES];
};

static double memcpy_sample(void *ctx, int i)
{
    struct memcpy_ctx *c = ctx;
    return copy_sizes[i] / copy_once(c->dst, c->src, copy_sizes[i], c->reps[i]) / 1e9;
}

/* memcpy GB/s by size (rank 0 alone). */
static void measure_memcpy(const struct options *o, double gbs[NCOPY_SIZES], int *rejected)
{
    size_t max = copy_sizes[NCOPY_SIZES - 1];
    struct memcpy_ctx c = {bench_alloc_pages(max), bench_alloc_pages(max), {0}};
    memset(c.src, 1, max);
    memset(c.dst, 0, max);
    for (int i = 0; i < NCOPY_SIZES; i++)
        c.reps[i] = reps_for(copy_once(c.dst, c.src, copy_sizes[i], 1) / 2, o);
    alternate_rounds(o, NCOPY_SIZES, memcpy_sample, &c, gbs, rejected);
    free(c.src);
    free(c.dst);
}

enum { NFOLD_SIZES = 4, FOLD_BLOCK = 16 };
static const size_t fold_sizes[NFOLD_SIZES] = {32768, 262144, 1 << 20, 8 << 20};

/* The shape of mcoll's folds (src/coll/reduce/red_ops.c): blocks of 16 with restrict
 * parameters, which GCC vectorises at -O2; float sums, as mcoll-bench's reductions. */
static inline void fold_block(const float *restrict in, float *restrict io)
{
    for (int k = 0; k < FOLD_BLOCK; k++)
        io[k] += in[k];
}

static void fold(const float *in, float *io, size_t n)
{
    size_t i = 0;
    for (; i + FOLD_BLOCK <= n; i += FOLD_BLOCK)
        fold_block(in + i, io + i);
    for (; i < n; i++)
        io[i] += in[i];
}

struct fold_ctx {
    float *a, *b;
};

static double fold_sample(void *ctx, int f)
{
    struct fold_ctx *c = ctx;
    size_t n = fold_sizes[f] / sizeof(float);
    int reps = (int)fmax(1, (double)(64 << 20) / (double)fold_sizes[f]);
    double start = bench_now();
    for (int r = 0; r < reps; r++) {
        fold(c->b, c->a, n);
        __asm__ volatile("" : : "r"(c->a) : "memory"); /* keep every pass */
    }
    return (double)fold_sizes[f] * reps / (bench_now() - start) / 1e9;
}

/* A reduction's fold by size of input, GB/s of input folded: in the collectives the
 * inputs are mostly in cache, so the speed depends on the size. */
static void measure_fold(const struct options *o, double gbs[NFOLD_SIZES], int *rejected)
{
    size_t max = fold_sizes[NFOLD_SIZES - 1] / sizeof(float);
    struct fold_ctx c = {bench_alloc_pages(max * sizeof(float)), bench_alloc_pages(max * sizeof(float))};
    for (size_t i = 0; i < max; i++)
        c.a[i] = c.b[i] = 1.0f;
    alternate_rounds(o, NFOLD_SIZES, fold_sample, &c, gbs, rejected);
    free(c.a);
    free(c.b);
}

/* --- single copy (process_vm_readv) of rank 1's buffer by rank 0 ------------------- */

static double cma_once(pid_t pid, void *local, void *remote, size_t bytes, int reps)
{
    double start = bench_now();
    for (int i = 0; i < reps; i++) {
        struct iovec l = {local, bytes}, r = {remote, bytes};
        if (process_vm_readv(pid, &l, 1, &r, 1, 0) != (ssize_t)bytes)
            return NAN;
    }
    return (bench_now() - start) / reps;
}

struct cma_ctx {
    pid_t pid;
    void *local, *remote;
    int reps[NCMA_SIZES];
};

static double cma_sample(void *ctx, int i)
{
    struct cma_ctx *c = ctx;
    return cma_once(c->pid, c->local, c->remote, cma_sizes[i], c->reps[i]);
}

/* Seconds per read by size on rank 0 (NAN everywhere if single copy fails here). */
static void measure_cma(MPI_Comm pair, int rank, const struct options *o, double t[NCMA_SIZES],
                        int *rejected)
{
    size_t max = cma_sizes[NCMA_SIZES - 1];
    char *buf = bench_alloc_pages(max);
    memset(buf, rank + 1, max);
    long peer[2] = {(long)getpid(), (long)(uintptr_t)buf};
    PMPI_Bcast(peer, 2, MPI_LONG, 1, pair);
    if (rank == 0) {
        struct cma_ctx c = {(pid_t)peer[0], buf, (void *)(uintptr_t)peer[1], {0}};
        bool ok = true;
        for (int i = 0; i < NCMA_SIZES && ok; i++) {
            double once = cma_once(c.pid, buf, c.remote, cma_sizes[i], 1);
            ok = !isnan(once);
            c.reps[i] = ok ? reps_for(once / 2, o) : 0;
        }
        if (ok)
            alternate_rounds(o, NCMA_SIZES, cma_sample, &c, t, rejected);
        else
            for (int i = 0; i < NCMA_SIZES; i++)
                t[i] = NAN;
    }
    bench_sleepy_barrier(pair); /* rank 1's buffer stays until rank 0 is done */
    free(buf);
}

/* How much longer a 1 MiB single-copy read takes when both ranks read each other's
 * buffer at once than when rank 0 reads alone (the two alternate inside each round);
 * NAN where single copy fails. The collectives whose every rank reads (allgather,
 * alltoall, allreduce) pay it. */
static double measure_cma_pair(MPI_Comm pair, int rank, const struct options *o, int *rejected)
{
    enum { BYTES = 1 << 20 };
    char *buf = bench_alloc_pages(BYTES), *dst = bench_alloc_pages(BYTES);
    memset(buf, rank + 1, BYTES);
    memset(dst, 0, BYTES);
    long mine[2] = {(long)getpid(), (long)(uintptr_t)buf}, peer[2];
    PMPI_Sendrecv(mine, 2, MPI_LONG, 1 - rank, 9, peer, 2, MPI_LONG, 1 - rank, 9, pair,
                  MPI_STATUS_IGNORE);
    pid_t pid = (pid_t)peer[0];
    void *remote = (void *)(uintptr_t)peer[1];
    double once = cma_once(pid, dst, remote, BYTES, 1);
    int ok = !isnan(once);
    PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, pair);
    double ratio = NAN;
    if (ok) {
        int reps = reps_for(once / 2, o);
        PMPI_Bcast(&reps, 1, MPI_INT, 0, pair);
        double *s = bench_alloc_doubles(o->rounds);
        for (int k = 0; k < o->rounds; k++) {
            double t[2];
            for (int j = 0; j < 2; j++) {
                int both = k % 2 ? 1 - j : j;
                PMPI_Barrier(pair);
                double x = rank == 0 || both ? cma_once(pid, dst, remote, BYTES, reps) : 0;
                PMPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_MAX, pair);
                t[both] = x;
            }
            s[k] = t[1] / t[0];
        }
        struct robust r = robust_median(s, o->rounds);
        ratio = r.median;
        *rejected += rank == 0 ? r.rejected : 0;
        free(s);
    }
    free(buf);
    free(dst);
    return ratio;
}

/* --- 1..n ranks copying at once ------------------------------------------------------ */

struct copiers_ctx {
    MPI_Comm comm;
    int rank;
    char *src, *dst;
};

/* Point i: ranks 0..i copying at once. */
static double copiers_sample(void *ctx, int i)
{
    struct copiers_ctx *c = ctx;
    bench_sleepy_barrier(c->comm);
    double t = c->rank <= i ? copy_once(c->dst, c->src, COPIERS_BYTES, 2) : 0;
    PMPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, c->comm);
    return (i + 1) * (double)COPIERS_BYTES / t / 1e9;
}

/* agg[c-1]: aggregate GB/s with ranks 0..c-1 copying COPIERS_BYTES each at once (the
 * slowest copier's time); the others sleep. */
static void measure_copiers(MPI_Comm comm, int rank, int nprocs, const struct options *o,
                            double *agg, int *rejected)
{
    struct copiers_ctx c = {comm, rank, bench_alloc_pages(COPIERS_BYTES),
                            bench_alloc_pages(COPIERS_BYTES)};
    memset(c.src, 1, COPIERS_BYTES);
    memset(c.dst, 0, COPIERS_BYTES);
    alternate_rounds(o, nprocs, copiers_sample, &c, agg, rejected);
    free(c.src);
    free(c.dst);
}

/* --- output ---------------------------------------------------------------------------- */

/* GB/s as the median of the slopes between every two of the sizes from `first` on
 * (Theil-Sen: one disturbed size moves it little). */
static double robust_gbs(const size_t *sizes, const double *t, int first, int n)
{
    double slopes[64];
    int m = 0;
    for (int i = first; i < n; i++)
        for (int j = i + 1; j < n && m < 64; j++)
            if (t[j] > t[i])
                slopes[m++] = (double)(sizes[j] - sizes[i]) / (t[j] - t[i]) / 1e9;
    return m ? bench_median(slopes, m) : NAN;
}

/* alpha (µs): the median of the three smallest sizes; GB/s from pp_sizes[first] on. */
static void fit_pingpong(const double *t, int first, double *alpha_us, double *gbs)
{
    double small[3] = {t[0], t[1], t[2]};
    *alpha_us = bench_median(small, 3) * 1e6;
    *gbs = robust_gbs(pp_sizes, t, first, NPP_SIZES);
}

static void json_num(FILE *f, double v)
{
    bench_json_number(f, v);
}

/* `"sizes": [...], "<unit>": [...]` of a curve, values times scale. */
static void write_curve(FILE *f, const size_t *sizes, const double *values, int n, const char *unit,
                        double scale)
{
    fputs("\"sizes\": [", f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%zu", i ? ", " : "", sizes[i]);
    fprintf(f, "], \"%s\": [", unit);
    for (int i = 0; i < n; i++) {
        fputs(i ? ", " : "", f);
        json_num(f, values[i] * scale);
    }
    fputc(']', f);
}

static void write_level(FILE *f, const char *name, const double *t, bool last)
{
    double a, b;
    fit_pingpong(t, 4, &a, &b);
    fprintf(f, "    \"%s\": {\"alpha_us\": ", name);
    json_num(f, a);
    fputs(", \"GBps\": ", f);
    json_num(f, b);
    fputs(", ", f);
    write_curve(f, pp_sizes, t, NPP_SIZES, "us", 1e6);
    fprintf(f, "}%s\n", last ? "" : ",");
}

struct calibration {
    int nprocs, cpus, rejected, rounds;
    int nodes;                  /* hosts the job spans (1: fake nodes at most) */
    int shared_cores;           /* the hosts run on one kernel (test hosts): they share its cores */
    double link[LINK_POINTS];   /* to another host: ping-pong one way, stream, step; s */
    long llc;
    double cma_pair, fold[NFOLD_SIZES];
    double pp[3][NPP_SIZES], handoff[2], xfer[NXFER_SIZES], memcpy_gbs[NCOPY_SIZES], fold_gbs, cma[NCMA_SIZES];
    double *copiers;
};

static void write_machine(FILE *f, const struct run_info *ri, const struct calibration *c)
{
    double cma_gbs = isnan(c->cma[0]) ? NAN : robust_gbs(cma_sizes, c->cma, 2, NCMA_SIZES);
    double net_alpha, net_gbs;
    fit_pingpong(c->pp[2], 4, &net_alpha, &net_gbs);
    fprintf(f, "{\n  \"name\": \"calibrated on %s\",\n", ri->hostname);
    fprintf(f, "  \"source\": \"mcoll-bench --calibrate, %s, %d ranks, %d rounds, medians after "
               "3-MAD outlier rejection (%d samples rejected)\",\n",
            ri->date, c->nprocs, c->rounds, c->rejected);
    fputs("  \"mpi\": ", f);
    bench_json_string(f, ri->mpi_version);
    fprintf(f, ",\n  \"topology\": {\"nodes\": %d, \"ranks_per_node\": %d, \"cores_per_node\": %d, "
               "\"sockets_per_node\": 1, \"llc_bytes\": %ld",
            c->nodes, c->nprocs, c->cpus, c->llc);
    if (c->shared_cores)    /* every node's ranks compete for these cores (mcoll model) */
        fprintf(f, ", \"machine_cores\": %d", c->cpus);
    fputs("},\n", f);
    fputs("  \"levels\": {\n", f);
    write_level(f, "core", c->pp[0], false);
    if (!isnan(c->pp[1][0]))
        write_level(f, "cache", c->pp[1], false);
    write_level(f, "node", c->pp[2], true);
    fputs("  },\n  \"node\": {\n    \"sync_us\": ", f);
    json_num(f, c->handoff[0] * 1e6);
    fputs(",\n    \"sched_turn_us\": ", f);
    json_num(f, c->handoff[1] * 1e6);
    fputs(",\n    \"xfer_curve\": {", f);
    write_curve(f, xfer_sizes, c->xfer, NXFER_SIZES, "us", 1e6);
    fputs("}", f);
    /* in cache: the median of the sizes up to 1 MiB; beyond: the largest size */
    double in_cache[4] = {c->memcpy_gbs[0], c->memcpy_gbs[1], c->memcpy_gbs[2], c->memcpy_gbs[3]};
    fputs(",\n    \"cache_copy_GBps\": ", f);
    json_num(f, bench_median(in_cache, 4));
    fputs(",\n    \"memcpy_GBps\": ", f);
    json_num(f, c->memcpy_gbs[NCOPY_SIZES - 1]);
    fputs(",\n    \"memcpy_curve\": {", f);
    write_curve(f, copy_sizes, c->memcpy_gbs, NCOPY_SIZES, "GBps", 1);
    fputs("},\n    \"mem_GBps\": [", f);
    for (int i = 0; i < c->nprocs; i++) {
        fprintf(f, "%s[%d, ", i ? ", " : "", i + 1);
        json_num(f, c->copiers[i]);
        fputc(']', f);
    }
    fputs("],\n    \"cma\": ", f);
    fputs(isnan(c->cma[0]) ? "false" : "true", f);
    if (!isnan(c->cma[0])) {
        fputs(",\n    \"cma_call_us\": ", f);
        json_num(f, c->cma[0] * 1e6);
        fputs(",\n    \"cma_GBps\": ", f);
        json_num(f, cma_gbs);
        fputs(",\n    \"cma_pair_slowdown\": ", f);
        json_num(f, c->cma_pair);
        fputs(",\n    \"cma_curve\": {", f);
        write_curve(f, cma_sizes, c->cma, NCMA_SIZES, "us", 1e6);
        fputs("}", f);
    }
    fputs(",\n    \"fold_GBps\": ", f);
    json_num(f, c->fold_gbs);
    fputs(",\n    \"fold_curve\": {", f);
    write_curve(f, fold_sizes, c->fold, NFOLD_SIZES, "GBps", 1);
    fputs("}", f);
    const double *stream = c->link + NLINK_SIZES, step = c->link[2 * NLINK_SIZES];
    if (c->nodes > 1) {
        /* latency from the ping-pong's 8-512 B; the rate from the stream from 32 KiB
         * (sustained: the token bucket's burst spent) */
        double small[3] = {c->link[0], c->link[1], c->link[2]};
        net_alpha = bench_median(small, 3) * 1e6;
        net_gbs = robust_gbs(link_sizes, stream, 7, NLINK_SIZES);
    }
    fputs("\n  },\n  \"net\": {\"alpha_us\": ", f);
    json_num(f, net_alpha);
    fputs(", \"nic_MBps\": ", f);
    json_num(f, net_gbs * 1e3);
    if (c->nodes > 1) {
        fputs(", \"link_curve\": {", f);
        write_curve(f, link_sizes, c->link, NLINK_SIZES, "us", 1e6);
        fputs("}, \"stream_curve\": {", f);
        write_curve(f, link_sizes, stream, NLINK_SIZES, "us", 1e6);
        fputs("}, \"exchange_us\": ", f);
        json_num(f, step * 1e6);
        fputs(", \"_note\": \"the link between two hosts, host MPI between rank 0 and the first "
              "rank of another host: link_curve ping-pong one way, stream_curve per message sent "
              "back to back one way (nic_MBps its slope from 32 KiB), exchange_us an 8 B "
              "exchange with an empty one after each, timed as latency mode times a call\"}\n}\n", f);
    } else {
        fputs(", \"_note\": \"fake nodes (MCOLL_TOPO): the host MPI's point-to-point inside this "
              "node\"}\n}\n", f);
    }
}

static void print_summary(const struct calibration *c)
{
    static const char *names[3] = {"one core", "two cores", "unpinned"};
    printf("# calibrate: host MPI ping-pong, one way, µs (medians of %d rounds)\n", c->rounds);
    printf("# %-10s", "bytes");
    for (int i = 0; i < NPP_SIZES; i++)
        printf(" %9zu", pp_sizes[i]);
    printf("\n");
    for (int lv = 0; lv < 3; lv++) {
        printf("  %-10s", names[lv]);
        for (int i = 0; i < NPP_SIZES; i++)
            printf(" %9.3f", c->pp[lv][i] * 1e6);
        printf("\n");
    }
    printf("# flag hand-off: two cores %.3f µs, one core (yielding) %.3f µs\n",
           c->handoff[0] * 1e6, c->handoff[1] * 1e6);
    printf("# write, hand over, copy out (two cores), one way µs:");
    for (int i = 0; i < NXFER_SIZES; i++)
        printf(" %zu %.3f", xfer_sizes[i], c->xfer[i] * 1e6);
    printf("\n# memcpy GB/s:");
    for (int i = 0; i < NCOPY_SIZES; i++)
        printf(" %zuK %.2f", copy_sizes[i] >> 10, c->memcpy_gbs[i]);
    printf("\n# process_vm_readv µs:");
    for (int i = 0; i < NCMA_SIZES; i++)
        printf(" %zu %.3f", cma_sizes[i], c->cma[i] * 1e6);
    printf("\n# 1 MiB read by both ranks at once / by one: %.2f", c->cma_pair);
    printf("\n# fold GB/s:");
    for (int i = 0; i < NFOLD_SIZES; i++)
        printf(" %zuK %.2f", fold_sizes[i] >> 10, c->fold[i]);
    printf("\n# copiers at once, aggregate GB/s:");
    for (int i = 0; i < c->nprocs; i++)
        printf(" %d: %.2f", i + 1, c->copiers[i]);
    if (c->nodes > 1) {
        printf("\n# link to another host (%d hosts), one way µs:", c->nodes);
        for (int i = 0; i < NLINK_SIZES; i++)
            printf(" %zu %.1f", link_sizes[i], c->link[i] * 1e6);
        printf("\n# link, back to back one way, µs per message:");
        for (int i = 0; i < NLINK_SIZES; i++)
            printf(" %zu %.1f", link_sizes[i], c->link[NLINK_SIZES + i] * 1e6);
        printf("\n# link, 8 B exchange with an empty one after each (latency mode): %.1f µs",
               c->link[2 * NLINK_SIZES] * 1e6);
    }
    printf("\n# %d samples rejected as outliers\n", c->rejected);
    fflush(stdout);
}

/* --- the link between two hosts ---------------------------------------------------- */

/* Per message, messages sent back to back one way and a 0-byte reply at the end: the
 * link's sustained cost. A ping-pong's one-way time leaves each direction idle for the
 * other half of the round trip, so a shaped link's token bucket (tbf burst) refills and
 * messages up to the burst pass unshaped; a collective called over and over sends the
 * next message before it refills. */
static double stream_once(MPI_Comm comm, int rank, char *buf, size_t bytes, int reps)
{
    PMPI_Barrier(comm);
    double start = bench_now();
    for (int i = 0; i < reps; i++) {
        if (rank == 0)
            PMPI_Send(buf, (int)bytes, MPI_BYTE, 1, 8, comm);
        else
            PMPI_Recv(buf, (int)bytes, MPI_BYTE, 0, 8, comm, MPI_STATUS_IGNORE);
    }
    if (rank == 0)
        PMPI_Recv(NULL, 0, MPI_BYTE, 1, 9, comm, MPI_STATUS_IGNORE);
    else
        PMPI_Send(NULL, 0, MPI_BYTE, 0, 9, comm);
    double t = (bench_now() - start) / reps;
    PMPI_Bcast(&t, 1, MPI_DOUBLE, 0, comm);
    return t;
}

/* An 8-byte exchange timed as mcoll-bench's latency mode times a call: a barrier after
 * each (an empty exchange, as mcoll's barrier between two nodes is, not the host MPI's
 * own), the call alone, the slower rank's average: what a small call between two hosts
 * costs beside the ping-pong's one way (written, not priced: docs/model.md). */
static double step_once(MPI_Comm comm, int rank, char *buf, int reps)
{
    double sum = 0;
    int peer = 1 - rank;
    PMPI_Barrier(comm);
    for (int i = 0; i < reps; i++) {
        double start = bench_now();
        PMPI_Sendrecv(buf, 8, MPI_BYTE, peer, 10, buf + 8, 8, MPI_BYTE, peer, 10, comm,
                      MPI_STATUS_IGNORE);
        sum += bench_now() - start;
        PMPI_Sendrecv(NULL, 0, MPI_BYTE, peer, 11, NULL, 0, MPI_BYTE, peer, 11, comm,
                      MPI_STATUS_IGNORE);
    }
    double t = sum / reps;
    PMPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm);
    return t;
}

struct link_ctx {
    MPI_Comm pair;
    int rank;
    char *buf;
    int pp_reps[NLINK_SIZES], stream_reps[NLINK_SIZES];
};

static double link_sample(void *ctx, int p)
{
    struct link_ctx *c = ctx;
    int i = p % NLINK_SIZES;
    if (p < NLINK_SIZES)
        return pingpong_once(c->pair, c->rank, c->buf, link_sizes[i], c->pp_reps[i]);
    if (p < 2 * NLINK_SIZES)
        return stream_once(c->pair, c->rank, c->buf, link_sizes[i], c->stream_reps[i]);
    return step_once(c->pair, c->rank, c->buf, c->pp_reps[0]);
}

/* link[p]: one way between ranks 0 and 1 of `pair` (on two hosts), unpinned: ping-pong
 * (p < NLINK_SIZES), stream (the next NLINK_SIZES), the step (the last), seconds. */
static void measure_link(MPI_Comm pair, int rank, const struct options *o, double link[LINK_POINTS],
                         int *rejected)
{
    struct link_ctx c = {.pair = pair, .rank = rank};
    c.buf = bench_alloc_pages(link_sizes[NLINK_SIZES - 1]);
    memset(c.buf, 1, link_sizes[NLINK_SIZES - 1]);
    for (int i = 0; i < NLINK_SIZES; i++) {
        pingpong_once(pair, rank, c.buf, link_sizes[i], 1); /* warm */
        c.pp_reps[i] = reps_for(pingpong_once(pair, rank, c.buf, link_sizes[i], 1), o);
        /* a stream fills the block with twice the messages of the ping-pong, at least
         * 4 (its first message may pass on the refilled bucket) */
        c.stream_reps[i] = c.pp_reps[i] * 2 > 4 ? c.pp_reps[i] * 2 : 4;
    }
    alternate_rounds(o, LINK_POINTS, link_sample, &c, link, rejected);
    free(c.buf);
}

enum { HOST_NAME_BYTES = 64 };

/* Whether every rank runs on one kernel: the same boot id (network namespaces share
 * it), so hosts that differ by name still share the machine's cores. */
static int one_kernel(MPI_Comm comm)
{
    char id[HOST_NAME_BYTES] = {0};
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    int known = f && fgets(id, sizeof id, f) != NULL;
    if (f)
        fclose(f);
    char lo[HOST_NAME_BYTES], hi[HOST_NAME_BYTES];
    int all_known;
    PMPI_Allreduce(&known, &all_known, 1, MPI_INT, MPI_MIN, comm);
    /* the same id everywhere: its bytewise minimum and maximum agree */
    PMPI_Allreduce(id, lo, HOST_NAME_BYTES, MPI_UNSIGNED_CHAR, MPI_MIN, comm);
    PMPI_Allreduce(id, hi, HOST_NAME_BYTES, MPI_UNSIGNED_CHAR, MPI_MAX, comm);
    return all_known && memcmp(lo, hi, HOST_NAME_BYTES) == 0;
}

/* The hosts of the job by host name: how many, whether this rank shares rank 0's,
 * and the first rank of another host (-1: one host). */
static int job_hosts(MPI_Comm comm, int nprocs, int *same_as_0, int *remote)
{
    char mine[HOST_NAME_BYTES] = {0};
    gethostname(mine, sizeof mine - 1);
    char *all = malloc((size_t)nprocs * HOST_NAME_BYTES);
    if (!all)
        bench_die(comm, "out of memory");
    PMPI_Allgather(mine, HOST_NAME_BYTES, MPI_CHAR, all, HOST_NAME_BYTES, MPI_CHAR, comm);
    int hosts = 0;
    *remote = -1;
    for (int i = 0; i < nprocs; i++) {
        const char *name = all + (size_t)i * HOST_NAME_BYTES;
        int first = 1;
        for (int j = 0; j < i && first; j++)
            first = strcmp(name, all + (size_t)j * HOST_NAME_BYTES) != 0;
        hosts += first;
        if (*remote < 0 && strcmp(name, all) != 0)
            *remote = i;
    }
    *same_as_0 = strcmp(mine, all) == 0;
    free(all);
    return hosts;
}

static void calibrate_node(const struct run_info *ri, const struct options *o, MPI_Comm comm,
                           struct calibration *link);

void bench_calibrate(const struct run_info *ri, const struct options *o, MPI_Comm comm)
{
    int rank, nprocs, on_host0, remote;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &nprocs);
    struct calibration link = {.nodes = job_hosts(comm, nprocs, &on_host0, &remote)};
    link.shared_cores = link.nodes > 1 && one_kernel(comm);
    for (int i = 0; i < LINK_POINTS; i++)
        link.link[i] = NAN;
    if (link.nodes > 1) {
        MPI_Comm pair;
        PMPI_Comm_split(comm, rank == 0 || rank == remote ? 0 : MPI_UNDEFINED, rank, &pair);
        if (pair != MPI_COMM_NULL) {
            measure_link(pair, rank == 0 ? 0 : 1, o, link.link, &link.rejected);
            PMPI_Comm_free(&pair);
        }
        bench_sleepy_barrier(comm);
    }
    MPI_Comm host0;
    PMPI_Comm_split(comm, on_host0 ? 0 : MPI_UNDEFINED, rank, &host0);
    if (host0 != MPI_COMM_NULL) {
        calibrate_node(ri, o, host0, &link);
        PMPI_Comm_free(&host0);
    }
    bench_sleepy_barrier(comm);
}

/* The node's measurements among the ranks of rank 0's host; writes the machine file
 * with the link's, if any. */
static void calibrate_node(const struct run_info *ri, const struct options *o, MPI_Comm comm,
                           struct calibration *link)
{
    int rank, nprocs;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &nprocs);
    if (nprocs < 2)
        bench_usage_exit("--calibrate needs at least 2 ranks on rank 0's host (ranks 0 and 1 on one node)");
    struct calibration c = {.nprocs = nprocs, .cpus = ncpus(), .rounds = o->rounds,
                            .cma_pair = NAN, .nodes = link->nodes,
                            .shared_cores = link->shared_cores};
    memcpy(c.link, link->link, sizeof c.link);
    for (int i = 0; i < NCMA_SIZES; i++)
        c.cma[i] = NAN;
    c.llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (c.llc <= 0)
        c.llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
    MPI_Comm pair;
    PMPI_Comm_split(comm, rank < 2 ? 0 : MPI_UNDEFINED, rank, &pair);
    int rej = 0;
    if (pair != MPI_COMM_NULL) {
        measure_pingpong(pair, rank, o, c.cpus, c.pp, &rej);
        measure_handoff(pair, rank, o, c.cpus, c.handoff, c.xfer, &rej);
        measure_cma(pair, rank, o, c.cma, &rej);
        c.cma_pair = measure_cma_pair(pair, rank, o, &rej);
    }
    bench_sleepy_barrier(comm);
    if (rank == 0) {
        measure_memcpy(o, c.memcpy_gbs, &rej);
        measure_fold(o, c.fold, &rej);
        c.fold_gbs = c.fold[NFOLD_SIZES - 1];
    }
    bench_sleepy_barrier(comm);
    c.copiers = bench_alloc_doubles(nprocs);
    measure_copiers(comm, rank, nprocs, o, c.copiers, &rej);
    PMPI_Reduce(rank == 0 ? MPI_IN_PLACE : &rej, &rej, 1, MPI_INT, MPI_SUM, 0, comm);
    c.rejected = rej + link->rejected;
    if (rank == 0) {
        print_summary(&c);
        if (o->json_path) {
            FILE *f = fopen(o->json_path, "w");
            if (!f)
                bench_die(comm, "--calibrate: cannot write the -o file");
            write_machine(f, ri, &c);
            fclose(f);
        }
    }
    free(c.copiers);
    if (pair != MPI_COMM_NULL)
        PMPI_Comm_free(&pair);
}
