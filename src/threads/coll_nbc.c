/* Non-blocking (MPI_I*) and persistent (MPI_<Coll>_init) collectives of thread ranks.
 * Each call becomes a schedule: rounds of steps (local copies and folds first, then
 * point-to-point sends and receives in the communicator's collective context), a round
 * starting once the previous one is complete. Every progress of a rank (any wait, test,
 * probe or blocking call) advances all of its pending schedules, so a rank may wait
 * its requests in any order, and ranks that wait in different orders, or sit in other
 * calls meanwhile, still complete each other's collectives. The algorithms are those
 * of coll.c (binomial bcast, linear folds in rank order, all-pairs exchanges). Tags
 * carry the call's number on its communicator (every rank starts the collectives of a
 * communicator in the same order), so concurrent calls never match each other's
 * messages, nor those of blocking collectives (tags below TAG_BASE). */
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

enum { TAG_BASE = 64, TAG_PARTS = 16 };

/* Which collective a persistent request starts. */
enum coll_kind {
  K_BARRIER, K_BCAST, K_REDUCE, K_ALLREDUCE, K_REDUCE_SCATTER_BLOCK, K_REDUCE_SCATTER,
  K_SCAN, K_EXSCAN, K_GATHER, K_GATHERV, K_SCATTER, K_SCATTERV, K_ALLGATHER, K_ALLGATHERV,
  K_ALLTOALL, K_ALLTOALLV, K_ALLTOALLW
};

/* The arguments of one call (arrays are the caller's, which MPI keeps unchanged until
 * the request completes, or is freed for a persistent one). */
struct thr_coll_args {
  enum coll_kind kind;
  const void *sbuf;
  void *rbuf;
  int scount, rcount, root;
  MPI_Datatype stype, rtype;
  const int *scounts, *sdispls, *rcounts, *rdispls;
  const MPI_Datatype *stypes, *rtypes;
  MPI_Op op;
  MPI_Comm comm;
  /* Persistent: the communicator as it was at init (it may be freed before a start),
   * and the call's tag, drawn at init (persistent collectives match in the order of
   * their initialisation, whatever the order of the starts). */
  struct thr_comm kept_comm;
  int tag;
};

enum step_kind { STEP_SEND, STEP_RECV, STEP_COPY, STEP_REDUCE, STEP_ROUND };

struct nbc_step {
  enum step_kind kind;
  const void *src; /* SEND: the bytes; COPY, REDUCE: the input */
  void *dst;       /* RECV: the buffer; COPY: the output; REDUCE: the accumulator */
  int count, dcount, peer, part;
  MPI_Datatype type, dtype;
  MPI_Op op;
};

struct thr_nbc {
  struct thr_nbc *next; /* the rank's pending list */
  struct thr_rank *rank;
  struct thr_comm comm; /* a copy: the communicator may be freed before completion */
  int tag;
  struct nbc_step *steps;
  int nsteps, capacity, next_step;
  struct thr_request **active;
  int nactive;
  void **temps;
  int ntemps;
  int done, error;
};

/* The rank this thread last ran a non-blocking collective for. */
static _Thread_local struct thr_rank *current_rank;

/* ---- building a schedule ---- */

static struct nbc_step *add_step(struct thr_nbc *s, enum step_kind kind)
{
  if (s->nsteps == s->capacity) {
    s->capacity = s->capacity ? 2 * s->capacity : 16;
    s->steps = thr_realloc(s->steps, (size_t)s->capacity * sizeof *s->steps);
  }
  struct nbc_step *step = &s->steps[s->nsteps++];
  memset(step, 0, sizeof *step);
  step->kind = kind;
  return step;
}

static void send_step(struct thr_nbc *s, const void *buf, int count, MPI_Datatype type, int peer,
                      int part)
{
  struct nbc_step *step = add_step(s, STEP_SEND);
  step->src = buf, step->count = count, step->type = type, step->peer = peer, step->part = part;
}

static void recv_step(struct thr_nbc *s, void *buf, int count, MPI_Datatype type, int peer,
                      int part)
{
  struct nbc_step *step = add_step(s, STEP_RECV);
  step->dst = buf, step->count = count, step->type = type, step->peer = peer, step->part = part;
}

static void copy_step(struct thr_nbc *s, const void *src, int count, MPI_Datatype type, void *dst,
                      int dcount, MPI_Datatype dtype)
{
  struct nbc_step *step = add_step(s, STEP_COPY);
  step->src = src, step->count = count, step->type = type;
  step->dst = dst, step->dcount = dcount, step->dtype = dtype;
}

