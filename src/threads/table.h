/* The function table between the stand-in MPI library (one copy in each rank's
 * namespace) and the thread-rank runtime (base namespace, the one host MPI).
 * Both sides are compiled against the host flavour's mpi.h, so handles and status
 * layout are the host's. The lists below are the single place where a call is
 * declared: the stand-in defines MPI_<name> from them, the runtime fills the table. */
#ifndef MCOLL_THREADS_TABLE_H
#define MCOLL_THREADS_TABLE_H

#include <mpi.h>

struct thr_rank;

#define THR_UNPAREN(...) __VA_ARGS__

/* Calls the runtime implements: R(return type, name, (parameters), (arguments)). */
#define THR_RUNTIME_CALLS(R)                                                                   \
  R(int, Init, (int *argc, char ***argv), (argc, argv))                                        \
  R(int, Init_thread, (int *argc, char ***argv, int required, int *provided),                  \
    (argc, argv, required, provided))                                                          \
  R(int, Initialized, (int *flag), (flag))                                                     \
  R(int, Finalized, (int *flag), (flag))                                                       \
  R(int, Query_thread, (int *provided), (provided))                                            \
  R(int, Is_thread_main, (int *flag), (flag))                                                  \
  R(int, Abort, (MPI_Comm comm, int code), (comm, code))                                       \
  R(int, Comm_rank, (MPI_Comm comm, int *rank), (comm, rank))                                  \
  R(int, Comm_size, (MPI_Comm comm, int *size), (comm, size))                                  \
  R(int, Comm_dup, (MPI_Comm comm, MPI_Comm *out), (comm, out))                                \
  R(int, Comm_split, (MPI_Comm comm, int color, int key, MPI_Comm *out),                       \
    (comm, color, key, out))                                                                   \
  R(int, Comm_split_type, (MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *out),    \
    (comm, type, key, info, out))                                                              \
  R(int, Comm_free, (MPI_Comm *comm), (comm))                                                  \
  R(int, Comm_compare, (MPI_Comm a, MPI_Comm b, int *result), (a, b, result))                  \
  R(int, Comm_set_errhandler, (MPI_Comm comm, MPI_Errhandler handler), (comm, handler))       \
  R(int, Comm_get_errhandler, (MPI_Comm comm, MPI_Errhandler *handler), (comm, handler))      \
  R(int, Comm_get_attr, (MPI_Comm comm, int key, void *value, int *flag),                      \
    (comm, key, value, flag))                                                                  \
  R(int, Send, (const void *buf, int count, MPI_Datatype type, int dst, int tag,               \
                MPI_Comm comm), (buf, count, type, dst, tag, comm))                            \
  R(int, Ssend, (const void *buf, int count, MPI_Datatype type, int dst, int tag,              \
                 MPI_Comm comm), (buf, count, type, dst, tag, comm))                           \
  R(int, Rsend, (const void *buf, int count, MPI_Datatype type, int dst, int tag,              \
                 MPI_Comm comm), (buf, count, type, dst, tag, comm))                           \
  R(int, Isend, (const void *buf, int count, MPI_Datatype type, int dst, int tag,              \
                 MPI_Comm comm, MPI_Request *req), (buf, count, type, dst, tag, comm, req))    \
  R(int, Issend, (const void *buf, int count, MPI_Datatype type, int dst, int tag,             \
                  MPI_Comm comm, MPI_Request *req), (buf, count, type, dst, tag, comm, req))   \
  R(int, Send_init, (const void *buf, int count, MPI_Datatype type, int dst, int tag,          \
                     MPI_Comm comm, MPI_Request *req), (buf, count, type, dst, tag, comm, req)) \
  R(int, Ssend_init, (const void *buf, int count, MPI_Datatype type, int dst, int tag,         \
                      MPI_Comm comm, MPI_Request *req), (buf, count, type, dst, tag, comm, req)) \
  R(int, Recv_init, (void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, \
                     MPI_Request *req), (buf, count, type, src, tag, comm, req))               \
  R(int, Start, (MPI_Request *req), (req))                                                     \
  R(int, Startall, (int n, MPI_Request reqs[]), (n, reqs))                                     \
  R(int, Recv, (void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm,      \
                MPI_Status *status), (buf, count, type, src, tag, comm, status))               \
  R(int, Irecv, (void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm,     \
                 MPI_Request *req), (buf, count, type, src, tag, comm, req))                   \
  R(int, Sendrecv, (const void *sbuf, int scount, MPI_Datatype stype, int dst, int stag,       \
                    void *rbuf, int rcount, MPI_Datatype rtype, int src, int rtag,             \
                    MPI_Comm comm, MPI_Status *status),                                        \
    (sbuf, scount, stype, dst, stag, rbuf, rcount, rtype, src, rtag, comm, status))            \
  R(int, Sendrecv_replace, (void *buf, int count, MPI_Datatype type, int dst, int stag,        \
                            int src, int rtag, MPI_Comm comm, MPI_Status *status),             \
    (buf, count, type, dst, stag, src, rtag, comm, status))                                    \
  R(int, Probe, (int src, int tag, MPI_Comm comm, MPI_Status *status),                         \
    (src, tag, comm, status))                                                                  \
  R(int, Iprobe, (int src, int tag, MPI_Comm comm, int *flag, MPI_Status *status),             \
    (src, tag, comm, flag, status))                                                            \
  R(int, Wait, (MPI_Request *req, MPI_Status *status), (req, status))                          \
  R(int, Test, (MPI_Request *req, int *flag, MPI_Status *status), (req, flag, status))         \
  R(int, Waitall, (int n, MPI_Request reqs[], MPI_Status statuses[]), (n, reqs, statuses))     \
  R(int, Testall, (int n, MPI_Request reqs[], int *flag, MPI_Status statuses[]),               \
    (n, reqs, flag, statuses))                                                                 \
  R(int, Waitany, (int n, MPI_Request reqs[], int *index, MPI_Status *status),                 \
    (n, reqs, index, status))                                                                  \
  R(int, Request_free, (MPI_Request *req), (req))                                              \
  R(int, Pack, (const void *in, int count, MPI_Datatype type, void *out, int size,             \
                int *position, MPI_Comm comm), (in, count, type, out, size, position, comm))   \
  R(int, Unpack, (const void *in, int size, int *position, void *out, int count,               \
                  MPI_Datatype type, MPI_Comm comm), (in, size, position, out, count, type,    \
                  comm))                                                                       \
  R(int, Pack_size, (int count, MPI_Datatype type, MPI_Comm comm, int *size),                  \
    (count, type, comm, size))                                                                 \
  R(int, Barrier, (MPI_Comm comm), (comm))                                                     \
  R(int, Bcast, (void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm),            \
    (buf, count, type, root, comm))                                                            \
  R(int, Reduce, (const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,       \
                  int root, MPI_Comm comm), (sbuf, rbuf, count, type, op, root, comm))         \
  R(int, Allreduce, (const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,    \
                     MPI_Comm comm), (sbuf, rbuf, count, type, op, comm))                      \
  R(int, Reduce_scatter_block, (const void *sbuf, void *rbuf, int count, MPI_Datatype type,    \
                                MPI_Op op, MPI_Comm comm), (sbuf, rbuf, count, type, op, comm)) \
  R(int, Reduce_scatter, (const void *sbuf, void *rbuf, const int *counts, MPI_Datatype type,  \
                          MPI_Op op, MPI_Comm comm), (sbuf, rbuf, counts, type, op, comm))     \
  R(int, Alltoallw, (const void *sbuf, const int *scounts, const int *sdispls,                 \
                     const MPI_Datatype *stypes, void *rbuf, const int *rcounts,               \
                     const int *rdispls, const MPI_Datatype *rtypes, MPI_Comm comm),           \
    (sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm))                    \
  R(int, Scan, (const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,         \
                MPI_Comm comm), (sbuf, rbuf, count, type, op, comm))                           \
  R(int, Exscan, (const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,       \
                  MPI_Comm comm), (sbuf, rbuf, count, type, op, comm))                         \
  R(int, Gather, (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,    \
                  MPI_Datatype rtype, int root, MPI_Comm comm),                                \
    (sbuf, scount, stype, rbuf, rcount, rtype, root, comm))                                    \
  R(int, Gatherv, (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,               \
                   const int *rcounts, const int *displs, MPI_Datatype rtype, int root,        \
                   MPI_Comm comm), (sbuf, scount, stype, rbuf, rcounts, displs, rtype, root,   \
                   comm))                                                                      \
  R(int, Scatter, (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,   \
                   MPI_Datatype rtype, int root, MPI_Comm comm),                               \
    (sbuf, scount, stype, rbuf, rcount, rtype, root, comm))                                    \
  R(int, Scatterv, (const void *sbuf, const int *scounts, const int *displs,                   \
                    MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,  \
                    MPI_Comm comm), (sbuf, scounts, displs, stype, rbuf, rcount, rtype, root,  \
                    comm))                                                                     \
  R(int, Allgather, (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,             \
                     int rcount, MPI_Datatype rtype, MPI_Comm comm),                           \
    (sbuf, scount, stype, rbuf, rcount, rtype, comm))                                          \
  R(int, Allgatherv, (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,            \
                      const int *rcounts, const int *displs, MPI_Datatype rtype,               \
                      MPI_Comm comm), (sbuf, scount, stype, rbuf, rcounts, displs, rtype,      \
                      comm))                                                                   \
  R(int, Alltoall, (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,  \
                    MPI_Datatype rtype, MPI_Comm comm),                                        \
    (sbuf, scount, stype, rbuf, rcount, rtype, comm))                                          \
  R(int, Alltoallv, (const void *sbuf, const int *scounts, const int *sdispls,                 \
                     MPI_Datatype stype, void *rbuf, const int *rcounts, const int *rdispls,   \
                     MPI_Datatype rtype, MPI_Comm comm),                                       \
    (sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm))

