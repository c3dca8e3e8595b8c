/* mcoll-bench internals shared by its files:
 *   bench_colls.c   the collectives: calls, buffer layouts, send data, result checks
 *   bench_output.c  the stdout table and the JSON file
 *   bench_modes.c   the cold and latency modes (-m cold, -m latency)
 *   bench_nbc.c     non-blocking, persistent and overlap (-m nbc); the idle progress
 *                   thread and a compute loop (-m idle)
 *   bench_calibrate.c  the performance model's machine file (--calibrate)
 *   bench_rows.c    timing a row: the clock, medians, iteration counts, each side's
 *                   calls, memcpy's rate, the alternating rounds (forced algorithms too)
 *   mcoll_bench.c   options, the list of rows, main */
#ifndef MCOLL_BENCH_H
#define MCOLL_BENCH_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define BENCH_NCOLLS 16

/* Persistent collectives (MPI_Bcast_init, ...) came with MPI 4.0: MPICH 4 has them;
 * Open MPI 4.1 has the same calls as MPIX_Bcast_init, ... in its pcollreq extension
 * (mpi-ext.h). BENCH_PINIT_NATIVE / _MCOLL: the prefix of the host's and of the
 * intercepted names. */
#if MPI_VERSION >= 4
#define BENCH_PERSISTENT 1
#define BENCH_PINIT_NATIVE PMPI_
#define BENCH_PINIT_MCOLL MPI_
#elif defined(OPEN_MPI) && __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define BENCH_PERSISTENT 1
#define BENCH_PINIT_NATIVE PMPIX_
#define BENCH_PINIT_MCOLL MPIX_
#endif
#endif
#ifndef BENCH_PERSISTENT
#define BENCH_PERSISTENT 0
#endif

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
    /* Non-blocking forms, and the request calls of the same side. */
    int (*ibarrier)(MPI_Comm, MPI_Request *);
    int (*ibcast)(void *, int, MPI_Datatype, int, MPI_Comm, MPI_Request *);
    int (*ireduce)(const void *, void *, int, MPI_Datatype, MPI_Op, int, MPI_Comm,
                   MPI_Request *);
    int (*iallreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request *);
    int (*iallgather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm,
                      MPI_Request *);
    int (*iallgatherv)(const void *, int, MPI_Datatype, void *, const int[], const int[],
                       MPI_Datatype, MPI_Comm, MPI_Request *);
    int (*igather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int, MPI_Comm,
                   MPI_Request *);
    int (*igatherv)(const void *, int, MPI_Datatype, void *, const int[], const int[],
                    MPI_Datatype, int, MPI_Comm, MPI_Request *);
    int (*iscatter)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int, MPI_Comm,
                    MPI_Request *);
    int (*iscatterv)(const void *, const int[], const int[], MPI_Datatype, void *, int,
                     MPI_Datatype, int, MPI_Comm, MPI_Request *);
    int (*ialltoall)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm,
                     MPI_Request *);
    int (*ialltoallv)(const void *, const int[], const int[], MPI_Datatype, void *,
                      const int[], const int[], MPI_Datatype, MPI_Comm, MPI_Request *);
    int (*ireduce_scatter_block)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm,
                                 MPI_Request *);
    int (*ireduce_scatter)(const void *, void *, const int[], MPI_Datatype, MPI_Op, MPI_Comm,
                           MPI_Request *);
    int (*iscan)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request *);
    int (*iexscan)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request *);
    int (*wait)(MPI_Request *, MPI_Status *);
    int (*start)(MPI_Request *);
    int (*request_free)(MPI_Request *);
