/* Node segment lifecycle and layout.
 *
 * One segment per communicator with node peers: header, per-rank lines, the bcast
 * ring and one area per rank (layout() below). Set-up, collective over the node:
 *  - the node leader creates the file (O_EXCL; on a clash a new name, never
 *    touching the other file) and reserves the pages of the shared part with
 *    posix_fallocate, each rank those of its own area (in parallel, on its NUMA
 *    domain), so a full /dev/shm is an error here, not a SIGBUS later; the leader
 *    writes the layout into the header;
 *  - it unlinks the name at once and the peers open its descriptor through
 *    /proc/<pid>/fd, so no rank's death can leave a name behind; where /proc is not
 *    usable, a second round by name, which the leader unlinks once all have
 *    mapped or as soon as it sees a peer gone;
 *  - every peer checks the file's size and the header against its own layout
 *    (ranks started with different MCOLL_SHM_* must not share it);
 *  - the node's verdict is agreed (MIN), then the communicator's (context.c): any
 *    failure means the host MPI for that communicator on every rank, the reason
 *    printed with MCOLL_VERBOSE.
 * Reserved pages are real memory, so a process keeps at most MCOLL_SHM_MAX of
 * segments; communicators beyond use the host MPI. Communicators over the same node
 * processes share one segment (shm/channel.h); any other set of node processes
 * reserves a whole one (16-42 MiB at 2-8 ranks): ring and areas are not sized to
 * what a communicator's calls use. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "shm/prefault.h"
#include "shm/shm.h"
#include "topo/topo.h"

_Static_assert(sizeof(struct mcoll_sync_line) == MCOLL_LINE, "sync line size");
_Static_assert(sizeof(struct mcoll_data_line) == MCOLL_LINE, "data line size");
_Static_assert(sizeof(struct mcoll_slot_ctl) == MCOLL_LINE, "slot line size");
_Static_assert(sizeof(struct mcoll_shm_header) == 4 * MCOLL_LINE, "header size");
_Static_assert(MCOLL_CLAIMS * sizeof(uint64_t) % MCOLL_LINE == 0, "the claims end on a line");
_Static_assert(sizeof(struct mcoll_inline_line) == 64, "inline line: one cache line");

#define MCOLL_SHM_MAGIC 0x6d636f6c6c736567ull /* "mcollseg" */
#define MCOLL_PAGE 4096

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* Ring geometry: a window of S slots read by rotating groups of k readers (bounded
 * concurrency: docs/architecture.md), at least two windows so the writer fills one
 * while the other is read, and some 128 slots in all, so that a source of small
 * bcasts may run many calls ahead of readers that are not running (oversubscribed
 * nodes). */
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
  size_t claims_off = off;
  off += sizeof(uint64_t) * MCOLL_CLAIMS;
  size_t sent_off = off;
  off += sizeof(uint64_t) * 2 * MCOLL_CLAIMS * (size_t)local_size;
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
  shm->first_arrival = (_Atomic uint64_t *)(base + claims_off);
  shm->bcast_sent = (_Atomic uint64_t *)(base + sent_off);
  shm->slot_data = base + slot_data_off;
  shm->area = base + area_off;
}

static atomic_uint segment_counter; /* names made by this process */
/* Bytes of the segments this process has mapped (all reserved): at most SHM_MAX. */
static _Atomic size_t reserved_bytes;

static void say_why(const struct mcoll_shm *shm, const char *why, int err) {
  if (!mcoll__cfg.VERBOSE) return;
  int world_rank;
  PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  fprintf(stderr, "mcoll: world rank %d: node segment (%zu bytes) not usable: %s%s%s\n",
          world_rank, shm->bytes, why, err ? ": " : "", err ? strerror(err) : "");
}

static size_t area_offset(const struct mcoll_shm *shm) {
  return shm->bytes - shm->area_bytes * (size_t)shm->local_size;
}

/* Each rank reserves the pages of its own area: in parallel, and on its own NUMA
 * domain (the pages are allocated by the caller, under its memory policy). */
static int reserve_own_part(const struct mcoll_shm *shm, int fd) {
  off_t start = (off_t)(area_offset(shm) + shm->area_bytes * (size_t)shm->local_rank);
  return posix_fallocate(fd, start, (off_t)shm->area_bytes);
}

/* The leader's new file: O_EXCL, and a new name on a clash (a file of that name is
 * someone else's: it is neither used nor unlinked). Its pages are reserved now, so
 * that a full /dev/shm is an error here and not a SIGBUS at some later store. */
