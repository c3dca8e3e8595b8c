/* test_coll: checks every blocking MPI-3.1 collective against a reference made of
 * point-to-point messages (MPI_Send/MPI_Recv/MPI_Sendrecv), which mcoll never
 * intercepts. Each case's parameters come from a generator seeded by (--seed, case
 * number), so every rank draws the same ones; each rank's data comes from its own
 * generator. After a call the reference moves the inputs by p2p, computes the
 * expected result locally (reductions in rank order) and compares every byte of
 * every buffer: data, gaps of non-contiguous types, and guard zones around buffers.
 *
 * usage: test_coll [--colls a,b] [--comms a,b] [--iters N] [--seed S]
 *                  [--max-bytes N[K|M]] [--large PERCENT] [--burst N] [--churn N]
 *                  [--count-api PERCENT]
 *                  [--quick] [--verbose]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>

#include <complex.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* test_nbc.c includes this file for its reference (TEST_COLL_NO_MAIN, its own name). */
#ifndef PROGRAM_NAME
#define PROGRAM_NAME "test_coll"
#endif

enum { GUARD = 64, SENTINEL = 0xA5, TAG_REF = 4242, MAX_REPORTS = 40, REPORTS_PER_CHECK = 3 };
#define MIB ((size_t)1 << 20)

/* ---- random numbers ---------------------------------------------------- */

struct rng {
    uint64_t state;
};

static uint64_t rng_next(struct rng *r) /* splitmix64 */
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void rng_seed(struct rng *r, uint64_t a, uint64_t b, uint64_t c)
{
    r->state = a;
    r->state = rng_next(r) ^ b;
    r->state = rng_next(r) ^ c;
    rng_next(r);
}

static uint64_t rng_below(struct rng *r, uint64_t n) { return n ? rng_next(r) % n : 0; }
static bool rng_chance(struct rng *r, unsigned percent) { return rng_below(r, 100) < percent; }
static int64_t rng_range(struct rng *r, int64_t lo, int64_t hi) { return lo + (int64_t)rng_below(r, (uint64_t)(hi - lo + 1)); }

/* ---- the collectives ---------------------------------------------------- */

enum coll_id {
    C_BARRIER, C_BCAST, C_GATHER, C_GATHERV, C_SCATTER, C_SCATTERV, C_ALLGATHER,
    C_ALLGATHERV, C_ALLTOALL, C_ALLTOALLV, C_ALLTOALLW, C_REDUCE, C_ALLREDUCE,
    C_REDUCE_SCATTER, C_REDUCE_SCATTER_BLOCK, C_SCAN, C_EXSCAN, N_COLLS
};
static const char *const coll_names[N_COLLS] = {
    "barrier", "bcast", "gather", "gatherv", "scatter", "scatterv", "allgather",
    "allgatherv", "alltoall", "alltoallv", "alltoallw", "reduce", "allreduce",
    "reduce_scatter", "reduce_scatter_block", "scan", "exscan",
};

static bool is_reduction(enum coll_id c) { return c >= C_REDUCE; }

/* ---- data-movement types -------------------------------------------------
 * A case moves "elements" of one signature family; each rank describes each of its
 * buffers with one representation of that family. The vec family has a strided
 * type (6 ints in two blocks of 3, extent 40) that a rank may also describe as 6
 * contiguous ints, so sender and receiver layouts differ while signatures match. */

enum move_type { MT_BYTE, MT_INT, MT_DOUBLE, MT_VEC, N_MOVE_TYPES };
static const char *const move_type_names[N_MOVE_TYPES] = {"byte", "int", "double", "vec"};
static const size_t move_sig_bytes[N_MOVE_TYPES] = {1, 4, 8, 24}; /* per element */
static const size_t move_max_span[N_MOVE_TYPES] = {1, 4, 8, 40};  /* the widest representation */

enum rep_id { REP_BYTE, REP_INT, REP_DOUBLE, REP_VEC, REP_VEC_AS_INT, N_REPS };
struct rep {
    const char *name;
    MPI_Datatype type; /* set at startup */
    int per_elem;      /* MPI count per element */
    size_t extent;     /* extent of type: the unit of v-collective displacements */
    size_t unit;       /* bytes of one basic datum */
    int units;         /* basic data per element */
};
static struct rep reps[N_REPS] = {
    [REP_BYTE] = {"byte", 0, 1, 1, 1, 1},
    [REP_INT] = {"int", 0, 1, 4, 4, 1},
    [REP_DOUBLE] = {"double", 0, 1, 8, 8, 1},
    [REP_VEC] = {"vector", 0, 1, 40, 4, 6},
    [REP_VEC_AS_INT] = {"6int", 0, 6, 4, 4, 6},
};
static const size_t vec_unit_offset[6] = {0, 4, 8, 20, 24, 28};

static size_t elem_span(enum rep_id r) { return (size_t)reps[r].per_elem * reps[r].extent; }
static size_t elem_sig(enum rep_id r) { return (size_t)reps[r].units * reps[r].unit; }

/* Byte offset of basic datum u of a run of elements. */
static size_t unit_offset(enum rep_id r, size_t u)
{
    size_t elem = u / (size_t)reps[r].units, j = u % (size_t)reps[r].units;
    size_t within = r == REP_VEC ? vec_unit_offset[j] : j * reps[r].unit;
    return elem * elem_span(r) + within;
}

static enum rep_id pick_rep(enum move_type t, struct rng *local)
{
    switch (t) {
    case MT_BYTE: return REP_BYTE;
    case MT_INT: return REP_INT;
    case MT_DOUBLE: return REP_DOUBLE;
    default: return rng_chance(local, 50) ? REP_VEC : REP_VEC_AS_INT;
    }
}

/* ---- reduction types and operations -------------------------------------- */

enum red_type { RT_BYTE, RT_CHAR, RT_INT, RT_FLOAT, RT_DOUBLE, RT_CDOUBLE, RT_2INT, RT_DOUBLE_INT, RT_MAT2, RT_AFFINE, N_RED_TYPES };
struct int_pair { int v, i; };
struct double_int { double v; int i; };
struct red_type_info {
    const char *name;
    size_t size;
    MPI_Datatype type; /* set at startup */
};
static struct red_type_info red_types[N_RED_TYPES] = {
    [RT_BYTE] = {"byte", 1, 0},
    [RT_CHAR] = {"char", 1, 0},
    [RT_INT] = {"int", sizeof(int), 0},
    [RT_FLOAT] = {"float", sizeof(float), 0},
    [RT_DOUBLE] = {"double", sizeof(double), 0},
    [RT_CDOUBLE] = {"double_complex", sizeof(double complex), 0},
    [RT_2INT] = {"2int", sizeof(struct int_pair), 0},
    [RT_DOUBLE_INT] = {"double_int", sizeof(struct double_int), 0},
    [RT_MAT2] = {"mat2x2_u32", 4 * sizeof(uint32_t), 0},
    [RT_AFFINE] = {"affine_2double", 2 * sizeof(double), 0},
};

enum red_op {
    OP_MAX, OP_MIN, OP_SUM, OP_PROD, OP_LAND, OP_LOR, OP_LXOR, OP_BAND, OP_BOR, OP_BXOR,
    OP_MAXLOC, OP_MINLOC, OP_USER_SUM, OP_USER_MATMUL, OP_USER_AFFINE, N_RED_OPS
};
static const char *const red_op_names[N_RED_OPS] = {
    "max", "min", "sum", "prod", "land", "lor", "lxor", "band", "bor", "bxor",
    "maxloc", "minloc", "user_sum(commutative)", "user_matmul(non-commutative)",
    "user_affine(non-commutative)",
};
static MPI_Op red_ops[N_RED_OPS]; /* set at startup */

/* Every predefined op valid for each type, and the user ops. */
static const struct combo {
    enum red_type type;
    enum red_op op;
} combos[] = {
    {RT_INT, OP_SUM}, {RT_DOUBLE, OP_SUM}, {RT_AFFINE, OP_USER_AFFINE}, {RT_INT, OP_MAX},
    {RT_FLOAT, OP_SUM}, {RT_MAT2, OP_USER_MATMUL}, {RT_INT, OP_MIN}, {RT_DOUBLE, OP_MAX},
    {RT_CDOUBLE, OP_SUM}, {RT_INT, OP_PROD}, {RT_2INT, OP_MAXLOC}, {RT_BYTE, OP_BXOR},
    {RT_INT, OP_LAND}, {RT_DOUBLE, OP_MIN}, {RT_DOUBLE_INT, OP_MINLOC}, {RT_INT, OP_LOR},
    {RT_FLOAT, OP_PROD}, {RT_INT, OP_LXOR}, {RT_CDOUBLE, OP_PROD}, {RT_INT, OP_BAND},
    {RT_DOUBLE, OP_PROD}, {RT_INT, OP_BOR}, {RT_2INT, OP_MINLOC}, {RT_INT, OP_BXOR},
    {RT_FLOAT, OP_MAX}, {RT_BYTE, OP_BAND}, {RT_DOUBLE_INT, OP_MAXLOC}, {RT_FLOAT, OP_MIN},
    {RT_BYTE, OP_BOR}, {RT_INT, OP_USER_SUM},
    /* MPI_CHAR: outside the standard's table, but both MPIs fold it (OSU's default) */
    {RT_CHAR, OP_SUM}, {RT_CHAR, OP_PROD}, {RT_CHAR, OP_MIN}, {RT_CHAR, OP_MAX},
    {RT_CHAR, OP_BXOR}, {RT_CHAR, OP_LAND},
};
enum { N_COMBOS = sizeof combos / sizeof combos[0] };

static void mat2_mul(const uint32_t *a, const uint32_t *b, uint32_t *out)
{
    uint32_t r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                     a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
    memcpy(out, r, sizeof r);
}

/* (a, b) is x -> a*x + b; earlier then later: x -> later.a*(earlier.a*x + earlier.b) + later.b */
static void affine_then(const double *earlier, const double *later, double *out)
{
    double r[2] = {later[0] * earlier[0], later[0] * earlier[1] + later[1]};
    memcpy(out, r, sizeof r);
}

/* MPI user functions: inoutvec[i] = invec[i] o inoutvec[i], invec from lower ranks. */
static void user_sum_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    const int *a = in;
    int *b = inout;
    for (int i = 0; i < *len; i++) b[i] += a[i];
}

static void user_matmul_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    const uint32_t *a = in;
    uint32_t *b = inout;
    for (int i = 0; i < *len; i++) mat2_mul(a + 4 * i, b + 4 * i, b + 4 * i);
}

static void user_affine_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    const double *a = in;
    double *b = inout;
    for (int i = 0; i < *len; i++) affine_then(a + 2 * i, b + 2 * i, b + 2 * i);
}

/* Values are chosen so that every result is exact in any order of evaluation
 * (small integers and dyadic fractions), which lets results be compared exactly. */
