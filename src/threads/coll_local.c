/* Collectives of a communicator whose ranks are all threads of this process: each
 * rank publishes the address of its buffer and the others read it in place (no
 * messages, no staging area); a barrier on shared counters orders the steps. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

struct local_slot {
  const void *buf;
  int count;
  MPI_Datatype type;
};

struct thr_local_group {
  struct thr_local_group *next;
  int ctx, first_world, size, users;
  atomic_int arrived;
  atomic_uint generation;
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
    g = calloc(1, sizeof *g + (size_t)c->size * sizeof g->slots[0]);
    g->ctx = c->ctx;
    g->first_world = c->world[0];
    g->size = c->size;
    g->next = registry;
    registry = g;
  }
  g->users++;
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
    free(g);
  }
  pthread_mutex_unlock(&registry_lock);
  c->local = NULL;
}

/* Sense by generation: the last to arrive resets the count and opens the next one. */
void thr_local_barrier(struct thr_local_group *g)
{
  unsigned generation = atomic_load_explicit(&g->generation, memory_order_acquire);
  if (atomic_fetch_add_explicit(&g->arrived, 1, memory_order_acq_rel) + 1 == g->size) {
    atomic_store_explicit(&g->arrived, 0, memory_order_relaxed);
    atomic_store_explicit(&g->generation, generation + 1, memory_order_release);
    return;
  }
  while (atomic_load_explicit(&g->generation, memory_order_acquire) == generation) {
    thr_nbc_progress_self(); /* (a rank waiting here may owe a non-blocking collective) */
    sched_yield();
  }
}

/* Copies a published buffer into count x type at dst (same type signature). */
static void copy_from(void *dst, int count, MPI_Datatype type, const struct local_slot *from)
{
  if (thr_type_is_contiguous(type, count) && thr_type_is_contiguous(from->type, from->count)) {
    memcpy(dst, from->buf, thr_type_bytes(type, count));
    return;
  }
  int size = (int)thr_type_bytes(from->type, from->count), position = 0;
  if (size == 0)
    return;
  void *packed = malloc((size_t)size);
  PMPI_Pack(from->buf, from->count, from->type, packed, size, &position, MPI_COMM_SELF);
  position = 0;
  PMPI_Unpack(packed, size, &position, dst, count, type, MPI_COMM_SELF);
  free(packed);
}

void thr_local_bcast(struct thr_local_group *g, struct thr_comm *c, void *buf, int count,
                     MPI_Datatype type, int root)
{
  if (c->rank == root)
    g->slots[root] = (struct local_slot){buf, count, type};
  thr_local_barrier(g);
  if (c->rank != root)
    copy_from(buf, count, type, &g->slots[root]);
  thr_local_barrier(g); /* (the root's buffer is read until here) */
}

/* Every rank (or the root) folds the published inputs from the last rank to the
 * first: acc = x_i op acc, the order MPI defines for non-commutative operations. */
void thr_local_reduce(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                      void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root)
{
  int me = c->rank, n = c->size;
  void *copy = NULL;
  if (sbuf == MPI_IN_PLACE) { /* rbuf is rewritten while the others read the input */
    MPI_Aint true_lb, true_extent, lb, extent;
    PMPI_Type_get_true_extent(type, &true_lb, &true_extent);
    PMPI_Type_get_extent(type, &lb, &extent);
    size_t span = (size_t)(true_extent + (count > 1 ? (MPI_Aint)(count - 1) * extent : 0));
    copy = malloc(span ? span : 1);
    memcpy(copy, (const char *)rbuf + true_lb, span);
    sbuf = (const char *)copy - true_lb;
  }
  g->slots[me] = (struct local_slot){sbuf, count, type};
  thr_local_barrier(g);
  if (root < 0 || me == root) {
    copy_from(rbuf, count, type, &g->slots[n - 1]);
    for (int i = n - 2; i >= 0; i--)
      PMPI_Reduce_local(g->slots[i].buf, rbuf, count, type, op);
  }
  thr_local_barrier(g); /* (the inputs are read until here) */
  free(copy);
}
