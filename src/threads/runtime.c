/* The thread-rank runtime: ranks, communicators, requests and point-to-point
 * matching, and their calls of the function table (api.c). It never names the
 * collectives above it: their schedules come in through struct thr_nbc_calls. */
#include "runtime.h"
#include "handles.h"
#include "../core/relax.h"

#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

struct thr_process thr_proc;
_Thread_local struct thr_rank *thr_self;
static const struct thr_nbc_calls *nbc_calls;

/* Messages up to this size are copied on send when no receive is posted yet; larger
 * ones wait for the receiver, which copies once from the sender's buffer. */
enum { EAGER_BYTES = 16384 };
/* Host tags: envelopes on HDR_TAG, their bytes on DATA_TAG + source thread (each
 * sending thread's bytes stay in the order of its envelopes). */
enum { HDR_TAG = 0, DATA_TAG = 1 };

/* ---- datatypes: bytes out of and into typed buffers ---- */

size_t thr_type_bytes(MPI_Datatype type, int count)
{
  size_t basic = thr_basic_type_size(type);
  if (basic)
    return basic * (size_t)count;
  int size;
  PMPI_Type_size(type, &size);
  return (size_t)size * (size_t)count;
}

/* Predefined types, and contiguous runs of them, are plain bytes in memory order;
 * any other derived type is packed (its map may reorder or overlap). */
int thr_type_is_contiguous(MPI_Datatype type, int count)
{
  if (thr_basic_type_size(type))
    return 1;
  int nints, naddrs, ntypes, combiner;
  PMPI_Type_get_envelope(type, &nints, &naddrs, &ntypes, &combiner);
  if (combiner == MPI_COMBINER_NAMED) { /* (pair types such as MPI_DOUBLE_INT have holes) */
    MPI_Aint lb, extent;
    int size;
    PMPI_Type_get_extent(type, &lb, &extent);
    PMPI_Type_size(type, &size);
    return lb == 0 && extent == size;
  }
  if (combiner != MPI_COMBINER_CONTIGUOUS || nints != 1 || ntypes != 1 || naddrs != 0)
    return 0;
  int n;
  MPI_Datatype inner;
  MPI_Aint unused;
  PMPI_Type_get_contents(type, 1, 0, 1, &n, &unused, &inner);
  (void)count;
  return thr_type_is_contiguous(inner, 1);
}

/* The bytes of count x type at buf: buf itself, or a packed copy in *owned. */
static const void *bytes_of(const void *buf, int count, MPI_Datatype type, size_t *len,
                            void **owned)
{
  *len = thr_type_bytes(type, count);
  *owned = NULL;
  if (thr_type_is_contiguous(type, count) || *len == 0)
    return buf;
  *owned = thr_malloc(*len);
  int position = 0;
  PMPI_Pack(buf, count, type, *owned, (int)*len, &position, MPI_COMM_SELF);
  return *owned;
}

/* Places len bytes into count x type at buf; MPI_ERR_TRUNCATE if they do not fit. */
static int place_bytes(void *buf, int count, MPI_Datatype type, const void *bytes, size_t len)
{
  size_t capacity = thr_type_bytes(type, count);
  int err = MPI_SUCCESS;
  if (len > capacity) {
    len = capacity;
    err = MPI_ERR_TRUNCATE;
  }
  if (len == 0)
    return err;
  if (thr_type_is_contiguous(type, count)) {
    memcpy(buf, bytes, len);
  } else {
    int position = 0, size;
    PMPI_Type_size(type, &size);
    PMPI_Unpack(bytes, (int)len, &position, buf, (int)(len / (size_t)size), type, MPI_COMM_SELF);
  }
  return err;
}

static void set_status(MPI_Status *status, int src, int tag, int err, size_t len)
{
  status->MPI_SOURCE = src;
  status->MPI_TAG = tag;
  status->MPI_ERROR = err;
  PMPI_Status_set_elements_x(status, MPI_BYTE, (MPI_Count)len);
}

static void copy_status(MPI_Status *out, const MPI_Status *in)
{
  if (out != MPI_STATUS_IGNORE)
    *out = *in;
}

/* ---- matching ---- */

static int matches(int ctx, int src, int tag, const struct thr_msg *m)
{
  return m->ctx == ctx && (src == MPI_ANY_SOURCE || src == m->src) &&
         (tag == MPI_ANY_TAG || tag == m->tag);
}


/* The receiver copies a large message with its sender (rings.h) only when every thread
 * rank has a core (a sender descheduled inside a chunk would hold the receiver for a
 * time slice), and not with MCOLL_THREADS_SPLIT=0. */
static int split_receive(struct thr_msg *m, struct thr_recv *rv)
{
  static atomic_int enabled = -1;
  if (!m->split || m->len < THR_SPLIT_MIN_BYTES || rv->take ||
      !thr_env_cached(&enabled, "MCOLL_THREADS_SPLIT", 1, 0) ||
      m->len > thr_type_bytes(rv->type, rv->count) || !thr_type_is_contiguous(rv->type, rv->count) ||
      thr_proc.threads * thr_proc.node_processes > thr_proc.cpus)
    return 0;
  thr_split_receive(m->split, rv->buf);
  return 1;
}

/* The receive is complete: status, then done (release), then a wake-up. */
static void finish_recv(struct thr_recv *rv, int src, int tag, int err, size_t len)
{
  set_status(&rv->status, src, tag, err, len);
  atomic_store_explicit(&rv->done, 1, memory_order_release);
  thr_wake_waiters();
}

/* The receive gets len bytes: an SMPI receive takes them (*owned handed over when the
 * caller owns them, else a copy), any other has them placed in its buffer.
 * MPI_ERR_TRUNCATE when they exceed the receive's count. */
static int receive_bytes(struct thr_recv *rv, const void *bytes, size_t len, void **owned)
{
  if (!rv->take)
    return place_bytes(rv->buf, rv->count, rv->type, bytes, len);
  int err = len > thr_type_bytes(rv->type, rv->count) ? MPI_ERR_TRUNCATE : MPI_SUCCESS;
  if (owned && *owned) {
    *rv->take = *owned;
    *owned = NULL;
  } else {
    *rv->take = thr_malloc(len ? len : 1);
    memcpy(*rv->take, bytes, len);
  }
  return err;
}

/* A message from another process of the node: its bytes read from the sender's buffer
 * (node_copy.c), straight into the receive's when that is contiguous; then the sender
 * is released. */
static int receive_from_peer(struct thr_recv *rv, const struct thr_msg *m)
{
  int err;
  if (!rv->take && thr_type_is_contiguous(rv->type, rv->count)) {
    size_t capacity = thr_type_bytes(rv->type, rv->count);
    thr_node_copy_read(&m->peer, rv->buf, m->len < capacity ? m->len : capacity);
    err = m->len > capacity ? MPI_ERR_TRUNCATE : MPI_SUCCESS;
  } else {
    void *bytes = thr_malloc(m->len);
    thr_node_copy_read(&m->peer, bytes, m->len);
    err = receive_bytes(rv, bytes, m->len, &bytes);
    free(bytes);
  }
  thr_node_copy_release(&m->peer);
  return err;
}

/* The receive gets the message's bytes; the sender of a large message is released. */
static void complete_recv(struct thr_recv *rv, struct thr_msg *m)
{
  int err = m->peer.pid ? receive_from_peer(rv, m)
            : !m->data && split_receive(m, rv)
                ? MPI_SUCCESS
                : receive_bytes(rv, m->data ? m->data : m->sender_buf, m->len, &m->data);
  int src = m->src, tag = m->tag;
  size_t len = m->len;
  if (m->on_stack) { /* (its sender returns once released) */
    atomic_store_explicit(m->sender_done, 1, memory_order_release);
  } else {
    if (m->sender_done)
      atomic_store_explicit(m->sender_done, 1, memory_order_release);
    free(m->data);
    free(m);
  }
  finish_recv(rv, src, tag, err, len);
}

/* The first posted receive of box matching the envelope, taken out of the queue. */
static struct thr_recv *take_posted(struct thr_mailbox *box, int ctx, int src, int tag)
{
  for (struct thr_recv **p = &box->posted; *p; p = &(*p)->next) {
    struct thr_recv *rv = *p;
    if (rv->ctx == ctx && (rv->src == MPI_ANY_SOURCE || rv->src == src) &&
        (rv->tag == MPI_ANY_TAG || rv->tag == tag)) {
      *p = rv->next;
      if (box->posted_tail == &rv->next)
        box->posted_tail = p;
      return rv;
    }
  }
  return NULL;
}

