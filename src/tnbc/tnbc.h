/* T-NBC: transparent non-blocking collectives (docs/tnbc.md). With MCOLL_TNBC=1
 * a blocking collective of at least MCOLL_TNBC_MIN bytes per block returns after its
 * init phase: the send data is copied, the first and last page of the receive buffer
 * are completed, the rest is received by a task (task/task.h) into a bounce buffer
 * while the receive buffer's whole pages are PROT_NONE. When the task has the data, it
 * writes it into the protected pages through /proc/self/mem, marks the sub-messages
 * done and unprotects; a thread that touches a protected page before that takes a
 * SIGSEGV, and the handler waits (futex, no MPI, no malloc, no locks) for the
 * sub-messages of that page only.
 *
 * Protocol. Whether a call goes this way depends only on what every rank agrees on
 * (the switch, the progress thread, the block size), since the init phase is a small
 * collective of its own; a rank that cannot protect its buffer (on its stack, in a
 * shared mapping, not contiguous) runs the same protocol and waits before returning.
 *
 * Settling. Every later MPI call mcoll wraps first waits for the pending calls of its
 * thread; free/realloc/munmap/mprotect/read/write/... of a pending buffer
 * (libc/interpose.c) wait for the sub-messages they touch. */
#ifndef MCOLL_TNBC_H
#define MCOLL_TNBC_H

#include <mpi.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "core/tls.h"
#include "libc/interpose.h"
#include "task/task.h"

/* 1 once T-NBC is on (MCOLL_TNBC=1 and a progress thread runs): one load per call. */
extern int mcoll__tnbc_active;
/* (The calls not yet settled: mcoll__tnbc_unsettled, libc/interpose.h.) */

/* The small collectives of T-NBC's own protocol (agreements, an order to follow), on
 * the caller's communicator: mcoll's MPI_Allreduce and MPI_Bcast, which complete the
 * communicator's calls in flight first. Their wrappers sit above T-NBC, so they are
 * handed down at start. */
struct mcoll_tnbc_collectives {
  int (*allreduce)(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm);
  int (*bcast)(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm);
};
extern struct mcoll_tnbc_collectives mcoll__tnbc_colls;

/* At start-up, after the progress thread (pmpi/init.c); says why not when it cannot. */
void mcoll__tnbc_start(int rank, const struct mcoll_tnbc_collectives *colls);
/* Before MPI_Finalize: settles and removes the handler. */
void mcoll__tnbc_stop(void);

/* Exported for tools/bench's tnbc mode: T-NBC on/off within one job (after start). */
int mcoll_tnbc_enable(int on);

/* Counts for the MCOLL_VERBOSE report (when MCOLL_TNBC is set). */
void mcoll__tnbc_report(FILE *out);
/* MCOLL_VERBOSE: the monotonic clock in ns (0 without MCOLL_VERBOSE, so a call's own
 * timing costs nothing then), and where an early-returning alltoall spent its time
 * before it returned: the edge exchange, and the rest (protection and posting). */
long long mcoll__tnbc_verbose_clock(void);
struct mcoll_tnbc_call;
void mcoll__tnbc_note_return(struct mcoll_tnbc_call *call, long long start, long long exchanged,
                             long long end);
/* MCOLL_VERBOSE: a call's timeline (the report's averages, in ms from the call's entry):
 * each mark's first time, from the task or the caller. */
enum mcoll_tnbc_mark {
  MCOLL_TNBC_AT_ENTER, MCOLL_TNBC_AT_EXCHANGED, MCOLL_TNBC_AT_BEGUN, MCOLL_TNBC_AT_PROTECTED,
  MCOLL_TNBC_AT_STARTED, MCOLL_TNBC_AT_RETURN,
  MCOLL_TNBC_AT_SENDS_POSTED, MCOLL_TNBC_AT_FIRST_IN, MCOLL_TNBC_AT_ALL_IN,
  MCOLL_TNBC_AT_SENDS_DONE, MCOLL_TNBC_AT_TASK_END, MCOLL_TNBC_AT_SETTLE, MCOLL_TNBC_AT_SETTLED,
  MCOLL_TNBC_MARKS
};
void mcoll__tnbc_mark(struct mcoll_tnbc_call *call, enum mcoll_tnbc_mark what);

/* Waits for the pending T-NBC calls this thread made and frees what they held; from
 * the application's threads (not from a task). Not the other threads' calls: each
 * may need a peer's call that the peer makes on the thread matching this one, after
 * the call this thread is making now. A buffer of another thread's pending call
 * passed to this thread's MPI call is waited for where mcoll or this process touch
 * it (the handler, the interposed calls), not where a peer reads it by single copy. */
