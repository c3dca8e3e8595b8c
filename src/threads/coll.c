/* Collectives over the runtime's point-to-point, in the communicator's collective
 * context: simple, correct algorithms (linear folds in rank order, so that
 * non-commutative operations come out right); a communicator whose ranks are all
 * threads of this process takes the in-place algorithms of coll_local.c instead, and
 * one across processes the two-level ones of coll_hier.c where they exist. */
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

enum { TAG_BARRIER = 1, TAG_BCAST, TAG_REDUCE, TAG_SCAN, TAG_GATHER, TAG_SCATTER, TAG_ALL };

/* The message algorithms of the v calls, which the regular calls use where they do not
 * take two levels (whatever their v call would take). */
static void alltoallv_messages(struct thr_rank *r, struct thr_comm *c, const void *sbuf,
                               const int *scounts, const int *sdispls, MPI_Datatype stype,
                               void *rbuf, const int *rcounts, const int *rdispls,
                               MPI_Datatype rtype);
static void allgatherv_messages(struct thr_rank *r, struct thr_comm *c, const void *sbuf,
                                int scount, MPI_Datatype stype, void *rbuf, const int *rcounts,
                                const int *displs, MPI_Datatype rtype);

int thr_Barrier(struct thr_rank *r, MPI_Comm comm)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  struct thr_local_group *g = thr_local_group_of(c);
  if (g) {
    thr_local_barrier(g, c);
    return MPI_SUCCESS;
  }
  struct thr_hier *h = thr_hier_of(r, c);
  if (h && thr_hier_takes(h, THR_HIER_BARRIER, 0)) {
    thr_hier_barrier(r, c, h);
    return MPI_SUCCESS;
  }
  if (c->rank == 0) {
    for (int i = 1; i < c->size; i++)
      thr_recv(r, c, NULL, 0, MPI_BYTE, i, TAG_BARRIER);
    for (int i = 1; i < c->size; i++)
      thr_send(r, c, NULL, 0, MPI_BYTE, i, TAG_BARRIER);
  } else {
    thr_send(r, c, NULL, 0, MPI_BYTE, 0, TAG_BARRIER);
    thr_recv(r, c, NULL, 0, MPI_BYTE, 0, TAG_BARRIER);
  }
  return MPI_SUCCESS;
}

/* Binomial tree over ranks relative to the root. */
int thr_Bcast(struct thr_rank *r, void *buf, int count, MPI_Datatype type, int root,
              MPI_Comm comm)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  struct thr_local_group *g = thr_local_group_of(c);
  if (g) {
    if (!thr_local_eager_bcast(g, c, buf, count, type, root))
      thr_local_bcast(g, c, buf, count, type, root);
    return MPI_SUCCESS;
  }
  struct thr_hier *h = thr_hier_of(r, c);
  if (h && thr_hier_takes(h, THR_HIER_BCAST, thr_type_bytes(type, count))) {
    thr_hier_bcast(r, c, h, buf, count, type, root);
    return MPI_SUCCESS;
  }
  int n = c->size, rel = (c->rank - root + n) % n, mask = 1;
  while (mask < n) {
    if (rel & mask) {
      thr_recv(r, c, buf, count, type, (rel - mask + root) % n, TAG_BCAST);
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (rel + mask < n)
      thr_send(r, c, buf, count, type, (rel + mask + root) % n, TAG_BCAST);
  return MPI_SUCCESS;
}

/* The root folds the contributions from the last rank to the first:
 * acc = x_i op acc, so the result is x_0 op x_1 op ... op x_{n-1}. */
int thr_Reduce(struct thr_rank *r, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
               MPI_Op op, int root, MPI_Comm comm)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  struct thr_local_group *g = thr_local_group_of(c);
  if (g) {
    if (!thr_local_eager_reduce(g, c, sbuf, rbuf, count, type, op, root))
      thr_local_reduce(g, c, sbuf, rbuf, count, type, op, root);
    return MPI_SUCCESS;
  }
  struct thr_hier *h = thr_hier_of(r, c);
  if (h && thr_hier_folds_in_order(h, op) &&
      thr_hier_takes(h, THR_HIER_REDUCE, thr_type_bytes(type, count))) {
    thr_hier_reduce(r, c, h, sbuf, rbuf, count, type, op, root);
    return MPI_SUCCESS;
  }
  if (c->rank != root) {
    thr_send(r, c, sbuf, count, type, root, TAG_REDUCE);
    return MPI_SUCCESS;
  }
  const void *mine = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
  void *acc = thr_alloc_typed(count, type), *in = thr_alloc_typed(count, type);
  for (int i = c->size - 1; i >= 0; i--) {
    void *target = i == c->size - 1 ? acc : in;
    if (i == c->rank)
      thr_copy_typed(target, count, type, mine, count, type);
    else
      thr_recv(r, c, target, count, type, i, TAG_REDUCE);
    if (i != c->size - 1)
      PMPI_Reduce_local(in, acc, count, type, op);
  }
  thr_copy_typed(rbuf, count, type, acc, count, type);
  thr_free_typed(acc, type);
  thr_free_typed(in, type);
  return MPI_SUCCESS;
}

