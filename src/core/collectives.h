/* The MPI collectives mcoll takes over, one row each: the single list from which
 * pmpi/ makes every entry point (blocking, MPI_I*, persistent, large-count,
 * Fortran), and the argument record of a call, which a task carries (task/task.h)
 * and T-NBC hands on (tnbc/entry.h).
 *
 * A row: C(Name, lower, UPPER, SHAPE, TNBC)
 *   Name, lower, UPPER  MPI_<Name> and MPI_I<lower>, mpi_<lower>/MPI_<UPPER> in
 *                       Fortran; mcoll__wrap_<lower> is its body (pmpi/wrap.h),
 *                       MCOLL_COLL_<UPPER> its counter; MCOLL_PARAMS_<UPPER>(X)
 *                       its parameters in MPI's order.
 *   SHAPE   NONE    no buffers (barrier);
 *           SCALAR  one count per side: MPI_<Name>_c and MPI_I<lower>_c narrow the
 *                   counts to int and take mcoll's call (pmpi/large_count.c);
 *           VECTOR  count and displacement arrays: the non-blocking and persistent
 *                   forms copy them (the caller may change them before the call
 *                   completes); the large-count forms are written by hand;
 *           W       as VECTOR, with arrays of datatypes (alltoallw): its Fortran
 *                   entry converts them and is written by hand too.
 *   TNBC    TNBC: the blocking call may return early (tnbc/entry.h) when T-NBC is
 *           on; NO_TNBC: never.
 *
 * A parameter: X(KIND, name). Its kind says its C type (MCOLL_KIND_<KIND>) and what
 * each form does with it: SBUF/RBUF a send/receive buffer (Fortran's MPI_IN_PLACE
 * and MPI_BOTTOM are converted), COUNT an element count (MPI_Count in the
 * large-count forms), ROOT, TYPE, OP, COMM; INTS an array of ints (counts or
 * displacements) significant on every rank, ROOT_INTS one significant at the root
 * only, TYPES an array of datatypes; one entry per rank of the (remote) group. */
#ifndef MCOLL_COLLECTIVES_H
#define MCOLL_COLLECTIVES_H

#include <mpi.h>

#define MCOLL_COLLECTIVES(C)                                                    \
  C(Barrier, barrier, BARRIER, NONE, NO_TNBC)                                   \
  C(Bcast, bcast, BCAST, SCALAR, TNBC)                                          \
  C(Reduce, reduce, REDUCE, SCALAR, NO_TNBC)                                    \
  C(Allreduce, allreduce, ALLREDUCE, SCALAR, TNBC)                              \
  C(Scan, scan, SCAN, SCALAR, NO_TNBC)                                          \
  C(Exscan, exscan, EXSCAN, SCALAR, NO_TNBC)                                    \
  C(Reduce_scatter_block, reduce_scatter_block, REDUCE_SCATTER_BLOCK, SCALAR, NO_TNBC) \
  C(Reduce_scatter, reduce_scatter, REDUCE_SCATTER, VECTOR, NO_TNBC)            \
  C(Allgather, allgather, ALLGATHER, SCALAR, TNBC)                              \
  C(Allgatherv, allgatherv, ALLGATHERV, VECTOR, TNBC)                           \
  C(Gather, gather, GATHER, SCALAR, NO_TNBC)                                    \
  C(Gatherv, gatherv, GATHERV, VECTOR, NO_TNBC)                                 \
  C(Scatter, scatter, SCATTER, SCALAR, NO_TNBC)                                 \
  C(Scatterv, scatterv, SCATTERV, VECTOR, NO_TNBC)                              \
  C(Alltoall, alltoall, ALLTOALL, SCALAR, TNBC)                                 \
  C(Alltoallv, alltoallv, ALLTOALLV, VECTOR, TNBC)                              \
  C(Alltoallw, alltoallw, ALLTOALLW, W, NO_TNBC)

#define MCOLL_PARAMS_BARRIER(X) X(COMM, comm)
#define MCOLL_PARAMS_BCAST(X) X(RBUF, buf) X(COUNT, count) X(TYPE, type) X(ROOT, root) X(COMM, comm)
#define MCOLL_PARAMS_REDUCE(X)                                                  \
  X(SBUF, sendbuf) X(RBUF, recvbuf) X(COUNT, count) X(TYPE, type) X(OP, op) X(ROOT, root) \
  X(COMM, comm)
#define MCOLL_PARAMS_ALLREDUCE(X)                                               \
  X(SBUF, sendbuf) X(RBUF, recvbuf) X(COUNT, count) X(TYPE, type) X(OP, op) X(COMM, comm)
#define MCOLL_PARAMS_SCAN MCOLL_PARAMS_ALLREDUCE
#define MCOLL_PARAMS_EXSCAN MCOLL_PARAMS_ALLREDUCE
#define MCOLL_PARAMS_REDUCE_SCATTER_BLOCK(X)                                    \
  X(SBUF, sendbuf) X(RBUF, recvbuf) X(COUNT, recvcount) X(TYPE, type) X(OP, op) X(COMM, comm)
#define MCOLL_PARAMS_REDUCE_SCATTER(X)                                          \
  X(SBUF, sendbuf) X(RBUF, recvbuf) X(INTS, recvcounts) X(TYPE, type) X(OP, op) X(COMM, comm)
#define MCOLL_PARAMS_ALLGATHER(X)                                               \
  X(SBUF, sendbuf) X(COUNT, sendcount) X(TYPE, sendtype)                        \
  X(RBUF, recvbuf) X(COUNT, recvcount) X(TYPE, recvtype) X(COMM, comm)