static void red_gen(enum red_type t, enum red_op op, struct rng *r, void *dst)
{
    static const double factors[] = {-2, -1, -0.5, 0.5, 1, 2};
    static const int int_factors[] = {-2, -1, 1, 2, 3};
    switch (t) {
    case RT_BYTE: *(unsigned char *)dst = (unsigned char)rng_next(r); break;
    case RT_CHAR: {
        /* Sums and products stay inside a signed char for up to 30 ranks (the largest
         * thread-rank layout): Open MPI 4.1's vector fold saturates 8-bit sums where its
         * scalar fold (and C) wraps. */
        char v = (char)(unsigned char)rng_next(r);
        if (op == OP_SUM) v = (char)rng_range(r, -4, 4);
        else if (op == OP_PROD) v = rng_chance(r, 50) ? 1 : -1;
        else if (op == OP_LAND && rng_chance(r, 30)) v = 0;
        memcpy(dst, &v, 1);
        break;
    }
    case RT_INT: {
        int v;
        if (op == OP_SUM || op == OP_USER_SUM) v = (int)rng_range(r, -1000, 1000);
        else if (op == OP_PROD) v = int_factors[rng_below(r, 5)];
        else if (op == OP_LAND || op == OP_LOR || op == OP_LXOR) v = rng_chance(r, 40) ? 0 : (int)rng_range(r, -3, 3);
        else v = (int)(int32_t)(uint32_t)rng_next(r);
        memcpy(dst, &v, sizeof v);
        break;
    }
    case RT_FLOAT:
    case RT_DOUBLE: {
        double v;
        if (op == OP_SUM) v = 0.25 * (double)rng_range(r, -400, 400);
        else if (op == OP_PROD) v = factors[rng_below(r, 6)];
        else v = (double)(int32_t)(uint32_t)rng_next(r) / 64.0;
        if (t == RT_FLOAT) {
            float f = (float)v;
            memcpy(dst, &f, sizeof f);
        } else {
            memcpy(dst, &v, sizeof v);
        }
        break;
    }
    case RT_CDOUBLE: {
        double re, im;
        if (op == OP_SUM) {
            re = 0.25 * (double)rng_range(r, -400, 400);
            im = 0.25 * (double)rng_range(r, -400, 400);
        } else {
            do {
                re = (double)rng_range(r, -1, 1);
                im = (double)rng_range(r, -1, 1);
            } while (re == 0 && im == 0);
        }
        double complex z = CMPLX(re, im);
        memcpy(dst, &z, sizeof z);
        break;
    }
    case RT_2INT: {
        struct int_pair p = {(int)rng_range(r, 0, 3), (int)rng_range(r, 0, 9)};
        memcpy(dst, &p, sizeof p);
        break;
    }
    case RT_DOUBLE_INT: { /* fields only: the padding keeps the sentinel */
        double v = 0.5 * (double)rng_range(r, 0, 3);
        int i = (int)rng_range(r, 0, 9);
        memcpy(dst, &v, sizeof v);
        memcpy((char *)dst + offsetof(struct double_int, i), &i, sizeof i);
        break;
    }
    case RT_MAT2:
        for (int k = 0; k < 4; k++) ((uint32_t *)dst)[k] = (uint32_t)rng_next(r);
        break;
    case RT_AFFINE: {
        double ab[2] = {factors[rng_below(r, 6)], 0.25 * (double)rng_range(r, -40, 40)};
        memcpy(dst, ab, sizeof ab);
        break;
    }
    default: break;
    }
}

static int int_op(enum red_op op, int x, int y)
{
    switch (op) {
    case OP_MAX: return x > y ? x : y;
    case OP_MIN: return x < y ? x : y;
    case OP_SUM:
    case OP_USER_SUM: return x + y;
    case OP_PROD: return x * y;
    case OP_LAND: return x && y;
    case OP_LOR: return x || y;
    case OP_LXOR: return !x != !y;
    case OP_BAND: return x & y;
    case OP_BOR: return x | y;
    default: return x ^ y;
    }
}

static double real_op(enum red_op op, double x, double y)
{
    switch (op) {
    case OP_MAX: return x > y ? x : y;
    case OP_MIN: return x < y ? x : y;
    case OP_SUM: return x + y;
    default: return x * y;
    }
}

/* MAXLOC/MINLOC: the better value wins, a tie takes the smaller index. */
static bool loc_keeps_earlier(enum red_op op, double ev, int ei, double lv, int li)
{
    if (ev != lv) return op == OP_MAXLOC ? ev > lv : ev < lv;
    return ei <= li;
}

/* The reference reduction: acc[k] = acc[k] o later[k], acc holding lower ranks. */
static void red_apply(enum red_type t, enum red_op op, void *acc_v, const void *later_v, size_t n)
{
    unsigned char *acc = acc_v;
    const unsigned char *later = later_v;
    size_t sz = red_types[t].size;
    for (size_t k = 0; k < n; k++) {
        unsigned char *a = acc + k * sz;
        const unsigned char *b = later + k * sz;
        switch (t) {
        case RT_BYTE: a[0] = (unsigned char)(op == OP_BAND ? a[0] & b[0] : op == OP_BOR ? a[0] | b[0] : a[0] ^ b[0]); break;
/* x = the element at a, y = the one at b (unaligned), a's element = expr */
#define FOLD(T, expr)                \
    {                                \
        T x, y;                      \
        memcpy(&x, a, sizeof x);     \
        memcpy(&y, b, sizeof y);     \
        x = (expr);                  \
        memcpy(a, &x, sizeof x);     \
        break;                       \
    }
        case RT_INT: FOLD(int, int_op(op, x, y))
        /* C's char, compared as the compiler's char; sums and products wrap mod 256 */
        case RT_CHAR: FOLD(char, (char)(unsigned char)((unsigned)int_op(op, x, y) & 0xffu))
        case RT_FLOAT: FOLD(float, (float)real_op(op, x, y))
        case RT_DOUBLE: FOLD(double, real_op(op, x, y))
        case RT_CDOUBLE: FOLD(double complex, op == OP_SUM ? x + y : x * y)
#undef FOLD
        case RT_2INT: {
            struct int_pair x, y;
            memcpy(&x, a, sizeof x);
            memcpy(&y, b, sizeof y);
            if (!loc_keeps_earlier(op, x.v, x.i, y.v, y.i)) memcpy(a, &y, sizeof y);
            else if (x.v == y.v && y.i < x.i) memcpy(a + offsetof(struct int_pair, i), &y.i, sizeof y.i);
            break;
        }
        case RT_DOUBLE_INT: {
            double xv, yv;
            int xi, yi;
            memcpy(&xv, a, sizeof xv);
            memcpy(&yv, b, sizeof yv);
            memcpy(&xi, a + offsetof(struct double_int, i), sizeof xi);
            memcpy(&yi, b + offsetof(struct double_int, i), sizeof yi);
            if (!loc_keeps_earlier(op, xv, xi, yv, yi)) {
                memcpy(a, &yv, sizeof yv);
                memcpy(a + offsetof(struct double_int, i), &yi, sizeof yi);
            }
            break;
        }
        case RT_MAT2: {
            uint32_t x[4], y[4];
            memcpy(x, a, sizeof x);
            memcpy(y, b, sizeof y);
            mat2_mul(x, y, x);
            memcpy(a, x, sizeof x);
            break;
        }
        case RT_AFFINE: {
            double x[2], y[2];
            memcpy(x, a, sizeof x);
            memcpy(y, b, sizeof y);
            affine_then(x, y, x);
            memcpy(a, x, sizeof x);
            break;
        }
        default: break;
        }
    }
}

/* Floating values compare by value (the sign of an exact zero may depend on the
 * evaluation order); double_int compares its fields, never its padding. */
static bool red_equal(enum red_type t, const void *x, const void *y)
{
    switch (t) {
    case RT_FLOAT: {
        float a, b;
        memcpy(&a, x, sizeof a);
        memcpy(&b, y, sizeof b);
        return a == b;
    }
    case RT_DOUBLE:
    case RT_CDOUBLE:
    case RT_AFFINE: {
        double a[2], b[2];
        size_t n = red_types[t].size / sizeof(double);
        memcpy(a, x, n * sizeof(double));
        memcpy(b, y, n * sizeof(double));
        return a[0] == b[0] && (n == 1 || a[1] == b[1]);
    }
    case RT_DOUBLE_INT:
        return memcmp(x, y, sizeof(double)) == 0 &&
               memcmp((const char *)x + offsetof(struct double_int, i), (const char *)y + offsetof(struct double_int, i), sizeof(int)) == 0;
    default: return memcmp(x, y, red_types[t].size) == 0;
    }
}

static void red_format(enum red_type t, const void *p, char *out, size_t len)
{
    const unsigned char *b = p;
    double d[2];
    int i[4];
    float f;
    switch (t) {
    case RT_BYTE:
    case RT_CHAR: snprintf(out, len, "0x%02x", b[0]); break;
    case RT_INT: memcpy(i, b, sizeof(int)); snprintf(out, len, "%d", i[0]); break;
    case RT_FLOAT: memcpy(&f, b, sizeof f); snprintf(out, len, "%g", (double)f); break;
    case RT_DOUBLE: memcpy(d, b, sizeof(double)); snprintf(out, len, "%.17g", d[0]); break;
    case RT_CDOUBLE:
    case RT_AFFINE: memcpy(d, b, sizeof d); snprintf(out, len, "(%.17g, %.17g)", d[0], d[1]); break;
    case RT_2INT: memcpy(i, b, 2 * sizeof(int)); snprintf(out, len, "(%d, idx %d)", i[0], i[1]); break;
    case RT_DOUBLE_INT:
        memcpy(d, b, sizeof(double));
        memcpy(i, b + offsetof(struct double_int, i), sizeof(int));
        snprintf(out, len, "(%g, idx %d)", d[0], i[0]);
        break;
    default:
        memcpy(i, b, 4 * sizeof(int));
        snprintf(out, len, "[%08x %08x; %08x %08x]", (unsigned)i[0], (unsigned)i[1], (unsigned)i[2], (unsigned)i[3]);
        break;
    }
}

/* ---- options, communicators, statistics ---------------------------------- */

enum comm_kind { CK_WORLD, CK_EVENODD, CK_REVERSED, CK_DUP, CK_SINGLE, N_COMM_KINDS };
static const char *const comm_kind_names[N_COMM_KINDS] = {"world", "evenodd", "reversed", "dup", "single"};

struct test_comm {
    const char *name;
    MPI_Comm comm;
    int rank, size;
};

