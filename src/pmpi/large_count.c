/* MPI-4 large-count collectives (MPI_Bcast_c, ...). Clients built against an MPI-4
 * library (mpi4py on MPICH 4.0, for one) call these instead of the int versions.
 * When every count fits in an int, the call goes to mcoll's int wrapper, which runs
 * it (or passes it on, invalid arguments included); otherwise straight to the host
 * MPI's own _c function. Counts and displacements are read only where the standard
 * says they are significant (the root's, for the rooted v collectives; none of the
 * send side's with MPI_IN_PLACE).
 *
 * Every rank of a call must go the same way (mcoll's algorithms and the host's do
 * not meet), and a v collective's displacements are the rank's own business: one
 * rank may place a block above INT_MAX where the others do not. So displacements
 * never choose the way: a rank whose displacements do not fit moves its blocks
 * through a packed copy (rebase_begin/rebase_end) and still calls mcoll's wrapper.
 * Counts do choose it; they describe what the ranks exchange, so for the same
 * datatype every rank that holds them sees the same ones. (Left: a v call where
 * some count does not fit but a rank that does not see it decides alone, e.g. a
 * gatherv sender of a few bytes beside a sender of more than INT_MAX elements; and
 * MPI_Alltoallw_c, whose byte displacements still choose.) */
#include <mpi.h>

#if MPI_VERSION >= 4

#include <limits.h>
#include <stdlib.h>

#include "core/datatype.h"
#include "core/xmalloc.h"
#include "pmpi/wrap.h"

static int fits(MPI_Count n) { return n >= INT_MIN && n <= INT_MAX; }

/* int copies of the n-entry arrays counts (MPI_Count) and displs (MPI_Aint, may be
 * NULL) in one allocation: *out_counts, then *out_displs. Returns 0, allocating
 * nothing, when counts is NULL or an entry of counts does not fit (the host MPI
 * takes those). A displacement that does not fit sets *rebase (may be NULL: then it
 * returns 0 too) and makes *out_displs the blocks' places in rank order
 * (rebase_begin), 0 if even those do not fit. */
static int narrow(const MPI_Count *counts, const MPI_Aint *displs, int n, int **out_counts,
                  int **out_displs, int *rebase) {
  *out_counts = *out_displs = NULL;
  if (rebase) *rebase = 0;
  if (!counts) return 0;
  int far = 0;
  MPI_Count total = 0;
  for (int i = 0; i < n; i++) {
    if (!fits(counts[i])) return 0;
    far |= displs && !fits(displs[i]);
    total += counts[i] > 0 ? counts[i] : 0;
  }
  if (far && (!rebase || !fits(total))) return 0;
  int *ints = mcoll__xmalloc(sizeof(int) * 2 * (size_t)(n > 0 ? n : 1));
  MPI_Count at = 0;
  for (int i = 0; i < n; i++) {
    ints[i] = (int)counts[i];
    if (displs) ints[n + i] = far ? (int)at : (int)displs[i];
    at += counts[i] > 0 ? counts[i] : 0;
  }
  *out_counts = ints;
  *out_displs = displs ? ints + n : NULL;
  if (rebase) *rebase = far;
  return 1;
}

/* One rank's blocks (counts[i] elements of type at displs[i] extents from buf) as a
 * packed copy in rank order, for mcoll's int wrapper: `buf` and `type` to pass it
 * (the user's own when nothing is rebased), and the copy. */
struct rebased {
  void *buf;
  MPI_Datatype type;
  char *packed;
  MPI_Aint extent;
  int size;
};

enum { REBASE_NONE = -1, REBASE_ALL = -2 };

static char *user_block(const struct rebased *r, void *buf, const MPI_Aint *displs, int i) {
  return (char *)buf + displs[i] * r->extent;
}

/* With rebase set: allocates the copy (an element: a contiguous run of the type's
 * size in bytes) and packs into it the block of rank `fill` (or every block, or
 * none), else leaves the user's buffer and type in r. MPI_SUCCESS, or the host MPI's
 * error of a type query. */
