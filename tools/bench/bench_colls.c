/* The benchmarked collectives: how each is called, how big its buffers are, what it
 * sends and what each rank must hold afterwards. Movement collectives move MPI_BYTE;
 * reductions sum MPI_FLOAT. */
#include "bench.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_BYTES 4096

#if BENCH_PERSISTENT
#define PERSISTENT_API(P)                                                                    \
    .barrier_init = P##Barrier_init, .bcast_init = P##Bcast_init,                            \
    .reduce_init = P##Reduce_init, .allreduce_init = P##Allreduce_init,                      \
    .allgather_init = P##Allgather_init, .allgatherv_init = P##Allgatherv_init,              \
    .gather_init = P##Gather_init, .gatherv_init = P##Gatherv_init,                          \
    .scatter_init = P##Scatter_init, .scatterv_init = P##Scatterv_init,                      \
    .alltoall_init = P##Alltoall_init, .alltoallv_init = P##Alltoallv_init,                  \
    .reduce_scatter_block_init = P##Reduce_scatter_block_init,                               \
    .reduce_scatter_init = P##Reduce_scatter_init, .scan_init = P##Scan_init,                \
    .exscan_init = P##Exscan_init,
#else
#define PERSISTENT_API(P)
#endif

/* P: PMPI_ (the host MPI) or MPI_ (mcoll when preloaded); PX: the same for the
 * persistent forms (bench.h). */
#define BENCH_API(name, P, PX)                                                                 \
    {                                                                                        \
        .label = name, .barrier = P##Barrier, .bcast = P##Bcast, .reduce = P##Reduce,        \
        .allreduce = P##Allreduce, .allgather = P##Allgather, .allgatherv = P##Allgatherv,   \
        .gather = P##Gather, .gatherv = P##Gatherv, .scatter = P##Scatter,                   \
        .scatterv = P##Scatterv, .alltoall = P##Alltoall, .alltoallv = P##Alltoallv,         \
        .reduce_scatter_block = P##Reduce_scatter_block, .reduce_scatter = P##Reduce_scatter, \
        .scan = P##Scan, .exscan = P##Exscan, .ibarrier = P##Ibarrier, .ibcast = P##Ibcast,  \
        .ireduce = P##Ireduce, .iallreduce = P##Iallreduce, .iallgather = P##Iallgather,     \
        .iallgatherv = P##Iallgatherv, .igather = P##Igather, .igatherv = P##Igatherv,       \
        .iscatter = P##Iscatter, .iscatterv = P##Iscatterv, .ialltoall = P##Ialltoall,       \
        .ialltoallv = P##Ialltoallv, .ireduce_scatter_block = P##Ireduce_scatter_block,      \
        .ireduce_scatter = P##Ireduce_scatter, .iscan = P##Iscan, .iexscan = P##Iexscan,     \
        .wait = P##Wait, .start = P##Start, .request_free = P##Request_free,                 \
        PERSISTENT_API(PX)                                                                   \
    }

#if !BENCH_PERSISTENT
#define BENCH_PINIT_NATIVE
#define BENCH_PINIT_MCOLL
#endif
const struct mpi_api bench_native_api = BENCH_API("native", PMPI_, BENCH_PINIT_NATIVE);
const struct mpi_api bench_mcoll_api = BENCH_API("mcoll", MPI_, BENCH_PINIT_MCOLL);

/* Buffer sizes on a rank, in blocks (send, recv): one, or one per rank (n). */
enum shape { SHAPE_NONE, SHAPE_1_1, SHAPE_1_N, SHAPE_N_1, SHAPE_N_N };
/* nccl-tests bus bandwidth factor: 1, 2(n-1)/n, (n-1)/n. */
enum bus { BUS_ONE, BUS_ALLREDUCE, BUS_SPREAD };
/* Which ranks hold a result to check. */
enum holders { HOLD_NONE, HOLD_ALL, HOLD_ROOT, HOLD_NON_ROOT, HOLD_NOT_FIRST };

/* Block b of a movement collective's result is rank `rank`'s send data from `index` on. */
struct origin {
    int rank;
    size_t index;
};

/* Element i of a reduction's result sums element offset + i of ranks [lo, hi). */
struct sum_range {
    int lo, hi;
    size_t offset;
};

