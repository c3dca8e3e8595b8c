#include "core/datatype.h"
#include "core/tls.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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

int mcoll__type_info(MPI_Datatype type, struct mcoll_type_info *out) {
  if (type == MPI_DATATYPE_NULL) return MPI_ERR_TYPE;
  struct cached_type *slot = cache_slot(type);
  if (slot->valid && slot->type == type) {
    *out = slot->info;
    return MPI_SUCCESS;
  }
  int integers, addresses, types, combiner;
  int err = PMPI_Type_get_envelope(type, &integers, &addresses, &types, &combiner);
  if (err == MPI_SUCCESS) err = PMPI_Type_size(type, &out->size);
  if (err == MPI_SUCCESS) err = PMPI_Type_get_extent(type, &out->lb, &out->extent);
  if (err == MPI_SUCCESS) err = PMPI_Type_get_true_extent(type, &out->true_lb, &out->true_extent);
  if (err != MPI_SUCCESS) return err;
  out->named = combiner == MPI_COMBINER_NAMED;
  if (!out->named) {
    pthread_once(&probe_once, probe_setup);
    char unused;
    if (probe_comm == MPI_COMM_NULL || type_keyval == MPI_KEYVAL_INVALID ||
        PMPI_Send(&unused, 1, type, MPI_PROC_NULL, 0, probe_comm) != MPI_SUCCESS)
      return MPI_ERR_TYPE;
    /* Its delete callback runs when the type is freed. */
    if (PMPI_Type_set_attr(type, type_keyval, NULL) != MPI_SUCCESS) return MPI_SUCCESS;
  }
  *slot = (struct cached_type){type, *out, 1};
  return MPI_SUCCESS;
}

void mcoll__types_release(void) {
  if (probe_comm != MPI_COMM_NULL) PMPI_Comm_free(&probe_comm);
  if (type_keyval != MPI_KEYVAL_INVALID) PMPI_Type_free_keyval(&type_keyval);
}

/* ---- buffers as bytes ------------------------------------------------------- */

int mcoll__bytes_of(const void *buf, int count, MPI_Datatype type, struct mcoll_bytes *out) {
  struct mcoll_type_info t;
  int err = mcoll__type_info(type, &t);
  if (err != MPI_SUCCESS) return err;
  out->bytes = (size_t)count * (size_t)t.size;
  /* Contiguous: no holes in one element, and elements follow each other. */
  out->contiguous = t.true_extent == t.size && (count <= 1 || t.extent == t.size);
  out->ptr = (char *)buf + t.true_lb;
  out->packed = NULL;
  return MPI_SUCCESS;
}

int mcoll__bytes_acquire(const void *buf, int count, MPI_Datatype type, int fill,
                         struct mcoll_bytes *out) {
  int err = mcoll__bytes_of(buf, count, type, out);
  if (err != MPI_SUCCESS || out->contiguous) return err;
  int pack_size = 0, position = 0;
  PMPI_Pack_size(count, type, MPI_COMM_SELF, &pack_size);
  size_t room = (size_t)pack_size > out->bytes ? (size_t)pack_size : out->bytes;
  out->packed = malloc(room ? room : 1);
  if (!out->packed) {
    fprintf(stderr, "mcoll: out of memory packing %zu bytes\n", out->bytes);
    PMPI_Abort(MPI_COMM_WORLD, 1);
  }
  out->ptr = out->packed;
  if (fill) err = PMPI_Pack(buf, count, type, out->packed, (int)room, &position, MPI_COMM_SELF);
  return err;
}

void mcoll__bytes_release(struct mcoll_bytes *b, void *buf, int count, MPI_Datatype type,
                          int drain) {
  if (!b->packed) return;
  int position = 0;
  if (drain) PMPI_Unpack(b->packed, (int)b->bytes, &position, buf, count, type, MPI_COMM_SELF);
  free(b->packed);
  b->packed = NULL;
}
