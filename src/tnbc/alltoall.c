/* T-NBC's alltoall(v) schedule (tnbc.h): point-to-point messages on a private
 * duplicate of the communicator, each source's block published the moment it is in,
 * so that a program reading block 0 first waits for block 0 only (T-NBC's
 * sub-messages; the engines of src/coll/alltoall complete all blocks at once for
 * T-NBC's purpose). */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/fiber.h"
#include "tnbc/tnbc.h"
#include "core/config.h"
#include "tnbc/tnbc_internal.h"

enum { TAG_TNBC_A2A = 4242 };

/* The private duplicate, kept as an attribute of comm (freed with it), and the node's
 * turn counter once an ordered call needed it. */
struct private_comm {
  MPI_Comm dup;
  struct node_turn *turn;
};
static int dup_keyval = MPI_KEYVAL_INVALID;
static void turn_free(struct node_turn *turn);

static int free_dup(MPI_Comm comm, int keyval, void *value, void *extra) {
  (void)comm, (void)keyval, (void)extra;
  struct private_comm *pc = value;
  PMPI_Comm_free(&pc->dup);
  turn_free(pc->turn);
  free(pc);
  return MPI_SUCCESS;
}

static pthread_once_t dup_keyval_once = PTHREAD_ONCE_INIT;

/* Once per process: two threads that each made a keyval of their own (their first
 * calls side by side) would each miss the other's attribute later and duplicate
 * their communicator again, a Comm_dup no other rank joins (it hung). */
static void dup_keyval_create(void) {
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_dup, &dup_keyval, NULL);
}

static struct private_comm *private_comm(MPI_Comm comm) {
  pthread_once(&dup_keyval_once, dup_keyval_create);
  if (dup_keyval == MPI_KEYVAL_INVALID) return NULL;
  struct private_comm *pc = NULL;
  int found = 0;
  PMPI_Comm_get_attr(comm, dup_keyval, &pc, &found);
  if (found) return pc;
  pc = calloc(1, sizeof *pc);
  if (!pc || PMPI_Comm_dup(comm, &pc->dup) != MPI_SUCCESS) {
    free(pc);
    return NULL;
  }
  PMPI_Comm_set_attr(comm, dup_keyval, pc);
  return pc;
}

/* ---- priorities (MCOLL_TNBC_ORDER) ----------------------------------------------------
 * The T-NBC paper's node-level coordination (its figure 4): where every rank reads its
 * received blocks in one order (SPMD programs; the order of rank 0's trace is taken
 * for all), the node's rank whose block is read first sends all its blocks alone on
 * the node's links; the node's other ranks start theirs when it is done, all at once
 * (lower priorities share the links as before). So every rank gets the block it
 * reads first after one rank's sends instead of at the end of the whole exchange.
 * Meanwhile the others only receive: their receives are posted first, in their own
 * trace's order, and tested while they wait, so no rank waits on another without
 * progressing. (Not rank by rank through the whole order: where ranks share cores
 * each hand-over costs a scheduler wake-up, more than the order gains; docs/tnbc.md.)
 *
 * The hand-over is a counter in a page shared by the node's ranks (a memfd of the
 * node's first rank, mapped by the others through /proc/<pid>/fd: no name in
 * /dev/shm, so nothing outlives the job). Ordered call g on the communicator: the
 * counter is g until the node's first sender's sends are complete, then g + 1. */
struct node_turn {
  _Atomic uint64_t *counter;
  int local_size;
  int *members;  /* ranks of dup on this node */
  uint64_t gen;  /* ordered calls so far (the counter before this one's hand-over) */
};

static void turn_free(struct node_turn *turn) {
  if (!turn) return;
  if (turn->counter) munmap((void *)turn->counter, 4096);
  free(turn->members);
  free(turn);
}

/* Collective over dup: the node's shared counter, or NULL on every rank of a node
 * where some rank could not map it. */
