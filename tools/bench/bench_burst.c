/* mcoll-bench's burst mode (-m burst): -K non-blocking calls of one collective in
 * flight on one communicator at once (each on buffers of its own), then completed
 * with MPI_Waitall; a barrier after every burst, only the bursts timed.
 *
 * Three sides take turns in every round, in a rotating order: the host MPI's
 * (PMPI_I<coll>), mcoll with MCOLL_TASK_WINDOW=1 (a communicator's calls one after
 * the other) and mcoll with the window at its largest (calls that declare
 * themselves independent run side by side: task/task.h). A row reports per side the
 * median over rounds of the slowest rank's median burst, per call. */
#include "bench.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SIDE_HOST, SIDE_SERIAL, SIDE_WINDOW, NSIDES, BURST_MAX = 64 };
static const char *const side_names[NSIDES] = {"host", "window_1", "window_4"};

static const struct mpi_api *side_api(int side)
{
    if (side == SIDE_HOST)
        return &bench_native_api;
    static int (*set_param)(const char *, const char *);
    if (!set_param)
        set_param = (int (*)(const char *, const char *))dlsym(RTLD_DEFAULT, "mcoll_set_param");
    if (!set_param || set_param("TASK_WINDOW", side == SIDE_SERIAL ? "1" : "4") != 0)
        bench_usage_exit("-m burst: mcoll not loaded, or without MCOLL_TASK_WINDOW");
    return &bench_mcoll_api;
}

/* The slowest rank's median burst, per call. */
static double time_bursts(const struct mpi_api *api, struct row *rows, int k, int warmup,
                          int iters)
{
    MPI_Request req[BURST_MAX];
    double *t = bench_alloc_doubles(iters);
    for (int i = -warmup; i < iters; i++) {
        double start = bench_now();
        for (int j = 0; j < k; j++)
            bench_post(api, &rows[j], &req[j]);
        for (int j = k - 1; j >= 0; j--) /* the newest first: completion in any order */
            bench_wait(api, &rows[j], &req[j]);
        if (i >= 0)
            t[i] = (bench_now() - start) / k;
        api->barrier(rows[0].comm);
    }
    double mine = bench_median(t, iters), slowest;
    PMPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, rows[0].comm);
    free(t);
    return slowest;
}

void bench_burst(const struct run_info *ri, const struct options *o, MPI_Comm comm)
{
    int rank, p;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &p);
    int k = o->cold_calls < BURST_MAX ? o->cold_calls : BURST_MAX;
    int iters = o->iters > 0 ? o->iters : 50, warmup = o->warmup >= 0 ? o->warmup : 5;
    FILE *json = rank == 0 && o->json_path ? fopen(o->json_path, "w") : NULL;
    if (json)
        fprintf(json, "{\"mode\": \"burst\", \"nprocs\": %d, \"mpi\": \"%s\", \"host\": \"%s\", "
                      "\"date\": \"%s\", \"rounds\": %d, \"calls_in_flight\": %d, \"iters\": %d, "
                      "\"rows\": [\n",
                p, ri->flavour ? ri->flavour : "", ri->hostname, ri->date, o->rounds, k, iters);
    if (rank == 0)
        printf("# burst: %d ranks, %d calls in flight per communicator, then Waitall; %d bursts "
               "per block, %d rounds (medians, slowest rank), us per call\n"
               "# %-14s %10s %10s %10s %10s %12s\n",
               p, k, iters, o->rounds, "coll", "bytes", "host_us", "window1_us", "window4_us",
               "w1/w4");
    int first = 1;
    for (int coll = 0; coll < BENCH_NCOLLS; coll++) {
        if (!o->want[coll])
            continue;
        for (size_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes = (size_t)(bytes * o->factor)) {
            struct row rows[BURST_MAX];
            int ok = 1;
            for (int j = 0; j < k && ok; j++) {
                ok = bench_row_init(&rows[j], coll, bytes, comm, o->root);
                if (ok)
                    bench_row_alloc(&rows[j], false);
            }
            if (!ok)
                break;
            double *samples = bench_alloc_doubles(NSIDES * o->rounds);
            for (int round = 0; round < o->rounds; round++)
                for (int turn = 0; turn < NSIDES; turn++) {
                    int side = (turn + round) % NSIDES;
                    samples[side * o->rounds + round] =
                        time_bursts(side_api(side), rows, k, warmup, iters);
                }
            double med[NSIDES];
            for (int s = 0; s < NSIDES; s++)
                med[s] = bench_median(samples + s * o->rounds, o->rounds);
            if (rank == 0)
                printf("  %-14s %10zu %10.2f %10.2f %10.2f %12.2f\n", rows[0].name, rows[0].block,
                       med[0] * 1e6, med[1] * 1e6, med[2] * 1e6, med[1] / med[2]);
            if (json) {
                fprintf(json, "%s  {\"coll\": \"%s\", \"bytes\": %zu", first ? "" : ",\n",
                        rows[0].name, rows[0].block);
                for (int s = 0; s < NSIDES; s++) {
                    fprintf(json, ", \"%s_us\": %.4f, \"%s_samples_us\": [", side_names[s],
                            med[s] * 1e6, side_names[s]);
                    for (int round = 0; round < o->rounds; round++)
                        fprintf(json, "%s%.4f", round ? ", " : "", samples[s * o->rounds + round] * 1e6);
                    fputc(']', json);
                }
                fputc('}', json);
                first = 0;
            }
            free(samples);
            for (int j = 0; j < k; j++)
                bench_row_free(&rows[j]);
            if (o->factor <= 1)
                break;
        }
    }
    if (json) {
        fputs("\n]}\n", json);
        fclose(json);
    }
}
