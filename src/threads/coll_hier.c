/* Two-level collectives of a communicator that spans several processes: the ranks of
 * each process meet in place (coll_local.c: they read and write each other's buffers,
 * no staging area), and one leader thread per process exchanges with the other
 * processes' leaders through the runtime's messages (the host MPI). Processes are
 * ordered by their lowest rank in the communicator; a process's leader is its lowest
 * rank, or the root in the root's process. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

/* Tags of the leaders' messages, in the collective context: above the blocking
 * message algorithms' (coll.c), below the non-blocking ones' (coll_nbc.c). */
enum { HTAG_BARRIER = 16, HTAG_BCAST, HTAG_REDUCE, HTAG_ALLREDUCE, HTAG_ALLGATHER, HTAG_GATHER,
       HTAG_SCATTER, HTAG_AGREE, HTAG_ALLTOALL, HTAG_SCAN };

struct thr_hier {
  int nprocs, me_proc; /* processes with ranks in the communicator; this one's index */
  int *first;          /* process p's ranks: members[first[p] .. first[p + 1]) */
  int *members;        /* comm ranks by process, ascending within one */
  int *proc_of;        /* comm rank -> process index */
  int *local_of;       /* comm rank -> its index among its process's ranks */
  int contiguous;      /* each process's ranks are one run of consecutive comm ranks */
  int oversubscribed;  /* on some process's node the thread ranks outnumber the CPUs */
  unsigned reported;   /* MCOLL_THREADS_HIER=2: the collectives named on stderr already */
  struct thr_comm local; /* this process's ranks (rank = index among them) */
  struct thr_local_group *group;
};

/* MCOLL_THREADS_HIER=0: communicators across processes keep the message algorithms;
 * 2: rank 0 of each communicator that takes two levels says so on stderr (tests);
 * 3: only those whose context is a multiple of 4 take two levels (world and every other
 * communicator made, e.g. the first of two dups: A/B inside one job, hierbench.c), for
 * every collective and size; 4: as 2, and every collective and size takes two levels
 * (tests of the paths an oversubscribed node would not take). */
static int hier_mode(void)
{
  static atomic_int mode = -1;
  int m = atomic_load_explicit(&mode, memory_order_relaxed);
  if (m < 0) {
    const char *env = getenv("MCOLL_THREADS_HIER");
    m = env && *env ? atoi(env) : 1;
    atomic_store_explicit(&mode, m, memory_order_relaxed);
  }
  return m;
}

static struct thr_hier *build(struct thr_comm *c)
{
  int n = c->size, threads = thr_proc.threads;
  struct thr_hier *h = thr_calloc(1, sizeof *h);
  h->proc_of = thr_malloc((size_t)n * sizeof(int));
  h->local_of = thr_malloc((size_t)n * sizeof(int));
  h->members = thr_malloc((size_t)n * sizeof(int));
  h->first = thr_calloc((size_t)n + 1, sizeof(int));
  int *host_of = thr_malloc((size_t)n * sizeof(int)), *count = thr_calloc((size_t)n, sizeof(int));
  for (int i = 0; i < n; i++) { /* (processes numbered in order of first appearance) */
    int host = c->world[i] / threads, p = 0;
    while (p < h->nprocs && host_of[p] != host)
      p++;
    if (p == h->nprocs)
      host_of[h->nprocs++] = host;
    h->proc_of[i] = p;
    h->local_of[i] = count[p]++;
  }
  for (int p = 0; p < h->nprocs; p++)
    h->first[p + 1] = h->first[p] + count[p];
  h->contiguous = 1;
  for (int i = 0; i < n; i++) {
    int p = h->proc_of[i];
    h->members[h->first[p] + h->local_of[i]] = i;
    if (i > 0 && p != h->proc_of[i - 1] && h->local_of[i] != 0)
      h->contiguous = 0; /* (a process's ranks resume after another's) */
  }
  h->me_proc = h->proc_of[c->rank];
  int mine = count[h->me_proc];
  h->local = (struct thr_comm){.ctx = c->ctx + 1, /* (odd: no in-process communicator's) */
                               .size = mine, .rank = h->local_of[c->rank],
                               .world = thr_malloc((size_t)mine * sizeof(int)), .locality = 1};
  for (int k = 0; k < mine; k++)
    h->local.world[k] = c->world[h->members[h->first[h->me_proc] + k]];
  h->group = thr_local_group_of(&h->local);
  free(host_of);
  free(count);
  return h;
}

/* Whether any rank's node is oversubscribed, the same answer at every rank (a choice
 * of algorithm must be): rank 0 gathers and answers, by messages. */
static int agree_oversubscribed(struct thr_rank *r, struct thr_comm *c)
{
  int mine = thr_proc.threads * thr_proc.node_processes > thr_proc.cpus, any = mine;
  if (c->rank == 0) {
    for (int i = 1; i < c->size; i++) {
      thr_recv(r, c, &mine, 1, MPI_INT, i, HTAG_AGREE);
      any |= mine;
    }
    for (int i = 1; i < c->size; i++)
      thr_send(r, c, &any, 1, MPI_INT, i, HTAG_AGREE);
  } else {
    thr_send(r, c, &mine, 1, MPI_INT, 0, HTAG_AGREE);
    thr_recv(r, c, &any, 1, MPI_INT, 0, HTAG_AGREE);
  }
  return any;
}

static int forced(void)
{
  return hier_mode() >= 3; /* (the A/B bench and the tests: two levels everywhere) */
}

static int reports(void)
{
  return hier_mode() == 2 || hier_mode() == 4;
}

/* Where thread ranks share cores, each step in place waits until every rank of the
 * process has been scheduled, while the message path's eager sends let ranks run calls
 * ahead. There only reduce, gather(v) and allreduce take two levels: reduce at every
 * size, gather below HIER_GATHER_BYTES a block (gatherv at every size: only the root
 * knows the sizes), allreduce from HIER_ALLREDUCE_BYTES or between two processes; the
 * others measured slower than the message path through the node's rings, or no faster
 * (bench/records/threads-11). The answer depends only on what every rank knows alike. */
enum { HIER_GATHER_BYTES = 65536, HIER_ALLREDUCE_BYTES = 32768 };

int thr_hier_takes(const struct thr_hier *h, enum thr_hier_coll coll, size_t bytes)
{
  if (coll == THR_HIER_SCAN && !h->contiguous)
    return 0;
  if (!h->oversubscribed || forced())
    return 1;
  switch (coll) {
  case THR_HIER_REDUCE:
  case THR_HIER_GATHERV: return 1;
  case THR_HIER_GATHER: return bytes < HIER_GATHER_BYTES;
  case THR_HIER_ALLREDUCE: return bytes >= HIER_ALLREDUCE_BYTES || h->nprocs == 2;
  default: return 0;
  }
}

/* (Every rank of c calls it in the same collective call, the first on c.) */
struct thr_hier *thr_hier_of(struct thr_rank *r, struct thr_comm *c)
{
  if (c->hier_state == 0) {
    c->hier_state = -1;
    if (hier_mode() > 0 && !(hier_mode() == 3 && c->ctx % 4 != 0) && c->size > 1 &&
        !thr_local_group_of(c)) {
      struct thr_hier *h = build(c);
      /* (one rank per process: nothing to do in place) */
      if (h->nprocs < c->size) {
        c->hier = h;
        c->hier_state = 1;
        h->oversubscribed = agree_oversubscribed(r, c);
        if (reports() && c->rank == 0) { /* (one write: lines of processes mix) */
          char line[256];
          int at = snprintf(line, sizeof line, "mcoll threads: two levels: %d ranks in %d "
                            "processes (", c->size, h->nprocs);
          for (int p = 0; p < h->nprocs && at < 200; p++)
            at += snprintf(line + at, sizeof line - (size_t)at, "%s%d", p ? " " : "",
                           h->first[p + 1] - h->first[p]);
          snprintf(line + at, sizeof line - (size_t)at, "), %s\n",
                   h->contiguous ? "contiguous" : "interleaved");
          fputs(line, stderr);
        }
      } else {
        c->hier = h;
        thr_hier_release(c);
      }
    }
  }
  return c->hier_state > 0 ? c->hier : NULL;
}