static struct node_turn *turn_setup(MPI_Comm dup) {
  MPI_Comm node;
  int me, local_rank, local_size;
  if (PMPI_Comm_split_type(dup, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS)
    return NULL;
  PMPI_Comm_rank(dup, &me);
  PMPI_Comm_rank(node, &local_rank);
  PMPI_Comm_size(node, &local_size);
  struct node_turn *turn = calloc(1, sizeof *turn);
  int *members = malloc(sizeof *members * (size_t)local_size);
  int fd = -1, where[2] = {(int)getpid(), -1};
  if (local_rank == 0) {
    fd = (int)syscall(SYS_memfd_create, "mcoll-tnbc-turn", MFD_CLOEXEC);
    if (fd >= 0 && ftruncate(fd, 4096) != 0) {
      close(fd);
      fd = -1;
    }
    where[1] = fd;
  }
  PMPI_Bcast(where, 2, MPI_INT, 0, node);
  if (local_rank != 0 && where[1] >= 0) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", where[0], where[1]);
    fd = open(path, O_RDWR | O_CLOEXEC);
  }
  void *page = fd >= 0 ? mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  int ok = turn && members && page != MAP_FAILED, all = 0;
  PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, node); /* (also: everyone has opened fd) */
  if (fd >= 0) close(fd);
  if (all) PMPI_Allgather(&me, 1, MPI_INT, members, 1, MPI_INT, node);
  PMPI_Comm_free(&node);
  if (!all) {
    if (page != MAP_FAILED) munmap(page, 4096);
    free(members);
    free(turn);
    return NULL;
  }
  turn->counter = page;
  turn->local_size = local_size;
  turn->members = members;
  return turn;
}

/* The schedule's order for this call (a named hook: the data path is the same with
 * or without it): 1 if the ranks agree to follow the order file, then recv_order[]
 * holds the sources in the order to receive them, and *turn / *slot when to send.
 * Collective over comm when MCOLL_TNBC_ORDER is set. */
static int schedule_order(struct mcoll_tnbc_call *call, MPI_Comm comm, struct private_comm *pc,
                          int p, int *recv_order, struct node_turn **turn, uint64_t *slot,
                          int *first) {
  int me, have, all = 0;
  int *agreed = malloc(sizeof *agreed * (size_t)p * 2); /* rank 0's order, positions */
  have = agreed && mcoll__tnbc_call_order(call, comm, recv_order, p);
  /* (mcoll's own collectives on comm, through the node's shared memory, rather than
   * the host's blocking ones beside the progress thread; no difference measured) */
  mcoll__tnbc_agree(&have, &all, 1, comm);
  if (!all) {
    free(agreed);
    return 0;
  }
  PMPI_Comm_rank(pc->dup, &me);
  memcpy(agreed, recv_order, sizeof *agreed * (size_t)p);
  mcoll__tnbc_colls.bcast(agreed, p, MPI_INT, 0, comm);
  int *position = agreed + p;
  for (int k = 0; k < p; k++) position[agreed[k]] = k;
  if (!pc->turn) pc->turn = turn_setup(pc->dup);
  *turn = pc->turn;
  if (*turn) {
    int ahead = 0;
    for (int i = 0; i < (*turn)->local_size; i++) ahead += position[(*turn)->members[i]] < position[me];
    *first = ahead == 0;
    *slot = (*turn)->gen++;
  }
  free(agreed);
  return 1;
}

/* Byte counts and displacements of both sides, and the order of receives (one
 * allocation, freed by the task). */
struct a2a_layout {
  size_t *scount, *sdispl, *rcount, *rdispl;
  int *order; /* sources, first-read first */
  int *rank_of; /* position in order of each source */
};

struct a2a_args {
  struct mcoll_tnbc_call *call;
  const char *edges; /* (mcoll__tnbc_alltoall_post) */
  const char *send;
  char *recv;
  struct a2a_layout *lay;
  MPI_Comm pcomm;
  struct node_turn *turn; /* ordered: the node's first sender goes alone */
  uint64_t slot;          /* the counter until it is done */
  int first;              /* this rank is it */
  size_t chunk;           /* bytes per message (MCOLL_TNBC_CHUNK; 0: a block each) */
  MPI_Request *early;     /* the sends' requests, their first early_chunks chunks to each */
  int early_chunks;       /* destination posted by the caller (TNBC_SENDS_FIRST) */
  int chunk_subs;         /* a sub-message per chunk: each published as it arrives */
};

