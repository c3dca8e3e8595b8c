/* The memory of a group's eager slots (coll_eager.c): per rank of the group a ring of
 * slots, each a stamp line and its bytes, within a budget shared by every group of the
 * process. Nothing here knows the calls that use them. */
#ifndef MCOLL_THREADS_EAGER_SLOTS_H
#define MCOLL_THREADS_EAGER_SLOTS_H

#include <stdatomic.h>
#include <stddef.h>

struct local_eager {
  int slots; /* 0: the group's calls take the in-place path (no room left) */
  size_t cap, stride, held;
  _Alignas(64) char mem[];
};

enum { EAGER_HEAD = 64 };

/* Bytes a slot holds for one block (MCOLL_THREADS_EAGER; 0: no eager calls). */
size_t thr_eager_bytes(void);
/* The slots of a new group of `size` ranks: as many per rank as the budget leaves room
 * for, or none (slots 0); every stamp 0. */
struct local_eager *thr_eager_new(int size);
/* Frees them and gives their bytes back to the budget (NULL: nothing). */
void thr_eager_free(struct local_eager *e);

static inline char *eager_slot(const struct local_eager *e, int j, unsigned k)
{
  return (char *)e->mem + ((size_t)j * (size_t)e->slots + k % (unsigned)e->slots) * e->stride;
}

static inline void *slot_data(char *slot)
{
  return slot + EAGER_HEAD;
}

static inline atomic_uint *slot_stamp(char *slot)
{
  return (atomic_uint *)slot;
}

/* Two more words of a slot's head, for calls that meet in it after the data (allreduce):
 * each holds a call's number in its high half, so that a value left by an older call
 * of the slot reads as not yet written. */
static inline atomic_ullong *slot_word(char *slot, int i)
{
  return (atomic_ullong *)(slot + 8 + 8 * i);
}

#endif
