/* Collectives of a communicator whose ranks are all threads of this process: each
 * rank publishes the addresses and layouts of its buffers and the others read and
 * write them in place (no messages, no staging area). Each rank has a stage counter
 * of its own (a cache line each): call k of the group is stages 4k+1.., and a rank
 * waits only for the ranks whose buffers it needs (the root's, or each in turn), and
 * for the readers of its own buffers before it returns. Reductions are split into
 * one segment per rank, each folded by its rank from all the inputs, so the work is
 * shared and each byte is read once. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

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
static void eager_free(struct local_eager *e);

/* The stages of one call: its buffers published, then done with the others'
 * (and, allreduce: its segment's result published), then done reading those. */
enum { STAGE_POSTED = 1, STAGE_DONE = 2, STAGE_READ = 3, STAGES_PER_CALL = 4 };

struct thr_local_group {
  struct thr_local_group *next;
  int ctx, first_world, size, users;
  _Atomic(struct local_eager *) eager; /* made at the first eager call */
  struct local_slot slots[]; /* by comm rank */
};

/* The groups of this process, found by (context, first world rank): the halves of
 * one split share a context. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct thr_local_group *registry;

struct thr_local_group *thr_local_group_of(struct thr_comm *c)
{
  if (c->locality == 0) {
    c->locality = 1;
    for (int i = 0; i < c->size; i++)
      if (c->world[i] / thr_proc.threads != thr_proc.process)
        c->locality = -1;
  }
  if (c->locality < 0)
    return NULL;
  if (c->local)
    return c->local;
  pthread_mutex_lock(&registry_lock);
  struct thr_local_group *g = registry;
  while (g && !(g->ctx == c->ctx && g->first_world == c->world[0]))
    g = g->next;
  if (!g) {
    size_t bytes = sizeof *g + (size_t)c->size * sizeof g->slots[0];
    g = aligned_alloc(_Alignof(struct local_slot), (bytes + 63) / 64 * 64);
    memset(g, 0, bytes);
    g->ctx = c->ctx;
    g->first_world = c->world[0];
    g->size = c->size;
    /* (a reference per member from the start: with eager calls a rank may finish and
     * free the communicator before another has looked the group up) */
    g->users = c->size;
    g->next = registry;
    registry = g;
  }
  pthread_mutex_unlock(&registry_lock);
  c->local = g;
  return g;
}

void thr_local_group_release(struct thr_comm *c)
{
  struct thr_local_group *g = c->local;
  if (!g)
    return;
  pthread_mutex_lock(&registry_lock);
  if (--g->users == 0) {
    struct thr_local_group **p = &registry;
    while (*p != g)
      p = &(*p)->next;
    *p = g->next;
    eager_free(atomic_load(&g->eager));
    free(g);
  }
  pthread_mutex_unlock(&registry_lock);
  c->local = NULL;
}

/* The first stage of this rank's next call (every rank numbers the calls alike). */
static unsigned begin(struct thr_local_group *g, struct thr_comm *c)
{
  struct local_slot *me = &g->slots[c->rank];
  /* (beginning a call, the rank is done with the one before: eager writers may reuse
   * that call's slots) */
  atomic_store_explicit(&me->done, me->calls, memory_order_release);
  return ++me->calls * STAGES_PER_CALL;
}

static void set_stage(struct thr_local_group *g, struct thr_comm *c, unsigned stage)
{
  atomic_store_explicit(&g->slots[c->rank].stage, stage, memory_order_release);
  thr_wake_waiters();
}

static int reached(const struct local_slot *slot, unsigned stage)
{
  return (int)(atomic_load_explicit(&slot->stage, memory_order_acquire) - stage) >= 0;
}

/* Until rank j has reached the stage (thr_wait_pause: spin, then yield, then sleep; meanwhile a
 * non-blocking collective this rank owes, or its leader's wait for another process in
 * coll_hier.c, progresses). */
static void wait_stage(struct thr_local_group *g, int j, unsigned stage)
{
  const struct local_slot *slot = &g->slots[j];
  struct thr_waiter w = {0};
  while (!reached(slot, stage))
    thr_wait_pause(&w);
  thr_wait_end(&w);
}

/* This rank reaches the stage, then waits until every rank has. */
static void stage_all(struct thr_local_group *g, struct thr_comm *c, unsigned stage)
{
  set_stage(g, c, stage);
  for (int k = 1; k < c->size; k++)
    wait_stage(g, (c->rank + k) % c->size, stage);
}

void thr_local_barrier(struct thr_local_group *g, struct thr_comm *c)
{
  stage_all(g, c, begin(g, c) + STAGE_POSTED);
}

/* count x dtype at dst from count x stype at src (same type signature): one memcpy
 * when both are plain bytes. */
static void copy_typed(void *dst, int dcount, MPI_Datatype dtype, const void *src, int scount,
                       MPI_Datatype stype)
{
  if (dst == src && dcount == scount && dtype == stype)
    return;
  size_t bytes = thr_type_bytes(stype, scount);
  if (bytes == 0)
    return;
  if (thr_type_is_contiguous(dtype, dcount) && thr_type_is_contiguous(stype, scount)) {
    memcpy(dst, src, bytes);
    return;
  }
  int position = 0;
  if (thr_type_is_contiguous(dtype, dcount)) { /* (packing straight into a run of bytes) */
    PMPI_Pack(src, scount, stype, dst, (int)bytes, &position, MPI_COMM_SELF);
    return;
  }
  if (thr_type_is_contiguous(stype, scount)) {
    PMPI_Unpack(src, (int)bytes, &position, dst, dcount, dtype, MPI_COMM_SELF);
    return;
  }
  void *packed = malloc(bytes);
  PMPI_Pack(src, scount, stype, packed, (int)bytes, &position, MPI_COMM_SELF);
  position = 0;
  PMPI_Unpack(packed, (int)bytes, &position, dst, dcount, dtype, MPI_COMM_SELF);
  free(packed);
}

/* A buffer for count x type, and its free. */
void *thr_alloc_typed(int count, MPI_Datatype type)
{
  MPI_Aint true_lb, true_extent;
  PMPI_Type_get_true_extent(type, &true_lb, &true_extent);
  MPI_Aint size = true_extent + (count > 1 ? (MPI_Aint)(count - 1) * thr_extent_of(type) : 0);
  char *base = malloc(size > 0 ? (size_t)size : 1);
  return base - true_lb;
}

void thr_free_typed(void *buf, MPI_Datatype type)
{
  if (!buf)
    return;
  MPI_Aint true_lb, true_extent;
  PMPI_Type_get_true_extent(type, &true_lb, &true_extent);
  free((char *)buf + true_lb);
}

