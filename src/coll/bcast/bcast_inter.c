/* Inter-node bcast among the nodes' leaders for this call (the root on its node,
 * local rank 0 elsewhere; with first_arrival the node's first rank to arrive), over
 * the host MPI's point-to-point: binomial tree, scatter then ring allgather (van de
 * Geijn), or the CP bcast's flat send in order of arrival; bcast.c chooses. */
#include <stdlib.h>

#include "task/host.h"
#include "coll/bcast/bcast.h"
#include "coll/registry.h"
#include "coll/tags.h"

const struct mcoll_coll_algs mcoll__bcast_inter_algs = {
    (const struct mcoll_alg_info[]){
        {"binomial", "binomial tree among the nodes' sources (small pieces)", 0, NULL},
        {"scatter_allgather", "binomial scatter of 1/p blocks, then a ring allgather (van de "
                              "Geijn; large pieces)", 0, NULL},
        {"first_arrival", "CP bcast (docs/architecture.md): each node's first rank to arrive leads it and "
                          "announces itself to the root, which sends to the nodes in order of "
                          "arrival (flat)", 0, NULL},
        {"push", "the root sends to every rank of the other nodes, which receive on arrival "
                 "without a node step (no rank waits for a late leader; r times the bytes)",
         0, NULL},
    },
    MCOLL_BCAST_INTER_NALGS};

/* Comm rank leading virtual node v (v = 0 is the root's node). */
static int leader_of(const struct mcoll_comm *c, int v, int root) {
  const struct mcoll_topo *t = &c->topo;
  int node = (t->node_of[root] + v) % t->nnodes;
  return node == t->node_of[root] ? root : t->node_leader[node];
}

static int binomial(struct mcoll_comm *c, char *buf, size_t len, int root, int me, int p) {
  int err = MPI_SUCCESS, mask = 1;
  for (; mask < p; mask <<= 1)
    if (me & mask) {
      err = mcoll__host_recv(buf, (int)len, MPI_BYTE, leader_of(c, me - mask, root), MCOLL_TAG_BCAST,
                      c->p2p, MPI_STATUS_IGNORE);
      break;
    }
  for (mask >>= 1; mask > 0 && err == MPI_SUCCESS; mask >>= 1)
    if (me + mask < p)
      err = mcoll__host_send(buf, (int)len, MPI_BYTE, leader_of(c, me + mask, root), MCOLL_TAG_BCAST,
                      c->p2p);
  return err;
}

/* Bytes of blocks [first, last) when len is cut into p blocks of `block` bytes. */
static void block_span(size_t len, size_t block, int first, int last, size_t *off, int *count) {
  size_t lo = (size_t)first * block, hi = (size_t)last * block;
  if (lo > len) lo = len;
  if (hi > len) hi = len;
  *off = lo;
  *count = (int)(hi - lo);
}

static int scatter_allgather(struct mcoll_comm *c, char *buf, size_t len, int root, int me,
                             int p) {
  size_t block = (len + (size_t)p - 1) / (size_t)p, off;
  int count, err = MPI_SUCCESS, mask = 1;
  /* Binomial scatter: the subtree under v receives blocks [v, v + its extent). */
  for (; mask < p; mask <<= 1)
    if (me & mask) {
      block_span(len, block, me, me + mask < p ? me + mask : p, &off, &count);
      err = mcoll__host_recv(buf + off, count, MPI_BYTE, leader_of(c, me - mask, root), MCOLL_TAG_BCAST,
                      c->p2p, MPI_STATUS_IGNORE);
      break;
    }
  for (mask >>= 1; mask > 0 && err == MPI_SUCCESS; mask >>= 1)
    if (me + mask < p) {
      int last = me + 2 * mask < p ? me + 2 * mask : p;
      block_span(len, block, me + mask, last, &off, &count);
      err = mcoll__host_send(buf + off, count, MPI_BYTE, leader_of(c, me + mask, root), MCOLL_TAG_BCAST,
                      c->p2p);
    }
  /* Ring allgather: step s passes block me-s to the right. */
  int right = leader_of(c, (me + 1) % p, root), left = leader_of(c, (me - 1 + p) % p, root);
  for (int s = 0; s < p - 1 && err == MPI_SUCCESS; s++) {
    size_t send_off, recv_off;
    int send_count, recv_count;
    int send_block = (me - s + p) % p, recv_block = (me - s - 1 + 2 * p) % p;
    block_span(len, block, send_block, send_block + 1, &send_off, &send_count);
    block_span(len, block, recv_block, recv_block + 1, &recv_off, &recv_count);
    err = mcoll__host_sendrecv(buf + send_off, send_count, MPI_BYTE, right, MCOLL_TAG_BCAST,
                        buf + recv_off, recv_count, MPI_BYTE, left, MCOLL_TAG_BCAST, c->p2p,
                        MPI_STATUS_IGNORE);
  }
  return err;
}

