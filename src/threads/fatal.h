/* Ending the job (fatal.c): a fatal error's message, the job's abort, and the
 * allocations whose failure no caller could report. */
#ifndef MCOLL_THREADS_FATAL_H
#define MCOLL_THREADS_FATAL_H

#include <stddef.h>

_Noreturn void thr_fatal(const char *fmt, ...);
/* Ends the job once, whichever ranks ask (fatal.c). */
_Noreturn void thr_abort_job(int code);
_Noreturn void thr_out_of_memory(size_t bytes, const char *where);
/* Allocations whose failure the runtime cannot report to the caller (a send already
 * complete, a message arriving): out of memory stops the job with MPI_ERR_NO_MEM and
 * the function that asked. */
void *thr_malloc_in(size_t bytes, const char *where);
void *thr_calloc_in(size_t n, size_t size, const char *where);
#define thr_malloc(bytes) thr_malloc_in((bytes), __func__)
#define thr_calloc(n, size) thr_calloc_in((n), (size), __func__)
void *thr_realloc_in(void *p, size_t bytes, const char *where);
void *thr_aligned_alloc_in(size_t align, size_t bytes, const char *where);
#define thr_realloc(p, bytes) thr_realloc_in((p), (bytes), __func__)
#define thr_aligned_alloc(align, bytes) thr_aligned_alloc_in((align), (bytes), __func__)

#endif