struct options {
    uint64_t seed;
    int iters;          /* cases per communicator and collective */
    size_t max_bytes;   /* the largest buffer a rank allocates for one case */
    int large_percent;  /* share of cases of 1 MiB .. max_bytes */
    int burst;          /* back-to-back calls per communicator, checked afterwards */
    int churn;          /* communicators created, used once and freed */
    int count_api_percent; /* MPI-4 libraries: share of calls made with the _c (MPI_Count) API */
    bool verbose;
    bool colls[N_COLLS];
    bool comms[N_COMM_KINDS];
};

static struct options opt;
static int world_rank, world_size;
static enum { HOST_OTHER, HOST_OPEN_MPI, HOST_MPICH } host;
static MPI_Datatype vec_type, mat2_type, affine_type;

static struct {
    uint64_t checks, errors;
    int reports;
} stats;

/* Counters that cycle through types, combos and roots; every rank advances them
 * identically because every rank walks the same sequence of cases. */
static unsigned cycle_move_type, cycle_combo;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, PROGRAM_NAME ": out of memory (%zu bytes)\n", n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = xmalloc(n * size);
    memset(p, 0, n * size);
    return p;
}

static void sleep_us(unsigned us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- buffers and their expected images ------------------------------------ */

struct buf {
    unsigned char *alloc; /* GUARD + bytes + GUARD, all SENTINEL to start with */
    size_t bytes;
    unsigned char *orig;  /* copy taken after the inputs were written */
};

static unsigned char *buf_base(const struct buf *b) { return b->alloc + GUARD; }
static size_t buf_len(const struct buf *b) { return b->bytes + 2 * GUARD; }

static void buf_alloc(struct buf *b, size_t bytes)
{
    b->bytes = bytes;
    b->alloc = xmalloc(buf_len(b));
    memset(b->alloc, SENTINEL, buf_len(b));
    b->orig = NULL;
}

static void buf_snapshot(struct buf *b)
{
    b->orig = xmalloc(buf_len(b));
    memcpy(b->orig, b->alloc, buf_len(b));
}

static void buf_free(struct buf *b)
{
    free(b->alloc);
    free(b->orig);
    memset(b, 0, sizeof *b);
}

/* One block of a buffer: a run of elements in one representation. */
struct part {
    enum rep_id rep;
    int count; /* elements */
    size_t off; /* bytes from the buffer's base */
};

static size_t part_span(const struct part *p) { return (size_t)p->count * elem_span(p->rep); }
static size_t part_sig(const struct part *p) { return (size_t)p->count * elem_sig(p->rep); }

static void part_fill(const struct buf *b, const struct part *p, struct rng *local)
{
    size_t units = (size_t)p->count * (size_t)reps[p->rep].units, unit = reps[p->rep].unit;
    unsigned char *base = buf_base(b) + p->off;
    for (size_t u = 0; u < units; u++) {
        uint64_t v = rng_next(local);
        memcpy(base + unit_offset(p->rep, u), &v, unit);
    }
}

/* The part's data in signature order, read from the buffer's snapshot. */
static unsigned char *part_pack(const struct buf *b, const struct part *p)
{
    size_t units = (size_t)p->count * (size_t)reps[p->rep].units, unit = reps[p->rep].unit;
    unsigned char *stream = xmalloc(part_sig(p));
    const unsigned char *base = b->orig + GUARD + p->off;
    for (size_t u = 0; u < units; u++) memcpy(stream + u * unit, base + unit_offset(p->rep, u), unit);
    return stream;
}

struct note {
    size_t start, len, unit;
    int owner; /* the rank the block belongs to (came from or goes to) */
};

struct image {
    unsigned char *bytes; /* what the whole allocation must hold */
    size_t len;
    struct note *notes;
    int nnotes, cap;
};

static void image_blank(struct image *im, const struct buf *b)
{
    im->len = buf_len(b);
    im->bytes = xmalloc(im->len);
    memset(im->bytes, SENTINEL, im->len);
    im->notes = NULL;
    im->nnotes = im->cap = 0;
}

static void image_unchanged(struct image *im, const struct buf *b)
{
    image_blank(im, b);
    memcpy(im->bytes, b->orig, im->len);
}

static void image_note(struct image *im, const struct part *p, int owner)
{
    if (im->nnotes == im->cap) {
        im->cap = im->cap ? 2 * im->cap : 8;
        struct note *n = xmalloc((size_t)im->cap * sizeof *n);
        if (im->nnotes) memcpy(n, im->notes, (size_t)im->nnotes * sizeof *n);
        free(im->notes);
        im->notes = n;
    }
    im->notes[im->nnotes++] = (struct note){p->off, part_span(p), reps[p->rep].unit, owner};
}

static void image_place(struct image *im, const struct part *p, const unsigned char *stream, int owner)
{
    size_t units = (size_t)p->count * (size_t)reps[p->rep].units, unit = reps[p->rep].unit;
    unsigned char *base = im->bytes + GUARD + p->off;
    for (size_t u = 0; u < units; u++) memcpy(base + unit_offset(p->rep, u), stream + u * unit, unit);
    image_note(im, p, owner);
}

static void image_free(struct image *im)
{
    free(im->bytes);
    free(im->notes);
}

/* ---- cases ----------------------------------------------------------------- */

struct coll_case {
    long id;
    enum coll_id coll;
    const struct test_comm *tc;
    int rank, n, root;
    bool inplace, small;
    bool skip; /* a known bug of the host MPI: made but neither run nor checked */
    unsigned skew_us; /* sleep before the call: unbalanced arrival */

    enum move_type mtype;
    int *blk;       /* per-rank elements of the v-variants */
    int *mat;       /* mat[i*n+j]: elements from i to j (alltoall family) */
    int *pair_type; /* alltoallw: move type of each (i, j) pair */
    struct part *sparts, *rparts;

    enum red_type red;
    enum red_op op;
    size_t count; /* elements per rank (reductions, per block for reduce_scatter_block) */

    struct buf sbuf, rbuf;
    /* the arguments passed to MPI */
    void *sarg, *rarg;
    int scount, rcount;
    MPI_Datatype stype, rtype;
    int *scounts, *sdispls, *rcounts, *rdispls;
    MPI_Datatype *stypes, *rtypes;

    int nbarriers;
    unsigned *barrier_sleep_us;
    int64_t *t_in, *t_out;
};

static void describe_case(const struct coll_case *c, char *out, size_t len)
{
    int w = snprintf(out, len, "case #%ld %s comm=%s(size %d) rank=%d(world %d)", c->id, coll_names[c->coll],
                     c->tc->name, c->n, c->rank, world_rank);
    if (w < 0 || (size_t)w >= len) return;
    if (c->coll == C_BARRIER) return;
    if (c->coll == C_BCAST || c->coll == C_GATHER || c->coll == C_GATHERV || c->coll == C_SCATTER ||
        c->coll == C_SCATTERV || c->coll == C_REDUCE)
        w += snprintf(out + w, len - (size_t)w, " root=%d", c->root);
    if (is_reduction(c->coll))
        snprintf(out + w, len - (size_t)w, " type=%s op=%s count=%zu inplace=%d", red_types[c->red].name,
                 red_op_names[c->op], c->count, c->inplace);
    else
        snprintf(out + w, len - (size_t)w, " type=%s(%s) count=%d inplace=%d",
                 c->coll == C_ALLTOALLW ? "mixed" : move_type_names[c->mtype],
                 c->rparts ? reps[c->rparts[0].rep].name : reps[c->sparts[0].rep].name,
                 c->rparts ? c->rparts[0].count : c->sparts[0].count, c->inplace);
}

static void report(const struct coll_case *c, const char *fmt, ...)
{
    if (stats.reports++ >= MAX_REPORTS) return;
    char head[512], msg[512];
    describe_case(c, head, sizeof head);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, PROGRAM_NAME ": FAIL %s (seed %" PRIu64 "): %s\n", head, opt.seed, msg);
    fflush(stderr);
}

/* Compares a buffer with its image; counts each wrong datum (or stray byte) once. */
static void check_image(const struct coll_case *c, const struct buf *b, const struct image *im, const char *what)
{
    size_t data = 0;
    for (int k = 0; k < im->nnotes; k++) data += im->notes[k].len / im->notes[k].unit;
    stats.checks += data ? data : 1;
    if (memcmp(b->alloc, im->bytes, im->len) == 0) return;
    int shown = 0;
    size_t last_key = SIZE_MAX;
    for (size_t i = 0; i < im->len; i++) {
        if (b->alloc[i] == im->bytes[i]) continue;
        const struct note *in = NULL;
        long off = (long)i - GUARD;
        for (int k = 0; k < im->nnotes && off >= 0; k++)
            if ((size_t)off >= im->notes[k].start && (size_t)off < im->notes[k].start + im->notes[k].len) in = &im->notes[k];
        size_t key = in ? GUARD + in->start + ((size_t)off - in->start) / in->unit * in->unit : i;
        if (key == last_key) continue;
        last_key = key;
        stats.errors++;
        if (shown++ >= REPORTS_PER_CHECK) continue;
        char where[160];
        if (in)
            snprintf(where, sizeof where, "block of rank %d, byte %zu of the block", in->owner, (size_t)off - in->start);
        else if (off < 0)
            snprintf(where, sizeof where, "guard zone before the buffer");
        else if ((size_t)off >= b->bytes)
            snprintf(where, sizeof where, "guard zone after the buffer (%zu bytes long)", b->bytes);
        else
            snprintf(where, sizeof where, "outside every data block (gap must stay untouched)");
        report(c, "%s byte offset %ld (%s): got 0x%02x expected 0x%02x", what, off, where, b->alloc[i], im->bytes[i]);
    }
}

static void check_unchanged(const struct coll_case *c, const struct buf *b, const char *what)
{
    struct image im;
    image_unchanged(&im, b);
    check_image(c, b, &im, what);
    image_free(&im);
}

static void check_untouched(const struct coll_case *c, const struct buf *b, const char *what)
{
    struct image im;
    image_blank(&im, b);
    check_image(c, b, &im, what);
    image_free(&im);
}

/* A reduction result: nelem elements at the base; past them the buffer must keep
 * the sentinel unless tail_free; nothing is compared when data_free. */
static void check_reduction(const struct coll_case *c, const struct buf *b, const unsigned char *expected,
                            size_t nelem, bool tail_free, bool data_free, const char *what)
{
    size_t sz = red_types[c->red].size;
    const unsigned char *base = buf_base(b);
    int shown = 0;
    stats.checks += nelem ? nelem : 1;
    for (size_t k = 0; k < nelem && !data_free; k++) {
        if (red_equal(c->red, base + k * sz, expected + k * sz)) continue;
        stats.errors++;
        if (shown++ >= REPORTS_PER_CHECK) continue;
        char got[96], exp[96];
        red_format(c->red, base + k * sz, got, sizeof got);
        red_format(c->red, expected + k * sz, exp, sizeof exp);
        report(c, "%s element %zu of %zu: got %s expected %s", what, k, nelem, got, exp);
    }
    size_t from = data_free || tail_free ? b->bytes : nelem * sz;
    for (size_t i = 0; i < buf_len(b); i++) {
        bool guard = i < GUARD || i >= GUARD + from;
        if (!guard || b->alloc[i] == SENTINEL) continue;
        stats.errors++;
        if (shown++ < REPORTS_PER_CHECK)
            report(c, "%s byte offset %ld written outside the result (%zu bytes): 0x%02x", what, (long)i - GUARD,
                   nelem * sz, b->alloc[i]);
    }
}

