#include "core/datatype.h"
#include "core/tls.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/xmalloc.h"

/* ---- the datatype cache ---------------------------------------------------- */

enum { TYPE_CACHE = 16 };

struct cached_type {
  MPI_Datatype type;
  struct mcoll_type_info info;
  int valid;
};

/* Bumped when a derived type that may be cached is freed; each thread's cache is
 * emptied when it sees a new value. */
static atomic_uint type_epoch;
static MCOLL_TLS struct cached_type type_cache[TYPE_CACHE];
static MCOLL_TLS unsigned type_cache_epoch;
static int type_keyval = MPI_KEYVAL_INVALID;
static MPI_Comm probe_comm = MPI_COMM_NULL;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

static int type_freed(MPI_Datatype type, int keyval, void *value, void *extra) {
  (void)type, (void)keyval, (void)value, (void)extra;
  atomic_fetch_add_explicit(&type_epoch, 1, memory_order_release);
  return MPI_SUCCESS;
}

/* A communicator that returns errors, on which a one-element send to MPI_PROC_NULL
 * tells whether a type is committed (no MPI call says so), moving nothing. */
static void probe_setup(void) {
  PMPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, type_freed, &type_keyval, NULL);
  if (PMPI_Comm_dup(MPI_COMM_SELF, &probe_comm) == MPI_SUCCESS)
    PMPI_Comm_set_errhandler(probe_comm, MPI_ERRORS_RETURN);
}

static struct cached_type *cache_slot(MPI_Datatype type) {
  unsigned epoch = atomic_load_explicit(&type_epoch, memory_order_acquire);
  if (epoch != type_cache_epoch) {
    for (int k = 0; k < TYPE_CACHE; k++) type_cache[k].valid = 0;
    type_cache_epoch = epoch;
  }
  uintptr_t h = (uintptr_t)type;
  h ^= h >> 4 ^ h >> 9;
  return &type_cache[h % TYPE_CACHE];
}

/* ---- layout: whether one element's data is its bytes in typemap order -------- */

/* The data of a typemap read in order, as runs of bytes: `ok` while each run starts
 * where the previous one ended. */
struct layout_walk {
  MPI_Aint next;
  int started, ok;
  /* The facts of the child last seen: indexed types repeat one child many times. */
  MPI_Datatype child;
  MPI_Count size, extent, true_lb;
  int child_dense;
};

static void walk_run(struct layout_walk *w, MPI_Aint start, MPI_Count len) {
  if (len == 0 || !w->ok) return;
  if (w->started && start != w->next) w->ok = 0;
  w->started = 1;
  w->next = start + (MPI_Aint)len;
}

static int layout_dense(MPI_Datatype type, int depth);

