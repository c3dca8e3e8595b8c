/* Open MPI's stand-in (included by standin.c): a handle is the address of a data object
 * of libmpi.so.40. A PIE program takes the predefined ones by copy relocations, so in each
 * rank's namespace MPI_COMM_WORLD, MPI_INT, MPI_SUM... are addresses in that rank's copy
 * of the program (or of this library), which the stand-in sees through its GOT. Every
 * handle going to the runtime is translated to the host library's object of the same
 * index (openmpi_objects.txt), and every handle coming back to the rank's; handles the
 * host or the runtime creates pass unchanged. Calls taking arrays of handles are
 * written out in standin_openmpi_arrays.c; the generic ones below are weak. */
#ifndef MCOLL_THREADS_STANDIN_OPENMPI_H
#define MCOLL_THREADS_STANDIN_OPENMPI_H

#include <string.h>

/* (generated from openmpi_objects.txt) */
extern void *const thr_standin_objects[];
extern const int thr_standin_nobjects;

void *thr_standin_to_host(void *handle);
void *thr_standin_to_rank(void *handle);
void thr_standin_objects_bind(const void *const *host_objects);
/* The shells that stand for Fortran communicators' C handles (standin_openmpi_fortran.c
 * makes them and fills this in): where they are, and where each keeps the runtime's
 * handle. The translation to the host turns a shell back into that handle. */
struct thr_comm_shells {
  unsigned char *base;
  size_t count, bytes, handle_at;
};
extern struct thr_comm_shells thr_standin_shells;
/* The runtime's handle of a shell, or handle itself. */
void *thr_standin_comm_shell_handle(void *handle);

/* (standin.c) */
extern struct thr_rank *self;
extern const struct thr_api *api;

/* In place: p points to a handle (any of the pointer types below). */
static inline void tr_value_in(void *p)
{
  void *h;
  memcpy(&h, p, sizeof h);
  h = thr_standin_to_host(h);
  memcpy(p, &h, sizeof h);
}

static inline void tr_value_out(void *p)
{
  void *h;
  memcpy(&h, p, sizeof h);
  h = thr_standin_to_rank(h);
  memcpy(p, &h, sizeof h);
}

/* pp points to a parameter that points to one handle (in, out or both). */
static inline void tr_pointer_in(void *pp)
{
  void *p;
  memcpy(&p, pp, sizeof p);
  if (p)
    tr_value_in(p);
}

static inline void tr_pointer_out(void *pp)
{
  void *p;
  memcpy(&p, pp, sizeof p);
  if (p)
    tr_value_out(p);
}

static inline void tr_none(const void *p)
{
  (void)p;
}

#define TR_HANDLE_TYPES(value, pointer)                                                     \
  MPI_Comm: value, MPI_Datatype: value, MPI_Op: value, MPI_Request: value,                     \
  MPI_Errhandler: value, MPI_Info: value, MPI_Group: value, MPI_Message: value,                \
  MPI_Win: value, MPI_File: value,                                                             \
  MPI_Comm *: pointer, MPI_Datatype *: pointer, MPI_Op *: pointer, MPI_Request *: pointer,     \
  MPI_Errhandler *: pointer, MPI_Info *: pointer, MPI_Group *: pointer,                        \
  MPI_Message *: pointer, MPI_Win *: pointer, MPI_File *: pointer

/* Before the call every handle parameter (or handle a parameter points to) becomes the
 * host's; after it, a handle a parameter points to becomes the rank's. */
#define TR_IN(x) _Generic((x), TR_HANDLE_TYPES(tr_value_in, tr_pointer_in), default: tr_none)(&(x));
#define TR_OUT(x) _Generic((x), TR_HANDLE_TYPES(tr_none, tr_pointer_out), default: tr_none)(&(x));

/* TR_EACH(F, a, b, ...): F(a) F(b) ... for up to 14 arguments (none included). */
#define TR_COUNT(...) TR_COUNT_(0 __VA_OPT__(,) __VA_ARGS__, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, \
                                3, 2, 1, 0)
#define TR_COUNT_(z, a, b, c, d, e, f, g, h, i, j, k, l, m, n, count, ...) count
#define TR_CAT(a, b) TR_CAT_(a, b)
#define TR_CAT_(a, b) a##b
#define TR_EACH(F, ...) TR_CAT(TR_EACH_, TR_COUNT(__VA_ARGS__))(F __VA_OPT__(,) __VA_ARGS__)
#define TR_EACH_0(F)
#define TR_EACH_1(F, x) F(x)
#define TR_EACH_2(F, x, ...) F(x) TR_EACH_1(F, __VA_ARGS__)
#define TR_EACH_3(F, x, ...) F(x) TR_EACH_2(F, __VA_ARGS__)
#define TR_EACH_4(F, x, ...) F(x) TR_EACH_3(F, __VA_ARGS__)
#define TR_EACH_5(F, x, ...) F(x) TR_EACH_4(F, __VA_ARGS__)
#define TR_EACH_6(F, x, ...) F(x) TR_EACH_5(F, __VA_ARGS__)
#define TR_EACH_7(F, x, ...) F(x) TR_EACH_6(F, __VA_ARGS__)
#define TR_EACH_8(F, x, ...) F(x) TR_EACH_7(F, __VA_ARGS__)
#define TR_EACH_9(F, x, ...) F(x) TR_EACH_8(F, __VA_ARGS__)
#define TR_EACH_10(F, x, ...) F(x) TR_EACH_9(F, __VA_ARGS__)
#define TR_EACH_11(F, x, ...) F(x) TR_EACH_10(F, __VA_ARGS__)
#define TR_EACH_12(F, x, ...) F(x) TR_EACH_11(F, __VA_ARGS__)
#define TR_EACH_13(F, x, ...) F(x) TR_EACH_12(F, __VA_ARGS__)
#define TR_EACH_14(F, x, ...) F(x) TR_EACH_13(F, __VA_ARGS__)

#define WEAK __attribute__((weak, visibility("default")))

/* One translated call under a name; CALL is the call of the runtime. */
#define TR_DEFINE(ret, fname, params, args, call)                                              \
  WEAK ret fname params                                                                        \
  {                                                                                            \
    TR_EACH(TR_IN, THR_UNPAREN args)                                                           \
    ret rc = call;                                                                             \
    TR_EACH(TR_OUT, THR_UNPAREN args)                                                          \
    return rc;                                                                                 \
  }

#define STANDIN_RUNTIME(ret, name, params, args)                                               \
  TR_DEFINE(ret, MPI_##name, params, args, api->name(self, THR_UNPAREN args))                  \
  TR_DEFINE(ret, PMPI_##name, params, args, api->name(self, THR_UNPAREN args))
#define STANDIN_SMPI(ret, name, params, args)                                                  \
  TR_DEFINE(ret, MPIX_##name, params, args, api->name(self, THR_UNPAREN args))
#define STANDIN_RUNTIME0(ret, name)                                                            \
  EXPORT ret MPI_##name(void) { return api->name(self); }                                      \
  EXPORT ret PMPI_##name(void) { return api->name(self); }
#define STANDIN_HOST(ret, name, params, args)                                                  \
  TR_DEFINE(ret, MPI_##name, params, args, api->host_##name args)                              \
  TR_DEFINE(ret, PMPI_##name, params, args, api->host_##name args)

#endif
