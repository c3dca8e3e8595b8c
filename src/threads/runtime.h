/* The thread-rank runtime: T ranks per process run as threads, each in its own
 * namespace; MPI_COMM_WORLD has (host processes x T) ranks, world rank =
 * process x T + thread. Messages between ranks of one process are matched and copied
 * here; messages between processes go through the host MPI with the envelope
 * (context, source, tag, destination thread) in a header, so the receiving process
 * matches them in the same queues, in MPI order. */
#ifndef MCOLL_THREADS_RUNTIME_H
#define MCOLL_THREADS_RUNTIME_H

#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "fatal.h"
#include "node_copy.h"
#include "rings.h"
#include "table.h"

/* A message that arrived before its receive was posted, or one too large for a slot. */
struct thr_msg {
  struct thr_msg *next;
  int ctx, src, tag;
  size_t len;
  void *data;             /* owned bytes (eager or from another process), or NULL */
  const void *sender_buf; /* large in-process message: the sender's bytes */
  atomic_int *sender_done;
  struct thr_split *split; /* the sender copies half when it waits (rings.h), or NULL */
  int src_thread; /* (in an overflow queue) the sending thread rank */
  int on_stack; /* a blocking sender's: copied before it is queued, never freed */
  /* From another process of the node (node_copy.c), when peer.pid is not 0: its bytes
   * and the sender's completion flag, read and set there. */
  struct thr_peer_ref peer;
};

/* The collectives' (coll.c, coll_nbc.c) address arithmetic on typed buffers. */
static inline MPI_Aint thr_extent_of(MPI_Datatype type)
{
  MPI_Aint lb, extent;
  PMPI_Type_get_extent(type, &lb, &extent);
  return extent;
}

static inline char *thr_block_at(const void *buf, MPI_Aint displ, MPI_Datatype type)
{
  return (char *)buf + displ * thr_extent_of(type);
}

/* A posted receive: bytes land in buf as count x type. */
struct thr_recv {
  struct thr_recv *next;
  int ctx, src, tag;
  void *buf;
  int count;
  MPI_Datatype type;
  void **take; /* SMPI receive: gets the message's bytes (runtime-allocated), buf unused */
  atomic_int done;
  MPI_Status status;
};

struct thr_mailbox {
  pthread_mutex_t lock;
  struct thr_msg *unexpected, **unexpected_tail;
  struct thr_recv *posted, **posted_tail;
  /* Messages from thread ranks whose ring was full (in the order sent), taken after the
   * rings; overflowed counts them for the receiver's look. */
  struct thr_msg *overflow, **overflow_tail;
  atomic_int overflowed;
};

/* A communicator as one rank sees it. */
struct thr_comm {
  int ctx;   /* point-to-point context; collectives use ctx + 1 */
  int size, rank;
  int *world; /* comm rank -> world rank */
  MPI_Errhandler errhandler;
  int locality; /* 0 not known yet, 1 all ranks are threads of this process, -1 not */
  struct thr_local_group *local; /* (locality 1) shared by the ranks, coll_local.c */
  unsigned nbc_seq; /* non-blocking collectives started on it (their tags, coll_nbc.c) */
  int hier_state;   /* 0 not known yet, 1 two-level collectives (coll_hier.c), -1 not */
  struct thr_hier *hier;
};

struct thr_request;
struct thr_smpi_send;

struct thr_rank {
  int world, thread;
  struct thr_mailbox box;
  struct thr_comm **comms; /* handle index -> communicator */
  int ncomms;
  struct thr_request **reqs;
  int nreqs;
  int next_ctx;
  struct thr_smpi_send *smpi_sends; /* SMPI sends to other processes still in flight */
  struct thr_nbc *nbc_pending; /* non-blocking collectives not complete, in start order */
  struct thr_request *orphans;   /* freed sends whose receiver has not read them yet */
  struct thr_node_out node_out; /* its sends to other processes of the node */
  long node_ring_taken; /* messages it took from other processes' rings (statistics) */
  int nbc_busy;                /* (their progress is running: no reentry) */
  struct thr_group **groups;   /* handle index -> group (groups.c) */
  int ngroups;
  int initialized, finalized, thread_level;
  /* The program in its namespace. */
  int (*main)(int, char **, char **);
  int argc;
  char **argv, **envp;
  void (*ctype_init)(void);
  void (*cxa_finalize)(void *);
  int (*fflush)(void *);
  jmp_buf exit_jump;
  int exit_status;
};

