/* Every collective's C entry points, made from its row of the table
 * (core/collectives.h) around its body mcoll__wrap_<lower> (pmpi/wrap.h):
 *
 *   MPI_<Name>       the body on the communicator's context, or the host MPI's call
 *                    (T-NBC rows first offer the call to T-NBC when it is on:
 *                    tnbc/entry.h);
 *   MPI_I<lower>     the same body as a task (task/task.h) on a copy of the
 *                    arguments, and of the arrays for VECTOR and W rows;
 *   MPI_<Name>_init  where the host MPI has persistent collectives: the same task,
 *                    built once and started by MPI_Start.
 *
 * The non-blocking and persistent forms hand the call to the host MPI's own when
 * non-blocking collectives are off (MCOLL_NBC=0) or comm is an intercommunicator
 * (mcoll__nbc_on). */
#include <stdint.h>

#include "pmpi/wrap.h"
#include "tnbc/entry.h"

#define MCOLL_DECL(UPPER) MCOLL_ARGLIST(MCOLL_PARAMS_##UPPER, MCOLL_PARAM_DECL)
#define MCOLL_NAMES(UPPER) MCOLL_ARGLIST(MCOLL_PARAMS_##UPPER, MCOLL_PARAM_NAME)
#define MCOLL_PARAM_FROM(kind, name) , a->name

/* The blocking call: the body on comm's context, else the host MPI's own call (in a
 * task, its non-blocking form: MCOLL_HOST). Inlined where it is called, so that
 * the blocking call makes one call, the body's. */
#define MCOLL_RUN(Name, lower, UPPER)                                           \
  __attribute__((always_inline)) static inline int lower##_run(MCOLL_DECL(UPPER)) { \
    struct mcoll_comm *c = mcoll__enter(MCOLL_COLL_##UPPER, comm);              \
    int err = c ? mcoll__wrap_##lower(c, MCOLL_NAMES(UPPER)) : MCOLL_TO_HOST;   \
    if (err != MCOLL_TO_HOST) return err;                                       \
    return MCOLL_HOST(Name, I##lower, MCOLL_NAMES(UPPER));                      \
  }

/* The blocking call on an argument record: what a task runs. */
#define MCOLL_TASK(lower, UPPER)                                                \
  static int lower##_task(const void *args) {                                   \
    const struct mcoll_mpi_##lower##_args *a = args;                            \
    return lower##_run(MCOLL_ARGLIST(MCOLL_PARAMS_##UPPER, MCOLL_PARAM_FROM));  \
  }

/* The arrays of a VECTOR or W call, copied when its task is made: the caller may
 * change or free them before the call completes. Those significant at the root
 * only (ROOT_INTS) are copied there. Returns keep, which owns the copies. */
#define MCOLL_FIND_ROOT(kind, name) MCOLL_FIND_ROOT_##kind(name)
#define MCOLL_FIND_ROOT_ROOT(name) at_root = mcoll__is_root(a->comm, a->name);
#define MCOLL_COPY_ARRAY(kind, name) MCOLL_COPY_##kind(name)
#define MCOLL_COPY_INTS(name) \
  a->name = mcoll__task_keep(keep, a->name, entries * sizeof *a->name);
#define MCOLL_COPY_TYPES MCOLL_COPY_INTS
#define MCOLL_COPY_ROOT_INTS(name) if (at_root) MCOLL_COPY_INTS(name)
/* (the other kinds: nothing to find, nothing to copy) */
#define MCOLL_FIND_ROOT_SBUF(name)
#define MCOLL_FIND_ROOT_RBUF(name)
#define MCOLL_FIND_ROOT_COUNT(name)
#define MCOLL_FIND_ROOT_TYPE(name)
#define MCOLL_FIND_ROOT_OP(name)
#define MCOLL_FIND_ROOT_COMM(name)
#define MCOLL_FIND_ROOT_INTS(name)
#define MCOLL_FIND_ROOT_ROOT_INTS(name)
#define MCOLL_FIND_ROOT_TYPES(name)
#define MCOLL_COPY_SBUF(name)
#define MCOLL_COPY_RBUF(name)
#define MCOLL_COPY_COUNT(name)
#define MCOLL_COPY_ROOT(name)
#define MCOLL_COPY_TYPE(name)
#define MCOLL_COPY_OP(name)
#define MCOLL_COPY_COMM(name)