/* The SMPI extension (mcoll.h), exported as MPIX_<name>: ownership of a buffer from the
 * runtime's allocator passes between ranks. */
#define THR_SMPI_CALLS(R)                                                                      \
  R(int, Smpi_alloc, (MPI_Aint size, void *baseptr), (size, baseptr))                          \
  R(int, Smpi_free, (void *ptr), (ptr))                                                        \
  R(int, Smpi_send, (void *ptr, int count, MPI_Datatype type, int dst, int tag, MPI_Comm comm), \
    (ptr, count, type, dst, tag, comm))                                                        \
  R(int, Smpi_recv, (void *ptrp, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm,\
                     MPI_Status *status), (ptrp, count, type, src, tag, comm, status))

/* Non-blocking (MPI_I*) and persistent (MPI_<Coll>_init) collectives and the completion
 * calls beyond Wait/Test/Waitall/Testall/Waitany: R(...) as above, implemented as
 * thr_<name> (coll_nbc.c; the completion calls in runtime.c). */
#define THR_NBC_CALLS(R)                                                                       \
  R(int, Ibarrier, (MPI_Comm comm, MPI_Request *req), (comm, req))                             \
  R(int, Ibcast, (void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm,            \
                  MPI_Request *req), (buf, count, type, root, comm, req))                      \
  R(int, Ireduce, (const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,      \
                   int root, MPI_Comm comm, MPI_Request *req),                                 \
    (sbuf, rbuf, count, type, op, root, comm, req))                                            \
  R(int, Iallreduce, (const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,   \
                      MPI_Comm comm, MPI_Request *req), (sbuf, rbuf, count, type, op, comm, req)) \
  R(int, Ireduce_scatter_block, (const void *sbuf, void *rbuf, int count, MPI_Datatype type,   \
                                 MPI_Op op, MPI_Comm comm, MPI_Request *req),                  \
    (sbuf, rbuf, count, type, op, comm, req))                                                  \
  R(int, Ireduce_scatter, (const void *sbuf, void *rbuf, const int *counts, MPI_Datatype type, \
                           MPI_Op op, MPI_Comm comm, MPI_Request *req),                        \
    (sbuf, rbuf, counts, type, op, comm, req))                                                 \
  R(int, Iscan, (const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,        \
                 MPI_Comm comm, MPI_Request *req), (sbuf, rbuf, count, type, op, comm, req))   \
  R(int, Iexscan, (const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,      \
                   MPI_Comm comm, MPI_Request *req), (sbuf, rbuf, count, type, op, comm, req)) \
  R(int, Igather, (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,   \
                   MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req),             \
    (sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req))                               \
  R(int, Igatherv, (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,              \
                    const int *rcounts, const int *displs, MPI_Datatype rtype, int root,       \
                    MPI_Comm comm, MPI_Request *req),                                          \
    (sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, req))                      \
  R(int, Iscatter, (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,  \
                    MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req),            \
    (sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req))                               \
  R(int, Iscatterv, (const void *sbuf, const int *scounts, const int *displs,                  \
                     MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root, \
                     MPI_Comm comm, MPI_Request *req),                                         \
    (sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, req))                      \
  R(int, Iallgather, (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,            \
                      int rcount, MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req),        \
    (sbuf, scount, stype, rbuf, rcount, rtype, comm, req))                                     \
  R(int, Iallgatherv, (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,           \
                       const int *rcounts, const int *displs, MPI_Datatype rtype,              \
                       MPI_Comm comm, MPI_Request *req),                                       \
    (sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, req))                            \
  R(int, Ialltoall, (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,             \
                     int rcount, MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req),         \
    (sbuf, scount, stype, rbuf, rcount, rtype, comm, req))                                     \
  R(int, Ialltoallv, (const void *sbuf, const int *scounts, const int *sdispls,                \
                      MPI_Datatype stype, void *rbuf, const int *rcounts, const int *rdispls,  \
                      MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req),                    \
    (sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, req))                 \
  R(int, Ialltoallw, (const void *sbuf, const int *scounts, const int *sdispls,                \
                      const MPI_Datatype *stypes, void *rbuf, const int *rcounts,              \
                      const int *rdispls, const MPI_Datatype *rtypes, MPI_Comm comm,           \
                      MPI_Request *req),                                                       \
    (sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, req))               \
  R(int, Barrier_init, (MPI_Comm comm, MPI_Info info, MPI_Request *req), (comm, info, req))    \
  R(int, Bcast_init, (void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm,        \
                      MPI_Info info, MPI_Request *req), (buf, count, type, root, comm, info, req)) \
  R(int, Reduce_init, (const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,  \
                       int root, MPI_Comm comm, MPI_Info info, MPI_Request *req),              \
    (sbuf, rbuf, count, type, op, root, comm, info, req))                                      \
  R(int, Allreduce_init, (const void *sbuf, void *rbuf, int count, MPI_Datatype type,          \
                          MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *req),          \
    (sbuf, rbuf, count, type, op, comm, info, req))                                            \
  R(int, Reduce_scatter_block_init, (const void *sbuf, void *rbuf, int count,                  \
                                     MPI_Datatype type, MPI_Op op, MPI_Comm comm,              \
                                     MPI_Info info, MPI_Request *req),                         \
    (sbuf, rbuf, count, type, op, comm, info, req))                                            \
  R(int, Reduce_scatter_init, (const void *sbuf, void *rbuf, const int *counts,                \
                               MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Info info,     \
                               MPI_Request *req), (sbuf, rbuf, counts, type, op, comm, info, req)) \
  R(int, Scan_init, (const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,    \
                     MPI_Comm comm, MPI_Info info, MPI_Request *req),                          \
    (sbuf, rbuf, count, type, op, comm, info, req))                                            \
  R(int, Exscan_init, (const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,  \
                       MPI_Comm comm, MPI_Info info, MPI_Request *req),                        \
    (sbuf, rbuf, count, type, op, comm, info, req))                                            \
  R(int, Gather_init, (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,           \
                       int rcount, MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Info info, \
                       MPI_Request *req), (sbuf, scount, stype, rbuf, rcount, rtype, root,     \
                       comm, info, req))                                                       \
  R(int, Gatherv_init, (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,          \
                        const int *rcounts, const int *displs, MPI_Datatype rtype, int root,   \
                        MPI_Comm comm, MPI_Info info, MPI_Request *req),                       \
    (sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, info, req))                \
  R(int, Scatter_init, (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,          \
                        int rcount, MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Info info, \
                        MPI_Request *req), (sbuf, scount, stype, rbuf, rcount, rtype, root,    \
                        comm, info, req))                                                      \
  R(int, Scatterv_init, (const void *sbuf, const int *scounts, const int *displs,              \
                         MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,       \
                         int root, MPI_Comm comm, MPI_Info info, MPI_Request *req),            \
    (sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, info, req))                \
  R(int, Allgather_init, (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,        \
                          int rcount, MPI_Datatype rtype, MPI_Comm comm, MPI_Info info,        \
                          MPI_Request *req), (sbuf, scount, stype, rbuf, rcount, rtype, comm,  \
                          info, req))                                                          \
  R(int, Allgatherv_init, (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,       \
                           const int *rcounts, const int *displs, MPI_Datatype rtype,          \
                           MPI_Comm comm, MPI_Info info, MPI_Request *req),                    \
    (sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, info, req))                      \
  R(int, Alltoall_init, (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,         \
                         int rcount, MPI_Datatype rtype, MPI_Comm comm, MPI_Info info,         \
                         MPI_Request *req), (sbuf, scount, stype, rbuf, rcount, rtype, comm,   \
                         info, req))                                                           \
  R(int, Alltoallv_init, (const void *sbuf, const int *scounts, const int *sdispls,            \
                          MPI_Datatype stype, void *rbuf, const int *rcounts,                  \
                          const int *rdispls, MPI_Datatype rtype, MPI_Comm comm, MPI_Info info, \
                          MPI_Request *req), (sbuf, scounts, sdispls, stype, rbuf, rcounts,    \
                          rdispls, rtype, comm, info, req))                                    \
  R(int, Alltoallw_init, (const void *sbuf, const int *scounts, const int *sdispls,            \
                          const MPI_Datatype *stypes, void *rbuf, const int *rcounts,          \
                          const int *rdispls, const MPI_Datatype *rtypes, MPI_Comm comm,       \
                          MPI_Info info, MPI_Request *req), (sbuf, scounts, sdispls, stypes,   \
                          rbuf, rcounts, rdispls, rtypes, comm, info, req))                    \
  R(int, Waitsome, (int n, MPI_Request reqs[], int *outcount, int indices[],                   \
                    MPI_Status statuses[]), (n, reqs, outcount, indices, statuses))            \
  R(int, Testsome, (int n, MPI_Request reqs[], int *outcount, int indices[],                   \
                    MPI_Status statuses[]), (n, reqs, outcount, indices, statuses))            \
  R(int, Testany, (int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status),      \
    (n, reqs, index, flag, status))                                                            \
  R(int, Request_get_status, (MPI_Request req, int *flag, MPI_Status *status),                 \
    (req, flag, status))