/* An unmatched message joins the unexpected queue; a large in-process one up to
 * EAGER_BYTES is copied and its sender released (a send need not wait for its receive). */
static void queue_unexpected(struct thr_mailbox *box, struct thr_msg *m)
{
  if (m->on_stack) {
    struct thr_msg *copy = thr_malloc(sizeof *copy);
    *copy = *m;
    copy->on_stack = 0;
    m = copy;
  }
  if (!m->data && !m->peer.pid && m->len <= EAGER_BYTES) {
    m->data = thr_malloc(m->len ? m->len : 1);
    memcpy(m->data, m->sender_buf, m->len);
    atomic_store_explicit(m->sender_done, 1, memory_order_release);
    m->sender_done = NULL;
    m->sender_buf = NULL;
    m->split = NULL;
  }
  m->next = NULL;
  *box->unexpected_tail = m;
  box->unexpected_tail = &m->next;
}

/* Hands m (from another process) to rank dest: to the first matching posted receive,
 * else to the unexpected queue. */
static void deliver(struct thr_rank *dest, struct thr_msg *m)
{
  struct thr_mailbox *box = &dest->box;
  pthread_mutex_lock(&box->lock);
  struct thr_recv *rv = take_posted(box, m->ctx, m->src, m->tag);
  if (rv) {
    pthread_mutex_unlock(&box->lock);
    complete_recv(rv, m);
    return;
  }
  queue_unexpected(box, m);
  pthread_mutex_unlock(&box->lock);
  thr_wake_waiters(); /* (a probe) */
}

/* ---- the rings between thread ranks of this process (rings.h) ---- */

/* Takes the message whose first slot is `first` at rank r (its mailbox locked): into the
 * first matching posted receive, else into the unexpected queue. */
static void take_slot(struct thr_rank *r, struct thr_ring *ring, struct thr_slot *first)
{
  struct thr_recv *rv = take_posted(&r->box, first->ctx, first->src, first->tag);
  struct thr_peer_ref ref; /* (THR_SLOT_BLOCK, THR_SLOT_PEER) */
  if (first->kind == THR_SLOT_BLOCK || first->kind == THR_SLOT_PEER)
    memcpy(&ref, first->data, sizeof ref);
  if (first->kind == THR_SLOT_BLOCK) { /* (copied out now: the block goes back at once) */
    const void *bytes = thr_node_block(&ref);
    if (rv) {
      int err = receive_bytes(rv, bytes, ref.len, NULL);
      thr_node_block_free(&ref);
      finish_recv(rv, first->src, first->tag, err, ref.len);
      return;
    }
    struct thr_msg *m = thr_calloc(1, sizeof *m);
    *m = (struct thr_msg){.ctx = first->ctx, .src = first->src, .tag = first->tag,
                          .len = ref.len, .data = thr_malloc(ref.len ? ref.len : 1)};
    memcpy(m->data, bytes, ref.len);
    thr_node_block_free(&ref);
    queue_unexpected(&r->box, m);
    return;
  }
  if (first->kind != THR_SLOT_INLINE) {
    struct thr_msg *m = first->msg;
    if (first->kind == THR_SLOT_PEER) { /* (bytes in another process: read when matched) */
      m = thr_calloc(1, sizeof *m);
      *m = (struct thr_msg){.ctx = first->ctx, .src = first->src, .tag = first->tag,
                            .len = ref.len, .peer = ref};
    }
    if (rv)
      complete_recv(rv, m);
    else
      queue_unexpected(&r->box, m);
    return;
  }
  size_t len = first->len;
  if (!rv) {
    struct thr_msg *m = thr_calloc(1, sizeof *m);
    *m = (struct thr_msg){.ctx = first->ctx, .src = first->src, .tag = first->tag, .len = len,
                          .data = thr_malloc(len ? len : 1)};
    thr_ring_copy_out(ring, first, m->data, len);
    queue_unexpected(&r->box, m);
    return;
  }
  int err;
  if (first->slots == 1) {
    err = receive_bytes(rv, first->data, len, NULL);
  } else if (!rv->take && thr_type_is_contiguous(rv->type, rv->count)) {
    size_t capacity = thr_type_bytes(rv->type, rv->count);
    thr_ring_copy_out(ring, first, rv->buf, len < capacity ? len : capacity);
    err = len > capacity ? MPI_ERR_TRUNCATE : MPI_SUCCESS;
  } else { /* (in one piece first) */
    void *bytes = thr_malloc(len);
    thr_ring_copy_out(ring, first, bytes, len);
    err = receive_bytes(rv, bytes, len, &bytes);
    free(bytes);
  }
  finish_recv(rv, first->src, first->tag, err, len);
}

/* Whether a ring into rank r holds a message (a read of lines that stay shared while
 * nothing arrives). */
static int rings_pending(struct thr_rank *r)
{
  if (atomic_load_explicit(&r->box.overflowed, memory_order_acquire))
    return 1;
  for (int s = 0; s < thr_proc.threads; s++)
    if (thr_ring_peek(thr_ring_of(r->thread, s)))
      return 1;
  if (thr_node_rings_on()) {
    int me = thr_node_rank_of_thread(r->thread);
    for (int s = 0, n = thr_node_rank_count(); s < n; s++)
      if (!thr_node_rank_is_local(s) && thr_ring_peek(thr_node_ring(me, s)))
        return 1;
  }
  return 0;
}

/* Takes every message of r's rings, each ring in order (the mailbox locked: the lock
 * also makes the taker the rings' one consumer). Returns how many. */
static int drain_locked(struct thr_rank *r)
{
  int taken = 0;
  for (int s = 0; s < thr_proc.threads; s++) {
    struct thr_ring *ring = thr_ring_of(r->thread, s);
    for (struct thr_slot *first; (first = thr_ring_peek(ring)); taken++) {
      take_slot(r, ring, first);
      thr_ring_release(ring, first);
    }
  }
  if (thr_node_rings_on()) { /* (other processes' ranks: a ring each, no overflow) */
    int me = thr_node_rank_of_thread(r->thread);
    for (int s = 0, n = thr_node_rank_count(); s < n; s++) {
      if (thr_node_rank_is_local(s))
        continue;
      struct thr_ring *ring = thr_node_ring(me, s);
      long before = r->node_ring_taken;
      for (struct thr_slot *first; (first = thr_ring_peek(ring)); taken++) {
        take_slot(r, ring, first);
        thr_ring_release(ring, first);
        r->node_ring_taken++;
      }
      if (r->node_ring_taken != before)
        thr_node_wake_sender(s);
    }
  }
  /* (after every ring: a pair's messages there are older than its overflowed ones) */
  struct thr_mailbox *box = &r->box;
  if (!atomic_load_explicit(&box->overflowed, memory_order_relaxed))
    return taken;
  struct thr_msg *m = box->overflow;
  box->overflow = NULL;
  box->overflow_tail = &box->overflow;
  atomic_store_explicit(&box->overflowed, 0, memory_order_relaxed);
  while (m) {
    struct thr_msg *next = m->next;
    atomic_store_explicit(&thr_ring_of(r->thread, m->src_thread)->overflowed, 0,
                          memory_order_release);
    struct thr_recv *rv = take_posted(box, m->ctx, m->src, m->tag);
    if (rv)
      complete_recv(rv, m);
    else
      queue_unexpected(box, m);
    m = next;
    taken++;
  }
  return taken;
}

/* What the other thread ranks sent to r, matched now. */
static void drain_rings(struct thr_rank *r)
{
  if (!thr_rings_ready() || !rings_pending(r))
    return;
  pthread_mutex_lock(&r->box.lock);
  int taken = drain_locked(r);
  pthread_mutex_unlock(&r->box.lock);
  if (taken)
    thr_wake_waiters(); /* (a blocking sender whose message was copied) */
}

/* A message whose ring is full, or whose pair has overflowed messages not yet taken,
 * goes to the receiver's overflow queue: no send waits for a slot. */
static void overflow_put(struct thr_rank *r, int dst_thread, struct thr_ring *ring,
                         struct thr_msg *m)
{
  struct thr_mailbox *box = &thr_proc.ranks[dst_thread].box;
  m->src_thread = r->thread;
  m->next = NULL;
  pthread_mutex_lock(&box->lock);
  *box->overflow_tail = m;
  box->overflow_tail = &m->next;
  atomic_store_explicit(&ring->overflowed, 1, memory_order_relaxed);
  atomic_store_explicit(&box->overflowed, 1, memory_order_release);
  pthread_mutex_unlock(&box->lock);
  thr_wake_waiters();
}

/* The first of the slots for len inline bytes (0: a pointer) in the ring from r to
 * dst_thread, or NULL when the message must overflow. */
