/* T-NBC's alltoall schedule (tnbc.h): point-to-point messages on a private duplicate
 * of the communicator, each source's block published the moment it is in, so that a
 * program reading block 0 first waits for block 0 only (the seed's sub-messages; the
 * engines of src/coll/alltoall complete all blocks at once for T-NBC's purpose). */
#include <stdlib.h>
#include <string.h>

#include "core/fiber.h"
#include "tnbc/tnbc.h"

enum { TAG_TNBC_A2A = 4242 };

/* The private duplicate, kept as an attribute of comm (freed with it). */
static int dup_keyval = MPI_KEYVAL_INVALID;

static int free_dup(MPI_Comm comm, int keyval, void *value, void *extra) {
  (void)comm, (void)keyval, (void)extra;
  MPI_Comm *dup = value;
  PMPI_Comm_free(dup);
  free(dup);
  return MPI_SUCCESS;
}

static MPI_Comm private_comm(MPI_Comm comm) {
  if (dup_keyval == MPI_KEYVAL_INVALID &&
      PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_dup, &dup_keyval, NULL) != MPI_SUCCESS)
    return MPI_COMM_NULL;
  MPI_Comm *dup = NULL;
  int found = 0;
  PMPI_Comm_get_attr(comm, dup_keyval, &dup, &found);
  if (found) return *dup;
  dup = malloc(sizeof *dup);
  if (!dup || PMPI_Comm_dup(comm, dup) != MPI_SUCCESS) {
    free(dup);
    return MPI_COMM_NULL;
  }
  PMPI_Comm_set_attr(comm, dup_keyval, dup);
  return *dup;
}

struct a2a_args {
  struct mcoll_tnbc_call *call;
  const char *send;
  char *recv;
  size_t block;
  MPI_Comm pcomm;
};

static int a2a_task(const void *args) {
  const struct a2a_args *a = args;
  int p, me, err = MPI_SUCCESS;
  PMPI_Comm_size(a->pcomm, &p);
  PMPI_Comm_rank(a->pcomm, &me);
  MPI_Request *reqs = malloc(sizeof *reqs * 2 * (size_t)p);
  int *done = malloc(sizeof *done * (size_t)p);
  /* (statuses, not MPI_STATUSES_IGNORE: GCC 12 takes the host's declaration for an
   * array it would overflow) */
  MPI_Status *statuses = malloc(sizeof *statuses * (size_t)p);
  if (!reqs || !done || !statuses) {
    free(reqs);
    free(done);
    free(statuses);
    return MPI_ERR_NO_MEM;
  }
  for (int i = 0; i < 2 * p; i++) reqs[i] = MPI_REQUEST_NULL;
  for (int src = 0; src < p && err == MPI_SUCCESS; src++)
    if (src != me)
      err = PMPI_Irecv(a->recv + (size_t)src * a->block, (int)a->block, MPI_BYTE, src,
                       TAG_TNBC_A2A, a->pcomm, &reqs[src]);
  for (int k = 1; k < p && err == MPI_SUCCESS; k++) {
    int dst = (me + k) % p;
    err = PMPI_Isend(a->send + (size_t)dst * a->block, (int)a->block, MPI_BYTE, dst, TAG_TNBC_A2A,
                     a->pcomm, &reqs[p + dst]);
  }
  memcpy(a->recv + (size_t)me * a->block, a->send + (size_t)me * a->block, a->block);
  mcoll__tnbc_publish(a->call, (size_t)me * a->block, a->block);
  for (int left = p - 1; left > 0 && err == MPI_SUCCESS;) {
    int n = 0;
    err = PMPI_Testsome(p, reqs, &n, done, statuses);
    if (err != MPI_SUCCESS || n == MPI_UNDEFINED) break;
    for (int i = 0; i < n; i++) mcoll__tnbc_publish(a->call, (size_t)done[i] * a->block, a->block);
    left -= n;
    if (!n) mcoll__fiber_yield();
  }
  for (int all = 0; !all && err == MPI_SUCCESS;) {
    err = PMPI_Testall(p, reqs + p, &all, statuses);
    if (!all) mcoll__fiber_yield();
  }
  free(reqs);
  free(done);
  free(statuses);
  return err;
}

int mcoll__tnbc_alltoall_post(struct mcoll_tnbc_call *call, MPI_Comm comm, const char *send,
                              size_t block) {
  MPI_Comm pcomm = private_comm(comm);
  if (pcomm == MPI_COMM_NULL) return MPI_ERR_INTERN;
  struct a2a_args a = {call, send, mcoll__tnbc_target(call), block, pcomm};
  return mcoll__tnbc_post_how(call, comm, a2a_task, &a, sizeof a, 1);
}
