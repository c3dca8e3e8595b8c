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

#include "coll_local.h"
#include "eager_slots.h"
#include "coll/reduce/red.h"
#include "handles.h"

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
    g = thr_aligned_alloc(_Alignof(struct local_slot), (bytes + 63) / 64 * 64);
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
    thr_eager_free(atomic_load(&g->eager));
    free(g);
  }
  pthread_mutex_unlock(&registry_lock);
  c->local = NULL;
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
  stage_all(g, c, local_begin(g, c) + STAGE_POSTED);
}

/* count x dtype at dst from count x stype at src (same type signature): one memcpy
 * when both are plain bytes. */
static void copy_typed(void *dst, int dcount, MPI_Datatype dtype, const void *src, int scount,
                       MPI_Datatype stype)
{
  if (dst == src && dcount == scount && dtype == stype)
    return;
  /* (the common case in one lookup a side: predefined types) */
  size_t sbasic = thr_basic_type_size(stype);
  if (sbasic && thr_basic_type_size(dtype)) {
    if (scount > 0)
      memcpy(dst, src, sbasic * (size_t)scount);
    return;
  }
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
  void *packed = thr_malloc(bytes);
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
  char *base = thr_malloc(size > 0 ? (size_t)size : 1);
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

/* The root publishes its send side; each other rank copies its block (block 0 for
 * all when shared) into its own receive side; the root returns when all have. */
static void from_root(struct thr_local_group *g, struct thr_comm *c, int root,
                      struct local_side root_send, struct local_side recv, int own_block)
{
  unsigned base = local_begin(g, c);
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
  unsigned base = local_begin(g, c);
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
  unsigned base = local_begin(g, c);
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
  unsigned base = local_begin(g, c);
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
    copy = thr_malloc(span > 0 ? (size_t)span : 1);
    memcpy(copy, recv.base, (size_t)span);
    send = recv;
    send.base = copy;
  }
  unsigned base = local_begin(g, c);
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

/* inout = in op inout. Predefined ops on predefined types take mcoll's own folds
 * (the process ranks' kernels, so both give the same bits; they vectorise, where a
 * plain loop over two pointers that may overlap does not): the host's
 * MPI_Reduce_local may serialise its callers (MPICH takes its global lock), and every
 * thread rank folds at once. The last (type, op) looked up is kept per thread. */
static mcoll_red_kernel kernel_of(MPI_Datatype type, MPI_Op op)
{
  static _Thread_local MPI_Datatype last_type = MPI_DATATYPE_NULL;
  static _Thread_local MPI_Op last_op = MPI_OP_NULL;
  static _Thread_local mcoll_red_kernel last;
  if (type != last_type || op != last_op) {
    size_t size = thr_basic_type_size(type);
    /* (MPI_CHAR: the host decides whether it is a reduction type) */
    last = size && type != MPI_CHAR ? mcoll__red_kernel(type, op, size) : NULL;
    last_type = type;
    last_op = op;
  }
  return last;
}

static void fold(const void *in, void *inout, int count, MPI_Datatype type, MPI_Op op)
{
  mcoll_red_kernel kernel = kernel_of(type, op);
  if (kernel) {
    if (count > 0)
      kernel(in, inout, (size_t)count);
    return;
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
  unsigned base = local_begin(g, c);
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
  unsigned base = local_begin(g, c);
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
  unsigned base = local_begin(g, c);
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
  unsigned base = local_begin(g, c);
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
  unsigned base = local_begin(g, c);
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
