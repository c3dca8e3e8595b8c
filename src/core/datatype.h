/* Views of (buffer, count, datatype) as bytes. */
#ifndef MCOLL_DATATYPE_H
#define MCOLL_DATATYPE_H

#include <mpi.h>
#include <stddef.h>

struct mcoll_bytes {
  char *ptr;      /* first byte of the data when contiguous */
  size_t bytes;   /* count × type size */
  int contiguous; /* the data is `bytes` consecutive bytes at ptr */
};

/* MPI_SUCCESS, or the error the type query returned (invalid type). */
int mcoll__bytes_of(const void *buf, int count, MPI_Datatype type, struct mcoll_bytes *out);

#endif