#if BENCH_PERSISTENT
    int (*barrier_init)(MPI_Comm, MPI_Info, MPI_Request *);
    int (*bcast_init)(void *, int, MPI_Datatype, int, MPI_Comm, MPI_Info, MPI_Request *);
    int (*reduce_init)(const void *, void *, int, MPI_Datatype, MPI_Op, int, MPI_Comm,
                       MPI_Info, MPI_Request *);
    int (*allreduce_init)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Info,
                          MPI_Request *);
    int (*allgather_init)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype,
                          MPI_Comm, MPI_Info, MPI_Request *);
    int (*allgatherv_init)(const void *, int, MPI_Datatype, void *, const int[], const int[],
                           MPI_Datatype, MPI_Comm, MPI_Info, MPI_Request *);
    int (*gather_init)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int,
                       MPI_Comm, MPI_Info, MPI_Request *);
    int (*gatherv_init)(const void *, int, MPI_Datatype, void *, const int[], const int[],
                        MPI_Datatype, int, MPI_Comm, MPI_Info, MPI_Request *);
    int (*scatter_init)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int,
                        MPI_Comm, MPI_Info, MPI_Request *);
    int (*scatterv_init)(const void *, const int[], const int[], MPI_Datatype, void *, int,
                         MPI_Datatype, int, MPI_Comm, MPI_Info, MPI_Request *);
    int (*alltoall_init)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm,
                         MPI_Info, MPI_Request *);
    int (*alltoallv_init)(const void *, const int[], const int[], MPI_Datatype, void *,
                          const int[], const int[], MPI_Datatype, MPI_Comm, MPI_Info,
                          MPI_Request *);
    int (*reduce_scatter_block_init)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm,
                                     MPI_Info, MPI_Request *);
    int (*reduce_scatter_init)(const void *, void *, const int[], MPI_Datatype, MPI_Op,
                               MPI_Comm, MPI_Info, MPI_Request *);
    int (*scan_init)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Info,
                     MPI_Request *);
    int (*exscan_init)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Info,
                       MPI_Request *);
#endif
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
/* Its non-blocking form posted (and, for bench_wait, completed); aborts on failure. */
void bench_post(const struct mpi_api *api, const struct row *r, MPI_Request *req);
void bench_wait(const struct mpi_api *api, const struct row *r, MPI_Request *req);
#if BENCH_PERSISTENT
/* Its persistent form (MPI_<Coll>_init), not started. */
void bench_persistent_init(const struct mpi_api *api, const struct row *r, MPI_Request *req);
#endif
/* Wrong result elements on this rank, the first one reported on stderr. */
long bench_check_result(const struct row *r, const char *label);

_Noreturn void bench_die(MPI_Comm comm, const char *what);
/* For a bad option that every rank of MPI_COMM_WORLD meets alike: rank 0 says what,
 * every rank finalizes and exits 1. An abort may kill the launcher's forwarding before
 * the message gets out (MPICH's Hydra does, now and then). */
_Noreturn void bench_usage_exit(const char *what);
double bench_now(void);
double *bench_alloc_doubles(int n);
/* A barrier the waiting ranks sleep in (Ibarrier, tested every 0.2 ms), so that they
 * leave the cores to the ranks measuring (rank 0's memcpy, --calibrate). */
void bench_sleepy_barrier(MPI_Comm comm);
double bench_median(const double *v, int n);
const struct mpi_api *bench_side_api(int side, const struct row *r, const struct options *o);
int bench_choose_iters(const struct row *r, const struct options *o);
void bench_check_block(const struct mpi_api *api, const struct row *r);
/* The modes other than back-to-back: one row, rounds alternating native and mcoll. */
void bench_cold_row(const struct row *r, const struct options *o, struct result *res);
void bench_latency_row(const struct row *r, const struct options *o, struct result *res);
void bench_nbc_row(const struct row *r, const struct options *o, struct result *res);
/* -m idle: the whole job (no rows); writes the JSON itself. */
struct run_info;
void bench_idle(const struct run_info *ri, const struct options *o, MPI_Comm comm);
/* -m tnbc (bench_tnbc.c): blocking alltoall/bcast of -e bytes followed by computation,
 * host vs. mcoll with T-NBC off and on, alternating; its own table and JSON. */
void bench_tnbc(const struct run_info *ri, const struct options *o, MPI_Comm comm);
/* -m burst (bench_burst.c): -K non-blocking calls in flight on one communicator, then
 * Waitall; host vs. mcoll with its calls one after the other vs. side by side. */
void bench_burst(const struct run_info *ri, const struct options *o, MPI_Comm comm);
/* -m arrival (bench_arrival.c): bcast under the arrival delays of -D, timed from the
 * last arrival; host vs. mcoll's fixed leader vs. its first arrival between nodes. */
void bench_arrival(const struct run_info *ri, const struct options *o, MPI_Comm comm);
/* --calibrate (-m calibrate): the whole job; writes the model's machine JSON (-o). */
void bench_calibrate(const struct run_info *ri, const struct options *o, MPI_Comm comm);

/* Seconds per call of one side's timed block (warmup untimed calls first). */
typedef double (*bench_block_timer)(const struct mpi_api *api, const struct row *r, int warmup,
                                    int iters);