static struct thr_slot *ring_slot(struct thr_ring *ring, size_t len)
{
  if (atomic_load_explicit(&ring->overflowed, memory_order_acquire))
    return NULL;
  return thr_ring_reserve(ring, len);
}

/* A message of its own (large, packed or SMPI) into the ring. */
static void ring_put_msg(struct thr_rank *r, int dst_thread, struct thr_msg *m)
{
  struct thr_ring *ring = thr_ring_of(dst_thread, r->thread);
  struct thr_slot *first = ring_slot(ring, 0);
  if (!first) {
    overflow_put(r, dst_thread, ring, m);
    return;
  }
  thr_ring_put_msg(ring, first, m->ctx, m->src, m->tag, m);
  thr_wake_waiters();
}

static void ring_put_inline(struct thr_rank *r, int dst_thread, int ctx, int src, int tag,
                            const void *bytes, size_t len)
{
  struct thr_ring *ring = thr_ring_of(dst_thread, r->thread);
  struct thr_slot *first = ring_slot(ring, len);
  if (!first) { /* (a copy of its own: the send is complete) */
    struct thr_msg *m = thr_calloc(1, sizeof *m);
    *m = (struct thr_msg){.ctx = ctx, .src = src, .tag = tag, .len = len,
                          .data = thr_malloc(len ? len : 1)};
    memcpy(m->data, bytes, len);
    overflow_put(r, dst_thread, ring, m);
    return;
  }
  thr_ring_put_inline(ring, first, ctx, src, tag, bytes, len);
  thr_wake_waiters();
}

/* Posts rv at rank r, or completes it from the first matching unexpected message; then
 * what r's rings hold (newer than the queue) is matched, rv among the posted. */
static void post_recv(struct thr_rank *r, struct thr_recv *rv)
{
  struct thr_mailbox *box = &r->box;
  atomic_store_explicit(&rv->done, 0, memory_order_relaxed);
  pthread_mutex_lock(&box->lock);
  for (struct thr_msg **p = &box->unexpected; *p; p = &(*p)->next) {
    struct thr_msg *m = *p;
    if (matches(rv->ctx, rv->src, rv->tag, m)) {
      *p = m->next;
      if (box->unexpected_tail == &m->next)
        box->unexpected_tail = p;
      pthread_mutex_unlock(&box->lock);
      complete_recv(rv, m);
      return;
    }
  }
  rv->next = NULL;
  *box->posted_tail = rv;
  box->posted_tail = &rv->next;
  int taken = thr_rings_ready() ? drain_locked(r) : 0;
  pthread_mutex_unlock(&box->lock);
  if (taken)
    thr_wake_waiters();
}

/* ---- the host MPI between processes ---- */

/* pid, addr, done: a message that the receiver reads from the sender's memory
 * (node_copy.c; pid 0: its bytes follow on DATA_TAG, or come before the envelope in
 * one host message, see host_inline_bytes). */
struct host_envelope {
  int ctx, src, tag, dst_thread, src_thread, pid;
  uint64_t len, addr, done;
};

/* Messages up to this many bytes (MCOLL_THREADS_HOST_INLINE; 0: none) cross to another
 * process as one host message, their bytes then the envelope: one send, one probe
 * and one receive instead of two of each, for a copy on each side. */
enum { HOST_INLINE_BYTES = 2048 };
static int host_inline_bytes(void)
{
  static atomic_int bytes = -1;
  return thr_env_cached(&bytes, "MCOLL_THREADS_HOST_INLINE", HOST_INLINE_BYTES, 0);
}

/* Whether messages between thread ranks cross the host MPI: there are other processes,
 * and not all of them take the node's rings (set at start). */
static int host_carries;

/* Drains envelopes that arrived from other processes into the ranks' mailboxes. */
void thr_host_drain(void)
{
  if (!host_carries || pthread_mutex_trylock(&thr_proc.progress_lock) != 0)
    return;
  for (;;) {
    int flag;
    MPI_Message handle;
    MPI_Status status;
    PMPI_Improbe(MPI_ANY_SOURCE, HDR_TAG, thr_proc.host, &flag, &handle, &status);
    if (!flag)
      break;
    struct host_envelope env;
    int bytes;
    PMPI_Get_count(&status, MPI_BYTE, &bytes);
    char *inlined = NULL;
    if (bytes > (int)sizeof env) {
      inlined = thr_malloc((size_t)bytes);
      PMPI_Mrecv(inlined, bytes, MPI_BYTE, &handle, MPI_STATUS_IGNORE);
      memcpy(&env, inlined + bytes - (int)sizeof env, sizeof env);
    } else {
      PMPI_Mrecv(&env, sizeof env, MPI_BYTE, &handle, MPI_STATUS_IGNORE);
    }
    struct thr_msg *m = thr_calloc(1, sizeof *m);
    m->ctx = env.ctx;
    m->src = env.src;
    m->tag = env.tag;
    m->len = env.len;
    m->peer = (struct thr_peer_ref){.len = env.len, .addr = env.addr, .done = env.done,
                                    .pid = env.pid};
    if (inlined)
      m->data = inlined; /* (the bytes first: freed as the message's data) */
    else if (!env.pid)
      m->data = thr_malloc(env.len ? env.len : 1);
    if (env.len && !env.pid && !inlined)
      PMPI_Recv(m->data, (int)env.len, MPI_BYTE, status.MPI_SOURCE, DATA_TAG + env.src_thread,
                thr_proc.host, MPI_STATUS_IGNORE);
    if (env.dst_thread < 0 || env.dst_thread >= thr_proc.threads)
      thr_fatal("envelope for thread %d of %d", env.dst_thread, thr_proc.threads);
    deliver(&thr_proc.ranks[env.dst_thread], m);
  }
  pthread_mutex_unlock(&thr_proc.progress_lock);
}

/* Every wait and test: the calling rank's non-blocking collectives advance too. */
static void progress(void)
{
  nbc_calls->progress_self();
  thr_host_drain();
  if (thr_self) {
    drain_rings(thr_self);
    if (thr_self->orphans)
      thr_orphans_reap(thr_self, 0);
    if (thr_self->node_out.queued)
      thr_node_send_progress(&thr_self->node_out, 0);
  }
}

/* ---- requests ---- */

/* COLL: a non-blocking collective (coll_nbc.c); MATCHED: a message MPI_Mprobe took out
 * of the queues (its handle is an MPI_Message). */
enum request_kind { SEND_LOCAL, SEND_HOST, SEND_NODE, RECV, DONE, PERSISTENT, COLL, MATCHED };

/* What a persistent request starts each time. */
struct persistent_call {
  int is_send;
  void *buf;
  int count;
  MPI_Datatype type;
  int peer, tag;
  MPI_Comm comm;
  struct thr_coll_args *coll; /* a persistent collective: MPI_Start makes its schedule */
};

struct thr_request {
  enum request_kind kind;
  atomic_int send_done;
  struct thr_rank *owner; /* RECV: whose rings its waits drain */
  struct thr_split split; /* SEND_LOCAL of a large message */
  void *owned; /* packed bytes or the envelope, freed on completion */
  void *owned2;
  MPI_Request host[2];
  struct thr_recv recv;
  MPI_Status status;
  struct persistent_call call;  /* PERSISTENT: the call, and the operation it started */
  struct thr_request *active;
  struct thr_nbc *nbc;  /* COLL */
  struct thr_msg *msg;  /* MATCHED */
  struct thr_request *next_orphan;
};

static int request_done(struct thr_request *q)
{
  switch (q->kind) {
  case SEND_LOCAL:
    if (atomic_load_explicit(&q->send_done, memory_order_acquire))
      return 1;
    thr_split_help(&q->split);
    return atomic_load_explicit(&q->send_done, memory_order_acquire);
  case SEND_NODE: { /* set once the receiver has read the bytes, or this rank's progress
                     * has put them into a block of the node's segment */
    int flag;
    if (!atomic_load_explicit(&q->send_done, memory_order_acquire))
      return 0;
    PMPI_Test(&q->host[0], &flag, MPI_STATUS_IGNORE);
    return flag;
  }
  case SEND_HOST: {
    int flag;
    MPI_Status statuses[2];
    PMPI_Testall(2, q->host, &flag, statuses);
    return flag;
  }
  case RECV:
    if (atomic_load_explicit(&q->recv.done, memory_order_acquire))
      return 1;
    if (q->owner)
      drain_rings(q->owner);
    return atomic_load_explicit(&q->recv.done, memory_order_acquire);
  case DONE:
    return 1;
  case PERSISTENT:
    return !q->active || request_done(q->active);
  case COLL:
    return nbc_calls->test(q->nbc);
  case MATCHED:
    return 1;
  }
  return 1;
}