struct thr_process {
  int threads, processes, process, world_size;
  int node; /* the lowest host rank of this process's node (MPI_COMM_TYPE_SHARED) */
  int node_processes, node_index; /* this node's processes, and this one's place among them */
  int cpus;                         /* the CPUs this process may run on (at start) */
  MPI_Comm host;                  /* the host MPI's world, duplicated */
  struct thr_rank *ranks;         /* this process's T ranks */
  pthread_mutex_t progress_lock;  /* one thread at a time drains the host */
};

extern struct thr_process thr_proc;
/* The rank of the calling thread (set as the rank's thread starts; NULL elsewhere). */
extern _Thread_local struct thr_rank *thr_self;
extern const struct thr_api thr_runtime_api;

/* What the request engine (runtime.c) does with a collective's schedule: given to it
 * by the collectives above (coll_nbc.c) at start-up, so that it never names them. */
struct thr_nbc;
struct thr_coll_args;
struct thr_nbc_calls {
  /* every wait and test: the schedules of the rank this thread last ran one for */
  void (*progress_self)(void);
  int (*test)(struct thr_nbc *s); /* 1 when done; progresses it otherwise */
  int (*error)(const struct thr_nbc *s); /* MPI_SUCCESS, or a receive's error */
  void (*free)(struct thr_nbc *s);
  /* MPI_Start of a persistent collective: a new schedule from its arguments */
  struct thr_nbc *(*start)(struct thr_rank *r, const struct thr_coll_args *args);
  void (*args_free)(struct thr_coll_args *args);
};
extern const struct thr_nbc_calls thr_coll_nbc_calls; /* coll_nbc.c */
void thr_runtime_init(int threads, const struct thr_nbc_calls *nbc);
/* Frees the rank's freed sends that are complete; with wait, waits for all. */
void thr_orphans_reap(struct thr_rank *r, int wait);
/* After the ranks' threads have ended. */
void thr_runtime_finalize(void);
void thr_rank_init(struct thr_rank *rank, int thread);

/* Runtime-internal point-to-point used by the collectives (context ctx). */
struct thr_request *thr_isend(struct thr_rank *r, struct thr_comm *c, int ctx, const void *buf,
                              int count, MPI_Datatype type, int dst, int tag);
struct thr_request *thr_irecv(struct thr_rank *r, struct thr_comm *c, int ctx, void *buf,
                              int count, MPI_Datatype type, int src, int tag);
void thr_wait(struct thr_rank *r, struct thr_request *q, MPI_Status *status);

/* Every blocking loop of the runtime waits through one of these, the thread ranks' form
 * of libmcoll's flag waits (src/shm/wait.c): poll with a CPU pause while the node's
 * thread ranks have a core each (MCOLL_THREADS_SPIN polls, then on for
 * MCOLL_THREADS_SPIN_US), then yield (for MCOLL_THREADS_YIELD_US), then sleep on a futex
 * until an event (thr_wake_waiters) or a timeout; the rank's non-blocking collectives and
 * the host MPI progress as it waits. Use:
 *   struct thr_waiter w = {0};  while (!ready) thr_wait_pause(&w);  thr_wait_end(&w); */
struct thr_waiter {
  unsigned polls, seq;
  int phase, armed;
  double start_us;
};
void thr_wait_pause(struct thr_waiter *w);
void thr_wait_end(struct thr_waiter *w);
/* After any change another rank may wait for (a message delivered or received, a
 * stage reached): wakes the sleeping waiters (a read of a shared line while none sleeps). */