int mcoll__bcast_between_nodes(struct mcoll_comm *c, char *buf, size_t lo, size_t hi, int root,
                               int alg) {
  const struct mcoll_topo *t = &c->topo;
  int p = t->nnodes;
  int me = (t->node - t->node_of[root] + p) % p;
  size_t len = hi - lo;
  if (alg == MCOLL_BCAST_INTER_SAG) return scatter_allgather(c, buf + lo, len, root, me, p);
  return binomial(c, buf + lo, len, root, me, p);
}

/* The root learns the other nodes' leaders of a call in the order they announce
 * themselves: a receive from every rank of the other nodes (MPICH's receives from
 * any source cost milliseconds where ranks outnumber cores); the first of a node to
 * complete names its leader, and the node's other receives are cancelled (its other
 * ranks do not announce this call). Piece 0 goes to each leader as soon as it is
 * known. */
static int learn_leaders(struct mcoll_bcast_call *call, int ready, size_t hi, MPI_Request *sends,
                         int *posted) {
  struct mcoll_comm *c = call->c;
  const struct mcoll_topo *t = &c->topo;
  int n = 0, err = MPI_SUCCESS, root_node = t->node_of[call->root];
  MPI_Request *anns = malloc(sizeof(MPI_Request) * (size_t)c->size);
  int *from = malloc(sizeof(int) * (size_t)c->size);
  if (!anns || !from) err = MPI_ERR_NO_MEM;
  for (int r = 0; r < c->size && err == MPI_SUCCESS; r++) {
    if (t->node_of[r] == root_node) continue;
    from[n] = r;
    err = PMPI_Irecv(NULL, 0, MPI_BYTE, r, mcoll__host_tag(ready), c->p2p, &anns[n]);
    if (err == MPI_SUCCESS) n++;
  }
  for (int k = 0; k < t->nnodes - 1 && err == MPI_SUCCESS; k++) {
    int i;
    err = mcoll__host_wait_any_napping(n, anns, &i);
    if (err != MPI_SUCCESS || i == MPI_UNDEFINED) break;
    int leader = call->leaders[k] = from[i];
    for (int j = 0; j < n; j++)
      if (anns[j] != MPI_REQUEST_NULL && t->node_of[from[j]] == t->node_of[leader]) {
        PMPI_Cancel(&anns[j]);
        PMPI_Request_free(&anns[j]);
      }
    err = PMPI_Isend(call->buf, (int)hi, MPI_BYTE, leader, mcoll__host_tag(MCOLL_TAG_BCAST), c->p2p,
                     &sends[*posted]);
    if (err == MPI_SUCCESS) (*posted)++;
  }
  free(anns);
  free(from);
  return err;
}

/* Waits for the first `posted` sends and frees the array; the first error wins. */
static int finish_sends(MPI_Request *sends, int posted, int err) {
  for (int k = 0; k < posted; k++) {
    int index, one = mcoll__host_wait_any_napping(1, &sends[k], &index);
    if (err == MPI_SUCCESS) err = one;
  }
  free(sends);
  return err;
}