static int rebase_begin(struct rebased *r, int rebase, void *buf, const int *counts,
                        const MPI_Aint *displs, const int *places, int n, MPI_Datatype type,
                        int fill) {
  r->buf = buf;
  r->type = type;
  r->packed = NULL;
  if (!rebase) return MPI_SUCCESS;
  MPI_Aint lb;
  int size = MPI_UNDEFINED;
  int err = PMPI_Type_get_extent(type, &lb, &r->extent);
  if (err == MPI_SUCCESS) err = PMPI_Type_size(type, &size);
  if (err == MPI_SUCCESS && size == MPI_UNDEFINED) err = MPI_ERR_TYPE;
  /* (an int count: MPICH's type queries refuse types made by the _c constructors) */
  if (err == MPI_SUCCESS) err = PMPI_Type_contiguous(size, MPI_BYTE, &r->type);
  if (err == MPI_SUCCESS) err = PMPI_Type_commit(&r->type);
  r->size = size;
  if (err != MPI_SUCCESS) return err;
  size_t total = 0;
  for (int i = 0; i < n; i++) total += (size_t)counts[i] * (size_t)r->size;
  r->packed = mcoll__xmalloc(total ? total : 1);
  r->buf = r->packed;
  for (int i = 0; i < n && err == MPI_SUCCESS; i++)
    if (fill == REBASE_ALL || fill == i)
      err = mcoll__pack_move(user_block(r, buf, displs, i), counts[i], type,
                             r->packed + (size_t)places[i] * (size_t)r->size, 1);
  return err;
}

/* Unpacks every block into the user's buffer (drain) and frees the copy. */
static void rebase_end(struct rebased *r, int drain, void *buf, const int *counts,
                       const MPI_Aint *displs, const int *places, int n, MPI_Datatype type) {
  if (!r->packed) return;
  for (int i = 0; drain && i < n; i++)
    mcoll__pack_move(user_block(r, buf, displs, i), counts[i], type,
                     r->packed + (size_t)places[i] * (size_t)r->size, 0);
  free(r->packed);
  PMPI_Type_free(&r->type);
}

/* The collectives whose counts are scalars (SCALAR rows of core/collectives.h),
 * blocking and non-blocking: mcoll's int call when every count fits, else the host
 * MPI's own. (The v/w forms' narrowed arrays would have to live until a
 * non-blocking call completes: their MPI_I*_c go to the host MPI.) */
