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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
                res->memcpy_gbs = bench_memcpy_gbs(&rates, r.total, &o, comm, rank);
            bench_row_alloc(&r, o.check);
            if (o.mode == MODE_COLD)
                bench_cold_row(&r, &o, res);
            else if (o.mode == MODE_LATENCY)
                bench_latency_row(&r, &o, res);
            else if (o.mode == MODE_NBC)
                bench_nbc_row(&r, &o, res);
            else
                bench_alternating_row(&r, &o, res, bench_time_block);
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