/* CP bcast (docs/architecture.md). The root cannot know which rank of another node arrived first:
 * that rank announces itself with an empty message (piece 0 only) and the root
 * (learn_leaders) sends each piece to the nodes' leaders in the order they came. The announcements' tag alternates with the call's parity: a
 * node whose leader of this call has its data may enter the next call and announce
 * again before the root has heard from every node of this one (never two calls
 * ahead: the root sends the next call's data only after this one's). */
int mcoll__bcast_first_arrival(struct mcoll_bcast_call *call, size_t lo, size_t hi) {
  struct mcoll_comm *c = call->c;
  int others = c->topo.nnodes - 1, err = MPI_SUCCESS;
  int ready = call->parity ? MCOLL_TAG_BCAST_READY_ODD : MCOLL_TAG_BCAST_READY;
  if (c->rank != call->root) {
    if (lo == 0) {
      err = mcoll__host_send(NULL, 0, MPI_BYTE, call->root, ready, c->p2p);
      mcoll__count_control(MCOLL_COLL_BCAST);
    }
    if (err != MPI_SUCCESS) return err;
    /* The root answers after the node's announcement: wait for it without holding a
     * core that it may need (mcoll__host_wait_any_napping). */
    MPI_Request recv;
    int index;
    err = PMPI_Irecv(call->buf + lo, (int)(hi - lo), MPI_BYTE, call->root,
                     mcoll__host_tag(MCOLL_TAG_BCAST), c->p2p, &recv);
    return err != MPI_SUCCESS ? err : mcoll__host_wait_any_napping(1, &recv, &index);
  }
  MPI_Request *sends = malloc(sizeof(MPI_Request) * (size_t)others);
  if (!sends) return MPI_ERR_NO_MEM;
  int posted = 0;
  if (lo == 0) {
    call->leaders = malloc(sizeof(int) * (size_t)others);
    err = call->leaders ? learn_leaders(call, ready, hi, sends, &posted) : MPI_ERR_NO_MEM;
  } else {
    for (int k = 0; k < others && err == MPI_SUCCESS; k++) {
      err = PMPI_Isend(call->buf + lo, (int)(hi - lo), MPI_BYTE, call->leaders[k],
                       mcoll__host_tag(MCOLL_TAG_BCAST), c->p2p, &sends[posted]);
      if (err == MPI_SUCCESS) posted++;
    }
  }
  return finish_sends(sends, posted, err);
}

/* push (docs/algorithms.md): the CP bcast's aim, no rank waiting for a late leader,
 * without first_arrival's announcement round trip: the root sends eagerly to every
 * rank away from its node, so each finds its data waiting when it arrives and needs
 * no node step. Pieces go in order, so receivers match them in order. */
int mcoll__bcast_push_send(struct mcoll_bcast_call *call, size_t lo, size_t hi) {
  struct mcoll_comm *c = call->c;
  const struct mcoll_topo *t = &c->topo;
  int root_node = t->node_of[call->root], posted = 0, err = MPI_SUCCESS;
  MPI_Request *sends = malloc(sizeof(MPI_Request) * (size_t)c->size);
  if (!sends) return MPI_ERR_NO_MEM;
  for (int s = 1; s < c->size && err == MPI_SUCCESS; s++) {
    int to = (call->root + s) % c->size;
    if (t->node_of[to] == root_node) continue;
    err = PMPI_Isend(call->buf + lo, (int)(hi - lo), MPI_BYTE, to, mcoll__host_tag(MCOLL_TAG_BCAST),
                     c->p2p, &sends[posted]);
    if (err == MPI_SUCCESS) posted++;
  }
  return finish_sends(sends, posted, err);
}

int mcoll__bcast_push_receive(struct mcoll_comm *c, char *buf, size_t bytes, size_t piece, int root) {
  size_t step = piece ? piece : bytes;
  int err = MPI_SUCCESS;
  for (size_t lo = 0; lo < bytes && err == MPI_SUCCESS; lo += step) {
    size_t hi = bytes - lo < step ? bytes : lo + step;
    err = mcoll__host_recv(buf + lo, (int)(hi - lo), MPI_BYTE, root, MCOLL_TAG_BCAST, c->p2p,
                           MPI_STATUS_IGNORE);
  }
  return err;
}
