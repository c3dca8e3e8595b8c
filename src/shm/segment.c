/* Node segment lifecycle and layout. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "shm/shm.h"
#include "topo/topo.h"

_Static_assert(sizeof(struct mcoll_sync_line) == MCOLL_LINE, "sync line size");
_Static_assert(sizeof(struct mcoll_data_line) == MCOLL_LINE, "data line size");
_Static_assert(sizeof(struct mcoll_slot_ctl) == MCOLL_LINE, "slot line size");
_Static_assert(sizeof(struct mcoll_shm_header) == 2 * MCOLL_LINE, "header size");
_Static_assert(sizeof(struct mcoll_inline_line) == 64, "inline line: one cache line");

#define MCOLL_SHM_MAGIC 0x6d636f6c6c736567ull /* "mcollseg" */
#define MCOLL_PAGE 4096

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* Ring geometry: a window of S slots read by rotating groups of k readers (seed 000
 * §4.2), at least two windows so the writer fills one while the other is read, and
 * some 128 slots in all, so that a source of small bcasts may run many calls ahead
 * of readers that are not running (oversubscribed nodes). */
static void ring_geometry(int local_size, struct mcoll_shm *shm) {
  int readers = local_size > 1 ? local_size - 1 : 1;
  int groups = (readers + (int)mcoll__cfg.BCAST_K - 1) / (int)mcoll__cfg.BCAST_K;
  int window = groups > mcoll__numa_count() ? groups : mcoll__numa_count();
  int windows = window >= 64 ? 2 : (128 + window - 1) / window;
  shm->window = window;
  shm->nslots = window * windows;
  shm->chunk = (size_t)mcoll__cfg.SHM_CHUNK;
}

/* Offsets of each part; the data slots start on a page for NUMA binding. */
static void layout(struct mcoll_shm *shm, int local_size) {
  ring_geometry(local_size, shm);
  size_t off = sizeof(struct mcoll_shm_header);
  size_t sync_off = off;
  off += sizeof(struct mcoll_sync_line) * (size_t)local_size;
  size_t data_off = off;
  off += sizeof(struct mcoll_data_line) * (size_t)local_size;
  size_t slot_off = off;
  off += sizeof(struct mcoll_slot_ctl) * (size_t)shm->nslots;
  size_t inline_off = off;
  off += sizeof(struct mcoll_inline_line) * MCOLL_INLINE_SLOTS * (size_t)local_size;
  size_t slot_data_off = round_up(off, MCOLL_PAGE);
  off = slot_data_off + shm->chunk * (size_t)shm->nslots;
  shm->area_bytes = round_up((size_t)mcoll__cfg.SHM_AREA, MCOLL_PAGE);
  size_t area_off = round_up(off, MCOLL_PAGE);
  shm->bytes = area_off + shm->area_bytes * (size_t)local_size;
  char *base = shm->base;
  if (!base) return;
  shm->hdr = (struct mcoll_shm_header *)base;
  shm->sync = (struct mcoll_sync_line *)(base + sync_off);
  shm->data = (struct mcoll_data_line *)(base + data_off);
  shm->slot = (struct mcoll_slot_ctl *)(base + slot_off);
  shm->inline_line = (struct mcoll_inline_line *)(base + inline_off);
  shm->slot_data = base + slot_data_off;
  shm->area = base + area_off;
}

mcoll_status mcoll__shm_attach(MPI_Comm node_comm, int real_node_size, struct mcoll_shm *shm) {
  mcoll_status status = MCOLL_OK;
  char name[64] = "";
  int fd = -1, ok = 1, all_ok = 0;
  memset(shm, 0, sizeof *shm);
  PMPI_Comm_rank(node_comm, &shm->local_rank);
  PMPI_Comm_size(node_comm, &shm->local_size);
  layout(shm, shm->local_size);

  if (shm->local_rank == 0) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    static unsigned counter;
    snprintf(name, sizeof name, "/mcoll-%d-%u-%lx", (int)getpid(), counter++,
             (unsigned long)now.tv_nsec);
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)shm->bytes) != 0) ok = 0;
  }
  MCOLL_CHECK_MPI(PMPI_Bcast(name, sizeof name, MPI_CHAR, 0, node_comm));
  if (shm->local_rank != 0) fd = shm_open(name, O_RDWR, 0);
  if (fd >= 0) {
    void *base = mmap(NULL, shm->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    shm->base = base == MAP_FAILED ? NULL : base;
    close(fd);
  }
  if (!shm->base) ok = 0;
  /* Everyone has mapped it (or failed): the name can go now. */
  MCOLL_CHECK_MPI(PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, node_comm));
  if (shm->local_rank == 0 && name[0]) shm_unlink(name);
  if (!all_ok) MCOLL_CHECK(MCOLL_ERR_SHM);

  layout(shm, shm->local_size);
  if (shm->local_rank == 0) {
    shm->hdr->magic = MCOLL_SHM_MAGIC;
    shm->hdr->local_size = shm->local_size;
    for (int s = 0; s < shm->nslots; s++)
      mcoll__numa_bind(mcoll__slot_data(shm, s), shm->chunk, s % shm->window);
  }
  /* A rank's area lives on its own NUMA domain: it touches it first. With one
   * domain only the pages that small calls use, each slot's first and last, are
   * touched now, so that the first calls do not take page faults; the rest of the
   * area (large and sparse) when it is used. */
  char *area = mcoll__rank_area(shm, shm->local_rank);
  if (mcoll__numa_count() > 1) {
    memset(area, 0, shm->area_bytes);
  } else {
    size_t stride = shm->area_bytes / MCOLL_AREA_SLOTS;
    for (size_t s = 0; s < MCOLL_AREA_SLOTS && stride; s++) {
      ((volatile char *)area)[s * stride] = 0;
      ((volatile char *)area)[(s + 1) * stride - 1] = 0;
    }
  }
  int world_rank;
  PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  shm->data[shm->local_rank].pid = (int32_t)getpid();
  shm->data[shm->local_rank].world_rank = world_rank;
  long cpus = mcoll__cfg.CORES > 0 ? mcoll__cfg.CORES : sysconf(_SC_NPROCESSORS_ONLN);
  shm->oversubscribed = real_node_size > cpus;
  /* A poll costs ~27 ns (pause) here: 64 of them held the core 1.7 µs that a
   * rank sharing it could have used (8 ranks on 2 cores, barrier 12 -> 9 µs). */
  shm->spin = (int)(shm->oversubscribed ? mcoll__cfg.SPIN_OVERSUBSCRIBED : mcoll__cfg.SPIN);
  MCOLL_CHECK_MPI(PMPI_Barrier(node_comm));

cleanup:
  if (status != MCOLL_OK) mcoll__shm_detach(shm);
  return status;
}

void mcoll__shm_detach(struct mcoll_shm *shm) {
  if (shm->base) munmap(shm->base, shm->bytes);
  memset(shm, 0, sizeof *shm);
}
