#include "coll/gather/gather.h"
#include "pmpi/wrap.h"

/* MPI_Gather (v 0: recvcount elements from every rank) and MPI_Gatherv (v 1:
 * recvcounts and displs, the root's only): one body over the root's receive blocks.
 * The arguments checked and described (*dst, *send): 0 where the host MPI takes the
 * call. */
MCOLL_SHARED_BODY int gather_args(const struct mcoll_comm *c, int v, const void *sendbuf,
                                  int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                  int recvcount, const int *recvcounts, const int *displs,
                                  MPI_Datatype recvtype, int root, struct mcoll_blocks *dst,
                                  struct mcoll_bytes *send) {
  int is_root = mcoll__root_valid(c, root) && c->rank == root;
  int in_place = is_root && sendbuf == MPI_IN_PLACE;
  return mcoll__root_valid(c, root) &&
         !(is_root && ((v ? !mcoll__counts_valid(recvcounts, displs, c->size) : recvcount < 0) ||
                       recvtype == MPI_DATATYPE_NULL ||
                       mcoll__blocks_describe(dst, recvbuf, c->size, recvcount, recvcounts, displs,
                                              recvtype) != MPI_SUCCESS)) &&
         !(!in_place && (sendbuf == MPI_IN_PLACE || sendcount < 0 || sendtype == MPI_DATATYPE_NULL ||
                         mcoll__bytes_of(sendbuf, sendcount, sendtype, send) != MPI_SUCCESS ||
                         (is_root && send->bytes != mcoll__block_len(dst, root))));
}

MCOLL_SHARED_BODY int gather(struct mcoll_comm *c, enum mcoll_coll coll, int v, const void *sendbuf,
                             int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                             const int *recvcounts, const int *displs, MPI_Datatype recvtype,
                             int root) {
  struct mcoll_bytes send;
  struct mcoll_blocks dst;
  if (!gather_args(c, v, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvcounts, displs,
                   recvtype, root, &dst, &send))
    return mcoll__invalid(coll);
  int is_root = c->rank == root, in_place = is_root && sendbuf == MPI_IN_PLACE;
  if (!in_place) mcoll__bytes_pack(sendbuf, sendcount, sendtype, 1, &send);
  struct mcoll_gather_args a = {.mine = in_place ? NULL : send.ptr,
                                .my_len = in_place ? mcoll__block_len(&dst, root) : send.bytes,
                                .dst = is_root ? &dst : NULL, .root = root, .v = v};
  int err = mcoll__gather(c, coll, &a);
  if (!in_place) mcoll__bytes_release(&send, NULL, sendcount, sendtype, 0);
  return err;
}

/* An MPI_Igather(v) or persistent start, tried once the meeting failed (pmpi/wrap.h:
 * mcoll__direct_of): a member of a one-generation call waits only for its slot, the
 * root only for the members' blocks (mcoll__gather_try). A send buffer that needs packing, and what
 * the body gives to the host MPI, stay with the task (-2). */
MCOLL_SHARED_BODY int gather_direct(MPI_Comm comm, void *ctx, enum mcoll_coll coll, int v,
                                    const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                    void *recvbuf, int recvcount, const int *recvcounts,
                                    const int *displs, MPI_Datatype recvtype, int root, int *err) {
  struct mcoll_comm *c = mcoll__direct_context(comm, ctx);
  struct mcoll_bytes send;
  struct mcoll_blocks dst;
  if (!c || !gather_args(c, v, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvcounts,
                         displs, recvtype, root, &dst, &send))
    return -2;
  int is_root = c->rank == root, in_place = is_root && sendbuf == MPI_IN_PLACE;
  if (!in_place && !send.contiguous) return -2;
  struct mcoll_gather_args a = {.mine = in_place ? NULL : send.ptr,
                                .my_len = in_place ? mcoll__block_len(&dst, root) : send.bytes,
                                .dst = is_root ? &dst : NULL, .root = root, .v = v};
  int tried = mcoll__gather_try(c, coll, &a, err);
  if (tried == 1) c->tasks_entered++;
  return tried;
}

int mcoll__gather_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, int *err) {
  (void)rest; /* (it never begins a call that it does not finish) */
  const struct mcoll_mpi_gather_args *a = args;
  return gather_direct(a->comm, ctx, MCOLL_COLL_GATHER, 0, a->sendbuf, a->sendcount, a->sendtype,
                       a->recvbuf, a->recvcount, NULL, NULL, a->recvtype, a->root, err);
}

int mcoll__gatherv_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, int *err) {
  (void)rest;
  const struct mcoll_mpi_gatherv_args *a = args;
  return gather_direct(a->comm, ctx, MCOLL_COLL_GATHERV, 1, a->sendbuf, a->sendcount, a->sendtype,
                       a->recvbuf, 0, a->recvcounts, a->displs, a->recvtype, a->root, err);
}

int mcoll__wrap_gather(struct mcoll_comm *c, const void *sendbuf, int sendcount,
                       MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                       int root, MPI_Comm comm) {
  (void)comm;
  return gather(c, MCOLL_COLL_GATHER, 0, sendbuf, sendcount, sendtype, recvbuf, recvcount, NULL,
                NULL, recvtype, root);
}

int mcoll__wrap_gatherv(struct mcoll_comm *c, const void *sendbuf, int sendcount,
                        MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                        const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm) {
  (void)comm;
  return gather(c, MCOLL_COLL_GATHERV, 1, sendbuf, sendcount, sendtype, recvbuf, 0, recvcounts,
                displs, recvtype, root);
}