/* Groups and the communicators made from them (groups.c), and the receive-side calls
 * that take a message out of the queues (runtime.c): implemented as thr_<name>. */
#define THR_GROUP_CALLS(R)                                                                     \
  R(int, Comm_group, (MPI_Comm comm, MPI_Group *group), (comm, group))                         \
  R(int, Group_size, (MPI_Group group, int *size), (group, size))                              \
  R(int, Group_rank, (MPI_Group group, int *rank), (group, rank))                              \
  R(int, Group_incl, (MPI_Group group, int n, const int ranks[], MPI_Group *out),              \
    (group, n, ranks, out))                                                                    \
  R(int, Group_excl, (MPI_Group group, int n, const int ranks[], MPI_Group *out),              \
    (group, n, ranks, out))                                                                    \
  R(int, Group_range_incl, (MPI_Group group, int n, int ranges[][3], MPI_Group *out),          \
    (group, n, ranges, out))                                                                   \
  R(int, Group_range_excl, (MPI_Group group, int n, int ranges[][3], MPI_Group *out),          \
    (group, n, ranges, out))                                                                   \
  R(int, Group_translate_ranks, (MPI_Group a, int n, const int ranks_a[], MPI_Group b,         \
                                 int ranks_b[]), (a, n, ranks_a, b, ranks_b))                  \
  R(int, Group_compare, (MPI_Group a, MPI_Group b, int *result), (a, b, result))               \
  R(int, Group_union, (MPI_Group a, MPI_Group b, MPI_Group *out), (a, b, out))                 \
  R(int, Group_intersection, (MPI_Group a, MPI_Group b, MPI_Group *out), (a, b, out))          \
  R(int, Group_difference, (MPI_Group a, MPI_Group b, MPI_Group *out), (a, b, out))            \
  R(int, Group_free, (MPI_Group *group), (group))                                              \
  R(int, Comm_create, (MPI_Comm comm, MPI_Group group, MPI_Comm *out), (comm, group, out))     \
  R(int, Comm_create_group, (MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *out),          \
    (comm, group, tag, out))                                                                   \
  R(int, Cancel, (MPI_Request *req), (req))                                                    \
  R(int, Mprobe, (int src, int tag, MPI_Comm comm, MPI_Message *msg, MPI_Status *status),      \
    (src, tag, comm, msg, status))                                                             \
  R(int, Improbe, (int src, int tag, MPI_Comm comm, int *flag, MPI_Message *msg,               \
                   MPI_Status *status), (src, tag, comm, flag, msg, status))                   \
  R(int, Mrecv, (void *buf, int count, MPI_Datatype type, MPI_Message *msg, MPI_Status *status), \
    (buf, count, type, msg, status))                                                           \
  R(int, Imrecv, (void *buf, int count, MPI_Datatype type, MPI_Message *msg, MPI_Request *req), \
    (buf, count, type, msg, req))