/* acc = in op acc */
static void reduce_step(struct thr_nbc *s, const void *in, void *acc, int count,
                        MPI_Datatype type, MPI_Op op)
{
  struct nbc_step *step = add_step(s, STEP_REDUCE);
  step->src = in, step->dst = acc, step->count = count, step->type = type, step->op = op;
}

static void end_round(struct thr_nbc *s)
{
  add_step(s, STEP_ROUND);
}

/* A buffer for count x type, freed with the schedule. */
static void *temp(struct thr_nbc *s, int count, MPI_Datatype type)
{
  MPI_Aint true_lb, true_extent;
  PMPI_Type_get_true_extent(type, &true_lb, &true_extent);
  MPI_Aint size = true_extent + (count > 1 ? (MPI_Aint)(count - 1) * thr_extent_of(type) : 0);
  char *base = thr_malloc(size > 0 ? (size_t)size : 1);
  s->temps = thr_realloc(s->temps, (size_t)(s->ntemps + 1) * sizeof *s->temps);
  s->temps[s->ntemps++] = base;
  return base - true_lb;
}

/* ---- the algorithms, as steps (me: this rank, n: the size) ---- */

/* Everyone tells rank 0, which then releases everyone (parts part, part + 1). */
static void build_barrier(struct thr_nbc *s, int part)
{
  int n = s->comm.size, me = s->comm.rank;
  if (n == 1)
    return;
  if (me == 0) {
    for (int i = 1; i < n; i++)
      recv_step(s, NULL, 0, MPI_BYTE, i, part);
    end_round(s);
    for (int i = 1; i < n; i++)
      send_step(s, NULL, 0, MPI_BYTE, i, part + 1);
  } else {
    send_step(s, NULL, 0, MPI_BYTE, 0, part);
    recv_step(s, NULL, 0, MPI_BYTE, 0, part + 1);
  }
}