#define MCOLL_PARAMS_ALLTOALL MCOLL_PARAMS_ALLGATHER
#define MCOLL_PARAMS_ALLGATHERV(X)                                              \
  X(SBUF, sendbuf) X(COUNT, sendcount) X(TYPE, sendtype)                        \
  X(RBUF, recvbuf) X(INTS, recvcounts) X(INTS, displs) X(TYPE, recvtype) X(COMM, comm)
#define MCOLL_PARAMS_GATHER(X)                                                  \
  X(SBUF, sendbuf) X(COUNT, sendcount) X(TYPE, sendtype)                        \
  X(RBUF, recvbuf) X(COUNT, recvcount) X(TYPE, recvtype) X(ROOT, root) X(COMM, comm)
#define MCOLL_PARAMS_SCATTER MCOLL_PARAMS_GATHER
#define MCOLL_PARAMS_GATHERV(X)                                                 \
  X(SBUF, sendbuf) X(COUNT, sendcount) X(TYPE, sendtype) X(RBUF, recvbuf)       \
  X(ROOT_INTS, recvcounts) X(ROOT_INTS, displs) X(TYPE, recvtype) X(ROOT, root) X(COMM, comm)
#define MCOLL_PARAMS_SCATTERV(X)                                                \
  X(SBUF, sendbuf) X(ROOT_INTS, sendcounts) X(ROOT_INTS, displs) X(TYPE, sendtype) \
  X(RBUF, recvbuf) X(COUNT, recvcount) X(TYPE, recvtype) X(ROOT, root) X(COMM, comm)
#define MCOLL_PARAMS_ALLTOALLV(X)                                               \
  X(SBUF, sendbuf) X(INTS, sendcounts) X(INTS, sdispls) X(TYPE, sendtype)       \
  X(RBUF, recvbuf) X(INTS, recvcounts) X(INTS, rdispls) X(TYPE, recvtype) X(COMM, comm)
#define MCOLL_PARAMS_ALLTOALLW(X)                                               \
  X(SBUF, sendbuf) X(INTS, sendcounts) X(INTS, sdispls) X(TYPES, sendtypes)     \
  X(RBUF, recvbuf) X(INTS, recvcounts) X(INTS, rdispls) X(TYPES, recvtypes) X(COMM, comm)

/* MCOLL_KIND_<KIND>(X): X(its C type, 1 if an element count else 0). */
#define MCOLL_KIND_SBUF(X) X(const void *, 0)
#define MCOLL_KIND_RBUF(X) X(void *, 0)
#define MCOLL_KIND_COUNT(X) X(int, 1)
#define MCOLL_KIND_ROOT(X) X(int, 0)
#define MCOLL_KIND_TYPE(X) X(MPI_Datatype, 0)
#define MCOLL_KIND_OP(X) X(MPI_Op, 0)
#define MCOLL_KIND_COMM(X) X(MPI_Comm, 0)
#define MCOLL_KIND_INTS(X) X(const int *, 0)
#define MCOLL_KIND_ROOT_INTS(X) X(const int *, 0)
#define MCOLL_KIND_TYPES(X) X(const MPI_Datatype *, 0)

#define MCOLL_CTYPE(kind) MCOLL_KIND_##kind(MCOLL_KIND_CTYPE_)
#define MCOLL_KIND_CTYPE_(ctype, is_count) ctype
/* `then` for an element count (what the large-count forms narrow), else `else_`. */
#define MCOLL_IF_COUNT(kind, then, else_) \
  MCOLL_IF_COUNT_(MCOLL_KIND_##kind(MCOLL_KIND_IS_COUNT_), then, else_)
#define MCOLL_KIND_IS_COUNT_(ctype, is_count) is_count
#define MCOLL_IF_COUNT_(is_count, then, else_) MCOLL_IF_COUNT__(is_count, then, else_)
#define MCOLL_IF_COUNT__(is_count, then, else_) MCOLL_IF_COUNT_##is_count(then, else_)
#define MCOLL_IF_COUNT_0(then, else_) else_
#define MCOLL_IF_COUNT_1(then, else_) then

/* Parameter lists: MCOLL_ARGLIST(MCOLL_PARAMS_BCAST, MCOLL_PARAM_DECL) is
 * `void *buf, int count, ...`; MCOLL_PARAM_NAME gives `buf, count, ...`. */
#define MCOLL_PARAM_DECL(kind, name) , MCOLL_CTYPE(kind) name
#define MCOLL_PARAM_NAME(kind, name) , name
#define MCOLL_PARAM_FIELD(kind, name) MCOLL_CTYPE(kind) name;
#define MCOLL_DROP_FIRST(...) MCOLL_DROP_FIRST_(__VA_ARGS__)
#define MCOLL_DROP_FIRST_(first, ...) __VA_ARGS__
#define MCOLL_ARGLIST(PARAMS, X) MCOLL_DROP_FIRST(PARAMS(X))

/* struct mcoll_mpi_<lower>_args: one call's arguments, in MPI's order. */
#define MCOLL_ARGS_STRUCT(Name, lower, UPPER, shape, tnbc)                      \
  struct mcoll_mpi_##lower##_args {                                             \
    MCOLL_PARAMS_##UPPER(MCOLL_PARAM_FIELD)                                     \
  };
MCOLL_COLLECTIVES(MCOLL_ARGS_STRUCT)
#undef MCOLL_ARGS_STRUCT

#endif