static struct local_side one_block(const void *buf, int count, MPI_Datatype type)
{
  return (struct local_side){.base = buf, .count = count, .unit = 0, .type = type};
}

static struct local_side blocks(const void *buf, int count, const int *counts, const int *displs,
                                MPI_Datatype type)
{
  return (struct local_side){.base = buf, .count = count, .counts = counts, .displs = displs,
                             .unit = thr_extent_of(type), .type = type};
}

static const char *block_of(const struct local_side *s, int j, int *count, MPI_Datatype *type)
{
  *count = s->counts ? s->counts[j] : s->count;
  *type = s->types ? s->types[j] : s->type;
  MPI_Aint displ = s->displs ? s->displs[j] : (MPI_Aint)j * s->count;
  return s->base + displ * s->unit;
}

/* Block `to` of a rank's receive side from block `from` of another's send side. */
static void copy_block(const struct local_side *dst, int to, const struct local_side *src,
                       int from)
{
  int dcount, scount;
  MPI_Datatype dtype, stype;
  char *d = (char *)block_of(dst, to, &dcount, &dtype);
  const char *s = block_of(src, from, &scount, &stype);
  copy_typed(d, dcount, dtype, s, scount, stype);
}

/* The root publishes its send side; each other rank copies its block (block 0 for
 * all when shared) into its own receive side; the root returns when all have. */
static void from_root(struct thr_local_group *g, struct thr_comm *c, int root,
                      struct local_side root_send, struct local_side recv, int own_block)
{
  unsigned base = begin(g, c);
  if (c->rank == root) {
    g->slots[root].send = root_send;
    set_stage(g, c, base + STAGE_POSTED);
    if (own_block && recv.base != MPI_IN_PLACE)
      copy_block(&recv, 0, &root_send, root);
    stage_all(g, c, base + STAGE_DONE);
    return;
  }
  wait_stage(g, root, base + STAGE_POSTED);
  copy_block(&recv, 0, &g->slots[root].send, own_block ? c->rank : 0);
  set_stage(g, c, base + STAGE_DONE);
}

void thr_local_bcast(struct thr_local_group *g, struct thr_comm *c, void *buf, int count,
                     MPI_Datatype type, int root)
{
  from_root(g, c, root, one_block(buf, count, type), one_block(buf, count, type), 0);
}

/* The root's half of thr_local_bcast in two steps (the others call thr_local_bcast):
 * its buffer is readable from the first, and the second waits for the readers, so the
 * root may do other work (send to other processes) while they copy. */
unsigned thr_local_bcast_post(struct thr_local_group *g, struct thr_comm *c, const void *buf,
                              int count, MPI_Datatype type)
{
  unsigned base = begin(g, c);
  g->slots[c->rank].send = one_block(buf, count, type);
  set_stage(g, c, base + STAGE_POSTED);
  return base;
}

void thr_local_bcast_wait(struct thr_local_group *g, struct thr_comm *c, unsigned base)
{
  stage_all(g, c, base + STAGE_DONE);
}

/* Every rank writes its block straight into the root's receive buffer. */
void thr_local_gatherv(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                       int scount, MPI_Datatype stype, void *rbuf, int rcount,
                       const int *rcounts, const int *displs, MPI_Datatype rtype, int root)
{
  unsigned base = begin(g, c);
  struct local_side mine = one_block(sbuf, scount, stype);
  if (c->rank == root) {
    g->slots[root].recv = blocks(rbuf, rcount, rcounts, displs, rtype);
    set_stage(g, c, base + STAGE_POSTED);
    if (sbuf != MPI_IN_PLACE)
      copy_block(&g->slots[root].recv, root, &mine, 0);
    stage_all(g, c, base + STAGE_DONE); /* (the root's buffer is written until here) */
    return;
  }
  wait_stage(g, root, base + STAGE_POSTED);
  copy_block(&g->slots[root].recv, c->rank, &mine, 0);
  set_stage(g, c, base + STAGE_DONE);
}

/* Every rank reads its block straight from the root's send buffer. */
void thr_local_scatterv(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                        int scount, const int *scounts, const int *displs, MPI_Datatype stype,
                        void *rbuf, int rcount, MPI_Datatype rtype, int root)
{
  from_root(g, c, root, blocks(sbuf, scount, scounts, displs, stype),
            one_block(rbuf, rcount, rtype), 1);
}

/* Every rank reads every other's block into its own receive buffer; in place, a
 * rank's block is read from its receive buffer, which no one else writes. */
void thr_local_allgatherv(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                          int scount, MPI_Datatype stype, void *rbuf, int rcount,
                          const int *rcounts, const int *displs, MPI_Datatype rtype)
{
  int me = c->rank, n = c->size;
  struct local_side recv = blocks(rbuf, rcount, rcounts, displs, rtype);
  if (sbuf == MPI_IN_PLACE)
    sbuf = block_of(&recv, me, &scount, &stype);
  unsigned base = begin(g, c);
  g->slots[me].send = one_block(sbuf, scount, stype);
  set_stage(g, c, base + STAGE_POSTED);
  for (int k = 0; k < n; k++) { /* (each starts at its own block: fewer on one line) */
    int j = (me + k) % n;
    wait_stage(g, j, base + STAGE_POSTED);
    copy_block(&recv, j, &g->slots[j].send, 0);
  }
  stage_all(g, c, base + STAGE_DONE); /* (the blocks are read until here) */
}

/* Every rank reads its block of every rank's send buffer into its own receive buffer.
 * A side with unit 1 has displacements in bytes (w calls). In place, the send side is
 * a copy of the receive buffer (it is rewritten while the others read it). */
static void local_alltoall(struct thr_local_group *g, struct thr_comm *c, struct local_side send,
                           struct local_side recv)
{
  int me = c->rank, n = c->size;
  void *copy = NULL;
  if (send.base == MPI_IN_PLACE) {
    MPI_Aint span = 0;
    for (int j = 0; j < n; j++) {
      int count;
      MPI_Datatype type;
      const char *at = block_of(&recv, j, &count, &type);
      MPI_Aint lb, extent;
      PMPI_Type_get_extent(type, &lb, &extent);
      MPI_Aint end = at - recv.base + (MPI_Aint)count * extent;
      if (count > 0 && end > span)
        span = end;
    }
    copy = malloc(span > 0 ? (size_t)span : 1);
    memcpy(copy, recv.base, (size_t)span);
    send = recv;
    send.base = copy;
  }
  unsigned base = begin(g, c);
  g->slots[me].send = send;
  set_stage(g, c, base + STAGE_POSTED);
  for (int k = 0; k < n; k++) {
    int j = (me + k) % n;
    wait_stage(g, j, base + STAGE_POSTED);
    copy_block(&recv, j, &g->slots[j].send, me);
  }
  stage_all(g, c, base + STAGE_DONE); /* (the send buffers are read until here) */
  free(copy);
}

