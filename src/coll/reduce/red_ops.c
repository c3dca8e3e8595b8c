/* Folds of the predefined ops on the predefined C types, without the host MPI:
 * MPI_Reduce_local adds a call's overhead and runs element by element in both
 * MPIs, where these loops go at memory speed. Each computes exactly
 * what the MPIs' own loops compute (inout = in op inout element by element; MIN
 * and MAX keep inout unless in compares below/above it, as both do), so results
 * are bit-identical. Other pairs (user ops, derived types, long double, complex
 * products, ...) go to PMPI_Reduce_local.
 *
 * Inner loops of a fixed 16 elements let GCC vectorise them at -O2. Signed
 * integer sums and products run on the unsigned type of the same width: the
 * same bits, without C's undefined overflow. */
#include <limits.h>
#include <stdint.h>

#include "coll/reduce/red.h"

#define BLOCK 16

/* name(in, inout, n): inout[i] = expr(a = in[i], b = inout[i]). The fixed-size
 * block takes restrict parameters: GCC only then proves the two do not overlap. */
#define MCOLL_KERNEL(name, T, expr)                                        \
  static inline void name##_block(const T *restrict in, T *restrict io) { \
    for (int k = 0; k < BLOCK; k++) {                                     \
      T a = in[k], b = io[k];                                             \
      io[k] = (T)(expr);                                                  \
    }                                                                     \
  }                                                                       \
  static void name(const void *in_, void *inout_, size_t n) {             \
    const T *in = in_;                                                    \
    T *io = inout_;                                                       \
    size_t i = 0;                                                         \
    for (; i + BLOCK <= n; i += BLOCK) name##_block(in + i, io + i);      \
    for (; i < n; i++) {                                                  \
      T a = in[i], b = io[i];                                             \
      io[i] = (T)(expr);                                                  \
    }                                                                     \
  }