int thr_Allreduce(struct thr_rank *r, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                  MPI_Op op, MPI_Comm comm)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  struct thr_local_group *g = thr_local_group_of(c);
  if (g) {
    if (!thr_local_eager_reduce(g, c, sbuf, rbuf, count, type, op, -1))
      thr_local_reduce(g, c, sbuf, rbuf, count, type, op, -1);
    return MPI_SUCCESS;
  }
  struct thr_hier *h = thr_hier_of(r, c);
  if (h && thr_hier_folds_in_order(h, op) &&
      thr_hier_takes(h, THR_HIER_ALLREDUCE, thr_type_bytes(type, count))) {
    thr_hier_allreduce(r, c, h, sbuf, rbuf, count, type, op);
    return MPI_SUCCESS;
  }
  if (sbuf == MPI_IN_PLACE && c->rank != 0)
    sbuf = rbuf;
  thr_Reduce(r, sbuf, rbuf, count, type, op, 0, comm);
  return thr_Bcast(r, rbuf, count, type, 0, comm);
}

int thr_Reduce_scatter_block(struct thr_rank *r, const void *sbuf, void *rbuf, int count,
                             MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  struct thr_local_group *g = thr_local_group_of(c);
  if (g) {
    if (!thr_local_eager_reduce_scatter(g, c, sbuf, rbuf, count, NULL, type, op))
      thr_local_reduce_scatter(g, c, sbuf, rbuf, count, NULL, type, op);
    return MPI_SUCCESS;
  }
  int total = count * c->size;
  void *all = c->rank == 0 ? thr_alloc_typed(total, type) : NULL;
  thr_Reduce(r, sbuf == MPI_IN_PLACE ? rbuf : sbuf, all, total, type, op, 0, comm);
  thr_Scatter(r, all, count, type, rbuf, count, type, 0, comm);
  if (all)
    thr_free_typed(all, type);
  return MPI_SUCCESS;
}

int thr_Reduce_scatter(struct thr_rank *r, const void *sbuf, void *rbuf, const int *counts,
                       MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  struct thr_local_group *g = thr_local_group_of(c);
  if (g) {
    if (!thr_local_eager_reduce_scatter(g, c, sbuf, rbuf, 0, counts, type, op))
      thr_local_reduce_scatter(g, c, sbuf, rbuf, 0, counts, type, op);
    return MPI_SUCCESS;
  }
  int total = 0, *displs = thr_malloc((size_t)c->size * sizeof(int));
  for (int i = 0; i < c->size; i++) {
    displs[i] = total;
    total += counts[i];
  }
  void *all = c->rank == 0 ? thr_alloc_typed(total, type) : NULL;
  thr_Reduce(r, sbuf == MPI_IN_PLACE ? rbuf : sbuf, all, total, type, op, 0, comm);
  thr_Scatterv(r, all, counts, displs, type, rbuf, counts[c->rank], type, 0, comm);
  if (all)
    thr_free_typed(all, type);
  free(displs);
  return MPI_SUCCESS;
}

