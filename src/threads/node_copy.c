/* The transport between thread ranks in different processes of one node.
 *
 * Rings: a segment the node's processes share holds a ring (rings.h) per pair of the
 * node's thread ranks, so that a message between processes takes the path of one
 * between threads: its envelope and, up to a ring's inline limit, its bytes in the
 * receiver's ring, taken out by the receiver in the order sent. A larger message below
 * the single-copy limit is copied into one of its sender's blocks in the segment and
 * out again by the receiver, who frees the block (copy in, copy out: no system call;
 * the send is complete at once, as the host MPIs' eager sends are). From the limit on
 * the message is a reference to the send's own buffer, which the receiver reads
 * (process_vm_readv) before it sets the send's flag (process_vm_writev): the send
 * waits for its receive. A message whose ring is full, or that finds none of its
 * sender's blocks free, waits in its pair's queue at the sender, in order, until that
 * rank's progress finds room (a block-sized one then stays in the send's buffer, and
 * the send completes once it is copied into a block).
 *
 * Each process's wake word (wake_word.h) is in the segment too: whatever another
 * process may wait for (a message in its rings, a slot or block freed, its send read)
 * wakes its sleeping waits.
 *
 * Without the rings (MCOLL_THREADS_NODE_RINGS=0, or a segment that cannot be shared)
 * messages cross through the host MPI, and from the single-copy limit only their
 * envelope does. The copies are libmcoll's (shm/cma.c). */
#include "node_copy.h"
#include "fatal.h"
#include "wake_word.h"
#include "shm/shm.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

/* Messages from this many bytes go by single copy (MCOLL_THREADS_NODE_COPY; 0: never).
 * Below it a sender does not wait for its receive. */
enum { NODE_COPY_MIN = 65536 };

static atomic_long messages_read; /* (MCOLL_THREADS_STATS) */
static size_t copy_min;          /* messages from this size go by single copy; 0: none */

/* The segment, mapped by every process of the node (NULL without it): the rings,
 * [receiver x node_ranks + sender] by node rank (the process's place on the node x T +
 * thread); per node rank its blocks' busy flags, a line each, and its blocks; per
 * process its wake word. Only the pages used are ever made. */
enum { BLOCKS = 16, BLOCK_BYTES = NODE_COPY_MIN };
struct block_flag {
  _Alignas(64) atomic_int busy; /* set by the sender before it publishes, cleared by the receiver */
};
static struct thr_ring *node_rings;
static struct block_flag *block_flags; /* [node rank x BLOCKS] */
static unsigned char *blocks;          /* [node rank x BLOCKS][BLOCK_BYTES] */
static struct thr_wake_word *wake_words; /* [place] */
static size_t segment_bytes;
static int node_ranks, first_node_rank, node_threads;
static int *node_place; /* per host process: its place on this node, or -1 */
static int my_place;
static pid_t *place_pid; /* per place on this node: its process id */

/* A message waiting for room (its pair's queue, in the order sent): inline, its bytes
 * follow; a block, its bytes stay the send's until a block takes them, and done is the
 * send's flag; a reference, ref. */
struct thr_node_pending {
  struct thr_node_pending *next;
  int dst, ctx, src, tag;
  enum thr_slot_kind kind;
  struct thr_peer_ref ref;
  size_t len;
  const void *send_bytes; /* THR_SLOT_BLOCK */
  atomic_int *done;       /* THR_SLOT_BLOCK */
  unsigned char bytes[];
};
struct thr_node_queue {
  struct thr_node_pending *head, *tail;
};


/* The segment: the leader makes it (memfd: no name, nothing in /dev/shm even after a
 * crash), the others open its descriptor through /proc, which needs the access single
 * copy needs. Collective over the node's processes; all or none map it. */
static void rings_init(MPI_Comm node, int me, int n, int threads)
{
  const char *env = getenv("MCOLL_THREADS_NODE_RINGS");
  if (n < 2 || (env && *env && atoi(env) == 0))
    return;
  node_ranks = n * threads;
  first_node_rank = me * threads;
  node_threads = threads;
  size_t rings_bytes = (size_t)node_ranks * (size_t)node_ranks * sizeof(struct thr_ring);
  size_t flags_bytes = (size_t)node_ranks * BLOCKS * sizeof(struct block_flag);
  size_t words_bytes = (size_t)n * sizeof(struct thr_wake_word);
  size_t blocks_bytes = (size_t)node_ranks * BLOCKS * BLOCK_BYTES;
  segment_bytes = rings_bytes + flags_bytes + words_bytes + blocks_bytes;
  int fd = -1;
  int where[2] = {(int)getpid(), -1};
  if (me == 0) {
    fd = memfd_create("mcoll-thread-rings", MFD_CLOEXEC);
    if (fd >= 0 && ftruncate(fd, (off_t)segment_bytes) != 0) {
      close(fd);
      fd = -1;
    }
    where[1] = fd;
  }
  PMPI_Bcast(where, 2, MPI_INT, 0, node);
  if (me != 0 && where[1] >= 0) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", where[0], where[1]);
    fd = open(path, O_RDWR | O_CLOEXEC);
  }
  void *base = fd >= 0 ? mmap(NULL, segment_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                       : MAP_FAILED;
  int ok = base != MAP_FAILED, all_ok = 0;
  PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, node);
  if (fd >= 0)
    close(fd);
  if (all_ok) {
    node_rings = base;
    block_flags = (struct block_flag *)((char *)base + rings_bytes);
    wake_words = (struct thr_wake_word *)((char *)base + rings_bytes + flags_bytes);
    blocks = (unsigned char *)base + rings_bytes + flags_bytes + words_bytes;
    return;
  }
  if (base != MAP_FAILED)
    munmap(base, segment_bytes);
  node_ranks = 0;
}