/* Products widen to unsigned int first: uint16_t * uint16_t would be int. */
#define MCOLL_UNSIGNED_KERNELS(T, W, tag)                    \
  MCOLL_KERNEL(sum_##tag, T, a + b)                          \
  MCOLL_KERNEL(prod_##tag, T, (W)a * (W)b)                   \
  MCOLL_KERNEL(band_##tag, T, a & b)                         \
  MCOLL_KERNEL(bor_##tag, T, a | b)                          \
  MCOLL_KERNEL(bxor_##tag, T, a ^ b)                         \
  MCOLL_KERNEL(land_##tag, T, a && b)                        \
  MCOLL_KERNEL(lor_##tag, T, a || b)                         \
  MCOLL_KERNEL(lxor_##tag, T, !a != !b)                      \
  MCOLL_KERNEL(min_##tag, T, a < b ? a : b)                  \
  MCOLL_KERNEL(max_##tag, T, a > b ? a : b)

#define MCOLL_ORDERED_KERNELS(T, tag)                        \
  MCOLL_KERNEL(min_##tag, T, a < b ? a : b)                  \
  MCOLL_KERNEL(max_##tag, T, a > b ? a : b)

MCOLL_UNSIGNED_KERNELS(uint8_t, unsigned, u8)
MCOLL_UNSIGNED_KERNELS(uint16_t, unsigned, u16)
MCOLL_UNSIGNED_KERNELS(uint32_t, uint32_t, u32)
MCOLL_UNSIGNED_KERNELS(uint64_t, uint64_t, u64)
MCOLL_ORDERED_KERNELS(int8_t, s8)
MCOLL_ORDERED_KERNELS(int16_t, s16)
MCOLL_ORDERED_KERNELS(int32_t, s32)
MCOLL_ORDERED_KERNELS(int64_t, s64)
MCOLL_KERNEL(sum_f32, float, a + b)
MCOLL_KERNEL(prod_f32, float, a * b)
MCOLL_ORDERED_KERNELS(float, f32)
MCOLL_KERNEL(sum_f64, double, a + b)
MCOLL_KERNEL(prod_f64, double, a * b)
MCOLL_ORDERED_KERNELS(double, f64)

/* Complex sums are sums of the real and imaginary parts. */
static void sum_c32(const void *in, void *inout, size_t n) { sum_f32(in, inout, 2 * n); }
static void sum_c64(const void *in, void *inout, size_t n) { sum_f64(in, inout, 2 * n); }

/* MINLOC/MAXLOC: the better value wins; on a tie the smaller index. */
#define MCOLL_LOC_KERNELS(V, tag)                                             \
  struct pair_##tag {                                                         \
    V v;                                                                      \
    int k;                                                                    \
  };                                                                          \
  static void minloc_##tag(const void *in_, void *inout_, size_t n) {         \
    const struct pair_##tag *in = in_;                                        \
    struct pair_##tag *io = inout_;                                           \
    for (size_t i = 0; i < n; i++) {                                          \
      if (in[i].v < io[i].v) io[i].v = in[i].v, io[i].k = in[i].k;            \
      else if (in[i].v == io[i].v && in[i].k < io[i].k) io[i].k = in[i].k;    \
    }                                                                         \
  }                                                                           \
  static void maxloc_##tag(const void *in_, void *inout_, size_t n) {         \
    const struct pair_##tag *in = in_;                                        \
    struct pair_##tag *io = inout_;                                           \
    for (size_t i = 0; i < n; i++) {                                          \
      if (in[i].v > io[i].v) io[i].v = in[i].v, io[i].k = in[i].k;            \
      else if (in[i].v == io[i].v && in[i].k < io[i].k) io[i].k = in[i].k;    \
    }                                                                         \
  }

MCOLL_LOC_KERNELS(int, int)
MCOLL_LOC_KERNELS(float, float)
MCOLL_LOC_KERNELS(double, double)
MCOLL_LOC_KERNELS(long, long)
MCOLL_LOC_KERNELS(short, short)

enum kind { K_NONE, K_SIGNED, K_UNSIGNED, K_BYTE, K_FLOAT, K_COMPLEX, K_PAIR };

static enum kind kind_of(MPI_Datatype type) {
  /* MPI_CHAR is C's char (both MPIs fold it so where they take it, e.g. OSU's
   * default MPI_SUM on MPI_CHAR): signed or not as the compiler's char. */
  if (type == MPI_CHAR) return CHAR_MIN < 0 ? K_SIGNED : K_UNSIGNED;
  if (type == MPI_INT || type == MPI_LONG || type == MPI_SHORT || type == MPI_LONG_LONG ||
      type == MPI_SIGNED_CHAR || type == MPI_INT8_T || type == MPI_INT16_T ||
      type == MPI_INT32_T || type == MPI_INT64_T)
    return K_SIGNED;
  if (type == MPI_UNSIGNED || type == MPI_UNSIGNED_LONG || type == MPI_UNSIGNED_SHORT ||
      type == MPI_UNSIGNED_LONG_LONG || type == MPI_UNSIGNED_CHAR || type == MPI_UINT8_T ||
      type == MPI_UINT16_T || type == MPI_UINT32_T || type == MPI_UINT64_T)
    return K_UNSIGNED;
  if (type == MPI_BYTE) return K_BYTE;
  if (type == MPI_FLOAT || type == MPI_DOUBLE) return K_FLOAT;
  if (type == MPI_C_FLOAT_COMPLEX || type == MPI_C_DOUBLE_COMPLEX) return K_COMPLEX;
  if (type == MPI_2INT || type == MPI_FLOAT_INT || type == MPI_DOUBLE_INT ||
      type == MPI_LONG_INT || type == MPI_SHORT_INT)
    return K_PAIR;
  return K_NONE;
}

/* Index of a width among 1, 2, 4, 8 bytes, or -1. */
static int width_index(size_t size) {
  switch (size) {
  case 1: return 0;
  case 2: return 1;
  case 4: return 2;
  case 8: return 3;
  default: return -1;
  }
}

static mcoll_red_kernel integer_kernel(MPI_Op op, enum kind kind, int w) {
  static const mcoll_red_kernel sum[] = {sum_u8, sum_u16, sum_u32, sum_u64},
                                prod[] = {prod_u8, prod_u16, prod_u32, prod_u64},
                                band[] = {band_u8, band_u16, band_u32, band_u64},
                                bor[] = {bor_u8, bor_u16, bor_u32, bor_u64},
                                bxor[] = {bxor_u8, bxor_u16, bxor_u32, bxor_u64},
                                land[] = {land_u8, land_u16, land_u32, land_u64},
                                lor[] = {lor_u8, lor_u16, lor_u32, lor_u64},
                                lxor[] = {lxor_u8, lxor_u16, lxor_u32, lxor_u64},
                                umin[] = {min_u8, min_u16, min_u32, min_u64},
                                umax[] = {max_u8, max_u16, max_u32, max_u64},
                                smin[] = {min_s8, min_s16, min_s32, min_s64},
                                smax[] = {max_s8, max_s16, max_s32, max_s64};
  if (op == MPI_BAND) return band[w];
  if (op == MPI_BOR) return bor[w];
  if (op == MPI_BXOR) return bxor[w];
  if (kind == K_BYTE) return NULL;
  if (op == MPI_SUM) return sum[w];
  if (op == MPI_PROD) return prod[w];
  if (op == MPI_LAND) return land[w];
  if (op == MPI_LOR) return lor[w];
  if (op == MPI_LXOR) return lxor[w];
  if (op == MPI_MIN) return kind == K_SIGNED ? smin[w] : umin[w];
  if (op == MPI_MAX) return kind == K_SIGNED ? smax[w] : umax[w];
  return NULL;
}

static mcoll_red_kernel pair_kernel(MPI_Op op, MPI_Datatype type) {
  int max = op == MPI_MAXLOC;
  if (op != MPI_MINLOC && op != MPI_MAXLOC) return NULL;
  if (type == MPI_2INT) return max ? maxloc_int : minloc_int;
  if (type == MPI_FLOAT_INT) return max ? maxloc_float : minloc_float;
  if (type == MPI_DOUBLE_INT) return max ? maxloc_double : minloc_double;
  if (type == MPI_LONG_INT) return max ? maxloc_long : minloc_long;
  return max ? maxloc_short : minloc_short;
}

mcoll_red_kernel mcoll__red_kernel(MPI_Datatype type, MPI_Op op, size_t size) {
  enum kind kind = kind_of(type);
  int w = width_index(size);
  switch (kind) {
  case K_SIGNED:
  case K_UNSIGNED:
  case K_BYTE: return w >= 0 ? integer_kernel(op, kind, w) : NULL;
  case K_FLOAT:
    if (size == sizeof(float))
      return op == MPI_SUM ? sum_f32 : op == MPI_PROD ? prod_f32 : op == MPI_MIN ? min_f32
                                                          : op == MPI_MAX ? max_f32 : NULL;
    return op == MPI_SUM ? sum_f64 : op == MPI_PROD ? prod_f64 : op == MPI_MIN ? min_f64
                                                      : op == MPI_MAX ? max_f64 : NULL;
  case K_COMPLEX:
    if (op != MPI_SUM) return NULL;
    return size == 2 * sizeof(float) ? sum_c32 : size == 2 * sizeof(double) ? sum_c64 : NULL;
  case K_PAIR: return pair_kernel(op, type);
  default: return NULL;
  }
}

int mcoll__red_symmetric(MPI_Datatype type, MPI_Op op) {
  switch (kind_of(type)) {
  case K_SIGNED:
  case K_UNSIGNED:
  case K_BYTE: return 1;
  case K_FLOAT: return op == MPI_SUM || op == MPI_PROD;
  case K_COMPLEX: return op == MPI_SUM;
  case K_PAIR: return type == MPI_2INT || type == MPI_LONG_INT || type == MPI_SHORT_INT;
  default: return 0;
  }
}