/* `count` elements of `child` from displacement d, one extent apart. */
static void walk_elems(struct layout_walk *w, MPI_Datatype child, MPI_Aint d, MPI_Count count,
                       int depth) {
  if (!w->ok || count == 0) return;
  if (child != w->child) {
    MPI_Count lb, true_extent;
    if (PMPI_Type_size_x(child, &w->size) != MPI_SUCCESS ||
        PMPI_Type_get_extent_x(child, &lb, &w->extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent_x(child, &w->true_lb, &true_extent) != MPI_SUCCESS) {
      w->ok = 0;
      return;
    }
    w->child_dense = w->size == 0 || layout_dense(child, depth + 1);
    w->child = child;
  }
  if (w->size == 0) return;
  /* Elements follow each other only when an extent is exactly their data. */
  if (!w->child_dense || (count > 1 && w->extent != w->size)) {
    w->ok = 0;
    return;
  }
  walk_run(w, d + (MPI_Aint)w->true_lb, count * w->size);
}

static int is_named(MPI_Datatype type) {
  int integers, addresses, types, combiner;
  return PMPI_Type_get_envelope(type, &integers, &addresses, &types, &combiner) == MPI_SUCCESS &&
         combiner == MPI_COMBINER_NAMED;
}

/* 1 when packing one element gives exactly its `size` bytes from the true lower
 * bound, in memory order: no holes, no overlaps, no reordering. Constructors not
 * walked here (subarray, darray, ...) count as not dense: they are packed, which is
 * always right. */
static int layout_dense(MPI_Datatype type, int depth) {
  int ni, na, nt, combiner;
  if (depth > 32 || PMPI_Type_get_envelope(type, &ni, &na, &nt, &combiner) != MPI_SUCCESS)
    return 0;
  if (combiner == MPI_COMBINER_NAMED || combiner == MPI_COMBINER_F90_REAL ||
      combiner == MPI_COMBINER_F90_COMPLEX || combiner == MPI_COMBINER_F90_INTEGER) {
    MPI_Count size, true_lb, true_extent;
    return PMPI_Type_size_x(type, &size) == MPI_SUCCESS &&
           PMPI_Type_get_true_extent_x(type, &true_lb, &true_extent) == MPI_SUCCESS &&
           true_extent == size;
  }
  int *ints = malloc(sizeof(int) * (size_t)(ni + 1));
  MPI_Aint *addrs = malloc(sizeof(MPI_Aint) * (size_t)(na + 1));
  MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (size_t)(nt + 1));
  if (!ints || !addrs || !types ||
      PMPI_Type_get_contents(type, ni, na, nt, ints, addrs, types) != MPI_SUCCESS) {
    free(ints), free(addrs), free(types);
    return 0;
  }
  struct layout_walk w = {.ok = 1, .child = MPI_DATATYPE_NULL};
  MPI_Count lb = 0, ext = 0;
  if (nt > 0 && PMPI_Type_get_extent_x(types[0], &lb, &ext) != MPI_SUCCESS) w.ok = 0;
  MPI_Aint extent = (MPI_Aint)ext;
  switch (w.ok ? combiner : -1) {
  case MPI_COMBINER_DUP:
  case MPI_COMBINER_RESIZED: /* bounds move, data stays */
    w.ok = layout_dense(types[0], depth + 1);
    break;
  case MPI_COMBINER_CONTIGUOUS: walk_elems(&w, types[0], 0, ints[0], depth); break;
  case MPI_COMBINER_VECTOR:
  case MPI_COMBINER_HVECTOR: {
    /* count blocks of blocklength elements, stride apart: dense only as one run. */
    MPI_Aint stride = combiner == MPI_COMBINER_VECTOR ? (MPI_Aint)ints[2] * extent : addrs[0];
    if (ints[0] > 1 && ints[1] > 0 && stride != (MPI_Aint)ints[1] * extent) {
      walk_elems(&w, types[0], 0, 1, depth); /* a child of size 0 is still dense */
      walk_elems(&w, types[0], stride, 1, depth);
      if (w.started) w.ok = 0;
      break;
    }
    walk_elems(&w, types[0], 0, (MPI_Count)ints[0] * ints[1], depth);
    break;
  }
  case MPI_COMBINER_INDEXED:
    for (int i = 0; i < ints[0] && w.ok; i++)
      walk_elems(&w, types[0], (MPI_Aint)ints[1 + ints[0] + i] * extent, ints[1 + i], depth);
    break;
  case MPI_COMBINER_HINDEXED:
    for (int i = 0; i < ints[0] && w.ok; i++)
      walk_elems(&w, types[0], addrs[i], ints[1 + i], depth);
    break;
  case MPI_COMBINER_INDEXED_BLOCK:
    for (int i = 0; i < ints[0] && w.ok; i++)
      walk_elems(&w, types[0], (MPI_Aint)ints[2 + i] * extent, ints[1], depth);
    break;
  case MPI_COMBINER_HINDEXED_BLOCK:
    for (int i = 0; i < ints[0] && w.ok; i++)
      walk_elems(&w, types[0], addrs[i], ints[1], depth);
    break;
  case MPI_COMBINER_STRUCT:
    for (int i = 0; i < ints[0] && w.ok; i++)
      walk_elems(&w, types[i], addrs[i], ints[1 + i], depth);
    break;
  default: w.ok = 0;
  }
  /* get_contents hands out the derived constituents as new references. */
  for (int i = 0; i < nt; i++)
    if (!is_named(types[i])) PMPI_Type_free(&types[i]);
  free(ints), free(addrs), free(types);
  return w.ok;
}

/* ---- the facts of a datatype ------------------------------------------------- */

