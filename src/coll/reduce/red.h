/* What the reduction collectives (reduce, allreduce, reduce_scatter(_block), scan,
 * exscan) share: the data seen as elements of the datatype, folds in rank order,
 * the intra-node engines over the per-rank areas, and the algorithms among a
 * group of ranks over the host MPI's point-to-point (node leaders, or every rank).
 *
 * Every buffer holds elements at a stride of the type's extent. Pointers called
 * `data` point at the first byte of element 0's data (user buffer + true_lb);
 * MPI calls get the type's base (data - true_lb). */
#ifndef MCOLL_RED_H
#define MCOLL_RED_H

#include <mpi.h>
#include <stddef.h>

#include "coll/adapt.h"
#include "coll/registry.h"
#include "comm/context.h"
#include "core/datatype.h"
#include "core/xmalloc.h"
#include "hier/hier.h"

/* Every reduction collective's table lists these, in this order. */
enum mcoll_red_alg { MCOLL_RED_FLAT, MCOLL_RED_HSRA, MCOLL_RED_P2P, MCOLL_RED_CMA, MCOLL_RED_NALGS };

/* What the node engines (flat, hsra, cma) need; p2p runs anywhere. */
#define MCOLL_RED_NEEDS (MCOLL_NEED_ORDER | MCOLL_NEED_ELEM_FITS)

/* inout[i] = in[i] op inout[i] for i < n, on element data (red_ops.c). */
typedef void (*mcoll_red_kernel)(const void *in, void *inout, size_t n);

struct mcoll_red_type {
  MPI_Datatype type;
  MPI_Op op;
  int commutative;
  mcoll_red_kernel kernel; /* NULL: PMPI_Reduce_local */
  size_t extent;      /* bytes from one element to the next */
  MPI_Aint true_lb;   /* where an element's data starts, from its base */
  size_t true_extent; /* bytes of one element's data (holes included) */
  /* mcoll's kernel gives a op b and b op a the same bits (integers, float sums and
   * products; not float MIN/MAX, which keep one of two equal zeros or pass a NaN
   * on by position, nor the host MPI's folds): only then may two ranks fold the
   * same pair in opposite orders and still agree. */
  int symmetric;
};

enum mcoll_red_check { MCOLL_RED_OK, MCOLL_RED_INVALID, MCOLL_RED_UNSUPPORTED };

/* Describes (type, op). INVALID: the host MPI must raise the error; UNSUPPORTED:
 * a layout mcoll does not fold (derived types with holes); the same on every rank
 * since a reduction's datatype and op are the same on every rank. */
enum mcoll_red_check mcoll__red_type_init(struct mcoll_red_type *t, MPI_Datatype type, MPI_Op op);

/* mcoll's own fold of a predefined op on a predefined type of `size` bytes, or NULL. */
mcoll_red_kernel mcoll__red_kernel(MPI_Datatype type, MPI_Op op, size_t size);
/* Whether mcoll__red_kernel's fold of (type, op) is symmetric in its operands' bits. */
int mcoll__red_symmetric(MPI_Datatype type, MPI_Op op);

/* Bytes covering n elements' data. */
static inline size_t mcoll__red_span(const struct mcoll_red_type *t, size_t n) {
  return n ? (n - 1) * t->extent + t->true_extent : 0;
}

static inline char *mcoll__red_data(const struct mcoll_red_type *t, const void *buf) {
  return (char *)buf + t->true_lb;
}

/* Element i of a buffer whose element 0's data is at `data`. */
static inline char *mcoll__red_at(const struct mcoll_red_type *t, const char *data, size_t i) {
  return (char *)data + i * t->extent;
}

void mcoll__red_copy(const struct mcoll_red_type *t, char *dst, const char *src, size_t n);
/* inout = in op inout, element-wise (in holds the lower ranks). Every rank that
 * computes an element of a shared result must make the same sequence of folds with
 * the same operands in the same roles (a canonical expression tree), unless the
 * type is symmetric: floating-point folds are not associative. */