/* Linear prefix: rank i gets x_0..x_{i-1} from rank i-1 and passes x_0..x_i on. */
static void prefix(struct thr_rank *r, const void *sbuf, void *rbuf, int count,
                   MPI_Datatype type, MPI_Op op, MPI_Comm comm, int exclusive)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  struct thr_local_group *g = thr_local_group_of(c);
  if (g) {
    if (!thr_local_eager_scan(g, c, sbuf, rbuf, count, type, op, exclusive))
      thr_local_scan(g, c, sbuf, rbuf, count, type, op, exclusive);
    return;
  }
  struct thr_hier *h = thr_hier_of(r, c);
  if (h && thr_hier_takes(h, THR_HIER_SCAN, thr_type_bytes(type, count))) {
    thr_hier_scan(r, c, h, sbuf, rbuf, count, type, op, exclusive);
    return;
  }
  const void *mine = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
  void *acc = thr_alloc_typed(count, type);
  thr_copy_typed(acc, count, type, mine, count, type);
  if (c->rank > 0) {
    void *before = thr_alloc_typed(count, type);
    thr_recv(r, c, before, count, type, c->rank - 1, TAG_SCAN);
    PMPI_Reduce_local(before, acc, count, type, op);
    if (exclusive)
      thr_copy_typed(rbuf, count, type, before, count, type);
    thr_free_typed(before, type);
  }
  if (c->rank + 1 < c->size)
    thr_send(r, c, acc, count, type, c->rank + 1, TAG_SCAN);
  if (!exclusive)
    thr_copy_typed(rbuf, count, type, acc, count, type);
  thr_free_typed(acc, type);
}

int thr_Scan(struct thr_rank *r, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
             MPI_Op op, MPI_Comm comm)
{
  prefix(r, sbuf, rbuf, count, type, op, comm, 0);
  return MPI_SUCCESS;
}

int thr_Exscan(struct thr_rank *r, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
               MPI_Op op, MPI_Comm comm)
{
  prefix(r, sbuf, rbuf, count, type, op, comm, 1);
  return MPI_SUCCESS;
}

/* Each rank sends its block to the root. */
static void gatherv_messages(struct thr_rank *r, struct thr_comm *c, const void *sbuf,
                             int scount, MPI_Datatype stype, void *rbuf, const int *rcounts,
                             const int *displs, MPI_Datatype rtype, int root)
{
  if (c->rank != root) {
    thr_send(r, c, sbuf, scount, stype, root, TAG_GATHER);
    return;
  }
  for (int i = 0; i < c->size; i++) {
    char *at = thr_block_at(rbuf, displs[i], rtype);
    if (i != root)
      thr_recv(r, c, at, rcounts[i], rtype, i, TAG_GATHER);
    else if (sbuf != MPI_IN_PLACE)
      thr_copy_typed(at, rcounts[i], rtype, sbuf, scount, stype);
  }
}

int thr_Gatherv(struct thr_rank *r, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                const int *rcounts, const int *displs, MPI_Datatype rtype, int root,
                MPI_Comm comm)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  struct thr_local_group *g = thr_local_group_of(c);
  if (g) {
    if (!thr_local_eager_gatherv(g, c, sbuf, scount, stype, rbuf, rcounts, displs, rtype, root))
      thr_local_gatherv(g, c, sbuf, scount, stype, rbuf, 0, rcounts, displs, rtype, root);
    return MPI_SUCCESS;
  }
  struct thr_hier *h = thr_hier_of(r, c);
  if (h && thr_hier_takes(h, THR_HIER_GATHERV, 0)) {
    thr_hier_gatherv(r, c, h, sbuf, scount, stype, rbuf, rcounts, displs, rtype, root);
    return MPI_SUCCESS;
  }
  gatherv_messages(r, c, sbuf, scount, stype, rbuf, rcounts, displs, rtype, root);
  return MPI_SUCCESS;
}