/* Block src is in: its edges from the init exchange, then published. */
static void block_in(const struct a2a_args *a, int src) {
  enum { E = MCOLL_TNBC_EDGE };
  const struct a2a_layout *l = a->lay;
  char *at = a->recv + l->rdispl[src];
  size_t len = l->rcount[src], edge = len < E ? len : E;
  if (a->edges && len) {
    /* (the tail right-aligned in its half: mcoll__tnbc_pack_edges) */
    memcpy(at, a->edges + (size_t)src * 2 * E, edge);
    memcpy(at + len - edge, a->edges + (size_t)src * 2 * E + 2 * E - edge, edge);
  }
  mcoll__tnbc_publish(a->call, l->rdispl[src], l->rcount[src]);
  mcoll__tnbc_block_done(a->call, src);
}

/* Chunk c of block src is in (a sub-message of its own, mcoll__tnbc_split_subs): the
 * block's edges from the init exchange where they fall in it, then published, so
 * that a reader of the block's start goes on while the rest is on the wire. */
static void chunk_in(const struct a2a_args *a, int src, int c) {
  enum { E = MCOLL_TNBC_EDGE };
  const struct a2a_layout *l = a->lay;
  size_t len = l->rcount[src], lo = (size_t)c * a->chunk, hi = lo + a->chunk > len ? len : lo + a->chunk;
  char *at = a->recv + l->rdispl[src];
  if (a->edges && len) {
    size_t edge = len < E ? len : E;
    const char *head = a->edges + (size_t)src * 2 * E, *tail = head + 2 * E - edge;
    /* [0, edge) and [len - edge, len) of the block, where they meet [lo, hi) */
    if (lo < edge) memcpy(at + lo, head + lo, (hi < edge ? hi : edge) - lo);
    size_t t = len - edge > lo ? len - edge : lo;
    if (t < hi) memcpy(at + t, tail + (t - (len - edge)), hi - t);
  }
  mcoll__tnbc_publish(a->call, l->rdispl[src] + lo, hi - lo);
}

/* Messages of a block of len bytes: chunk bytes each (MCOLL_TNBC_CHUNK, the same on
 * every rank), or one. */
static int chunks_of(size_t len, size_t chunk) {
  if (!len) return 0;
  return chunk && len > chunk ? (int)((len + chunk - 1) / chunk) : 1;
}

/* The block's messages from (to) base + displ, chunk bytes each: those from the
 * first-th on, up to (not including) the until-th. */
static int post_chunks(int recv, char *base, size_t len, size_t chunk, int peer, MPI_Comm comm,
                       MPI_Request *reqs, int first, int until) {
  int n = chunks_of(len, chunk), err = MPI_SUCCESS;
  size_t piece = n > 1 ? chunk : len;
  if (until < n) n = until;
  for (int c = first; c < n && err == MPI_SUCCESS; c++) {
    size_t off = (size_t)c * piece, bytes = len - off < piece ? len - off : piece;
    err = recv ? PMPI_Irecv(base + off, (int)bytes, MPI_BYTE, peer, TAG_TNBC_A2A, comm, &reqs[c])
               : PMPI_Isend(base + off, (int)bytes, MPI_BYTE, peer, TAG_TNBC_A2A, comm, &reqs[c]);
  }
  return err;
}

/* The sends' chunks [first, until) to every destination. */
static int post_sends(const struct a2a_args *a, MPI_Request *sreqs, const int *sbase, int p,
                      int me, int first, int until) {
  const struct a2a_layout *l = a->lay;
  int err = MPI_SUCCESS;
  for (int k = 1; k < p && err == MPI_SUCCESS; k++) {
    int dst = (me + k) % p;
    err = post_chunks(0, (char *)a->send + l->sdispl[dst], l->scount[dst], a->chunk, dst, a->pcomm,
                      sreqs + sbase[dst], first, until);
  }
  return err;
}

/* Where each destination's send requests start (sbase, p entries); their number. */
static int send_layout(const struct a2a_layout *l, int p, int me, size_t chunk, int *sbase) {
  int ns = 0;
  for (int r = 0; r < p; r++) {
    sbase[r] = ns;
    ns += r == me ? 0 : chunks_of(l->scount[r], chunk);
  }
  return ns;
}

static void self_block(const struct a2a_args *a, int me) {
  const struct a2a_layout *l = a->lay;
  memcpy(a->recv + l->rdispl[me], a->send + l->sdispl[me], l->rcount[me]);
  block_in(a, me);
}

