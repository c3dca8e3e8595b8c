/* mcoll-bench's output: the table on stdout and the JSON file (tools/py reads it). */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static double gbs(size_t bytes, double seconds)
{
    return bytes / seconds / 1e9;
}

const char *bench_mode_name(enum bench_mode mode)
{
    switch (mode) {
    case MODE_COLD: return "cold";
    case MODE_LATENCY: return "latency";
    case MODE_NBC: return "nbc";
    case MODE_IDLE: return "idle";
    case MODE_TNBC: return "tnbc";
    case MODE_CALIBRATE: return "calibrate";
    case MODE_BURST: return "burst";
    case MODE_ARRIVAL: return "arrival";
    default: return "back2back";
    }
}

static void print_nbc_header(const struct options *o)
{
    printf("# nbc: a block's time per call is the %s of its calls, the slowest rank's\n",
           o->nbc_mean ? "average" : "median");
    printf("# nbc: per side a block each of the blocking call (blk), I<coll> + wait (p+w), "
           "the busy loop alone sized to p+w (comp), I<coll> + loop + wait (tot)%s; a "
           "barrier of the side after every call, the calls alone timed\n",
           BENCH_PERSISTENT ? ", persistent start + wait (s+w)" : "");
    printf("# overlap %% = 100 (1 - (tot - comp) / p+w); osu: with the loop's time inside "
           "tot; pw/b = mcoll p+w / mcoll blk%s\n",
           BENCH_PERSISTENT ? ", sw/b = mcoll s+w / mcoll blk"
                            : "; no persistent collectives in this MPI");
    printf("#\n# %-20s %9s %9s %9s %9s %9s %9s %9s", "coll", "bytes", "blk_n", "blk_m", "p+w_n",
           "p+w_m", "comp_m", "tot_m");
    if (BENCH_PERSISTENT)
        printf(" %9s %9s", "s+w_n", "s+w_m");
    printf(" %7s %7s %7s %6s", "ovl_n%", "ovl_m%", "osu_m%", "pw/b");
    if (BENCH_PERSISTENT)
        printf(" %6s", "sw/b");
    printf(" %6s %6s %6s\n", "ratio", "pt_n%", "pt_m%");
    fflush(stdout);
}

static void print_nbc_result(const struct result *s)
{
    printf("  %-20s %9zu %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f", s->coll, s->bytes,
           s->blocking[0] * 1e6, s->blocking[1] * 1e6, s->post_wait[0] * 1e6,
           s->post_wait[1] * 1e6, s->compute[1] * 1e6, s->with_compute[1] * 1e6);
    if (BENCH_PERSISTENT)
        printf(" %9.2f %9.2f", s->start_wait[0] * 1e6, s->start_wait[1] * 1e6);
    printf(" %7.1f %7.1f %7.1f %6.2f", s->overlap[0], s->overlap[1], s->overlap_osu[1],
           s->post_wait[1] / s->blocking[1]);
    if (BENCH_PERSISTENT)
        printf(" %6.2f", s->start_wait[1] / s->blocking[1]);
    printf(" %6.2f %6.1f %6.1f\n", s->native / s->mcoll, s->progress_pct[0], s->progress_pct[1]);
    fflush(stdout);
}

static void print_cold_header(const struct options *o)
{
    printf("# cold: a fresh communicator per side and round; setup = its first barrier "
           "(mcoll builds its context), then calls 1..%d timed one by one (host barrier "
           "before each), warm = the same after 256 more calls\n",
           o->cold_calls);
    printf("# times in us, median over rounds per call index of the slowest rank; "
           "c/w = median of calls 1..%d / warm; ratio = native/mcoll of calls 1..%d\n",
           o->cold_calls, o->cold_calls);
    printf("#\n# %-20s %10s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %6s %6s %7s\n", "coll",
           "bytes", "setup_n", "setup_m", "first_n", "first_m", "1-10_n", "1-10_m", "1-N_n",
           "1-N_m", "warm_n", "warm_m", "c/w_n", "c/w_m", "ratio");
    fflush(stdout);
}