/* ---- reference point-to-point helpers ---------------------------------------- */

static void ref_send(const void *p, size_t bytes, int dest, MPI_Comm comm)
{
    MPI_Send(p, (int)bytes, MPI_BYTE, dest, TAG_REF, comm);
}

static void ref_recv(void *p, size_t bytes, int src, MPI_Comm comm)
{
    MPI_Recv(p, (int)bytes, MPI_BYTE, src, TAG_REF, comm, MPI_STATUS_IGNORE);
}

static void ref_sendrecv(const void *out, size_t out_bytes, int dest, void *in, size_t in_bytes, int src, MPI_Comm comm)
{
    MPI_Sendrecv(out, (int)out_bytes, MPI_BYTE, dest, TAG_REF, in, (int)in_bytes, MPI_BYTE, src, TAG_REF, comm,
                 MPI_STATUS_IGNORE);
}

/* ---- sizes and layouts ----------------------------------------------------------- */

/* Elements per block for blocks of elem_bytes, nblocks of them in the largest buffer. */
static size_t pick_count(struct rng *shared, size_t elem_bytes, size_t nblocks, bool small)
{
    static const size_t fixed[] = {0, 1, 2, 3, 5, 7, 13, 31, 64, 127, 1000, 1023, 4095, 4096, 4097, 16383, 65535, 65537};
    size_t budget = small ? (opt.max_bytes < 65536 ? opt.max_bytes : 65536) : opt.max_bytes;
    size_t cap = budget / (elem_bytes * (nblocks ? nblocks : 1));
    size_t count;
    if (!small && opt.max_bytes >= MIB && rng_chance(shared, (unsigned)opt.large_percent))
        count = (MIB + rng_below(shared, opt.max_bytes - MIB + 1)) / (elem_bytes * (nblocks ? nblocks : 1));
    else if (rng_chance(shared, 65))
        count = fixed[rng_below(shared, sizeof fixed / sizeof fixed[0])];
    else
        count = rng_below(shared, small ? 3000 : 200000);
    return count < cap ? count : cap;
}