/* A row with native and mcoll alternating, each round's block timed by `timer`. */
void bench_alternating_row(const struct row *r, const struct options *o, struct result *res,
                           bench_block_timer timer);
/* A result's description of its row (name, sizes, calls timed per block). */
void bench_result_of_row(struct result *res, const struct row *r, int iters, int warmup);
/* The back-to-back mode's timer: warm calls timed as one block. */
double bench_time_block(const struct mpi_api *api, const struct row *r, int warmup, int iters);
/* memcpy GB/s by size, measured once per size in a job (rank 0; collective). */
struct memcpy_rates {
    int n, cap;
    size_t *bytes;
    double *gbs;
};
double bench_memcpy_gbs(struct memcpy_rates *mr, size_t bytes, const struct options *o,
                        MPI_Comm comm, int rank);
void *bench_alloc_pages(size_t bytes);

/* back-to-back: warm calls timed as one block (nccl-tests); cold: each of the first
 * -K calls on a fresh communicator; latency: a barrier after every call, only the
 * calls timed (OSU's convention). */
enum bench_mode { MODE_BACK_TO_BACK, MODE_COLD, MODE_LATENCY, MODE_NBC, MODE_IDLE, MODE_TNBC,
                  MODE_CALIBRATE, MODE_BURST, MODE_ARRIVAL };

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
    /* -V NAME=a,b: mcoll with parameter MCOLL_NAME at a (the native columns) and b */
    bool forced_sweep;   /* -F: each round also times every mcoll algorithm forced */
    bool forced_inter;   /* -X: -F over the algorithms between nodes */
    const char *vary_param;
    const char *vary[2];
    const char *arrival; /* -D: arrival mode's delays (random:US, late:RANK:US) */
    double idle_seconds; /* -I: idle mode's sleep with nothing pending */
    long compute_work;   /* -W: idle mode's compute loop, iterations */
    bool nbc_mean;       /* -a: nbc mode's blocks average their calls (else median) */
    bool no_persistent;  /* -P: nbc mode without the persistent block */
};

struct result {
    const char *coll;
    size_t bytes, total;
    int count, iters, warmup;
    double busbw_factor;
    double native, mcoll;   /* seconds per call, medians over rounds */
    /* -F: the fastest forced algorithm (median over rounds) and every algorithm's;
     * forced_n 0 without -F. */
    int forced_n;
    const char *forced_alg[8];
    double forced[8];
    int forced_best;
    bool forced_inter;  /* -X: the forced ones are the algorithms between nodes */
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
    /* nbc mode: [0] native, [1] mcoll; seconds, medians over rounds of the slowest
     * rank's per-call average (native, mcoll above: post + wait). */
    bool nbc;
    double blocking[2];   /* the blocking call, latency mode */
    double post_wait[2];  /* MPI_I<coll> + MPI_Wait, a barrier after each */
    double compute[2];    /* the busy loop alone, sized to post_wait */
    double with_compute[2]; /* post, the same busy loop, wait */
    double compute_in[2]; /* the busy loop inside total (OSU's t_compute) */
    double start_wait[2]; /* persistent: MPI_Start + MPI_Wait; NAN without */
    double overlap[2];    /* % = 100 (1 - (total - compute) / post_wait) */
    double overlap_osu[2]; /* the same with compute_in, as OSU computes it */
    double progress_pct[2]; /* mcoll's progress thread's CPU time over the overlapped
                               calls' time, % of a core (slowest rank; NAN: none) */
};

struct run_info {
    int argc;
    char **argv;
    const char *mpi_version, *flavour, *mcoll_version; /* mcoll_version NULL: not loaded */
    const char *progress_thread; /* MCOLL_PROGRESS_THREAD of the environment, or NULL */
    char hostname[256], date[64];
    int nprocs;
};

void bench_print_header(const struct run_info *ri, const struct options *o);
void bench_print_result(const struct result *s);
/* Rewritten after every row, so that a job cut short still leaves its rows. */
void bench_write_json(const char *path, const struct run_info *ri, const struct options *o,
                      const struct result *res, int nres, bool complete);
/* The JSON's header fields up to and including "notes", shared with the idle mode. */
void bench_json_head(FILE *f, const struct run_info *ri, const struct options *o,
                     bool complete);
void bench_json_string(FILE *f, const char *s);
void bench_json_number(FILE *f, double v);
const char *bench_mode_name(enum bench_mode mode);

#endif
