/* Views of (buffer, count, datatype) as bytes; non-contiguous data is packed so
 * that every rank runs the same algorithm whatever datatype it describes the same
 * bytes with (type signatures match, layouts need not). */
#ifndef MCOLL_DATATYPE_H
#define MCOLL_DATATYPE_H

#include <mpi.h>
#include <stddef.h>

struct mcoll_bytes {
  char *ptr;      /* the bytes: inside the user's buffer, or `packed` */
  size_t bytes;   /* count × type size */
  int contiguous; /* ptr points into the user's buffer */
  char *packed;   /* owned temporary when not contiguous */
};

/* What mcoll needs of a datatype, from the host MPI's queries. */
struct mcoll_type_info {
  size_t size; /* may exceed INT_MAX */
  MPI_Aint lb, extent, true_lb, true_extent;
  int named; /* predefined */
  int dense; /* one element's data is `size` bytes from true_lb in typemap order
              * (no holes, overlaps or reordering): it moves as plain bytes */
};

/* The facts of a datatype the host MPI would accept for communication (not null,
 * committed). MPI_SUCCESS, or an error code (the caller passes the call to the
 * host MPI, which raises its own error). Usable types are cached per handle, per
 * thread; freeing a derived type drops every cached entry (a type attribute's
 * delete callback), so a reused handle is never taken for the old type. */
int mcoll__type_info(MPI_Datatype type, struct mcoll_type_info *out);

/* Packs count elements at buf into `packed` (to_packed) or unpacks them from it;
 * any size, MPI_BOTTOM included. MPI_SUCCESS or the host MPI's error. */
int mcoll__pack_move(void *buf, int count, MPI_Datatype type, char *packed, int to_packed);

/* Whether the host MPI accepts `op` on `type` in a reduction (user ops: always).
 * Predefined ops are checked once per (type, op) and thread (the verdict is
 * dropped when a derived type is freed). */
int mcoll__op_type_valid(MPI_Datatype type, MPI_Op op);

/* Whether op is one of MPI's predefined reduction ops. */
int mcoll__op_predefined(MPI_Op op);

/* At MPI_Finalize: frees what mcoll__type_info made. */
void mcoll__types_release(void);

/* Describes the data without copying. MPI_SUCCESS, or the error of the type
 * query (an invalid type: the caller passes the call to the host MPI). */
int mcoll__bytes_of(const void *buf, int count, MPI_Datatype type, struct mcoll_bytes *out);

/* Like mcoll__bytes_of, then for non-contiguous data allocates a packed copy,
 * filled from buf when `fill` (send side). Aborts the job if memory runs out. */
int mcoll__bytes_acquire(const void *buf, int count, MPI_Datatype type, int fill,
                         struct mcoll_bytes *out);

/* The second half of mcoll__bytes_acquire, for `b` already described by
 * mcoll__bytes_of (an entry that validated its arguments with it): the packed copy
 * of non-contiguous data, without describing the type again. */
int mcoll__bytes_pack(const void *buf, int count, MPI_Datatype type, int fill,
                      struct mcoll_bytes *b);

/* Unpacks into buf when `drain` (receive side) and frees the packed copy. */
void mcoll__bytes_release(struct mcoll_bytes *b, void *buf, int count, MPI_Datatype type,
                          int drain);

#endif