void thr_local_alltoallv(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                         int scount, const int *scounts, const int *sdispls, MPI_Datatype stype,
                         void *rbuf, int rcount, const int *rcounts, const int *rdispls,
                         MPI_Datatype rtype)
{
  struct local_side send = {.base = sbuf}, recv = blocks(rbuf, rcount, rcounts, rdispls, rtype);
  if (sbuf != MPI_IN_PLACE)
    send = blocks(sbuf, scount, scounts, sdispls, stype);
  local_alltoall(g, c, send, recv);
}

void thr_local_alltoallw(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                         const int *scounts, const int *sdispls, const MPI_Datatype *stypes,
                         void *rbuf, const int *rcounts, const int *rdispls,
                         const MPI_Datatype *rtypes)
{
  struct local_side send = {.base = sbuf, .counts = scounts, .displs = sdispls, .unit = 1,
                            .types = stypes},
                    recv = {.base = rbuf, .counts = rcounts, .displs = rdispls, .unit = 1,
                            .types = rtypes};
  local_alltoall(g, c, send, recv);
}

/* Elements [first, first + count) of a typed vector. */
static const char *elements_at(const void *buf, MPI_Aint first, MPI_Datatype type)
{
  return (const char *)buf + first * thr_extent_of(type);
}

/* inout = in op inout. The common predefined cases are folded here: the host's
 * MPI_Reduce_local may serialise its callers (MPICH takes its global lock), and every
 * thread rank folds at once. */
#define FOLD_CASE(ctype)                                                                 \
  {                                                                                      \
    const ctype *x = in;                                                                 \
    ctype *y = inout;                                                                    \
    if (op == MPI_SUM)                                                                   \
      for (int i = 0; i < count; i++)                                                    \
        y[i] = x[i] + y[i];                                                              \
    else if (op == MPI_PROD)                                                             \
      for (int i = 0; i < count; i++)                                                    \
        y[i] = x[i] * y[i];                                                              \
    else if (op == MPI_MAX)                                                              \
      for (int i = 0; i < count; i++)                                                    \
        y[i] = x[i] > y[i] ? x[i] : y[i];                                                \
    else                                                                                 \
      for (int i = 0; i < count; i++)                                                    \
        y[i] = x[i] < y[i] ? x[i] : y[i];                                                \
    return;                                                                              \
  }

static void fold(const void *in, void *inout, int count, MPI_Datatype type, MPI_Op op)
{
  if (op == MPI_SUM || op == MPI_PROD || op == MPI_MAX || op == MPI_MIN) {
    if (type == MPI_INT)
      FOLD_CASE(int)
    if (type == MPI_UNSIGNED)
      FOLD_CASE(unsigned)
    if (type == MPI_LONG)
      FOLD_CASE(long)
    if (type == MPI_UNSIGNED_LONG)
      FOLD_CASE(unsigned long)
    if (type == MPI_LONG_LONG)
      FOLD_CASE(long long)
    if (type == MPI_FLOAT)
      FOLD_CASE(float)
    if (type == MPI_DOUBLE)
      FOLD_CASE(double)
  }
  PMPI_Reduce_local(in, inout, count, type, op);
}

/* acc = x_0 op x_1 op ... op x_{n-1} over elements [first, first + count) of the
 * published inputs, folded from the last to the first (acc = x_i op acc), the order
 * MPI defines for non-commutative operations. */
static void fold_segment(struct thr_local_group *g, int n, unsigned posted, void *acc,
                         MPI_Aint first, int count, MPI_Datatype type, MPI_Op op)
{
  wait_stage(g, n - 1, posted);
  if (count > 0)
    copy_typed(acc, count, type, elements_at(g->slots[n - 1].input, first, type), count, type);
  for (int i = n - 2; i >= 0; i--) {
    wait_stage(g, i, posted);
    if (count > 0)
      fold(elements_at(g->slots[i].input, first, type), acc, count, type, op);
  }
}

/* Rank k's segment of count elements split n ways. */
static void segment_of(int count, int n, int k, MPI_Aint *first, int *len)
{
  *first = (MPI_Aint)count * k / n;
  *len = (int)((MPI_Aint)count * (k + 1) / n - *first);
}

/* Small vectors: every rank (or the root) folds all the inputs, two barriers. */
static void reduce_whole(struct thr_local_group *g, struct thr_comm *c, const void *input,
                         void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root)
{
  int me = c->rank, n = c->size;
  void *copy = NULL;
  if (input == rbuf && (root < 0 || me == root)) { /* rbuf is rewritten while read */
    copy = thr_alloc_typed(count, type);
    copy_typed(copy, count, type, rbuf, count, type);
    input = copy;
  }
  unsigned base = begin(g, c);
  g->slots[me].input = input;
  set_stage(g, c, base + STAGE_POSTED);
  if (root < 0) {
    fold_segment(g, n, base + STAGE_POSTED, rbuf, 0, count, type, op);
    stage_all(g, c, base + STAGE_DONE); /* (the inputs are read until here) */
  } else if (me == root) {
    fold_segment(g, n, base + STAGE_POSTED, rbuf, 0, count, type, op);
    set_stage(g, c, base + STAGE_DONE);
  } else {
    wait_stage(g, root, base + STAGE_DONE); /* (this input is read until here) */
  }
  thr_free_typed(copy, type);
}

/* Below this many bytes of the vector, reduce_whole; from it, each rank folds a
 * segment (the work shared, at one barrier more for allreduce). */
enum { LOCAL_SPLIT_MIN_BYTES = 2048 };

