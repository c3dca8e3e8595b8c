#include "pmpi/red_wrap.h"

/* MPI_Scan and MPI_Exscan (exclusive): one body. */
MCOLL_SHARED_BODY int scan(struct mcoll_comm *c, enum mcoll_coll coll, int exclusive,
                           const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                           MPI_Op op, MPI_Comm comm) {
  struct mcoll_red_type t;
  if (!mcoll__red_args(coll, &t, type, op, count >= 0 && mcoll__red_bufs_ok(sendbuf, recvbuf)))
    return MCOLL_TO_HOST;
  return mcoll__red_return(comm, mcoll__scan(c, &t, sendbuf, recvbuf, (size_t)count, exclusive));
}

int mcoll__wrap_scan(struct mcoll_comm *c, const void *sendbuf, void *recvbuf, int count,
                     MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return scan(c, MCOLL_COLL_SCAN, 0, sendbuf, recvbuf, count, type, op, comm);
}

int mcoll__wrap_exscan(struct mcoll_comm *c, const void *sendbuf, void *recvbuf, int count,
                       MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return scan(c, MCOLL_COLL_EXSCAN, 1, sendbuf, recvbuf, count, type, op, comm);
}

/* As reduce's try (pmpi/reduce.c), for both. */
MCOLL_SHARED_BODY int scan_direct(const struct mcoll_mpi_scan_args *a, int exclusive, void *ctx,
                                  int *err) {
  struct mcoll_comm *c = mcoll__direct_context(a->comm, ctx);
  struct mcoll_red_type t;
  if (!c || a->count <= 0 || !mcoll__red_bufs_ok(a->sendbuf, a->recvbuf) ||
      mcoll__red_type_init(&t, a->type, a->op) != MCOLL_RED_OK ||
      mcoll__scan_try(c, &t, a->sendbuf, a->recvbuf, (size_t)a->count, exclusive, err) < 0)
    return -1;
  c->tasks_entered++;
  mcoll__red_return(a->comm, *err);
  return 1;
}

int mcoll__scan_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, int *err) {
  (void)rest; /* (it never begins a call that it does not finish) */
  return scan_direct(args, 0, ctx, err);
}

int mcoll__exscan_direct(const void *args, void *ctx, struct mcoll_task_rest *rest, int *err) {
  (void)rest;
  _Static_assert(sizeof(struct mcoll_mpi_scan_args) == sizeof(struct mcoll_mpi_exscan_args),
                 "scan and exscan take the same arguments");
  const struct mcoll_mpi_exscan_args *e = args;
  struct mcoll_mpi_scan_args a = {e->sendbuf, e->recvbuf, e->count, e->type, e->op, e->comm};
  return scan_direct(&a, 1, ctx, err);
}