static void request_finish(struct thr_request *q, MPI_Status *status)
{
  if (q->kind == RECV)
    q->status = q->recv.status;
  if (q->kind == COLL) { /* (a receive of the schedule failed: MPI_ERR_TRUNCATE) */
    q->status.MPI_ERROR = nbc_calls->error(q->nbc);
    nbc_calls->free(q->nbc);
  }
  copy_status(status, &q->status);
  free(q->owned);
  free(q->owned2);
  free(q);
}

void thr_wait(struct thr_rank *r, struct thr_request *q, MPI_Status *status)
{
  (void)r;
  struct thr_waiter w = {0};
  while (!request_done(q))
    thr_wait_pause(&w);
  thr_wait_end(&w);
  request_finish(q, status);
}

int thr_request_test(struct thr_request *q, int *error)
{
  if (!request_done(q))
    return 0;
  MPI_Status status;
  request_finish(q, &status);
  if (status.MPI_ERROR != MPI_SUCCESS)
    *error = status.MPI_ERROR;
  return 1;
}

/* A send freed before its receiver read it (MPI_Request_free): its flag must stay
 * where the receiver writes it, and MPI_Request_free must not wait for the receive
 * (whose rank may be waiting for this one). */
static void orphan(struct thr_rank *r, struct thr_request *q)
{
  q->next_orphan = r->orphans;
  r->orphans = q;
}

void thr_orphans_reap(struct thr_rank *r, int wait)
{
  while (wait && r->orphans) { /* (from the head: the waits' progress reaps too) */
    struct thr_request *q = r->orphans;
    r->orphans = q->next_orphan;
    thr_wait(r, q, MPI_STATUS_IGNORE);
  }
  for (struct thr_request **p = &r->orphans; *p;) {
    struct thr_request *q = *p;
    if (request_done(q)) {
      *p = q->next_orphan;
      request_finish(q, MPI_STATUS_IGNORE);
    } else {
      p = &q->next_orphan;
    }
  }
}

static struct thr_request *new_request(enum request_kind kind)
{
  struct thr_request *q = thr_calloc(1, sizeof *q);
  q->kind = kind;
  q->host[0] = q->host[1] = MPI_REQUEST_NULL;
  set_status(&q->status, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_SUCCESS, 0);
  return q;
}

struct thr_request *thr_isend(struct thr_rank *r, struct thr_comm *c, int ctx, const void *buf,
                              int count, MPI_Datatype type, int dst, int tag)
{
  if (dst == MPI_PROC_NULL)
    return new_request(DONE);
  if (dst < 0 || dst >= c->size)
    thr_fatal("rank %d: send to rank %d of a communicator of %d", r->world, dst, c->size);
  int dst_world = c->world[dst];
  int dst_process = dst_world / thr_proc.threads;
  size_t len;
  void *owned;
  const void *bytes = bytes_of(buf, count, type, &len, &owned);
  if (dst_process == thr_proc.process) {
    int dst_thread = dst_world % thr_proc.threads;
    if (len <= THR_INLINE_BYTES) { /* copied into the slot: the send is complete */
      ring_put_inline(r, dst_thread, ctx, c->rank, tag, bytes, len);
      free(owned);
      return new_request(DONE);
    }
    struct thr_request *q = new_request(SEND_LOCAL);
    struct thr_msg *m = thr_calloc(1, sizeof *m);
    *m = (struct thr_msg){.ctx = ctx, .src = c->rank, .tag = tag, .len = len};
    if (owned) { /* already a private copy: the send is complete */
      m->data = owned;
      atomic_store(&q->send_done, 1);
    } else {
      m->sender_buf = bytes;
      m->sender_done = &q->send_done;
      thr_split_init(&q->split, bytes, len);
      m->split = &q->split;
    }
    ring_put_msg(r, dst_thread, m);
    return q;
  }
  int dst_node_rank = thr_node_rank(dst_process, dst_world % thr_proc.threads);
  if (dst_node_rank >= 0) { /* (another process of the node: its ring) */
    struct thr_request *q = new_request(SEND_NODE);
    if (thr_node_send(&r->node_out, dst_node_rank, ctx, c->rank, tag, bytes, len,
                      &q->send_done)) {
      free(owned);
      q->kind = DONE;
    } else {
      q->owned2 = owned;
    }
    return q;
  }
  int node_copy = thr_node_copy_takes(dst_process, len);
  struct thr_request *q = new_request(node_copy ? SEND_NODE : SEND_HOST);
  struct host_envelope *env = thr_malloc(sizeof *env);
  *env = (struct host_envelope){.ctx = ctx, .src = c->rank, .tag = tag,
                                .dst_thread = dst_world % thr_proc.threads,
                                .src_thread = r->thread, .len = len};
  if (node_copy) {
    env->pid = (int)getpid();
    env->addr = (uint64_t)(uintptr_t)bytes;
    env->done = (uint64_t)(uintptr_t)&q->send_done;
  }
  if (!node_copy && len > 0 && len <= (size_t)host_inline_bytes()) {
    char *one = thr_malloc(len + sizeof *env);
    memcpy(one, bytes, len);
    memcpy(one + len, env, sizeof *env);
    free(env);
    free(owned);
    q->owned = one;
    PMPI_Isend(one, (int)(len + sizeof *env), MPI_BYTE, dst_process, HDR_TAG, thr_proc.host,
               &q->host[0]);
    return q;
  }
  q->owned = env;
  q->owned2 = owned;
  PMPI_Isend(env, sizeof *env, MPI_BYTE, dst_process, HDR_TAG, thr_proc.host, &q->host[0]);
  if (len && !node_copy)
    PMPI_Isend(bytes, (int)len, MPI_BYTE, dst_process, DATA_TAG + r->thread, thr_proc.host,
               &q->host[1]);
  return q;
}

struct thr_request *thr_irecv(struct thr_rank *r, struct thr_comm *c, int ctx, void *buf,
                              int count, MPI_Datatype type, int src, int tag)
{
  if (src == MPI_PROC_NULL) {
    struct thr_request *q = new_request(DONE);
    set_status(&q->status, MPI_PROC_NULL, MPI_ANY_TAG, MPI_SUCCESS, 0);
    return q;
  }
  if (src != MPI_ANY_SOURCE && (src < 0 || src >= c->size))
    thr_fatal("rank %d: receive from rank %d of a communicator of %d", r->world, src, c->size);
  struct thr_request *q = new_request(RECV);
  q->owner = r;
  q->recv = (struct thr_recv){.ctx = ctx, .src = src, .tag = tag, .buf = buf, .count = count,
                              .type = type};
  post_recv(r, &q->recv);
  return q;
}

void thr_send(struct thr_rank *r, struct thr_comm *c, const void *buf, int count,
              MPI_Datatype type, int dst, int tag)
{
  thr_wait(r, thr_isend(r, c, c->ctx + 1, buf, count, type, dst, tag), MPI_STATUS_IGNORE);
}

void thr_recv(struct thr_rank *r, struct thr_comm *c, void *buf, int count, MPI_Datatype type,
              int src, int tag)
{
  thr_wait(r, thr_irecv(r, c, c->ctx + 1, buf, count, type, src, tag), MPI_STATUS_IGNORE);
}

/* ---- handles ---- */

static int add_handle(void ***table, int *n, void *object)
{
  for (int i = 0; i < *n; i++)
    if (!(*table)[i]) {
      (*table)[i] = object;
      return i;
    }
  int grown = *n ? 2 * *n : 16;
  void **grown_table = realloc(*table, (size_t)grown * sizeof **table);
  if (!grown_table)
    thr_out_of_memory((size_t)grown * sizeof **table, __func__);
  *table = grown_table;
  memset(*table + *n, 0, (size_t)(grown - *n) * sizeof **table);
  int i = *n;
  *n = grown;
  (*table)[i] = object;
  return i;
}

struct thr_comm *thr_comm_of(struct thr_rank *r, MPI_Comm handle)
{
  int index = handle == MPI_COMM_WORLD  ? 0
              : handle == MPI_COMM_SELF ? 1
                                        : thr_comm_index(handle);
  if (index < 0 || index >= r->ncomms || !r->comms[index])
    thr_fatal("rank %d: invalid communicator " THR_HANDLE_FMT, r->world, THR_HANDLE_ARG(handle));
  return r->comms[index];
}

static MPI_Comm add_comm(struct thr_rank *r, struct thr_comm *c)
{
  int index = add_handle((void ***)&r->comms, &r->ncomms, c);
  return thr_comm_handle(index);
}