/* root < 0: every rank gets the result (allreduce). */
void thr_local_reduce(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                      void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root)
{
  int me = c->rank, n = c->size;
  const void *input = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
  /* (allreduce of two: each folding the whole vector moves no more bytes between the
   * cores than segments do, and reads only inputs, which nobody writes meanwhile) */
  if (thr_type_bytes(type, count) < LOCAL_SPLIT_MIN_BYTES || count < n || (root < 0 && n == 2)) {
    reduce_whole(g, c, input, rbuf, count, type, op, root);
    return;
  }
  MPI_Aint first;
  int len;
  segment_of(count, n, me, &first, &len);
  unsigned base = begin(g, c);
  g->slots[me].input = input;
  if (root < 0 || me == root)
    g->slots[me].result = rbuf;
  set_stage(g, c, base + STAGE_POSTED);
  if (root >= 0)
    wait_stage(g, root, base + STAGE_POSTED);
  /* The segment's result goes to its place in the root's (allreduce: this rank's)
   * buffer, through a temporary where that buffer is an input still being read. */
  char *dest = (char *)elements_at(g->slots[root < 0 ? me : root].result, first, type);
  int through_temp = (root < 0 ? input == rbuf : g->slots[root].input == g->slots[root].result);
  void *acc = through_temp ? thr_alloc_typed(len, type) : dest;
  fold_segment(g, n, base + STAGE_POSTED, acc, first, len, type, op);
  if (root >= 0) {
    if (through_temp)
      copy_typed(dest, len, type, acc, len, type);
    stage_all(g, c, base + STAGE_DONE); /* (inputs read, the root's buffer written) */
  } else {
    g->slots[me].result = (char *)acc - first * thr_extent_of(type); /* (as a whole vector) */
    set_stage(g, c, base + STAGE_DONE); /* inputs read, this segment's result published */
    for (int k = 1; k < n; k++) {
      int j = (me + k) % n, jlen;
      MPI_Aint jfirst;
      segment_of(count, n, j, &jfirst, &jlen);
      /* (in place, segment j of this rank's buffer is j's input until j is done) */
      wait_stage(g, j, base + STAGE_DONE);
      copy_typed((char *)elements_at(rbuf, jfirst, type), jlen, type,
                 elements_at(g->slots[j].result, jfirst, type), jlen, type);
    }
    if (through_temp)
      copy_typed(dest, len, type, acc, len, type);
    stage_all(g, c, base + STAGE_READ); /* (the segments are read until here) */
  }
  if (through_temp)
    thr_free_typed(acc, type);
}

/* Rank k folds block k of every input into its receive buffer (through a temporary
 * in place, where its buffer is an input the others still read). */
void thr_local_reduce_scatter(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                              void *rbuf, int count, const int *counts, MPI_Datatype type,
                              MPI_Op op)
{
  int me = c->rank, n = c->size, len = counts ? counts[me] : count;
  MPI_Aint first = 0;
  for (int k = 0; k < me; k++)
    first += counts ? counts[k] : count;
  unsigned base = begin(g, c);
  g->slots[me].input = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
  set_stage(g, c, base + STAGE_POSTED);
  void *acc = sbuf == MPI_IN_PLACE && len > 0 ? thr_alloc_typed(len, type) : rbuf;
  fold_segment(g, n, base + STAGE_POSTED, acc, first, len, type, op);
  stage_all(g, c, base + STAGE_DONE); /* (the inputs are read until here) */
  if (acc != rbuf) {
    copy_typed(rbuf, len, type, acc, len, type);
    thr_free_typed(acc, type);
  }
}

/* Small vectors: each rank folds the inputs of the ranks before it (and its own)
 * into its own buffer, waiting only for those to be published and, before it
 * returns, for the ranks after it to have read its input. */
static void scan_own(struct thr_local_group *g, struct thr_comm *c, const void *input,
                     void *rbuf, int count, MPI_Datatype type, MPI_Op op, int exclusive)
{
  int me = c->rank, n = c->size, last = exclusive ? me - 1 : me;
  unsigned base = begin(g, c);
  void *copy = NULL;
  if (input == rbuf && me < n - 1) { /* (rbuf is rewritten while later ranks read it) */
    copy = thr_alloc_typed(count, type);
    copy_typed(copy, count, type, rbuf, count, type);
    input = copy;
  }
  g->slots[me].input = input;
  set_stage(g, c, base + STAGE_POSTED);
  if (last >= 0) {
    wait_stage(g, last, base + STAGE_POSTED);
    copy_typed(rbuf, count, type, g->slots[last].input, count, type);
    for (int i = last - 1; i >= 0; i--) {
      wait_stage(g, i, base + STAGE_POSTED);
      fold(g->slots[i].input, rbuf, count, type, op);
    }
  }
  set_stage(g, c, base + STAGE_DONE);
  for (int j = me + 1; j < n; j++) /* (they read this input until then) */
    wait_stage(g, j, base + STAGE_DONE);
  thr_free_typed(copy, type);
}

/* Rank k computes segment k of every rank's prefix, writing it straight into their
 * receive buffers: out_i = out_{i-1} op x_i (exclusive: out_i = out_{i-1} op x_{i-1}).
 * A rank's input is read before its output overwrites it (in place). */
void thr_local_scan(struct thr_local_group *g, struct thr_comm *c, const void *sbuf, void *rbuf,
                    int count, MPI_Datatype type, MPI_Op op, int exclusive)
{
  int me = c->rank, n = c->size;
  const void *input = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
  if (thr_type_bytes(type, count) < LOCAL_SPLIT_MIN_BYTES || count < n) {
    scan_own(g, c, input, rbuf, count, type, op, exclusive);
    return;
  }
  unsigned base = begin(g, c);
  g->slots[me].input = input;
  g->slots[me].result = rbuf;
  stage_all(g, c, base + STAGE_POSTED);
  MPI_Aint first;
  int len;
  segment_of(count, n, me, &first, &len);
  if (len > 0) {
    void *acc = thr_alloc_typed(len, type), *next = thr_alloc_typed(len, type);
    copy_typed(acc, len, type, elements_at(g->slots[0].input, first, type), len, type);
    if (!exclusive)
      copy_typed((char *)elements_at(g->slots[0].result, first, type), len, type, acc, len, type);
    for (int i = 1; i < n; i++) {
      if (!exclusive || i < n - 1) { /* next = acc op x_i */
        copy_typed(next, len, type, elements_at(g->slots[i].input, first, type), len, type);
        fold(acc, next, len, type, op);
      }
      char *out = (char *)elements_at(g->slots[i].result, first, type);
      copy_typed(out, len, type, exclusive ? acc : next, len, type);
      void *swap = acc;
      acc = next;
      next = swap;
    }
    thr_free_typed(acc, type);
    thr_free_typed(next, type);
  }
  stage_all(g, c, base + STAGE_DONE); /* (the buffers are read and written until here) */
}

void thr_fold(const void *in, void *inout, int count, MPI_Datatype type, MPI_Op op)
{
  fold(in, inout, count, type, op);
}

void thr_copy_typed(void *dst, int dcount, MPI_Datatype dtype, const void *src, int scount,
                    MPI_Datatype stype)
{
  copy_typed(dst, dcount, dtype, src, scount, stype);
}

