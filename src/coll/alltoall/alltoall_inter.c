/* Blocks between nodes, two algorithms:
 *
 * direct: every rank exchanges directly with every rank of the other nodes over
 * the host MPI (nonblocking, started before the node's exchange so both proceed
 * together). Peers are visited in rank distance order, as in a pairwise exchange,
 * so that not every rank targets the same peer first.
 *
 * grid_rsend (the 2√N alltoall, docs/architecture.md): the ranks form a grid of
 * ceil(√N) columns; each rank posts all its receives, then tells its row it has
 * (empty messages), then, once its whole row has posted, tells its column. After
 * both phases every rank knows every receive of the call is posted, with 2(√N−1)
 * control messages per rank instead of a rendezvous handshake per block, and sends
 * its blocks with MPI_Rsend (legal: the matching receive is known to be posted), at
 * most GRID_IN_FLIGHT at a time. A short last row (N not a multiple of the column
 * count, e.g. N prime): its rank j hears from rank (r, j) of every full row and
 * tells ranks (r, c) of the full rows for every c ≡ j (mod its length); a full-row
 * rank (r, c) hears about the last row from (last, c mod length). Control messages
 * of all ranks together, with C columns, R rows, L ranks in the last row:
 * (R−1)·C·(C−1) + L·(L−1) + (R−1)·(C·(R−1) + L) (tests/py/test_alltoall_grid.py
 * checks this against the count the report prints). */
#include "coll/alltoall/alltoall.h"
#include "coll/facts.h"
#include "coll/tags.h"
#include "task/host.h"

#define ALLTOALL_INTER_INFO                                                                   \
  {"direct", "every rank exchanges with every rank of the other nodes, in rank distance "    \
             "order, started before the node's exchange", 0, NULL},                          \
  {"grid_rsend", "receives posted, arrival told along a sqrt(N) grid's row then column, "    \
                 "then blocks sent with MPI_Rsend, bounded in flight", 0, NULL}
const struct mcoll_coll_algs mcoll__alltoall_inter_algs = {
    (const struct mcoll_alg_info[]){ALLTOALL_INTER_INFO}, MCOLL_A2A_INTER_NALGS};
const struct mcoll_coll_algs mcoll__alltoallv_inter_algs = {
    (const struct mcoll_alg_info[]){ALLTOALL_INTER_INFO}, MCOLL_A2A_INTER_NALGS};
const struct mcoll_coll_algs mcoll__alltoallw_inter_algs = {
    (const struct mcoll_alg_info[]){ALLTOALL_INTER_INFO}, MCOLL_A2A_INTER_NALGS};

/* Sends of grid_rsend in flight per rank: enough to keep a link busy, few enough
 * that a rank does not flood one receiver's NIC queue with unexpected-free data. */
#define GRID_IN_FLIGHT 8

int mcoll__a2a_inter_choose(const struct mcoll_a2a *a) {
  struct mcoll_facts facts = mcoll__facts(a->c, a->uniform ? a->block : 0);
  /* direct stays preferred: grid_rsend pays only under NIC contention and lost every
   * run across the test hosts (docs/performance.md); it is there to be forced. */
  return mcoll__inter_select(a->coll, &facts, MCOLL_A2A_INTER_DIRECT);
}

static int post_receives(struct mcoll_a2a *a, MPI_Request *reqs, int *nreq) {
  struct mcoll_comm *c = a->c;
  const struct mcoll_topo *t = &c->topo;
  int n = c->size, me = c->rank, err = MPI_SUCCESS;
  for (int s = 1; s < n && err == MPI_SUCCESS; s++) {
    int from = (me - s + n) % n;
    if (t->node_of[from] == t->node || a->recv[from].bytes == 0) continue;
    err = PMPI_Irecv(a->recv[from].ptr, (int)a->recv[from].bytes, MPI_BYTE, from,
                     mcoll__host_tag(MCOLL_TAG_ALLTOALL), c->p2p, &reqs[(*nreq)++]);
  }
  return err;
}

static int direct_start(struct mcoll_a2a *a, MPI_Request *reqs, int *nreq) {
  struct mcoll_comm *c = a->c;
  const struct mcoll_topo *t = &c->topo;
  int n = c->size, me = c->rank;
  int err = post_receives(a, reqs, nreq);
  for (int s = 1; s < n && err == MPI_SUCCESS; s++) {
    int to = (me + s) % n;
    if (t->node_of[to] == t->node || a->send[to].bytes == 0) continue;
    err = PMPI_Isend(a->send[to].ptr, (int)a->send[to].bytes, MPI_BYTE, to,
                     mcoll__host_tag(MCOLL_TAG_ALLTOALL), c->p2p, &reqs[(*nreq)++]);
  }
  return err;
}