/* Calls the runtime implements that take no argument but the rank. */
#define THR_RUNTIME_CALLS0(R) R(int, Finalize)

/* Calls that are local and thread-safe in the host MPI, passed on unchanged:
 * H(return type, name, (parameters), (arguments)). */
#define THR_HOST_CALLS(H)                                                                      \
  H(double, Wtime, (void), ())                                                                 \
  H(double, Wtick, (void), ())                                                                 \
  H(int, Get_count, (const MPI_Status *s, MPI_Datatype t, int *n), (s, t, n))                  \
  H(int, Get_elements, (const MPI_Status *s, MPI_Datatype t, int *n), (s, t, n))               \
  H(int, Status_set_elements, (MPI_Status *s, MPI_Datatype t, int n), (s, t, n))               \
  H(int, Type_size, (MPI_Datatype t, int *n), (t, n))                                          \
  H(int, Type_get_extent, (MPI_Datatype t, MPI_Aint *lb, MPI_Aint *ext), (t, lb, ext))         \
  H(int, Type_get_true_extent, (MPI_Datatype t, MPI_Aint *lb, MPI_Aint *ext), (t, lb, ext))    \
  H(int, Type_contiguous, (int n, MPI_Datatype t, MPI_Datatype *o), (n, t, o))                 \
  H(int, Type_vector, (int n, int b, int s, MPI_Datatype t, MPI_Datatype *o), (n, b, s, t, o)) \
  H(int, Type_create_hvector, (int n, int b, MPI_Aint s, MPI_Datatype t, MPI_Datatype *o),     \
    (n, b, s, t, o))                                                                           \
  H(int, Type_indexed, (int n, const int *b, const int *d, MPI_Datatype t, MPI_Datatype *o),   \
    (n, b, d, t, o))                                                                           \
  H(int, Type_create_hindexed, (int n, const int *b, const MPI_Aint *d, MPI_Datatype t,        \
                                MPI_Datatype *o), (n, b, d, t, o))                             \
  H(int, Type_create_indexed_block, (int n, int b, const int *d, MPI_Datatype t,               \
                                     MPI_Datatype *o), (n, b, d, t, o))                        \
  H(int, Type_create_struct, (int n, const int *b, const MPI_Aint *d, const MPI_Datatype *t,   \
                              MPI_Datatype *o), (n, b, d, t, o))                               \
  H(int, Type_create_resized, (MPI_Datatype t, MPI_Aint lb, MPI_Aint ext, MPI_Datatype *o),    \
    (t, lb, ext, o))                                                                           \
  H(int, Type_create_subarray, (int n, const int *sizes, const int *sub, const int *starts,    \
                                int order, MPI_Datatype t, MPI_Datatype *o),                   \
    (n, sizes, sub, starts, order, t, o))                                                      \
  H(int, Type_commit, (MPI_Datatype *t), (t))                                                  \
  H(int, Type_free, (MPI_Datatype *t), (t))                                                    \
  H(int, Type_dup, (MPI_Datatype t, MPI_Datatype *o), (t, o))                                  \
  H(int, Op_create, (MPI_User_function *f, int commute, MPI_Op *o), (f, commute, o))           \
  H(int, Op_free, (MPI_Op *o), (o))                                                            \
  H(int, Op_commutative, (MPI_Op o, int *c), (o, c))                                           \
  H(int, Reduce_local, (const void *in, void *inout, int n, MPI_Datatype t, MPI_Op o),         \
    (in, inout, n, t, o))                                                                      \
  H(int, Get_address, (const void *p, MPI_Aint *a), (p, a))                                    \
  H(int, Get_processor_name, (char *name, int *len), (name, len))                              \
  H(int, Error_string, (int code, char *text, int *len), (code, text, len))                    \
  H(int, Error_class, (int code, int *cls), (code, cls))                                       \
  H(int, Get_version, (int *v, int *sv), (v, sv))                                              \
  H(int, Get_library_version, (char *text, int *len), (text, len))                             \
  H(int, Alloc_mem, (MPI_Aint size, MPI_Info info, void *p), (size, info, p))                  \
  H(int, Free_mem, (void *p), (p))                                                             \
  H(int, Test_cancelled, (const MPI_Status *s, int *flag), (s, flag))                          \
  H(int, Status_set_cancelled, (MPI_Status *s, int flag), (s, flag))