/* Uneven counts around an average, a fifth of them zero, the total within budget. */
static void pick_uneven(struct rng *shared, int *out, int n, size_t elem_bytes, bool small)
{
    size_t avg = pick_count(shared, elem_bytes, (size_t)n, small);
    for (int k = 0; k < n; k++) out[k] = rng_chance(shared, 20) ? 0 : (int)rng_below(shared, 2 * avg + 2);
    size_t total = 0;
    for (int k = 0; k < n; k++) total += (size_t)out[k];
    while (total * elem_bytes > opt.max_bytes) {
        total = 0;
        for (int k = 0; k < n; k++) total += (size_t)(out[k] /= 2);
    }
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Gives each part an offset: in rank order without gaps when regular, else in a
 * random order with random gaps, offsets multiple of align. Returns the bytes spanned. */
static size_t place_parts(struct part *parts, int n, bool regular, size_t align, struct rng *local)
{
    int *order = xmalloc((size_t)n * sizeof *order);
    for (int k = 0; k < n; k++) order[k] = k;
    for (int k = n - 1; k > 0 && !regular; k--) {
        int j = (int)rng_below(local, (uint64_t)k + 1), t = order[k];
        order[k] = order[j];
        order[j] = t;
    }
    size_t pos = 0;
    for (int k = 0; k < n; k++) {
        struct part *p = &parts[order[k]];
        if (!regular) pos = round_up(pos, align) + align * rng_below(local, 3);
        p->off = pos;
        pos += part_span(p);
    }
    free(order);
    return regular ? pos : round_up(pos, align) + align * rng_below(local, 2);
}

/* ---- setup of each family -------------------------------------------------------------- */

static bool rooted(enum coll_id c)
{
    return c == C_BCAST || c == C_GATHER || c == C_GATHERV || c == C_SCATTER || c == C_SCATTERV || c == C_REDUCE;
}

static bool inplace_allowed(enum coll_id c) { return c != C_BARRIER && c != C_BCAST; }

static void setup_barrier(struct coll_case *c, struct rng *local)
{
    c->nbarriers = c->small ? 1 : 4;
    c->barrier_sleep_us = xcalloc((size_t)c->nbarriers, sizeof *c->barrier_sleep_us);
    c->t_in = xcalloc((size_t)c->nbarriers, sizeof *c->t_in);
    c->t_out = xcalloc((size_t)c->nbarriers, sizeof *c->t_out);
    for (int k = 0; k < c->nbarriers && !c->small; k++)
        c->barrier_sleep_us[k] = rng_chance(local, 30) ? 0 : (unsigned)rng_below(local, 2000);
}

static void setup_bcast(struct coll_case *c, struct rng *shared, struct rng *local)
{
    c->rparts = xcalloc(1, sizeof *c->rparts);
    c->rparts[0].rep = pick_rep(c->mtype, local);
    c->rparts[0].count = (int)pick_count(shared, move_max_span[c->mtype], 1, c->small);
    buf_alloc(&c->rbuf, part_span(&c->rparts[0]));
    if (c->rank == c->root) part_fill(&c->rbuf, &c->rparts[0], local);
    buf_snapshot(&c->rbuf);
    c->rarg = buf_base(&c->rbuf);
    c->rcount = c->rparts[0].count * reps[c->rparts[0].rep].per_elem;
    c->rtype = reps[c->rparts[0].rep].type;
}

/* Arguments that are not significant on this rank: junk counts and types, and a
 * NULL or empty buffer (which must stay untouched). */
static void *insignificant_buffer(struct buf *b, struct rng *local)
{
    if (rng_chance(local, 50)) return NULL;
    buf_alloc(b, 0);
    return buf_base(b);
}

static void set_v_args(const struct part *parts, int n, int **counts, int **displs)
{
    *counts = xmalloc((size_t)n * sizeof **counts);
    *displs = xmalloc((size_t)n * sizeof **displs);
    for (int k = 0; k < n; k++) {
        (*counts)[k] = parts[k].count * reps[parts[k].rep].per_elem;
        (*displs)[k] = (int)(parts[k].off / reps[parts[k].rep].extent);
    }
}

/* gather, gatherv, allgather, allgatherv: one send part, n receive parts. */
static void setup_gather_family(struct coll_case *c, struct rng *shared, struct rng *local)
{
    bool all = c->coll == C_ALLGATHER || c->coll == C_ALLGATHERV;
    bool vee = c->coll == C_GATHERV || c->coll == C_ALLGATHERV;
    int n = c->n;
    c->blk = xmalloc((size_t)n * sizeof *c->blk);
    if (vee) {
        pick_uneven(shared, c->blk, n, move_max_span[c->mtype], c->small);
    } else {
        int count = (int)pick_count(shared, move_max_span[c->mtype], (size_t)n, c->small);
        for (int k = 0; k < n; k++) c->blk[k] = count;
    }
    bool receives = all || c->rank == c->root;
    bool own_in_recv = c->inplace && receives;
    /* MPICH 4.0 pipelines allgatherv in chunks counted in each rank's own type:
     * ranks describing the same data with different types would truncate. */
    enum rep_id srep = pick_rep(c->mtype, c->coll == C_ALLGATHERV ? shared : local);
    c->sparts = xcalloc(1, sizeof *c->sparts);
    c->sparts[0] = (struct part){srep, c->blk[c->rank], 0};
    if (receives) {
        /* Open MPI 4.1 chooses its allgatherv algorithm from size(sendtype) x the
         * receive counts: a rank describing its two sides differently would choose
         * another algorithm than its peers and hang. */
        enum rep_id rrep = all ? srep : pick_rep(c->mtype, local);
        c->rparts = xcalloc((size_t)n, sizeof *c->rparts);
        for (int k = 0; k < n; k++) c->rparts[k] = (struct part){rrep, c->blk[k], 0};
        buf_alloc(&c->rbuf, place_parts(c->rparts, n, !vee, reps[rrep].extent, local));
        if (own_in_recv) part_fill(&c->rbuf, &c->rparts[c->rank], local);
        buf_snapshot(&c->rbuf);
        c->rarg = buf_base(&c->rbuf);
        c->rcount = c->blk[0] * reps[rrep].per_elem;
        c->rtype = reps[rrep].type;
        if (vee) set_v_args(c->rparts, n, &c->rcounts, &c->rdispls);
    } else {
        c->rarg = insignificant_buffer(&c->rbuf, local);
        c->rcount = (int)rng_below(local, 100);
        c->rtype = MPI_INT;
    }
    if (own_in_recv) {
        c->sarg = MPI_IN_PLACE;
        c->scount = c->rcount;
        c->stype = c->rtype;
    } else {
        buf_alloc(&c->sbuf, part_span(&c->sparts[0]));
        part_fill(&c->sbuf, &c->sparts[0], local);
        buf_snapshot(&c->sbuf);
        c->sarg = buf_base(&c->sbuf);
        c->scount = c->sparts[0].count * reps[c->sparts[0].rep].per_elem;
        c->stype = reps[c->sparts[0].rep].type;
    }
}

/* scatter, scatterv: n send parts at the root, one receive part. */
static void setup_scatter_family(struct coll_case *c, struct rng *shared, struct rng *local)
{
    bool vee = c->coll == C_SCATTERV;
    int n = c->n;
    c->blk = xmalloc((size_t)n * sizeof *c->blk);
    if (vee) {
        pick_uneven(shared, c->blk, n, move_max_span[c->mtype], c->small);
    } else {
        int count = (int)pick_count(shared, move_max_span[c->mtype], (size_t)n, c->small);
        for (int k = 0; k < n; k++) c->blk[k] = count;
    }
    bool is_root = c->rank == c->root;
    if (is_root) {
        enum rep_id srep = pick_rep(c->mtype, local);
        c->sparts = xcalloc((size_t)n, sizeof *c->sparts);
        for (int k = 0; k < n; k++) c->sparts[k] = (struct part){srep, c->blk[k], 0};
        buf_alloc(&c->sbuf, place_parts(c->sparts, n, !vee, reps[srep].extent, local));
        for (int k = 0; k < n; k++) part_fill(&c->sbuf, &c->sparts[k], local);
        buf_snapshot(&c->sbuf);
        c->sarg = buf_base(&c->sbuf);
        c->scount = c->blk[0] * reps[srep].per_elem;
        c->stype = reps[srep].type;
        if (vee) set_v_args(c->sparts, n, &c->scounts, &c->sdispls);
    } else {
        c->sarg = insignificant_buffer(&c->sbuf, local);
        c->scount = (int)rng_below(local, 100);
        c->stype = MPI_DOUBLE;
    }
    c->rparts = xcalloc(1, sizeof *c->rparts);
    c->rparts[0] = (struct part){pick_rep(c->mtype, local), c->blk[c->rank], 0};
    if (c->inplace && is_root) {
        c->rarg = MPI_IN_PLACE;
        c->rcount = c->scount;
        c->rtype = c->stype;
    } else {
        buf_alloc(&c->rbuf, part_span(&c->rparts[0]));
        buf_snapshot(&c->rbuf);
        c->rarg = buf_base(&c->rbuf);
        c->rcount = c->rparts[0].count * reps[c->rparts[0].rep].per_elem;
        c->rtype = reps[c->rparts[0].rep].type;
    }
}

static enum move_type pair_move_type(const struct coll_case *c, int from, int to)
{
    return c->pair_type ? (enum move_type)c->pair_type[from * c->n + to] : c->mtype;
}

/* alltoall, alltoallv, alltoallw: n send parts, n receive parts. In place, the
 * receive parts hold the data to send, so counts and types must be symmetric. */
static void setup_alltoall_family(struct coll_case *c, struct rng *shared, struct rng *local)
{
    int n = c->n, me = c->rank;
    bool regular = c->coll == C_ALLTOALL, wide = c->coll == C_ALLTOALLW;
    size_t span = wide ? elem_span(REP_VEC) : move_max_span[c->mtype];
    c->mat = xmalloc((size_t)n * (size_t)n * sizeof *c->mat);
    if (regular) {
        int count = (int)pick_count(shared, span, (size_t)n, c->small);
        for (int k = 0; k < n * n; k++) c->mat[k] = count;
    } else {
        int *row = xmalloc((size_t)n * sizeof *row);
        for (int i = 0; i < n; i++) {
            pick_uneven(shared, row, n, span, c->small);
            for (int j = 0; j < n; j++) c->mat[i * n + j] = row[j];
        }
        free(row);
        for (int i = 0; i < n && c->inplace; i++)
            for (int j = 0; j < i; j++) c->mat[i * n + j] = c->mat[j * n + i];
    }
    if (wide) {
        c->pair_type = xmalloc((size_t)n * (size_t)n * sizeof *c->pair_type);
        for (int k = 0; k < n * n; k++) c->pair_type[k] = (int)rng_below(shared, N_MOVE_TYPES);
        for (int i = 0; i < n && c->inplace; i++)
            for (int j = 0; j < i; j++) c->pair_type[i * n + j] = c->pair_type[j * n + i];
    }
    enum rep_id srep = pick_rep(c->mtype, local), rrep = pick_rep(c->mtype, local);
    c->sparts = xcalloc((size_t)n, sizeof *c->sparts);
    c->rparts = xcalloc((size_t)n, sizeof *c->rparts);
    for (int j = 0; j < n; j++) {
        c->sparts[j] = (struct part){wide ? pick_rep(pair_move_type(c, me, j), local) : srep, c->mat[me * n + j], 0};
        c->rparts[j] = (struct part){wide ? pick_rep(pair_move_type(c, j, me), local) : rrep, c->mat[j * n + me], 0};
    }
    buf_alloc(&c->rbuf, place_parts(c->rparts, n, regular, wide ? 8 : reps[rrep].extent, local));
    if (c->inplace)
        for (int j = 0; j < n; j++) part_fill(&c->rbuf, &c->rparts[j], local);
    buf_snapshot(&c->rbuf);
    c->rarg = buf_base(&c->rbuf);
    c->rcount = c->mat[me] * reps[rrep].per_elem;
    c->rtype = reps[rrep].type;
    if (!regular) set_v_args(c->rparts, n, &c->rcounts, &c->rdispls);
    if (c->inplace) { /* the send arguments are ignored: pass nothing meaningful */
        c->sarg = MPI_IN_PLACE;
        c->scount = c->rcount;
        c->stype = c->rtype;
    } else {
        buf_alloc(&c->sbuf, place_parts(c->sparts, n, regular, wide ? 8 : reps[srep].extent, local));
        for (int j = 0; j < n; j++) part_fill(&c->sbuf, &c->sparts[j], local);
        buf_snapshot(&c->sbuf);
        c->sarg = buf_base(&c->sbuf);
        c->scount = c->mat[me * n] * reps[srep].per_elem;
        c->stype = reps[srep].type;
        if (!regular) set_v_args(c->sparts, n, &c->scounts, &c->sdispls);
    }
    if (wide) { /* displacements in bytes, a type per peer */
        c->rtypes = xmalloc((size_t)n * sizeof *c->rtypes);
        for (int j = 0; j < n; j++) {
            c->rdispls[j] = (int)c->rparts[j].off;
            c->rtypes[j] = reps[c->rparts[j].rep].type;
        }
        if (!c->inplace) {
            c->stypes = xmalloc((size_t)n * sizeof *c->stypes);
            for (int j = 0; j < n; j++) {
                c->sdispls[j] = (int)c->sparts[j].off;
                c->stypes[j] = reps[c->sparts[j].rep].type;
            }
        }
    }
}

/* The input of one rank to a reduction: elements count, all of them. */
static size_t reduction_input_count(const struct coll_case *c)
{
    switch (c->coll) {
    case C_REDUCE_SCATTER_BLOCK: return c->count * (size_t)c->n;
    case C_REDUCE_SCATTER: {
        size_t total = 0;
        for (int k = 0; k < c->n; k++) total += (size_t)c->blk[k];
        return total;
    }
    default: return c->count;
    }
}

static void fill_reduction_input(const struct coll_case *c, struct buf *b, size_t nelem, struct rng *local)
{
    size_t sz = red_types[c->red].size;
    for (size_t k = 0; k < nelem; k++) red_gen(c->red, c->op, local, buf_base(b) + k * sz);
    buf_snapshot(b);
}

static void setup_reduction(struct coll_case *c, struct rng *shared, struct rng *local)
{
    const struct combo *cb = &combos[cycle_combo++ % N_COMBOS];
    c->red = cb->type;
    c->op = cb->op;
    size_t sz = red_types[c->red].size;
    int n = c->n;
    if (c->coll == C_REDUCE_SCATTER) {
        c->blk = xmalloc((size_t)n * sizeof *c->blk);
        pick_uneven(shared, c->blk, n, sz, c->small);
        c->rcounts = xmalloc((size_t)n * sizeof *c->rcounts);
        memcpy(c->rcounts, c->blk, (size_t)n * sizeof *c->blk);
        c->count = (size_t)c->blk[c->rank];
    } else {
        c->count = pick_count(shared, sz, c->coll == C_REDUCE_SCATTER_BLOCK ? (size_t)n : 1, c->small);
    }
    size_t in_count = reduction_input_count(c);
    /* MPICH 4.0 crashes in place: in MPI_Reduce at a root other than 0 above 2 KiB
     * (predefined and user ops alike), and in MPI_Reduce_scatter with uneven counts
     * above 512 KiB (overlapping memcpy). Open MPI runs keep these cases. */
    if (host == HOST_MPICH && c->coll == C_REDUCE && c->root != 0 && c->count * sz > 2048)
        c->inplace = false;
    if (host == HOST_MPICH && c->coll == C_REDUCE_SCATTER && in_count * sz > 512 * 1024) c->inplace = false;
    bool receives = c->coll != C_REDUCE || c->rank == c->root;
    bool input_in_recv = c->inplace && receives;
    if (receives) {
        buf_alloc(&c->rbuf, (input_in_recv ? in_count : c->count) * sz);
        if (input_in_recv) fill_reduction_input(c, &c->rbuf, in_count, local);
        c->rarg = buf_base(&c->rbuf);
    } else {
        c->rarg = insignificant_buffer(&c->rbuf, local);
    }
    if (input_in_recv) {
        c->sarg = MPI_IN_PLACE;
    } else {
        buf_alloc(&c->sbuf, in_count * sz);
        fill_reduction_input(c, &c->sbuf, in_count, local);
        c->sarg = buf_base(&c->sbuf);
    }
    c->rcount = (int)c->count;
    c->rtype = red_types[c->red].type;
}

/* ---- running ---------------------------------------------------------------------------- */

static void run_barriers(struct coll_case *c)
{
    for (int k = 0; k < c->nbarriers; k++) {
        if (c->barrier_sleep_us[k]) sleep_us(c->barrier_sleep_us[k]);
        c->t_in[k] = now_ns();
        MPI_Barrier(c->tc->comm);
        c->t_out[k] = now_ns();
    }
}

#if MPI_VERSION >= 4
/* MPI_Count / MPI_Aint copies of an int argument array (NULL stays NULL). */
static MPI_Count *count_array(const int *a, int n)
{
    if (!a) return NULL;
    MPI_Count *out = xmalloc((size_t)(n ? n : 1) * sizeof *out);
    for (int k = 0; k < n; k++) out[k] = a[k];
    return out;
}

static MPI_Aint *aint_array(const int *a, int n)
{
    if (!a) return NULL;
    MPI_Aint *out = xmalloc((size_t)(n ? n : 1) * sizeof *out);
    for (int k = 0; k < n; k++) out[k] = a[k];
    return out;
}

/* Each rank picks on its own (mixing the two APIs in one call is legal). */
static bool use_count_api(const struct coll_case *c)
{
    uint64_t h = ((uint64_t)c->id * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)world_rank * 0xBF58476D1CE4E5B9ull);
    return c->coll != C_BARRIER && (h >> 33) % 100 < (uint64_t)opt.count_api_percent;
}