static MPI_Request add_request(struct thr_rank *r, struct thr_request *q)
{
  int index = add_handle((void ***)&r->reqs, &r->nreqs, q);
  return thr_request_handle(index);
}

/* The request of a handle, taken out of the table when take. NULL for MPI_REQUEST_NULL. */
static struct thr_request *request_of(struct thr_rank *r, MPI_Request handle, int take)
{
  if (handle == MPI_REQUEST_NULL)
    return NULL;
  int index = thr_request_index(handle);
  if (index < 0 || index >= r->nreqs || !r->reqs[index])
    thr_fatal("rank %d: invalid request " THR_HANDLE_FMT, r->world, THR_HANDLE_ARG(handle));
  struct thr_request *q = r->reqs[index];
  if (take)
    r->reqs[index] = NULL;
  return q;
}

static struct thr_comm *new_comm(int ctx, int size, int rank)
{
  struct thr_comm *c = thr_calloc(1, sizeof *c);
  *c = (struct thr_comm){.ctx = ctx, .size = size, .rank = rank,
                         .world = thr_malloc((size_t)size * sizeof(int)),
                         .errhandler = MPI_ERRORS_ARE_FATAL};
  return c;
}

/* World: contexts 0/1; self: 2/3; new communicators from 4 on, agreed over the parent. */
void thr_rank_init(struct thr_rank *r, int thread)
{
  memset(r, 0, sizeof *r);
  r->thread = thread;
  r->world = thr_proc.process * thr_proc.threads + thread;
  r->node_out.node_rank = thr_node_rank_of_thread(thread);
  pthread_mutex_init(&r->box.lock, NULL);
  r->box.unexpected_tail = &r->box.unexpected;
  r->box.posted_tail = &r->box.posted;
  r->box.overflow_tail = &r->box.overflow;
  struct thr_comm *world = new_comm(0, thr_proc.world_size, r->world);
  for (int i = 0; i < world->size; i++)
    world->world[i] = i;
  struct thr_comm *self = new_comm(2, 1, 0);
  self->world[0] = r->world;
  add_comm(r, world);
  add_comm(r, self);
  r->next_ctx = 4;
}

void thr_runtime_init(int threads, const struct thr_nbc_calls *nbc)
{
  nbc_calls = nbc;
  PMPI_Comm_dup(MPI_COMM_WORLD, &thr_proc.host);
  PMPI_Comm_size(thr_proc.host, &thr_proc.processes);
  PMPI_Comm_rank(thr_proc.host, &thr_proc.process);
  thr_proc.threads = threads;
  thr_proc.world_size = threads * thr_proc.processes;
  pthread_mutex_init(&thr_proc.progress_lock, NULL);
  MPI_Comm node;
  PMPI_Comm_split_type(thr_proc.host, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  PMPI_Allreduce(&thr_proc.process, &thr_proc.node, 1, MPI_INT, MPI_MIN, node);
  PMPI_Comm_size(node, &thr_proc.node_processes);
  PMPI_Comm_rank(node, &thr_proc.node_index);
  thr_node_copy_init(node, thr_proc.process, thr_proc.processes, threads);
  host_carries = thr_proc.processes > 1 &&
                 (thr_proc.node_processes < thr_proc.processes || !thr_node_rings_on());
  cpu_set_t allowed;
  thr_proc.cpus = sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 1;
  PMPI_Comm_free(&node);
  thr_handles_init();
  thr_waits_init(progress, host_carries ? NULL : thr_node_wake_word(), host_carries);
  thr_proc.ranks = thr_calloc((size_t)threads, sizeof *thr_proc.ranks);
  thr_rings_init(threads);
  for (int t = 0; t < threads; t++)
    thr_rank_init(&thr_proc.ranks[t], t);
}

void thr_runtime_finalize(void)
{
  thr_rings_free();
  thr_node_copy_finalize();
}

/* ---- the calls of the table ---- */

int thr_Init(struct thr_rank *r, int *argc, char ***argv)
{
  (void)argc, (void)argv;
  r->initialized = 1;
  r->thread_level = MPI_THREAD_SINGLE;
  return MPI_SUCCESS;
}

/* Threads of one rank may call MPI one at a time: the rank's tables have no lock. */
int thr_Init_thread(struct thr_rank *r, int *argc, char ***argv, int required,
                          int *provided)
{
  thr_Init(r, argc, argv);
  r->thread_level = required < MPI_THREAD_SERIALIZED ? required : MPI_THREAD_SERIALIZED;
  *provided = r->thread_level;
  return MPI_SUCCESS;
}

int thr_Initialized(struct thr_rank *r, int *flag)
{
  *flag = r->initialized;
  return MPI_SUCCESS;
}

int thr_Finalized(struct thr_rank *r, int *flag)
{
  *flag = r->finalized;
  return MPI_SUCCESS;
}

int thr_Query_thread(struct thr_rank *r, int *provided)
{
  *provided = r->thread_level;
  return MPI_SUCCESS;
}

int thr_Is_thread_main(struct thr_rank *r, int *flag)
{
  (void)r;
  *flag = 1;
  return MPI_SUCCESS;
}

int thr_Abort(struct thr_rank *r, MPI_Comm comm, int code)
{
  (void)comm;
  fprintf(stderr, "mcoll threads: rank %d called MPI_Abort(%d)\n", r->world, code);
  fflush(stderr);
  r->fflush(NULL);
  thr_abort_job(code);
}

int thr_Comm_rank(struct thr_rank *r, MPI_Comm comm, int *rank)
{
  *rank = thr_comm_of(r, comm)->rank;
  return MPI_SUCCESS;
}

int thr_Comm_size(struct thr_rank *r, MPI_Comm comm, int *size)
{
  *size = thr_comm_of(r, comm)->size;
  return MPI_SUCCESS;
}

MPI_Comm thr_add_comm(struct thr_rank *r, int ctx, int size, int rank, const int *world)
{
  struct thr_comm *c = new_comm(ctx, size, rank);
  memcpy(c->world, world, (size_t)size * sizeof(int));
  return add_comm(r, c);
}

int thr_Comm_compare(struct thr_rank *r, MPI_Comm a, MPI_Comm b, int *result)
{
  struct thr_comm *x = thr_comm_of(r, a), *y = thr_comm_of(r, b);
  if (x == y) {
    *result = MPI_IDENT;
    return MPI_SUCCESS;
  }
  int same = x->size == y->size;
  for (int i = 0; same && i < x->size; i++)
    same = x->world[i] == y->world[i];
  *result = same ? MPI_CONGRUENT : MPI_UNEQUAL; /* (MPI_SIMILAR not told apart) */
  return MPI_SUCCESS;
}

/* Errors stop the job whatever the handler says; the handler is only kept. */
int thr_Comm_set_errhandler(struct thr_rank *r, MPI_Comm comm, MPI_Errhandler handler)
{
  thr_comm_of(r, comm)->errhandler = handler;
  return MPI_SUCCESS;
}

int thr_Comm_get_errhandler(struct thr_rank *r, MPI_Comm comm, MPI_Errhandler *handler)
{
  *handler = thr_comm_of(r, comm)->errhandler;
  return MPI_SUCCESS;
}

int thr_Comm_get_attr(struct thr_rank *r, MPI_Comm comm, int key, void *value, int *flag)
{
  static int tag_ub = 0x7fffffff;
  thr_comm_of(r, comm);
  *flag = 0;
  if (key == MPI_TAG_UB) {
    *(int **)value = &tag_ub;
    *flag = 1;
  }
  return MPI_SUCCESS;
}

int thr_Isend(struct thr_rank *r, const void *buf, int count, MPI_Datatype type, int dst,
                    int tag, MPI_Comm comm, MPI_Request *req)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  *req = add_request(r, thr_isend(r, c, c->ctx, buf, count, type, dst, tag));
  return MPI_SUCCESS;
}

/* A blocking send of a larger contiguous message to a thread rank of this process: the
 * message and its split on the stack, no allocation; the receiver, or the unexpected
 * queue's copy, releases the sender. */
static void send_local_blocking(struct thr_rank *r, int dst_thread, int ctx, int src, int tag,
                                const void *bytes, size_t len)
{
  atomic_int done = 0;
  struct thr_split split = {0};
  thr_split_init(&split, bytes, len);
  struct thr_msg m = {.ctx = ctx, .src = src, .tag = tag, .len = len, .sender_buf = bytes,
                      .sender_done = &done, .split = &split, .on_stack = 1};
  ring_put_msg(r, dst_thread, &m);
  struct thr_waiter w = {0};
  while (!atomic_load_explicit(&done, memory_order_acquire)) {
    thr_split_help(&split);
    if (atomic_load_explicit(&done, memory_order_acquire))
      break;
    thr_wait_pause(&w);
  }
  thr_wait_end(&w);
}