#define THR_RUNTIME_FIELD(ret, name, params, args) ret (*name)(struct thr_rank *, THR_UNPAREN params);
#define THR_RUNTIME_FIELD0(ret, name) ret (*name)(struct thr_rank *);
#define THR_HOST_FIELD(ret, name, params, args) ret (*host_##name) params;

struct thr_api {
  THR_RUNTIME_CALLS(THR_RUNTIME_FIELD)
  THR_SMPI_CALLS(THR_RUNTIME_FIELD)
  THR_RUNTIME_CALLS0(THR_RUNTIME_FIELD0)
  THR_NBC_CALLS(THR_RUNTIME_FIELD)
  THR_GROUP_CALLS(THR_RUNTIME_FIELD)
  THR_HOST_CALLS(THR_HOST_FIELD)
  /* A call the runtime does not implement: stops the job naming it. */
  void (*missing)(struct thr_rank *, const char *name);
  /* exit() of the program in this rank: ends the rank only. */
  void (*exit)(struct thr_rank *, int status);
  /* Open MPI: the host library's data objects (handles are their addresses), by index of
   * openmpi_objects.txt; NULL for MPICH. */
  const void *const *host_objects;
  /* Open MPI: a function or object of the host library by name (for the Fortran
   * library's handle conversions); NULL for MPICH. */
  void *(*host_symbol)(const char *name);
};

/* Exported by the stand-in; the loader calls it before the rank's main. */
typedef void thr_standin_bind_fn(struct thr_rank *rank, const struct thr_api *api);

#endif