#define MCOLL_LC_DECL(kind, name) , MCOLL_IF_COUNT(kind, MPI_Count, MCOLL_CTYPE(kind)) name
#define MCOLL_LC_UNFIT(kind, name) MCOLL_IF_COUNT(kind, || !fits(name), )
#define MCOLL_LC_NARROW(kind, name) , MCOLL_IF_COUNT(kind, (int)name, name)
#define MCOLL_LC_FORMS_NONE(Name, lower, UPPER)
#define MCOLL_LC_FORMS_VECTOR(Name, lower, UPPER)
#define MCOLL_LC_FORMS_W(Name, lower, UPPER)
#define MCOLL_LC_FORMS_SCALAR(Name, lower, UPPER)                                               \
  MCOLL_EXPORT int MPI_##Name##_c(MCOLL_ARGLIST(MCOLL_PARAMS_##UPPER, MCOLL_LC_DECL)) {         \
    if (0 MCOLL_PARAMS_##UPPER(MCOLL_LC_UNFIT))                                                 \
      return PMPI_##Name##_c(MCOLL_ARGLIST(MCOLL_PARAMS_##UPPER, MCOLL_PARAM_NAME));            \
    return MPI_##Name(MCOLL_ARGLIST(MCOLL_PARAMS_##UPPER, MCOLL_LC_NARROW));                    \
  }                                                                                             \
  MCOLL_EXPORT int MPI_I##lower##_c(MCOLL_ARGLIST(MCOLL_PARAMS_##UPPER, MCOLL_LC_DECL),         \
                                    MPI_Request *request) {                                     \
    if (0 MCOLL_PARAMS_##UPPER(MCOLL_LC_UNFIT))                                                 \
      return PMPI_I##lower##_c(MCOLL_ARGLIST(MCOLL_PARAMS_##UPPER, MCOLL_PARAM_NAME), request); \
    return MPI_I##lower(MCOLL_ARGLIST(MCOLL_PARAMS_##UPPER, MCOLL_LC_NARROW), request);         \
  }
#define MCOLL_LC_FORMS(Name, lower, UPPER, shape, tnbc) MCOLL_LC_FORMS_##shape(Name, lower, UPPER)
MCOLL_COLLECTIVES(MCOLL_LC_FORMS)

MCOLL_EXPORT int MPI_Reduce_scatter_c(const void *sendbuf, void *recvbuf,
                                      const MPI_Count recvcounts[], MPI_Datatype type, MPI_Op op,
                                      MPI_Comm comm) {
  int *counts, *unused;
  if (!narrow(recvcounts, NULL, mcoll__array_entries(comm), &counts, &unused, NULL))
    return PMPI_Reduce_scatter_c(sendbuf, recvbuf, recvcounts, type, op, comm);
  int err = MPI_Reduce_scatter(sendbuf, recvbuf, counts, type, op, comm);
  free(counts);
  return err;
}

static int my_rank(MPI_Comm comm) {
  int rank = -1;
  return comm != MPI_COMM_NULL && PMPI_Comm_rank(comm, &rank) == MPI_SUCCESS ? rank : -1;
}

MCOLL_EXPORT int MPI_Allgatherv_c(const void *sendbuf, MPI_Count sendcount,
                                  MPI_Datatype sendtype, void *recvbuf,
                                  const MPI_Count recvcounts[], const MPI_Aint displs[],
                                  MPI_Datatype recvtype, MPI_Comm comm) {
  int n = mcoll__array_entries(comm), *counts, *at, rebase;
  if (!fits(sendcount) || !narrow(recvcounts, displs, n, &counts, &at, &rebase))
    return PMPI_Allgatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                             recvtype, comm);
  struct rebased r;
  int in_place = sendbuf == MPI_IN_PLACE;
  int err = rebase_begin(&r, rebase, recvbuf, counts, displs, at, n, recvtype,
                         in_place ? my_rank(comm) : REBASE_NONE);
  if (err == MPI_SUCCESS)
    err = MPI_Allgatherv(sendbuf, (int)sendcount, sendtype, r.buf, counts, at, r.type, comm);
  rebase_end(&r, err == MPI_SUCCESS, recvbuf, counts, displs, at, n, recvtype);
  free(counts);
  return err;
}

MCOLL_EXPORT int MPI_Gatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                               void *recvbuf, const MPI_Count recvcounts[],
                               const MPI_Aint displs[], MPI_Datatype recvtype, int root,
                               MPI_Comm comm) {
  int n = mcoll__array_entries(comm), *counts = NULL, *at = NULL, rebase = 0;
  int is_root = mcoll__is_root(comm, root);
  if (!fits(sendcount) || (is_root && !narrow(recvcounts, displs, n, &counts, &at, &rebase)))
    return PMPI_Gatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                          root, comm);
  struct rebased r;
  int err = rebase_begin(&r, rebase, recvbuf, counts, displs, at, n, recvtype,
                         sendbuf == MPI_IN_PLACE ? root : REBASE_NONE);
  if (err == MPI_SUCCESS)
    err = MPI_Gatherv(sendbuf, (int)sendcount, sendtype, r.buf, counts, at, r.type, root, comm);
  rebase_end(&r, err == MPI_SUCCESS, recvbuf, counts, displs, at, n, recvtype);
  free(counts);
  return err;
}