/* Collective over the host's processes: which of them share this node, and whether
 * every process of the node can read its neighbour's memory (Yama's ptrace_scope=1
 * allows it only to a declared tracer: declare any; a container may forbid it). */
void thr_node_copy_init(MPI_Comm node, int process, int processes, int threads)
{
  node_place = thr_malloc((size_t)processes * sizeof *node_place);
  for (int p = 0; p < processes; p++)
    node_place[p] = -1;
  const char *env = getenv("MCOLL_THREADS_NODE_COPY");
  long min = env && *env ? strtol(env, NULL, 0) : NODE_COPY_MIN;
  int n, me;
  PMPI_Comm_size(node, &n);
  PMPI_Comm_rank(node, &me);
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  static uint64_t probe_word = 0x6d636f6c6c6e6f64ull;
  uint64_t mine[3] = {(uint64_t)process, (uint64_t)getpid(), (uintptr_t)&probe_word};
  uint64_t *all = thr_malloc((size_t)n * sizeof mine);
  PMPI_Allgather(mine, 3, MPI_UINT64_T, all, 3, MPI_UINT64_T, node);
  int ok = 1, all_ok = 0;
  if (n > 1) {
    const uint64_t *next = all + 3 * ((me + 1) % n);
    uint64_t got = 0;
    ok = mcoll__cma_read((pid_t)next[1], &got, next[2], sizeof got) == 0 && got == probe_word;
  }
  PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, node);
  place_pid = thr_malloc((size_t)n * sizeof *place_pid);
  for (int i = 0; i < n; i++) {
    node_place[all[3 * i]] = i;
    place_pid[i] = (pid_t)all[3 * i + 1];
  }
  free(all);
  my_place = me;
  copy_min = min > 0 && all_ok ? (size_t)min : 0;
  if (copy_min)
    rings_init(node, me, n, threads);
}

void thr_node_copy_finalize(void)
{
  if (node_rings)
    munmap(node_rings, segment_bytes);
  node_rings = NULL;
  block_flags = NULL;
  blocks = NULL;
  wake_words = NULL;
  node_ranks = 0;
}

struct thr_wake_word *thr_node_wake_word(void)
{
  return wake_words ? &wake_words[my_place] : NULL;
}

/* What the process at `place` may wait for has happened (not this process's own). */
static void wake_place(int place)
{
  if (place != my_place)
    thr_wake_word_wake(&wake_words[place]);
}

void thr_node_wake_sender(int node_rank)
{
  wake_place(node_rank / node_threads);
}

/* Another process of this node, which single copy reaches (copy_min is 0 otherwise). */
static int reached(int process)
{
  return copy_min && node_place[process] >= 0 && node_place[process] != my_place;
}

int thr_node_copy_takes(int process, size_t len)
{
  return reached(process) && len >= copy_min;
}

void thr_node_copy_read(const struct thr_peer_ref *ref, void *dst, size_t len)
{
  int err = mcoll__cma_read(ref->pid, dst, ref->addr, len);
  if (err)
    thr_fatal("process_vm_readv of %zu bytes from process %d: %s", len, (int)ref->pid,
              strerror(err));
}

void thr_node_copy_release(const struct thr_peer_ref *ref)
{
  atomic_fetch_add_explicit(&messages_read, 1, memory_order_relaxed);
  int one = 1;
  int err = mcoll__cma_write(ref->pid, ref->done, &one, sizeof one);
  if (err)
    thr_fatal("process_vm_writev to process %d: %s", (int)ref->pid, strerror(err));
  for (int place = 0; wake_words && place < node_ranks / node_threads; place++)
    if (place_pid[place] == ref->pid)
      wake_place(place);
}

long thr_node_copy_count(void)
{
  return atomic_load_explicit(&messages_read, memory_order_relaxed);
}

/* ---- the rings ---- */

int thr_node_rank(int process, int thread)
{
  if (!node_rings || !reached(process))
    return -1;
  return node_place[process] * node_threads + thread;
}

int thr_node_rings_on(void)
{
  return node_rings != NULL;
}

int thr_node_rank_count(void)
{
  return node_ranks;
}

int thr_node_rank_of_thread(int thread)
{
  return first_node_rank + thread;
}

int thr_node_rank_is_local(int node_rank)
{
  return node_rank >= first_node_rank && node_rank < first_node_rank + node_threads;
}

