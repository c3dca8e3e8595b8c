/* Eager slots: small collectives of a communicator inside one process.
 *
 * In place (coll_local.c), a root waits until every reader has read its buffer, so
 * each call needs every rank scheduled once; sharing cores, that is a yield or a
 * wake-up per rank and call. Small calls go through slots instead: per rank of the group, a ring of slots
 * (MCOLL_THREADS_EAGER_SLOTS, each MCOLL_THREADS_EAGER bytes), slot (j, k mod slots)
 * written in call k by the one rank the call names (its own contribution, or the
 * root's block for j) and stamped k. A writer returns at once; a reader copies out
 * when it arrives. Slot (j, k mod slots) is written again only in call k + slots, after
 * every rank has finished call k (its `done`), so a fast rank runs at most that many
 * calls ahead of the slowest and a slow reader never sees its data overwritten.
 * Every rank agrees on taking this path from what all know alike (the call's bytes,
 * a reduction's type). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "coll_local.h"
#include "eager_slots.h"

/* The group's slots when a call of `bytes` per slot takes them, else NULL (the same
 * answer at every rank: bytes are the same at every rank, and the group's first eager
 * call decides its number of slots for all). */
static struct local_eager *eager_of(struct thr_local_group *g, size_t bytes)
{
  if (g->size < 2 || thr_eager_bytes() == 0 || bytes > thr_eager_bytes())
    return NULL;
  struct local_eager *e = atomic_load_explicit(&g->eager, memory_order_acquire);
  if (e)
    return e->slots ? e : NULL;
  /* (one rank makes them: ranks making them at once would each take a share of the
   * budget, and the one kept might be the one left with the fewest slots) */
  static pthread_mutex_t making = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&making);
  e = atomic_load_explicit(&g->eager, memory_order_acquire);
  if (!e) {
    e = thr_eager_new(g->size);
    atomic_store_explicit(&g->eager, e, memory_order_release);
  }
  pthread_mutex_unlock(&making);
  return e->slots ? e : NULL;
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
  return local_begin(g, c) / STAGES_PER_CALL;
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
    thr_copy_typed(slot_data(slot), (int)bytes, MPI_BYTE, buf, count, type);
    eager_stamp(slot, k);
  } else {
    thr_copy_typed(buf, count, type, eager_read(e, root, k), (int)bytes, MPI_BYTE);
  }
  eager_finish(g, c, k);
  return 1;
}

/* How the ranks of an eager allreduce fold (MCOLL_THREADS_EAGER_ALLREDUCE): each rank
 * the whole vector from every slot; the last rank to arrive folds it once for all and
 * the others copy its result (the ranks wait for that rank in any case); or each rank
 * folds a segment and all copy the segments (two meetings). */
enum { FOLD_EACH, FOLD_LAST, FOLD_SEGMENTS };
static int allreduce_fold(void)
{
  static atomic_int mode = -1;
  int m = atomic_load_explicit(&mode, memory_order_relaxed);
  if (m < 0) {
    const char *s = getenv("MCOLL_THREADS_EAGER_ALLREDUCE");
    m = s && !strcmp(s, "each")       ? FOLD_EACH
        : s && !strcmp(s, "segments") ? FOLD_SEGMENTS
                                      : FOLD_LAST;
    atomic_store_explicit(&mode, m, memory_order_relaxed);
  }
  return m;
}

/* x_0 op (x_1 op (... op x_{n-1})) over elements [first, first + len) of the slots of
 * call k, into acc. */
static void fold_slots(const struct local_eager *e, int n, unsigned k, void *acc, MPI_Aint first,
                       int len, MPI_Datatype type, MPI_Op op)
{
  if (len <= 0)
    return;
  size_t at = (size_t)first * (size_t)thr_extent_of(type), bytes = thr_type_bytes(type, len);
  memcpy(acc, (char *)eager_read(e, n - 1, k) + at, bytes);
  for (int i = n - 2; i >= 0; i--)
    thr_fold((char *)eager_read(e, i, k) + at, acc, len, type, op);
}

static unsigned long long tagged(unsigned k, unsigned low)
{
  return (unsigned long long)k << 32 | low;
}

/* Allreduce, every rank's input in its slot (stamped): this rank counts itself in at
 * slot (0, k); the last folds into rbuf, copies the result into its own slot (whose
 * input nobody reads any more) and names itself; the others copy it from there. */