int thr_Send(struct thr_rank *r, const void *buf, int count, MPI_Datatype type, int dst,
                   int tag, MPI_Comm comm)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  /* To a thread rank of this process, contiguous: a small message straight into the
   * ring, a larger one from the stack; no request. */
  if (dst >= 0 && dst < c->size && count >= 0 &&
      c->world[dst] / thr_proc.threads == thr_proc.process && thr_type_is_contiguous(type, count)) {
    size_t len = thr_type_bytes(type, count);
    int dst_thread = c->world[dst] % thr_proc.threads;
    if (len <= THR_INLINE_BYTES)
      ring_put_inline(r, dst_thread, c->ctx, c->rank, tag, buf, len);
    else
      send_local_blocking(r, dst_thread, c->ctx, c->rank, tag, buf, len);
    return MPI_SUCCESS;
  }
  /* To another process of the node, small and contiguous: straight into its ring. */
  if (dst >= 0 && dst < c->size && count >= 0 && thr_type_is_contiguous(type, count) &&
      thr_type_bytes(type, count) <= THR_INLINE_BYTES) {
    int dst_process = c->world[dst] / thr_proc.threads;
    int dst_node_rank = thr_node_rank(dst_process, c->world[dst] % thr_proc.threads);
    if (dst_node_rank >= 0 && !thr_node_copy_takes(dst_process, thr_type_bytes(type, count))) {
      thr_node_send(&r->node_out, dst_node_rank, c->ctx, c->rank, tag, buf,
                    thr_type_bytes(type, count), NULL); /* (inline: complete) */
      return MPI_SUCCESS;
    }
  }
  thr_wait(r, thr_isend(r, c, c->ctx, buf, count, type, dst, tag), MPI_STATUS_IGNORE);
  return MPI_SUCCESS;
}

/* Synchronous and ready sends complete like standard sends (no handshake yet). */
int thr_Ssend(struct thr_rank *r, const void *buf, int count, MPI_Datatype type, int dst,
                    int tag, MPI_Comm comm)
{
  return thr_Send(r, buf, count, type, dst, tag, comm);
}

int thr_Rsend(struct thr_rank *r, const void *buf, int count, MPI_Datatype type, int dst,
                    int tag, MPI_Comm comm)
{
  return thr_Send(r, buf, count, type, dst, tag, comm);
}

int thr_Issend(struct thr_rank *r, const void *buf, int count, MPI_Datatype type, int dst,
                     int tag, MPI_Comm comm, MPI_Request *req)
{
  return thr_Isend(r, buf, count, type, dst, tag, comm, req);
}

int thr_Irecv(struct thr_rank *r, void *buf, int count, MPI_Datatype type, int src,
                    int tag, MPI_Comm comm, MPI_Request *req)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  *req = add_request(r, thr_irecv(r, c, c->ctx, buf, count, type, src, tag));
  return MPI_SUCCESS;
}

int thr_Recv(struct thr_rank *r, void *buf, int count, MPI_Datatype type, int src,
                   int tag, MPI_Comm comm, MPI_Status *status)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  if (src == MPI_PROC_NULL || (src != MPI_ANY_SOURCE && (src < 0 || src >= c->size))) {
    MPI_Status st;
    thr_wait(r, thr_irecv(r, c, c->ctx, buf, count, type, src, tag), &st);
    copy_status(status, &st);
    return st.MPI_ERROR;
  }
  /* The receive on the stack: no request to allocate. */
  struct thr_recv rv = {.ctx = c->ctx, .src = src, .tag = tag, .buf = buf, .count = count,
                        .type = type};
  post_recv(r, &rv);
  struct thr_waiter w = {0};
  while (!atomic_load_explicit(&rv.done, memory_order_acquire)) {
    drain_rings(r);
    if (atomic_load_explicit(&rv.done, memory_order_acquire))
      break;
    thr_wait_pause(&w);
  }
  thr_wait_end(&w);
  copy_status(status, &rv.status);
  return rv.status.MPI_ERROR;
}

int thr_Sendrecv(struct thr_rank *r, const void *sbuf, int scount, MPI_Datatype stype,
                       int dst, int stag, void *rbuf, int rcount, MPI_Datatype rtype, int src,
                       int rtag, MPI_Comm comm, MPI_Status *status)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  struct thr_request *rq = thr_irecv(r, c, c->ctx, rbuf, rcount, rtype, src, rtag);
  struct thr_request *sq = thr_isend(r, c, c->ctx, sbuf, scount, stype, dst, stag);
  MPI_Status st;
  thr_wait(r, sq, MPI_STATUS_IGNORE);
  thr_wait(r, rq, &st);
  copy_status(status, &st);
  return st.MPI_ERROR;
}

int thr_Sendrecv_replace(struct thr_rank *r, void *buf, int count, MPI_Datatype type,
                               int dst, int stag, int src, int rtag, MPI_Comm comm,
                               MPI_Status *status)
{
  size_t len;
  void *owned;
  const void *bytes = bytes_of(buf, count, type, &len, &owned);
  void *copy = thr_malloc(len ? len : 1);
  memcpy(copy, bytes, len);
  free(owned);
  int err = thr_Sendrecv(r, copy, (int)len, MPI_BYTE, dst, stag, buf, count, type, src, rtag,
                        comm, status);
  free(copy);
  return err;
}

/* The first unexpected message matching (src, tag) on comm, as a status. */
static int find_unexpected(struct thr_rank *r, struct thr_comm *c, int src, int tag,
                           MPI_Status *status)
{
  int found = 0;
  pthread_mutex_lock(&r->box.lock);
  for (struct thr_msg *m = r->box.unexpected; m && !found; m = m->next)
    if (matches(c->ctx, src, tag, m)) {
      found = 1;
      if (status != MPI_STATUS_IGNORE)
        set_status(status, m->src, m->tag, MPI_SUCCESS, m->len);
    }
  pthread_mutex_unlock(&r->box.lock);
  return found;
}

int thr_Iprobe(struct thr_rank *r, int src, int tag, MPI_Comm comm, int *flag,
                     MPI_Status *status)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  if (src == MPI_PROC_NULL) {
    *flag = 1;
    if (status != MPI_STATUS_IGNORE)
      set_status(status, MPI_PROC_NULL, MPI_ANY_TAG, MPI_SUCCESS, 0);
    return MPI_SUCCESS;
  }
  progress();
  drain_rings(r);
  *flag = find_unexpected(r, c, src, tag, status);
  return MPI_SUCCESS;
}

int thr_Probe(struct thr_rank *r, int src, int tag, MPI_Comm comm, MPI_Status *status)
{
  int flag = 0;
  struct thr_waiter w = {0};
  for (;;) {
    thr_Iprobe(r, src, tag, comm, &flag, status);
    if (flag) {
      thr_wait_end(&w);
      return MPI_SUCCESS;
    }
    thr_wait_pause(&w);
  }
}

/* A persistent request stays (inactive) after its operation completes. */
int thr_Wait(struct thr_rank *r, MPI_Request *req, MPI_Status *status)
{
  struct thr_request *q = request_of(r, *req, 0);
  MPI_Status st;
  set_status(&st, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_SUCCESS, 0);
  /* A collective's error (a truncated receive) is the call's; (q is freed below) */
  int collective = q && (q->kind == COLL || (q->kind == PERSISTENT && q->call.coll));
  if (q && q->kind == PERSISTENT) {
    if (q->active)
      thr_wait(r, q->active, &st);
    q->active = NULL;
  } else if (q) {
    request_of(r, *req, 1);
    *req = MPI_REQUEST_NULL;
    thr_wait(r, q, &st);
  }
  copy_status(status, &st);
  return collective ? st.MPI_ERROR : MPI_SUCCESS;
}

int thr_Test(struct thr_rank *r, MPI_Request *req, int *flag, MPI_Status *status)
{
  struct thr_request *q = request_of(r, *req, 0);
  *flag = 1;
  if (!q)
    return thr_Wait(r, req, status);
  progress();
  if (!request_done(q)) {
    *flag = 0;
    return MPI_SUCCESS;
  }
  return thr_Wait(r, req, status);
}

int thr_Waitall(struct thr_rank *r, int n, MPI_Request reqs[], MPI_Status statuses[])
{
  for (int i = 0; i < n; i++)
    thr_Wait(r, &reqs[i], statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i]);
  return MPI_SUCCESS;
}

