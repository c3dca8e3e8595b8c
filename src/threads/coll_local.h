/* The state the in-process collectives share (coll_local.c: in place, coll_eager.c:
 * through eager slots): a communicator's group of thread ranks, each rank's stage
 * counter and the layouts of the buffers it publishes. */
#ifndef MCOLL_THREADS_COLL_LOCAL_H
#define MCOLL_THREADS_COLL_LOCAL_H

#include "runtime.h"

/* One side (send or receive) of a rank's buffer, as blocks per peer:
 * block j = base + displ_j x unit, count_j x type_j. */
struct local_side {
  const char *base;
  int count;                  /* every block's count, when counts is NULL */
  const int *counts, *displs; /* v and w calls (displs NULL: block j at j x count) */
  MPI_Aint unit;              /* the extent of type, or 1 (w calls: bytes) */
  MPI_Datatype type;
  const MPI_Datatype *types; /* w calls */
};

struct local_slot {
  _Alignas(64) atomic_uint stage; /* what this rank has published or finished */
  unsigned calls;                 /* (its calls on the group: the base of its stages) */
  unsigned seen_done;             /* (eager calls: every rank has finished this call) */
  struct local_side send, recv;
  const void *input; /* reductions: the rank's input vector */
  void *result;      /* reductions: its result vector (allreduce, scan) */
  /* The last call this rank has finished (eager slots of older calls may be rewritten);
   * a line of its own, read by the writers of eager slots. */
  _Alignas(64) atomic_uint done;
};

struct local_eager;

/* The stages of one call: its buffers published, then done with the others'
 * (and, allreduce: its segment's result published), then done reading those. */
enum { STAGE_POSTED = 1, STAGE_DONE = 2, STAGE_READ = 3, STAGES_PER_CALL = 4 };

struct thr_local_group {
  struct thr_local_group *next;
  int ctx, first_world, size, users;
  _Atomic(struct local_eager *) eager; /* made at the first eager call */
  struct local_slot slots[]; /* by comm rank */
};

/* The first stage of this rank's next call (every rank numbers the calls alike). */
static inline unsigned local_begin(struct thr_local_group *g, struct thr_comm *c)
{
  struct local_slot *me = &g->slots[c->rank];
  /* (beginning a call, the rank is done with the one before: eager writers may reuse
   * that call's slots) */
  atomic_store_explicit(&me->done, me->calls, memory_order_release);
  return ++me->calls * STAGES_PER_CALL;
}

static inline struct local_side one_block(const void *buf, int count, MPI_Datatype type)
{
  return (struct local_side){.base = buf, .count = count, .unit = 0, .type = type};
}

static inline struct local_side blocks(const void *buf, int count, const int *counts, const int *displs,
                                       MPI_Datatype type)
{
  return (struct local_side){.base = buf, .count = count, .counts = counts, .displs = displs,
                             .unit = thr_extent_of(type), .type = type};
}

static inline const char *block_of(const struct local_side *s, int j, int *count, MPI_Datatype *type)
{
  *count = s->counts ? s->counts[j] : s->count;
  *type = s->types ? s->types[j] : s->type;
  MPI_Aint displ = s->displs ? s->displs[j] : (MPI_Aint)j * s->count;
  return s->base + displ * s->unit;
}

/* Block `to` of a rank's receive side from block `from` of another's send side. */
static inline void copy_block(const struct local_side *dst, int to,
                              const struct local_side *src, int from)
{
  int dcount, scount;
  MPI_Datatype dtype, stype;
  char *d = (char *)block_of(dst, to, &dcount, &dtype);
  const char *s = block_of(src, from, &scount, &stype);
  thr_copy_typed(d, dcount, dtype, s, scount, stype);
}

#endif