struct coll_desc {
    const char *name;
    enum shape shape;
    bool reduces;
    enum bus bus;
    enum holders holders;
    int (*run)(const struct mpi_api *, const struct row *);
    int (*post)(const struct mpi_api *, const struct row *, MPI_Request *);
#if BENCH_PERSISTENT
    int (*init)(const struct mpi_api *, const struct row *, MPI_Request *);
#endif
    struct origin (*origin)(const struct row *, size_t b); /* movement collectives */
    struct sum_range (*sums)(const struct row *);          /* reductions */
};

static int run_barrier(const struct mpi_api *a, const struct row *r)
{
    return a->barrier(r->comm);
}

static int run_bcast(const struct mpi_api *a, const struct row *r)
{
    void *buf = r->rank == r->root ? r->send : r->recv;
    return a->bcast(buf, r->count, r->type, r->root, r->comm);
}

static int run_reduce(const struct mpi_api *a, const struct row *r)
{
    return a->reduce(r->send, r->recv, r->count, r->type, MPI_SUM, r->root, r->comm);
}

static int run_allreduce(const struct mpi_api *a, const struct row *r)
{
    return a->allreduce(r->send, r->recv, r->count, r->type, MPI_SUM, r->comm);
}

static int run_allgather(const struct mpi_api *a, const struct row *r)
{
    return a->allgather(r->send, r->count, r->type, r->recv, r->count, r->type, r->comm);
}

static int run_allgatherv(const struct mpi_api *a, const struct row *r)
{
    return a->allgatherv(r->send, r->count, r->type, r->recv, r->counts, r->displs, r->type,
                         r->comm);
}

static int run_gather(const struct mpi_api *a, const struct row *r)
{
    return a->gather(r->send, r->count, r->type, r->recv, r->count, r->type, r->root,
                     r->comm);
}

static int run_gatherv(const struct mpi_api *a, const struct row *r)
{
    return a->gatherv(r->send, r->count, r->type, r->recv, r->counts, r->displs, r->type,
                      r->root, r->comm);
}

static int run_scatter(const struct mpi_api *a, const struct row *r)
{
    return a->scatter(r->send, r->count, r->type, r->recv, r->count, r->type, r->root,
                      r->comm);
}

static int run_scatterv(const struct mpi_api *a, const struct row *r)
{
    return a->scatterv(r->send, r->counts, r->displs, r->type, r->recv, r->count, r->type,
                       r->root, r->comm);
}

static int run_alltoall(const struct mpi_api *a, const struct row *r)
{
    return a->alltoall(r->send, r->count, r->type, r->recv, r->count, r->type, r->comm);
}

static int run_alltoallv(const struct mpi_api *a, const struct row *r)
{
    return a->alltoallv(r->send, r->counts, r->displs, r->type, r->recv, r->counts,
                        r->displs, r->type, r->comm);
}

static int run_reduce_scatter_block(const struct mpi_api *a, const struct row *r)
{
    return a->reduce_scatter_block(r->send, r->recv, r->count, r->type, MPI_SUM, r->comm);
}

static int run_reduce_scatter(const struct mpi_api *a, const struct row *r)
{
    return a->reduce_scatter(r->send, r->recv, r->counts, r->type, MPI_SUM, r->comm);
}

static int run_scan(const struct mpi_api *a, const struct row *r)
{
    return a->scan(r->send, r->recv, r->count, r->type, MPI_SUM, r->comm);
}

static int run_exscan(const struct mpi_api *a, const struct row *r)
{
    return a->exscan(r->send, r->recv, r->count, r->type, MPI_SUM, r->comm);
}

/* The non-blocking forms: the same arguments, and a request. */
static int post_barrier(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->ibarrier(r->comm, q);
}

static int post_bcast(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    void *buf = r->rank == r->root ? r->send : r->recv;
    return a->ibcast(buf, r->count, r->type, r->root, r->comm, q);
}

static int post_reduce(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->ireduce(r->send, r->recv, r->count, r->type, MPI_SUM, r->root, r->comm, q);
}

static int post_allreduce(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->iallreduce(r->send, r->recv, r->count, r->type, MPI_SUM, r->comm, q);
}

static int post_allgather(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->iallgather(r->send, r->count, r->type, r->recv, r->count, r->type, r->comm, q);
}

static int post_allgatherv(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->iallgatherv(r->send, r->count, r->type, r->recv, r->counts, r->displs, r->type,
                          r->comm, q);
}

