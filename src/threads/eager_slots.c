/* The eager slots' memory: settings, the process's budget, allocation and release. */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>

#include "eager_slots.h"
#include "runtime.h"

enum { EAGER_TABLE_ROOM = 1024, EAGER_DEFAULT_BYTES = 4096, EAGER_DEFAULT_SLOTS = 64 };
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

size_t thr_eager_bytes(void)
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

static pthread_mutex_t budget_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t eager_held; /* (under budget_lock) bytes of the live groups' slots */

/* Slots per rank a new group of `size` ranks gets within the budget: the setting, halved
 * while it would not fit, or 0. The bytes are taken from the budget. */
static int reserve_budget(int size, size_t stride, size_t *held)
{
  int slots = eager_slots();
  size_t budget = eager_budget();
  pthread_mutex_lock(&budget_lock);
  size_t room = budget > eager_held ? budget - eager_held : 0;
  while (slots > 2 && (size_t)size * (size_t)slots * stride > room)
    slots /= 2;
  if ((size_t)size * (size_t)slots * stride > room)
    slots = 0;
  *held = (size_t)size * (size_t)slots * stride;
  eager_held += *held;
  pthread_mutex_unlock(&budget_lock);
  return slots;
}

struct local_eager *thr_eager_new(int size)
{
  /* (room for the table of the v calls beside a block of the full size) */
  size_t cap = (thr_eager_bytes() + 63) / 64 * 64 + EAGER_TABLE_ROOM, stride = EAGER_HEAD + cap, held;
  int slots = reserve_budget(size, stride, &held);
  struct local_eager *e;
  size_t total = sizeof *e + held;
  /* (no memory stops the job: a rank may not fall back alone, the others would wait in
   * the slots) */
  e = thr_aligned_alloc(64, (total + 63) / 64 * 64);
  e->slots = slots;
  e->cap = cap;
  e->stride = stride;
  e->held = held;
  for (size_t i = 0; i < (size_t)size * (size_t)slots; i++) {
    char *slot = e->mem + i * stride;
    atomic_init(slot_stamp(slot), 0);
    atomic_init(slot_word(slot, 0), 0);
    atomic_init(slot_word(slot, 1), 0);
  }
  return e;
}

void thr_eager_free(struct local_eager *e)
{
  if (!e)
    return;
  pthread_mutex_lock(&budget_lock);
  eager_held -= e->held;
  pthread_mutex_unlock(&budget_lock);
  free(e);
}