void thr_wake_waiters(void);
/* Set at the runtime's start, before any wait: what a wait runs while it waits, the word
 * its sleepers wait on in the node's segment (NULL: the process's own), and whether
 * messages may cross the host MPI (which wakes nobody, so waits then never sleep). */
struct thr_wake_word;
void thr_waits_init(void (*progress)(void), struct thr_wake_word *node_word, int host_carries);
long thr_wait_sleep_count(void); /* sleeps on the futex so far, in this process */
/* A setting from the environment, read once (cache starts at -1), at least `least`. */
int thr_env_cached(atomic_int *cache, const char *name, int fallback, int least);
void thr_send(struct thr_rank *r, struct thr_comm *c, const void *buf, int count,
              MPI_Datatype type, int dst, int tag);
void thr_recv(struct thr_rank *r, struct thr_comm *c, void *buf, int count, MPI_Datatype type,
              int src, int tag);
struct thr_comm *thr_comm_of(struct thr_rank *r, MPI_Comm handle);
int thr_type_is_contiguous(MPI_Datatype type, int count);
size_t thr_type_bytes(MPI_Datatype type, int count);

/* Collectives of a communicator whose ranks are all threads of this process: they
 * read each other's buffers in place (coll_local.c). The group is NULL otherwise. */
struct thr_local_group *thr_local_group_of(struct thr_comm *c);
void thr_local_group_release(struct thr_comm *c);
void thr_local_barrier(struct thr_local_group *g, struct thr_comm *c);
void thr_local_bcast(struct thr_local_group *g, struct thr_comm *c, void *buf, int count,
                     MPI_Datatype type, int root);
/* The root's side of thr_local_bcast in two steps: readable from the post, the readers
 * waited for at the wait (the root may send meanwhile); the others call thr_local_bcast. */
unsigned thr_local_bcast_post(struct thr_local_group *g, struct thr_comm *c, const void *buf,
                              int count, MPI_Datatype type);
void thr_local_bcast_wait(struct thr_local_group *g, struct thr_comm *c, unsigned base);
/* root < 0: every rank gets the result (allreduce). */
void thr_local_reduce(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                      void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root);
/* The v calls with counts NULL are the regular ones (block j at j x count). */
void thr_local_gatherv(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                       int scount, MPI_Datatype stype, void *rbuf, int rcount,
                       const int *rcounts, const int *displs, MPI_Datatype rtype, int root);
void thr_local_scatterv(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                        int scount, const int *scounts, const int *displs, MPI_Datatype stype,
                        void *rbuf, int rcount, MPI_Datatype rtype, int root);
void thr_local_allgatherv(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                          int scount, MPI_Datatype stype, void *rbuf, int rcount,
                          const int *rcounts, const int *displs, MPI_Datatype rtype);
void thr_local_alltoallv(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                         int scount, const int *scounts, const int *sdispls, MPI_Datatype stype,
                         void *rbuf, int rcount, const int *rcounts, const int *rdispls,
                         MPI_Datatype rtype);
void thr_local_alltoallw(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                         const int *scounts, const int *sdispls, const MPI_Datatype *stypes,
                         void *rbuf, const int *rcounts, const int *rdispls,
                         const MPI_Datatype *rtypes);
/* counts NULL: reduce_scatter_block (count each). */
void thr_local_reduce_scatter(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                              void *rbuf, int count, const int *counts, MPI_Datatype type,
                              MPI_Op op);
void thr_local_scan(struct thr_local_group *g, struct thr_comm *c, const void *sbuf, void *rbuf,
                    int count, MPI_Datatype type, MPI_Op op, int exclusive);

/* Small calls through the group's eager slots (coll_eager.c): 1 when taken (the same
 * answer at every rank), 0 when the call must take the in-place algorithm. Reduce with
 * root < 0 is allreduce; gather and scatter are the regular calls. */