static int create_file(struct mcoll_shm *shm, char *name, size_t name_len) {
  int err = 0;
  for (int attempt = 0; attempt < 16; attempt++) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    snprintf(name, name_len, "/mcoll-%d-%u-%lx", (int)getpid(),
             atomic_fetch_add_explicit(&segment_counter, 1, memory_order_relaxed),
             (unsigned long)now.tv_nsec);
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) {
      err = errno;
      break;
    }
    /* The shared part now; each rank reserves its own area (peer_map). */
    err = ftruncate(fd, (off_t)shm->bytes) != 0 ? errno : reserve_own_part(shm, fd);
    if (err == 0) err = posix_fallocate(fd, 0, (off_t)area_offset(shm));
    if (err == 0) return fd;
    close(fd);
    shm_unlink(name);
    break;
  }
  say_why(shm, err ? "cannot create or reserve it in /dev/shm" : "no free name", err);
  name[0] = '\0';
  return -1;
}

static int header_matches(const struct mcoll_shm *shm) {
  const struct mcoll_shm_header *h = shm->hdr;
  return h->magic == MCOLL_SHM_MAGIC && h->local_size == shm->local_size && h->bytes == shm->bytes &&
         h->chunk == shm->chunk && h->area_bytes == shm->area_bytes && h->nslots == shm->nslots &&
         h->window == shm->window;
}

/* The node's verdict (MIN of ok). The leader, which holds the name meanwhile, polls
 * for it and unlinks the name as soon as it sees a peer gone: a peer killed during
 * set-up would otherwise leave the file behind when the launcher ends the job. */
static int node_verdict(int ok, MPI_Comm node_comm, const struct mcoll_shm *shm, char *name,
                        const int *pids) {
  int all_ok = 0, done = 0;
  MPI_Request request;
  if (PMPI_Iallreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, node_comm, &request) != MPI_SUCCESS)
    return 0;
  int unlinked = !name[0] || !pids; /* nothing to watch over */
  for (unsigned poll = 1;; poll++) {
    if (PMPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return 0;
    if (done) return all_ok;
    if (unlinked) {
      PMPI_Wait(&request, MPI_STATUS_IGNORE);
      return all_ok;
    }
    if (poll % 64 == 0)
      for (int r = 1; r < shm->local_size && !unlinked; r++)
        if (mcoll__process_gone(pids[r])) {
          shm_unlink(name);
          name[0] = '\0';
          unlinked = 1;
        }
    sched_yield();
  }
}

/* What one rank's attempt to map the segment came to; the node takes the least. */
enum map_outcome { MAP_FAILED_HERE = 0, MAP_NO_PROC = 1, MAP_DONE = 2 };

static void map_fd(struct mcoll_shm *shm, int fd) {
  void *base = mmap(NULL, shm->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  shm->base = base == MAP_FAILED ? NULL : base;
  if (!shm->base) say_why(shm, "cannot map it", errno);
  else layout(shm, shm->local_size);
}

/* A peer maps the leader's file and checks that it was made for the same layout. */
static enum map_outcome peer_map(struct mcoll_shm *shm, const char *path, int by_proc) {
  struct stat st;
  int fd = by_proc ? open(path, O_RDWR | O_CLOEXEC) : shm_open(path, O_RDWR, 0);
  if (fd < 0) {
    say_why(shm, by_proc ? "cannot open the leader's descriptor in /proc (then by name)" : "cannot open it",
            errno);
    return by_proc ? MAP_NO_PROC : MAP_FAILED_HERE;
  }
  if (fstat(fd, &st) != 0 || (size_t)st.st_size != shm->bytes)
    say_why(shm, "ranks of this node disagree on its size (MCOLL_SHM_CHUNK, MCOLL_SHM_AREA)", 0);
  else map_fd(shm, fd);
  if (shm->base && !header_matches(shm)) {
    say_why(shm, "ranks of this node disagree on its layout (MCOLL_SHM_CHUNK, MCOLL_SHM_AREA)", 0);
    munmap(shm->base, shm->bytes);
    shm->base = NULL;
  }
  int err = shm->base ? reserve_own_part(shm, fd) : 0;
  close(fd);
  if (err) {
    say_why(shm, "cannot reserve its area in /dev/shm", err);
    munmap(shm->base, shm->bytes);
    shm->base = NULL;
  }
  return shm->base ? MAP_DONE : MAP_FAILED_HERE;
}

/* One attempt, collective over node_comm; returns the node's outcome (the segment
 * is mapped on every rank if MAP_DONE, on none otherwise). The leader creates the
 * file. by_proc: it unlinks the name at once and the peers open its descriptor
 * through /proc, so that no name is left for anyone's death to leak; otherwise the
 * peers open the name, which the leader unlinks once all have it (or one is gone). */
static enum map_outcome map_round(MPI_Comm node_comm, struct mcoll_shm *shm, const int *pids, int by_proc,
                                  int within_budget) {
  char path[64] = "", name[64] = "";
  int fd = -1;
  enum map_outcome mine = MAP_DONE;
  if (shm->local_rank == 0 && within_budget) {
    fd = create_file(shm, name, sizeof name);
    if (fd >= 0) map_fd(shm, fd);
    if (shm->base) {
      struct mcoll_shm_header *h = shm->hdr;
      h->local_size = shm->local_size;
      h->bytes = shm->bytes;
      h->chunk = shm->chunk;
      h->area_bytes = shm->area_bytes;
      h->nslots = shm->nslots;
      h->window = shm->window;
      h->magic = MCOLL_SHM_MAGIC;
    }
    if (!shm->base || by_proc) {
      if (name[0]) shm_unlink(name);
      name[0] = '\0';
    }
    if (shm->base && by_proc) snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)getpid(), fd);
    else if (shm->base) memcpy(path, name, sizeof path);
  }
  if (!within_budget || (shm->local_rank == 0 && !shm->base)) mine = MAP_FAILED_HERE;
  /* An empty path: the leader has no segment, and nobody opens anything. */
  if (PMPI_Bcast(path, sizeof path, MPI_CHAR, 0, node_comm) != MPI_SUCCESS) mine = MAP_FAILED_HERE;
  else if (shm->local_rank != 0 && path[0] && within_budget) mine = peer_map(shm, path, by_proc);
  else if (shm->local_rank != 0) mine = MAP_FAILED_HERE;
  enum map_outcome node = (enum map_outcome)node_verdict((int)mine, node_comm, shm, name, pids);
  if (fd >= 0) close(fd);
  if (name[0]) shm_unlink(name);
  if (node != MAP_DONE && shm->base) {
    munmap(shm->base, shm->bytes);
    shm->base = NULL;
  }
  return node;
}