/* Counts and displacements of a regular (non-v) call, for the v algorithms. */
struct layout {
  int *counts, *displs;
};

static struct layout regular_layout(struct thr_rank *r, MPI_Comm comm, int count)
{
  int n = thr_comm_of(r, comm)->size;
  struct layout l = {thr_malloc((size_t)n * sizeof(int)), thr_malloc((size_t)n * sizeof(int))};
  for (int i = 0; i < n; i++) {
    l.counts[i] = count;
    l.displs[i] = i * count;
  }
  return l;
}

static void free_layout(struct layout l)
{
  free(l.counts);
  free(l.displs);
}

int thr_Gather(struct thr_rank *r, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
               int rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  struct thr_local_group *g = thr_local_group_of(c);
  if (g) {
    if (!thr_local_eager_gather(g, c, sbuf, scount, stype, rbuf, rcount, rtype, root))
      thr_local_gatherv(g, c, sbuf, scount, stype, rbuf, rcount, NULL, NULL, rtype, root);
    return MPI_SUCCESS;
  }
  struct thr_hier *h = thr_hier_of(r, c);
  if (h && thr_hier_takes(h, THR_HIER_GATHER, c->rank == root ? thr_type_bytes(rtype, rcount)
                                                                 : thr_type_bytes(stype, scount))) {
    thr_hier_gather(r, c, h, sbuf, scount, stype, rbuf, rcount, rtype, root);
    return MPI_SUCCESS;
  }
  struct layout l = regular_layout(r, comm, rcount);
  gatherv_messages(r, c, sbuf, scount, stype, rbuf, l.counts, l.displs, rtype, root);
  free_layout(l);
  return MPI_SUCCESS;
}

/* The root sends each rank its block. */
static void scatterv_messages(struct thr_rank *r, struct thr_comm *c, const void *sbuf,
                              const int *scounts, const int *displs, MPI_Datatype stype,
                              void *rbuf, int rcount, MPI_Datatype rtype, int root)
{
  if (c->rank != root) {
    thr_recv(r, c, rbuf, rcount, rtype, root, TAG_SCATTER);
    return;
  }
  for (int i = 0; i < c->size; i++) {
    const char *at = thr_block_at(sbuf, displs[i], stype);
    if (i != root)
      thr_send(r, c, at, scounts[i], stype, i, TAG_SCATTER);
    else if (rbuf != MPI_IN_PLACE)
      thr_copy_typed(rbuf, rcount, rtype, at, scounts[i], stype);
  }
}

int thr_Scatterv(struct thr_rank *r, const void *sbuf, const int *scounts, const int *displs,
                 MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
                 MPI_Comm comm)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  struct thr_local_group *g = thr_local_group_of(c);
  if (g) {
    if (!thr_local_eager_scatterv(g, c, sbuf, scounts, displs, stype, rbuf, rcount, rtype, root))
      thr_local_scatterv(g, c, sbuf, 0, scounts, displs, stype, rbuf, rcount, rtype, root);
    return MPI_SUCCESS;
  }
  struct thr_hier *h = thr_hier_of(r, c);
  if (h && thr_hier_takes(h, THR_HIER_SCATTERV, 0)) {
    thr_hier_scatterv(r, c, h, sbuf, scounts, displs, stype, rbuf, rcount, rtype, root);
    return MPI_SUCCESS;
  }
  scatterv_messages(r, c, sbuf, scounts, displs, stype, rbuf, rcount, rtype, root);
  return MPI_SUCCESS;
}

