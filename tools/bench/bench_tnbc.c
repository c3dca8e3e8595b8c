/* -m tnbc: overlap of a blocking collective with the computation after it (the T-NBC
 * paper's table 1, docs/tnbc.md). One job, three sides alternating in every round: the
 * host MPI (PMPI_*), mcoll with T-NBC off and on (toggled through mcoll_tnbc_enable,
 * found with dlsym; without it only the first two).
 *
 * Per collective (alltoall of -e bytes per block, bcast of -e bytes):
 *   Tcomm  the call alone (T-NBC on: Tinit, the time to return);
 *   scenarios after the call: CURC, computation unrelated to the data, of ~1.2 Tcomm;
 *   CRC, a pass over the received blocks in order at a rate that would take ~0.5
 *   Tcomm on ready data; and CURC 0.3 Tcomm then CRC 0.5 Tcomm.
 * T_total after work ends when the call's data is in (settled), T_CURC and T_CRC the work
 * alone, timed in every round among the sides.
 * Overlap = Tcomm(off) + T_CURC + T_CRC - T_total(side), hidden = overlap/Tcomm(off),
 * next to the model min(Tcomm - Tinit, T_CURC + Tcomm*Rcomm/R_CRC) (= T_CURC +
 * T_CRC, Dcomm/R_CRC being the time to consume everything). Times are the slowest
 * rank's, medians over the rounds. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

/* With -V NAME=a,b a fourth side: T-NBC on with MCOLL_NAME=b (tnbc_on has a), an A/B
 * of a T-NBC parameter inside the job. */
enum { SIDE_HOST, SIDE_OFF, SIDE_ON, SIDE_ON_V, NSIDES };
static const char *const side_names[NSIDES] = {"host", "tnbc_off", "tnbc_on", "tnbc_on_v"};
enum { SC_ALONE, SC_CURC, SC_CRC, SC_BOTH, NSCEN };
static const char *const scen_names[NSCEN] = {"call", "curc", "crc", "curc+crc"};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Computation that touches no received data: a dependent chain of flops. */
static double curc_sink;
static void curc(long iters) {
    double x = 1.0;
    for (long i = 0; i < iters; i++) x = x * 1.0000001 + 1e-9;
    curc_sink += x;
}

/* Computation consuming the received data in order (address order: block 0 first),
 * passes times over each 64 KiB piece before the next. */
static uint64_t crc_sink;
static void crc(const uint64_t *data, size_t bytes, int passes) {
    size_t words = bytes / 8, piece = 8192;
    uint64_t h = 0;
    for (size_t at = 0; at < words; at += piece) {
        size_t end = at + piece < words ? at + piece : words;
        for (int p = 0; p < passes; p++)
            for (size_t i = at; i < end; i++) h = h * 31 + data[i];
    }
    crc_sink += h;
}

struct tnbc_coll {
    const char *name;
    size_t recv_bytes, send_bytes;
    int count; /* of MPI_BYTE: per block (alltoall), whole (bcast) */
};

static int (*tnbc_enable)(int);
static int (*set_param)(const char *, const char *);
static const struct options *opts;

static void call(const struct tnbc_coll *c, int side, void *send, void *recv, MPI_Comm comm) {
    if (!strcmp(c->name, "alltoall")) {
        (side == SIDE_HOST ? PMPI_Alltoall : MPI_Alltoall)(send, c->count, MPI_BYTE, recv, c->count,
                                                           MPI_BYTE, comm);
    } else {
        (side == SIDE_HOST ? PMPI_Bcast : MPI_Bcast)(recv, c->count, MPI_BYTE, 0, comm);
    }
}