/* ---- Eager slots: small rooted collectives, scans and allreduce ----
 *
 * In place, a root waits until every reader has read its buffer, so each call needs
 * every rank scheduled once; sharing cores, that is a yield or a wake-up per rank and
 * call. Small calls go through slots instead: per rank of the group, a ring of slots
 * (MCOLL_THREADS_EAGER_SLOTS, each MCOLL_THREADS_EAGER bytes), slot (j, k mod slots)
 * written in call k by the one rank the call names (its own contribution, or the
 * root's block for j) and stamped k. A writer returns at once; a reader copies out
 * when it arrives. Slot (j, k mod slots) is written again only in call k + slots, after
 * every rank has finished call k (its `done`), so a fast rank runs at most that many
 * calls ahead of the slowest and a slow reader never sees its data overwritten.
 * Every rank agrees on taking this path from what all know alike (the call's bytes,
 * a reduction's type). */

struct local_eager {
  int slots; /* 0: the group's calls take the in-place path (no room left) */
  size_t cap, stride, held;
  _Alignas(64) char mem[];
};

enum { EAGER_HEAD = 64, EAGER_TABLE_ROOM = 1024, EAGER_DEFAULT_BYTES = 4096, EAGER_DEFAULT_SLOTS = 64 };
enum { EAGER_DEFAULT_MEM = 1 << 20 };

static int env_setting(atomic_int *cache, const char *name, int fallback, int least, int most)
{
  int v = atomic_load_explicit(cache, memory_order_relaxed);
  if (v < 0) {
    const char *s = getenv(name);
    v = s && *s ? atoi(s) : fallback;
    v = v < least ? least : v > most ? most : v;
    atomic_store_explicit(cache, v, memory_order_relaxed);
  }
  return v;
}

/* Bytes a slot holds (MCOLL_THREADS_EAGER; 0: no eager calls). */
static size_t eager_bytes(void)
{
  static atomic_int v = -1;
  return (size_t)env_setting(&v, "MCOLL_THREADS_EAGER", EAGER_DEFAULT_BYTES, 0, 1 << 20);
}

/* Slots per rank (MCOLL_THREADS_EAGER_SLOTS): how many calls a rank may run ahead. */
static int eager_slots(void)
{
  static atomic_int v = -1;
  return env_setting(&v, "MCOLL_THREADS_EAGER_SLOTS", EAGER_DEFAULT_SLOTS, 2, 4096);
}

/* The slots of all live groups of this process may hold this many bytes per thread
 * rank of the process (MCOLL_THREADS_EAGER_MEM), so that a program with many
 * communicators does not hold a ring per rank for each of them. */
static size_t eager_budget(void)
{
  static atomic_int v = -1;
  int per_rank = env_setting(&v, "MCOLL_THREADS_EAGER_MEM", EAGER_DEFAULT_MEM, 0, INT_MAX);
  return (size_t)per_rank * (size_t)(thr_proc.threads > 0 ? thr_proc.threads : 1);
}

static size_t eager_held; /* (under registry_lock) bytes of the live groups' slots */

/* Slots per rank a new group of `size` ranks gets within the budget: the setting, halved
 * while it would not fit, or 0. The bytes are taken from the budget. */
static int eager_reserve_budget(int size, size_t stride, size_t *held)
{
  int slots = eager_slots();
  size_t budget = eager_budget();
  pthread_mutex_lock(&registry_lock);
  size_t room = budget > eager_held ? budget - eager_held : 0;
  while (slots > 2 && (size_t)size * (size_t)slots * stride > room)
    slots /= 2;
  if ((size_t)size * (size_t)slots * stride > room)
    slots = 0;
  *held = (size_t)size * (size_t)slots * stride;
  eager_held += *held;
  pthread_mutex_unlock(&registry_lock);
  return slots;
}

static void eager_return_budget(size_t held)
{
  pthread_mutex_lock(&registry_lock);
  eager_held -= held;
  pthread_mutex_unlock(&registry_lock);
}

/* (called under registry_lock) */
static void eager_free(struct local_eager *e)
{
  if (!e)
    return;
  eager_held -= e->held;
  free(e);
}

/* The group's slots when a call of `bytes` per slot takes them, else NULL (the same
 * answer at every rank: bytes are the same at every rank, and the group's first eager
 * call decides its number of slots for all). */
static struct local_eager *eager_of(struct thr_local_group *g, size_t bytes)
{
  if (g->size < 2 || eager_bytes() == 0 || bytes > eager_bytes())
    return NULL;
  struct local_eager *e = atomic_load_explicit(&g->eager, memory_order_acquire);
  if (e)
    return e->slots ? e : NULL;
  /* (room for the table of the v calls beside a block of the full size) */
  size_t cap = (eager_bytes() + 63) / 64 * 64 + EAGER_TABLE_ROOM, stride = EAGER_HEAD + cap, held;
  int slots = eager_reserve_budget(g->size, stride, &held);
  size_t total = sizeof *e + held;
  struct local_eager *fresh = aligned_alloc(64, (total + 63) / 64 * 64);
  if (!fresh) /* (a rank may not fall back alone: the others would wait in the slots) */
    thr_fatal("no memory for the eager slots of a communicator");
  fresh->slots = slots;
  fresh->cap = cap;
  fresh->stride = stride;
  fresh->held = held;
  for (size_t i = 0; i < (size_t)g->size * (size_t)slots; i++)
    atomic_init((atomic_uint *)(fresh->mem + i * stride), 0);
  if (!atomic_compare_exchange_strong(&g->eager, &e, fresh)) {
    eager_return_budget(held);
    free(fresh);
    fresh = e;
  }
  return fresh->slots ? fresh : NULL;
}

static char *eager_slot(const struct local_eager *e, int j, unsigned k)
{
  return (char *)e->mem + ((size_t)j * (size_t)e->slots + k % (unsigned)e->slots) * e->stride;
}

static void *slot_data(char *slot)
{
  return slot + EAGER_HEAD;
}

static atomic_uint *slot_stamp(char *slot)
{
  return (atomic_uint *)slot;
}

static void wait_reached(const atomic_uint *flag, unsigned value)
{
  if ((int)(atomic_load_explicit(flag, memory_order_acquire) - value) >= 0)
    return;
  struct thr_waiter w = {0};
  while ((int)(atomic_load_explicit(flag, memory_order_acquire) - value) < 0)
    thr_wait_pause(&w);
  thr_wait_end(&w);
}

/* The number of this call (every rank numbers alike; in-place calls count too). */
static unsigned begin_eager(struct thr_local_group *g, struct thr_comm *c)
{
  return begin(g, c) / STAGES_PER_CALL;
}

/* Before this rank writes any slot of call k: every rank has finished call
 * k - slots, the last to use those slots (the minimum seen is kept, so a rank that
 * stays within the window looks at nobody). */