static void allreduce_last(const struct local_eager *e, struct thr_comm *c, unsigned k,
                           void *rbuf, int count, MPI_Datatype type, MPI_Op op)
{
  int me = c->rank, n = c->size;
  size_t bytes = thr_type_bytes(type, count);
  char *meet = eager_slot(e, 0, k);
  atomic_ullong *arrived = slot_word(meet, 0), *from = slot_word(meet, 1);
  unsigned long long was = atomic_load(arrived), now;
  do /* (a count of an older call of the slot starts again) */
    now = (unsigned)(was >> 32) == k ? was + 1 : tagged(k, 1);
  while (!atomic_compare_exchange_weak(arrived, &was, now));
  if ((unsigned)now == (unsigned)n) {
    fold_slots(e, n, k, rbuf, 0, count, type, op);
    memcpy(slot_data(eager_slot(e, me, k)), rbuf, bytes);
    atomic_store_explicit(from, tagged(k, (unsigned)me + 1), memory_order_release);
    thr_wake_waiters();
    return;
  }
  unsigned long long got = atomic_load_explicit(from, memory_order_acquire);
  if ((unsigned)(got >> 32) != k) {
    struct thr_waiter w = {0};
    while ((unsigned)((got = atomic_load_explicit(from, memory_order_acquire)) >> 32) != k)
      thr_wait_pause(&w);
    thr_wait_end(&w);
  }
  memcpy(rbuf, slot_data(eager_slot(e, (int)(unsigned)got - 1, k)), bytes);
}

/* Rank j's segment of count elements split n ways. */
static void segment_of(int count, int n, int j, MPI_Aint *first, int *len)
{
  *first = (MPI_Aint)count * j / n;
  *len = (int)((MPI_Aint)count * (j + 1) / n - *first);
}

/* Allreduce, every rank's input in its slot (stamped): this rank folds its segment into
 * rbuf and over the same segment of its own slot (no other rank reads that part of its
 * input), marks it, and copies the other ranks' segments from theirs. */
static void allreduce_segments(const struct local_eager *e, struct thr_comm *c, unsigned k,
                               void *rbuf, int count, MPI_Datatype type, MPI_Op op)
{
  int me = c->rank, n = c->size, len;
  MPI_Aint first, extent = thr_extent_of(type);
  segment_of(count, n, me, &first, &len);
  char *acc = (char *)rbuf + first * extent, *mine = eager_slot(e, me, k);
  thr_wake_waiters(); /* (the others wait for this rank's input) */
  fold_slots(e, n, k, acc, first, len, type, op);
  if (len > 0)
    memcpy((char *)slot_data(mine) + first * extent, acc, thr_type_bytes(type, len));
  atomic_store_explicit(slot_word(mine, 0), tagged(k, 1), memory_order_release);
  thr_wake_waiters();
  for (int step = 1; step < n; step++) {
    int j = (me + step) % n;
    segment_of(count, n, j, &first, &len);
    if (len <= 0)
      continue;
    char *slot = eager_slot(e, j, k);
    atomic_ullong *marked = slot_word(slot, 0);
    if ((unsigned)(atomic_load_explicit(marked, memory_order_acquire) >> 32) != k) {
      struct thr_waiter w = {0};
      while ((unsigned)(atomic_load_explicit(marked, memory_order_acquire) >> 32) != k)
        thr_wait_pause(&w);
      thr_wait_end(&w);
    }
    memcpy((char *)rbuf + first * extent, (char *)slot_data(slot) + first * extent,
           thr_type_bytes(type, len));
  }
}