int thr_Scatter(struct thr_rank *r, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                int rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  struct thr_local_group *g = thr_local_group_of(c);
  if (g) {
    if (!thr_local_eager_scatter(g, c, sbuf, scount, stype, rbuf, rcount, rtype, root))
      thr_local_scatterv(g, c, sbuf, scount, NULL, NULL, stype, rbuf, rcount, rtype, root);
    return MPI_SUCCESS;
  }
  struct thr_hier *h = thr_hier_of(r, c);
  if (h && thr_hier_takes(h, THR_HIER_SCATTER, c->rank == root ? thr_type_bytes(stype, scount)
                                                                  : thr_type_bytes(rtype, rcount))) {
    thr_hier_scatter(r, c, h, sbuf, scount, stype, rbuf, rcount, rtype, root);
    return MPI_SUCCESS;
  }
  struct layout l = regular_layout(r, comm, scount);
  scatterv_messages(r, c, sbuf, l.counts, l.displs, stype, rbuf, rcount, rtype, root);
  free_layout(l);
  return MPI_SUCCESS;
}

/* Every rank sends block i of its send layout to rank i and receives block i of its
 * receive layout from rank i, all at once; displacements in bytes, a type per block. */
static void exchange(struct thr_rank *r, struct thr_comm *c, const void *sbuf,
                     const int *scounts, const MPI_Aint *sdispls, const MPI_Datatype *stypes,
                     void *rbuf, const int *rcounts, const MPI_Aint *rdispls,
                     const MPI_Datatype *rtypes)
{
  int n = c->size, me = c->rank;
  struct thr_request **reqs = thr_malloc((size_t)(2 * n) * sizeof *reqs);
  int nreqs = 0;
  for (int k = 1; k < n; k++) {
    int from = (me - k + n) % n;
    reqs[nreqs++] = thr_irecv(r, c, c->ctx + 1, (char *)rbuf + rdispls[from], rcounts[from],
                              rtypes[from], from, TAG_ALL);
  }
  for (int k = 1; k < n; k++) {
    int to = (me + k) % n;
    reqs[nreqs++] = thr_isend(r, c, c->ctx + 1, (const char *)sbuf + sdispls[to], scounts[to],
                              stypes[to], to, TAG_ALL);
  }
  thr_copy_typed((char *)rbuf + rdispls[me], rcounts[me], rtypes[me],
             (const char *)sbuf + sdispls[me], scounts[me], stypes[me]);
  for (int i = 0; i < nreqs; i++)
    thr_wait(r, reqs[i], MPI_STATUS_IGNORE);
  free(reqs);
}

/* The byte layout of a v call with one type. */
static void byte_layout(int n, const int *displs, MPI_Datatype type, MPI_Aint **bytes,
                        MPI_Datatype **types)
{
  *bytes = thr_malloc((size_t)n * sizeof **bytes);
  *types = thr_malloc((size_t)n * sizeof **types);
  MPI_Aint extent = thr_extent_of(type);
  for (int i = 0; i < n; i++) {
    (*bytes)[i] = displs[i] * extent;
    (*types)[i] = type;
  }
}

static void exchange_v(struct thr_rank *r, struct thr_comm *c, const void *sbuf,
                       const int *scounts, const int *sdispls, MPI_Datatype stype, void *rbuf,
                       const int *rcounts, const int *rdispls, MPI_Datatype rtype)
{
  MPI_Aint *sbytes, *rbytes;
  MPI_Datatype *stypes, *rtypes;
  byte_layout(c->size, sdispls, stype, &sbytes, &stypes);
  byte_layout(c->size, rdispls, rtype, &rbytes, &rtypes);
  exchange(r, c, sbuf, scounts, sbytes, stypes, rbuf, rcounts, rbytes, rtypes);
  free(sbytes), free(stypes), free(rbytes), free(rtypes);
}