void thr_hier_release(struct thr_comm *c)
{
  struct thr_hier *h = c->hier;
  if (!h)
    return;
  thr_local_group_release(&h->local);
  free(h->local.world);
  free(h->first), free(h->members), free(h->proc_of), free(h->local_of);
  free(h);
  c->hier = NULL;
}

int thr_hier_folds_in_order(const struct thr_hier *h, MPI_Op op)
{
  int commutative = 0;
  PMPI_Op_commutative(op, &commutative);
  return commutative || h->contiguous;
}

/* The comm rank of process p's leader; root < 0: no root. */
static int leader_of(const struct thr_hier *h, int p, int root)
{
  return root >= 0 && h->proc_of[root] == p ? root : h->members[h->first[p]];
}

/* This rank's index among its process's ranks of the leader of a call rooted at root. */
static int local_leader(const struct thr_hier *h, int root)
{
  return root >= 0 && h->proc_of[root] == h->me_proc ? h->local_of[root] : 0;
}

/* Send to one leader and receive from another at once (no order between them). */
static void leaders_sendrecv(struct thr_rank *r, struct thr_comm *c, const void *sbuf, int scount,
                             MPI_Datatype stype, int to, void *rbuf, int rcount,
                             MPI_Datatype rtype, int from, int tag)
{
  struct thr_request *recv = thr_irecv(r, c, c->ctx + 1, rbuf, rcount, rtype, from, tag);
  struct thr_request *send = thr_isend(r, c, c->ctx + 1, sbuf, scount, stype, to, tag);
  thr_wait(r, recv, MPI_STATUS_IGNORE);
  thr_wait(r, send, MPI_STATUS_IGNORE);
}

/* MCOLL_THREADS_HIER=2: rank 0 names each collective the first time it takes two
 * levels on the communicator (the tests check which calls took this path). */
enum { NOTE_BARRIER, NOTE_BCAST, NOTE_REDUCE, NOTE_ALLREDUCE, NOTE_ALLGATHER, NOTE_GATHER,
       NOTE_SCATTER, NOTE_GATHERV, NOTE_SCATTERV, NOTE_ALLTOALL, NOTE_ALLGATHERV, NOTE_SCAN,
       NOTE_EXSCAN, NOTE_ALLTOALLV, NOTE_ALLTOALLW };

static void note(struct thr_comm *c, struct thr_hier *h, int which, const char *name)
{
  if (!reports() || c->rank != 0 || (h->reported >> which & 1))
    return;
  h->reported |= 1u << which;
  char line[96]; /* (one write: lines of processes mix) */
  snprintf(line, sizeof line, "mcoll threads: two-level %s on %d ranks\n", name, c->size);
  fputs(line, stderr);
}

/* All arrive in place, the leaders meet (dissemination), all leave in place. */
void thr_hier_barrier(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h)
{
  note(c, h, NOTE_BARRIER, "barrier");
  thr_local_barrier(h->group, &h->local);
  if (h->local.rank == 0) {
    int P = h->nprocs, me = h->me_proc;
    for (int k = 1; k < P; k <<= 1)
      leaders_sendrecv(r, c, NULL, 0, MPI_BYTE, leader_of(h, (me + k) % P, -1), NULL, 0,
                       MPI_BYTE, leader_of(h, (me - k + P) % P, -1), HTAG_BARRIER);
  }
  thr_local_barrier(h->group, &h->local);
}

/* Binomial tree over the leaders from the root's process, then each process's ranks
 * copy from their leader's buffer. */