void bench_print_header(const struct run_info *ri, const struct options *o)
{
    const char *v = ri->mpi_version;
    if (o->vary_param)
        printf("# mcoll-bench -V: native = mcoll with MCOLL_%s=%s, mcoll = with %s\n", o->vary_param,
               o->vary[0], o->vary[1]);
    if (o->versus[0])
        printf("# mcoll-bench -A: native = mcoll's %s, mcoll = mcoll's %s\n", o->versus[0],
               o->versus[1]);
    else
        printf("# mcoll-bench: native = PMPI_* (host MPI), mcoll = MPI_* (intercepted)\n");
    printf("# mpi: %.*s\n", (int)strcspn(v, "\n"), v);
    if (ri->mcoll_version)
        printf("# mcoll %s loaded\n", ri->mcoll_version);
    else
        printf("# mcoll NOT loaded: MPI_* is the host MPI, ratios are ~1\n");
    printf("# nprocs %d on %s, %s, rounds %d, ", ri->nprocs, ri->hostname, ri->date, o->rounds);
    if (o->iters > 0)
        printf("iters %d", o->iters);
    else
        printf("iters adapted (block >= %g ms, <= %d)", o->round_seconds * 1e3, o->max_iters);
    if (o->warmup >= 0)
        printf(", warmup %d", o->warmup);
    else
        printf(", warmup iters/10");
    printf(", root %d, check %s\n", o->root, o->check ? "on" : "off");
    printf("# mode %s", bench_mode_name(o->mode));
    if (ri->progress_thread)
        printf(", MCOLL_PROGRESS_THREAD=%s", ri->progress_thread);
    printf("\n");
    if (o->mode == MODE_IDLE || o->mode == MODE_CALIBRATE)
        return;
    if (o->mode == MODE_LATENCY)
        printf("# latency: a barrier of the same side after every call, the calls alone "
               "timed; a rank's average per call, the slowest rank's\n");
    printf("# bytes: per-rank block for allgather*, gather*, scatter*, alltoall*, "
           "reduce_scatter*; whole buffer otherwise. total: largest buffer\n");
    printf("# time: median over rounds of the slowest rank's time per call. "
           "ratio = native/mcoll (> 1: mcoll faster)\n");
    if (o->mode == MODE_COLD) {
        print_cold_header(o);
        return;
    }
    if (o->mode == MODE_NBC) {
        print_nbc_header(o);
        return;
    }
    if (o->forced_sweep)
        printf("# -F: best_us = the fastest mcoll algorithm forced (best_alg), median over rounds; "
               "def/best = mcoll_us / best_us (> 1: the default lost)\n");
    printf("#\n# %-20s %10s %10s %6s %11s %11s %7s %8s %8s %8s %8s %8s", "coll", "bytes",
           "total", "iters", "native_us", "mcoll_us", "ratio", "algbw_n", "algbw_m", "busbw_n",
           "busbw_m", "memcpy");
    if (o->forced_sweep)
        printf(" %11s %-14s %8s", "best_us", "best_alg", "def/best");
    printf("\n");
    printf("# %-20s %10s %10s %6s %11s %11s %7s %8s %8s %8s %8s %8s\n", "", "", "", "", "", "",
           "", "GB/s", "GB/s", "GB/s", "GB/s", "GB/s");
    fflush(stdout);
}

void bench_print_result(const struct result *s)
{
    if (s->nbc) {
        print_nbc_result(s);
        return;
    }
    if (s->cold_calls) {
        printf("  %-20s %10zu %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f "
               "%6.2f %6.2f %7.2f\n",
               s->coll, s->bytes, s->native_setup * 1e6, s->mcoll_setup * 1e6,
               s->native_first * 1e6, s->mcoll_first * 1e6, s->native_first10 * 1e6,
               s->mcoll_first10 * 1e6, s->native * 1e6, s->mcoll * 1e6, s->native_warm * 1e6,
               s->mcoll_warm * 1e6, s->native / s->native_warm, s->mcoll / s->mcoll_warm,
               s->native / s->mcoll);
        fflush(stdout);
        return;
    }
    printf("  %-20s %10zu %10zu %6d %11.2f %11.2f %7.2f", s->coll, s->bytes, s->total, s->iters,
           s->native * 1e6, s->mcoll * 1e6, s->native / s->mcoll);
    if (s->total == 0) {
        printf(" %8s %8s %8s %8s %8s", "-", "-", "-", "-", "-");
    } else {
        double an = gbs(s->total, s->native), am = gbs(s->total, s->mcoll);
        printf(" %8.2f %8.2f %8.2f %8.2f %8.2f", an, am, an * s->busbw_factor,
               am * s->busbw_factor, s->memcpy_gbs);
    }
    if (s->forced_n > 0)
        printf(" %11.2f %-14s %8.2f", s->forced[s->forced_best] * 1e6, s->forced_alg[s->forced_best],
               s->mcoll / s->forced[s->forced_best]);
    if (s->forced_n > 0 && s->forced_inter) /* -X: every forced one, host/that */
        for (int a = 0; a < s->forced_n; a++)
            printf("  %s=%.2f(%.2f)", s->forced_alg[a], s->forced[a] * 1e6, s->native / s->forced[a]);
    printf("\n");
    fflush(stdout);
}