static int post_gather(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->igather(r->send, r->count, r->type, r->recv, r->count, r->type, r->root, r->comm,
                      q);
}

static int post_gatherv(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->igatherv(r->send, r->count, r->type, r->recv, r->counts, r->displs, r->type,
                       r->root, r->comm, q);
}

static int post_scatter(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->iscatter(r->send, r->count, r->type, r->recv, r->count, r->type, r->root,
                       r->comm, q);
}

static int post_scatterv(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->iscatterv(r->send, r->counts, r->displs, r->type, r->recv, r->count, r->type,
                        r->root, r->comm, q);
}

static int post_alltoall(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->ialltoall(r->send, r->count, r->type, r->recv, r->count, r->type, r->comm, q);
}

static int post_alltoallv(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->ialltoallv(r->send, r->counts, r->displs, r->type, r->recv, r->counts, r->displs,
                         r->type, r->comm, q);
}

static int post_reduce_scatter_block(const struct mpi_api *a, const struct row *r,
                                     MPI_Request *q)
{
    return a->ireduce_scatter_block(r->send, r->recv, r->count, r->type, MPI_SUM, r->comm, q);
}

static int post_reduce_scatter(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->ireduce_scatter(r->send, r->recv, r->counts, r->type, MPI_SUM, r->comm, q);
}

static int post_scan(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->iscan(r->send, r->recv, r->count, r->type, MPI_SUM, r->comm, q);
}

static int post_exscan(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->iexscan(r->send, r->recv, r->count, r->type, MPI_SUM, r->comm, q);
}

#if BENCH_PERSISTENT
/* The persistent forms (MPI 4.0, Open MPI's MPIX_), no info hints. */
static int init_barrier(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->barrier_init(r->comm, MPI_INFO_NULL, q);
}

static int init_bcast(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    void *buf = r->rank == r->root ? r->send : r->recv;
    return a->bcast_init(buf, r->count, r->type, r->root, r->comm, MPI_INFO_NULL, q);
}

static int init_reduce(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->reduce_init(r->send, r->recv, r->count, r->type, MPI_SUM, r->root, r->comm,
                          MPI_INFO_NULL, q);
}

static int init_allreduce(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->allreduce_init(r->send, r->recv, r->count, r->type, MPI_SUM, r->comm,
                             MPI_INFO_NULL, q);
}

static int init_allgather(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->allgather_init(r->send, r->count, r->type, r->recv, r->count, r->type, r->comm,
                             MPI_INFO_NULL, q);
}

static int init_allgatherv(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->allgatherv_init(r->send, r->count, r->type, r->recv, r->counts, r->displs,
                              r->type, r->comm, MPI_INFO_NULL, q);
}

static int init_gather(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->gather_init(r->send, r->count, r->type, r->recv, r->count, r->type, r->root,
                          r->comm, MPI_INFO_NULL, q);
}

static int init_gatherv(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->gatherv_init(r->send, r->count, r->type, r->recv, r->counts, r->displs, r->type,
                           r->root, r->comm, MPI_INFO_NULL, q);
}

static int init_scatter(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->scatter_init(r->send, r->count, r->type, r->recv, r->count, r->type, r->root,
                           r->comm, MPI_INFO_NULL, q);
}

static int init_scatterv(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->scatterv_init(r->send, r->counts, r->displs, r->type, r->recv, r->count, r->type,
                            r->root, r->comm, MPI_INFO_NULL, q);
}

static int init_alltoall(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->alltoall_init(r->send, r->count, r->type, r->recv, r->count, r->type, r->comm,
                            MPI_INFO_NULL, q);
}

static int init_alltoallv(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->alltoallv_init(r->send, r->counts, r->displs, r->type, r->recv, r->counts,
                             r->displs, r->type, r->comm, MPI_INFO_NULL, q);
}

static int init_reduce_scatter_block(const struct mpi_api *a, const struct row *r,
                                     MPI_Request *q)
{
    return a->reduce_scatter_block_init(r->send, r->recv, r->count, r->type, MPI_SUM, r->comm,
                                        MPI_INFO_NULL, q);
}

static int init_reduce_scatter(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->reduce_scatter_init(r->send, r->recv, r->counts, r->type, MPI_SUM, r->comm,
                                  MPI_INFO_NULL, q);
}