void mcoll__red_fold(const struct mcoll_red_type *t, const char *in, char *inout, size_t n);
/* Storage for n elements (data pointer); aborts the job when memory runs out. */
char *mcoll__red_alloc(const struct mcoll_red_type *t, size_t n);
void mcoll__red_free(const struct mcoll_red_type *t, char *data);

/* Whether the comm's nodes hold consecutive ranks (node order = rank order). */
int mcoll__red_nodes_contiguous(const struct mcoll_comm *c);

/* Algorithm for a call: P2P when rank order cannot be kept through the nodes
 * (`ordered`: the result depends on rank order, and nodes are not contiguous) or
 * when an area cannot hold `area_need` bytes; else the forced one; else CMA from
 * RED_CMA_MIN bytes on nodes of at most RED_CMA_RANKS ranks that can use it, FLAT
 * up to RED_FLAT_MAX bytes (RED_FLAT_MAX_LOWPAR on nodes of two ranks or with more
 * ranks than cores), HSRA above. P2P depends only on what every rank knows; the
 * others may differ between nodes (they only choose the intra-node engine). */
int mcoll__red_choose(enum mcoll_coll coll, const struct mcoll_comm *c, size_t bytes, int ordered,
                      size_t area_need);
/* The same for a blocking reduce or allreduce, whose choice adapts at run time
 * (coll/adapt.h) where neither a forced algorithm nor a threshold the user set
 * decided; mcoll__adapt_done(call) after the call. */
int mcoll__red_choose_adaptive(enum mcoll_coll coll, struct mcoll_comm *c, size_t bytes, int ordered,
                               size_t area_need, struct mcoll_adapt_call *call);
/* What a task (MPI_I*, a persistent start) of that call runs: the class's kept
 * algorithm, nothing counted or timed (coll/adapt.h: mcoll__adapt_kept). */
int mcoll__red_choose_task(enum mcoll_coll coll, const struct mcoll_comm *c, size_t bytes,
                           int ordered, size_t area_need);

/* Bytes per pipelined piece of the inter-node phase of a call of `bytes`: whole
 * elements. */
size_t mcoll__red_piece(const struct mcoll_comm *c, const struct mcoll_red_type *t, size_t bytes);

/* The input of a call: the receive buffer when sendbuf is MPI_IN_PLACE. */
static inline const char *mcoll__red_input(const struct mcoll_red_type *t, const void *sendbuf,
                                           void *recvbuf) {
  return mcoll__red_data(t, sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf);
}

/* The collectives, after the wrapper checked the arguments. */
int mcoll__allreduce(struct mcoll_comm *c, const struct mcoll_red_type *t, const void *sendbuf,
                     void *recvbuf, size_t count);
int mcoll__reduce(struct mcoll_comm *c, const struct mcoll_red_type *t, const void *sendbuf,
                  void *recvbuf, size_t count, int root);
/* MPI_Ireduce or a persistent reduce's start, on the caller's stack before any task:
 * on one node, where a task would run the flat engine's slot call and it would not
 * wait beyond a spin (mcoll__node_red_ready), the call runs here: 1, *err its
 * result. Else -1, nothing taken: a task runs the whole call; -2 likewise, and not
 * such a call (another engine, or not one node): the same on every rank. */
int mcoll__reduce_try(struct mcoll_comm *c, const struct mcoll_red_type *t, const void *sendbuf,
                      void *recvbuf, size_t count, int root, int *err);
/* The same for MPI_Iallreduce, MPI_Iscan and MPI_Iexscan (and their persistent
 * starts): the flat engine's call on one node, run here when it would not wait. */
int mcoll__allreduce_try(struct mcoll_comm *c, const struct mcoll_red_type *t, const void *sendbuf,
                         void *recvbuf, size_t count, int *err);
int mcoll__scan_try(struct mcoll_comm *c, const struct mcoll_red_type *t, const void *sendbuf,
                    void *recvbuf, size_t count, int exclusive, int *err);