int thr_Testall(struct thr_rank *r, int n, MPI_Request reqs[], int *flag,
                      MPI_Status statuses[])
{
  progress();
  for (int i = 0; i < n; i++) {
    struct thr_request *q = request_of(r, reqs[i], 0);
    if (q && !request_done(q)) {
      *flag = 0;
      return MPI_SUCCESS;
    }
  }
  *flag = 1;
  return thr_Waitall(r, n, reqs, statuses);
}

int thr_Waitany(struct thr_rank *r, int n, MPI_Request reqs[], int *index,
                      MPI_Status *status)
{
  struct thr_waiter w = {0};
  for (;;) {
    int active = 0;
    for (int i = 0; i < n; i++) {
      struct thr_request *q = request_of(r, reqs[i], 0);
      if (!q || (q->kind == PERSISTENT && !q->active))
        continue;
      active = 1;
      if (request_done(q)) {
        thr_wait_end(&w);
        *index = i;
        return thr_Wait(r, &reqs[i], status);
      }
    }
    if (!active) {
      thr_wait_end(&w);
      *index = MPI_UNDEFINED;
      return MPI_SUCCESS;
    }
    thr_wait_pause(&w);
  }
}

/* A freed request still completes: its sender's bytes are still read. */
int thr_Request_free(struct thr_rank *r, MPI_Request *req)
{
  MPI_Request handle = *req;
  struct thr_request *q = request_of(r, *req, 1);
  *req = MPI_REQUEST_NULL;
  if (q && q->kind == PERSISTENT) {
    if (q->active)
      thr_wait(r, q->active, MPI_STATUS_IGNORE);
    nbc_calls->args_free(q->call.coll);
    free(q);
  } else if (q && q->kind == COLL) { /* erroneous (MPI-3.1 5.12); MPICH rejects it too */
    *req = handle; /* (still the program's to complete) */
    r->reqs[thr_request_index(handle)] = q;
    return MPI_ERR_REQUEST;
  } else if (q && (q->kind == SEND_NODE || q->kind == SEND_LOCAL) && !request_done(q)) {
    orphan(r, q);
  } else if (q) {
    thr_wait(r, q, MPI_STATUS_IGNORE);
  }
  return MPI_SUCCESS;
}

static int persistent(struct thr_rank *r, struct persistent_call call, MPI_Request *req)
{
  thr_comm_of(r, call.comm);
  struct thr_request *q = new_request(PERSISTENT);
  q->call = call;
  *req = add_request(r, q);
  return MPI_SUCCESS;
}

int thr_Send_init(struct thr_rank *r, const void *buf, int count, MPI_Datatype type,
                        int dst, int tag, MPI_Comm comm, MPI_Request *req)
{
  return persistent(r, (struct persistent_call){1, (void *)buf, count, type, dst, tag, comm, NULL}, req);
}

int thr_Ssend_init(struct thr_rank *r, const void *buf, int count, MPI_Datatype type,
                         int dst, int tag, MPI_Comm comm, MPI_Request *req)
{
  return thr_Send_init(r, buf, count, type, dst, tag, comm, req);
}

int thr_Recv_init(struct thr_rank *r, void *buf, int count, MPI_Datatype type, int src,
                        int tag, MPI_Comm comm, MPI_Request *req)
{
  return persistent(r, (struct persistent_call){0, buf, count, type, src, tag, comm, NULL}, req);
}

int thr_Start(struct thr_rank *r, MPI_Request *req)
{
  struct thr_request *q = request_of(r, *req, 0);
  if (!q || q->kind != PERSISTENT || q->active)
    thr_fatal("rank %d: MPI_Start of a request that is not an inactive persistent one", r->world);
  struct persistent_call *call = &q->call;
  if (call->coll) {
    q->active = new_request(COLL);
    q->active->nbc = nbc_calls->start(r, call->coll);
    return MPI_SUCCESS;
  }
  struct thr_comm *c = thr_comm_of(r, call->comm);
  q->active = call->is_send
    ? thr_isend(r, c, c->ctx, call->buf, call->count, call->type, call->peer, call->tag)
    : thr_irecv(r, c, c->ctx, call->buf, call->count, call->type, call->peer, call->tag);
  return MPI_SUCCESS;
}

int thr_Startall(struct thr_rank *r, int n, MPI_Request reqs[])
{
  for (int i = 0; i < n; i++)
    thr_Start(r, &reqs[i]);
  return MPI_SUCCESS;
}

/* Packing is local: the host's MPI_COMM_SELF stands for any communicator. */
int thr_Pack(struct thr_rank *r, const void *in, int count, MPI_Datatype type, void *out,
                   int size, int *position, MPI_Comm comm)
{
  thr_comm_of(r, comm);
  return PMPI_Pack(in, count, type, out, size, position, MPI_COMM_SELF);
}

int thr_Unpack(struct thr_rank *r, const void *in, int size, int *position, void *out,
                     int count, MPI_Datatype type, MPI_Comm comm)
{
  thr_comm_of(r, comm);
  return PMPI_Unpack(in, size, position, out, count, type, MPI_COMM_SELF);
}

int thr_Pack_size(struct thr_rank *r, int count, MPI_Datatype type, MPI_Comm comm,
                        int *size)
{
  thr_comm_of(r, comm);
  return PMPI_Pack_size(count, type, MPI_COMM_SELF, size);
}

/* ---- SMPI: ownership passing ---- */

/* Buffers come from the runtime's allocator (the base namespace's malloc), so that a
 * buffer allocated by one rank may be freed by another: each rank's namespace has a
 * malloc of its own, and memory must not be freed in a namespace other than its own. */
int thr_Smpi_alloc(struct thr_rank *r, MPI_Aint size, void *baseptr)
{
  (void)r;
  void *p = size >= 0 ? malloc(size ? (size_t)size : 1) : NULL;
  *(void **)baseptr = p;
  return p ? MPI_SUCCESS : MPI_ERR_NO_MEM;
}

int thr_Smpi_free(struct thr_rank *r, void *ptr)
{
  (void)r;
  free(ptr);
  return MPI_SUCCESS;
}

/* An SMPI send to another process: its bytes go through the host MPI, and the buffer is
 * freed once they are sent. */
struct thr_smpi_send {
  struct thr_smpi_send *next;
  struct thr_request *request;
  void *buffer;
};

/* Frees the buffers of the SMPI sends that have completed; all of them when wait is set. */
void thr_smpi_reap(struct thr_rank *r, int wait)
{
  for (struct thr_smpi_send **p = &r->smpi_sends; *p;) {
    struct thr_smpi_send *s = *p;
    if (wait) {
      thr_wait(r, s->request, MPI_STATUS_IGNORE);
    } else if (request_done(s->request)) {
      request_finish(s->request, MPI_STATUS_IGNORE);
    } else {
      p = &s->next;
      continue;
    }
    *p = s->next;
    free(s->buffer);
    free(s);
  }
}

/* The send returns at once, wherever the peer is (a ring of sends followed by receives
 * must not wait on itself). To a thread rank of this process the buffer itself becomes
 * the message: no copy. */
int thr_Smpi_send(struct thr_rank *r, void *ptr, int count, MPI_Datatype type, int dst,
                        int tag, MPI_Comm comm)
{
  if (!thr_type_is_contiguous(type, count))
    return MPI_ERR_TYPE;
  struct thr_comm *c = thr_comm_of(r, comm);
  thr_smpi_reap(r, 0);
  if (dst == MPI_PROC_NULL) {
    free(ptr);
    return MPI_SUCCESS;
  }
  if (dst < 0 || dst >= c->size)
    thr_fatal("rank %d: send to rank %d of a communicator of %d", r->world, dst, c->size);
  int dst_world = c->world[dst];
  if (dst_world / thr_proc.threads != thr_proc.process) {
    struct thr_smpi_send *s = thr_malloc(sizeof *s);
    *s = (struct thr_smpi_send){.next = r->smpi_sends, .buffer = ptr,
                                .request = thr_isend(r, c, c->ctx, ptr, count, type, dst, tag)};
    r->smpi_sends = s;
    return MPI_SUCCESS;
  }
  struct thr_msg *m = thr_calloc(1, sizeof *m);
  *m = (struct thr_msg){.ctx = c->ctx, .src = c->rank, .tag = tag,
                        .len = thr_type_bytes(type, count), .data = ptr};
  ring_put_msg(r, dst_world % thr_proc.threads, m);
  return MPI_SUCCESS;
}