static int init_scan(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->scan_init(r->send, r->recv, r->count, r->type, MPI_SUM, r->comm, MPI_INFO_NULL,
                        q);
}

static int init_exscan(const struct mpi_api *a, const struct row *r, MPI_Request *q)
{
    return a->exscan_init(r->send, r->recv, r->count, r->type, MPI_SUM, r->comm,
                          MPI_INFO_NULL, q);
}
#define INIT(name) init_##name,
#else
#define INIT(name)
#endif

static struct origin from_root(const struct row *r, size_t b)
{
    (void)b;
    return (struct origin){r->root, 0};
}

static struct origin from_block_owner(const struct row *r, size_t b)
{
    (void)r;
    return (struct origin){(int)b, 0};
}

static struct origin from_root_my_block(const struct row *r, size_t b)
{
    (void)b;
    return (struct origin){r->root, (size_t)r->rank * r->block};
}

static struct origin from_owner_my_block(const struct row *r, size_t b)
{
    return (struct origin){(int)b, (size_t)r->rank * r->block};
}

static struct sum_range sum_all(const struct row *r)
{
    return (struct sum_range){0, r->nprocs, 0};
}

static struct sum_range sum_all_my_block(const struct row *r)
{
    return (struct sum_range){0, r->nprocs, (size_t)r->rank * (size_t)r->count};
}

static struct sum_range sum_upto_me(const struct row *r)
{
    return (struct sum_range){0, r->rank + 1, 0};
}

static struct sum_range sum_before_me(const struct row *r)
{
    return (struct sum_range){0, r->rank, 0};
}

/* name, shape, reduces, bus, holders, then the calls (blocking, non-blocking,
 * persistent) and how to check. */
#define CALLS(name) run_##name, post_##name, INIT(name)

static const struct coll_desc colls[BENCH_NCOLLS] = {
    {"barrier", SHAPE_NONE, false, BUS_ONE, HOLD_NONE, CALLS(barrier) NULL, NULL},
    {"bcast", SHAPE_1_1, false, BUS_ONE, HOLD_NON_ROOT, CALLS(bcast) from_root, NULL},
    {"reduce", SHAPE_1_1, true, BUS_ONE, HOLD_ROOT, CALLS(reduce) NULL, sum_all},
    {"allreduce", SHAPE_1_1, true, BUS_ALLREDUCE, HOLD_ALL, CALLS(allreduce) NULL, sum_all},
    {"allgather", SHAPE_1_N, false, BUS_SPREAD, HOLD_ALL, CALLS(allgather) from_block_owner,
     NULL},
    {"allgatherv", SHAPE_1_N, false, BUS_SPREAD, HOLD_ALL, CALLS(allgatherv) from_block_owner,
     NULL},
    {"gather", SHAPE_1_N, false, BUS_SPREAD, HOLD_ROOT, CALLS(gather) from_block_owner, NULL},
    {"gatherv", SHAPE_1_N, false, BUS_SPREAD, HOLD_ROOT, CALLS(gatherv) from_block_owner, NULL},
    {"scatter", SHAPE_N_1, false, BUS_SPREAD, HOLD_ALL, CALLS(scatter) from_root_my_block,
     NULL},
    {"scatterv", SHAPE_N_1, false, BUS_SPREAD, HOLD_ALL, CALLS(scatterv) from_root_my_block,
     NULL},
    {"alltoall", SHAPE_N_N, false, BUS_SPREAD, HOLD_ALL, CALLS(alltoall) from_owner_my_block,
     NULL},
    {"alltoallv", SHAPE_N_N, false, BUS_SPREAD, HOLD_ALL, CALLS(alltoallv) from_owner_my_block,
     NULL},
    {"reduce_scatter_block", SHAPE_N_1, true, BUS_SPREAD, HOLD_ALL,
     CALLS(reduce_scatter_block) NULL, sum_all_my_block},
    {"reduce_scatter", SHAPE_N_1, true, BUS_SPREAD, HOLD_ALL, CALLS(reduce_scatter) NULL,
     sum_all_my_block},
    {"scan", SHAPE_1_1, true, BUS_ONE, HOLD_ALL, CALLS(scan) NULL, sum_upto_me},
    {"exscan", SHAPE_1_1, true, BUS_ONE, HOLD_NOT_FIRST, CALLS(exscan) NULL, sum_before_me},
};

const char *bench_coll_name(int coll)
{
    return colls[coll].name;
}