/* recvcounts: per rank; NULL: recvcount for every rank (reduce_scatter_block). */
int mcoll__reduce_scatter(struct mcoll_comm *c, const struct mcoll_red_type *t,
                          const void *sendbuf, void *recvbuf, const int *recvcounts,
                          int recvcount);
int mcoll__scan(struct mcoll_comm *c, const struct mcoll_red_type *t, const void *sendbuf,
                void *recvbuf, size_t count, int exclusive);

/* ---- intra-node engines ------------------------------------------------------ */

/* A result a rank wants from the node: the fold of node-local ranks [0, upto) (0:
 * none), written at dst (element 0 of the vector, or of my block if own_block). */
struct mcoll_node_out {
  int upto;
  char *dst;
  int own_block;
};

/* One fold of the node's inputs over elements [0, count) of a vector. */
struct mcoll_node_red {
  struct mcoll_comm *c;
  const struct mcoll_red_type *t;
  const char *in;       /* my input (data pointer) */
  size_t count;
  const int *blocks;    /* NULL, or [local_size] elements of each node-local rank's block */
  struct mcoll_node_out out[2];
  int levels;           /* HSRA may fold level by level (outputs then need upto = local_size) */
  int prefix;           /* outputs are prefixes (upto < local_size): fold in rank order */
  int all_out;          /* every rank takes the whole result (allreduce on one node) */
  int dest;             /* 1 + the node-local rank that alone takes the result (reduce),
                         * or 0: HSRA gives it nothing to fold, flat reads its input in
                         * place */
};

/* Every rank posts its input; each rank folds what it needs from every area. */
void mcoll__node_red_flat(const struct mcoll_node_red *r);
/* HSRA: rank j folds segment j across the areas in rank order (leaving prefix k in
 * area k), level by level when the node has levels; then the results are copied. */
void mcoll__node_red_hsra(const struct mcoll_node_red *r);
/* HSRA for commutative ops on a node without levels when the whole result goes to
 * every rank (all_out) or to the dest: folds into the receive buffers. */
void mcoll__node_red_hsra_all(const struct mcoll_node_red *r);
/* Every rank folds what it needs from the peers' inputs, read with CMA. */
void mcoll__node_red_cma(const struct mcoll_node_red *r);
/* Runs the engine `alg`: MPI_SUCCESS, or MPI_ERR_TRUNCATE when the node's ranks
 * disagree on the call (an erroneous program, shm/call.h): then nothing was read or
 * written past a buffer, the outputs are undefined, and the node is in step again. */
int mcoll__node_red(const struct mcoll_node_red *r, int alg);
/* Whether mcoll__node_red(r, alg) would run to its end now without waiting beyond
 * a spin: the flat engine's slot calls only (its slot free; at a rank that folds,
 * every input it folds in, of this call). Takes nothing. spin 0: the inputs are
 * looked at once, not spun on (where every rank waits for every other, as in
 * allreduce, ranks spinning on each other's inputs would all spin to the end). */
int mcoll__node_red_ready(const struct mcoll_node_red *r, int alg, int spin);
/* The flat engine's part of it, with the call's digest (shm/call.h). */
int mcoll__node_red_flat_ready(const struct mcoll_node_red *r, uint32_t digest, int spin);
/* mcoll__node_red as a step of the MAHCAF template: a disagreement is kept for the
 * end of the call (hc->deferred), and the inter-node steps go on. */
int mcoll__node_red_step(struct mcoll_hier_call *hc, const struct mcoll_node_red *r, int alg);
/* A node of one rank: outputs are copies of the input. */
void mcoll__node_alone(const struct mcoll_node_red *r);

/* Node-local rank `leader` passes elements [0, count) of src through its area in
 * chunks; every other rank calls take(arg, chunk data, first element, n). */
typedef void (*mcoll_node_take)(void *arg, const char *chunk, size_t first, size_t n);
void mcoll__node_share(struct mcoll_comm *c, const struct mcoll_red_type *t, int leader,
                       const char *src, size_t count, mcoll_node_take take, void *arg);