int thr_local_eager_bcast(struct thr_local_group *g, struct thr_comm *c, void *buf, int count,
                          MPI_Datatype type, int root);
int thr_local_eager_reduce(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                           void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root);
int thr_local_eager_gather(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                           int scount, MPI_Datatype stype, void *rbuf, int rcount,
                           MPI_Datatype rtype, int root);
int thr_local_eager_scatter(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                            int scount, MPI_Datatype stype, void *rbuf, int rcount,
                            MPI_Datatype rtype, int root);
int thr_local_eager_scan(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                         void *rbuf, int count, MPI_Datatype type, MPI_Op op, int exclusive);
/* These take every size (a block too large for a slot is read from its owner's buffer)
 * unless a slot cannot hold their table (counts NULL: the regular calls). */
int thr_local_eager_gatherv(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                            int scount, MPI_Datatype stype, void *rbuf, const int *rcounts,
                            const int *displs, MPI_Datatype rtype, int root);
int thr_local_eager_scatterv(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                             const int *scounts, const int *displs, MPI_Datatype stype,
                             void *rbuf, int rcount, MPI_Datatype rtype, int root);
int thr_local_eager_allgatherv(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                               int scount, MPI_Datatype stype, void *rbuf, int rcount,
                               const int *rcounts, const int *displs, MPI_Datatype rtype);
int thr_local_eager_alltoallv(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                              int scount, const int *scounts, const int *sdispls,
                              MPI_Datatype stype, void *rbuf, int rcount, const int *rcounts,
                              const int *rdispls, MPI_Datatype rtype);
int thr_local_eager_alltoallw(struct thr_local_group *g, struct thr_comm *c, const void *sbuf,
                              const int *scounts, const int *sdispls, const MPI_Datatype *stypes,
                              void *rbuf, const int *rcounts, const int *rdispls,
                              const MPI_Datatype *rtypes);
/* Only when the whole vector fits a slot (counts NULL: reduce_scatter_block). */
int thr_local_eager_reduce_scatter(struct thr_local_group *g, struct thr_comm *c,
                                   const void *sbuf, void *rbuf, int count, const int *counts,
                                   MPI_Datatype type, MPI_Op op);

/* inout = in op inout (the common predefined cases without the host), a copy between
 * typed buffers of one signature, and a buffer for count x type with its free
 * (coll_local.c). */
void thr_fold(const void *in, void *inout, int count, MPI_Datatype type, MPI_Op op);
void thr_copy_typed(void *dst, int dcount, MPI_Datatype dtype, const void *src, int scount,
                    MPI_Datatype stype);
void *thr_alloc_typed(int count, MPI_Datatype type);
void thr_free_typed(void *buf, MPI_Datatype type);

/* Two-level collectives of a communicator across processes (coll_hier.c): in place among
 * each process's ranks, messages among one leader per process. NULL when the
 * communicator is inside one process, has one rank per process, or MCOLL_THREADS_HIER=0. */
struct thr_hier;
struct thr_hier *thr_hier_of(struct thr_rank *r, struct thr_comm *c);
/* Whether a collective takes two levels (the same answer at every rank of the call):
 * bytes is a regular call's block (gather, scatter, allgather, alltoall) or vector
 * (bcast, reductions, scan), in bytes; scan stands for exscan too. */
enum thr_hier_coll { THR_HIER_BARRIER, THR_HIER_BCAST, THR_HIER_REDUCE, THR_HIER_ALLREDUCE,
                     THR_HIER_ALLGATHER, THR_HIER_ALLGATHERV, THR_HIER_GATHER, THR_HIER_GATHERV,
                     THR_HIER_SCATTER, THR_HIER_SCATTERV, THR_HIER_ALLTOALL, THR_HIER_ALLTOALLV,
                     THR_HIER_ALLTOALLW, THR_HIER_SCAN };
int thr_hier_takes(const struct thr_hier *h, enum thr_hier_coll coll, size_t bytes);
void thr_hier_release(struct thr_comm *c);
/* The processes' partial results may be folded in process order: the operation is
 * commutative, or each process's ranks are consecutive in the communicator. */