struct thr_ring *thr_node_ring(int receiver, int sender)
{
  return &node_rings[(size_t)receiver * (size_t)node_ranks + (size_t)sender];
}

static unsigned char *block_bytes(int block)
{
  return blocks + (size_t)block * BLOCK_BYTES;
}

/* One of the rank's blocks that no receiver holds, marked busy; -1 when none is free. */
static int free_block(struct thr_node_out *out)
{
  int first = out->node_rank * BLOCKS;
  for (int i = 0; i < BLOCKS; i++) {
    int block = first + (out->next_block + i) % BLOCKS;
    if (!atomic_load_explicit(&block_flags[block].busy, memory_order_acquire)) {
      atomic_store_explicit(&block_flags[block].busy, 1, memory_order_relaxed);
      out->next_block = (out->next_block + i + 1) % BLOCKS;
      return block;
    }
  }
  return -1;
}

const void *thr_node_block(const struct thr_peer_ref *ref)
{
  return block_bytes((int)ref->addr);
}

void thr_node_block_free(const struct thr_peer_ref *ref)
{
  atomic_store_explicit(&block_flags[ref->addr].busy, 0, memory_order_release);
}

/* Into dst's ring now, if it has room (and a block-sized message a block). */
static int put_now(struct thr_node_out *out, const struct thr_node_pending *p,
                   const void *bytes)
{
  struct thr_ring *ring = thr_node_ring(p->dst, out->node_rank);
  size_t inline_len = p->kind == THR_SLOT_INLINE ? p->len : 0;
  struct thr_slot *first = thr_ring_reserve(ring, inline_len);
  if (!first)
    return 0;
  if (p->kind == THR_SLOT_INLINE) {
    thr_ring_put_inline(ring, first, p->ctx, p->src, p->tag, bytes, p->len);
    wake_place(p->dst / node_threads);
    return 1;
  }
  struct thr_peer_ref ref = p->ref;
  if (p->kind == THR_SLOT_BLOCK) {
    int block = free_block(out);
    if (block < 0)
      return 0;
    memcpy(block_bytes(block), bytes, p->len);
    ref = (struct thr_peer_ref){.len = p->len, .addr = (uint64_t)block};
  }
  thr_ring_put_peer(ring, first, p->kind, p->ctx, p->src, p->tag, &ref);
  wake_place(p->dst / node_threads);
  return 1;
}

/* At the tail of the sender's queue for p->dst (one queue per node rank: a full ring
 * holds up only its own pair). */
static void queue_pending(struct thr_node_out *out, const struct thr_node_pending *p,
                          const void *bytes)
{
  if (!out->pending)
    out->pending = thr_calloc((size_t)node_ranks, sizeof *out->pending);
  size_t extra = p->kind == THR_SLOT_INLINE ? p->len : 0;
  struct thr_node_pending *copy = thr_malloc(sizeof *copy + extra);
  *copy = *p;
  copy->next = NULL;
  if (extra)
    memcpy(copy->bytes, bytes, extra);
  struct thr_node_queue *q = &out->pending[p->dst];
  if (q->head)
    q->tail->next = copy;
  else
    q->head = copy;
  q->tail = copy;
  out->queued++;
}

int thr_node_send(struct thr_node_out *out, int dst, int ctx, int src, int tag,
                  const void *bytes, size_t len, atomic_int *done)
{
  struct thr_node_pending p = {.dst = dst, .ctx = ctx, .src = src, .tag = tag, .len = len,
                               .kind = THR_SLOT_BLOCK, .send_bytes = bytes, .done = done};
  if (len <= THR_INLINE_BYTES && len < copy_min) {
    p.kind = THR_SLOT_INLINE;
  } else if (len >= copy_min || len > BLOCK_BYTES) {
    p.kind = THR_SLOT_PEER;
    p.ref = (struct thr_peer_ref){.len = len, .addr = (uint64_t)(uintptr_t)bytes,
                                  .done = (uint64_t)(uintptr_t)done, .pid = (int32_t)getpid()};
  }
  /* (behind the pair's older messages, if any wait) */
  if (!(out->queued && out->pending[dst].head) && put_now(out, &p, bytes))
    return p.kind != THR_SLOT_PEER;
  queue_pending(out, &p, bytes);
  return p.kind == THR_SLOT_INLINE;
}

void thr_node_send_progress(struct thr_node_out *out, int finalize)
{
  for (int dst = 0; out->queued && dst < node_ranks; dst++) {
    struct thr_node_queue *q = &out->pending[dst];
    for (struct thr_node_pending *p; (p = q->head);) {
      const void *bytes = p->kind == THR_SLOT_BLOCK ? p->send_bytes : p->bytes;
      if (!finalize && !put_now(out, p, bytes))
        break;
      if (p->kind == THR_SLOT_BLOCK && !finalize) /* (in the block: the send is complete) */
        atomic_store_explicit(p->done, 1, memory_order_release);
      q->head = p->next;
      free(p);
      out->queued--;
    }
  }
  if (finalize) { /* (what is left was never received: dropped) */
    free(out->pending);
    out->pending = NULL;
  }
}