/* The same call through the MPI-4 large-count API (MPI_Bcast_c, ...). */
static void run_case_count_api(struct coll_case *c)
{
    MPI_Comm comm = c->tc->comm;
    MPI_Op op = red_ops[c->op];
    int n = c->n;
    MPI_Count *sc = count_array(c->scounts, n), *rc = count_array(c->rcounts, n);
    MPI_Aint *sd = aint_array(c->sdispls, n), *rd = aint_array(c->rdispls, n);
    switch (c->coll) {
    case C_BCAST: MPI_Bcast_c(c->rarg, c->rcount, c->rtype, c->root, comm); break;
    case C_GATHER: MPI_Gather_c(c->sarg, c->scount, c->stype, c->rarg, c->rcount, c->rtype, c->root, comm); break;
    case C_GATHERV: MPI_Gatherv_c(c->sarg, c->scount, c->stype, c->rarg, rc, rd, c->rtype, c->root, comm); break;
    case C_SCATTER: MPI_Scatter_c(c->sarg, c->scount, c->stype, c->rarg, c->rcount, c->rtype, c->root, comm); break;
    case C_SCATTERV: MPI_Scatterv_c(c->sarg, sc, sd, c->stype, c->rarg, c->rcount, c->rtype, c->root, comm); break;
    case C_ALLGATHER: MPI_Allgather_c(c->sarg, c->scount, c->stype, c->rarg, c->rcount, c->rtype, comm); break;
    case C_ALLGATHERV: MPI_Allgatherv_c(c->sarg, c->scount, c->stype, c->rarg, rc, rd, c->rtype, comm); break;
    case C_ALLTOALL: MPI_Alltoall_c(c->sarg, c->scount, c->stype, c->rarg, c->rcount, c->rtype, comm); break;
    case C_ALLTOALLV: MPI_Alltoallv_c(c->sarg, sc, sd, c->stype, c->rarg, rc, rd, c->rtype, comm); break;
    case C_ALLTOALLW: MPI_Alltoallw_c(c->sarg, sc, sd, c->stypes, c->rarg, rc, rd, c->rtypes, comm); break;
    case C_REDUCE: MPI_Reduce_c(c->sarg, c->rarg, c->rcount, c->rtype, op, c->root, comm); break;
    case C_ALLREDUCE: MPI_Allreduce_c(c->sarg, c->rarg, c->rcount, c->rtype, op, comm); break;
    case C_REDUCE_SCATTER: MPI_Reduce_scatter_c(c->sarg, c->rarg, rc, c->rtype, op, comm); break;
    case C_REDUCE_SCATTER_BLOCK: MPI_Reduce_scatter_block_c(c->sarg, c->rarg, c->rcount, c->rtype, op, comm); break;
    case C_SCAN: MPI_Scan_c(c->sarg, c->rarg, c->rcount, c->rtype, op, comm); break;
    case C_EXSCAN: MPI_Exscan_c(c->sarg, c->rarg, c->rcount, c->rtype, op, comm); break;
    default: break;
    }
    free(sc), free(rc), free(sd), free(rd);
}
#endif

static void run_case(struct coll_case *c)
{
    MPI_Comm comm = c->tc->comm;
    MPI_Op op = red_ops[c->op];
    if (c->skip) return;
    if (c->skew_us) sleep_us(c->skew_us);
#if MPI_VERSION >= 4
    if (use_count_api(c)) {
        run_case_count_api(c);
        return;
    }
#endif
    switch (c->coll) {
    case C_BARRIER: run_barriers(c); break;
    case C_BCAST: MPI_Bcast(c->rarg, c->rcount, c->rtype, c->root, comm); break;
    case C_GATHER: MPI_Gather(c->sarg, c->scount, c->stype, c->rarg, c->rcount, c->rtype, c->root, comm); break;
    case C_GATHERV:
        MPI_Gatherv(c->sarg, c->scount, c->stype, c->rarg, c->rcounts, c->rdispls, c->rtype, c->root, comm);
        break;
    case C_SCATTER: MPI_Scatter(c->sarg, c->scount, c->stype, c->rarg, c->rcount, c->rtype, c->root, comm); break;
    case C_SCATTERV:
        MPI_Scatterv(c->sarg, c->scounts, c->sdispls, c->stype, c->rarg, c->rcount, c->rtype, c->root, comm);
        break;
    case C_ALLGATHER: MPI_Allgather(c->sarg, c->scount, c->stype, c->rarg, c->rcount, c->rtype, comm); break;
    case C_ALLGATHERV:
        MPI_Allgatherv(c->sarg, c->scount, c->stype, c->rarg, c->rcounts, c->rdispls, c->rtype, comm);
        break;
    case C_ALLTOALL: MPI_Alltoall(c->sarg, c->scount, c->stype, c->rarg, c->rcount, c->rtype, comm); break;
    case C_ALLTOALLV:
        MPI_Alltoallv(c->sarg, c->scounts, c->sdispls, c->stype, c->rarg, c->rcounts, c->rdispls, c->rtype, comm);
        break;
    case C_ALLTOALLW:
        MPI_Alltoallw(c->sarg, c->scounts, c->sdispls, c->stypes, c->rarg, c->rcounts, c->rdispls, c->rtypes, comm);
        break;
    case C_REDUCE: MPI_Reduce(c->sarg, c->rarg, c->rcount, c->rtype, op, c->root, comm); break;
    case C_ALLREDUCE: MPI_Allreduce(c->sarg, c->rarg, c->rcount, c->rtype, op, comm); break;
    case C_REDUCE_SCATTER: MPI_Reduce_scatter(c->sarg, c->rarg, c->rcounts, c->rtype, op, comm); break;
    case C_REDUCE_SCATTER_BLOCK: MPI_Reduce_scatter_block(c->sarg, c->rarg, c->rcount, c->rtype, op, comm); break;
    case C_SCAN: MPI_Scan(c->sarg, c->rarg, c->rcount, c->rtype, op, comm); break;
    case C_EXSCAN: MPI_Exscan(c->sarg, c->rarg, c->rcount, c->rtype, op, comm); break;
    default: break;
    }
}

/* ---- the reference and the checks ------------------------------------------------------ */

/* All entry and exit times go to rank 0, which checks max(entry) <= min(exit). */
static void verify_barrier(const struct coll_case *c)
{
    int nb = c->nbarriers, n = c->n;
    MPI_Comm comm = c->tc->comm;
    if (c->rank != 0) {
        ref_send(c->t_in, (size_t)nb * sizeof(int64_t), 0, comm);
        ref_send(c->t_out, (size_t)nb * sizeof(int64_t), 0, comm);
        return;
    }
    int64_t *in = xmalloc((size_t)nb * (size_t)n * sizeof *in), *out = xmalloc((size_t)nb * (size_t)n * sizeof *out);
    memcpy(in, c->t_in, (size_t)nb * sizeof *in);
    memcpy(out, c->t_out, (size_t)nb * sizeof *out);
    for (int r = 1; r < n; r++) {
        ref_recv(in + r * nb, (size_t)nb * sizeof *in, r, comm);
        ref_recv(out + r * nb, (size_t)nb * sizeof *out, r, comm);
    }
    for (int k = 0; k < nb; k++) {
        int last_in = 0, first_out = 0;
        for (int r = 1; r < n; r++) {
            if (in[r * nb + k] > in[last_in * nb + k]) last_in = r;
            if (out[r * nb + k] < out[first_out * nb + k]) first_out = r;
        }
        stats.checks++;
        int64_t early = in[last_in * nb + k] - out[first_out * nb + k];
        if (early > 0) {
            stats.errors++;
            report(c, "barrier %d of %d: rank %d left %" PRId64 " ns before rank %d entered", k + 1, nb, first_out,
                   early, last_in);
        }
    }
    free(in);
    free(out);
}

static void verify_bcast(const struct coll_case *c)
{
    MPI_Comm comm = c->tc->comm;
    const struct part *p = &c->rparts[0];
    unsigned char *stream;
    if (c->rank == c->root) {
        stream = part_pack(&c->rbuf, p);
        for (int r = 0; r < c->n; r++)
            if (r != c->root) ref_send(stream, part_sig(p), r, comm);
    } else {
        stream = xmalloc(part_sig(p));
        ref_recv(stream, part_sig(p), c->root, comm);
    }
    struct image im;
    image_blank(&im, &c->rbuf);
    image_place(&im, p, stream, c->root);
    check_image(c, &c->rbuf, &im, "buffer");
    image_free(&im);
    free(stream);
}

/* The data of rank r's block in the gather family: received by p2p, or local. */
static unsigned char *own_gather_input(const struct coll_case *c)
{
    if (c->inplace && (c->coll == C_ALLGATHER || c->coll == C_ALLGATHERV || c->rank == c->root))
        return part_pack(&c->rbuf, &c->rparts[c->rank]);
    return part_pack(&c->sbuf, &c->sparts[0]);
}

static void verify_gather_family(const struct coll_case *c)
{
    MPI_Comm comm = c->tc->comm;
    int n = c->n, me = c->rank;
    bool all = c->coll == C_ALLGATHER || c->coll == C_ALLGATHERV;
    size_t sig = move_sig_bytes[c->mtype];
    unsigned char **streams = xcalloc((size_t)n, sizeof *streams);
    streams[me] = own_gather_input(c);
    if (all) { /* ring: in step k pass on the block that came from rank me-k+1 */
        for (int r = 0; r < n; r++)
            if (r != me) streams[r] = xmalloc((size_t)c->blk[r] * sig);
        for (int k = 1; k < n; k++) {
            int out = (me - k + 1 + n) % n, in = (me - k + n) % n;
            ref_sendrecv(streams[out], (size_t)c->blk[out] * sig, (me + 1) % n, streams[in],
                         (size_t)c->blk[in] * sig, (me - 1 + n) % n, comm);
        }
    } else if (me != c->root) {
        ref_send(streams[me], (size_t)c->blk[me] * sig, c->root, comm);
    } else {
        for (int r = 0; r < n; r++) {
            if (r == me) continue;
            streams[r] = xmalloc((size_t)c->blk[r] * sig);
            ref_recv(streams[r], (size_t)c->blk[r] * sig, r, comm);
        }
    }
    if (all || me == c->root) {
        struct image im;
        image_blank(&im, &c->rbuf);
        for (int r = 0; r < n; r++) image_place(&im, &c->rparts[r], streams[r], r);
        check_image(c, &c->rbuf, &im, "receive buffer");
        image_free(&im);
    } else if (c->rarg) {
        check_untouched(c, &c->rbuf, "receive buffer (not significant here)");
    }
    if (c->sbuf.alloc) check_unchanged(c, &c->sbuf, "send buffer");
    for (int r = 0; r < n; r++) free(streams[r]);
    free(streams);
}

static void verify_scatter_family(const struct coll_case *c)
{
    MPI_Comm comm = c->tc->comm;
    int n = c->n, me = c->rank;
    size_t sig = move_sig_bytes[c->mtype];
    unsigned char *mine = NULL;
    if (me == c->root) {
        for (int r = 0; r < n; r++) {
            unsigned char *stream = part_pack(&c->sbuf, &c->sparts[r]);
            if (r == me) {
                mine = stream;
                continue;
            }
            ref_send(stream, (size_t)c->blk[r] * sig, r, comm);
            free(stream);
        }
        check_unchanged(c, &c->sbuf, "send buffer");
    } else {
        mine = xmalloc((size_t)c->blk[me] * sig);
        ref_recv(mine, (size_t)c->blk[me] * sig, c->root, comm);
        if (c->sarg) check_untouched(c, &c->sbuf, "send buffer (not significant here)");
    }
    if (c->rarg != MPI_IN_PLACE) {
        struct image im;
        image_blank(&im, &c->rbuf);
        image_place(&im, &c->rparts[0], mine, c->root);
        check_image(c, &c->rbuf, &im, "receive buffer");
        image_free(&im);
    }
    free(mine);
}