#define MCOLL_ARRAYS_NONE(lower, UPPER)
#define MCOLL_ARRAYS_SCALAR(lower, UPPER)
#define MCOLL_ARRAYS_W MCOLL_ARRAYS_VECTOR
#define MCOLL_ARRAYS_VECTOR(lower, UPPER)                                       \
  static struct mcoll_task_keep *lower##_keep(void *args, struct mcoll_task_keep *keep) { \
    struct mcoll_mpi_##lower##_args *a = args;                                  \
    size_t entries = (size_t)mcoll__array_entries(a->comm);                     \
    int at_root = 1;                                                            \
    MCOLL_PARAMS_##UPPER(MCOLL_FIND_ROOT)                                       \
    MCOLL_PARAMS_##UPPER(MCOLL_COPY_ARRAY)                                      \
    (void)at_root;                                                              \
    return keep;                                                                \
  }
/* The keep argument of mcoll__persistent_make for record a; mcoll__start's, which
 * copies the arrays only when it makes a task. */
#define MCOLL_KEPT_NONE(lower, a) NULL
#define MCOLL_KEPT_SCALAR(lower, a) NULL
#define MCOLL_KEPT_VECTOR(lower, a) lower##_keep(&a, &(struct mcoll_task_keep){.n = 0})
#define MCOLL_KEPT_W MCOLL_KEPT_VECTOR
#define MCOLL_KEEP_FN_NONE(lower) NULL
#define MCOLL_KEEP_FN_SCALAR(lower) NULL
#define MCOLL_KEEP_FN_VECTOR(lower) lower##_keep
#define MCOLL_KEEP_FN_W MCOLL_KEEP_FN_VECTOR

/* The blocking call's offer to T-NBC: its result, or MCOLL_TNBC_DECLINED (no MPI
 * error code is negative). Apart and not inlined, so that with T-NBC off the
 * blocking call does one load and test more than one without the offer, and no
 * address of its own escapes. Its condition also records the caller for T-NBC's
 * trace. */
#define MCOLL_TNBC_DECLINED (-1)
#define MCOLL_OFFER_FN_NO_TNBC(lower, UPPER)
#define MCOLL_OFFER_FN_TNBC(lower, UPPER)                                       \
  __attribute__((noinline)) static int lower##_offer(MCOLL_DECL(UPPER)) {       \
    int err;                                                                    \
    if (!mcoll__tnbc_##lower(MCOLL_NAMES(UPPER), lower##_task, &err))           \
      return MCOLL_TNBC_DECLINED;                                               \
    return err;                                                                 \
  }