static void eager_reserve(struct thr_local_group *g, struct thr_comm *c,
                          const struct local_eager *e, unsigned k)
{
  struct local_slot *me = &g->slots[c->rank];
  unsigned need = k - (unsigned)e->slots;
  if ((int)(me->seen_done - need) >= 0)
    return;
  unsigned least = k - 1;
  for (int j = 0; j < c->size; j++) {
    if (j == c->rank)
      continue;
    wait_reached(&g->slots[j].done, need);
    unsigned d = atomic_load_explicit(&g->slots[j].done, memory_order_acquire);
    if ((int)(d - least) < 0)
      least = d;
  }
  me->seen_done = least;
}

static void eager_stamp(char *slot, unsigned k)
{
  atomic_store_explicit(slot_stamp(slot), k, memory_order_release);
}

/* The call is over for this rank: its reads of others' slots are done. */
static void eager_finish(struct thr_local_group *g, struct thr_comm *c, unsigned k)
{
  atomic_store_explicit(&g->slots[c->rank].done, k, memory_order_release);
  thr_wake_waiters();
}

/* Slot (j, k) once its writer has stamped it. */
static void *eager_read(const struct local_eager *e, int j, unsigned k)
{
  char *slot = eager_slot(e, j, k);
  wait_reached(slot_stamp(slot), k);
  return slot_data(slot);
}

int thr_local_eager_bcast(struct thr_local_group *g, struct thr_comm *c, void *buf, int count,
                          MPI_Datatype type, int root)
{
  size_t bytes = thr_type_bytes(type, count);
  struct local_eager *e = eager_of(g, bytes);
  if (!e)
    return 0;
  if (bytes == 0)
    return 1;
  unsigned k = begin_eager(g, c);
  if (c->rank == root) {
    eager_reserve(g, c, e, k);
    char *slot = eager_slot(e, root, k);
    copy_typed(slot_data(slot), (int)bytes, MPI_BYTE, buf, count, type);
    eager_stamp(slot, k);
  } else {
    copy_typed(buf, count, type, eager_read(e, root, k), (int)bytes, MPI_BYTE);
  }
  eager_finish(g, c, k);
  return 1;
}

/* Reduce (root >= 0) or allreduce (root < 0) of a contiguous type: every rank copies its
 * input into its slot; the root (allreduce: every rank, so all get the same bits)
 * folds the slots in rank order, x_0 op (x_1 op (... op x_{n-1})). */
int thr_local_eager_reduce(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                           void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root)
{
  size_t bytes = thr_type_bytes(type, count);
  if (bytes > 0 && !thr_type_is_contiguous(type, count))
    return 0;
  struct local_eager *e = eager_of(g, bytes);
  if (!e)
    return 0;
  if (bytes == 0)
    return 1;
  int me = c->rank, n = c->size;
  unsigned k = begin_eager(g, c);
  const void *input = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
  eager_reserve(g, c, e, k);
  char *mine = eager_slot(e, me, k);
  memcpy(slot_data(mine), input, bytes);
  eager_stamp(mine, k);
  if (root < 0 || me == root) {
    thr_wake_waiters();
    memcpy(rbuf, eager_read(e, n - 1, k), bytes);
    for (int i = n - 2; i >= 0; i--)
      fold(eager_read(e, i, k), rbuf, count, type, op);
  }
  eager_finish(g, c, k);
  return 1;
}

/* Regular gather: each rank packs its block into its slot, the root unpacks them. */
int thr_local_eager_gather(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                           int scount, MPI_Datatype stype, void *rbuf, int rcount,
                           MPI_Datatype rtype, int root)
{
  int me = c->rank, n = c->size;
  size_t bytes = me == root ? thr_type_bytes(rtype, rcount) : thr_type_bytes(stype, scount);
  struct local_eager *e = eager_of(g, bytes);
  if (!e)
    return 0;
  if (bytes == 0)
    return 1;
  unsigned k = begin_eager(g, c);
  if (me != root) {
    eager_reserve(g, c, e, k);
    char *slot = eager_slot(e, me, k);
    copy_typed(slot_data(slot), (int)bytes, MPI_BYTE, sbuf, scount, stype);
    eager_stamp(slot, k);
  } else {
    MPI_Aint block = (MPI_Aint)rcount * thr_extent_of(rtype);
    if (sbuf != MPI_IN_PLACE)
      copy_typed((char *)rbuf + root * block, rcount, rtype, sbuf, scount, stype);
    for (int k2 = 1; k2 < n; k2++) {
      int j = (root + k2) % n;
      copy_typed((char *)rbuf + j * block, rcount, rtype, eager_read(e, j, k), (int)bytes,
                 MPI_BYTE);
    }
  }
  eager_finish(g, c, k);
  return 1;
}

/* Regular scatter: the root packs block j into rank j's slot, each rank unpacks its own. */
int thr_local_eager_scatter(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                            int scount, MPI_Datatype stype, void *rbuf, int rcount,
                            MPI_Datatype rtype, int root)
{
  int me = c->rank, n = c->size;
  size_t bytes = me == root ? thr_type_bytes(stype, scount) : thr_type_bytes(rtype, rcount);
  struct local_eager *e = eager_of(g, bytes);
  if (!e)
    return 0;
  if (bytes == 0)
    return 1;
  unsigned k = begin_eager(g, c);
  if (me == root) {
    eager_reserve(g, c, e, k);
    MPI_Aint block = (MPI_Aint)scount * thr_extent_of(stype);
    for (int k2 = 1; k2 < n; k2++) {
      int j = (root + k2) % n;
      char *slot = eager_slot(e, j, k);
      copy_typed(slot_data(slot), (int)bytes, MPI_BYTE, (const char *)sbuf + j * block, scount,
                 stype);
      eager_stamp(slot, k);
    }
    if (rbuf != MPI_IN_PLACE)
      copy_typed(rbuf, rcount, rtype, (const char *)sbuf + root * block, scount, stype);
  } else {
    copy_typed(rbuf, rcount, rtype, eager_read(e, me, k), (int)bytes, MPI_BYTE);
  }
  eager_finish(g, c, k);
  return 1;
}

/* Scan and exscan of a contiguous type, a chain through the slots: rank i's slot holds
 * the prefix x_0 op ... op x_i, folded from rank i - 1's (in place, the input is read
 * before the result overwrites it). */