void mcoll__tnbc_settle(void);
/* The same for every thread's calls (MPI_Finalize, switching T-NBC off). */
void mcoll__tnbc_settle_all(void);
static inline void mcoll__tnbc_settle_pending(void) {
  if (atomic_load_explicit(&mcoll__tnbc_unsettled, memory_order_acquire)) mcoll__tnbc_settle();
}

/* Waits (futex, no MPI) until no pending call has bytes in [addr, addr+len) that
 * `access` cannot use yet (libc/interpose.h); 0 if nothing had to wait. caller: the
 * interposed libc function's return address (no wait when it lies in the host MPI),
 * or NULL (mcoll itself). Safe in free; with caller NULL in a signal handler. */
int mcoll__tnbc_wait_range(uintptr_t addr, size_t len, enum mcoll_libc_access access,
                           const void *caller);

/* The blocking call entering T-NBC, for the trace (MCOLL_TNBC_TRACE/ORDER): its
 * return address into the application and its name. The wrapper of every collective
 * that may go T-NBC sets it in its condition: mcoll__tnbc_active && MCOLL_TNBC_ENTER(..). */
struct mcoll_tnbc_caller {
  const void *ret;
  const char *coll;
};
extern MCOLL_TLS struct mcoll_tnbc_caller mcoll__tnbc_caller;
#define MCOLL_TNBC_ENTER(name)                                                                     \
  (mcoll__tnbc_caller.ret = __builtin_return_address(0), mcoll__tnbc_caller.coll = (name), 1)

/* The MPI_MIN of n ints over comm's ranks by mcoll's own allreduce (it completes the
 * communicator's calls in flight first), for the T-NBC paths' agreements: keeps the
 * caller's site (the allreduce is a T-NBC entry too). */
int mcoll__tnbc_agree(const int *mine, int *all, int n, MPI_Comm comm);

/* MCOLL_TNBC_ADAPT (tnbc/adapt.c): whether this eligible call goes T-NBC (1) or
 * blocking (0), the same on every rank; called by every rank at the same point of
 * the same eligible call (coll: a string literal). Collective on comm once per key
 * (the decision's allreduce). */
int mcoll__tnbc_adapt_take(MPI_Comm comm, const char *coll, size_t bytes);
void mcoll__tnbc_adapt_report(FILE *out);
/* Set once mcoll_tnbc_enable was called: the caller chooses, no adapting. */
extern int mcoll__tnbc_caller_chooses;

/* One call in flight. */
struct mcoll_tnbc_call;

/* Whether the receive buffer [buf, buf+bytes) may be protected: it spans whole
 * pages, is not on this thread's stack, and lies in private writable mappings. */
int mcoll__tnbc_protectable(void *buf, size_t bytes);

/* The call for a receive buffer of `bytes` whose sub-messages are `sub` bytes each
 * (the last may be shorter). target: where the task receives; NULL: a bounce buffer
 * made here, and recvbuf is protected at post; else (recvbuf itself, or a packed
 * copy) nothing is protected and post waits for the task. recvbuf NULL: nothing to
 * receive (a bcast root), post does not wait. Aborts when out of memory
 * (every rank runs the protocol once it was chosen). */
struct mcoll_tnbc_call *mcoll__tnbc_begin(void *recvbuf, size_t bytes, size_t sub, void *target);
/* The same with one sub-message per range [off[i], off[i]+len[i]) of recvbuf (the
 * blocks of an alltoallv, any order, gaps allowed); bytes of them on the partial
 * first and last pages are written by mcoll__tnbc_publish and waited for before post
 * returns (no init exchange needed). */
struct mcoll_tnbc_call *mcoll__tnbc_begin_ranges(void *recvbuf, size_t bytes, int n,
                                                 const size_t *off, const size_t *len,
                                                 void *target);
/* Instead of copying the send buffer: sends straight from it, its whole pages
 * read-only until the blocks on them are sent (a write waits in the handler). Returns
 * sendbuf, or NULL when it cannot (then the caller copies): call before post. The
 * bytes on its partial first and last pages are not protected: the caller must send
 * those from elsewhere (alltoall: the receivers patch them from the init exchange). */
const char *mcoll__tnbc_send_in_place(struct mcoll_tnbc_call *call, const void *sendbuf,
                                      size_t bytes, int n, const size_t *off, const size_t *len);
/* From the task: the sends of [off, off+len) of the send buffer's protected pages
 * are complete (the task's end does the rest). */
void mcoll__tnbc_sent(struct mcoll_tnbc_call *call, size_t off, size_t len);
/* From the task: received block `index` is complete (the trace's completion order). */
void mcoll__tnbc_block_done(struct mcoll_tnbc_call *call, int index);
/* MCOLL_TNBC_ORDER: the order file's order of the call's n received blocks (the
 * first-touched first), from the caller's thread before post; 0 if none. */