#define MCOLL_OFFER_NO_TNBC(lower, UPPER)
#define MCOLL_OFFER_TNBC(lower, UPPER)                                          \
  if (mcoll__tnbc_active && MCOLL_TNBC_ENTER(#lower)) {                         \
    int err = lower##_offer(MCOLL_NAMES(UPPER));                                \
    if (err != MCOLL_TNBC_DECLINED) return err;                                 \
  }

#ifdef MCOLL_PERSISTENT
#define MCOLL_PERSISTENT_FORM(Name, lower, UPPER, shape)                        \
  MCOLL_EXPORT int MCOLL_PERSISTENT(Name##_init)(MCOLL_DECL(UPPER), MPI_Info info, \
                                                 MPI_Request *request) {        \
    int nbc = mcoll__nbc_on(comm);                                              \
    MPI_Request host; /* (the host's init checks the arguments, or is the whole call) */ \
    int err = MCOLL_PERSISTENT_HOST(Name##_init)(MCOLL_NAMES(UPPER), info,      \
                                                 nbc ? &host : request);        \
    if (!nbc) return err;                                                       \
    struct mcoll_mpi_##lower##_args a = {MCOLL_NAMES(UPPER)};                   \
    return mcoll__persistent_make(err, &host, lower##_task,                     \
                                  lower##_direct,                               \
                                  &a, sizeof a,                                 \
                                  offsetof(struct mcoll_mpi_##lower##_args, comm), \
                                  MCOLL_KEPT_##shape(lower, a), request);       \
  }
#else
#define MCOLL_PERSISTENT_FORM(Name, lower, UPPER, shape)
#endif

/* The bytes of a call's first buffer (its first count and first datatype; a row
 * without a scalar count: SIZE_MAX, without a datatype: 0), for the hand-over
 * (mcoll__nbc_handoff); asked only where the hand-over depends on it. */
#define MCOLL_MOVED(kind, name) MCOLL_MOVED_##kind(name)
#define MCOLL_MOVED_COUNT(name) if (count < 0) count = a->name;
#define MCOLL_MOVED_TYPE(name) if (!typed) { type = a->name; typed = 1; }
#define MCOLL_MOVED_TYPES(name) unsized = 1;
#define MCOLL_MOVED_INTS(name) unsized = 1;
#define MCOLL_MOVED_ROOT_INTS(name) unsized = 1;
#define MCOLL_MOVED_SBUF(name)
#define MCOLL_MOVED_RBUF(name)
#define MCOLL_MOVED_ROOT(name)
#define MCOLL_MOVED_OP(name)
#define MCOLL_MOVED_COMM(name)
#define MCOLL_MOVED_FN(lower, UPPER)                                            \
  static size_t lower##_moved(const void *args) {                              \
    const struct mcoll_mpi_##lower##_args *a = args;                            \
    int count = -1, typed = 0, unsized = 0, size = 0;                           \
    MPI_Datatype type = MPI_DATATYPE_NULL;                                      \
    MCOLL_PARAMS_##UPPER(MCOLL_MOVED)                                           \
    (void)a;                                                                    \
    if (count < 0) return unsized ? SIZE_MAX : 0;                               \
    /* (an invalid datatype: the call reports it, so no PMPI_Type_size here) */ \
    if (!typed || type == MPI_DATATYPE_NULL) return SIZE_MAX;                   \
    if (PMPI_Type_size(type, &size) != MPI_SUCCESS) return SIZE_MAX;            \
    return (size_t)count * (size_t)(size > 0 ? size : 0);                       \
  }

/* The try of an MPI_I* call (persistent: a start) on the caller's stack: a try
 * that needs no meeting first (pmpi/wrap.h: mcoll__direct_first_of; -2: not this
 * call), else the whole call as the blocking one where every rank of the node
 * enters it at once (mcoll__meet_run), else the collective's own try, if any. */
#define MCOLL_DIRECT(lower, UPPER)                                              \
  static int lower##_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, \
                            int *err) {                                         \
    const struct mcoll_mpi_##lower##_args *a = args;                            \
    mcoll_task_direct_fn first = mcoll__direct_first_of(MCOLL_COLL_##UPPER);    \
    int tried = first ? first(args, ctx, rest, err) : -2;                       \
    if (tried != -2) return tried;                                              \
    if (mcoll__meet_run(a->comm, ctx, lower##_task, args, err) == 1) {         \
      mcoll__count_try(MCOLL_COLL_##UPPER);                                     \
      return 1;                                                                 \
    }                                                                           \
    mcoll_task_direct_fn own = ctx ? mcoll__persistent_direct_of(MCOLL_COLL_##UPPER) \
                                   : mcoll__direct_of(MCOLL_COLL_##UPPER);      \
    if (!own || own == first) return -1;                                        \
    return own(args, ctx, rest, err);                                           \
  }

#define MCOLL_ENTRY_POINTS(Name, lower, UPPER, shape, tnbc)                     \
  MCOLL_RUN(Name, lower, UPPER)                                                 \
  MCOLL_TASK(lower, UPPER)                                                      \
  MCOLL_DIRECT(lower, UPPER)                                                    \
  MCOLL_ARRAYS_##shape(lower, UPPER)                                            \
  MCOLL_MOVED_FN(lower, UPPER)                                                  \
  MCOLL_OFFER_FN_##tnbc(lower, UPPER)                                           \
  MCOLL_EXPORT int MPI_##Name(MCOLL_DECL(UPPER)) {                              \
    MCOLL_OFFER_##tnbc(lower, UPPER)                                            \
    return lower##_run(MCOLL_NAMES(UPPER));                                     \
  }                                                                             \
  MCOLL_EXPORT int MPI_I##lower(MCOLL_DECL(UPPER), MPI_Request *request) {      \
    if (!mcoll__nbc_on(comm)) return PMPI_I##lower(MCOLL_NAMES(UPPER), request); \
    struct mcoll_mpi_##lower##_args a = {MCOLL_NAMES(UPPER)};                   \
    return mcoll__start(comm, lower##_task, lower##_direct, &a, sizeof a,      \
                        MCOLL_KEEP_FN_##shape(lower), lower##_moved, request);  \
  }                                                                             \
  MCOLL_PERSISTENT_FORM(Name, lower, UPPER, shape)

MCOLL_COLLECTIVES(MCOLL_ENTRY_POINTS)
