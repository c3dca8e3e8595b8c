/* What the wrappers share that is not inline (pmpi/wrap.h). */
#include "pmpi/wrap.h"

struct mcoll_comm *mcoll__enter_task(enum mcoll_coll coll, MPI_Comm comm) {
  int exists = 0;
  struct mcoll_comm *c = mcoll__comm_find(comm, &exists);
  if (c && c->nbc == MCOLL_NBC_UNKNOWN) {
    /* The first non-blocking call on comm, at the same point of its sequence of calls
     * on every rank: all agree, or the communicator's calls go to the host MPI. */
    int mine = mcoll__context_nbc_candidate(c), all = 0;
    int err = MCOLL_HOST(Allreduce, Iallreduce, &mine, &all, 1, MPI_INT, MPI_MIN, comm);
    mcoll__context_set_nbc(c, err == MPI_SUCCESS && all);
  }
  if (c && c->nbc == MCOLL_NBC_YES) {
    /* The ranks start a communicator's tasks in one order and each enters here
     * before the next may start (task/task.h): the same number everywhere. */
    mcoll__task_number(c->tasks_entered++);
    return c;
  }
  /* Without a context, or with one shared with other communicators (whose calls may
   * come in another order on other ranks): the host MPI takes this call, and comm
   * gets its own context at its next blocking collective. The same on every rank:
   * contexts are built at the same calls everywhere, and the rest was agreed. */
  if (!exists || (c && !c->private_ctx)) mcoll__context_wish_own(comm);
  mcoll__fallback(coll, MCOLL_WHY_NBC);
  return NULL;
}

int mcoll__array_entries(MPI_Comm comm) {
  int inter = 0, n = 0;
  if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return 0;
  if ((inter ? PMPI_Comm_remote_size(comm, &n) : PMPI_Comm_size(comm, &n)) != MPI_SUCCESS) return 0;
  return n;
}

int mcoll__is_root(MPI_Comm comm, int root) {
  int inter = 0, rank = -1;
  if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return 0;
  if (inter) return root == MPI_ROOT;
  return PMPI_Comm_rank(comm, &rank) == MPI_SUCCESS && rank == root;
}