static int a2a_task(const void *args) {
  const struct a2a_args *a = args;
  const struct a2a_layout *l = a->lay;
  int p, me, err = MPI_SUCCESS;
  PMPI_Comm_size(a->pcomm, &p);
  PMPI_Comm_rank(a->pcomm, &me);
  /* Requests: the receives' chunks by source (rbase), then the sends' by destination
   * (sbase); source of each receive request, its block's chunks still missing. */
  int *rbase = malloc(sizeof(int) * 3 * ((size_t)p + 1));
  int *sbase = rbase ? rbase + p + 1 : NULL, *left = rbase ? sbase + p + 1 : NULL;
  int nr = 0, ns = 0;
  for (int r = 0; rbase && r < p; r++) {
    rbase[r] = nr;
    left[r] = r == me ? 0 : chunks_of(l->rcount[r], a->chunk);
    nr += left[r];
  }
  if (rbase) ns = send_layout(l, p, me, a->chunk, sbase);
  int nreq = nr + ns > 1 ? nr + ns : 1;
  MPI_Request *reqs = malloc(sizeof *reqs * (size_t)nreq);
  int *done = malloc(sizeof *done * (size_t)nreq), *source = malloc(sizeof *source * (size_t)nreq);
  /* (statuses, not MPI_STATUSES_IGNORE: GCC 12 takes the host's declaration for an
   * array it would overflow) */
  MPI_Status *statuses = malloc(sizeof *statuses * (size_t)nreq);
  if (!rbase || !reqs || !done || !source || !statuses) {
    err = MPI_ERR_NO_MEM;
    goto out;
  }
  for (int i = 0; i < nreq; i++) reqs[i] = MPI_REQUEST_NULL;
  for (int r = 0; r < p; r++)
    for (int c = 0; c < left[r]; c++) source[rbase[r] + c] = r;
  /* receives in the order programs read their blocks in: the order file's, else
   * address order (programs mostly read block 0 first) */
  for (int k = 0; k < p && err == MPI_SUCCESS; k++) {
    int src = l->order[k];
    if (src != me)
      err = post_chunks(1, a->recv + l->rdispl[src], l->rcount[src], a->chunk, src, a->pcomm,
                        reqs + rbase[src], 0, INT_MAX);
  }
  int sending = !a->turn || a->first; /* (the others when the first is done) */
  int sends_later = mcoll__cfg.TNBC_SENDS_LATER != 0;
  MPI_Request *sreqs = reqs + nr;
  int from = 0; /* (the first chunks the caller posted already) */
  if (a->early) {
    memcpy(sreqs, a->early, sizeof *sreqs * (size_t)ns);
    free(a->early);
    from = a->early_chunks;
  }
  if (sending && !sends_later && err == MPI_SUCCESS)
    err = post_sends(a, sreqs, sbase, p, me, from, INT_MAX);
  /* Posted on the caller's thread (post_how's start_here); the rest, copies included,
   * on the progress thread: the call returns now. The sends too by default: with
   * MPICH's UCX over TCP an MPI_Isend of a block writes it at the wire's pace. */
  mcoll__fiber_yield();
  if (sending && sends_later && err == MPI_SUCCESS) err = post_sends(a, sreqs, sbase, p, me, from, INT_MAX);
  if (sending) mcoll__tnbc_mark(a->call, MCOLL_TNBC_AT_SENDS_POSTED);
  /* The rank's own block: at once, or, ordered, once the blocks read before it are in. */
  int ahead = 0;
  for (int s = 0; a->turn && s < p; s++) ahead += s != me && l->rcount[s] && l->rank_of[s] < l->rank_of[me];
  int self_done = 0;
  int recvs_done = nr == 0, sends_done = ns == 0, released = 0;
  while (err == MPI_SUCCESS && !(recvs_done && sends_done && self_done)) {
    int n = 0, moved = 0;
    if (!sending &&
        atomic_load_explicit(a->turn->counter, memory_order_acquire) > a->slot) {
      err = post_sends(a, sreqs, sbase, p, me, 0, INT_MAX);
      mcoll__tnbc_mark(a->call, MCOLL_TNBC_AT_SENDS_POSTED);
      sending = moved = 1;
    }
    if (!self_done && !ahead) {
      self_block(a, me);
      self_done = moved = 1;
    }
    if (!recvs_done && err == MPI_SUCCESS) {
      err = PMPI_Testsome(nr, reqs, &n, done, statuses);
      if (n == MPI_UNDEFINED) {
        recvs_done = 1;
        mcoll__tnbc_mark(a->call, MCOLL_TNBC_AT_ALL_IN);
      } else if (n > 0) {
        /* the blocks whose last chunk came (several at once: published in read order) */
        int m = 0;
        for (int i = 0; i < n; i++) {
          int src = source[done[i]];
          if (a->chunk_subs) chunk_in(a, src, done[i] - rbase[src]);
          if (--left[src] == 0) done[m++] = src;
        }
        if (m) mcoll__tnbc_mark(a->call, MCOLL_TNBC_AT_FIRST_IN);
        for (int i = 1; i < m; i++)
          for (int j = i; j > 0 && l->rank_of[done[j - 1]] > l->rank_of[done[j]]; j--) {
            int t = done[j];
            done[j] = done[j - 1];
            done[j - 1] = t;
          }
        for (int i = 0; i < m; i++) {
          if (!self_done && l->rank_of[done[i]] > l->rank_of[me]) {
            self_block(a, me); /* (its place in the read order) */
            self_done = 1;
          }
          block_in(a, done[i]);
          ahead -= l->rank_of[done[i]] < l->rank_of[me];
        }
        moved = 1;
      }
    }
    if (sending && !sends_done && err == MPI_SUCCESS) {
      err = PMPI_Testall(ns, sreqs, &sends_done, statuses);
      if (sends_done) {
        mcoll__tnbc_mark(a->call, MCOLL_TNBC_AT_SENDS_DONE);
        if (a->turn && a->first) atomic_fetch_add_explicit(a->turn->counter, 1, memory_order_release);
        moved = 1;
      }
    }
    if (sends_done && self_done && !released) {
      mcoll__tnbc_sent(a->call, 0, SIZE_MAX / 2); /* (the send buffer is the application's again) */
      released = 1;
    }
    if (!moved) mcoll__fiber_yield();
  }
out:
  free(rbase);
  free(reqs);
  free(done);
  free(source);
  free(statuses);
  free(a->lay);
  return err;
}