int thr_Smpi_recv(struct thr_rank *r, void *ptrp, int count, MPI_Datatype type, int src,
                        int tag, MPI_Comm comm, MPI_Status *status)
{
  if (!thr_type_is_contiguous(type, count))
    return MPI_ERR_TYPE;
  struct thr_comm *c = thr_comm_of(r, comm);
  void **take = ptrp;
  *take = NULL;
  if (src == MPI_PROC_NULL)
    return thr_Recv(r, NULL, 0, type, src, tag, comm, status);
  if (src != MPI_ANY_SOURCE && (src < 0 || src >= c->size))
    thr_fatal("rank %d: receive from rank %d of a communicator of %d", r->world, src, c->size);
  struct thr_request *q = new_request(RECV);
  q->owner = r;
  q->recv = (struct thr_recv){.ctx = c->ctx, .src = src, .tag = tag, .count = count,
                              .type = type, .take = take};
  post_recv(r, &q->recv);
  MPI_Status st;
  thr_wait(r, q, &st);
  copy_status(status, &st);
  thr_smpi_reap(r, 0);
  return st.MPI_ERROR;
}

/* ---- requests of non-blocking and persistent collectives (coll_nbc.c) ---- */

MPI_Request thr_coll_request(struct thr_rank *r, struct thr_nbc *s)
{
  struct thr_request *q = new_request(COLL);
  q->nbc = s;
  return add_request(r, q);
}

MPI_Request thr_persistent_coll_request(struct thr_rank *r, struct thr_coll_args *args,
                                        MPI_Comm comm)
{
  struct thr_request *q = new_request(PERSISTENT);
  q->call.comm = comm;
  q->call.coll = args;
  return add_request(r, q);
}

/* ---- more completion calls ---- */

/* Neither MPI_REQUEST_NULL nor an inactive persistent request. */
static int request_active(struct thr_request *q)
{
  return q && !(q->kind == PERSISTENT && !q->active);
}

static MPI_Status *status_at(MPI_Status statuses[], int i)
{
  return statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i];
}

static void empty_status(MPI_Status *status)
{
  if (status != MPI_STATUS_IGNORE)
    set_status(status, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_SUCCESS, 0);
}

int thr_Testsome(struct thr_rank *r, int n, MPI_Request reqs[], int *outcount, int indices[],
                 MPI_Status statuses[])
{
  progress();
  int active = 0, done = 0;
  for (int i = 0; i < n; i++) {
    struct thr_request *q = request_of(r, reqs[i], 0);
    if (!request_active(q))
      continue;
    active = 1;
    if (request_done(q)) {
      thr_Wait(r, &reqs[i], status_at(statuses, done));
      indices[done++] = i;
    }
  }
  *outcount = active ? done : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

int thr_Waitsome(struct thr_rank *r, int n, MPI_Request reqs[], int *outcount, int indices[],
                 MPI_Status statuses[])
{
  struct thr_waiter w = {0};
  for (;;) {
    thr_Testsome(r, n, reqs, outcount, indices, statuses);
    if (*outcount != 0) {
      thr_wait_end(&w);
      return MPI_SUCCESS;
    }
    thr_wait_pause(&w);
  }
}

int thr_Testany(struct thr_rank *r, int n, MPI_Request reqs[], int *index, int *flag,
                MPI_Status *status)
{
  progress();
  int active = 0;
  *index = MPI_UNDEFINED;
  for (int i = 0; i < n; i++) {
    struct thr_request *q = request_of(r, reqs[i], 0);
    if (!request_active(q))
      continue;
    active = 1;
    if (request_done(q)) {
      *index = i;
      *flag = 1;
      return thr_Wait(r, &reqs[i], status);
    }
  }
  *flag = !active;
  if (!active)
    empty_status(status);
  return MPI_SUCCESS;
}

/* Like MPI_Test, but the request stays. */
int thr_Request_get_status(struct thr_rank *r, MPI_Request req, int *flag, MPI_Status *status)
{
  struct thr_request *q = request_of(r, req, 0);
  progress();
  *flag = !request_active(q) || request_done(q);
  if (!*flag)
    return MPI_SUCCESS;
  if (q && q->kind == PERSISTENT)
    q = q->active;
  if (!q || status == MPI_STATUS_IGNORE)
    empty_status(status);
  else
    *status = q->kind == RECV ? q->recv.status : q->status;
  return MPI_SUCCESS;
}

/* ---- cancelling a receive, matched probes ---- */

/* A receive still posted leaves the queue, cancelled; one already matched completes as
 * it is, as does a send (MPI lets a cancel fail). */
int thr_Cancel(struct thr_rank *r, MPI_Request *req)
{
  struct thr_request *q = request_of(r, *req, 0);
  if (q && q->kind == PERSISTENT)
    q = q->active;
  if (!q || q->kind != RECV)
    return MPI_SUCCESS;
  struct thr_mailbox *box = &r->box;
  pthread_mutex_lock(&box->lock);
  for (struct thr_recv **p = &box->posted; *p; p = &(*p)->next)
    if (*p == &q->recv) {
      *p = q->recv.next;
      if (box->posted_tail == &q->recv.next)
        box->posted_tail = p;
      set_status(&q->recv.status, q->recv.src, q->recv.tag, MPI_SUCCESS, 0);
      PMPI_Status_set_cancelled(&q->recv.status, 1);
      atomic_store_explicit(&q->recv.done, 1, memory_order_release);
      break;
    }
  pthread_mutex_unlock(&box->lock);
  return MPI_SUCCESS;
}

int thr_Improbe(struct thr_rank *r, int src, int tag, MPI_Comm comm, int *flag,
                MPI_Message *msg, MPI_Status *status)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  *flag = 1;
  if (src == MPI_PROC_NULL) {
    *msg = MPI_MESSAGE_NO_PROC;
    if (status != MPI_STATUS_IGNORE)
      set_status(status, MPI_PROC_NULL, MPI_ANY_TAG, MPI_SUCCESS, 0);
    return MPI_SUCCESS;
  }
  progress();
  drain_rings(r);
  struct thr_msg *found = NULL;
  struct thr_mailbox *box = &r->box;
  pthread_mutex_lock(&box->lock);
  for (struct thr_msg **p = &box->unexpected; *p; p = &(*p)->next)
    if (matches(c->ctx, src, tag, *p)) {
      found = *p;
      *p = found->next;
      if (box->unexpected_tail == &found->next)
        box->unexpected_tail = p;
      break;
    }
  pthread_mutex_unlock(&box->lock);
  if (!found) {
    *flag = 0;
    return MPI_SUCCESS;
  }
  if (status != MPI_STATUS_IGNORE)
    set_status(status, found->src, found->tag, MPI_SUCCESS, found->len);
  struct thr_request *q = new_request(MATCHED);
  q->msg = found;
  *msg = (MPI_Message)add_request(r, q);
  return MPI_SUCCESS;
}

int thr_Mprobe(struct thr_rank *r, int src, int tag, MPI_Comm comm, MPI_Message *msg,
               MPI_Status *status)
{
  struct thr_waiter w = {0};
  for (;;) {
    int flag;
    thr_Improbe(r, src, tag, comm, &flag, msg, status);
    if (flag) {
      thr_wait_end(&w);
      return MPI_SUCCESS;
    }
    thr_wait_pause(&w);
  }
}

/* The matched message's bytes into buf, at once (it is here already). */
static void receive_matched(struct thr_rank *r, void *buf, int count, MPI_Datatype type,
                            MPI_Message *msg, MPI_Status *status)
{
  if (*msg == MPI_MESSAGE_NO_PROC) {
    set_status(status, MPI_PROC_NULL, MPI_ANY_TAG, MPI_SUCCESS, 0);
  } else {
    struct thr_request *q = request_of(r, (MPI_Request)*msg, 1);
    if (!q || q->kind != MATCHED)
      thr_fatal("rank %d: MPI_Mrecv of a message MPI_Mprobe did not give", r->world);
    struct thr_recv rv = {.buf = buf, .count = count, .type = type};
    complete_recv(&rv, q->msg);
    *status = rv.status;
    free(q);
  }
  *msg = MPI_MESSAGE_NULL;
}

int thr_Mrecv(struct thr_rank *r, void *buf, int count, MPI_Datatype type, MPI_Message *msg,
              MPI_Status *status)
{
  MPI_Status st;
  receive_matched(r, buf, count, type, msg, &st);
  copy_status(status, &st);
  return st.MPI_ERROR;
}

int thr_Imrecv(struct thr_rank *r, void *buf, int count, MPI_Datatype type, MPI_Message *msg,
               MPI_Request *req)
{
  struct thr_request *q = new_request(DONE);
  receive_matched(r, buf, count, type, msg, &q->status);
  *req = add_request(r, q);
  return MPI_SUCCESS;
}