mcoll_status mcoll__shm_attach(MPI_Comm node_comm, int real_node_size, struct mcoll_shm *shm) {
  mcoll_status status = MCOLL_OK;
  int *pids = NULL;
  memset(shm, 0, sizeof *shm);
  PMPI_Comm_rank(node_comm, &shm->local_rank);
  PMPI_Comm_size(node_comm, &shm->local_size);
  layout(shm, shm->local_size);

  /* The leader learns its peers' pids, to tell while a name exists whether one of
   * them is gone. */
  int my_pid = (int)getpid();
  if (shm->local_rank == 0) pids = malloc(sizeof *pids * (size_t)shm->local_size);
  MCOLL_CHECK_MPI(PMPI_Gather(&my_pid, 1, MPI_INT, pids, 1, MPI_INT, 0, node_comm));
  /* Every segment's pages are reserved, so the many-communicator case is bounded;
   * a rank over its budget fails this set-up for the whole node (the verdict). */
  int within_budget = atomic_load(&reserved_bytes) + shm->bytes <= (size_t)mcoll__cfg.SHM_MAX;
  if (!within_budget) say_why(shm, "MCOLL_SHM_MAX reached (segments of other communicators)", 0);
  enum map_outcome outcome = map_round(node_comm, shm, pids, 1, within_budget);
  if (outcome == MAP_NO_PROC) outcome = map_round(node_comm, shm, pids, 0, within_budget);
  if (outcome != MAP_DONE) MCOLL_CHECK(MCOLL_ERR_SHM);
  atomic_fetch_add(&reserved_bytes, shm->bytes);

  if (shm->local_rank == 0) {
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
  /* A spinning rank holds a core that, oversubscribed, the rank it waits for may
   * need: spin less there (MCOLL_SPIN_OVERSUBSCRIBED in docs/performance.md). */
  shm->spin = (int)(shm->oversubscribed ? mcoll__cfg.SPIN_OVERSUBSCRIBED : mcoll__cfg.SPIN);
  /* Map the pages the first calls use, so that they take no page faults. */
  mcoll__shm_prefault(shm);
  mcoll__flag_fence_mark(shm);
  mcoll__yield_mark(shm);
  MCOLL_CHECK_MPI(PMPI_Barrier(node_comm));
  mcoll__flag_fence_decide(shm);
  mcoll__yield_decide(shm);

cleanup:
  free(pids);
  if (status != MCOLL_OK) mcoll__shm_detach(shm);
  return status;
}

void mcoll__shm_detach(struct mcoll_shm *shm) {
  if (shm->base) {
    munmap(shm->base, shm->bytes);
    atomic_fetch_sub(&reserved_bytes, shm->bytes);
  }
  memset(shm, 0, sizeof *shm);
}
