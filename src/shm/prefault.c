/* Pre-faulting the node segment (shm/prefault.h). */
#include "shm/prefault.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/config.h"

/* Linux 5.14; older kernels refuse them with EINVAL and get the loop below. */
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Asked each time (set-up only): threads may set up communicators at once. */
static size_t page_size(void) {
  long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? (size_t)p : 4096;
}

/* Maps [start, start+len) writable (write) or readable in this rank, one system
 * call for the range where the kernel has MADV_POPULATE_*. */
static void populate(char *start, size_t len, int write) {
  if (len == 0) return;
  size_t page = page_size();
  uintptr_t first = (uintptr_t)start & ~(uintptr_t)(page - 1);
  uintptr_t end = ((uintptr_t)start + len + page - 1) & ~(uintptr_t)(page - 1);
  if (madvise((void *)first, end - first, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0)
    return;
  /* A read fault on a shared tmpfs mapping maps the page writable as well (no
   * write-notify on shmem), and allocates it if it is a hole. */
  for (uintptr_t p = first; p < end; p += page) (void)*(volatile const char *)p;
}

/* Loads every line of [start, start+len) (reads only: peers may use them already). */
static void load_lines(const char *start, size_t len) {
  uintptr_t first = (uintptr_t)start & ~(uintptr_t)63;
  for (uintptr_t p = first; p < (uintptr_t)start + len; p += 64) (void)*(volatile const char *)p;
}

/* Bytes of the area slots that warm_lines loads: the first lines of every slot of
 * every area, within WARM_AREA_BYTES in all (2 ranks: 1 KiB of each slot). */
#define WARM_AREA_BYTES (256u << 10)
#define WARM_SLOT_MAX 1024u

/* Mapped pages are not yet cached lines: the kernel zeroed them while it allocated
 * 16 MiB, so the first call on each slot still misses to memory for every line it
 * writes or reads and walks the page tables for the slot's page (so a fresh
 * communicator's first calls run well behind warm ones). Loading the lines the
 * small calls touch first -- the control and inline lines, the first line of each
 * ring slot and the first lines of each area slot -- brings them and their pages'
 * translations in at set-up, where the 128 slots' misses overlap. */
static void warm_lines(const struct mcoll_shm *shm) {
  load_lines(shm->base, (size_t)(shm->slot_data - (char *)shm->base));
  for (int s = 0; s < shm->nslots; s++) load_lines(mcoll__slot_data(shm, s), 64);
  size_t stride = shm->area_bytes / MCOLL_AREA_SLOTS;
  size_t per = WARM_AREA_BYTES / MCOLL_AREA_SLOTS / (size_t)shm->local_size;
  if (per > WARM_SLOT_MAX) per = WARM_SLOT_MAX;
  if (per < 64) per = 64;
  if (per > stride) per = stride;
  for (int i = 0; i < shm->local_size && per; i++) {
    const char *area = mcoll__rank_area(shm, (shm->local_rank + i) % shm->local_size);
    for (size_t s = 0; s < MCOLL_AREA_SLOTS; s++) load_lines(area + s * stride, per);
  }
}

void mcoll__shm_prefault(const struct mcoll_shm *shm) {
  if (mcoll__cfg.SHM_PREFAULT <= 0 || !shm->base) return;
  /* Control, slot and inline lines: everything up to the ring's data. */
  populate(shm->base, (size_t)(shm->slot_data - (char *)shm->base), 1);
  /* The ring: any rank may be a bcast's source, every other rank reads. Its pages
   * are new (allocating and zeroing them is most of the cost, several times that of
   * mapping them again): each rank starts at its own share, so that the
   * ranks allocate different pages at the same time. */
  size_t per_slot = (size_t)mcoll__cfg.SHM_PREFAULT < shm->chunk ? (size_t)mcoll__cfg.SHM_PREFAULT
                                                                 : shm->chunk;
  if (per_slot == shm->chunk) {
    size_t ring = shm->chunk * (size_t)shm->nslots;
    size_t start = ring / (size_t)shm->local_size * (size_t)shm->local_rank;
    start -= start % page_size();
    populate(shm->slot_data + start, ring - start, 1);
    populate(shm->slot_data, start, 1);
  } else {
    for (int i = 0; i < shm->nslots; i++) {
      int slot = (i + shm->nslots / shm->local_size * shm->local_rank) % shm->nslots;
      populate(mcoll__slot_data(shm, slot), per_slot, 1);
    }
  }
  /* The areas' small-call slots, the same bytes of each as of a ring slot, and the
   * last page (a slot's owner touches its first and last at set-up). A rank writes
   * only its own area; peers' pages are only read here. */
  size_t stride = shm->area_bytes / MCOLL_AREA_SLOTS;
  size_t per_area_slot = per_slot < stride ? per_slot : stride;
  for (int i = 0; i < shm->local_size && stride; i++) {
    int r = (shm->local_rank + i) % shm->local_size; /* own area first: allocate it */
    char *area = mcoll__rank_area(shm, r);
    int own = r == shm->local_rank;
    if (per_area_slot == stride) {
      populate(area, stride * MCOLL_AREA_SLOTS, own);
      continue;
    }
    for (size_t s = 0; s < MCOLL_AREA_SLOTS; s++) {
      char *slot = area + s * stride;
      populate(slot, per_area_slot ? per_area_slot : 1, own);
      populate(slot + stride - 1, 1, own);
    }
  }
  warm_lines(shm);
}