/* Reduce (root >= 0) or allreduce (root < 0) of a contiguous type: every rank copies its
 * input into its slot; the root folds the slots in rank order,
 * x_0 op (x_1 op (... op x_{n-1})); allreduce folds as allreduce_fold says, every rank
 * getting the same bits. */
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
  /* (a root's slot is read by nobody: it folds its own input from where it is, unless
   * that is rbuf, which the fold rewrites) */
  int own_slot = root < 0 || me != root || input == rbuf;
  if (own_slot) {
    eager_reserve(g, c, e, k);
    char *mine = eager_slot(e, me, k);
    memcpy(slot_data(mine), input, bytes);
    eager_stamp(mine, k);
  }
  int mode = root < 0 ? allreduce_fold() : FOLD_EACH;
  if (mode == FOLD_LAST) {
    allreduce_last(e, c, k, rbuf, count, type, op);
  } else if (mode == FOLD_SEGMENTS) {
    allreduce_segments(e, c, k, rbuf, count, type, op);
  } else if (root < 0 || me == root) {
    thr_wake_waiters();
    memcpy(rbuf, n - 1 == me && !own_slot ? input : eager_read(e, n - 1, k), bytes);
    for (int i = n - 2; i >= 0; i--)
      thr_fold(i == me && !own_slot ? input : eager_read(e, i, k), rbuf, count, type, op);
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
    thr_copy_typed(slot_data(slot), (int)bytes, MPI_BYTE, sbuf, scount, stype);
    eager_stamp(slot, k);
  } else {
    MPI_Aint block = (MPI_Aint)rcount * thr_extent_of(rtype);
    if (sbuf != MPI_IN_PLACE)
      thr_copy_typed((char *)rbuf + root * block, rcount, rtype, sbuf, scount, stype);
    for (int k2 = 1; k2 < n; k2++) {
      int j = (root + k2) % n;
      thr_copy_typed((char *)rbuf + j * block, rcount, rtype, eager_read(e, j, k), (int)bytes,
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
      thr_copy_typed(slot_data(slot), (int)bytes, MPI_BYTE, (const char *)sbuf + j * block, scount,
                 stype);
      eager_stamp(slot, k);
    }
    if (rbuf != MPI_IN_PLACE)
      thr_copy_typed(rbuf, rcount, rtype, (const char *)sbuf + root * block, scount, stype);
  } else {
    thr_copy_typed(rbuf, rcount, rtype, eager_read(e, me, k), (int)bytes, MPI_BYTE);
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
      thr_fold(before, prefix, count, type, op);
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
    thr_fold(before, rbuf, count, type, op);
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
    thr_copy_typed((char *)slot_data(o->slot) + o->used, (int)bytes, MPI_BYTE, src, count, type);
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
    thr_copy_typed(dst, count, type, t->ref, t->count, t->type);
  else
    thr_copy_typed(dst, count, type, data + t->offset, (int)t->bytes, MPI_BYTE);
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
      thr_copy_typed((char *)rbuf + displs[root] * extent, rcounts[root], rtype, sbuf, scount, stype);
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
      thr_copy_typed(rbuf, rcount, rtype, (const char *)sbuf + displs[root] * extent, scounts[root],
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
      thr_copy_typed(at, count, type, sbuf, scount, stype);
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
      copy = thr_malloc(span > 0 ? (size_t)span : 1);
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

/* Regular alltoall, not in place, whose n blocks fit a slot together (every rank knows
 * the same block size and n): rank i packs block j at j x bytes of its slot, no table,
 * and takes block i from each other rank's slot. */
static int eager_alltoall_regular(struct thr_local_group *g, struct thr_comm *c,
                                  const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                                  int rcount, MPI_Datatype rtype)
{
  int me = c->rank, n = c->size;
  size_t bytes = thr_type_bytes(stype, scount);
  if (bytes == 0 || bytes > thr_eager_bytes() / (size_t)n)
    return -1;
  struct local_eager *e = eager_of(g, bytes * (size_t)n);
  if (!e)
    return -1;
  MPI_Aint sblock = (MPI_Aint)scount * thr_extent_of(stype);
  MPI_Aint rblock = (MPI_Aint)rcount * thr_extent_of(rtype);
  unsigned k = begin_eager(g, c);
  eager_reserve(g, c, e, k);
  char *slot = eager_slot(e, me, k), *data = slot_data(slot);
  for (int j = 0; j < n; j++)
    if (j != me)
      thr_copy_typed(data + (size_t)j * bytes, (int)bytes, MPI_BYTE, (const char *)sbuf + j * sblock,
                     scount, stype);
  eager_stamp(slot, k);
  thr_wake_waiters();
  thr_copy_typed((char *)rbuf + me * rblock, rcount, rtype, (const char *)sbuf + me * sblock,
                 scount, stype);
  for (int k2 = 1; k2 < n; k2++) {
    int j = (me + k2) % n;
    const char *from = eager_read(e, j, k);
    thr_copy_typed((char *)rbuf + j * rblock, rcount, rtype, from + (size_t)me * bytes, (int)bytes,
                   MPI_BYTE);
  }
  eager_finish(g, c, k);
  return 1;
}

int thr_local_eager_alltoallv(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                              int scount, const int *scounts, const int *sdispls,
                              MPI_Datatype stype, void *rbuf, int rcount, const int *rcounts,
                              const int *rdispls, MPI_Datatype rtype)
{
  if (!scounts && !rcounts && sbuf != MPI_IN_PLACE) {
    int taken = eager_alltoall_regular(g, c, sbuf, scount, stype, rbuf, rcount, rtype);
    if (taken >= 0)
      return taken;
  }
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
      thr_fold((char *)eager_read(e, i, k) + first * extent, rbuf, len, type, op);
  }
  eager_finish(g, c, k);
  return 1;
}