static void verify_alltoall_family(const struct coll_case *c)
{
    MPI_Comm comm = c->tc->comm;
    int n = c->n, me = c->rank;
    struct image im;
    image_blank(&im, &c->rbuf);
    for (int k = 0; k < n; k++) { /* pairwise: send to me+k, receive from me-k */
        int to = (me + k) % n, from = (me - k + n) % n;
        unsigned char *out = c->inplace ? part_pack(&c->rbuf, &c->rparts[to]) : part_pack(&c->sbuf, &c->sparts[to]);
        size_t in_bytes = (size_t)c->mat[from * n + me] * move_sig_bytes[pair_move_type(c, from, me)];
        unsigned char *in = xmalloc(in_bytes);
        if (k == 0)
            memcpy(in, out, in_bytes);
        else
            ref_sendrecv(out, (size_t)c->mat[me * n + to] * move_sig_bytes[pair_move_type(c, me, to)], to, in,
                         in_bytes, from, comm);
        image_place(&im, &c->rparts[from], in, from);
        free(out);
        free(in);
    }
    check_image(c, &c->rbuf, &im, "receive buffer");
    image_free(&im);
    if (c->sbuf.alloc) check_unchanged(c, &c->sbuf, "send buffer");
}

/* Reductions: a chain in rank order. Rank r receives the prefix of ranks 0..r-1,
 * folds its own input in and passes it on; the last rank holds the total. */
static void verify_reduction(const struct coll_case *c)
{
    MPI_Comm comm = c->tc->comm;
    int n = c->n, me = c->rank, last = n - 1;
    size_t sz = red_types[c->red].size, in_count = reduction_input_count(c), in_bytes = in_count * sz;
    const struct buf *input = c->sarg == MPI_IN_PLACE ? &c->rbuf : &c->sbuf;
    unsigned char *prefix = xmalloc(in_bytes), *acc = xmalloc(in_bytes);
    if (me > 0) {
        ref_recv(prefix, in_bytes, me - 1, comm);
        memcpy(acc, prefix, in_bytes);
        red_apply(c->red, c->op, acc, input->orig + GUARD, in_count);
    } else {
        memcpy(acc, input->orig + GUARD, in_bytes);
    }
    if (me < last) ref_send(acc, in_bytes, me + 1, comm);
    /* acc: inclusive prefix; prefix: exclusive prefix (me > 0); the total on the last rank */
    const unsigned char *expected = NULL;
    unsigned char *total = NULL;
    size_t nelem = c->count;
    switch (c->coll) {
    case C_SCAN: expected = acc; break;
    case C_EXSCAN: expected = me > 0 ? prefix : NULL; break;
    case C_REDUCE:
    case C_ALLREDUCE:
        total = xmalloc(in_bytes);
        if (me == last) memcpy(total, acc, in_bytes);
        for (int r = 0; r < n && me == last; r++)
            if (r != last && (c->coll == C_ALLREDUCE || r == c->root)) ref_send(total, in_bytes, r, comm);
        if (me != last && (c->coll == C_ALLREDUCE || me == c->root)) ref_recv(total, in_bytes, last, comm);
        expected = total;
        break;
    default: { /* reduce_scatter(_block): the last rank sends each rank its slice */
        size_t start = 0, my_start = 0;
        total = xmalloc(in_bytes);
        if (me == last) memcpy(total, acc, in_bytes);
        for (int r = 0; r < n; r++) {
            size_t cnt = c->coll == C_REDUCE_SCATTER ? (size_t)c->blk[r] : c->count;
            if (r == me) my_start = start;
            if (me == last && r != last) ref_send(total + start * sz, cnt * sz, r, comm);
            if (me == r && me != last) ref_recv(total + start * sz, cnt * sz, last, comm);
            start += cnt;
        }
        expected = total + my_start * sz;
        break;
    }
    }
    bool receives = c->coll != C_REDUCE || me == c->root;
    if (receives) {
        bool tail_free = c->inplace && (c->coll == C_REDUCE_SCATTER || c->coll == C_REDUCE_SCATTER_BLOCK);
        check_reduction(c, &c->rbuf, expected, nelem, tail_free, expected == NULL, "result");
    } else if (c->rarg) {
        check_untouched(c, &c->rbuf, "receive buffer (not significant here)");
    }
    if (c->sarg != MPI_IN_PLACE) check_unchanged(c, &c->sbuf, "send buffer");
    free(prefix);
    free(acc);
    free(total);
}

static void verify_case(const struct coll_case *c)
{
    if (c->skip) return;
    switch (c->coll) {
    case C_BARRIER: verify_barrier(c); break;
    case C_BCAST: verify_bcast(c); break;
    case C_GATHER:
    case C_GATHERV:
    case C_ALLGATHER:
    case C_ALLGATHERV: verify_gather_family(c); break;
    case C_SCATTER:
    case C_SCATTERV: verify_scatter_family(c); break;
    case C_ALLTOALL:
    case C_ALLTOALLV:
    case C_ALLTOALLW: verify_alltoall_family(c); break;
    default: verify_reduction(c); break;
    }
}

/* ---- case life cycle -------------------------------------------------------------------- */

/* iter numbers the cases of one (communicator, collective) so that roots go round. */
/* Collectives never called in place (test_nbc: host MPI bugs of the non-blocking forms). */
static bool no_inplace[N_COLLS];

static struct coll_case *make_case(long id, enum coll_id coll, const struct test_comm *tc, int iter, bool small)
{
    struct coll_case *c = xcalloc(1, sizeof *c);
    struct rng shared, local;
    rng_seed(&shared, opt.seed, (uint64_t)id, 0x5157);
    rng_seed(&local, opt.seed, (uint64_t)id, 0x10CA1000u + (uint64_t)tc->rank);
    c->id = id;
    c->coll = coll;
    c->tc = tc;
    c->rank = tc->rank;
    c->n = tc->size;
    c->small = small;
    c->root = rooted(coll) ? (int)(((uint64_t)iter + opt.seed) % (uint64_t)c->n) : -1;
    c->inplace = inplace_allowed(coll) && rng_chance(&shared, 35) && !no_inplace[coll];
    c->mtype = (enum move_type)(cycle_move_type++ % N_MOVE_TYPES);
    c->skew_us = !small && rng_chance(&local, 10) ? (unsigned)rng_below(&local, 1000) : 0;
    switch (coll) {
    case C_BARRIER: setup_barrier(c, &local); break;
    case C_BCAST: setup_bcast(c, &shared, &local); break;
    case C_GATHER:
    case C_GATHERV:
    case C_ALLGATHER:
    case C_ALLGATHERV: setup_gather_family(c, &shared, &local); break;
    case C_SCATTER:
    case C_SCATTERV: setup_scatter_family(c, &shared, &local); break;
    case C_ALLTOALL:
    case C_ALLTOALLV:
    case C_ALLTOALLW: setup_alltoall_family(c, &shared, &local); break;
    default: setup_reduction(c, &shared, &local); break;
    }
    /* On a communicator of one rank, Open MPI 4.1's MPI_Alltoallw moves nothing and
     * MPICH 4.0's MPI_Allgatherv ignores the displacement. */
    c->skip = c->n == 1 && ((coll == C_ALLTOALLW && host == HOST_OPEN_MPI) || (coll == C_ALLGATHERV && host == HOST_MPICH));
    if (opt.verbose && world_rank == 0) {
        char d[512];
        describe_case(c, d, sizeof d);
        fprintf(stderr, PROGRAM_NAME ": %s", d);
        for (int k = 0; c->blk && k < c->n; k++) fprintf(stderr, "%s%d", k ? "," : " counts=", c->blk[k]);
        fprintf(stderr, "\n");
    }
    return c;
}

static void free_case(struct coll_case *c)
{
    buf_free(&c->sbuf);
    buf_free(&c->rbuf);
    free(c->blk);
    free(c->mat);
    free(c->pair_type);
    free(c->sparts);
    free(c->rparts);
    free(c->scounts);
    free(c->sdispls);
    free(c->rcounts);
    free(c->rdispls);
    free(c->stypes);
    free(c->rtypes);
    free(c->barrier_sleep_us);
    free(c->t_in);
    free(c->t_out);
    free(c);
}

static int selected_colls(enum coll_id *out)
{
    int n = 0;
    for (int k = 0; k < N_COLLS; k++)
        if (opt.colls[k]) out[n++] = (enum coll_id)k;
    return n;
}

/* Calls back to back on one communicator, all checked afterwards: a collective
 * that confuses its rounds or reuses a buffer too early shows up here. */
static void run_burst(long *id, const struct test_comm *tc, int ncalls)
{
    enum coll_id colls[N_COLLS];
    int ncolls = selected_colls(colls);
    if (ncolls == 0) return;
    struct coll_case **cases = xmalloc((size_t)ncalls * sizeof *cases);
    for (int k = 0; k < ncalls; k++) {
        struct rng pick;
        rng_seed(&pick, opt.seed, (uint64_t)*id, 0xB0857);
        cases[k] = make_case(*id, colls[rng_below(&pick, (uint64_t)ncolls)], tc, k, true);
        (*id)++;
    }
    for (int k = 0; k < ncalls; k++) run_case(cases[k]);
    for (int k = 0; k < ncalls; k++) {
        verify_case(cases[k]);
        free_case(cases[k]);
    }
    free(cases);
}

/* ---- communicators ---------------------------------------------------------------------- */

static void make_comm(struct test_comm *tc, enum comm_kind kind)
{
    tc->name = comm_kind_names[kind];
    switch (kind) {
    case CK_WORLD: tc->comm = MPI_COMM_WORLD; break;
    case CK_EVENODD: MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &tc->comm); break;
    case CK_REVERSED: MPI_Comm_split(MPI_COMM_WORLD, 0, world_size - 1 - world_rank, &tc->comm); break;
    case CK_DUP: MPI_Comm_dup(MPI_COMM_WORLD, &tc->comm); break;
    default: MPI_Comm_split(MPI_COMM_WORLD, world_rank, 0, &tc->comm); break;
    }
    MPI_Comm_rank(tc->comm, &tc->rank);
    MPI_Comm_size(tc->comm, &tc->size);
}

static void free_comm(struct test_comm *tc)
{
    if (tc->comm != MPI_COMM_WORLD) MPI_Comm_free(&tc->comm);
}