int thr_Alltoallw(struct thr_rank *r, const void *sbuf, const int *scounts, const int *sdispls,
                  const MPI_Datatype *stypes, void *rbuf, const int *rcounts,
                  const int *rdispls, const MPI_Datatype *rtypes, MPI_Comm comm)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  struct thr_local_group *g = thr_local_group_of(c);
  if (g) {
    if (!thr_local_eager_alltoallw(g, c, sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls,
                                   rtypes))
      thr_local_alltoallw(g, c, sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes);
    return MPI_SUCCESS;
  }
  struct thr_hier *h = thr_hier_of(r, c);
  if (h && thr_hier_takes(h, THR_HIER_ALLTOALLW, 0)) {
    thr_hier_alltoallw(r, c, h, sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes);
    return MPI_SUCCESS;
  }
  int n = c->size;
  MPI_Aint *sbytes = thr_malloc((size_t)n * sizeof *sbytes), *rbytes = thr_malloc((size_t)n * sizeof *rbytes);
  for (int i = 0; i < n; i++) {
    sbytes[i] = sdispls ? sdispls[i] : 0;
    rbytes[i] = rdispls[i];
  }
  void *copy = NULL;
  if (sbuf == MPI_IN_PLACE) { /* send from a copy of the receive buffer's blocks */
    MPI_Aint span = 0;
    for (int i = 0; i < n; i++) {
      MPI_Aint lb, extent;
      PMPI_Type_get_extent(rtypes[i], &lb, &extent);
      if (rdispls[i] + rcounts[i] * extent > span)
        span = rdispls[i] + rcounts[i] * extent;
    }
    copy = thr_malloc(span > 0 ? (size_t)span : 1);
    memcpy(copy, rbuf, (size_t)span);
    sbuf = copy, scounts = rcounts, stypes = rtypes;
    for (int i = 0; i < n; i++)
      sbytes[i] = rdispls[i];
  }
  exchange(r, c, sbuf, scounts, sbytes, stypes, rbuf, rcounts, rbytes, rtypes);
  free(copy), free(sbytes), free(rbytes);
  return MPI_SUCCESS;
}

int thr_Alltoallv(struct thr_rank *r, const void *sbuf, const int *scounts, const int *sdispls,
                  MPI_Datatype stype, void *rbuf, const int *rcounts, const int *rdispls,
                  MPI_Datatype rtype, MPI_Comm comm)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  struct thr_local_group *g = thr_local_group_of(c);
  if (g) {
    if (!thr_local_eager_alltoallv(g, c, sbuf, 0, scounts, sdispls, stype, rbuf, 0, rcounts,
                                   rdispls, rtype))
      thr_local_alltoallv(g, c, sbuf, 0, scounts, sdispls, stype, rbuf, 0, rcounts, rdispls,
                          rtype);
    return MPI_SUCCESS;
  }
  struct thr_hier *h = thr_hier_of(r, c);
  if (h && thr_hier_takes(h, THR_HIER_ALLTOALLV, 0)) {
    thr_hier_alltoallv(r, c, h, sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype);
    return MPI_SUCCESS;
  }
  alltoallv_messages(r, c, sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype);
  return MPI_SUCCESS;
}

/* The exchange (from a copy of the receive buffer in place). */
static void alltoallv_messages(struct thr_rank *r, struct thr_comm *c, const void *sbuf,
                               const int *scounts, const int *sdispls, MPI_Datatype stype,
                               void *rbuf, const int *rcounts, const int *rdispls,
                               MPI_Datatype rtype)
{
  if (sbuf == MPI_IN_PLACE) { /* send from a copy of the receive buffer */
    MPI_Aint span = 0;
    for (int i = 0; i < c->size; i++)
      if (rdispls[i] + rcounts[i] > span)
        span = rdispls[i] + rcounts[i];
    void *copy = thr_alloc_typed((int)span, rtype);
    thr_copy_typed(copy, (int)span, rtype, rbuf, (int)span, rtype);
    exchange_v(r, c, copy, rcounts, rdispls, rtype, rbuf, rcounts, rdispls, rtype);
    thr_free_typed(copy, rtype);
    return;
  }
  exchange_v(r, c, sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype);
}