/* Chunks of a vector (split into blocks, or one block) through the areas: chunk k
 * holds slice k of every block, one after the other. */
struct mcoll_node_layout {
  size_t count, nchunks;
  int nblocks;
  const int *blocks; /* NULL: one block of count elements */
};

void mcoll__node_layout(struct mcoll_node_layout *l, const struct mcoll_node_red *r,
                        size_t area_elems);

/* Elements of block b. */
static inline size_t mcoll__node_block(const struct mcoll_node_layout *l, int b) {
  return l->blocks ? (size_t)l->blocks[b] : l->count;
}

/* Slice k of a block of cnt elements: [*off, *off + *n) within the block. */
static inline void mcoll__node_slice(const struct mcoll_node_layout *l, size_t cnt, size_t k,
                                     size_t *off, size_t *n) {
  size_t q = (cnt + l->nchunks - 1) / l->nchunks, lo = k * q, hi = lo + q;
  if (lo > cnt) lo = cnt;
  if (hi > cnt) hi = cnt;
  *off = lo;
  *n = hi - lo;
}
/* Elements [lo, hi) of a chunk of elems that member `index` of `members` folds; the
 * member `skip` (-1: none) gets none. */
void mcoll__node_segment(size_t elems, int members, int index, int skip, size_t *lo,
                         size_t *hi);
/* Copies my input's slices of chunk k into `area`; returns the chunk's elements. */
size_t mcoll__node_chunk_in(const struct mcoll_node_layout *l, const struct mcoll_node_red *r,
                            size_t k, char *area);
/* Copies chunk k's results (elems elements) to output o (my block's slice, or all
 * slices) from `area`, or if area is NULL from each rank's final segment in its area. */
void mcoll__node_chunk_out(const struct mcoll_node_layout *l, const struct mcoll_node_red *r,
                           size_t k, const char *area, size_t elems,
                           const struct mcoll_node_out *o);

/* ---- among a group of ranks (host MPI point-to-point) ------------------------ */

/* The group algorithms, also the indices of the reductions' tables between nodes
 * (red_group.c): recursive doubling (allreduce) or a binomial tree (reduce) for
 * small vectors; Rabenseifner's reduce-scatter by recursive halving, then allgather
 * by recursive doubling (allreduce) or every piece to the root (reduce). */
enum mcoll_group_alg { MCOLL_GROUP_SMALL, MCOLL_GROUP_SPLIT, MCOLL_GROUP_NALGS };

struct mcoll_red_group {
  struct mcoll_comm *c;
  int n, me;
  const int *ranks; /* comm rank of member i, in the order of the reduction; NULL: i */
  int alg;          /* MCOLL_GROUP_*, from mcoll__group_choose */
};

/* The group algorithm for vectors of `count` elements among n members: Rabenseifner
 * from MCOLL_RED_RD_MAX bytes where the vector splits (an element per member of the
 * largest power-of-two part), else the small one. between_nodes: the group is the
 * nodes' leaders, so MCOLL_ALG_<COLL>_INTER may force it and the choice is counted
 * as what ran between nodes (else the group is every rank: coll's p2p algorithm). */
int mcoll__group_choose(enum mcoll_coll coll, const struct mcoll_comm *c,
                        const struct mcoll_red_type *t, size_t count, int n, int between_nodes);

/* In place on buf (data pointer), by g->alg (a vector shorter than the group goes
 * by the small algorithm: the last piece of a call may be). */
int mcoll__group_allreduce(const struct mcoll_red_group *g, const struct mcoll_red_type *t,
                           char *buf, size_t count);
/* buf: my input; the result at member root (buf is scratch elsewhere); by g->alg. */
int mcoll__group_reduce(const struct mcoll_red_group *g, const struct mcoll_red_type *t,
                        char *buf, size_t count, int root);
/* buf: my input; out: the fold of members [0, me) (undefined at member 0). */
int mcoll__group_exscan(const struct mcoll_red_group *g, const struct mcoll_red_type *t,
                        char *buf, size_t count);

#endif
