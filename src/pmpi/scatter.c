#include "coll/scatter/scatter.h"
#include "pmpi/wrap.h"

/* MPI_Scatter (v 0: sendcount elements to every rank) and MPI_Scatterv (v 1:
 * sendcounts and displs, the root's only): one body over the root's send blocks.
 * The arguments checked and described (*src, *recv): 0 where the host MPI takes the
 * call. */
MCOLL_SHARED_BODY int scatter_args(const struct mcoll_comm *c, int v, const void *sendbuf,
                                   int sendcount, const int *sendcounts, const int *displs,
                                   MPI_Datatype sendtype, void *recvbuf, int recvcount,
                                   MPI_Datatype recvtype, int root, struct mcoll_blocks *src,
                                   struct mcoll_bytes *recv) {
  int is_root = mcoll__root_valid(c, root) && c->rank == root;
  int in_place = is_root && recvbuf == MPI_IN_PLACE;
  return mcoll__root_valid(c, root) &&
         !(is_root && ((v ? !mcoll__counts_valid(sendcounts, displs, c->size) : sendcount < 0) ||
                       sendtype == MPI_DATATYPE_NULL ||
                       mcoll__blocks_describe(src, (void *)sendbuf, c->size, sendcount, sendcounts,
                                              displs, sendtype) != MPI_SUCCESS)) &&
         !(!in_place && (recvbuf == MPI_IN_PLACE || recvcount < 0 || recvtype == MPI_DATATYPE_NULL ||
                         mcoll__bytes_of(recvbuf, recvcount, recvtype, recv) != MPI_SUCCESS ||
                         (is_root && recv->bytes != mcoll__block_len(src, root))));
}

MCOLL_SHARED_BODY int scatter(struct mcoll_comm *c, enum mcoll_coll coll, int v,
                              const void *sendbuf, int sendcount, const int *sendcounts,
                              const int *displs, MPI_Datatype sendtype, void *recvbuf,
                              int recvcount, MPI_Datatype recvtype, int root) {
  struct mcoll_bytes recv;
  struct mcoll_blocks src;
  if (!scatter_args(c, v, sendbuf, sendcount, sendcounts, displs, sendtype, recvbuf, recvcount,
                    recvtype, root, &src, &recv))
    return mcoll__invalid(coll);
  int is_root = c->rank == root, in_place = is_root && recvbuf == MPI_IN_PLACE;
  if (!in_place) mcoll__bytes_pack(recvbuf, recvcount, recvtype, 0, &recv);
  struct mcoll_scatter_args a = {.src = is_root ? &src : NULL, .mine = in_place ? NULL : recv.ptr,
                                 .my_len = in_place ? mcoll__block_len(&src, root) : recv.bytes,
                                 .root = root, .v = v};
  int err = mcoll__scatter(c, coll, &a);
  if (!in_place) mcoll__bytes_release(&recv, recvbuf, recvcount, recvtype, err == MPI_SUCCESS);
  return err;
}

/* An MPI_Iscatter(v) or persistent start, tried before the meeting (pmpi/entries.c):
 * the root of a one-generation call waits only for its slot, a member only for its
 * line (mcoll__scatter_try). A receive buffer that needs packing, and what the body
 * gives to the host MPI, stay with the meeting or the task (-2). */
MCOLL_SHARED_BODY int scatter_direct(MPI_Comm comm, void *ctx, enum mcoll_coll coll, int v,
                                     const void *sendbuf, int sendcount, const int *sendcounts,
                                     const int *displs, MPI_Datatype sendtype, void *recvbuf,
                                     int recvcount, MPI_Datatype recvtype, int root, int *err) {
  struct mcoll_comm *c = mcoll__direct_context(comm, ctx);
  struct mcoll_bytes recv;
  struct mcoll_blocks src;
  if (!c || !scatter_args(c, v, sendbuf, sendcount, sendcounts, displs, sendtype, recvbuf,
                          recvcount, recvtype, root, &src, &recv))
    return -2;
  int is_root = c->rank == root, in_place = is_root && recvbuf == MPI_IN_PLACE;
  if (!in_place && !recv.contiguous) return -2;
  struct mcoll_scatter_args a = {.src = is_root ? &src : NULL, .mine = in_place ? NULL : recv.ptr,
                                 .my_len = in_place ? mcoll__block_len(&src, root) : recv.bytes,
                                 .root = root, .v = v};
  int tried = mcoll__scatter_try(c, coll, &a, err);
  if (tried == 1) c->tasks_entered++;
  return tried;
}

int mcoll__scatter_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, int *err) {
  (void)rest; /* (it never begins a call that it does not finish) */
  const struct mcoll_mpi_scatter_args *a = args;
  return scatter_direct(a->comm, ctx, MCOLL_COLL_SCATTER, 0, a->sendbuf, a->sendcount, NULL, NULL,
                        a->sendtype, a->recvbuf, a->recvcount, a->recvtype, a->root, err);
}

int mcoll__scatterv_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, int *err) {
  (void)rest;
  const struct mcoll_mpi_scatterv_args *a = args;
  return scatter_direct(a->comm, ctx, MCOLL_COLL_SCATTERV, 1, a->sendbuf, 0, a->sendcounts,
                        a->displs, a->sendtype, a->recvbuf, a->recvcount, a->recvtype, a->root,
                        err);
}

int mcoll__wrap_scatter(struct mcoll_comm *c, const void *sendbuf, int sendcount,
                        MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                        int root, MPI_Comm comm) {
  (void)comm;
  return scatter(c, MCOLL_COLL_SCATTER, 0, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf,
                 recvcount, recvtype, root);
}

int mcoll__wrap_scatterv(struct mcoll_comm *c, const void *sendbuf, const int sendcounts[],
                         const int displs[], MPI_Datatype sendtype, void *recvbuf, int recvcount,
                         MPI_Datatype recvtype, int root, MPI_Comm comm) {
  (void)comm;
  return scatter(c, MCOLL_COLL_SCATTERV, 1, sendbuf, 0, sendcounts, displs, sendtype, recvbuf,
                 recvcount, recvtype, root);
}