int mcoll__tnbc_call_order(struct mcoll_tnbc_call *call, MPI_Comm comm, int *order, int n);
/* Splits the call's sub-messages into pieces of `piece` bytes counted from the start
 * of each block (off[index]: the block's offset in the receive buffer), so that the
 * task can publish each message of a block as it arrives (mcoll__tnbc_publish of one
 * piece). Before post; 1 if split, 0 if not (not protected, traced, or more pieces than
 * the table holds: one sub-message per block stays). */
int mcoll__tnbc_split_subs(struct mcoll_tnbc_call *call, const size_t *off, size_t piece);
/* Where the task receives. */
void *mcoll__tnbc_target(struct mcoll_tnbc_call *call);
/* Memory (malloc, or mcoll__tnbc_send_copy) of bytes released when the call settles. */
void mcoll__tnbc_own(struct mcoll_tnbc_call *call, void *mem, size_t bytes);

/* Where the task receives for recvbuf (count elements of type, bytes when packed):
 * NULL (a bounce buffer, recvbuf protected), recvbuf itself (not protectable: the
 * call waits), or a packed buffer in *packed (not contiguous: the caller unpacks
 * with mcoll__bytes_release after post). */
struct mcoll_bytes;
void *mcoll__tnbc_recv_target(void *recvbuf, int count, MPI_Datatype type, size_t bytes,
                              struct mcoll_bytes *packed);
/* A packed copy (malloc) of count elements of type at buf (bytes packed). */
char *mcoll__tnbc_send_copy(const void *buf, int count, MPI_Datatype type, size_t bytes);
/* The init phase's edges into a receive buffer of bytes (before protection). */
void mcoll__tnbc_put_edges(void *recvbuf, size_t bytes, const void *head, const void *tail);

/* From the task: bytes [off, off+len) of the receive buffer are final in the target
 * (a sub-message, e.g. one source's block); the call's task publishes the rest when
 * fn returns. */
void mcoll__tnbc_publish(struct mcoll_tnbc_call *call, size_t off, size_t len);

/* Alltoall of `block` bytes per rank from send into the call's target, as a schedule
 * of point-to-point messages on a private duplicate of comm, publishing each source's
 * block as it arrives (receives posted in address order: programs read block 0
 * first). edges: the first and last MCOLL_TNBC_EDGE bytes of every received block as
 * the init exchange brought them, written over each block before it is published
 * (the senders' partial pages are not protected), or NULL. Made at the same call on
 * every rank (it may duplicate comm). */
int mcoll__tnbc_alltoall_post(struct mcoll_tnbc_call *call, MPI_Comm comm, const char *send,
                              size_t block, const char *edges);
/* The same with byte counts and displacements per rank (p of each, copied). */
int mcoll__tnbc_alltoallv_post(struct mcoll_tnbc_call *call, MPI_Comm comm, const char *send,
                               int p, const size_t *scount, const size_t *sdispl,
                               const size_t *rcount, const size_t *rdispl, const char *edges);
/* The init exchange of alltoall(v): for each of p blocks (count, displ in bytes) its
 * first and last min(count, MCOLL_TNBC_EDGE) bytes into 2*MCOLL_TNBC_EDGE bytes of
 * edges (the last right-aligned); and back into a receive buffer. */
void mcoll__tnbc_pack_edges(char *edges, const char *buf, int p, const size_t *count,
                            const size_t *displ);
void mcoll__tnbc_put_block_edges(char *buf, const char *edges, int p, const size_t *count,
                                 const size_t *displ);
/* The caller has completed the partial first and last pages itself (the init
 * exchange): post does not wait for them. */
void mcoll__tnbc_edges_done(struct mcoll_tnbc_call *call);
/* At most this many ranks for alltoallv (one sub-message per source). */
enum { MCOLL_TNBC_MAX_RANKS = 1024 };

/* Posts fn(args) as a task on comm; the task writes the bounce buffer into the user's
 * buffer when fn returns. Protects first (the task may finish at once). If the buffer
 * is not protected, waits for the task and copies before returning. Returns the
 * error of the post (or of the task when waited for). */
int mcoll__tnbc_post(struct mcoll_tnbc_call *call, MPI_Comm comm, mcoll_task_fn fn,
                     const void *args, size_t args_bytes);
/* The same; start_here: the task runs on this thread up to its first wait before the
 * call returns (a schedule that only posts its messages there), else the progress
 * thread starts it (an engine that would run to its end here when peers are ready). */
int mcoll__tnbc_post_how(struct mcoll_tnbc_call *call, MPI_Comm comm, mcoll_task_fn fn,
                         const void *args, size_t args_bytes, int start_here);

/* Bytes of the receive buffer the init phase completes at each end: covers any partial
 * first or last page. */
enum { MCOLL_TNBC_EDGE = 4096 };

/* Whether type is contiguous from its start (size == extent, lb 0): then a count of it
 * is count*size plain bytes. */
int mcoll__tnbc_contiguous(MPI_Datatype type);

#endif