int bench_coll_index(const char *name)
{
    for (int i = 0; i < BENCH_NCOLLS; i++)
        if (strcmp(colls[i].name, name) == 0)
            return i;
    return -1;
}

/* Send data: a hash of (rank, index / 8), so that a block landing in the wrong place
 * shows; bytes [start, start + n) of rank's data go to dst. */
static void fill_pattern(uint8_t *dst, size_t n, int rank, size_t start)
{
    uint64_t word = 0;
    size_t word_index = SIZE_MAX;
    for (size_t k = 0; k < n; k++) {
        size_t i = start + k;
        if (i / 8 != word_index) {
            word_index = i / 8;
            word = (uint64_t)word_index * 0x9E3779B97F4A7C15u ^
                   (uint64_t)(rank + 1) * 0xC2B2AE3Du;
            word ^= word >> 29;
            word *= 0xBF58476D1CE4E5B9u;
            word ^= word >> 32;
        }
        dst[k] = (uint8_t)(word >> (i % 8 * 8));
    }
}

/* Small integers, so that float sums over any range of ranks are exact. */
static float pattern_float(int rank, size_t index)
{
    return (float)((index * 7 + (size_t)rank * 3) % 61 + 1);
}

_Noreturn void bench_die(MPI_Comm comm, const char *what)
{
    fprintf(stderr, "mcoll-bench: %s\n", what);
    PMPI_Abort(comm, 1);
    abort();
}

_Noreturn void bench_usage_exit(const char *what)
{
    int rank;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        fprintf(stderr, "mcoll-bench: %s\n", what);
    MPI_Finalize(); /* mcoll's, when loaded: it removes its shared memory */
    exit(1);
}

void *bench_alloc_pages(size_t bytes)
{
    size_t rounded = (bytes + PAGE_BYTES - 1) / PAGE_BYTES * PAGE_BYTES;
    void *p = aligned_alloc(PAGE_BYTES, rounded ? rounded : PAGE_BYTES);
    if (!p)
        bench_die(MPI_COMM_WORLD, "out of memory");
    return p;
}

static double busbw_factor(enum bus bus, int nprocs)
{
    switch (bus) {
    case BUS_ALLREDUCE: return 2.0 * (nprocs - 1) / nprocs;
    case BUS_SPREAD: return (double)(nprocs - 1) / nprocs;
    default: return 1.0;
    }
}

bool bench_row_init(struct row *r, int coll, size_t bytes, MPI_Comm comm, int root)
{
    const struct coll_desc *c = &colls[coll];
    *r = (struct row){.coll = c, .name = c->name, .comm = comm, .root = root};
    PMPI_Comm_rank(comm, &r->rank);
    PMPI_Comm_size(comm, &r->nprocs);
    r->type = c->reduces ? MPI_FLOAT : MPI_BYTE;
    r->elem = c->reduces ? sizeof(float) : 1;
    size_t n = (size_t)r->nprocs;
    if (bytes / r->elem * n > INT_MAX) /* counts and displacements are ints */
        return false;
    r->count = c->shape == SHAPE_NONE ? 0 : (int)(bytes / r->elem);
    r->block = (size_t)r->count * r->elem;
    r->busbw_factor = busbw_factor(c->bus, r->nprocs);
    bool send_n = c->shape == SHAPE_N_1 || c->shape == SHAPE_N_N;
    bool recv_n = c->shape == SHAPE_1_N || c->shape == SHAPE_N_N;
    r->send_bytes = (send_n ? n : 1) * r->block;
    r->recv_bytes = (recv_n ? n : 1) * r->block;
    r->total = r->send_bytes > r->recv_bytes ? r->send_bytes : r->recv_bytes;
    return c->shape == SHAPE_NONE || r->count > 0;
}

static bool holds_result(const struct row *r)
{
    switch (r->coll->holders) {
    case HOLD_ALL: return true;
    case HOLD_ROOT: return r->rank == r->root;
    case HOLD_NON_ROOT: return r->rank != r->root;
    case HOLD_NOT_FIRST: return r->rank > 0;
    default: return false;
    }
}

/* What this rank's receive buffer must hold after a call: computed once per row, so
 * that checking a block is a memcmp. */