static void leaders_bcast(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h, void *buf,
                          int count, MPI_Datatype type, int root_proc, int root)
{
  int P = h->nprocs, rel = (h->me_proc - root_proc + P) % P, mask = 1;
  while (mask < P) {
    if (rel & mask) {
      thr_recv(r, c, buf, count, type, leader_of(h, (rel - mask + root_proc) % P, root),
               HTAG_BCAST);
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (rel + mask < P)
      thr_send(r, c, buf, count, type, leader_of(h, (rel + mask + root_proc) % P, root),
               HTAG_BCAST);
}

/* Process p's parent and children in leaders_bcast's tree (parent -1 at the root's). */
static int tree_of(const struct thr_hier *h, int root_proc, int *parent, int *children)
{
  int P = h->nprocs, rel = (h->me_proc - root_proc + P) % P, mask = 1, n = 0;
  *parent = -1;
  while (mask < P) {
    if (rel & mask) {
      *parent = (rel - mask + root_proc) % P;
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (rel + mask < P)
      children[n++] = (rel + mask + root_proc) % P;
  return n;
}

/* Bytes per segment of a pipelined bcast (MCOLL_THREADS_BCAST_SEGMENT; 0: never
 * pipelined); a bcast is pipelined from two segments on. Off by default: 64-256 KiB
 * segments measured no faster than one message at 256 KiB-4 MiB (each segment crossing
 * processes costs an envelope and a copy at the receiver, runtime.c). */
enum { HIER_BCAST_SEGMENT = 0 };

static long bcast_segment(void)
{
  static atomic_long segment = -1;
  long s = atomic_load_explicit(&segment, memory_order_relaxed);
  if (s < 0) {
    const char *env = getenv("MCOLL_THREADS_BCAST_SEGMENT");
    s = env && *env ? atol(env) : HIER_BCAST_SEGMENT;
    atomic_store_explicit(&segment, s, memory_order_relaxed);
  }
  return s;
}

/* A large bcast in segments of bytes (the same cut at every rank, whatever its type:
 * a rank whose type is not one run of bytes works on a packed copy). The root's
 * process copies from the root's buffer whole while the root sends the segments; in
 * every other process the leader forwards segment k and its ranks copy it while
 * segment k + 1 arrives. */
static void bcast_pipelined(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                            void *buf, int count, MPI_Datatype type, int root, long bytes,
                            long segment)
{
  int root_proc = h->proc_of[root], lead = local_leader(h, root), nseg = (int)((bytes + segment - 1) / segment);
  if (h->me_proc == root_proc && c->rank != root) {
    thr_local_bcast(h->group, &h->local, buf, count, type, lead);
    return;
  }
  int contiguous = thr_type_is_contiguous(type, count), position = 0;
  char *run = contiguous ? buf : thr_malloc((size_t)bytes);
  if (!contiguous && c->rank == root)
    PMPI_Pack(buf, count, type, run, (int)bytes, &position, MPI_COMM_SELF);
  if (h->local.rank != lead) { /* (a process other than the root's) */
    for (int k = 0; k < nseg; k++)
      thr_local_bcast(h->group, &h->local, run + k * segment,
                      (int)(k < nseg - 1 ? segment : bytes - k * segment), MPI_BYTE, lead);
  } else {
    int parent, *children = thr_malloc((size_t)h->nprocs * sizeof(int));
    int nchildren = tree_of(h, root_proc, &parent, children), nsends = 0;
    struct thr_request **recvs = thr_malloc((size_t)nseg * sizeof *recvs);
    struct thr_request **sends = thr_malloc((size_t)(nseg * nchildren + 1) * sizeof *sends);
    for (int k = 0; parent >= 0 && k < nseg; k++)
      recvs[k] = thr_irecv(r, c, c->ctx + 1, run + k * segment,
                           (int)(k < nseg - 1 ? segment : bytes - k * segment), MPI_BYTE,
                           leader_of(h, parent, root), HTAG_BCAST);
    unsigned base = 0;
    if (parent < 0)
      base = thr_local_bcast_post(h->group, &h->local, buf, count, type);
    for (int k = 0; k < nseg; k++) {
      int len = (int)(k < nseg - 1 ? segment : bytes - k * segment);
      if (parent >= 0)
        thr_wait(r, recvs[k], MPI_STATUS_IGNORE);
      for (int j = 0; j < nchildren; j++)
        sends[nsends++] = thr_isend(r, c, c->ctx + 1, run + k * segment, len, MPI_BYTE,
                                    leader_of(h, children[j], root), HTAG_BCAST);
      if (parent >= 0) /* (this process's ranks copy segment k while k + 1 arrives) */
        thr_local_bcast_wait(h->group, &h->local,
                             thr_local_bcast_post(h->group, &h->local, run + k * segment, len,
                                                  MPI_BYTE));
    }
    for (int i = 0; i < nsends; i++)
      thr_wait(r, sends[i], MPI_STATUS_IGNORE);
    if (parent < 0)
      thr_local_bcast_wait(h->group, &h->local, base);
    free(children), free(recvs), free(sends);
  }
  if (!contiguous && c->rank != root) {
    position = 0;
    PMPI_Unpack(run, (int)bytes, &position, buf, count, type, MPI_COMM_SELF);
  }
  if (!contiguous)
    free(run);
}

void thr_hier_bcast(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h, void *buf,
                    int count, MPI_Datatype type, int root)
{
  note(c, h, NOTE_BCAST, "bcast");
  long bytes = (long)thr_type_bytes(type, count), segment = bcast_segment();
  if (segment > 0 && bytes >= 2 * segment) {
    bcast_pipelined(r, c, h, buf, count, type, root, bytes, segment);
    return;
  }
  int lead = local_leader(h, root);
  if (h->local.rank != lead) {
    thr_local_bcast(h->group, &h->local, buf, count, type, lead);
    return;
  }
  /* (the root's process: its ranks copy while the root sends to the other processes) */
  unsigned base = 0;
  if (c->rank == root)
    base = thr_local_bcast_post(h->group, &h->local, buf, count, type);
  leaders_bcast(r, c, h, buf, count, type, h->proc_of[root], root);
  if (c->rank != root)
    base = thr_local_bcast_post(h->group, &h->local, buf, count, type);
  thr_local_bcast_wait(h->group, &h->local, base);
}

/* The process's ranks fold into part at their leader (in rank order), in place. */
static void local_part(struct thr_hier *h, const void *input, void *part, int count,
                       MPI_Datatype type, MPI_Op op, int lead)
{
  thr_local_reduce(h->group, &h->local, input, part, count, type, op, lead);
}

/* The fold over the leaders of the processes base, base + 1, ..., base + n - 1 (mod P),
 * in that order, by a binomial tree: after step mask the leader at relative index x
 * holds the fold of [x, x + mask); it receives [x + mask, x + 2 mask) from x + mask
 * into spare and folds it after its own (spare = acc op spare, then the two swap), so
 * the order is kept for any operation. Returns the result at base's leader (acc or
 * spare), NULL elsewhere (sent on). */
static void *tree_fold(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h, void *acc,
                       void *spare, int count, MPI_Datatype type, MPI_Op op, int base, int n,
                       int root, int tag)
{
  int P = h->nprocs, rel = (h->me_proc - base + P) % P;
  for (int mask = 1; mask < n; mask <<= 1) {
    if (rel & mask) {
      thr_send(r, c, acc, count, type, leader_of(h, (base + rel - mask) % P, root), tag);
      return NULL;
    }
    if (rel + mask < n) {
      thr_recv(r, c, spare, count, type, leader_of(h, (base + rel + mask) % P, root), tag);
      thr_fold(acc, spare, count, type, op);
      void *swap = acc;
      acc = spare;
      spare = swap;
    }
  }
  return acc;
}

/* Only when thr_hier_folds_in_order. A commutative operation: a binomial tree over the
 * leaders from the root's process. Otherwise (each process's ranks consecutive, so
 * process order is rank order) the order is kept: a tree over the processes from the
 * root's to the last, rooted at the root's, and one over those before it, rooted at the
 * first, whose result the root folds in front of its own. */
void thr_hier_reduce(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                     const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                     int root)
{
  note(c, h, NOTE_REDUCE, "reduce");
  int lead = local_leader(h, root), leader = h->local.rank == lead;
  const void *input = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
  void *part = leader ? thr_alloc_typed(count, type) : NULL;
  local_part(h, input, part, count, type, op, lead);
  if (!leader)
    return;
  int root_proc = h->proc_of[root], P = h->nprocs, commutative = 0, me = h->me_proc;
  PMPI_Op_commutative(op, &commutative);
  void *spare = thr_alloc_typed(count, type), *acc;
  if (commutative || root_proc == 0) {
    acc = tree_fold(r, c, h, part, spare, count, type, op, root_proc, P, root, HTAG_REDUCE);
  } else if (me < root_proc) {
    acc = tree_fold(r, c, h, part, spare, count, type, op, 0, root_proc, root, HTAG_REDUCE);
    if (acc) /* (the first process's leader: the processes before the root's) */
      thr_send(r, c, acc, count, type, root, HTAG_REDUCE);
    acc = NULL;
  } else {
    acc = tree_fold(r, c, h, part, spare, count, type, op, root_proc, P - root_proc, root,
                    HTAG_REDUCE);
    if (acc) {
      void *before = acc == part ? spare : part;
      thr_recv(r, c, before, count, type, leader_of(h, 0, root), HTAG_REDUCE);
      thr_fold(before, acc, count, type, op); /* acc = before op acc */
    }
  }
  if (acc)
    thr_copy_typed(rbuf, count, type, acc, count, type);
  thr_free_typed(part, type);
  thr_free_typed(spare, type);
}

/* The leaders' allreduce of their parts, in process order, into buf. */
static void leaders_allreduce(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                              void *buf, int count, MPI_Datatype type, MPI_Op op)
{
  int P = h->nprocs, me = h->me_proc;
  void *other = thr_alloc_typed(count, type);
  if ((P & (P - 1)) == 0) {
    /* Recursive doubling: buf holds the fold of processes [me & ~(mask - 1), + mask),
     * the partner's the adjacent run; the lower run goes first. */
    int commutative = 0;
    PMPI_Op_commutative(op, &commutative);
    for (int mask = 1; mask < P; mask <<= 1) {
      int partner = me ^ mask, peer = leader_of(h, partner, -1);
      leaders_sendrecv(r, c, buf, count, type, peer, other, count, type, peer, HTAG_ALLREDUCE);
      if (partner < me || commutative) {
        thr_fold(other, buf, count, type, op);
      } else {
        thr_fold(buf, other, count, type, op);
        thr_copy_typed(buf, count, type, other, count, type);
      }
    }
  } else { /* a binomial fold into the first process's leader, then a binomial bcast */
    void *acc = tree_fold(r, c, h, buf, other, count, type, op, 0, P, -1, HTAG_ALLREDUCE);
    if (acc && acc != buf)
      thr_copy_typed(buf, count, type, acc, count, type);
    leaders_bcast(r, c, h, buf, count, type, 0, -1);
  }
  thr_free_typed(other, type);
}

/* Parts at each process's first rank (into its receive buffer), the leaders' allreduce,
 * then the others copy the result from their leader's buffer. */
void thr_hier_allreduce(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                        const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op)
{
  note(c, h, NOTE_ALLREDUCE, "allreduce");
  const void *input = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
  local_part(h, input, rbuf, count, type, op, 0);
  if (h->local.rank == 0)
    leaders_allreduce(r, c, h, rbuf, count, type, op);
  thr_local_bcast(h->group, &h->local, rbuf, count, type, 0);
}

/* The blocks of process p's ranks in a receive layout, as one type. */
static MPI_Datatype blocks_of(const struct thr_hier *h, int p, const int *counts,
                              const int *displs, MPI_Datatype type)
{
  int from = p < 0 ? 0 : h->first[p], to = p < 0 ? h->first[h->nprocs] : h->first[p + 1];
  int nblocks = to - from, *lens = thr_malloc((size_t)nblocks * 2 * sizeof(int)), *at = lens + nblocks;
  for (int k = 0; k < nblocks; k++) {
    int rank = p < 0 ? k : h->members[from + k];
    lens[k] = counts[rank];
    at[k] = displs[rank];
  }
  MPI_Datatype blocks;
  PMPI_Type_indexed(nblocks, lens, at, type, &blocks);
  PMPI_Type_commit(&blocks);
  free(lens);
  return blocks;
}

/* counts NULL: regular (block j at j x count). Each process's ranks write their blocks
 * into their leader's receive buffer, the leaders exchange their processes' blocks, and
 * the others copy the whole result from their leader's buffer. */
void thr_hier_allgatherv(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                         const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                         int count, const int *counts, const int *displs, MPI_Datatype rtype)
{
  note(c, h, counts ? NOTE_ALLGATHERV : NOTE_ALLGATHER, counts ? "allgatherv" : "allgather");
  int n = c->size, me = c->rank, lead = h->local.rank == 0;
  int *regular = NULL;
  if (!counts) {
    regular = thr_malloc((size_t)n * 2 * sizeof(int));
    for (int i = 0; i < n; i++)
      regular[i] = count, regular[n + i] = i * count;
    counts = regular, displs = regular + n;
  }
  if (sbuf == MPI_IN_PLACE && !lead) { /* (the leader's own block is in place already) */
    sbuf = thr_block_at(rbuf, displs[me], rtype);
    scount = counts[me];
    stype = rtype;
  }
  int mine = h->local.size, base = h->first[h->me_proc];
  int *lcounts = thr_malloc((size_t)mine * 2 * sizeof(int)), *ldispls = lcounts + mine;
  for (int k = 0; k < mine; k++)
    lcounts[k] = counts[h->members[base + k]], ldispls[k] = displs[h->members[base + k]];
  thr_local_gatherv(h->group, &h->local, sbuf, scount, stype, rbuf, 0, lcounts, ldispls, rtype, 0);
  if (lead) {
    int P = h->nprocs;
    struct thr_request **reqs = thr_malloc((size_t)(2 * P) * sizeof *reqs);
    MPI_Datatype *types = thr_malloc((size_t)P * sizeof *types);
    for (int p = 0; p < P; p++)
      types[p] = blocks_of(h, p, counts, displs, rtype);
    int nreqs = 0;
    for (int k = 1; k < P; k++) {
      int from = (h->me_proc - k + P) % P;
      reqs[nreqs++] = thr_irecv(r, c, c->ctx + 1, rbuf, 1, types[from], leader_of(h, from, -1),
                                HTAG_ALLGATHER);
    }
    for (int k = 1; k < P; k++) {
      int to = (h->me_proc + k) % P;
      reqs[nreqs++] = thr_isend(r, c, c->ctx + 1, rbuf, 1, types[h->me_proc],
                                leader_of(h, to, -1), HTAG_ALLGATHER);
    }
    for (int i = 0; i < nreqs; i++)
      thr_wait(r, reqs[i], MPI_STATUS_IGNORE);
    for (int p = 0; p < P; p++)
      PMPI_Type_free(&types[p]);
    free(types);
    free(reqs);
  }
  /* the whole layout from the leader: one run of n x count when regular and contiguous */
  if (regular && thr_type_is_contiguous(rtype, n * count)) {
    thr_local_bcast(h->group, &h->local, rbuf, n * count, rtype, 0);
  } else {
    MPI_Datatype all = blocks_of(h, -1, counts, displs, rtype);
    thr_local_bcast(h->group, &h->local, rbuf, 1, all, 0);
    PMPI_Type_free(&all);
  }
  free(lcounts);
  free(regular);
}

/* This process's place in the binomial tree over the leaders rooted at the root's
 * process (the tree of leaders_bcast): relative indices (to the root's process), its
 * subtree (relative indices [rel, rel + span)), its parent's process (-1 at the root's)
 * and its children in increasing order, child k's subtree [child[k], + child_span[k]).
 * A subtree's processes are consecutive in relative order, its root first. */
struct tree {
  int rel, span, parent, n;
  int child[32], child_span[32];
};

static int min_int(int a, int b)
{
  return a < b ? a : b;
}

static struct tree tree_at(const struct thr_hier *h, int root_proc)
{
  int P = h->nprocs, low = 1;
  struct tree t = {.rel = (h->me_proc - root_proc + P) % P, .parent = -1};
  while (low < P && !(t.rel & low))
    low <<= 1;
  if (t.rel > 0)
    t.parent = (t.rel - low + root_proc) % P;
  t.span = min_int(low, P - t.rel);
  for (int m = 1; m < low && t.rel + m < P; m <<= 1, t.n++)
    t.child[t.n] = t.rel + m, t.child_span[t.n] = min_int(m, P - t.rel - m);
  return t;
}

/* The process at a relative index. */
static int proc_at(const struct thr_hier *h, int root_proc, int rel)
{
  return (rel + root_proc) % h->nprocs;
}

/* The blocks (counts, displs of type) of the ranks of the processes at relative indices
 * [from, from + span), in that order and rank order within each, as one type. */
static MPI_Datatype subtree_blocks(const struct thr_hier *h, int root_proc, int from, int span,
                                   const int *counts, const int *displs, MPI_Datatype type)
{
  int nblocks = 0;
  for (int x = from; x < from + span; x++) {
    int p = proc_at(h, root_proc, x);
    nblocks += h->first[p + 1] - h->first[p];
  }
  int *lens = thr_malloc((size_t)nblocks * 2 * sizeof(int)), *at = lens + nblocks, k = 0;
  for (int x = from; x < from + span; x++) {
    int p = proc_at(h, root_proc, x);
    for (int i = h->first[p]; i < h->first[p + 1]; i++, k++)
      lens[k] = counts[h->members[i]], at[k] = displs[h->members[i]];
  }
  MPI_Datatype blocks;
  PMPI_Type_indexed(nblocks, lens, at, type, &blocks);
  PMPI_Type_commit(&blocks);
  free(lens);
  return blocks;
}

/* The root's messages of a gather(v) or scatter(v): one per child of the root's
 * process in the tree, that child's subtree's blocks of buf as one type, from or to its
 * leader. Scatterv (sizes set) first sends a child with children of its own the byte
 * totals of its subtree's processes (it forwards their parts). */
struct root_posts {
  int n;
  struct thr_request *reqs[64];
  MPI_Datatype types[32];
  int *sizes;
};

static struct root_posts root_post(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                                   void *buf, MPI_Datatype type, int root, const int *counts,
                                   const int *displs, int send, int sizes)
{
  int root_proc = h->proc_of[root], P = h->nprocs;
  struct tree t = tree_at(h, root_proc);
  struct root_posts posts = {.n = 0, .sizes = sizes ? thr_malloc((size_t)P * sizeof(int)) : NULL};
  for (int x = 0; sizes && x < P; x++) {
    int p = proc_at(h, root_proc, x);
    posts.sizes[x] = 0;
    for (int i = h->first[p]; i < h->first[p + 1]; i++)
      posts.sizes[x] += (int)thr_type_bytes(type, counts[h->members[i]]);
  }
  for (int k = 0; k < t.n; k++) {
    int leader = leader_of(h, proc_at(h, root_proc, t.child[k]), root);
    MPI_Datatype blocks = subtree_blocks(h, root_proc, t.child[k], t.child_span[k], counts,
                                         displs, type);
    posts.types[k] = blocks;
    if (sizes && t.child_span[k] > 1)
      posts.reqs[posts.n++] = thr_isend(r, c, c->ctx + 1, posts.sizes + t.child[k],
                                        t.child_span[k], MPI_INT, leader, HTAG_SCATTER);
    posts.reqs[posts.n++] = send ? thr_isend(r, c, c->ctx + 1, buf, 1, blocks, leader, HTAG_SCATTER)
                                 : thr_irecv(r, c, c->ctx + 1, buf, 1, blocks, leader, HTAG_GATHER);
  }
  for (int k = t.n; k < 32; k++)
    posts.types[k] = MPI_DATATYPE_NULL;
  return posts;
}

static void root_posts_wait(struct thr_rank *r, struct root_posts *posts)
{
  for (int i = 0; i < posts->n; i++)
    thr_wait(r, posts->reqs[i], MPI_STATUS_IGNORE);
  for (int k = 0; k < 32 && posts->types[k] != MPI_DATATYPE_NULL; k++)
    PMPI_Type_free(&posts->types[k]);
  free(posts->sizes);
}

/* A gather's leader in a process other than the root's: its subtree's parts in one
 * buffer (its process's ranks' blocks as bytes in rank order first, at offset 0, then
 * each child's subtree, in relative order), sent whole to its parent. own: its
 * process's bytes; sub[k]: child k's subtree's bytes. The children's parts arrive while
 * its ranks write theirs. */
struct relay {
  char *buf;
  size_t bytes;
  int n;
  struct thr_request *reqs[32];
};

static struct relay relay_post(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                               const struct tree *t, int root, size_t own, const size_t *sub,
                               int send)
{
  int root_proc = h->proc_of[root];
  struct relay y = {.bytes = own};
  for (int k = 0; k < t->n; k++)
    y.bytes += sub[k];
  y.buf = thr_malloc(y.bytes + 1);
  if (send) /* (scatter: the whole subtree's part from the parent first) */
    thr_recv(r, c, y.buf, (int)y.bytes, MPI_BYTE, leader_of(h, t->parent, root), HTAG_SCATTER);
  size_t at = own;
  for (int k = 0; k < t->n; k++) {
    int leader = leader_of(h, proc_at(h, root_proc, t->child[k]), root);
    y.reqs[y.n++] = send ? thr_isend(r, c, c->ctx + 1, y.buf + at, (int)sub[k], MPI_BYTE, leader,
                                     HTAG_SCATTER)
                         : thr_irecv(r, c, c->ctx + 1, y.buf + at, (int)sub[k], MPI_BYTE, leader,
                                     HTAG_GATHER);
    at += sub[k];
  }
  return y;
}

static void relay_finish(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                         const struct tree *t, int root, struct relay *y, int send)
{
  for (int i = 0; i < y->n; i++)
    thr_wait(r, y->reqs[i], MPI_STATUS_IGNORE);
  if (!send)
    thr_send(r, c, y->buf, (int)y->bytes, MPI_BYTE, leader_of(h, t->parent, root), HTAG_GATHER);
  free(y->buf);
}

/* Bytes of the regular blocks of the processes at relative indices [from, + span). */
static size_t regular_bytes(const struct thr_hier *h, int root_proc, int from, int span,
                            size_t block)
{
  size_t bytes = 0;
  for (int x = from; x < from + span; x++) {
    int p = proc_at(h, root_proc, x);
    bytes += block * (size_t)(h->first[p + 1] - h->first[p]);
  }
  return bytes;
}

/* relay_post for a regular gather or scatter: every rank's block is `block` bytes. */
static struct relay regular_relay_post(struct thr_rank *r, struct thr_comm *c,
                                       struct thr_hier *h, const struct tree *t, int root,
                                       size_t block, int send)
{
  size_t sub[32];
  for (int k = 0; k < t->n; k++)
    sub[k] = regular_bytes(h, h->proc_of[root], t->child[k], t->child_span[k], block);
  return relay_post(r, c, h, t, root, block * (size_t)h->local.size, sub, send);
}

/* Regular gather. The root's process writes its blocks straight into the root's receive
 * buffer. Every other process's ranks write theirs, as bytes in rank order, into a
 * buffer of their leader, which also receives its children's subtrees in the tree over
 * the leaders (binomial, from the root's process) and sends it all to its parent; the
 * root receives each of its children's messages straight into the blocks of that
 * subtree's ranks. */
void thr_hier_gather(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                     const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                     MPI_Datatype rtype, int root)
{
  note(c, h, NOTE_GATHER, "gather");
  int root_proc = h->proc_of[root], mine = h->local.size, base = h->first[h->me_proc];
  if (h->me_proc != root_proc) {
    size_t bytes = thr_type_bytes(stype, scount);
    struct tree t = tree_at(h, root_proc);
    struct relay y = {0};
    if (h->local.rank == 0)
      y = regular_relay_post(r, c, h, &t, root, bytes, 0);
    thr_local_gatherv(h->group, &h->local, sbuf, scount, stype, y.buf, (int)bytes, NULL, NULL,
                      MPI_BYTE, 0);
    if (h->local.rank == 0)
      relay_finish(r, c, h, &t, root, &y, 0);
    return;
  }
  int n = c->size, *regular = NULL;
  if (c->rank == root) {
    regular = thr_malloc((size_t)n * 2 * sizeof(int));
    for (int i = 0; i < n; i++)
      regular[i] = rcount, regular[n + i] = i * rcount;
  }
  int *lcounts = thr_malloc((size_t)mine * 2 * sizeof(int)), *ldispls = lcounts + mine;
  for (int k = 0; k < mine; k++)
    lcounts[k] = rcount, ldispls[k] = h->members[base + k] * rcount;
  if (c->rank != root) {
    thr_local_gatherv(h->group, &h->local, sbuf, scount, stype, NULL, 0, lcounts, ldispls,
                      rtype, h->local_of[root]);
    free(lcounts);
    return;
  }
  /* (the other processes' blocks arrive while this process's ranks write theirs) */
  struct root_posts posts = root_post(r, c, h, rbuf, rtype, root, regular, regular + n, 0, 0);
  thr_local_gatherv(h->group, &h->local, sbuf, scount, stype, rbuf, 0, lcounts, ldispls, rtype,
                    h->local_of[root]);
  root_posts_wait(r, &posts);
  free(lcounts), free(regular);
}

/* Regular scatter, the reverse: the root sends each of its children in the tree its
 * subtree's blocks in one message (bytes in relative then rank order); a leader keeps
 * its process's part (first), forwards each child's, and its ranks copy theirs from it;
 * the root's process copies straight from the root's send buffer. */
void thr_hier_scatter(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                      const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                      MPI_Datatype rtype, int root)
{
  note(c, h, NOTE_SCATTER, "scatter");
  int root_proc = h->proc_of[root], mine = h->local.size, base = h->first[h->me_proc];
  if (h->me_proc != root_proc) {
    size_t bytes = thr_type_bytes(rtype, rcount);
    struct tree t = tree_at(h, root_proc);
    struct relay y = {0};
    if (h->local.rank == 0)
      y = regular_relay_post(r, c, h, &t, root, bytes, 1);
    thr_local_scatterv(h->group, &h->local, y.buf, (int)bytes, NULL, NULL, MPI_BYTE, rbuf,
                       rcount, rtype, 0);
    if (h->local.rank == 0)
      relay_finish(r, c, h, &t, root, &y, 1);
    return;
  }
  int n = c->size, *lcounts = thr_malloc((size_t)mine * 2 * sizeof(int)), *ldispls = lcounts + mine;
  for (int k = 0; k < mine; k++)
    lcounts[k] = scount, ldispls[k] = h->members[base + k] * scount;
  if (c->rank != root) {
    thr_local_scatterv(h->group, &h->local, NULL, 0, lcounts, ldispls, stype, rbuf, rcount,
                       rtype, h->local_of[root]);
    free(lcounts);
    return;
  }
  int *regular = thr_malloc((size_t)n * 2 * sizeof(int));
  for (int i = 0; i < n; i++)
    regular[i] = scount, regular[n + i] = i * scount;
  struct root_posts posts = root_post(r, c, h, (void *)sbuf, stype, root, regular, regular + n,
                                      1, 0);
  thr_local_scatterv(h->group, &h->local, sbuf, 0, lcounts, ldispls, stype, rbuf, rcount, rtype,
                     h->local_of[root]);
  root_posts_wait(r, &posts);
  free(lcounts), free(regular);
}

/* The byte sizes of this process's ranks' blocks, at its leader (local rank 0), with
 * their offsets in rank order; the total is returned there (0 elsewhere). */
static int local_sizes(struct thr_hier *h, int bytes, int **sizes)
{
  int mine = h->local.size, lead = h->local.rank == 0;
  *sizes = lead ? thr_malloc((size_t)mine * 2 * sizeof(int)) : NULL;
  thr_local_gatherv(h->group, &h->local, &bytes, 1, MPI_INT, *sizes, 1, NULL, NULL, MPI_INT, 0);
  int total = 0;
  for (int k = 0; lead && k < mine; k++)
    (*sizes)[mine + k] = total, total += (*sizes)[k];
  return total;
}

/* This process's ranks' counts and displacements of a v layout (by local rank). */
static int *local_layout(const struct thr_hier *h, const int *counts, const int *displs)
{
  int mine = h->local.size, base = h->first[h->me_proc];
  int *l = thr_malloc((size_t)mine * 2 * sizeof(int));
  for (int k = 0; k < mine; k++)
    l[k] = counts[h->members[base + k]], l[mine + k] = displs[h->members[base + k]];
  return l;
}

/* Gatherv: as gather, but a leader first gathers its ranks' block sizes in place (only
 * the root knows the counts), and below the root's children each leader tells its
 * parent its subtree's total (from its children's totals) before the bytes follow. */
void thr_hier_gatherv(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                      const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                      const int *rcounts, const int *displs, MPI_Datatype rtype, int root)
{
  note(c, h, NOTE_GATHERV, "gatherv");
  int mine = h->local.size, root_proc = h->proc_of[root];
  if (h->me_proc != root_proc) {
    int *sizes, lead = h->local.rank == 0;
    int total = local_sizes(h, (int)thr_type_bytes(stype, scount), &sizes);
    struct tree t = tree_at(h, root_proc);
    struct relay y = {0};
    if (lead) {
      size_t sub[32], bytes = (size_t)total;
      for (int k = 0; k < t.n; k++) {
        int child = leader_of(h, proc_at(h, root_proc, t.child[k]), root), got;
        thr_recv(r, c, &got, 1, MPI_INT, child, HTAG_GATHER);
        sub[k] = (size_t)got, bytes += (size_t)got;
      }
      if (t.parent != root_proc) {
        int subtree = (int)bytes;
        thr_send(r, c, &subtree, 1, MPI_INT, leader_of(h, t.parent, root), HTAG_GATHER);
      }
      y = relay_post(r, c, h, &t, root, (size_t)total, sub, 0);
    }
    thr_local_gatherv(h->group, &h->local, sbuf, scount, stype, y.buf, 0, sizes,
                      sizes ? sizes + mine : NULL, MPI_BYTE, 0);
    if (lead) {
      relay_finish(r, c, h, &t, root, &y, 0);
      free(sizes);
    }
    return;
  }
  int local_root = h->local_of[root];
  if (c->rank != root) {
    thr_local_gatherv(h->group, &h->local, sbuf, scount, stype, NULL, 0, NULL, NULL, rtype,
                      local_root);
    return;
  }
  int *l = local_layout(h, rcounts, displs);
  struct root_posts posts = root_post(r, c, h, rbuf, rtype, root, rcounts, displs, 0, 0);
  thr_local_gatherv(h->group, &h->local, sbuf, scount, stype, rbuf, 0, l, l + mine, rtype,
                    local_root);
  root_posts_wait(r, &posts);
  free(l);
}

/* Scatterv, the reverse: the root sends a child that has children of its own the byte
 * totals of its subtree's processes first (the child forwards a slice to each of its
 * children), then the bytes; a leader without children knows its total from its ranks'
 * sizes, which it gathers in place. */
void thr_hier_scatterv(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                       const void *sbuf, const int *scounts, const int *displs,
                       MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root)
{
  note(c, h, NOTE_SCATTERV, "scatterv");
  int mine = h->local.size, root_proc = h->proc_of[root];
  if (h->me_proc != root_proc) {
    int *sizes, lead = h->local.rank == 0;
    int total = local_sizes(h, (int)thr_type_bytes(rtype, rcount), &sizes);
    struct tree t = tree_at(h, root_proc);
    struct relay y = {0};
    int *totals = NULL, nheaders = 0;
    struct thr_request *headers[32];
    if (lead) {
      totals = thr_malloc((size_t)t.span * sizeof(int));
      totals[0] = total;
      if (t.span > 1)
        thr_recv(r, c, totals, t.span, MPI_INT, leader_of(h, t.parent, root), HTAG_SCATTER);
      size_t sub[32];
      for (int k = 0; k < t.n; k++) {
        int at = t.child[k] - t.rel;
        sub[k] = 0;
        for (int x = 0; x < t.child_span[k]; x++)
          sub[k] += (size_t)totals[at + x];
        if (t.child_span[k] > 1)
          headers[nheaders++] = thr_isend(r, c, c->ctx + 1, totals + at, t.child_span[k], MPI_INT,
                                          leader_of(h, proc_at(h, root_proc, t.child[k]), root),
                                          HTAG_SCATTER);
      }
      y = relay_post(r, c, h, &t, root, (size_t)total, sub, 1);
    }
    thr_local_scatterv(h->group, &h->local, y.buf, 0, sizes, sizes ? sizes + mine : NULL,
                       MPI_BYTE, rbuf, rcount, rtype, 0);
    if (lead) {
      for (int i = 0; i < nheaders; i++)
        thr_wait(r, headers[i], MPI_STATUS_IGNORE);
      relay_finish(r, c, h, &t, root, &y, 1);
      free(sizes), free(totals);
    }
    return;
  }
  int local_root = h->local_of[root];
  if (c->rank != root) {
    thr_local_scatterv(h->group, &h->local, NULL, 0, NULL, NULL, stype, rbuf, rcount, rtype,
                       local_root);
    return;
  }
  int *l = local_layout(h, scounts, displs);
  struct root_posts posts = root_post(r, c, h, (void *)sbuf, stype, root, scounts, displs, 1, 1);
  thr_local_scatterv(h->group, &h->local, sbuf, 0, l, l + mine, stype, rbuf, rcount, rtype,
                     local_root);
  root_posts_wait(r, &posts);
  free(l);
}

/* The blocks of a regular alltoall layout (count x type each) that go to or come from
 * the other processes' ranks, in process order then rank order, as one type. */
static MPI_Datatype cross_blocks(const struct thr_hier *h, int count, MPI_Datatype type)
{
  int others = h->first[h->nprocs] - h->local.size, *at = thr_malloc((size_t)others * sizeof(int));
  for (int p = 0, k = 0; p < h->nprocs; p++)
    for (int i = h->first[p]; p != h->me_proc && i < h->first[p + 1]; i++)
      at[k++] = h->members[i] * count;
  MPI_Datatype blocks;
  PMPI_Type_create_indexed_block(others, count, at, type, &blocks);
  PMPI_Type_commit(&blocks);
  free(at);
  return blocks;
}

/* Regular alltoall. Blocks between ranks of one process are read in place (a local
 * alltoall on their part of the layout). The blocks for other processes go, as bytes,
 * into a buffer of the leader (rank k's run: its blocks in process then rank order);
 * the leader sends each other process one message (its ranks' blocks for that process)
 * and receives one from each into a second buffer, laid out by destination rank, from
 * which each rank copies its blocks from the other processes. */
void thr_hier_alltoall(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                       const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                       int rcount, MPI_Datatype rtype)
{
  note(c, h, NOTE_ALLTOALL, "alltoall");
  int bs = (int)thr_type_bytes(rtype, rcount); /* (one block's bytes, the same everywhere) */
  if (bs == 0)
    return;
  int in_place = sbuf == MPI_IN_PLACE, mine = h->local.size, P = h->nprocs, me = h->me_proc;
  int others = h->first[P] - mine, lead = h->local.rank == 0, run = others * bs;
  MPI_Datatype scross = cross_blocks(h, in_place ? rcount : scount, in_place ? rtype : stype);
  MPI_Datatype rcross = cross_blocks(h, rcount, rtype);
  char *out = lead ? thr_malloc((size_t)run * (size_t)mine) : NULL;
  char *in = lead ? thr_malloc((size_t)run * (size_t)mine) : NULL;
  thr_local_gatherv(h->group, &h->local, in_place ? rbuf : sbuf, 1, scross, out, run, NULL,
                    NULL, MPI_BYTE, 0);
  int nreqs = 0;
  struct thr_request **reqs = lead ? thr_malloc((size_t)(2 * P) * sizeof *reqs) : NULL;
  MPI_Datatype *types = lead ? thr_malloc((size_t)(2 * P) * sizeof *types) : NULL;
  if (lead) {
    int *at = thr_malloc((size_t)others * (size_t)mine * sizeof(int));
    for (int k = 1; k < P; k++) {
      int q = (me + k) % P, size_q = h->first[q + 1] - h->first[q], offset = 0;
      for (int p = 0; p < q; p++)
        offset += p == me ? 0 : h->first[p + 1] - h->first[p];
      /* to q: rank i's run for q's ranks; from q: q's rank j's block for rank i */
      for (int i = 0; i < mine; i++)
        at[i] = i * run + offset * bs;
      PMPI_Type_create_indexed_block(mine, size_q * bs, at, MPI_BYTE, &types[nreqs]);
      for (int j = 0; j < size_q; j++)
        for (int i = 0; i < mine; i++)
          at[j * mine + i] = i * run + (offset + j) * bs;
      PMPI_Type_create_indexed_block(size_q * mine, bs, at, MPI_BYTE, &types[nreqs + 1]);
      PMPI_Type_commit(&types[nreqs]);
      PMPI_Type_commit(&types[nreqs + 1]);
      int peer = leader_of(h, q, -1);
      reqs[nreqs + 1] = thr_irecv(r, c, c->ctx + 1, in, 1, types[nreqs + 1], peer, HTAG_ALLTOALL);
      reqs[nreqs] = thr_isend(r, c, c->ctx + 1, out, 1, types[nreqs], peer, HTAG_ALLTOALL);
      nreqs += 2;
    }
    free(at);
  }
  /* (the blocks within the process while the leader's messages travel) */
  int *l = thr_malloc((size_t)mine * 4 * sizeof(int));
  for (int k = 0; k < mine; k++) {
    int rank = h->members[h->first[me] + k];
    l[k] = scount, l[mine + k] = rank * scount;
    l[2 * mine + k] = rcount, l[3 * mine + k] = rank * rcount;
  }
  thr_local_alltoallv(h->group, &h->local, sbuf, 0, l, l + mine, stype, rbuf, 0, l + 2 * mine,
                      l + 3 * mine, rtype);
  free(l);
  for (int i = 0; i < nreqs; i++) {
    thr_wait(r, reqs[i], MPI_STATUS_IGNORE);
    PMPI_Type_free(&types[i]);
  }
  thr_local_scatterv(h->group, &h->local, in, run, NULL, NULL, MPI_BYTE, rbuf, 1, rcross, 0);
  PMPI_Type_free(&scross);
  PMPI_Type_free(&rcross);
  free(out), free(in), free(reqs), free(types);
}

/* Scan and exscan when each process's ranks are consecutive (thr_hier_takes): a scan in
 * place within each process, its last rank's total to the leader, a chain of the
 * leaders passing the prefix of the processes before them (folded in process order:
 * rank order), and each rank folds its process's prefix in front of its own result. */
void thr_hier_scan(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h, const void *sbuf,
                   void *rbuf, int count, MPI_Datatype type, MPI_Op op, int exclusive)
{
  note(c, h, exclusive ? NOTE_EXSCAN : NOTE_SCAN, exclusive ? "exscan" : "scan");
  int mine = h->local.size, k = h->local.rank, last = k == mine - 1, p = h->me_proc;
  const void *input = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
  void *total = NULL, *saved = NULL;
  if (exclusive && last) { /* (its total is its exclusive result op its input) */
    saved = thr_alloc_typed(count, type);
    thr_copy_typed(saved, count, type, input, count, type);
  }
  thr_local_scan(h->group, &h->local, sbuf, rbuf, count, type, op, exclusive);
  if (last) {
    total = thr_alloc_typed(count, type);
    if (!exclusive) {
      thr_copy_typed(total, count, type, rbuf, count, type);
    } else {
      if (mine > 1)
        thr_fold(rbuf, saved, count, type, op);
      thr_copy_typed(total, count, type, saved, count, type);
    }
  }
  /* the total to the leader (only the last rank's block is not empty) */
  int *layout = k == 0 ? thr_calloc((size_t)mine * 2, sizeof(int)) : NULL;
  if (layout)
    layout[mine - 1] = count;
  void *at_leader = k == 0 ? (last ? total : thr_alloc_typed(count, type)) : NULL;
  if (mine > 1)
    thr_local_gatherv(h->group, &h->local, total, last ? count : 0, type, at_leader, 0, layout,
                      layout ? layout + mine : NULL, type, 0);
  void *before = NULL;
  if (p > 0) {
    before = thr_alloc_typed(count, type);
    if (k == 0)
      thr_recv(r, c, before, count, type, leader_of(h, p - 1, -1), HTAG_SCAN);
  }
  if (k == 0 && p + 1 < h->nprocs) {
    if (p > 0)
      thr_fold(before, at_leader, count, type, op); /* (prefix through this process) */
    thr_send(r, c, at_leader, count, type, leader_of(h, p + 1, -1), HTAG_SCAN);
  }
  if (p > 0) {
    thr_local_bcast(h->group, &h->local, before, count, type, 0);
    if (exclusive && k == 0)
      thr_copy_typed(rbuf, count, type, before, count, type);
    else
      thr_fold(before, rbuf, count, type, op);
    thr_free_typed(before, type);
  }
  if (at_leader != total)
    thr_free_typed(at_leader, type);
  thr_free_typed(total, type);
  thr_free_typed(saved, type);
  free(layout);
}

/* One side of an alltoallv or alltoallw: block j (comm rank j) is counts[j] x type_j
 * at displs[j] x extent(type) (v) or displs[j] bytes (w: types given). */
struct v_side {
  const void *buf;
  const int *counts, *displs;
  MPI_Datatype type;
  const MPI_Datatype *types;
};

static MPI_Datatype v_type(const struct v_side *s, int j)
{
  return s->types ? s->types[j] : s->type;
}

/* The side's blocks of the ranks of the other processes, in process order then rank
 * order, as one type (an empty type where they are all empty). */
static MPI_Datatype v_cross(const struct thr_hier *h, const struct v_side *s)
{
  int others = h->first[h->nprocs] - h->local.size, k = 0;
  int *lens = thr_malloc((size_t)others * sizeof(int) + 1);
  MPI_Aint *at = thr_malloc((size_t)others * sizeof(MPI_Aint) + 1);
  MPI_Datatype *types = thr_malloc((size_t)others * sizeof(MPI_Datatype) + 1);
  MPI_Aint unit = s->types ? 1 : thr_extent_of(s->type);
  for (int p = 0; p < h->nprocs; p++)
    for (int i = h->first[p]; p != h->me_proc && i < h->first[p + 1]; i++, k++) {
      int j = h->members[i];
      lens[k] = s->counts[j], at[k] = s->displs[j] * unit, types[k] = v_type(s, j);
    }
  MPI_Datatype cross;
  PMPI_Type_create_struct(others, lens, at, types, &cross);
  PMPI_Type_commit(&cross);
  free(lens), free(at), free(types);
  return cross;
}

/* Alltoallv and alltoallw. Blocks between ranks of one process are read in place (a
 * local alltoallv/w on their part of the layouts). Each rank's blocks for the other
 * processes go, as bytes, into a buffer of its leader (rank k's run: its blocks in
 * process then rank order), after the leader has gathered every rank's block sizes
 * (each rank knows only its own counts: the send sizes say where its run goes, the
 * receive sizes how the messages from each other process are cut). The leader sends
 * each other process one message (its ranks' blocks for that process's ranks; none
 * when empty) and receives one from each into a second buffer laid out by destination
 * rank, from which each rank copies its blocks from the other processes. In place, the
 * runs are read before the local step rewrites the receive buffer. */
static void hier_alltoallvw(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                            struct v_side send, struct v_side recv)
{
  int in_place = send.buf == MPI_IN_PLACE, mine = h->local.size, P = h->nprocs;
  int me = h->me_proc, others = h->first[P] - mine, lead = h->local.rank == 0;
  if (in_place)
    send = recv;
  /* this rank's byte sizes of its blocks to, then from, the other processes' ranks */
  int *sizes = thr_malloc((size_t)others * 2 * sizeof(int) + 1);
  for (int p = 0, k = 0; p < P; p++)
    for (int i = h->first[p]; p != me && i < h->first[p + 1]; i++, k++) {
      int j = h->members[i];
      sizes[k] = (int)thr_type_bytes(v_type(&send, j), send.counts[j]);
      sizes[others + k] = (int)thr_type_bytes(v_type(&recv, j), recv.counts[j]);
    }
  int *all = lead ? thr_malloc((size_t)mine * (size_t)others * 2 * sizeof(int) + 1) : NULL;
  thr_local_gatherv(h->group, &h->local, sizes, 2 * others, MPI_INT, all, 2 * others, NULL,
                    NULL, MPI_INT, 0);
  /* at the leader: rank k's run in out and in (its offset, its length) */
  int *runs = lead ? thr_calloc((size_t)mine * 4, sizeof(int)) : NULL;
  size_t out_bytes = 0, in_bytes = 0;
  for (int k = 0; lead && k < mine; k++) {
    const int *sk = all + (size_t)k * 2 * others, *rk = sk + others;
    runs[k] = (int)out_bytes, runs[2 * mine + k] = (int)in_bytes;
    for (int x = 0; x < others; x++)
      runs[mine + k] += sk[x], runs[3 * mine + k] += rk[x];
    out_bytes += (size_t)runs[mine + k], in_bytes += (size_t)runs[3 * mine + k];
  }
  char *out = lead ? thr_malloc(out_bytes + 1) : NULL, *in = lead ? thr_malloc(in_bytes + 1) : NULL;
  MPI_Datatype scross = v_cross(h, &send), rcross = v_cross(h, &recv);
  thr_local_gatherv(h->group, &h->local, send.buf, 1, scross, out, 0, runs ? runs + mine : NULL,
                    runs, MPI_BYTE, 0);
  int nreqs = 0;
  struct thr_request **reqs = lead ? thr_malloc((size_t)(2 * P) * sizeof *reqs) : NULL;
  MPI_Datatype *types = lead ? thr_malloc((size_t)(2 * P) * sizeof *types) : NULL;
  if (lead) {
    int *lens = thr_malloc(((size_t)others * (size_t)mine + 1) * 2 * sizeof(int));
    int *at = lens + (size_t)others * mine + 1;
    for (int q = 0, x0 = 0; q < P; x0 += q == me ? 0 : h->first[q + 1] - h->first[q], q++) {
      if (q == me)
        continue;
      int size_q = h->first[q + 1] - h->first[q], peer = leader_of(h, q, -1), bytes = 0;
      /* to q: from each rank k of this process, its blocks for q's ranks (x0 .. in its run) */
      for (int k = 0; k < mine; k++) {
        const int *sk = all + (size_t)k * 2 * others;
        at[k] = runs[k], lens[k] = 0;
        for (int x = 0; x < x0; x++)
          at[k] += sk[x];
        for (int x = x0; x < x0 + size_q; x++)
          lens[k] += sk[x];
        bytes += lens[k];
      }
      if (bytes > 0) {
        PMPI_Type_indexed(mine, lens, at, MPI_BYTE, &types[nreqs]);
        PMPI_Type_commit(&types[nreqs]);
        reqs[nreqs] = thr_isend(r, c, c->ctx + 1, out, 1, types[nreqs], peer, HTAG_ALLTOALL);
        nreqs++;
      }
      /* from q: q's rank x's block for each rank k of this process, x major */
      bytes = 0;
      for (int x = 0; x < size_q; x++)
        for (int k = 0; k < mine; k++) {
          const int *rk = all + (size_t)k * 2 * others + others;
          int b = x * mine + k;
          at[b] = runs[2 * mine + k], lens[b] = rk[x0 + x];
          for (int y = 0; y < x0 + x; y++)
            at[b] += rk[y];
          bytes += lens[b];
        }
      if (bytes > 0) {
        PMPI_Type_indexed(size_q * mine, lens, at, MPI_BYTE, &types[nreqs]);
        PMPI_Type_commit(&types[nreqs]);
        reqs[nreqs] = thr_irecv(r, c, c->ctx + 1, in, 1, types[nreqs], peer, HTAG_ALLTOALL);
        nreqs++;
      }
    }
    free(lens);
  }
  /* (the blocks within the process while the leader's messages travel) */
  int base = h->first[me], *l = thr_malloc((size_t)mine * 4 * sizeof(int));
  MPI_Datatype *lt = send.types ? thr_malloc((size_t)mine * 2 * sizeof *lt) : NULL;
  for (int k = 0; k < mine; k++) {
    int j = h->members[base + k];
    l[k] = send.counts[j], l[mine + k] = send.displs[j];
    l[2 * mine + k] = recv.counts[j], l[3 * mine + k] = recv.displs[j];
    if (lt)
      lt[k] = send.types[j], lt[mine + k] = recv.types[j];
  }
  const void *local_send = in_place ? MPI_IN_PLACE : send.buf;
  if (lt)
    thr_local_alltoallw(h->group, &h->local, local_send, l, l + mine, lt, (void *)recv.buf,
                        l + 2 * mine, l + 3 * mine, lt + mine);
  else
    thr_local_alltoallv(h->group, &h->local, local_send, 0, l, l + mine, send.type,
                        (void *)recv.buf, 0, l + 2 * mine, l + 3 * mine, recv.type);
  free(l), free(lt);
  for (int i = 0; i < nreqs; i++) {
    thr_wait(r, reqs[i], MPI_STATUS_IGNORE);
    PMPI_Type_free(&types[i]);
  }
  thr_local_scatterv(h->group, &h->local, in, 0, runs ? runs + 3 * mine : NULL,
                     runs ? runs + 2 * mine : NULL, MPI_BYTE, (void *)recv.buf, 1, rcross, 0);
  PMPI_Type_free(&scross);
  PMPI_Type_free(&rcross);
  free(sizes), free(all), free(runs), free(out), free(in), free(reqs), free(types);
}

void thr_hier_alltoallv(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                        const void *sbuf, const int *scounts, const int *sdispls,
                        MPI_Datatype stype, void *rbuf, const int *rcounts, const int *rdispls,
                        MPI_Datatype rtype)
{
  note(c, h, NOTE_ALLTOALLV, "alltoallv");
  hier_alltoallvw(r, c, h, (struct v_side){sbuf, scounts, sdispls, stype, NULL},
                  (struct v_side){rbuf, rcounts, rdispls, rtype, NULL});
}

void thr_hier_alltoallw(struct thr_rank *r, struct thr_comm *c, struct thr_hier *h,
                        const void *sbuf, const int *scounts, const int *sdispls,
                        const MPI_Datatype *stypes, void *rbuf, const int *rcounts,
                        const int *rdispls, const MPI_Datatype *rtypes)
{
  note(c, h, NOTE_ALLTOALLW, "alltoallw");
  hier_alltoallvw(r, c, h, (struct v_side){sbuf, scounts, sdispls, MPI_DATATYPE_NULL, stypes},
                  (struct v_side){rbuf, rcounts, rdispls, MPI_DATATYPE_NULL, rtypes});
}