void bench_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* JSON has no NaN: the bandwidths of size-0 rows are null. */
void bench_json_number(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

static void json_key_number(FILE *f, const char *key, double v)
{
    fprintf(f, ", \"%s\": ", key);
    bench_json_number(f, v);
}

static void json_samples_us(FILE *f, const char *key, const double *v, int n)
{
    fprintf(f, ",\n     \"%s\": [", key);
    for (int i = 0; i < n; i++) {
        fputs(i ? ", " : "", f);
        bench_json_number(f, v[i] * 1e6);
    }
    fputc(']', f);
}

static void json_result(FILE *f, const struct result *s, int rounds)
{
    double an = s->total ? gbs(s->total, s->native) : NAN;
    double am = s->total ? gbs(s->total, s->mcoll) : NAN;
    fprintf(f, "    {\"coll\": \"%s\", \"bytes\": %zu, \"total_bytes\": %zu, \"count\": %d",
            s->coll, s->bytes, s->total, s->count);
    fprintf(f, ", \"iters\": %d, \"warmup\": %d,\n     \"native_us\": ", s->iters, s->warmup);
    bench_json_number(f, s->native * 1e6);
    json_key_number(f, "mcoll_us", s->mcoll * 1e6);
    json_key_number(f, "ratio", s->native / s->mcoll);
    fputs(",\n     \"algbw_native_gbs\": ", f);
    bench_json_number(f, an);
    json_key_number(f, "algbw_mcoll_gbs", am);
    json_key_number(f, "busbw_native_gbs", an * s->busbw_factor);
    json_key_number(f, "busbw_mcoll_gbs", am * s->busbw_factor);
    json_key_number(f, "memcpy_gbs", s->total ? s->memcpy_gbs : NAN);
    json_samples_us(f, "native_samples_us", s->native_samples, rounds);
    json_samples_us(f, "mcoll_samples_us", s->mcoll_samples, rounds);
    if (s->forced_n > 0) {
        fputs(",\n     \"best_forced_alg\": ", f);
        bench_json_string(f, s->forced_alg[s->forced_best]);
        json_key_number(f, "best_forced_us", s->forced[s->forced_best] * 1e6);
        fputs(", \"forced_us\": {", f);
        for (int a = 0; a < s->forced_n; a++) {
            fputs(a ? ", " : "", f);
            bench_json_string(f, s->forced_alg[a]);
            fputs(": ", f);
            bench_json_number(f, s->forced[a] * 1e6);
        }
        fputc('}', f);
    }
    if (s->cold_calls) {
        fprintf(f, ",\n     \"cold_calls\": %d", s->cold_calls);
        json_key_number(f, "native_setup_us", s->native_setup * 1e6);
        json_key_number(f, "mcoll_setup_us", s->mcoll_setup * 1e6);
        json_key_number(f, "native_first_us", s->native_first * 1e6);
        json_key_number(f, "mcoll_first_us", s->mcoll_first * 1e6);
        json_key_number(f, "native_first10_us", s->native_first10 * 1e6);
        json_key_number(f, "mcoll_first10_us", s->mcoll_first10 * 1e6);
        json_key_number(f, "native_warm_us", s->native_warm * 1e6);
        json_key_number(f, "mcoll_warm_us", s->mcoll_warm * 1e6);
        json_samples_us(f, "native_per_call_us", s->native_per_call, s->cold_calls);
        json_samples_us(f, "mcoll_per_call_us", s->mcoll_per_call, s->cold_calls);
    }
    if (s->nbc) {
        static const char *side_name[2] = {"native", "mcoll"};
        for (int i = 0; i < 2; i++) {
            const char *n = side_name[i];
            char key[64];
            snprintf(key, sizeof key, "%s_blocking_us", n);
            json_key_number(f, key, s->blocking[i] * 1e6);
            snprintf(key, sizeof key, "%s_post_wait_us", n);
            json_key_number(f, key, s->post_wait[i] * 1e6);
            snprintf(key, sizeof key, "%s_compute_us", n);
            json_key_number(f, key, s->compute[i] * 1e6);
            snprintf(key, sizeof key, "%s_total_us", n);
            json_key_number(f, key, s->with_compute[i] * 1e6);
            snprintf(key, sizeof key, "%s_compute_in_us", n);
            json_key_number(f, key, s->compute_in[i] * 1e6);
            if (!isnan(s->start_wait[i])) { /* no persistent collectives, -P: no keys */
                snprintf(key, sizeof key, "%s_start_wait_us", n);
                json_key_number(f, key, s->start_wait[i] * 1e6);
            }
            snprintf(key, sizeof key, "%s_overlap_pct", n);
            json_key_number(f, key, s->overlap[i]);
            snprintf(key, sizeof key, "%s_overlap_osu_pct", n);
            json_key_number(f, key, s->overlap_osu[i]);
            if (!isnan(s->progress_pct[i])) {
                snprintf(key, sizeof key, "%s_progress_cpu_pct", n);
                json_key_number(f, key, s->progress_pct[i]);
            }
        }
    }
    fputs("}", f);
}

void bench_json_head(FILE *f, const struct run_info *ri, const struct options *o,
                     bool complete)
{
    fprintf(f, "{\n  \"tool\": \"mcoll-bench\",\n  \"format\": 1,\n  \"complete\": %s,\n",
            complete ? "true" : "false");
    fprintf(f, "  \"mode\": \"%s\",\n", bench_mode_name(o->mode));
    if (o->mode == MODE_COLD)
        fprintf(f, "  \"cold_calls\": %d,\n", o->cold_calls);
    if (o->mode == MODE_NBC)
        fprintf(f, "  \"persistent\": %s,\n  \"block_statistic\": \"%s\",\n",
                BENCH_PERSISTENT && !o->no_persistent ? "true" : "false",
                o->nbc_mean ? "mean" : "median");
    fputs("  \"argv\": [", f);
    for (int i = 0; i < ri->argc; i++) {
        fputs(i ? ", " : "", f);
        bench_json_string(f, ri->argv[i]);
    }
    fputs("],\n  \"mpi_library\": ", f);
    bench_json_string(f, ri->mpi_version);
    fputs(",\n  \"flavour\": ", f);
    bench_json_string(f, ri->flavour);
    fprintf(f, ",\n  \"nprocs\": %d,\n  \"hostname\": ", ri->nprocs);
    bench_json_string(f, ri->hostname);
    fputs(",\n  \"date\": ", f);
    bench_json_string(f, ri->date);
    fputs(",\n  \"progress_thread\": ", f);
    if (ri->progress_thread)
        bench_json_string(f, ri->progress_thread);
    else
        fputs("null", f);
    fprintf(f, ",\n  \"mcoll_loaded\": %s,\n  \"mcoll_version\": ",
            ri->mcoll_version ? "true" : "false");
    if (ri->mcoll_version)
        bench_json_string(f, ri->mcoll_version);
    else
        fputs("null", f);
    fprintf(f,
            ",\n  \"rounds\": %d,\n  \"iters\": %d,\n  \"warmup\": %d,\n"
            "  \"round_target_ms\": %g,\n  \"max_iters\": %d,\n  \"root\": %d,\n"
            "  \"check\": %s,\n",
            o->rounds, o->iters, o->warmup, o->round_seconds * 1e3, o->max_iters, o->root,
            o->check ? "true" : "false");
    if (o->versus[0]) { /* -A: the native columns are mcoll's algorithm versus[0] */
        fputs("  \"versus\": [", f);
        bench_json_string(f, o->versus[0]);
        fputs(", ", f);
        bench_json_string(f, o->versus[1]);
        fputs("],\n", f);
    }
    if (o->vary_param) { /* -V: the two sides are mcoll with the parameter at vary[0], vary[1] */
        fputs("  \"vary\": {\"param\": ", f);
        bench_json_string(f, o->vary_param);
        fputs(", \"values\": [", f);
        bench_json_string(f, o->vary[0]);
        fputs(", ", f);
        bench_json_string(f, o->vary[1]);
        fputs("]},\n", f);
    }
    fputs("  \"notes\": {\"iters\": \"0 (warmup -1): adapted per result\", "
          "\"bytes\": \"per-rank block for allgather(v), gather(v), scatter(v), alltoall(v), "
          "reduce_scatter(_block); whole buffer otherwise\", "
          "\"total_bytes\": \"largest buffer on a rank; algbw = total_bytes / time\", "
          "\"times\": \"per call, slowest rank, median over rounds\"},\n",
          f);
}

void bench_write_json(const char *path, const struct run_info *ri, const struct options *o,
                      const struct result *res, int nres, bool complete)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "mcoll-bench: cannot write %s: %s\n", tmp, strerror(errno));
        return;
    }
    bench_json_head(f, ri, o, complete);
    fputs("  \"results\": [\n", f);
    for (int i = 0; i < nres; i++) {
        json_result(f, &res[i], o->rounds);
        fputs(i + 1 < nres ? ",\n" : "\n", f);
    }
    fputs("  ]\n}\n", f);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        fprintf(stderr, "mcoll-bench: error writing %s\n", path);
}