/* Binomial tree over ranks relative to the root. */
static void build_bcast(struct thr_nbc *s, void *buf, int count, MPI_Datatype type, int root,
                        int part)
{
  int n = s->comm.size, rel = (s->comm.rank - root + n) % n, mask = 1;
  while (mask < n) {
    if (rel & mask) {
      recv_step(s, buf, count, type, (rel - mask + root) % n, part);
      end_round(s);
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (rel + mask < n)
      send_step(s, buf, count, type, (rel + mask + root) % n, part);
}

/* The root receives every input, then folds from the last rank to the first
 * (acc = x_i op acc: the order MPI defines for non-commutative operations). */
static void build_reduce(struct thr_nbc *s, const void *sbuf, void *rbuf, int count,
                         MPI_Datatype type, MPI_Op op, int root, int part)
{
  int n = s->comm.size, me = s->comm.rank;
  if (me != root) {
    send_step(s, sbuf, count, type, root, part);
    return;
  }
  const void **inputs = thr_malloc((size_t)n * sizeof *inputs);
  for (int i = 0; i < n; i++) {
    if (i != me) {
      void *in = temp(s, count, type);
      recv_step(s, in, count, type, i, part);
      inputs[i] = in;
    } else if (sbuf == MPI_IN_PLACE) { /* rbuf is overwritten by the fold */
      void *mine = temp(s, count, type);
      copy_step(s, rbuf, count, type, mine, count, type);
      inputs[i] = mine;
    } else {
      inputs[i] = sbuf;
    }
  }
  end_round(s);
  copy_step(s, inputs[n - 1], count, type, rbuf, count, type);
  for (int i = n - 2; i >= 0; i--)
    reduce_step(s, inputs[i], rbuf, count, type, op);
  free(inputs);
}

static void build_gatherv(struct thr_nbc *s, const void *sbuf, int scount, MPI_Datatype stype,
                          void *rbuf, const int *rcounts, const int *displs, MPI_Datatype rtype,
                          int root, int part)
{
  if (s->comm.rank != root) {
    send_step(s, sbuf, scount, stype, root, part);
    return;
  }
  for (int i = 0; i < s->comm.size; i++) {
    char *at = thr_block_at(rbuf, displs[i], rtype);
    if (i != root)
      recv_step(s, at, rcounts[i], rtype, i, part);
    else if (sbuf != MPI_IN_PLACE)
      copy_step(s, sbuf, scount, stype, at, rcounts[i], rtype);
  }
}

static void build_scatterv(struct thr_nbc *s, const void *sbuf, const int *scounts,
                           const int *displs, MPI_Datatype stype, void *rbuf, int rcount,
                           MPI_Datatype rtype, int root, int part)
{
  if (s->comm.rank != root) {
    recv_step(s, rbuf, rcount, rtype, root, part);
    return;
  }
  for (int i = 0; i < s->comm.size; i++) {
    const char *at = thr_block_at(sbuf, displs[i], stype);
    if (i != root)
      send_step(s, at, scounts[i], stype, i, part);
    else if (rbuf != MPI_IN_PLACE)
      copy_step(s, at, scounts[i], stype, rbuf, rcount, rtype);
  }
}

/* Rank i gets x_0..x_{i-1} from rank i-1, folds its own in and passes it on. */
static void build_prefix(struct thr_nbc *s, const void *sbuf, void *rbuf, int count,
                         MPI_Datatype type, MPI_Op op, int exclusive, int part)
{
  int n = s->comm.size, me = s->comm.rank;
  const void *mine = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
  void *acc = temp(s, count, type), *before = NULL;
  if (me > 0) {
    before = temp(s, count, type);
    recv_step(s, before, count, type, me - 1, part);
    end_round(s);
  }
  copy_step(s, mine, count, type, acc, count, type);
  if (me > 0) {
    reduce_step(s, before, acc, count, type, op);
    if (exclusive)
      copy_step(s, before, count, type, rbuf, count, type);
  }
  if (!exclusive)
    copy_step(s, acc, count, type, rbuf, count, type);
  if (me + 1 < n)
    send_step(s, acc, count, type, me + 1, part);
}

/* Block i of the send layout to rank i, block i of the receive layout from rank i;
 * displacements in bytes, a type per block. */
static void build_exchange(struct thr_nbc *s, const void *sbuf, const int *scounts,
                           const MPI_Aint *sdispls, const MPI_Datatype *stypes, void *rbuf,
                           const int *rcounts, const MPI_Aint *rdispls,
                           const MPI_Datatype *rtypes, int part)
{
  int n = s->comm.size, me = s->comm.rank;
  copy_step(s, (const char *)sbuf + sdispls[me], scounts[me], stypes[me],
            (char *)rbuf + rdispls[me], rcounts[me], rtypes[me]);
  for (int k = 1; k < n; k++) {
    int from = (me - k + n) % n, to = (me + k) % n;
    recv_step(s, (char *)rbuf + rdispls[from], rcounts[from], rtypes[from], from, part);
    send_step(s, (const char *)sbuf + sdispls[to], scounts[to], stypes[to], to, part);
  }
}

/* The byte displacements and per-block types of a v call with one type. */
static void byte_layout(int n, const int *displs, MPI_Datatype type, MPI_Aint *bytes,
                        MPI_Datatype *types)
{
  MPI_Aint extent = thr_extent_of(type);
  for (int i = 0; i < n; i++) {
    bytes[i] = displs[i] * extent;
    types[i] = type;
  }
}

static void build_exchange_v(struct thr_nbc *s, const void *sbuf, const int *scounts,
                             const int *sdispls, MPI_Datatype stype, void *rbuf,
                             const int *rcounts, const int *rdispls, MPI_Datatype rtype,
                             int part)
{
  int n = s->comm.size;
  MPI_Aint *sbytes = thr_malloc((size_t)n * sizeof *sbytes), *rbytes = thr_malloc((size_t)n * sizeof *rbytes);
  MPI_Datatype *stypes = thr_malloc((size_t)n * sizeof *stypes), *rtypes = thr_malloc((size_t)n * sizeof *rtypes);
  byte_layout(n, sdispls, stype, sbytes, stypes);
  byte_layout(n, rdispls, rtype, rbytes, rtypes);
  build_exchange(s, sbuf, scounts, sbytes, stypes, rbuf, rcounts, rbytes, rtypes, part);
  free(sbytes), free(rbytes), free(stypes), free(rtypes);
}

/* The counts and displacements of a regular call. */
static int *regular(int n, int value, int step)
{
  int *a = thr_malloc((size_t)n * sizeof *a);
  for (int i = 0; i < n; i++)
    a[i] = step ? i * value : value;
  return a;
}

static void build_alltoallv(struct thr_nbc *s, const void *sbuf, const int *scounts,
                            const int *sdispls, MPI_Datatype stype, void *rbuf,
                            const int *rcounts, const int *rdispls, MPI_Datatype rtype)
{
  if (sbuf == MPI_IN_PLACE) { /* send from a copy of the receive buffer, made first */
    int span = 0;
    for (int i = 0; i < s->comm.size; i++)
      if (rdispls[i] + rcounts[i] > span)
        span = rdispls[i] + rcounts[i];
    void *copy = temp(s, span, rtype);
    copy_step(s, rbuf, span, rtype, copy, span, rtype);
    build_exchange_v(s, copy, rcounts, rdispls, rtype, rbuf, rcounts, rdispls, rtype, 0);
    return;
  }
  build_exchange_v(s, sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, 0);
}

static void build_alltoallw(struct thr_nbc *s, const void *sbuf, const int *scounts,
                            const int *sdispls, const MPI_Datatype *stypes, void *rbuf,
                            const int *rcounts, const int *rdispls, const MPI_Datatype *rtypes)
{
  int n = s->comm.size;
  MPI_Aint *sbytes = thr_malloc((size_t)n * sizeof *sbytes), *rbytes = thr_malloc((size_t)n * sizeof *rbytes);
  for (int i = 0; i < n; i++)
    rbytes[i] = rdispls[i];
  if (sbuf == MPI_IN_PLACE) { /* send from a copy of the receive buffer's bytes */
    MPI_Aint span = 0;
    for (int i = 0; i < n; i++)
      if (rdispls[i] + rcounts[i] * thr_extent_of(rtypes[i]) > span)
        span = rdispls[i] + rcounts[i] * thr_extent_of(rtypes[i]);
    void *copy = temp(s, (int)span, MPI_BYTE);
    copy_step(s, rbuf, (int)span, MPI_BYTE, copy, (int)span, MPI_BYTE);
    sbuf = copy, scounts = rcounts, stypes = rtypes;
    for (int i = 0; i < n; i++)
      sbytes[i] = rdispls[i];
  } else {
    for (int i = 0; i < n; i++)
      sbytes[i] = sdispls[i];
  }
  build_exchange(s, sbuf, scounts, sbytes, stypes, rbuf, rcounts, rbytes, rtypes, 0);
  free(sbytes), free(rbytes);
}

static void build_allgatherv(struct thr_nbc *s, const void *sbuf, int scount, MPI_Datatype stype,
                             void *rbuf, const int *rcounts, const int *displs,
                             MPI_Datatype rtype)
{
  int n = s->comm.size, me = s->comm.rank;
  if (sbuf == MPI_IN_PLACE) {
    sbuf = thr_block_at(rbuf, displs[me], rtype);
    scount = rcounts[me];
    stype = rtype;
  }
  int *scounts = regular(n, scount, 0), *sdispls = regular(n, 0, 0);
  if (thr_block_at(rbuf, displs[me], rtype) == (const char *)sbuf)
    scounts[me] = 0; /* (already in place) */
  int *rcounts_own = regular(n, 0, 0);
  memcpy(rcounts_own, rcounts, (size_t)n * sizeof *rcounts_own);
  if (scounts[me] == 0)
    rcounts_own[me] = 0;
  build_exchange_v(s, sbuf, scounts, sdispls, stype, rbuf, rcounts_own, displs, rtype, 0);
  free(scounts), free(sdispls), free(rcounts_own);
}

static void build(struct thr_nbc *s, const struct thr_coll_args *a)
{
  int n = s->comm.size, me = s->comm.rank;
  switch (a->kind) {
  case K_BARRIER:
    build_barrier(s, 0);
    break;
  case K_BCAST:
    build_bcast(s, a->rbuf, a->rcount, a->rtype, a->root, 0);
    break;
  case K_REDUCE:
    build_reduce(s, a->sbuf, a->rbuf, a->rcount, a->rtype, a->op, a->root, 0);
    break;
  case K_ALLREDUCE: /* reduce to rank 0, then bcast */
    build_reduce(s, a->sbuf == MPI_IN_PLACE && me != 0 ? a->rbuf : a->sbuf, a->rbuf, a->rcount,
                 a->rtype, a->op, 0, 0);
    end_round(s);
    build_bcast(s, a->rbuf, a->rcount, a->rtype, 0, 1);
    break;
  case K_REDUCE_SCATTER_BLOCK:
  case K_REDUCE_SCATTER: { /* reduce everything to rank 0, then scatter */
    int *counts = a->kind == K_REDUCE_SCATTER ? (int *)a->rcounts : regular(n, a->rcount, 0);
    int *displs = regular(n, 0, 0), total = 0;
    for (int i = 0; i < n; i++) {
      displs[i] = total;
      total += counts[i];
    }
    void *all = me == 0 ? temp(s, total, a->rtype) : NULL;
    build_reduce(s, a->sbuf == MPI_IN_PLACE ? a->rbuf : a->sbuf, all, total, a->rtype, a->op, 0,
                 0);
    end_round(s);
    build_scatterv(s, all, counts, displs, a->rtype, a->rbuf, counts[me], a->rtype, 0, 1);
    if (counts != a->rcounts)
      free(counts);
    free(displs);
    break;
  }
  case K_SCAN:
  case K_EXSCAN:
    build_prefix(s, a->sbuf, a->rbuf, a->rcount, a->rtype, a->op, a->kind == K_EXSCAN, 0);
    break;
  case K_GATHER: {
    int *counts = regular(n, a->rcount, 0), *displs = regular(n, a->rcount, 1);
    build_gatherv(s, a->sbuf, a->scount, a->stype, a->rbuf, counts, displs, a->rtype, a->root, 0);
    free(counts), free(displs);
    break;
  }
  case K_GATHERV:
    build_gatherv(s, a->sbuf, a->scount, a->stype, a->rbuf, a->rcounts, a->rdispls, a->rtype,
                  a->root, 0);
    break;
  case K_SCATTER: {
    int *counts = regular(n, a->scount, 0), *displs = regular(n, a->scount, 1);
    build_scatterv(s, a->sbuf, counts, displs, a->stype, a->rbuf, a->rcount, a->rtype, a->root, 0);
    free(counts), free(displs);
    break;
  }
  case K_SCATTERV:
    build_scatterv(s, a->sbuf, a->scounts, a->sdispls, a->stype, a->rbuf, a->rcount, a->rtype,
                   a->root, 0);
    break;
  case K_ALLGATHER: {
    int *counts = regular(n, a->rcount, 0), *displs = regular(n, a->rcount, 1);
    build_allgatherv(s, a->sbuf, a->scount, a->stype, a->rbuf, counts, displs, a->rtype);
    free(counts), free(displs);
    break;
  }
  case K_ALLGATHERV:
    build_allgatherv(s, a->sbuf, a->scount, a->stype, a->rbuf, a->rcounts, a->rdispls, a->rtype);
    break;
  case K_ALLTOALL: {
    int *sc = regular(n, a->scount, 0), *sd = regular(n, a->scount, 1);
    int *rc = regular(n, a->rcount, 0), *rd = regular(n, a->rcount, 1);
    build_alltoallv(s, a->sbuf, sc, sd, a->stype, a->rbuf, rc, rd, a->rtype);
    free(sc), free(sd), free(rc), free(rd);
    break;
  }
  case K_ALLTOALLV:
    build_alltoallv(s, a->sbuf, a->scounts, a->sdispls, a->stype, a->rbuf, a->rcounts,
                    a->rdispls, a->rtype);
    break;
  case K_ALLTOALLW:
    build_alltoallw(s, a->sbuf, a->scounts, a->sdispls, a->stypes, a->rbuf, a->rcounts,
                    a->rdispls, a->rtypes);
    break;
  }
}

/* ---- running a schedule ---- */

static void copy_typed(const struct nbc_step *step)
{
  size_t bytes = thr_type_bytes(step->type, step->count);
  if (bytes == 0)
    return;
  if (thr_type_is_contiguous(step->type, step->count) &&
      thr_type_is_contiguous(step->dtype, step->dcount)) {
    if (step->dst != step->src)
      memmove(step->dst, step->src, bytes);
    return;
  }
  int position = 0;
  void *packed = thr_malloc(bytes);
  PMPI_Pack(step->src, step->count, step->type, packed, (int)bytes, &position, MPI_COMM_SELF);
  position = 0;
  PMPI_Unpack(packed, (int)bytes, &position, step->dst, step->dcount, step->dtype, MPI_COMM_SELF);
  free(packed);
}

/* Starts the next round: its local steps in order, then its sends and receives. */
static void start_round(struct thr_nbc *s)
{
  int end = s->next_step;
  while (end < s->nsteps && s->steps[end].kind != STEP_ROUND)
    end++;
  for (int i = s->next_step; i < end; i++) {
    struct nbc_step *step = &s->steps[i];
    if (step->kind == STEP_COPY)
      copy_typed(step);
    else if (step->kind == STEP_REDUCE)
      PMPI_Reduce_local(step->src, step->dst, step->count, step->type, step->op);
  }
  s->active = thr_realloc(s->active, (size_t)(end - s->next_step + 1) * sizeof *s->active);
  s->nactive = 0;
  for (int i = s->next_step; i < end; i++) {
    struct nbc_step *step = &s->steps[i];
    int tag = s->tag + step->part;
    if (step->kind == STEP_SEND)
      s->active[s->nactive++] = thr_isend(s->rank, &s->comm, s->comm.ctx + 1, step->src,
                                          step->count, step->type, step->peer, tag);
    else if (step->kind == STEP_RECV)
      s->active[s->nactive++] = thr_irecv(s->rank, &s->comm, s->comm.ctx + 1, step->dst,
                                          step->count, step->type, step->peer, tag);
  }
  s->next_step = end < s->nsteps ? end + 1 : end;
}

static void finish(struct thr_nbc *s)
{
  s->done = 1;
  for (int i = 0; i < s->ntemps; i++)
    free(s->temps[i]);
  free(s->temps), free(s->steps), free(s->active), free(s->comm.world);
  s->temps = NULL, s->steps = NULL, s->active = NULL, s->comm.world = NULL;
}

/* Runs rounds as far as their messages allow. */
static void advance(struct thr_nbc *s)
{
  while (!s->done) {
    int still = 0;
    for (int i = 0; i < s->nactive; i++)
      if (!thr_request_test(s->active[i], &s->error))
        s->active[still++] = s->active[i];
    s->nactive = still;
    if (still)
      return;
    if (s->next_step == s->nsteps) {
      finish(s);
      return;
    }
    start_round(s);
  }
}

void thr_nbc_progress(struct thr_rank *r)
{
  if (!r || !r->nbc_pending || r->nbc_busy)
    return;
  r->nbc_busy = 1;
  thr_host_drain();
  for (struct thr_nbc **p = &r->nbc_pending; *p;) {
    struct thr_nbc *s = *p;
    advance(s);
    if (s->done)
      *p = s->next;
    else
      p = &s->next;
  }
  r->nbc_busy = 0;
}

static void progress_self(void)
{
  thr_nbc_progress(current_rank);
}

static int schedule_test(struct thr_nbc *s)
{
  if (!s->done)
    thr_nbc_progress(s->rank);
  return s->done;
}

static int schedule_error(const struct thr_nbc *s)
{
  return s->error;
}

static void schedule_free(struct thr_nbc *s)
{
  free(s);
}

/* The tag of a new call on c: TAG_PARTS tags of its own. */
static int next_tag(struct thr_comm *c)
{
  return TAG_BASE + (int)((c->nbc_seq++ & 0xffffffu) * TAG_PARTS);
}

/* A copy of what the schedule needs of a communicator. */
static struct thr_comm comm_copy(const struct thr_comm *c)
{
  struct thr_comm copy = {.ctx = c->ctx, .size = c->size, .rank = c->rank,
                          .world = thr_malloc((size_t)c->size * sizeof(int))};
  memcpy(copy.world, c->world, (size_t)c->size * sizeof(int));
  return copy;
}

/* A new schedule of the call, started (its first round's messages are out). */
static struct thr_nbc *start(struct thr_rank *r, const struct thr_comm *c, int tag,
                             const struct thr_coll_args *a)
{
  struct thr_nbc *s = thr_calloc(1, sizeof *s);
  s->rank = r;
  s->comm = comm_copy(c);
  s->tag = tag;
  build(s, a);
  current_rank = r;
  advance(s);
  if (!s->done) {
    struct thr_nbc **p = &r->nbc_pending;
    while (*p)
      p = &(*p)->next;
    *p = s;
  }
  return s;
}

static struct thr_nbc *start_kept(struct thr_rank *r, const struct thr_coll_args *args)
{
  return start(r, &args->kept_comm, args->tag, args);
}

static void args_free(struct thr_coll_args *args)
{
  if (args)
    free(args->kept_comm.world);
  free(args);
}

const struct thr_nbc_calls thr_coll_nbc_calls = {
  .progress_self = progress_self, .test = schedule_test, .error = schedule_error,
  .free = schedule_free, .start = start_kept, .args_free = args_free};

static int post(struct thr_rank *r, struct thr_coll_args a, MPI_Request *req)
{
  struct thr_comm *c = thr_comm_of(r, a.comm);
  *req = thr_coll_request(r, start(r, c, next_tag(c), &a));
  return MPI_SUCCESS;
}

static int init(struct thr_rank *r, struct thr_coll_args a, MPI_Info info, MPI_Request *req)
{
  (void)info;
  struct thr_comm *c = thr_comm_of(r, a.comm);
  struct thr_coll_args *kept = thr_malloc(sizeof *kept);
  *kept = a;
  kept->kept_comm = comm_copy(c);
  kept->tag = next_tag(c);
  *req = thr_persistent_coll_request(r, kept, a.comm);
  return MPI_SUCCESS;
}

/* ---- the calls: their arguments, started now or kept for MPI_Start ---- */

#define ROOTED(k, sb, sc, st, rb, rc, rt, rt_, c)                                              \
  (struct thr_coll_args){.kind = k, .sbuf = sb, .scount = sc, .stype = st, .rbuf = rb,         \
                         .rcount = rc, .rtype = rt, .root = rt_, .comm = c}
#define REDUCING(k, sb, rb, n, t, o, rt_, c)                                                   \
  (struct thr_coll_args){.kind = k, .sbuf = sb, .rbuf = rb, .rcount = n, .rtype = t, .op = o, \
                         .root = rt_, .comm = c}

static struct thr_coll_args barrier_args(MPI_Comm comm)
{
  return (struct thr_coll_args){.kind = K_BARRIER, .comm = comm};
}

static struct thr_coll_args bcast_args(void *buf, int count, MPI_Datatype type, int root,
                                       MPI_Comm comm)
{
  return ROOTED(K_BCAST, NULL, 0, MPI_BYTE, buf, count, type, root, comm);
}

static struct thr_coll_args reduce_scatter_args(const void *sbuf, void *rbuf, const int *counts,
                                                MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
  struct thr_coll_args a = REDUCING(K_REDUCE_SCATTER, sbuf, rbuf, 0, type, op, 0, comm);
  a.rcounts = counts;
  return a;
}

static struct thr_coll_args gatherv_args(const void *sbuf, int scount, MPI_Datatype stype,
                                         void *rbuf, const int *rcounts, const int *displs,
                                         MPI_Datatype rtype, int root, MPI_Comm comm)
{
  struct thr_coll_args a = ROOTED(K_GATHERV, sbuf, scount, stype, rbuf, 0, rtype, root, comm);
  a.rcounts = rcounts, a.rdispls = displs;
  return a;
}

static struct thr_coll_args scatterv_args(const void *sbuf, const int *scounts,
                                          const int *displs, MPI_Datatype stype, void *rbuf,
                                          int rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
  struct thr_coll_args a = ROOTED(K_SCATTERV, sbuf, 0, stype, rbuf, rcount, rtype, root, comm);
  a.scounts = scounts, a.sdispls = displs;
  return a;
}

static struct thr_coll_args allgatherv_args(const void *sbuf, int scount, MPI_Datatype stype,
                                            void *rbuf, const int *rcounts, const int *displs,
                                            MPI_Datatype rtype, MPI_Comm comm)
{
  struct thr_coll_args a = ROOTED(K_ALLGATHERV, sbuf, scount, stype, rbuf, 0, rtype, 0, comm);
  a.rcounts = rcounts, a.rdispls = displs;
  return a;
}

static struct thr_coll_args alltoallv_args(const void *sbuf, const int *scounts,
                                           const int *sdispls, MPI_Datatype stype, void *rbuf,
                                           const int *rcounts, const int *rdispls,
                                           MPI_Datatype rtype, MPI_Comm comm)
{
  struct thr_coll_args a = ROOTED(K_ALLTOALLV, sbuf, 0, stype, rbuf, 0, rtype, 0, comm);
  a.scounts = scounts, a.sdispls = sdispls, a.rcounts = rcounts, a.rdispls = rdispls;
  return a;
}

static struct thr_coll_args alltoallw_args(const void *sbuf, const int *scounts,
                                           const int *sdispls, const MPI_Datatype *stypes,
                                           void *rbuf, const int *rcounts, const int *rdispls,
                                           const MPI_Datatype *rtypes, MPI_Comm comm)
{
  struct thr_coll_args a = ROOTED(K_ALLTOALLW, sbuf, 0, MPI_BYTE, rbuf, 0, MPI_BYTE, 0, comm);
  a.scounts = scounts, a.sdispls = sdispls, a.stypes = stypes;
  a.rcounts = rcounts, a.rdispls = rdispls, a.rtypes = rtypes;
  return a;
}

/* Each collective X defines MPI_IX (post) and MPI_X_init (init) from one argument list. */
#define NBC_PAIR(iname, name, params, args_expr)                                               \
  int thr_##iname(struct thr_rank *r, THR_UNPAREN params, MPI_Request *req)                     \
  {                                                                                            \
    return post(r, args_expr, req);                                                            \
  }                                                                                            \
  int thr_##name##_init(struct thr_rank *r, THR_UNPAREN params, MPI_Info info, MPI_Request *req) \
  {                                                                                            \
    return init(r, args_expr, info, req);                                                      \
  }

#define BUFS const void *sbuf, int scount, MPI_Datatype stype, void *rbuf
NBC_PAIR(Ibarrier, Barrier, (MPI_Comm comm), barrier_args(comm))
NBC_PAIR(Ibcast, Bcast, (void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm),
         bcast_args(buf, count, type, root, comm))
NBC_PAIR(Ireduce, Reduce, (const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                  MPI_Comm comm), REDUCING(K_REDUCE, sbuf, rbuf, count, type, op, root, comm))
NBC_PAIR(Iallreduce, Allreduce, (const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                     MPI_Comm comm), REDUCING(K_ALLREDUCE, sbuf, rbuf, count, type, op, 0, comm))
NBC_PAIR(Ireduce_scatter_block, Reduce_scatter_block, (const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                                MPI_Op op, MPI_Comm comm),
         REDUCING(K_REDUCE_SCATTER_BLOCK, sbuf, rbuf, count, type, op, 0, comm))
NBC_PAIR(Ireduce_scatter, Reduce_scatter, (const void *sbuf, void *rbuf, const int *counts, MPI_Datatype type,
                          MPI_Op op, MPI_Comm comm),
         reduce_scatter_args(sbuf, rbuf, counts, type, op, comm))
NBC_PAIR(Iscan, Scan, (const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                MPI_Comm comm), REDUCING(K_SCAN, sbuf, rbuf, count, type, op, 0, comm))
NBC_PAIR(Iexscan, Exscan, (const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm), REDUCING(K_EXSCAN, sbuf, rbuf, count, type, op, 0, comm))
NBC_PAIR(Igather, Gather, (BUFS, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm),
         ROOTED(K_GATHER, sbuf, scount, stype, rbuf, rcount, rtype, root, comm))
NBC_PAIR(Igatherv, Gatherv, (BUFS, const int *rcounts, const int *displs, MPI_Datatype rtype, int root,
                   MPI_Comm comm),
         gatherv_args(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm))
NBC_PAIR(Iscatter, Scatter, (BUFS, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm),
         ROOTED(K_SCATTER, sbuf, scount, stype, rbuf, rcount, rtype, root, comm))
NBC_PAIR(Iscatterv, Scatterv, (const void *sbuf, const int *scounts, const int *displs, MPI_Datatype stype,
                    void *rbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm),
         scatterv_args(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm))
NBC_PAIR(Iallgather, Allgather, (BUFS, int rcount, MPI_Datatype rtype, MPI_Comm comm),
         ROOTED(K_ALLGATHER, sbuf, scount, stype, rbuf, rcount, rtype, 0, comm))
NBC_PAIR(Iallgatherv, Allgatherv, (BUFS, const int *rcounts, const int *displs, MPI_Datatype rtype,
                      MPI_Comm comm),
         allgatherv_args(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm))
NBC_PAIR(Ialltoall, Alltoall, (BUFS, int rcount, MPI_Datatype rtype, MPI_Comm comm),
         ROOTED(K_ALLTOALL, sbuf, scount, stype, rbuf, rcount, rtype, 0, comm))
NBC_PAIR(Ialltoallv, Alltoallv, (const void *sbuf, const int *scounts, const int *sdispls,
                     MPI_Datatype stype, void *rbuf, const int *rcounts, const int *rdispls,
                     MPI_Datatype rtype, MPI_Comm comm),
         alltoallv_args(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm))
NBC_PAIR(Ialltoallw, Alltoallw, (const void *sbuf, const int *scounts, const int *sdispls,
                     const MPI_Datatype *stypes, void *rbuf, const int *rcounts,
                     const int *rdispls, const MPI_Datatype *rtypes, MPI_Comm comm),
         alltoallw_args(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm))