int thr_hier_folds_in_order(const struct thr_hier *h, MPI_Op op);
void thr_hier_barrier(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h);
void thr_hier_bcast(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h, void *buf,
                    int count, MPI_Datatype type, int root);
void thr_hier_reduce(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                     const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                     int root);
void thr_hier_allreduce(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                        const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op);
/* Regular gather and scatter (not the v calls). */
void thr_hier_gather(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                     const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                     MPI_Datatype rtype, int root);
void thr_hier_scatter(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                      const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                      MPI_Datatype rtype, int root);
void thr_hier_gatherv(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                      const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                      const int *rcounts, const int *displs, MPI_Datatype rtype, int root);
void thr_hier_scatterv(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                       const void *sbuf, const int *scounts, const int *displs,
                       MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root);
void thr_hier_alltoall(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                       const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                       int rcount, MPI_Datatype rtype);
/* As alltoall; any layout, in place too. */
void thr_hier_alltoallv(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                        const void *sbuf, const int *scounts, const int *sdispls,
                        MPI_Datatype stype, void *rbuf, const int *rcounts, const int *rdispls,
                        MPI_Datatype rtype);
void thr_hier_alltoallw(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                        const void *sbuf, const int *scounts, const int *sdispls,
                        const MPI_Datatype *stypes, void *rbuf, const int *rcounts,
                        const int *rdispls, const MPI_Datatype *rtypes);
/* Only where thr_hier_takes THR_HIER_SCAN (each process's ranks are consecutive). */
void thr_hier_scan(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h, const void *sbuf,
                   void *rbuf, int count, MPI_Datatype type, MPI_Op op, int exclusive);
/* counts NULL: regular (block j at j x count). */
void thr_hier_allgatherv(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                         const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                         int count, const int *counts, const int *displs, MPI_Datatype rtype);

/* The calls of the function table (table.h), each with its rank first: point-to-point
 * and communicators (runtime.c, groups.c), the collectives over the runtime's
 * point-to-point (coll.c), MPI_Finalize (api.c). */
#define THR_CALL_DECL(ret, name, params, args) ret thr_##name(struct thr_rank *, THR_UNPAREN params);
#define THR_CALL_DECL0(ret, name) ret thr_##name(struct thr_rank *);
THR_RUNTIME_CALLS(THR_CALL_DECL)
THR_SMPI_CALLS(THR_CALL_DECL)
THR_RUNTIME_CALLS0(THR_CALL_DECL0)

/* Non-blocking and persistent collectives (coll_nbc.c): each call is a schedule of
 * rounds of point-to-point and local steps, advanced by every progress of its rank. */
struct thr_nbc;
struct thr_coll_args;
THR_NBC_CALLS(THR_CALL_DECL)
THR_GROUP_CALLS(THR_CALL_DECL)
/* Advances the rank's pending schedules (no-op when none or when already inside). */
void thr_nbc_progress(struct thr_rank *r);

/* Frees what this rank passed by SMPI and its receivers have taken; with wait, waits
 * for them all first (MPI_Finalize). */
void thr_smpi_reap(struct thr_rank *r, int wait);
/* Drains what other processes sent into the mailboxes (runtime.c). */
void thr_host_drain(void);
/* Requests for coll_nbc.c and groups.c (runtime.c). */
MPI_Request thr_coll_request(struct thr_rank *r, struct thr_nbc *s);
MPI_Request thr_persistent_coll_request(struct thr_rank *r, struct thr_coll_args *args,
                                        MPI_Comm comm);
/* 1 (and the request freed) when q is complete, else 0; never waits. An error of its
 * status goes to *error. */
int thr_request_test(struct thr_request *q, int *error);
/* A new communicator of the rank's (its context agreed by the caller). */
MPI_Comm thr_add_comm(struct thr_rank *r, int ctx, int size, int rank, const int *world);

#endif
