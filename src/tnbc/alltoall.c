/* T-NBC's alltoall(v) schedule (tnbc.h): point-to-point messages on a private
 * duplicate of the communicator, each source's block published the moment it is in,
 * so that a program reading block 0 first waits for block 0 only (the seed's
 * sub-messages; the engines of src/coll/alltoall complete all blocks at once for
 * T-NBC's purpose). */
#include <sched.h>
#include <stdint.h>
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

/* Byte counts and displacements of both sides (one allocation, freed by the task). */
struct a2a_layout {
  size_t *scount, *sdispl, *rcount, *rdispl;
};

struct a2a_args {
  struct mcoll_tnbc_call *call;
  const char *edges; /* (mcoll__tnbc_alltoall_post) */
  const char *send;
  char *recv;
  struct a2a_layout *lay;
  MPI_Comm pcomm;
};

/* Block src is in: its edges from the init exchange, then published. */
static void block_in(const struct a2a_args *a, int src) {
  enum { E = MCOLL_TNBC_EDGE };
  const struct a2a_layout *l = a->lay;
  char *at = a->recv + l->rdispl[src];
  size_t len = l->rcount[src], edge = len < E ? len : E;
  if (a->edges && len) {
    /* (the tail right-aligned in its half: mcoll__tnbc_pack_edges) */
    memcpy(at, a->edges + (size_t)src * 2 * E, edge);
    memcpy(at + len - edge, a->edges + (size_t)src * 2 * E + 2 * E - edge, edge);
  }
  mcoll__tnbc_publish(a->call, l->rdispl[src], l->rcount[src]);
}

static int a2a_task(const void *args) {
  const struct a2a_args *a = args;
  const struct a2a_layout *l = a->lay;
  int p, me, err = MPI_SUCCESS;
  PMPI_Comm_size(a->pcomm, &p);
  PMPI_Comm_rank(a->pcomm, &me);
  MPI_Request *reqs = malloc(sizeof *reqs * 2 * (size_t)p);
  int *done = malloc(sizeof *done * (size_t)p);
  /* (statuses, not MPI_STATUSES_IGNORE: GCC 12 takes the host's declaration for an
   * array it would overflow) */
  MPI_Status *statuses = malloc(sizeof *statuses * (size_t)p);
  if (!reqs || !done || !statuses) {
    err = MPI_ERR_NO_MEM;
    goto out;
  }
  for (int i = 0; i < 2 * p; i++) reqs[i] = MPI_REQUEST_NULL;
  /* receives in address order: the order programs read their blocks in */
  for (int src = 0; src < p && err == MPI_SUCCESS; src++)
    if (src != me && l->rcount[src])
      err = PMPI_Irecv(a->recv + l->rdispl[src], (int)l->rcount[src], MPI_BYTE, src, TAG_TNBC_A2A,
                       a->pcomm, &reqs[src]);
  for (int k = 1; k < p && err == MPI_SUCCESS; k++) {
    int dst = (me + k) % p;
    if (l->scount[dst])
      err = PMPI_Isend(a->send + l->sdispl[dst], (int)l->scount[dst], MPI_BYTE, dst, TAG_TNBC_A2A,
                       a->pcomm, &reqs[p + dst]);
  }
  /* Posted on the caller's thread (post_how's start_here); the rest, copies included,
   * on the progress thread: the call returns now. */
  mcoll__fiber_yield();
  memcpy(a->recv + l->rdispl[me], a->send + l->sdispl[me], l->rcount[me]);
  block_in(a, me);
  for (;;) {
    int n = 0;
    if (err != MPI_SUCCESS) break;
    err = PMPI_Testsome(p, reqs, &n, done, statuses);
    if (err != MPI_SUCCESS || n == MPI_UNDEFINED) break;
    for (int i = 0; i < n; i++) block_in(a, done[i]);
    if (!n) mcoll__fiber_yield();
  }
  for (int all = 0; !all && err == MPI_SUCCESS;) {
    err = PMPI_Testall(p, reqs + p, &all, statuses);
    if (!all) mcoll__fiber_yield();
  }
  if (err == MPI_SUCCESS) mcoll__tnbc_sent(a->call, 0, SIZE_MAX / 2);
out:
  free(reqs);
  free(done);
  free(statuses);
  free(a->lay);
  return err;
}

static int post(struct mcoll_tnbc_call *call, MPI_Comm comm, const char *send, int p,
                const size_t *scount, const size_t *sdispl, const size_t *rcount,
                const size_t *rdispl, const char *edges) {
  MPI_Comm pcomm = private_comm(comm);
  struct a2a_layout *lay = malloc(sizeof *lay + 4 * sizeof(size_t) * (size_t)p);
  if (pcomm == MPI_COMM_NULL || !lay) {
    free(lay);
    return MPI_ERR_INTERN;
  }
  lay->scount = (size_t *)(lay + 1);
  lay->sdispl = lay->scount + p;
  lay->rcount = lay->sdispl + p;
  lay->rdispl = lay->rcount + p;
  memcpy(lay->scount, scount, sizeof(size_t) * (size_t)p);
  memcpy(lay->sdispl, sdispl, sizeof(size_t) * (size_t)p);
  memcpy(lay->rcount, rcount, sizeof(size_t) * (size_t)p);
  memcpy(lay->rdispl, rdispl, sizeof(size_t) * (size_t)p);
  struct a2a_args a = {call, edges, send, mcoll__tnbc_target(call), lay, pcomm};
  return mcoll__tnbc_post_how(call, comm, a2a_task, &a, sizeof a, 1);
}

int mcoll__tnbc_alltoallv_post(struct mcoll_tnbc_call *call, MPI_Comm comm, const char *send,
                               int p, const size_t *scount, const size_t *sdispl,
                               const size_t *rcount, const size_t *rdispl, const char *edges) {
  return post(call, comm, send, p, scount, sdispl, rcount, rdispl, edges);
}

void mcoll__tnbc_pack_edges(char *edges, const char *buf, int p, const size_t *count,
                            const size_t *displ) {
  enum { E = MCOLL_TNBC_EDGE };
  for (int r = 0; r < p; r++) {
    size_t edge = count[r] < E ? count[r] : E;
    memcpy(edges + (size_t)r * 2 * E, buf + displ[r], edge);
    memcpy(edges + (size_t)r * 2 * E + 2 * E - edge, buf + displ[r] + count[r] - edge, edge);
  }
}

void mcoll__tnbc_put_block_edges(char *buf, const char *edges, int p, const size_t *count,
                                 const size_t *displ) {
  enum { E = MCOLL_TNBC_EDGE };
  for (int r = 0; r < p; r++) {
    size_t edge = count[r] < E ? count[r] : E;
    memcpy(buf + displ[r], edges + (size_t)r * 2 * E, edge);
    memcpy(buf + displ[r] + count[r] - edge, edges + (size_t)r * 2 * E + 2 * E - edge, edge);
  }
}

int mcoll__tnbc_alltoall_post(struct mcoll_tnbc_call *call, MPI_Comm comm, const char *send,
                              size_t block, const char *edges) {
  int p = 0;
  PMPI_Comm_size(comm, &p);
  size_t *v = malloc(2 * sizeof *v * (size_t)p);
  if (!v) return MPI_ERR_NO_MEM;
  for (int i = 0; i < p; i++) {
    v[i] = block;
    v[p + i] = (size_t)i * block;
  }
  int err = post(call, comm, send, p, v, v + p, v, v + p, edges);
  free(v);
  return err;
}