static int post(struct mcoll_tnbc_call *call, MPI_Comm comm, const char *send, int p,
                const size_t *scount, const size_t *sdispl, const size_t *rcount,
                const size_t *rdispl, const char *edges) {
  struct private_comm *pc = private_comm(comm);
  struct a2a_layout *lay = malloc(sizeof *lay + (4 * sizeof(size_t) + 2 * sizeof(int)) * (size_t)p);
  if (!pc || !lay) {
    free(lay);
    return MPI_ERR_INTERN;
  }
  lay->scount = (size_t *)(lay + 1);
  lay->sdispl = lay->scount + p;
  lay->rcount = lay->sdispl + p;
  lay->rdispl = lay->rcount + p;
  lay->order = (int *)(lay->rdispl + p);
  lay->rank_of = lay->order + p;
  memcpy(lay->scount, scount, sizeof(size_t) * (size_t)p);
  memcpy(lay->sdispl, sdispl, sizeof(size_t) * (size_t)p);
  memcpy(lay->rcount, rcount, sizeof(size_t) * (size_t)p);
  memcpy(lay->rdispl, rdispl, sizeof(size_t) * (size_t)p);
  struct a2a_args a = {call, edges, send, mcoll__tnbc_target(call), lay, pc->dup, NULL, 0, 0,
                       mcoll__cfg.TNBC_CHUNK > 0 ? (size_t)mcoll__cfg.TNBC_CHUNK : 0, NULL, 0, 0};
  /* (each chunk a sub-message: the receives are the chunks, so each one published is
   * one whole sub-message) */
  if (a.chunk && mcoll__cfg.TNBC_PUBLISH_CHUNKS) a.chunk_subs = mcoll__tnbc_split_subs(call, rdispl, a.chunk);
  if (!mcoll__tnbc_ordering ||
      !schedule_order(call, comm, pc, p, lay->order, &a.turn, &a.slot, &a.first))
    for (int k = 0; k < p; k++) lay->order[k] = k;
  for (int k = 0; k < p; k++) lay->rank_of[lay->order[k]] = k;
  /* TNBC_SENDS_FIRST: the first bytes of each send go now, before the pages are
   * protected and the task starts: the wire starts as a blocking call's would, while
   * the caller's cost stays small (a host may write a send into its socket inside
   * MPI_Isend: Open MPI's TCP an eager one, MPICH's UCX any); the task posts the
   * rest. Not ordered calls, whose node sends in turn. The send data cannot change
   * meanwhile: the caller has not returned, and its pages are read-only before it does. */
  size_t first_bytes = mcoll__cfg.TNBC_SENDS_FIRST > 0 ? (size_t)mcoll__cfg.TNBC_SENDS_FIRST : 0;
#ifdef MPICH_VERSION
  /* (MPICH's UCX over TCP writes even one chunk at the wire's pace inside MPI_Isend:
   * 1 ms of the call, measured; so none by default) */
  if (!mcoll__cfg.user_set[MCOLL_PARAM_TNBC_SENDS_FIRST]) first_bytes = 0;
#endif
  int *sbase = first_bytes && !a.turn ? malloc(sizeof *sbase * (size_t)p) : NULL;
  if (sbase) {
    int me;
    PMPI_Comm_rank(pc->dup, &me);
    int ns = send_layout(lay, p, me, a.chunk, sbase);
    a.early_chunks = a.chunk ? (int)((first_bytes + a.chunk - 1) / a.chunk) : 1;
    a.early = malloc(sizeof *a.early * (size_t)(ns ? ns : 1));
    for (int i = 0; a.early && i < ns; i++) a.early[i] = MPI_REQUEST_NULL;
    if (a.early && post_sends(&a, a.early, sbase, p, me, 0, a.early_chunks) != MPI_SUCCESS) {
      free(lay);
      free(sbase);
      free(a.early);
      return MPI_ERR_INTERN;
    }
    free(sbase);
  }
  /* SENDS_LATER 2: the receives too are posted by the progress thread (the caller
   * only protects, enqueues and returns) */
  return mcoll__tnbc_post_how(call, comm, a2a_task, &a, sizeof a, mcoll__cfg.TNBC_SENDS_LATER < 2);
}

