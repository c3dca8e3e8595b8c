/* Copies into shared memory that node peers read. */
#ifndef MCOLL_NODE_COPY_H
#define MCOLL_NODE_COPY_H

#include <stddef.h>

/* Copies into memory that a peer has read before: plain stores would first take
 * every line back from the reader's cache; streaming stores skip that (worth
 * it once a copy is large). From stream_min bytes (0: never), 16-byte aligned. */
void mcoll__stream_copy(void *dst, const void *src, size_t len, size_t stream_min);
/* mcoll__stream_copy from MCOLL_AREA_STREAM_MIN bytes. */
void mcoll__area_write(void *dst, const void *src, size_t len);

#endif