/* Communicators created, used for one case and freed, alternating dup and split. */
static void run_churn(long *id)
{
    enum coll_id colls[N_COLLS];
    int ncolls = selected_colls(colls);
    for (int k = 0; k < opt.churn && ncolls > 0; k++) {
        struct test_comm tc = {.name = k % 2 ? "churn-split3" : "churn-dup"};
        if (k % 2)
            MPI_Comm_split(MPI_COMM_WORLD, world_rank % 3, -world_rank, &tc.comm);
        else
            MPI_Comm_dup(MPI_COMM_WORLD, &tc.comm);
        MPI_Comm_rank(tc.comm, &tc.rank);
        MPI_Comm_size(tc.comm, &tc.size);
        struct rng pick;
        rng_seed(&pick, opt.seed, (uint64_t)*id, 0xC4u);
        struct coll_case *c = make_case(*id, colls[rng_below(&pick, (uint64_t)ncolls)], &tc, k, true);
        (*id)++;
        run_case(c);
        verify_case(c);
        free_case(c);
        MPI_Comm_free(&tc.comm);
    }
}

/* ---- startup -------------------------------------------------------------------------- */

static void make_types_and_ops(void)
{
    MPI_Datatype strided;
    MPI_Type_vector(2, 3, 5, MPI_INT, &strided);
    MPI_Type_create_resized(strided, 0, 40, &vec_type);
    MPI_Type_commit(&vec_type);
    MPI_Type_free(&strided);
    MPI_Type_contiguous(4, MPI_UINT32_T, &mat2_type);
    MPI_Type_commit(&mat2_type);
    MPI_Type_contiguous(2, MPI_DOUBLE, &affine_type);
    MPI_Type_commit(&affine_type);

    reps[REP_BYTE].type = MPI_BYTE;
    reps[REP_INT].type = MPI_INT;
    reps[REP_DOUBLE].type = MPI_DOUBLE;
    reps[REP_VEC].type = vec_type;
    reps[REP_VEC_AS_INT].type = MPI_INT;

    red_types[RT_BYTE].type = MPI_BYTE;
    red_types[RT_CHAR].type = MPI_CHAR;
    red_types[RT_INT].type = MPI_INT;
    red_types[RT_FLOAT].type = MPI_FLOAT;
    red_types[RT_DOUBLE].type = MPI_DOUBLE;
    red_types[RT_CDOUBLE].type = MPI_C_DOUBLE_COMPLEX;
    red_types[RT_2INT].type = MPI_2INT;
    red_types[RT_DOUBLE_INT].type = MPI_DOUBLE_INT;
    red_types[RT_MAT2].type = mat2_type;
    red_types[RT_AFFINE].type = affine_type;

    MPI_Op predefined[] = {MPI_MAX, MPI_MIN, MPI_SUM, MPI_PROD, MPI_LAND, MPI_LOR, MPI_LXOR,
                           MPI_BAND, MPI_BOR, MPI_BXOR, MPI_MAXLOC, MPI_MINLOC};
    memcpy(red_ops, predefined, sizeof predefined);
    MPI_Op_create(user_sum_fn, 1, &red_ops[OP_USER_SUM]);
    MPI_Op_create(user_matmul_fn, 0, &red_ops[OP_USER_MATMUL]);
    MPI_Op_create(user_affine_fn, 0, &red_ops[OP_USER_AFFINE]);
}

static void free_types_and_ops(void)
{
    MPI_Type_free(&vec_type);
    MPI_Type_free(&mat2_type);
    MPI_Type_free(&affine_type);
    for (int k = OP_USER_SUM; k < N_RED_OPS; k++) MPI_Op_free(&red_ops[k]);
}

static void usage_exit(const char *why)
{
    if (world_rank == 0) {
        fprintf(stderr, "test_coll: %s\n", why);
        fprintf(stderr, "usage: test_coll [--colls a,b] [--comms a,b] [--iters N] [--seed S] [--max-bytes N[K|M]]\n"
                        "                 [--large PERCENT] [--burst N] [--churn N] [--quick] [--verbose]\n"
                        "  --large: share of cases sized 1 MiB .. max-bytes\n  colls:");
        for (int k = 0; k < N_COLLS; k++) fprintf(stderr, " %s", coll_names[k]);
        fprintf(stderr, "\n  comms:");
        for (int k = 0; k < N_COMM_KINDS; k++) fprintf(stderr, " %s", comm_kind_names[k]);
        fprintf(stderr, "\n");
    }
    MPI_Finalize();
    exit(2);
}

static void parse_names(const char *list, const char *const *names, int n, bool *chosen)
{
    char *copy = strdup(list), *save = NULL;
    memset(chosen, 0, (size_t)n * sizeof *chosen);
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        bool found = false;
        for (int k = 0; k < n; k++)
            if (!strcmp(tok, names[k]) || !strcmp(tok, "all")) chosen[k] = found = true;
        if (!found) {
            char why[128];
            snprintf(why, sizeof why, "unknown name '%s'", tok);
            free(copy);
            usage_exit(why);
        }
    }
    free(copy);
}

static size_t parse_bytes(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (*end == 'K' || *end == 'k') v *= 1024;
    if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
    return (size_t)v;
}

static void parse_options(int argc, char **argv)
{
    bool quick = false;
    for (int k = 1; k < argc; k++)
        if (!strcmp(argv[k], "--quick")) quick = true;
    opt = (struct options){.seed = 1, .iters = quick ? 2 : 6, .max_bytes = quick ? MIB : 8 * MIB,
                           .large_percent = quick ? 3 : 6, .burst = quick ? 60 : 200, .churn = quick ? 4 : 12,
                           .count_api_percent = 25};
    for (int k = 0; k < N_COLLS; k++) opt.colls[k] = true;
    for (int k = 0; k < N_COMM_KINDS; k++) opt.comms[k] = true;
    for (int k = 1; k < argc; k++) {
        const char *a = argv[k], *v = k + 1 < argc ? argv[k + 1] : NULL;
        if (!strcmp(a, "--quick")) continue;
        if (!strcmp(a, "--verbose")) {
            opt.verbose = true;
            continue;
        }
        if (!v) usage_exit("missing value");
        k++;
        if (!strcmp(a, "--colls")) parse_names(v, coll_names, N_COLLS, opt.colls);
        else if (!strcmp(a, "--comms")) parse_names(v, comm_kind_names, N_COMM_KINDS, opt.comms);
        else if (!strcmp(a, "--iters")) opt.iters = atoi(v);
        else if (!strcmp(a, "--seed")) opt.seed = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--max-bytes")) opt.max_bytes = parse_bytes(v);
        else if (!strcmp(a, "--large")) opt.large_percent = atoi(v);
        else if (!strcmp(a, "--burst")) opt.burst = atoi(v);
        else if (!strcmp(a, "--churn")) opt.churn = atoi(v);
        else if (!strcmp(a, "--count-api")) opt.count_api_percent = atoi(v);
        else usage_exit("unknown option");
    }
    if (opt.max_bytes < 64) opt.max_bytes = 64;
}

/* Totals go to world rank 0 by p2p (collectives are what is under test), which
 * prints them and tells every rank the verdict. */
static int finish(long ncases)
{
    uint64_t mine[2] = {stats.checks, stats.errors}, total[2] = {stats.checks, stats.errors};
    int failed;
    if (world_rank == 0) {
        for (int r = 1; r < world_size; r++) {
            uint64_t theirs[2];
            MPI_Recv(theirs, 2, MPI_UINT64_T, r, TAG_REF, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            total[0] += theirs[0];
            total[1] += theirs[1];
        }
        failed = total[1] != 0;
        printf(PROGRAM_NAME ": %ld cases on %d ranks, seed %" PRIu64 "\n", ncases, world_size, opt.seed);
        printf(PROGRAM_NAME ": %" PRIu64 " checks, %" PRIu64 " errors\n", total[0], total[1]);
        fflush(stdout);
        for (int r = 1; r < world_size; r++) MPI_Send(&failed, 1, MPI_INT, r, TAG_REF, MPI_COMM_WORLD);
    } else {
        MPI_Send(mine, 2, MPI_UINT64_T, 0, TAG_REF, MPI_COMM_WORLD);
        MPI_Recv(&failed, 1, MPI_INT, 0, TAG_REF, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    return failed;
}

/* Derived types made, used and freed one after the other: the host MPI may hand
 * the same handle to a type of another layout, which a library that remembers
 * types by handle must notice. Each type is k ints wide with stride k+1. */
static void run_type_reuse(void)
{
    enum { ROUNDS = 40, MAXK = 6 };
    int buf[2 * (MAXK + 1)], expect[2 * (MAXK + 1)];
    for (int round = 0; round < ROUNDS; round++) {
        int k = 1 + round % MAXK;
        MPI_Datatype t;
        MPI_Type_vector(2, k, k + 1, MPI_INT, &t);
        MPI_Type_commit(&t);
        for (int i = 0; i < 2 * (k + 1); i++) {
            expect[i] = (i % (k + 1)) < k ? 1000 * round + i : -1;
            buf[i] = world_rank == 0 || (i % (k + 1)) == k ? expect[i] : -7;
        }
        MPI_Bcast(buf, 1, t, 0, MPI_COMM_WORLD);
        for (int i = 0; i < 2 * (k + 1); i++) {
            stats.checks++;
            if (buf[i] != expect[i]) {
                stats.errors++;
                fprintf(stderr, "test_coll: type reuse round %d (k=%d) rank %d: element %d is %d, not %d\n",
                        round, k, world_rank, i, buf[i], expect[i]);
                break;
            }
        }
        MPI_Type_free(&t);
    }
}

#ifndef TEST_COLL_NO_MAIN
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    parse_options(argc, argv);
    make_types_and_ops();
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int version_len;
    MPI_Get_library_version(version, &version_len);
    host = strstr(version, "Open MPI") ? HOST_OPEN_MPI : strstr(version, "MPICH") ? HOST_MPICH : HOST_OTHER;

    struct test_comm comms[N_COMM_KINDS];
    for (int k = 0; k < N_COMM_KINDS; k++) make_comm(&comms[k], (enum comm_kind)k);

    long id = 0;
    for (int k = 0; k < N_COMM_KINDS; k++) {
        if (!opt.comms[k]) continue;
        for (int coll = 0; coll < N_COLLS; coll++) {
            if (!opt.colls[coll]) continue;
            for (int it = 0; it < opt.iters; it++) {
                struct coll_case *c = make_case(id++, (enum coll_id)coll, &comms[k], it, false);
                run_case(c);
                verify_case(c);
                free_case(c);
            }
        }
    }
    for (int k = 0; k < N_COMM_KINDS && opt.burst > 0; k++)
        if (opt.comms[k]) run_burst(&id, &comms[k], opt.burst);
    run_churn(&id);
    if (opt.colls[C_BCAST]) run_type_reuse();

    for (int k = 0; k < N_COMM_KINDS; k++) free_comm(&comms[k]);
    free_types_and_ops();
    int failed = finish(id);
    MPI_Finalize();
    return failed ? 1 : 0;
}
#endif /* TEST_COLL_NO_MAIN */
