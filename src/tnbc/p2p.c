/* T-NBC: the host's calls that take a buffer and that mcoll does not otherwise wrap
 * (point-to-point, MPI-IO, one-sided) settle the thread's pending T-NBC calls first
 * (one load while none is pending): the host MPI may read or write the buffer by
 * single copy (CMA) or hand it to a system call, which returns EFAULT on a protected
 * page instead of faulting; a peer may read a window. (MPI_Send, MPI_Recv,
 * MPI_Sendrecv, MPI_Ssend, MPI_Mrecv and the completion calls settle in pmpi/nbc.c.) */
#include "mcoll.h"
#include "tnbc/tnbc.h"

/* MPI_<name>(params): settles, then PMPI_<name>(args). */
#define SETTLED(name, params, args)                                                                \
  MCOLL_EXPORT int MPI_##name params {                                                             \
    mcoll__tnbc_settle_pending();                                                                  \
    return PMPI_##name args;                                                                       \
  }

/* The shapes the calls below share. */
#define SEND_PARAMS                                                                                \
  (const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
#define SEND_ARGS (buf, count, type, dest, tag, comm)
#define ISEND_PARAMS                                                                               \
  (const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,              \
   MPI_Request *req)
#define ISEND_ARGS (buf, count, type, dest, tag, comm, req)
#define IRECV_PARAMS                                                                               \
  (void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *req)
#define IRECV_ARGS (buf, count, type, source, tag, comm, req)

SETTLED(Isend, ISEND_PARAMS, ISEND_ARGS)
SETTLED(Issend, ISEND_PARAMS, ISEND_ARGS)
SETTLED(Irsend, ISEND_PARAMS, ISEND_ARGS)
SETTLED(Ibsend, ISEND_PARAMS, ISEND_ARGS)
SETTLED(Send_init, ISEND_PARAMS, ISEND_ARGS)
SETTLED(Bsend, SEND_PARAMS, SEND_ARGS)
SETTLED(Rsend, SEND_PARAMS, SEND_ARGS)
SETTLED(Irecv, IRECV_PARAMS, IRECV_ARGS)
SETTLED(Recv_init, IRECV_PARAMS, IRECV_ARGS)
SETTLED(Imrecv, (void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Request *req),
        (buf, count, type, message, req))
SETTLED(Sendrecv_replace,
        (void *buf, int count, MPI_Datatype type, int dest, int sendtag, int source, int recvtag,
         MPI_Comm comm, MPI_Status *status),
        (buf, count, type, dest, sendtag, source, recvtag, comm, status))

SETTLED(Bsend_init, ISEND_PARAMS, ISEND_ARGS)
SETTLED(Ssend_init, ISEND_PARAMS, ISEND_ARGS)
SETTLED(Rsend_init, ISEND_PARAMS, ISEND_ARGS)

/* MPI-IO: the data access calls (a buffer, a count and a type; explicit offset or not;
 * blocking, non-blocking, split). */
#define IO_PARAMS(buf_type) (MPI_File fh, buf_type buf, int count, MPI_Datatype type, MPI_Status *status)
#define IO_ARGS (fh, buf, count, type, status)
#define IO_AT_PARAMS(buf_type)                                                                    \
  (MPI_File fh, MPI_Offset offset, buf_type buf, int count, MPI_Datatype type, MPI_Status *status)
#define IO_AT_ARGS (fh, offset, buf, count, type, status)
#define IIO_PARAMS(buf_type) (MPI_File fh, buf_type buf, int count, MPI_Datatype type, MPI_Request *req)
#define IIO_ARGS (fh, buf, count, type, req)
#define IIO_AT_PARAMS(buf_type)                                                                   \
  (MPI_File fh, MPI_Offset offset, buf_type buf, int count, MPI_Datatype type, MPI_Request *req)
#define IIO_AT_ARGS (fh, offset, buf, count, type, req)
#define BEGIN_PARAMS(buf_type) (MPI_File fh, buf_type buf, int count, MPI_Datatype type)
#define BEGIN_ARGS (fh, buf, count, type)
#define BEGIN_AT_PARAMS(buf_type) (MPI_File fh, MPI_Offset offset, buf_type buf, int count, MPI_Datatype type)
#define BEGIN_AT_ARGS (fh, offset, buf, count, type)
#define END_PARAMS(buf_type) (MPI_File fh, buf_type buf, MPI_Status *status)
#define END_ARGS (fh, buf, status)

#define IO_FORMS(rw, buf_type)                                                                     \
  SETTLED(File_##rw, IO_PARAMS(buf_type), IO_ARGS)                                                 \
  SETTLED(File_##rw##_all, IO_PARAMS(buf_type), IO_ARGS)                                           \
  SETTLED(File_##rw##_shared, IO_PARAMS(buf_type), IO_ARGS)                                        \
  SETTLED(File_##rw##_ordered, IO_PARAMS(buf_type), IO_ARGS)                                       \
  SETTLED(File_##rw##_at, IO_AT_PARAMS(buf_type), IO_AT_ARGS)                                      \
  SETTLED(File_##rw##_at_all, IO_AT_PARAMS(buf_type), IO_AT_ARGS)                                  \
  SETTLED(File_i##rw, IIO_PARAMS(buf_type), IIO_ARGS)                                              \
  SETTLED(File_i##rw##_all, IIO_PARAMS(buf_type), IIO_ARGS)                                        \
  SETTLED(File_i##rw##_shared, IIO_PARAMS(buf_type), IIO_ARGS)                                     \
  SETTLED(File_i##rw##_at, IIO_AT_PARAMS(buf_type), IIO_AT_ARGS)                                   \
  SETTLED(File_i##rw##_at_all, IIO_AT_PARAMS(buf_type), IIO_AT_ARGS)                               \
  SETTLED(File_##rw##_all_begin, BEGIN_PARAMS(buf_type), BEGIN_ARGS)                               \
  SETTLED(File_##rw##_ordered_begin, BEGIN_PARAMS(buf_type), BEGIN_ARGS)                           \
  SETTLED(File_##rw##_at_all_begin, BEGIN_AT_PARAMS(buf_type), BEGIN_AT_ARGS)                      \
  SETTLED(File_##rw##_all_end, END_PARAMS(buf_type), END_ARGS)                                     \
  SETTLED(File_##rw##_ordered_end, END_PARAMS(buf_type), END_ARGS)                                 \
  SETTLED(File_##rw##_at_all_end, END_PARAMS(buf_type), END_ARGS)

IO_FORMS(read, void *)
IO_FORMS(write, const void *)

/* One-sided: the origin buffers of data movement, and the synchronisations after
 * which peers read or write this rank's window. */
#define ORIGIN_PARAMS                                                                              \
  (const void *origin, int origin_count, MPI_Datatype origin_type, int target, MPI_Aint disp,       \
   int target_count, MPI_Datatype target_type, MPI_Win win)
#define ORIGIN_ARGS (origin, origin_count, origin_type, target, disp, target_count, target_type, win)
SETTLED(Put, ORIGIN_PARAMS, ORIGIN_ARGS)
SETTLED(Get,
        (void *origin, int origin_count, MPI_Datatype origin_type, int target, MPI_Aint disp,
         int target_count, MPI_Datatype target_type, MPI_Win win),
        ORIGIN_ARGS)
SETTLED(Accumulate,
        (const void *origin, int origin_count, MPI_Datatype origin_type, int target,
         MPI_Aint disp, int target_count, MPI_Datatype target_type, MPI_Op op, MPI_Win win),
        (origin, origin_count, origin_type, target, disp, target_count, target_type, op, win))
SETTLED(Get_accumulate,
        (const void *origin, int origin_count, MPI_Datatype origin_type, void *result,
         int result_count, MPI_Datatype result_type, int target, MPI_Aint disp, int target_count,
         MPI_Datatype target_type, MPI_Op op, MPI_Win win),
        (origin, origin_count, origin_type, result, result_count, result_type, target, disp,
         target_count, target_type, op, win))
SETTLED(Fetch_and_op,
        (const void *origin, void *result, MPI_Datatype type, int target, MPI_Aint disp,
         MPI_Op op, MPI_Win win),
        (origin, result, type, target, disp, op, win))
SETTLED(Compare_and_swap,
        (const void *origin, const void *compare, void *result, MPI_Datatype type, int target,
         MPI_Aint disp, MPI_Win win),
        (origin, compare, result, type, target, disp, win))
SETTLED(Win_fence, (int assert, MPI_Win win), (assert, win))
SETTLED(Win_post, (MPI_Group group, int assert, MPI_Win win), (group, assert, win))
SETTLED(Win_start, (MPI_Group group, int assert, MPI_Win win), (group, assert, win))
SETTLED(Win_lock, (int type, int rank, int assert, MPI_Win win), (type, rank, assert, win))
SETTLED(Win_lock_all, (int assert, MPI_Win win), (assert, win))

/* Neighbourhood collectives (the host's own: point-to-point underneath). */
#define NEIGHBOR_GATHER_PARAMS                                                                     \
  (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,        \
   MPI_Datatype recvtype, MPI_Comm comm)
#define NEIGHBOR_GATHER_ARGS (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)
#define NEIGHBOR_GATHERV_PARAMS                                                                    \
  (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,                       \
   const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm)
#define NEIGHBOR_GATHERV_ARGS (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm)
#define NEIGHBOR_ALLTOALLV_PARAMS                                                                  \
  (const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,        \
   void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
#define NEIGHBOR_ALLTOALLV_ARGS                                                                    \
  (sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm)
#define NEIGHBOR_ALLTOALLW_PARAMS                                                                  \
  (const void *sendbuf, const int sendcounts[], const MPI_Aint sdispls[],                          \
   const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const MPI_Aint rdispls[], \
   const MPI_Datatype recvtypes[], MPI_Comm comm)
#define NEIGHBOR_ALLTOALLW_ARGS                                                                    \
  (sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm)
#define WITH_REQ(...) (__VA_ARGS__, MPI_Request *req)
#define STRIP(...) __VA_ARGS__
#define IPARAMS(params) WITH_REQ(STRIP params)
#define IARGS(args) (STRIP args, req)

SETTLED(Neighbor_allgather, NEIGHBOR_GATHER_PARAMS, NEIGHBOR_GATHER_ARGS)
SETTLED(Neighbor_alltoall, NEIGHBOR_GATHER_PARAMS, NEIGHBOR_GATHER_ARGS)
SETTLED(Neighbor_allgatherv, NEIGHBOR_GATHERV_PARAMS, NEIGHBOR_GATHERV_ARGS)
SETTLED(Neighbor_alltoallv, NEIGHBOR_ALLTOALLV_PARAMS, NEIGHBOR_ALLTOALLV_ARGS)
SETTLED(Neighbor_alltoallw, NEIGHBOR_ALLTOALLW_PARAMS, NEIGHBOR_ALLTOALLW_ARGS)
SETTLED(Ineighbor_allgather, IPARAMS(NEIGHBOR_GATHER_PARAMS), IARGS(NEIGHBOR_GATHER_ARGS))
SETTLED(Ineighbor_alltoall, IPARAMS(NEIGHBOR_GATHER_PARAMS), IARGS(NEIGHBOR_GATHER_ARGS))
SETTLED(Ineighbor_allgatherv, IPARAMS(NEIGHBOR_GATHERV_PARAMS), IARGS(NEIGHBOR_GATHERV_ARGS))
SETTLED(Ineighbor_alltoallv, IPARAMS(NEIGHBOR_ALLTOALLV_PARAMS), IARGS(NEIGHBOR_ALLTOALLV_ARGS))
SETTLED(Ineighbor_alltoallw, IPARAMS(NEIGHBOR_ALLTOALLW_PARAMS), IARGS(NEIGHBOR_ALLTOALLW_ARGS))
