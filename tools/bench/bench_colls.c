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

const struct mpi_api bench_native_api = {
    "native", PMPI_Barrier, PMPI_Bcast, PMPI_Reduce, PMPI_Allreduce, PMPI_Allgather,
    PMPI_Allgatherv, PMPI_Gather, PMPI_Gatherv, PMPI_Scatter, PMPI_Scatterv, PMPI_Alltoall,
    PMPI_Alltoallv, PMPI_Reduce_scatter_block, PMPI_Reduce_scatter, PMPI_Scan, PMPI_Exscan,
};

const struct mpi_api bench_mcoll_api = {
    "mcoll", MPI_Barrier, MPI_Bcast, MPI_Reduce, MPI_Allreduce, MPI_Allgather,
    MPI_Allgatherv, MPI_Gather, MPI_Gatherv, MPI_Scatter, MPI_Scatterv, MPI_Alltoall,
    MPI_Alltoallv, MPI_Reduce_scatter_block, MPI_Reduce_scatter, MPI_Scan, MPI_Exscan,
};

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

static const struct coll_desc colls[BENCH_NCOLLS] = {
    {"barrier", SHAPE_NONE, false, BUS_ONE, HOLD_NONE, run_barrier, NULL, NULL},
    {"bcast", SHAPE_1_1, false, BUS_ONE, HOLD_NON_ROOT, run_bcast, from_root, NULL},
    {"reduce", SHAPE_1_1, true, BUS_ONE, HOLD_ROOT, run_reduce, NULL, sum_all},
    {"allreduce", SHAPE_1_1, true, BUS_ALLREDUCE, HOLD_ALL, run_allreduce, NULL, sum_all},
    {"allgather", SHAPE_1_N, false, BUS_SPREAD, HOLD_ALL, run_allgather, from_block_owner,
     NULL},
    {"allgatherv", SHAPE_1_N, false, BUS_SPREAD, HOLD_ALL, run_allgatherv, from_block_owner,
     NULL},
    {"gather", SHAPE_1_N, false, BUS_SPREAD, HOLD_ROOT, run_gather, from_block_owner, NULL},
    {"gatherv", SHAPE_1_N, false, BUS_SPREAD, HOLD_ROOT, run_gatherv, from_block_owner, NULL},
    {"scatter", SHAPE_N_1, false, BUS_SPREAD, HOLD_ALL, run_scatter, from_root_my_block, NULL},
    {"scatterv", SHAPE_N_1, false, BUS_SPREAD, HOLD_ALL, run_scatterv, from_root_my_block,
     NULL},
    {"alltoall", SHAPE_N_N, false, BUS_SPREAD, HOLD_ALL, run_alltoall, from_owner_my_block,
     NULL},
    {"alltoallv", SHAPE_N_N, false, BUS_SPREAD, HOLD_ALL, run_alltoallv, from_owner_my_block,
     NULL},
    {"reduce_scatter_block", SHAPE_N_1, true, BUS_SPREAD, HOLD_ALL, run_reduce_scatter_block,
     NULL, sum_all_my_block},
    {"reduce_scatter", SHAPE_N_1, true, BUS_SPREAD, HOLD_ALL, run_reduce_scatter, NULL,
     sum_all_my_block},
    {"scan", SHAPE_1_1, true, BUS_ONE, HOLD_ALL, run_scan, NULL, sum_upto_me},
    {"exscan", SHAPE_1_1, true, BUS_ONE, HOLD_NOT_FIRST, run_exscan, NULL, sum_before_me},
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