MCOLL_EXPORT int MPI_Scatterv_c(const void *sendbuf, const MPI_Count sendcounts[],
                                const MPI_Aint displs[], MPI_Datatype sendtype, void *recvbuf,
                                MPI_Count recvcount, MPI_Datatype recvtype, int root,
                                MPI_Comm comm) {
  int n = mcoll__array_entries(comm), *counts = NULL, *at = NULL, rebase = 0;
  if (!fits(recvcount) ||
      (mcoll__is_root(comm, root) && !narrow(sendcounts, displs, n, &counts, &at, &rebase)))
    return PMPI_Scatterv_c(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,
                           root, comm);
  struct rebased r;
  int err = rebase_begin(&r, rebase, (void *)sendbuf, counts, displs, at, n, sendtype,
                         REBASE_ALL);
  if (err == MPI_SUCCESS)
    err = MPI_Scatterv(r.buf, counts, at, r.type, recvbuf, (int)recvcount, recvtype, root, comm);
  rebase_end(&r, 0, NULL, counts, displs, at, n, sendtype);
  free(counts);
  return err;
}

MCOLL_EXPORT int MPI_Alltoallv_c(const void *sendbuf, const MPI_Count sendcounts[],
                                 const MPI_Aint sdispls[], MPI_Datatype sendtype, void *recvbuf,
                                 const MPI_Count recvcounts[], const MPI_Aint rdispls[],
                                 MPI_Datatype recvtype, MPI_Comm comm) {
  int n = mcoll__array_entries(comm), in_place = sendbuf == MPI_IN_PLACE;
  int *scounts = NULL, *sat = NULL, *rcounts, *rat, srebase = 0, rrebase;
  if (!narrow(recvcounts, rdispls, n, &rcounts, &rat, &rrebase))
    return PMPI_Alltoallv_c(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                            rdispls, recvtype, comm);
  if (!in_place && !narrow(sendcounts, sdispls, n, &scounts, &sat, &srebase)) {
    free(rcounts);
    return PMPI_Alltoallv_c(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                            rdispls, recvtype, comm);
  }
  struct rebased send, recv;
  int err = rebase_begin(&send, srebase, (void *)sendbuf, scounts, sdispls, sat, n, sendtype,
                         REBASE_ALL);
  if (err == MPI_SUCCESS)
    err = rebase_begin(&recv, rrebase, recvbuf, rcounts, rdispls, rat, n, recvtype,
                       in_place ? REBASE_ALL : REBASE_NONE);
  else
    recv.packed = NULL;
  if (err == MPI_SUCCESS)
    err = MPI_Alltoallv(in_place ? MPI_IN_PLACE : send.buf, scounts, sat, send.type, recv.buf,
                        rcounts, rat, recv.type, comm);
  rebase_end(&send, 0, NULL, scounts, sdispls, sat, n, sendtype);
  rebase_end(&recv, err == MPI_SUCCESS, recvbuf, rcounts, rdispls, rat, n, recvtype);
  free(scounts);
  free(rcounts);
  return err;
}

MCOLL_EXPORT int MPI_Alltoallw_c(const void *sendbuf, const MPI_Count sendcounts[],
                                 const MPI_Aint sdispls[], const MPI_Datatype sendtypes[],
                                 void *recvbuf, const MPI_Count recvcounts[],
                                 const MPI_Aint rdispls[], const MPI_Datatype recvtypes[],
                                 MPI_Comm comm) {
  int n = mcoll__array_entries(comm);
  int *scounts = NULL, *sat = NULL, *rcounts, *rat;
  if (!narrow(recvcounts, rdispls, n, &rcounts, &rat, NULL))
    return PMPI_Alltoallw_c(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
                            rdispls, recvtypes, comm);
  if (sendbuf != MPI_IN_PLACE && !narrow(sendcounts, sdispls, n, &scounts, &sat, NULL)) {
    free(rcounts);
    return PMPI_Alltoallw_c(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
                            rdispls, recvtypes, comm);
  }
  int err = MPI_Alltoallw(sendbuf, scounts, sat, sendtypes, recvbuf, rcounts, rat, recvtypes,
                          comm);
  free(scounts);
  free(rcounts);
  return err;
}

#endif /* MPI_VERSION >= 4 */