int mcoll__type_info(MPI_Datatype type, struct mcoll_type_info *out) {
  if (type == MPI_DATATYPE_NULL) return MPI_ERR_TYPE;
  struct cached_type *slot = cache_slot(type);
  if (slot->valid && slot->type == type) {
    *out = slot->info;
    return MPI_SUCCESS;
  }
  int integers, addresses, types, combiner;
  MPI_Count size, lb, extent, true_lb, true_extent;
  /* The _x queries: a type may hold more than INT_MAX bytes. */
  int err = PMPI_Type_get_envelope(type, &integers, &addresses, &types, &combiner);
  if (err == MPI_SUCCESS) err = PMPI_Type_size_x(type, &size);
  if (err == MPI_SUCCESS) err = PMPI_Type_get_extent_x(type, &lb, &extent);
  if (err == MPI_SUCCESS) err = PMPI_Type_get_true_extent_x(type, &true_lb, &true_extent);
  if (err != MPI_SUCCESS) return err;
  if (size < 0 || size == MPI_UNDEFINED) return MPI_ERR_TYPE;
  out->size = (size_t)size;
  out->lb = (MPI_Aint)lb;
  out->extent = (MPI_Aint)extent;
  out->true_lb = (MPI_Aint)true_lb;
  out->true_extent = (MPI_Aint)true_extent;
  out->named = combiner == MPI_COMBINER_NAMED;
  if (out->named) {
    out->dense = true_extent == size;
  } else {
    pthread_once(&probe_once, probe_setup);
    char unused;
    if (probe_comm == MPI_COMM_NULL || type_keyval == MPI_KEYVAL_INVALID ||
        PMPI_Send(&unused, 1, type, MPI_PROC_NULL, 0, probe_comm) != MPI_SUCCESS)
      return MPI_ERR_TYPE;
    /* The layout verdict lives in the type's attribute (1 + dense), so that a
     * thread's cache miss does not walk the type again; the attribute's delete
     * callback runs when the type is freed. */
    void *value = NULL;
    int found = 0;
    if (PMPI_Type_get_attr(type, type_keyval, &value, &found) == MPI_SUCCESS && found && value) {
      out->dense = (int)((intptr_t)value - 1);
    } else {
      out->dense = layout_dense(type, 0);
      if (PMPI_Type_set_attr(type, type_keyval, (void *)(intptr_t)(1 + out->dense)) != MPI_SUCCESS)
        return MPI_SUCCESS;
    }
  }
  *slot = (struct cached_type){type, *out, 1};
  return MPI_SUCCESS;
}

/* ---- op/type pairs ------------------------------------------------------------- */

int mcoll__op_predefined(MPI_Op op) {
  return op == MPI_MAX || op == MPI_MIN || op == MPI_SUM || op == MPI_PROD || op == MPI_LAND ||
         op == MPI_BAND || op == MPI_LOR || op == MPI_BOR || op == MPI_LXOR || op == MPI_BXOR ||
         op == MPI_MAXLOC || op == MPI_MINLOC || op == MPI_REPLACE || op == MPI_NO_OP;
}

enum { OP_CACHE = 8 };
struct cached_pair {
  MPI_Datatype type;
  MPI_Op op;
  int valid;
};
static MCOLL_TLS struct cached_pair pair_cache[OP_CACHE];
static MCOLL_TLS unsigned pair_cache_epoch, pair_next;
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;

int mcoll__op_type_valid(MPI_Datatype type, MPI_Op op) {
  if (!mcoll__op_predefined(op)) return 1; /* user ops take any type */
  unsigned epoch = atomic_load_explicit(&type_epoch, memory_order_acquire);
  if (epoch != pair_cache_epoch) {
    memset(pair_cache, 0, sizeof pair_cache);
    pair_cache_epoch = epoch;
  }
  for (int k = 0; k < OP_CACHE; k++)
    if (pair_cache[k].type == type && pair_cache[k].op == op && pair_cache[k].type != 0)
      return pair_cache[k].valid;
  /* Which pairs each host accepts differs (the standard's table, long double,
   * complex, derived types of one basic type, ...): ask it. An empty reduction on
   * the one-rank probe communicator checks the pair and returns the error. */
  pthread_once(&probe_once, probe_setup);
  if (probe_comm == MPI_COMM_NULL) return 0;
  char in[16] = {0}, out[16];
  pthread_mutex_lock(&probe_lock);
  int valid = PMPI_Reduce(in, out, 0, type, op, 0, probe_comm) == MPI_SUCCESS;
  pthread_mutex_unlock(&probe_lock);
  pair_cache[pair_next++ % OP_CACHE] = (struct cached_pair){type, op, valid};
  return valid;
}

void mcoll__types_release(void) {
  if (probe_comm != MPI_COMM_NULL) PMPI_Comm_free(&probe_comm);
  if (type_keyval != MPI_KEYVAL_INVALID) PMPI_Type_free_keyval(&type_keyval);
}

/* ---- packing ------------------------------------------------------------------- */

/* Bytes as one datatype for the host MPI, even beyond INT_MAX: whole GiB pieces,
 * then the rest. *type is MPI_BYTE (count bytes) or a new type (count 1). */
static int bytes_type(size_t bytes, MPI_Datatype *type, int *count) {
  const size_t gib = (size_t)1 << 30;
  if (bytes <= INT_MAX) {
    *type = MPI_BYTE;
    *count = (int)bytes;
    return MPI_SUCCESS;
  }
  MPI_Datatype piece;
  int lens[2] = {(int)(bytes / gib), (int)(bytes % gib)};
  MPI_Aint displs[2] = {0, (MPI_Aint)(bytes - bytes % gib)};
  int err = PMPI_Type_contiguous((int)gib, MPI_BYTE, &piece);
  if (err != MPI_SUCCESS) return err;
  MPI_Datatype types[2] = {piece, MPI_BYTE};
  err = PMPI_Type_create_struct(2, lens, displs, types, type);
  PMPI_Type_free(&piece);
  if (err == MPI_SUCCESS) err = PMPI_Type_commit(type);
  *count = 1;
  return err;
}