int thr_local_eager_scan(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                         void *rbuf, int count, MPI_Datatype type, MPI_Op op, int exclusive)
{
  size_t bytes = thr_type_bytes(type, count);
  if (bytes > 0 && !thr_type_is_contiguous(type, count))
    return 0;
  struct local_eager *e = eager_of(g, bytes);
  if (!e)
    return 0;
  if (bytes == 0)
    return 1;
  int me = c->rank, n = c->size;
  unsigned k = begin_eager(g, c);
  const void *input = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
  const void *before = me > 0 ? eager_read(e, me - 1, k) : NULL;
  if (me < n - 1) {
    eager_reserve(g, c, e, k);
    char *slot = eager_slot(e, me, k);
    void *prefix = slot_data(slot);
    memcpy(prefix, input, bytes);
    if (before)
      fold(before, prefix, count, type, op);
    eager_stamp(slot, k);
    thr_wake_waiters();
    if (exclusive) {
      if (before)
        memcpy(rbuf, before, bytes);
    } else {
      memcpy(rbuf, prefix, bytes);
    }
  } else if (exclusive) {
    memcpy(rbuf, before, bytes);
  } else {
    if (input != rbuf)
      memcpy(rbuf, input, bytes);
    fold(before, rbuf, count, type, op);
  }
  eager_finish(g, c, k);
  return 1;
}

/* ---- Eager slots with a table: the v and w calls, allgather, alltoall ----
 * A writer's slot starts with one entry per block it passes: the block's bytes inline
 * in the slot when they fit, or a reference to the writer's own buffer. Readers follow
 * the entries, so every rank takes this path whatever the sizes (no agreement needed);
 * a writer that left references waits, after its own reads, until every rank has
 * finished the call (each rank marks its reads done before waiting so, so two such
 * writers never wait for each other). */

struct eager_entry {
  size_t offset, bytes; /* bytes inline at offset, when ref is NULL */
  const void *ref;
  int count;
  MPI_Datatype type;
};

struct eager_out {
  char *slot;
  size_t used, cap;
  int refs;
};

static struct eager_entry *slot_entries(char *slot)
{
  return (struct eager_entry *)slot_data(slot);
}

/* Whether a table of n entries leaves room in a slot (the same answer at every rank). */
static struct local_eager *eager_table_of(struct thr_local_group *g, int entries)
{
  struct local_eager *e = eager_of(g, (size_t)entries * sizeof(struct eager_entry));
  return e;
}

static struct eager_out out_begin(const struct local_eager *e, char *slot, int entries)
{
  return (struct eager_out){.slot = slot, .used = (size_t)entries * sizeof(struct eager_entry),
                            .cap = e->cap};
}

/* Entry i: count x type at src, inline when it fits. */
static void out_block(struct eager_out *o, int i, const void *src, int count, MPI_Datatype type)
{
  struct eager_entry *t = &slot_entries(o->slot)[i];
  size_t bytes = thr_type_bytes(type, count);
  t->bytes = bytes;
  t->ref = NULL;
  t->offset = o->used;
  if (bytes == 0)
    return;
  if (bytes <= o->cap - o->used) {
    copy_typed((char *)slot_data(o->slot) + o->used, (int)bytes, MPI_BYTE, src, count, type);
    o->used += (bytes + 15) / 16 * 16;
    if (o->used > o->cap)
      o->used = o->cap;
    return;
  }
  t->ref = src;
  t->count = count;
  t->type = type;
  o->refs++;
}

/* Entry i of a stamped slot into count x type at dst. */
static void in_block(char *data, int i, void *dst, int count, MPI_Datatype type)
{
  const struct eager_entry *t = &((const struct eager_entry *)data)[i];
  if (t->bytes == 0)
    return;
  if (t->ref)
    copy_typed(dst, count, type, t->ref, t->count, t->type);
  else
    copy_typed(dst, count, type, data + t->offset, (int)t->bytes, MPI_BYTE);
}

/* After this rank's eager_finish: a writer that left references waits for every rank
 * to have finished the call (its buffers are read until then). */
static void eager_release_refs(struct thr_local_group *g, struct thr_comm *c,
                               const struct eager_out *o, int outs, unsigned k)
{
  int refs = 0;
  for (int i = 0; i < outs; i++)
    refs += o[i].refs;
  if (!refs)
    return;
  for (int j = 0; j < c->size; j++)
    if (j != c->rank)
      wait_reached(&g->slots[j].done, k);
}

int thr_local_eager_gatherv(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                            int scount, MPI_Datatype stype, void *rbuf, const int *rcounts,
                            const int *displs, MPI_Datatype rtype, int root)
{
  struct local_eager *e = eager_table_of(g, 1);
  if (!e)
    return 0;
  int me = c->rank, n = c->size;
  unsigned k = begin_eager(g, c);
  struct eager_out o = {0};
  if (me != root) {
    eager_reserve(g, c, e, k);
    o = out_begin(e, eager_slot(e, me, k), 1);
    out_block(&o, 0, sbuf, scount, stype);
    eager_stamp(o.slot, k);
    thr_wake_waiters();
  } else {
    MPI_Aint extent = thr_extent_of(rtype);
    if (sbuf != MPI_IN_PLACE)
      copy_typed((char *)rbuf + displs[root] * extent, rcounts[root], rtype, sbuf, scount, stype);
    for (int k2 = 1; k2 < n; k2++) {
      int j = (root + k2) % n;
      if (rcounts[j] > 0)
        in_block(eager_read(e, j, k), 0, (char *)rbuf + displs[j] * extent, rcounts[j], rtype);
    }
  }
  eager_finish(g, c, k);
  if (o.refs)
    wait_reached(&g->slots[root].done, k);
  return 1;
}

int thr_local_eager_scatterv(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                             const int *scounts, const int *displs, MPI_Datatype stype,
                             void *rbuf, int rcount, MPI_Datatype rtype, int root)
{
  struct local_eager *e = eager_table_of(g, 1);
  if (!e)
    return 0;
  int me = c->rank, n = c->size, refs = 0;
  unsigned k = begin_eager(g, c);
  if (me == root) {
    eager_reserve(g, c, e, k);
    MPI_Aint extent = thr_extent_of(stype);
    for (int k2 = 1; k2 < n; k2++) {
      int j = (root + k2) % n;
      struct eager_out o = out_begin(e, eager_slot(e, j, k), 1);
      out_block(&o, 0, (const char *)sbuf + displs[j] * extent, scounts[j], stype);
      refs += o.refs;
      eager_stamp(o.slot, k);
    }
    thr_wake_waiters();
    if (rbuf != MPI_IN_PLACE)
      copy_typed(rbuf, rcount, rtype, (const char *)sbuf + displs[root] * extent, scounts[root],
                 stype);
  } else if (thr_type_bytes(rtype, rcount) > 0) {
    in_block(eager_read(e, me, k), 0, rbuf, rcount, rtype);
  }
  eager_finish(g, c, k);
  if (refs)
    for (int j = 0; j < n; j++)
      if (j != me)
        wait_reached(&g->slots[j].done, k);
  return 1;
}

