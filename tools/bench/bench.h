/* mcoll-bench internals shared by its files:
 *   bench_colls.c   the collectives: calls, buffer layouts, send data, result checks
 *   bench_output.c  the stdout table and the JSON file
 *   bench_modes.c   the cold and latency modes (-m cold, -m latency)
 *   mcoll_bench.c   options, timing (alternating rounds, medians), memcpy, main */
#ifndef MCOLL_BENCH_H
#define MCOLL_BENCH_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>

#define BENCH_NCOLLS 16

/* The same calls twice: once straight into the host MPI, once through whatever
 * MPI_* resolves to (mcoll when preloaded, the host MPI otherwise). */
struct mpi_api {
    const char *label;
    int (*barrier)(MPI_Comm);
    int (*bcast)(void *, int, MPI_Datatype, int, MPI_Comm);
    int (*reduce)(const void *, void *, int, MPI_Datatype, MPI_Op, int, MPI_Comm);
    int (*allreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
    int (*allgather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
    int (*allgatherv)(const void *, int, MPI_Datatype, void *, const int[], const int[],
                      MPI_Datatype, MPI_Comm);
    int (*gather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int, MPI_Comm);
    int (*gatherv)(const void *, int, MPI_Datatype, void *, const int[], const int[],
                   MPI_Datatype, int, MPI_Comm);
    int (*scatter)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int, MPI_Comm);
    int (*scatterv)(const void *, const int[], const int[], MPI_Datatype, void *, int,
                    MPI_Datatype, int, MPI_Comm);
    int (*alltoall)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
    int (*alltoallv)(const void *, const int[], const int[], MPI_Datatype, void *,
                     const int[], const int[], MPI_Datatype, MPI_Comm);
    int (*reduce_scatter_block)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
    int (*reduce_scatter)(const void *, void *, const int[], MPI_Datatype, MPI_Op, MPI_Comm);
    int (*scan)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
    int (*exscan)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
};

extern const struct mpi_api bench_native_api, bench_mcoll_api;

struct coll_desc;
struct options;
struct result;

/* One (collective, size) with its buffers, identical in shape on every rank. */
struct row {
    const struct coll_desc *coll;
    const char *name;
    MPI_Comm comm;
    int rank, nprocs, root;
    MPI_Datatype type;
    size_t elem;
    int count;           /* elements per block */
    size_t block;        /* bytes per block: the "bytes" column */
    size_t total;        /* bytes of the largest buffer: algbw = total / time */
    double busbw_factor; /* nccl-tests: busbw = algbw * factor */
    void *send, *recv;
    size_t send_bytes, recv_bytes;
    int *counts, *displs; /* the v-variants use equal blocks */
    void *expect;         /* the result this rank must hold; NULL: none or unchecked */
};

const char *bench_coll_name(int coll);
int bench_coll_index(const char *name); /* -1 if unknown */

/* Sizes a row of collective `coll` for `bytes` requested (rounded down to whole
 * elements); false if that leaves nothing to move. */
bool bench_row_init(struct row *r, int coll, size_t bytes, MPI_Comm comm, int root);
/* Buffers, send data, and with check the expected result. */
void bench_row_alloc(struct row *r, bool check);
void bench_row_free(struct row *r);
/* One call of the row's collective; aborts the job if it fails. */
void bench_run(const struct mpi_api *api, const struct row *r);
/* Wrong result elements on this rank, the first one reported on stderr. */
long bench_check_result(const struct row *r, const char *label);

_Noreturn void bench_die(MPI_Comm comm, const char *what);
double bench_now(void);
double *bench_alloc_doubles(int n);
double bench_median(const double *v, int n);
const struct mpi_api *bench_side_api(int side, const struct row *r, const struct options *o);
int bench_choose_iters(const struct row *r, const struct options *o);
void bench_check_block(const struct mpi_api *api, const struct row *r);
/* The modes other than back-to-back: one row, rounds alternating native and mcoll. */
void bench_cold_row(const struct row *r, const struct options *o, struct result *res);
void bench_latency_row(const struct row *r, const struct options *o, struct result *res);

/* Seconds per call of one side's timed block (warmup untimed calls first). */
typedef double (*bench_block_timer)(const struct mpi_api *api, const struct row *r, int warmup,
                                    int iters);
/* A row with native and mcoll alternating, each round's block timed by `timer`. */
void bench_alternating_row(const struct row *r, const struct options *o, struct result *res,
                           bench_block_timer timer);
void *bench_alloc_pages(size_t bytes);

/* back-to-back: warm calls timed as one block (nccl-tests); cold: each of the first
 * -K calls on a fresh communicator; latency: a barrier after every call, only the
 * calls timed (OSU's convention). */
enum bench_mode { MODE_BACK_TO_BACK, MODE_COLD, MODE_LATENCY };

struct options {
    enum bench_mode mode;
    int cold_calls; /* -K: calls timed one by one on each fresh communicator */
    size_t min_bytes, max_bytes, max_buffer;
    double factor;
    int iters, warmup, rounds, max_iters, root; /* iters 0, warmup -1: adapt */
    double round_seconds;
    bool check;
    bool want[BENCH_NCOLLS];
    const char *json_path;
    /* -A a,b: two mcoll algorithms of one collective in place of native and mcoll */
    const char *versus[2];
};

struct result {
    const char *coll;
    size_t bytes, total;
    int count, iters, warmup;
    double busbw_factor;
    double native, mcoll;   /* seconds per call, medians over rounds */
    double memcpy_gbs;      /* single-thread memcpy of total bytes */
    double *native_samples, *mcoll_samples; /* one per round */
    /* Cold mode (native, mcoll above are the medians of calls 1..cold_calls). Every
     * number is a median over rounds of the slowest rank's time. */
    int cold_calls;
    double native_setup, mcoll_setup;   /* the first barrier on the fresh communicator */
    double native_first, mcoll_first;   /* its first call */
    double native_first10, mcoll_first10; /* median of calls 1..10 */
    double native_warm, mcoll_warm;     /* the same calls timed alike once warm */
    double *native_per_call, *mcoll_per_call; /* [cold_calls], call 1 first */
};

struct run_info {
    int argc;
    char **argv;
    const char *mpi_version, *flavour, *mcoll_version; /* mcoll_version NULL: not loaded */
    char hostname[256], date[64];
    int nprocs;
};

void bench_print_header(const struct run_info *ri, const struct options *o);
void bench_print_result(const struct result *s);
/* Rewritten after every row, so that a job cut short still leaves its rows. */
void bench_write_json(const char *path, const struct run_info *ri, const struct options *o,
                      const struct result *res, int nres, bool complete);

#endif