static void *expected_result(const struct row *r)
{
    if (!holds_result(r))
        return NULL;
    void *expect = bench_alloc_pages(r->recv_bytes);
    if (r->coll->reduces) {
        float *f = expect;
        struct sum_range s = r->coll->sums(r);
        for (size_t i = 0; i < r->recv_bytes / sizeof(float); i++) {
            f[i] = 0;
            for (int k = s.lo; k < s.hi; k++)
                f[i] += pattern_float(k, s.offset + i);
        }
    } else {
        for (size_t b = 0; b < r->recv_bytes / r->block; b++) {
            struct origin o = r->coll->origin(r, b);
            fill_pattern((uint8_t *)expect + b * r->block, r->block, o.rank, o.index);
        }
    }
    return expect;
}

void bench_row_alloc(struct row *r, bool check)
{
    r->send = bench_alloc_pages(r->send_bytes);
    r->recv = bench_alloc_pages(r->recv_bytes);
    r->counts = malloc(sizeof(int) * (size_t)r->nprocs);
    r->displs = malloc(sizeof(int) * (size_t)r->nprocs);
    if (!r->counts || !r->displs)
        bench_die(r->comm, "out of memory");
    for (int i = 0; i < r->nprocs; i++) {
        r->counts[i] = r->count;
        r->displs[i] = i * r->count;
    }
    if (r->coll->reduces) {
        float *f = r->send;
        for (size_t i = 0; i < r->send_bytes / sizeof(float); i++)
            f[i] = pattern_float(r->rank, i);
    } else {
        fill_pattern(r->send, r->send_bytes, r->rank, 0);
    }
    memset(r->recv, 0, r->recv_bytes); /* fault the pages in before timing */
    r->expect = check ? expected_result(r) : NULL;
}

void bench_row_free(struct row *r)
{
    free(r->send);
    free(r->recv);
    free(r->counts);
    free(r->displs);
    free(r->expect);
}

void bench_run(const struct mpi_api *api, const struct row *r)
{
    int rc = r->coll->run(api, r);
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING + 64];
        int len = 0;
        int at = snprintf(msg, sizeof msg, "%s %s failed: ", api->label, r->name);
        PMPI_Error_string(rc, msg + at, &len);
        bench_die(r->comm, msg);
    }
}

static _Noreturn void call_failed(const struct mpi_api *api, const struct row *r,
                                  const char *what, int rc)
{
    char msg[MPI_MAX_ERROR_STRING + 96];
    int len = 0;
    int at = snprintf(msg, sizeof msg, "%s %s (%s) failed: ", api->label, r->name, what);
    PMPI_Error_string(rc, msg + at, &len);
    bench_die(r->comm, msg);
}

void bench_post(const struct mpi_api *api, const struct row *r, MPI_Request *req)
{
    int rc = r->coll->post(api, r, req);
    if (rc != MPI_SUCCESS)
        call_failed(api, r, "non-blocking", rc);
}

void bench_wait(const struct mpi_api *api, const struct row *r, MPI_Request *req)
{
    int rc = api->wait(req, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
        call_failed(api, r, "wait", rc);
}

#if BENCH_PERSISTENT
void bench_persistent_init(const struct mpi_api *api, const struct row *r, MPI_Request *req)
{
    int rc = r->coll->init(api, r, req);
    if (rc != MPI_SUCCESS)
        call_failed(api, r, "persistent init", rc);
}
#endif

long bench_check_result(const struct row *r, const char *label)
{
    if (!r->expect || memcmp(r->recv, r->expect, r->recv_bytes) == 0)
        return 0;
    size_t elems = r->recv_bytes / r->elem, first = SIZE_MAX;
    long wrong = 0;
    for (size_t i = 0; i < elems; i++) {
        if (memcmp((const char *)r->recv + i * r->elem, (const char *)r->expect + i * r->elem,
                   r->elem) != 0 && wrong++ == 0)
            first = i;
    }
    double got, want;
    if (r->coll->reduces) {
        got = ((const float *)r->recv)[first];
        want = ((const float *)r->expect)[first];
    } else {
        got = ((const uint8_t *)r->recv)[first];
        want = ((const uint8_t *)r->expect)[first];
    }
    fprintf(stderr,
            "mcoll-bench: %s %s %zu B, rank %d: %ld wrong elements, the first at %zu: "
            "got %g, expected %g\n",
            label, r->name, r->block, r->rank, wrong, first, got, want);
    return wrong;
}
