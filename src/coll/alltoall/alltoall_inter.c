/* Blocks between nodes: every rank exchanges directly with every rank of the
 * other nodes over the host MPI (nonblocking, started before the node's exchange
 * so both proceed together). Peers are visited in rank distance order, as in a
 * pairwise exchange, so that not every rank targets the same peer first. */
#include "coll/alltoall/alltoall.h"
#include "coll/tags.h"

#define ALLTOALL_INTER_INFO                                                                \
  {"direct", "every rank exchanges with every rank of the other nodes, in rank distance " \
             "order, started before the node's exchange", 0, NULL}
const struct mcoll_coll_algs mcoll__alltoall_inter_algs = {
    (const struct mcoll_alg_info[]){ALLTOALL_INTER_INFO}, 1};
const struct mcoll_coll_algs mcoll__alltoallv_inter_algs = {
    (const struct mcoll_alg_info[]){ALLTOALL_INTER_INFO}, 1};
const struct mcoll_coll_algs mcoll__alltoallw_inter_algs = {
    (const struct mcoll_alg_info[]){ALLTOALL_INTER_INFO}, 1};

int mcoll__a2a_inter_start(struct mcoll_a2a *a, MPI_Request *reqs, int *nreq) {
  struct mcoll_comm *c = a->c;
  const struct mcoll_topo *t = &c->topo;
  int n = c->size, me = c->rank, err = MPI_SUCCESS;
  *nreq = 0;
  for (int s = 1; s < n && err == MPI_SUCCESS; s++) {
    int from = (me - s + n) % n;
    if (t->node_of[from] == t->node || a->recv[from].bytes == 0) continue;
    err = PMPI_Irecv(a->recv[from].ptr, (int)a->recv[from].bytes, MPI_BYTE, from,
                     MCOLL_TAG_ALLTOALL, c->p2p, &reqs[(*nreq)++]);
  }
  for (int s = 1; s < n && err == MPI_SUCCESS; s++) {
    int to = (me + s) % n;
    if (t->node_of[to] == t->node || a->send[to].bytes == 0) continue;
    err = PMPI_Isend(a->send[to].ptr, (int)a->send[to].bytes, MPI_BYTE, to, MCOLL_TAG_ALLTOALL,
                     c->p2p, &reqs[(*nreq)++]);
  }
  return err;
}