int mcoll__tnbc_alltoallv_post(struct mcoll_tnbc_call *call, MPI_Comm comm, const char *send,
                               int p, const size_t *scount, const size_t *sdispl,
                               const size_t *rcount, const size_t *rdispl, const char *edges) {
  return post(call, comm, send, p, scount, sdispl, rcount, rdispl, edges);
}

void mcoll__tnbc_pack_edges(char *edges, const char *buf, int p, const size_t *count,
                            const size_t *displ) {
  enum { E = MCOLL_TNBC_EDGE };
  for (int r = 0; r < p; r++) {
    size_t edge = count[r] < E ? count[r] : E;
    memcpy(edges + (size_t)r * 2 * E, buf + displ[r], edge);
    memcpy(edges + (size_t)r * 2 * E + 2 * E - edge, buf + displ[r] + count[r] - edge, edge);
  }
}

void mcoll__tnbc_put_block_edges(char *buf, const char *edges, int p, const size_t *count,
                                 const size_t *displ) {
  enum { E = MCOLL_TNBC_EDGE };
  for (int r = 0; r < p; r++) {
    size_t edge = count[r] < E ? count[r] : E;
    memcpy(buf + displ[r], edges + (size_t)r * 2 * E, edge);
    memcpy(buf + displ[r] + count[r] - edge, edges + (size_t)r * 2 * E + 2 * E - edge, edge);
  }
}

int mcoll__tnbc_alltoall_post(struct mcoll_tnbc_call *call, MPI_Comm comm, const char *send,
                              size_t block, const char *edges) {
  int p = 0;
  PMPI_Comm_size(comm, &p);
  size_t *v = malloc(2 * sizeof *v * (size_t)p);
  if (!v) return MPI_ERR_NO_MEM;
  for (int i = 0; i < p; i++) {
    v[i] = block;
    v[p + i] = (size_t)i * block;
  }
  int err = post(call, comm, send, p, v, v + p, v, v + p, edges);
  free(v);
  return err;
}