/* One timed run: the call, then the scenario's work; the slowest rank's seconds. */
static double run(const struct tnbc_coll *c, int side, int scen, void *send, void *recv,
                  long curc_iters, int crc_passes, MPI_Comm comm) {
    if (tnbc_enable) tnbc_enable(side >= SIDE_ON);
    if (set_param && side >= SIDE_ON) set_param(opts->vary_param, opts->vary[side == SIDE_ON_V]);
    MPI_Barrier(comm);
    double t0 = now();
    call(c, side, send, recv, comm);
    if (scen == SC_CURC || scen == SC_BOTH) curc(scen == SC_BOTH ? curc_iters / 4 : curc_iters);
    if (scen == SC_CRC || scen == SC_BOTH) crc(recv, c->recv_bytes, crc_passes);
    /* after work, the data in before the clock stops (mcoll_tnbc_enable settles every
     * pending call), as the program's next MPI call would wait for it; the call alone
     * stops at its return (Tinit) */
    if (tnbc_enable && scen != SC_ALONE) tnbc_enable(side >= SIDE_ON);
    double t = now() - t0, slowest = 0;
    MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
    return slowest;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Seconds of the work alone, on ready data (the slowest rank's, median of n <= 5). */
static double work_alone(int scen, const struct tnbc_coll *c, void *recv, long curc_iters,
                         int crc_passes, MPI_Comm comm, int n) {
    double t[5];
    for (int i = 0; i < n; i++) {
        MPI_Barrier(comm);
        double t0 = now();
        if (scen == SC_CURC || scen == SC_BOTH) curc(scen == SC_BOTH ? curc_iters / 4 : curc_iters);
        if (scen == SC_CRC || scen == SC_BOTH) crc(recv, c->recv_bytes, crc_passes);
        double d = now() - t0;
        MPI_Allreduce(&d, &t[i], 1, MPI_DOUBLE, MPI_MAX, comm);
    }
    return median(t, n);
}

void bench_tnbc(const struct run_info *ri, const struct options *o, MPI_Comm comm) {
    int rank, p;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    tnbc_enable = (int (*)(int))dlsym(RTLD_DEFAULT, "mcoll_tnbc_enable");
    if (tnbc_enable && !tnbc_enable(1)) tnbc_enable = NULL; /* T-NBC could not start */
    opts = o;
    set_param = NULL;
    if (tnbc_enable && o->vary_param) {
        set_param = (int (*)(const char *, const char *))dlsym(RTLD_DEFAULT, "mcoll_set_param");
        if (!set_param || set_param(o->vary_param, o->vary[0]) != 0)
            bench_usage_exit("-V: mcoll not loaded, or not a parameter it can change while running");
    }
    int nsides = tnbc_enable ? (set_param ? NSIDES : SIDE_ON_V) : SIDE_ON;
    size_t block = o->max_bytes;
    FILE *json = rank == 0 && o->json_path ? fopen(o->json_path, "w") : NULL;
    if (json)
        fprintf(json, "{\"mode\": \"tnbc\", \"nprocs\": %d, \"mpi\": \"%s\", \"host\": \"%s\", "
                      "\"date\": \"%s\", \"rounds\": %d, \"tnbc_available\": %s, \"rows\": [\n",
                p, ri->flavour ? ri->flavour : "", ri->hostname, ri->date, o->rounds,
                tnbc_enable ? "true" : "false");
    if (rank == 0 && set_param)
        printf("# tnbc_on: MCOLL_%s=%s, tnbc_on_v: =%s\n", o->vary_param, o->vary[0], o->vary[1]);
    if (rank == 0)
        printf("# tnbc overlap: %d ranks, %zu bytes per block, %d rounds (medians, slowest rank)\n"
               "# %-8s %-9s %-9s %10s %10s %10s %10s %8s %10s\n",
               p, block, o->rounds, "coll", "scenario", "side", "total_ms", "tcomm_ms", "work_ms",
               "overlap_ms", "hidden", "model_ms");
    const char *names[] = {"alltoall", "bcast"};
    int first_row = 1;
    for (int ci = 0; ci < 2; ci++) {
        if (!o->want[bench_coll_index(names[ci])]) continue;
        struct tnbc_coll c = {names[ci], 0, 0, 0};
        if (ci == 0) {
            c.recv_bytes = c.send_bytes = block * (size_t)p;
            c.count = (int)block;
        } else {
            c.recv_bytes = block;
            c.count = (int)block;
        }
        void *send = bench_alloc_pages(c.send_bytes ? c.send_bytes : 8);
        void *recv = malloc(c.recv_bytes); /* (as an application's: not page-aligned) */
        memset(send, 1, c.send_bytes);
        memset(recv, 2, c.recv_bytes);
        /* Tcomm with T-NBC off, to size the work */
        double t[64];
        int calib = 5;
        for (int i = 0; i < 2; i++) run(&c, SIDE_OFF, SC_ALONE, send, recv, 0, 0, comm); /* warm-up */
        for (int i = 0; i < calib; i++) t[i] = run(&c, SIDE_OFF, SC_ALONE, send, recv, 0, 0, comm);
        double tcomm = median(t, calib);
        /* CURC: ~1.2 Tcomm; CRC: ~0.5 Tcomm on ready data */
        double t0 = now();
        curc(1000000);
        double per_iter = (now() - t0) / 1e6;
        long curc_iters = (long)(1.2 * tcomm / per_iter);
        MPI_Bcast(&curc_iters, 1, MPI_LONG, 0, comm);
        t0 = now();
        crc(recv, c.recv_bytes, 1);
        double per_pass = now() - t0;
        int crc_passes = (int)(0.5 * tcomm / per_pass + 0.5);
        if (crc_passes < 1) crc_passes = 1;
        MPI_Bcast(&crc_passes, 1, MPI_INT, 0, comm);
        if (rank == 0)
            printf("# %s: calibration Tcomm(off) %.3f ms, CURC %ld iterations, CRC %d passes\n",
                   c.name, 1e3 * tcomm, curc_iters, crc_passes);
        /* rounds: every side and scenario once per round, sides alternating; the work
         * alone takes its turn among them (slot nsides), so that a load that changes
         * during the job moves the work's time and the sides' alike */
        int rounds = o->rounds < 64 ? o->rounds : 64;
        double *samples = calloc((size_t)(NSIDES * NSCEN * rounds), sizeof *samples);
        double *work_samples = calloc((size_t)(NSCEN * rounds), sizeof *work_samples);
        for (int r = 0; r < rounds; r++)
            for (int s = 0; s < NSCEN; s++)
                for (int slot = 0; slot <= nsides; slot++) {
                    int sd = (slot + r) % (nsides + 1); /* (who goes first rotates) */
                    if (sd == nsides) {
                        if (s != SC_ALONE)
                            work_samples[s * rounds + r] =
                                work_alone(s, &c, recv, curc_iters, crc_passes, comm, 1);
                        continue;
                    }
                    samples[(sd * NSCEN + s) * rounds + r] =
                        run(&c, sd, s, send, recv, curc_iters, crc_passes, comm);
                }
        double work[NSCEN] = {0};
        for (int s = 1; s < NSCEN; s++) {
            double sorted[64];
            memcpy(sorted, &work_samples[s * rounds], (size_t)rounds * sizeof *sorted);
            work[s] = median(sorted, rounds);
        }
        double med[NSIDES][NSCEN];
        for (int side = 0; side < nsides; side++)
            for (int s = 0; s < NSCEN; s++) med[side][s] = median(&samples[(side * NSCEN + s) * rounds], rounds);
        double tcomm_off = med[SIDE_OFF][SC_ALONE];
        for (int s = 0; s < NSCEN; s++)
            for (int side = 0; side < nsides; side++) {
                double tc = side == SIDE_HOST ? med[SIDE_HOST][SC_ALONE] : tcomm_off;
                double tinit = med[side][SC_ALONE];
                double overlap = s == SC_ALONE ? 0 : tc + work[s] - med[side][s];
                double model = s == SC_ALONE || side < SIDE_ON ? 0
                               : (tc - tinit < work[s] ? tc - tinit : work[s]);
                if (rank == 0)
                    printf("  %-8s %-9s %-9s %10.3f %10.3f %10.3f %10.3f %7.0f%% %10.3f\n", c.name,
                           scen_names[s], side_names[side], 1e3 * med[side][s], 1e3 * tc,
                           1e3 * work[s], 1e3 * overlap, 100 * overlap / tc, 1e3 * model);
                if (json) {
                    fprintf(json, "%s  {\"coll\": \"%s\", \"block\": %zu, \"scenario\": \"%s\", "
                                  "\"side\": \"%s\", \"total_s\": %.6g, \"tcomm_s\": %.6g, "
                                  "\"tinit_s\": %.6g, \"work_s\": %.6g, \"overlap_s\": %.6g, "
                                  "\"hidden\": %.4f, \"model_s\": %.6g, \"samples_s\": [",
                            first_row ? "" : ",\n", c.name, block, scen_names[s], side_names[side],
                            med[side][s], tc, tinit, work[s], overlap, overlap / tc, model);
                    for (int r = 0; r < rounds; r++)
                        fprintf(json, "%s%.6g", r ? ", " : "", samples[(side * NSCEN + s) * rounds + r]);
                    fprintf(json, "], \"work_samples_s\": [");
                    for (int r = 0; s != SC_ALONE && r < rounds; r++)
                        fprintf(json, "%s%.6g", r ? ", " : "", work_samples[s * rounds + r]);
                    fprintf(json, "]}");
                    first_row = 0;
                }
            }
        free(samples);
        free(work_samples);
        free(recv);
        free(send);
    }
    if (json) {
        fprintf(json, "\n]}\n");
        fclose(json);
    }
    if (tnbc_enable) tnbc_enable(1);
}