struct grid {
  int cols, rows, last_len; /* the last row (rows-1) holds last_len ranks, 1..cols */
};

static struct grid grid_of(int n) {
  struct grid g;
  g.cols = 1;
  while (g.cols * g.cols < n) g.cols++;
  g.rows = (n + g.cols - 1) / g.cols;
  g.last_len = n - (g.rows - 1) * g.cols;
  return g;
}

static int control_send(struct mcoll_comm *c, enum mcoll_coll coll, int to) {
  mcoll__count_control(coll);
  return mcoll__host_send(NULL, 0, MPI_BYTE, to, MCOLL_TAG_ALLTOALL_GRID, c->p2p);
}

static int control_recv(struct mcoll_comm *c, int from) {
  return mcoll__host_recv(NULL, 0, MPI_BYTE, from, MCOLL_TAG_ALLTOALL_GRID, c->p2p,
                          MPI_STATUS_IGNORE);
}

/* Returns once every rank of the communicator has posted its receives. Sends are
 * blocking but empty (eager everywhere), so the order send-then-receive cannot
 * deadlock. */
static int grid_arrival(struct mcoll_comm *c, enum mcoll_coll coll) {
  struct grid g = grid_of(c->size);
  int me = c->rank, row = me / g.cols, col = me % g.cols, last = g.rows - 1;
  int row_len = row == last ? g.last_len : g.cols, err = MPI_SUCCESS;
  /* Row: every rank of the row has posted. */
  for (int k = 1; k < row_len && err == MPI_SUCCESS; k++)
    err = control_send(c, coll, row * g.cols + (col + k) % row_len);
  for (int k = 1; k < row_len && err == MPI_SUCCESS; k++)
    err = control_recv(c, row * g.cols + (col - k + row_len) % row_len);
  /* Column: every row has posted. */
  for (int r = 0; r < last && err == MPI_SUCCESS; r++) {
    if (r == row) continue;
    if (row != last) {
      err = control_send(c, coll, r * g.cols + col);
    } else {
      for (int cc = col; cc < g.cols && err == MPI_SUCCESS; cc += g.last_len)
        err = control_send(c, coll, r * g.cols + cc);
    }
  }
  if (row != last && col < g.last_len && err == MPI_SUCCESS) err = control_send(c, coll, last * g.cols + col);
  for (int r = 0; r < last && err == MPI_SUCCESS; r++)
    if (r != row) err = control_recv(c, r * g.cols + col);
  if (row != last && err == MPI_SUCCESS) err = control_recv(c, last * g.cols + col % g.last_len);
  return err;
}

static int grid_rsend_start(struct mcoll_a2a *a, MPI_Request *reqs, int *nreq) {
  struct mcoll_comm *c = a->c;
  const struct mcoll_topo *t = &c->topo;
  int n = c->size, me = c->rank;
  int err = post_receives(a, reqs, nreq);
  if (err == MPI_SUCCESS) {
    double start = PMPI_Wtime();
    err = grid_arrival(c, a->coll);
    mcoll__count_control_wait(a->coll, PMPI_Wtime() - start);
  }
  /* Sends reuse GRID_IN_FLIGHT slots after the receives; a slot is waited before
   * it is reused, the last ones are waited with the receives. */
  MPI_Request *slots = reqs + *nreq;
  int sent = 0;
  for (int s = 1; s < n && err == MPI_SUCCESS; s++) {
    int to = (me + s) % n;
    if (t->node_of[to] == t->node || a->send[to].bytes == 0) continue;
    MPI_Request *slot = &slots[sent % GRID_IN_FLIGHT];
    if (sent >= GRID_IN_FLIGHT) err = mcoll__host_wait_one(slot, MPI_STATUS_IGNORE);
    if (err == MPI_SUCCESS)
      err = PMPI_Irsend(a->send[to].ptr, (int)a->send[to].bytes, MPI_BYTE, to,
                        mcoll__host_tag(MCOLL_TAG_ALLTOALL), c->p2p, slot);
    if (err == MPI_SUCCESS) sent++;
  }
  *nreq += sent < GRID_IN_FLIGHT ? sent : GRID_IN_FLIGHT;
  return err;
}

int mcoll__a2a_inter_start(struct mcoll_a2a *a, int alg, MPI_Request *reqs, int *nreq) {
  *nreq = 0;
  if (alg == MCOLL_A2A_INTER_GRID_RSEND) return grid_rsend_start(a, reqs, nreq);
  return direct_start(a, reqs, nreq);
}