/* Each rank's block into its slot, every other rank's out of theirs: one step, where
 * in place each rank waited for the readers of its buffer. */
int thr_local_eager_allgatherv(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                               int scount, MPI_Datatype stype, void *rbuf, int rcount,
                               const int *rcounts, const int *displs, MPI_Datatype rtype)
{
  struct local_eager *e = eager_table_of(g, 1);
  if (!e)
    return 0;
  int me = c->rank, n = c->size;
  struct local_side recv = blocks(rbuf, rcount, rcounts, displs, rtype);
  if (sbuf == MPI_IN_PLACE)
    sbuf = block_of(&recv, me, &scount, &stype);
  unsigned k = begin_eager(g, c);
  eager_reserve(g, c, e, k);
  struct eager_out o = out_begin(e, eager_slot(e, me, k), 1);
  out_block(&o, 0, sbuf, scount, stype);
  eager_stamp(o.slot, k);
  thr_wake_waiters();
  for (int k2 = 0; k2 < n; k2++) {
    int j = (me + k2) % n, count;
    MPI_Datatype type;
    char *at = (char *)block_of(&recv, j, &count, &type);
    if (j == me)
      copy_typed(at, count, type, sbuf, scount, stype);
    else if (thr_type_bytes(type, count) > 0)
      in_block(eager_read(e, j, k), 0, at, count, type);
  }
  eager_finish(g, c, k);
  eager_release_refs(g, c, &o, 1, k);
  return 1;
}

/* Each rank's blocks for all into its slot (a table of n), then its block from each
 * rank's slot. In place, the blocks are in the slot before this rank's receive buffer
 * is rewritten; a block that goes by reference then comes from a copy. */
static int eager_alltoall(struct thr_local_group *g, struct thr_comm *c, struct local_side send,
                          struct local_side recv)
{
  int me = c->rank, n = c->size;
  struct local_eager *e = eager_table_of(g, n);
  if (!e)
    return 0;
  void *copy = NULL;
  if (send.base == MPI_IN_PLACE) {
    size_t need = (size_t)n * sizeof(struct eager_entry);
    MPI_Aint span = 0;
    for (int j = 0; j < n; j++) {
      int count;
      MPI_Datatype type;
      const char *at = block_of(&recv, j, &count, &type);
      need += (thr_type_bytes(type, count) + 15) / 16 * 16;
      MPI_Aint end = at - recv.base + (MPI_Aint)count * thr_extent_of(type);
      if (count > 0 && end > span)
        span = end;
    }
    send = recv;
    if (need > e->cap) {
      copy = malloc(span > 0 ? (size_t)span : 1);
      memcpy(copy, recv.base, (size_t)span);
      send.base = copy;
    }
  }
  unsigned k = begin_eager(g, c);
  eager_reserve(g, c, e, k);
  struct eager_out o = out_begin(e, eager_slot(e, me, k), n);
  for (int j = 0; j < n; j++) {
    int count;
    MPI_Datatype type;
    const char *at = block_of(&send, j, &count, &type);
    if (j != me)
      out_block(&o, j, at, count, type);
  }
  eager_stamp(o.slot, k);
  thr_wake_waiters();
  copy_block(&recv, me, &send, me);
  for (int k2 = 1; k2 < n; k2++) {
    int j = (me + k2) % n, count;
    MPI_Datatype type;
    char *at = (char *)block_of(&recv, j, &count, &type);
    if (thr_type_bytes(type, count) > 0)
      in_block(eager_read(e, j, k), me, at, count, type);
  }
  eager_finish(g, c, k);
  eager_release_refs(g, c, &o, 1, k);
  free(copy);
  return 1;
}

int thr_local_eager_alltoallv(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                              int scount, const int *scounts, const int *sdispls,
                              MPI_Datatype stype, void *rbuf, int rcount, const int *rcounts,
                              const int *rdispls, MPI_Datatype rtype)
{
  struct local_side send = {.base = sbuf}, recv = blocks(rbuf, rcount, rcounts, rdispls, rtype);
  if (sbuf != MPI_IN_PLACE)
    send = blocks(sbuf, scount, scounts, sdispls, stype);
  return eager_alltoall(g, c, send, recv);
}

int thr_local_eager_alltoallw(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                              const int *scounts, const int *sdispls, const MPI_Datatype *stypes,
                              void *rbuf, const int *rcounts, const int *rdispls,
                              const MPI_Datatype *rtypes)
{
  struct local_side send = {.base = sbuf, .counts = scounts, .displs = sdispls, .unit = 1,
                            .types = stypes},
                    recv = {.base = rbuf, .counts = rcounts, .displs = rdispls, .unit = 1,
                            .types = rtypes};
  return eager_alltoall(g, c, send, recv);
}

/* Reduce_scatter(_block) of a contiguous type whose whole vector fits a slot: every
 * rank copies its input into its slot and folds its own block from all, in rank order. */
int thr_local_eager_reduce_scatter(struct thr_local_group *g, struct thr_comm *c,
                                   const void *sbuf, void *rbuf, int count, const int *counts,
                                   MPI_Datatype type, MPI_Op op)
{
  int me = c->rank, n = c->size, len = counts ? counts[me] : count;
  MPI_Aint total = 0, first = 0;
  for (int j = 0; j < n; j++) {
    if (j == me)
      first = total;
    total += counts ? counts[j] : count;
  }
  if (total > INT_MAX)
    return 0;
  size_t bytes = thr_type_bytes(type, (int)total);
  if (bytes > 0 && !thr_type_is_contiguous(type, (int)total))
    return 0;
  struct local_eager *e = eager_of(g, bytes);
  if (!e)
    return 0;
  if (bytes == 0)
    return 1;
  unsigned k = begin_eager(g, c);
  const void *input = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
  eager_reserve(g, c, e, k);
  char *mine = eager_slot(e, me, k);
  memcpy(slot_data(mine), input, bytes);
  eager_stamp(mine, k);
  thr_wake_waiters();
  if (len > 0) {
    MPI_Aint extent = thr_extent_of(type);
    memcpy(rbuf, (char *)eager_read(e, n - 1, k) + first * extent, thr_type_bytes(type, len));
    for (int i = n - 2; i >= 0; i--)
      fold((char *)eager_read(e, i, k) + first * extent, rbuf, len, type, op);
  }
  eager_finish(g, c, k);
  return 1;
}