int thr_Alltoall(struct thr_rank *r, const void *sbuf, int scount, MPI_Datatype stype,
                 void *rbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  struct thr_local_group *g = thr_local_group_of(c);
  if (g) {
    if (!thr_local_eager_alltoallv(g, c, sbuf, scount, NULL, NULL, stype, rbuf, rcount, NULL,
                                   NULL, rtype))
      thr_local_alltoallv(g, c, sbuf, scount, NULL, NULL, stype, rbuf, rcount, NULL, NULL, rtype);
    return MPI_SUCCESS;
  }
  struct thr_hier *h = thr_hier_of(r, c);
  if (h && thr_hier_takes(h, THR_HIER_ALLTOALL, thr_type_bytes(rtype, rcount))) {
    thr_hier_alltoall(r, c, h, sbuf, scount, stype, rbuf, rcount, rtype);
    return MPI_SUCCESS;
  }
  struct layout s = regular_layout(r, comm, scount), d = regular_layout(r, comm, rcount);
  alltoallv_messages(r, c, sbuf, s.counts, s.displs, stype, rbuf, d.counts, d.displs, rtype);
  free_layout(s);
  free_layout(d);
  return MPI_SUCCESS;
}

/* Every rank's block to every rank: the exchange with the same block for all. */
int thr_Allgatherv(struct thr_rank *r, const void *sbuf, int scount, MPI_Datatype stype,
                   void *rbuf, const int *rcounts, const int *displs, MPI_Datatype rtype,
                   MPI_Comm comm)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  struct thr_local_group *g = thr_local_group_of(c);
  if (g) {
    if (!thr_local_eager_allgatherv(g, c, sbuf, scount, stype, rbuf, 0, rcounts, displs, rtype))
      thr_local_allgatherv(g, c, sbuf, scount, stype, rbuf, 0, rcounts, displs, rtype);
    return MPI_SUCCESS;
  }
  struct thr_hier *h = thr_hier_of(r, c);
  if (h && thr_hier_takes(h, THR_HIER_ALLGATHERV, 0)) {
    thr_hier_allgatherv(r, c, h, sbuf, scount, stype, rbuf, 0, rcounts, displs, rtype);
    return MPI_SUCCESS;
  }
  allgatherv_messages(r, c, sbuf, scount, stype, rbuf, rcounts, displs, rtype);
  return MPI_SUCCESS;
}

static void allgatherv_messages(struct thr_rank *r, struct thr_comm *c, const void *sbuf,
                                int scount, MPI_Datatype stype, void *rbuf, const int *rcounts,
                                const int *displs, MPI_Datatype rtype)
{
  int n = c->size;
  if (sbuf == MPI_IN_PLACE) {
    sbuf = thr_block_at(rbuf, displs[c->rank], rtype);
    scount = rcounts[c->rank];
    stype = rtype;
  }
  int *scounts = thr_malloc((size_t)n * sizeof(int)), *sdispls = thr_calloc((size_t)n, sizeof(int));
  for (int i = 0; i < n; i++)
    scounts[i] = scount;
  if (thr_block_at(rbuf, displs[c->rank], rtype) == (const char *)sbuf)
    scounts[c->rank] = 0; /* (already in place) */
  exchange_v(r, c, sbuf, scounts, sdispls, stype, rbuf, rcounts, displs, rtype);
  free(scounts);
  free(sdispls);
}

int thr_Allgather(struct thr_rank *r, const void *sbuf, int scount, MPI_Datatype stype,
                  void *rbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  struct thr_local_group *g = thr_local_group_of(c);
  if (g) {
    if (!thr_local_eager_allgatherv(g, c, sbuf, scount, stype, rbuf, rcount, NULL, NULL, rtype))
      thr_local_allgatherv(g, c, sbuf, scount, stype, rbuf, rcount, NULL, NULL, rtype);
    return MPI_SUCCESS;
  }
  struct thr_hier *h = thr_hier_of(r, c);
  if (h && thr_hier_takes(h, THR_HIER_ALLGATHER, thr_type_bytes(rtype, rcount))) {
    thr_hier_allgatherv(r, c, h, sbuf, scount, stype, rbuf, rcount, NULL, NULL, rtype);
    return MPI_SUCCESS;
  }
  struct layout l = regular_layout(r, comm, rcount);
  allgatherv_messages(r, c, sbuf, scount, stype, rbuf, l.counts, l.displs, rtype);
  free_layout(l);
  return MPI_SUCCESS;
}