/* Moves (buf, count, type) to or from `bytes` packed bytes by a message to self on
 * the probe communicator: for what MPI_Pack cannot take (MPI_BOTTOM, which MPICH
 * refuses there, or an element beyond INT_MAX bytes). A tag per call keeps threads'
 * messages apart. */
static int pack_by_message(char *buf, int count, MPI_Datatype type, char *packed, size_t bytes,
                           int to_packed) {
  static atomic_uint next_tag;
  int tag = (int)(atomic_fetch_add_explicit(&next_tag, 1, memory_order_relaxed) % 32768u);
  pthread_once(&probe_once, probe_setup);
  if (probe_comm == MPI_COMM_NULL) return MPI_ERR_INTERN;
  MPI_Datatype raw;
  int raw_count, err = bytes_type(bytes, &raw, &raw_count);
  if (err != MPI_SUCCESS) return err;
  MPI_Request req;
  if (to_packed) {
    err = PMPI_Irecv(packed, raw_count, raw, 0, tag, probe_comm, &req);
    if (err == MPI_SUCCESS) err = PMPI_Send(buf, count, type, 0, tag, probe_comm);
  } else {
    err = PMPI_Irecv(buf, count, type, 0, tag, probe_comm, &req);
    if (err == MPI_SUCCESS) err = PMPI_Send(packed, raw_count, raw, 0, tag, probe_comm);
  }
  if (err == MPI_SUCCESS) err = PMPI_Wait(&req, MPI_STATUS_IGNORE);
  if (raw != MPI_BYTE) PMPI_Type_free(&raw);
  return err;
}

int mcoll__pack_move(void *buf, int count, MPI_Datatype type, char *packed, int to_packed) {
  struct mcoll_type_info t;
  int err = mcoll__type_info(type, &t);
  if (err != MPI_SUCCESS || count <= 0 || t.size == 0) return err;
  size_t bytes = (size_t)count * t.size;
  if (buf == MPI_BOTTOM || t.size > INT_MAX) return pack_by_message(buf, count, type, packed, bytes, to_packed);
  /* MPI_Pack takes an int size: pieces of whole elements below INT_MAX bytes. */
  int per_piece = (int)(INT_MAX / t.size);
  for (int done = 0; done < count && err == MPI_SUCCESS;) {
    int n = count - done < per_piece ? count - done : per_piece, position = 0;
    char *at = (char *)buf + (MPI_Aint)done * t.extent;
    char *out = packed + (size_t)done * t.size;
    int len = (int)((size_t)n * t.size);
    if (to_packed) err = PMPI_Pack(at, n, type, out, len, &position, MPI_COMM_SELF);
    else err = PMPI_Unpack(out, len, &position, at, n, type, MPI_COMM_SELF);
    done += n;
  }
  return err;
}

/* ---- buffers as bytes ------------------------------------------------------- */

int mcoll__bytes_of(const void *buf, int count, MPI_Datatype type, struct mcoll_bytes *out) {
  struct mcoll_type_info t;
  int err = mcoll__type_info(type, &t);
  if (err != MPI_SUCCESS) return err;
  out->bytes = (size_t)count * t.size;
  /* Contiguous: one element's data in order, and elements follow each other. */
  out->contiguous = out->bytes == 0 || (t.dense && (count <= 1 || (size_t)t.extent == t.size));
  out->ptr = (char *)buf + t.true_lb;
  out->packed = NULL;
  return MPI_SUCCESS;
}

int mcoll__bytes_acquire(const void *buf, int count, MPI_Datatype type, int fill,
                         struct mcoll_bytes *out) {
  int err = mcoll__bytes_of(buf, count, type, out);
  return err != MPI_SUCCESS ? err : mcoll__bytes_pack(buf, count, type, fill, out);
}

int mcoll__bytes_pack(const void *buf, int count, MPI_Datatype type, int fill,
                      struct mcoll_bytes *b) {
  if (b->contiguous) return MPI_SUCCESS;
  b->packed = mcoll__xmalloc(b->bytes);
  b->ptr = b->packed;
  return fill ? mcoll__pack_move((void *)buf, count, type, b->packed, 1) : MPI_SUCCESS;
}

void mcoll__bytes_release(struct mcoll_bytes *b, void *buf, int count, MPI_Datatype type,
                          int drain) {
  if (!b->packed) return;
  if (drain) mcoll__pack_move(buf, count, type, b->packed, 0);
  free(b->packed);
  b->packed = NULL;
}
