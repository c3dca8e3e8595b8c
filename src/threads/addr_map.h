/* A fixed map from addresses to small values, filled once and then only read: open
 * addressing on a multiplicative hash. It replaces binary searches that run on every
 * call of every rank (a handle's translation, a predefined type's size), whose
 * unpredictable branches cost more than the small collectives' own work. */
#ifndef MCOLL_THREADS_ADDR_MAP_H
#define MCOLL_THREADS_ADDR_MAP_H

#include <stdint.h>

enum { ADDR_MAP_BITS = 10, ADDR_MAP_SIZE = 1 << ADDR_MAP_BITS };

struct addr_map {
  uintptr_t lo, hi; /* the range of the keys: most other addresses miss on two compares */
  int n;
  uintptr_t keys[ADDR_MAP_SIZE]; /* 0: empty */
  long values[ADDR_MAP_SIZE];
};

static inline unsigned addr_map_hash(uintptr_t key)
{
  return (unsigned)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> (64 - ADDR_MAP_BITS));
}

/* Adds key (not 0) unless present; returns 0 when full (at most half the size is
 * taken, so that misses end soon). */
static inline int addr_map_put(struct addr_map *m, uintptr_t key, long value)
{
  if (!key || m->n >= ADDR_MAP_SIZE / 2)
    return 0;
  unsigned i = addr_map_hash(key);
  while (m->keys[i] && m->keys[i] != key)
    i = (i + 1) & (ADDR_MAP_SIZE - 1);
  if (m->keys[i] == key)
    return 1;
  m->keys[i] = key;
  m->values[i] = value;
  if (m->n == 0 || key < m->lo)
    m->lo = key;
  if (m->n == 0 || key > m->hi)
    m->hi = key;
  m->n++;
  return 1;
}

/* The value of key, or `absent`. */
static inline long addr_map_get(const struct addr_map *m, uintptr_t key, long absent)
{
  if (m->n == 0 || key < m->lo || key > m->hi)
    return absent;
  for (unsigned i = addr_map_hash(key);; i = (i + 1) & (ADDR_MAP_SIZE - 1)) {
    if (m->keys[i] == key)
      return m->values[i];
    if (!m->keys[i])
      return absent;
  }
}

#endif
